"""Facts about a code object's bytecode that the translator needs at a graph break.

In: a code object. Out: a `CodeInfo` holding its instructions as a flat list (jump targets and
exception handlers as indices into that list), and answers to three questions about an
instruction index: which local variables are live there (read later before being written), does
it lie inside an exception-handled block (``try``/``with``), and does it lie inside a loop. Called
by the translator (`symbolic_convert`) and by `resume`, which both index instructions the same
way: the `bytecode.Instr` items of ``compat.decode(code)``, in order.

Liveness is the textbook backward data-flow fixed point over the control-flow graph, with an
edge from every instruction inside a ``try`` region to its handler (an exception may leave from
anywhere inside). Cell and free variables are not locals here: they travel as cells.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field

from bytecode import Instr, Label, TryBegin, TryEnd

from fx.weak import IdentitySet

from . import compat

__all__ = ["CodeInfo", "Region", "code_info"]

# (LOAD_FAST_AND_CLEAR, 3.12+: an inlined comprehension saves the variable it shadows, unbinds
# it, and stores the saved value back after the loop)
_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"})
_WRITES = frozenset({"STORE_FAST", "DELETE_FAST", "LOAD_FAST_AND_CLEAR"})
_TERMINAL = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
#: What the rest of a frame may hold for `returns_at_once`: loads of locals and constants, a
#: tuple built of them, the return (nothing that calls, looks up or computes).
_PLAIN_RETURN = frozenset({"NOP", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST",
                           "LOAD_CONST", "BUILD_TUPLE", "RETURN_VALUE", "RETURN_CONST"})
_SEES_ALL_LOCALS = frozenset({"locals", "vars", "eval", "exec", "dir", "breakpoint"})
#: Attributes whose use means the code looks at its own frame object (``sys._getframe()``,
#: ``inspect.currentframe()``, ``traceback.extract_stack()``, ``frame.f_locals``): after a
#: split, the frame it finds would be the generated code's, with other locals. Starting a
#: debugger, tracer or profiler (``pdb.set_trace()``, ``sys.settrace``) is in the same list:
#: the rest of the frame must be the frame the debugger stopped in, with its line events.
_SEES_ITS_FRAME = frozenset({"_getframe", "currentframe", "extract_stack", "print_stack",
                             "format_stack", "getouterframes", "f_locals", "f_back", "f_lineno",
                             "set_trace", "settrace", "setprofile", "post_mortem"})


@dataclass(frozen=True)
class Region:
    """A ``try`` or ``with`` statement that runs in plain Python inside transformed code.

    `members` are the instruction indices of the statement (body, handlers, cleanup), in
    order; control leaves it normally only to the `exits`: index -> (values on the stack
    there, locals to pass to the resume function that continues there)."""

    start: int
    members: tuple[int, ...]
    exits: dict[int, tuple[int, tuple[str, ...]]]


@dataclass
class CodeInfo:
    """A code object's instructions, indexed as the translator indexes them."""

    instructions: list[Instr] = field(default_factory=list)
    #: Label -> index of the instruction that follows it.
    labels: dict[Label, int] = field(default_factory=dict)
    #: Per instruction: the TryBegin of the innermost exception-handled region around it, or None.
    handlers: list[TryBegin | None] = field(default_factory=list)
    #: The same, without the handlers the compiler made (see `_user_handlers`): whether the
    #: user's code has a ``try`` or ``with`` around the instruction.
    user_handlers: list[TryBegin | None] = field(default_factory=list)
    #: Index of a handler's first instruction -> stack depth when it starts (from the table).
    handler_depth: dict[int, int] = field(default_factory=dict)
    _live: list[frozenset[str]] | None = None
    _outermost: list | None = None
    #: (3.10) Per instruction: inside an exception handler (before its POP_EXCEPT), which 3.10
    #: does not cover by a handler of its own (3.11+'s cleanup handlers do).
    in_handler: list[bool] | None = None
    #: (3.10) POP_BLOCK index -> the TryBegin of the block it pops; per instruction, the number
    #: of blocks on the frame's block stack
    block_pops: dict[int, TryBegin] = field(default_factory=dict)
    block_nesting: list[int] | None = None
    #: `compat.restoring_stores`: STORE_FASTs that may store NULL (3.12+ comprehensions)
    restores: frozenset[int] = frozenset()
    #: The code's cell variables: never live *locals* (`live_locals`), even where 3.12+ reads or
    #: writes their slot with LOAD_FAST/STORE_FAST (an inlined comprehension's variable that
    #: shadows a cell; 3.13's LOAD_FAST of a cell for a closure): continuations get the cells
    #: themselves (`resume.passed_cells`), and a fast store into a cell's slot would replace
    #: the cell (the interpreter then crashed at the next STORE_DEREF).
    cellvars: frozenset[str] = frozenset()

    @classmethod
    def from_code(cls, code: types.CodeType) -> "CodeInfo":
        info = cls()  # (holds no reference to `code`: the cache below is weak on it)
        active: TryBegin | None = None
        for item in compat.decode(code):
            if isinstance(item, Label):
                info.labels[item] = len(info.instructions)
            elif isinstance(item, TryBegin):
                active = item
            elif isinstance(item, TryEnd):
                active = None
            elif isinstance(item, Instr):
                info.instructions.append(item)
                info.handlers.append(active)
        # Handler depths come from CPython's exception table (`bytecode` leaves them unset).
        if compat.HAS_EXCEPTION_TABLE:
            index_of = compat.offsets_to_indices(code)
            for entry in dis._parse_exception_table(code):
                if entry.target in index_of:
                    info.handler_depth[index_of[entry.target]] = entry.depth + entry.lasti + 1
        else:
            (info.handlers, info.handler_depth, info.in_handler, info.block_pops,
             info.block_nesting) = compat.block_stack_handlers(info.instructions, info.labels)
        info._user_handlers()
        info.restores = compat.restoring_stores(info.instructions)
        info.cellvars = frozenset(code.co_cellvars)
        return info

    def bound_after(self, index: int, names: frozenset[str]) -> frozenset[str]:
        """The locals certainly bound after instruction `index` runs, given `names` before
        (a STORE_FAST binds, DELETE_FAST and 3.12's LOAD_FAST_AND_CLEAR unbind; the store that
        puts back what LOAD_FAST_AND_CLEAR saved may store NULL: not certainly bound)."""
        inst = self.instructions[index]
        if inst.name == "STORE_FAST":
            return names - {inst.arg} if index in self.restores else names | {inst.arg}
        if inst.name in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR"):
            return names - {inst.arg}
        return names

    def _user_handlers(self) -> None:
        """Handlers the compiler made (3.12+ inlined comprehensions, generator bodies: they
        restore state and re-raise, see `compat.is_benign_handler`) do not make a ``try``:
        `user_handlers` gives an instruction they cover the handler around the handler's own
        re-raise instead (a user's ``try`` around the comprehension, or None). `handlers` keeps
        the table as it is, for code that copies instructions with their handlers."""
        benign = {h.target for h in self.handlers if h is not None
                  and compat.is_benign_handler(self.instructions, self.labels[h.target])}
        if not benign:
            self.user_handlers = self.handlers
            return

        def user(h: TryBegin | None) -> TryBegin | None:
            seen = set()
            while h is not None and h.target in benign and h.target not in seen:
                seen.add(h.target)
                h = self.handlers[self.labels[h.target]]
            return None if h is not None and h.target in benign else h

        self.user_handlers = [user(h) for h in self.handlers]

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

    def returns_at_once(self, index: int) -> bool:
        """Whether the code from instruction `index` on only returns locals or constants
        (``return x``, ``return a, b``): straight-line, outside any ``try``, with nothing that
        calls, looks anything up or computes, so running it in the frame instead of a resume
        function does the same and captures nothing less."""
        for i in range(index, len(self.instructions)):
            inst = self.instructions[i]
            if inst.name not in _PLAIN_RETURN or self.handlers[i] is not None:
                return False
            if inst.name in _TERMINAL:
                return True
        return False

    def in_exception_block(self, index: int) -> bool:
        """Inside a ``try``, ``with`` or ``except`` body: an exception here has a handler."""
        return self.user_handlers[index] is not None or self.protected_by_block(index)

    def protected_by_block(self, index: int) -> bool:
        """(3.10) Inside an ``except`` body or a with statement's exit handler."""
        return self.in_handler is not None and self.in_handler[index]

    def in_loop(self, index: int) -> bool:
        """Whether some backward jump comes back over `index` (it may run more than once)."""
        return self.outermost_loop(index) is not None

    def outermost_loop(self, index: int) -> tuple[int, int] | None:
        """(header, backward jump) of the outermost loop around `index`, or None."""
        if self._outermost is None:  # (once per code: every instruction's, by every jump)
            table: list[tuple[int, int] | None] = [None] * len(self.instructions)
            for i, inst in enumerate(self.instructions):
                if inst.has_jump():
                    header = self.target(i)
                    # (a ``continue`` is a backward jump too: the loop ends at the last one)
                    for k in range(header, i + 1):
                        found = table[k]
                        if found is None or header < found[0] or (
                                header == found[0] and i > found[1]):
                            table[k] = (header, i)
            self._outermost = table
        return self._outermost[index] if 0 <= index < len(self._outermost) else None

    def loop_entry(self, index: int) -> int | None:
        """Where the outermost loop around `index` is entered: its GET_ITER for a ``for`` loop
        (the iterable is still a plain value there), its header for a ``while`` loop."""
        loop = self.outermost_loop(index)
        if loop is None:
            return None
        header = loop[0]
        before = header - 1
        while before >= 0 and self.instructions[before].name == "NOP":
            before -= 1  # (generated code may carry NOPs: config.debug_insert_nops)
        if (self.instructions[header].name == "FOR_ITER" and before >= 0
                and self.instructions[before].name == "GET_ITER"):
            return before
        return header

    @property
    def sees_all_locals(self) -> bool:
        """Whether the code can read its locals by name (``locals()``, ``vars()``, ``eval``,
        ``exec``, ``dir()``), look at its own frame (``sys._getframe()``, ...) or start a
        debugger or tracer in it: splitting it would show other locals, or a generated frame."""
        return any((inst.name == "LOAD_GLOBAL" and compat.global_name(inst) in _SEES_ALL_LOCALS)
                   or (inst.name in ("LOAD_ATTR", "LOAD_METHOD")
                       and compat.attr_name(inst) in _SEES_ITS_FRAME)
                   for inst in self.instructions)

    @property
    def shadows_a_cell(self) -> bool:
        """(3.12+) Whether an inlined comprehension's variable uses the slot of one of the
        code's cell variables (``x`` is a cell, ``[x for x in ...]``): LOAD_FAST_AND_CLEAR
        then saves the *cell object* on the stack, and the store after the loop puts it back.
        The translator models the cell by its value, which is only right while nothing in
        between is split off: such code is not split at graph breaks (a break makes the
        whole frame run as written)."""
        return bool(self.cellvars) and any(
            inst.name == "LOAD_FAST_AND_CLEAR" and inst.arg in self.cellvars
            for inst in self.instructions)

    def region(self, start: int, depth: int, bound: frozenset[str]) -> Region | None:
        """The ``try``/``with`` statement that starts at `start` (the first instruction inside
        a ``try`` body, or a ``BEFORE_WITH``) with `depth` values on the stack and the locals
        `bound` bound, or None when it cannot run as a region.

        The statement is every instruction reached from `start`, by normal flow or an
        exception, until the flow comes back outside every handled block with no more than
        `depth` values on the stack (the exception state popped): those instructions are its
        exits. The locals bound at an exit are passed to the resume function there; one that
        is read later must be bound on every way there (or on none). An exit where one may or may not be
        bound (``with`` whose ``__exit__`` swallowed an exception raised before ``w = ...``)
        is not an exit: the rest of the function from there is copied into the region too,
        and runs in plain Python on that way only.
        """
        # (3.10: the statement starts with the SETUP_FINALLY / SETUP_WITH that opens its block)
        if not (self.in_exception_block(start) or self.instructions[start].name in
                ("BEFORE_WITH", "SETUP_FINALLY", "SETUP_WITH")):
            return None
        depths: dict[int, int] = {start: depth}
        exits: dict[int, int] = {}
        if not self._grow(depths, exits, [start], depth):
            return None
        while True:
            members = tuple(sorted(depths))
            must, may = self._assigned(members, start, bound)
            unsafe = [j for j in exits if (self.live_locals(j) & may[j]) - must[j]]
            if not unsafe:
                break
            for j in unsafe:  # (everything from there on becomes part of the region)
                depths[j] = exits.pop(j)
            if not self._grow(depths, exits, unsafe, None):
                return None
        # (every local bound there is passed on, read later or not: as in plain Python, it
        # stays alive until the function returns)
        out = {j: (d, tuple(sorted(must[j]))) for j, d in exits.items()}
        return Region(start, members, out)

    def _grow(self, depths: dict[int, int], exits: dict[int, int], work: list[int],
              depth: int | None) -> bool:
        """Add what is reached from `work` to the region (`depths`), stopping at exits (only
        when `depth` is given). False when the flow is not one a region can hold."""
        work = list(work)
        start = min(depths)
        while work:
            i = work.pop()
            inst = self.instructions[i]
            nexts: list[tuple[int, int, bool]] = []
            if inst.name not in _TERMINAL and not inst.is_uncond_jump():
                nexts.append((i + 1, depths[i] + inst.stack_effect(jump=False), False))
            if inst.has_jump():
                nexts.append((self.target(i), depths[i] + inst.stack_effect(jump=True), False))
            handler = self.handlers[i]
            if handler is not None:
                h = self.labels[handler.target]
                if h not in self.handler_depth:
                    return False
                nexts.append((h, self.handler_depth[h], True))
            for j, d, is_handler in nexts:
                if j >= len(self.instructions) or j < start:
                    return False  # (a jump back before the statement: a loop around it)
                if j in exits:
                    if depth is None:
                        depths[j] = exits.pop(j)
                        work.append(j)
                    elif exits[j] != d:
                        return False
                    continue
                if j in depths:  # (before the exit test: never both a member and an exit)
                    if depths[j] != d:
                        return False
                    continue
                if (depth is not None and not is_handler and self.handlers[j] is None
                        and not self.protected_by_block(j) and d <= depth):
                    exits[j] = d
                    continue
                depths[j] = d
                work.append(j)
        return True

    def _assigned(self, members: tuple[int, ...], start: int, bound: frozenset[str]):
        """For each exit reached from the region: the locals bound on every way there (must)
        and on some way there (may): forward data flow over the region's instructions, an
        exception edge leaving before the instruction's own store."""
        member_set = set(members)
        writes = {i: self.instructions[i].arg for i in members
                  if self.instructions[i].name == "STORE_FAST"}
        everything = frozenset(bound) | frozenset(writes.values())
        must: dict[int, frozenset[str]] = {i: everything for i in members}
        may: dict[int, frozenset[str]] = {i: frozenset() for i in members}
        must[start] = may[start] = frozenset(bound)
        exit_must: dict[int, frozenset[str]] = {}
        exit_may: dict[int, frozenset[str]] = {}
        changed = True
        while changed:
            changed = False
            for i in members:
                inst = self.instructions[i]
                out_must = self.bound_after(i, must[i])
                out_may = may[i]
                if i in writes:
                    out_may = out_may | {writes[i]}
                elif inst.name in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR"):
                    out_may = out_may - {inst.arg}
                edges = []
                if inst.name not in _TERMINAL and not inst.is_uncond_jump():
                    edges.append((i + 1, out_must, out_may))
                if inst.has_jump():
                    edges.append((self.target(i), out_must, out_may))
                if self.handlers[i] is not None:
                    edges.append((self.labels[self.handlers[i].target], must[i], may[i]))
                for j, m, y in edges:
                    tm, ty = (must, may) if j in member_set else (exit_must, exit_may)
                    new_m = tm.get(j, everything) & m
                    new_y = ty.get(j, frozenset()) | y
                    if j == start:
                        new_m, new_y = new_m & bound, new_y | bound
                    if new_m != tm.get(j) or new_y != ty.get(j):
                        tm[j], ty[j] = new_m, new_y
                        changed = True
        return exit_must, exit_may

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
            if name in self.cellvars:
                name = None
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


class CodeMap(IdentitySet):
    """A map from code objects, by identity, that forgets a code object when it dies, without
    running Python code (`fx.weak`; ``add`` marks a code). (Also cheap to ask: a WeakSet makes
    a weak reference for every ``in``, and hashing a code object hashes its constants.)

    Not a WeakKeyDictionary: code objects compare equal by value (not by file), so there an
    equal code object of another function shares the entry, and when the first one dies the
    entry goes for both (a loop body then no longer counted as one, a resume function's origin
    lost)."""

    __slots__ = ()

    def add(self, code: types.CodeType) -> None:
        self[code] = True


#: (by identity: on 3.10 two code objects that differ only in their line table compare equal,
#: and a shared CodeInfo would give one the other's line numbers)
_cache = CodeMap()


def code_info(code: types.CodeType) -> CodeInfo:
    """The (cached) `CodeInfo` of `code`. Treat it as read-only: it is shared."""
    info = _cache.get(code)
    if info is None:
        info = _cache[code] = CodeInfo.from_code(code)
    return info
