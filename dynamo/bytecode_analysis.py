"""Facts about a code object's bytecode that the translator needs at a graph break.

In: a code object. Out: a `CodeInfo` holding its instructions as a flat list (jump targets and
exception handlers as indices into that list), and answers to three questions about an
instruction index: which local variables are live there (read later before being written), does
it lie inside an exception-handled block (``try``/``with``), and does it lie inside a loop. Called
by the translator (`symbolic_convert`) and by `resume`, which both index instructions the same
way: the `bytecode.Instr` items of ``Bytecode.from_code(code)``, in order.

Liveness is the textbook backward data-flow fixed point over the control-flow graph, with an
edge from every instruction inside a ``try`` region to its handler (an exception may leave from
anywhere inside). Cell and free variables are not locals here: they travel as cells.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

__all__ = ["CodeInfo", "code_info"]

_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST"})
_WRITES = frozenset({"STORE_FAST", "DELETE_FAST"})
_TERMINAL = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE"})
_SEES_ALL_LOCALS = frozenset({"locals", "vars", "eval", "exec", "dir"})


@dataclass
class CodeInfo:
    """A code object's instructions, indexed as the translator indexes them."""

    instructions: list[Instr] = field(default_factory=list)
    #: Label -> index of the instruction that follows it.
    labels: dict[Label, int] = field(default_factory=dict)
    #: Per instruction: the TryBegin of the innermost exception-handled region around it, or None.
    handlers: list[TryBegin | None] = field(default_factory=list)
    _live: list[frozenset[str]] | None = None

    @classmethod
    def from_code(cls, code: types.CodeType) -> "CodeInfo":
        info = cls()  # (holds no reference to `code`: the cache below is weak on it)
        active: TryBegin | None = None
        for item in Bytecode.from_code(code):
            if isinstance(item, Label):
                info.labels[item] = len(info.instructions)
            elif isinstance(item, TryBegin):
                active = item
            elif isinstance(item, TryEnd):
                active = None
            elif isinstance(item, Instr):
                info.instructions.append(item)
                info.handlers.append(active)
        return info

    # Questions --------------------------------------------------------------------------------

    def target(self, index: int) -> int:
        """Index of the jump target of the jump at `index`."""
        return self.labels[self.instructions[index].arg]

    def successors(self, index: int) -> list[int]:
        inst = self.instructions[index]
        found: list[int] = []
        if inst.name not in _TERMINAL and not inst.is_uncond_jump():
            if index + 1 < len(self.instructions):
                found.append(index + 1)
        if inst.has_jump():
            found.append(self.target(index))
        handler = self.handlers[index]
        if handler is not None:
            found.append(self.labels[handler.target])
        return found

    def in_exception_block(self, index: int) -> bool:
        """Inside a ``try``, ``with`` or ``except`` body: an exception here has a handler."""
        return self.handlers[index] is not None

    def in_loop(self, index: int) -> bool:
        """Whether some backward jump comes back over `index` (it may run more than once)."""
        return self.outermost_loop(index) is not None

    def outermost_loop(self, index: int) -> tuple[int, int] | None:
        """(header, backward jump) of the outermost loop around `index`, or None."""
        found = None
        for i, inst in enumerate(self.instructions):
            if inst.has_jump():
                header = self.target(i)
                # (a ``continue`` is a backward jump too: the loop ends at the last one)
                if header <= index <= i and (found is None or header < found[0]
                                             or (header == found[0] and i > found[1])):
                    found = (header, i)
        return found

    def loop_entry(self, index: int) -> int | None:
        """Where the outermost loop around `index` is entered: its GET_ITER for a ``for`` loop
        (the iterable is still a plain value there), its header for a ``while`` loop."""
        loop = self.outermost_loop(index)
        if loop is None:
            return None
        header = loop[0]
        if (self.instructions[header].name == "FOR_ITER" and header > 0
                and self.instructions[header - 1].name == "GET_ITER"):
            return header - 1
        return header

    @property
    def sees_all_locals(self) -> bool:
        """Whether the code can read its locals by name (``locals()``, ``vars()``, ``eval``,
        ``exec``, ``dir()``): splitting it would show it other locals."""
        return any(inst.name == "LOAD_GLOBAL" and inst.arg[1] in _SEES_ALL_LOCALS
                   for inst in self.instructions)

    def live_locals(self, index: int) -> frozenset[str]:
        """Locals that may be read, before being written, by execution starting at `index`."""
        if self._live is None:
            self._live = self._liveness()
        return self._live[index]

    def _liveness(self) -> list[frozenset[str]]:
        n = len(self.instructions)
        succs = [self.successors(i) for i in range(n)]
        uses: list[frozenset[str]] = []
        defs: list[frozenset[str]] = []
        for inst in self.instructions:
            name = inst.arg if isinstance(inst.arg, str) else None
            uses.append(frozenset([name]) if name and inst.name in _READS else frozenset())
            defs.append(frozenset([name]) if name and inst.name in _WRITES else frozenset())
        live_in: list[frozenset[str]] = [frozenset()] * n
        changed = True
        while changed:
            changed = False
            for i in range(n - 1, -1, -1):
                out: frozenset[str] = frozenset().union(*(live_in[s] for s in succs[i]))
                new = uses[i] | (out - defs[i])
                if new != live_in[i]:
                    live_in[i] = new
                    changed = True
        return live_in


_cache: "weakref.WeakKeyDictionary[types.CodeType, CodeInfo]" = weakref.WeakKeyDictionary()


def code_info(code: types.CodeType) -> CodeInfo:
    """The (cached) `CodeInfo` of `code`. Treat it as read-only: it is shared."""
    info = _cache.get(code)
    if info is None:
        info = _cache[code] = CodeInfo.from_code(code)
    return info
