"""What differs between the CPython versions npdynamo runs on (3.10, 3.11, 3.12, 3.13), for the
Python side: the one module that reads ``sys.version_info`` (the C side's equivalent is
csrc/cpython_compat.h; the spelling of emitted instructions is `dynamo.instructions`).

In: a code object, or one decoded instruction. Out: the code's instructions as the translator,
`bytecode_analysis`, `resume`, `loops` and `region_body` all index them (`decode`), and small
version-free answers about one instruction (`attr_name`, `global_name`, `loop_exit_skip`, ...).

`decode` normalises a few things so that the same list can be read by the translator *and* copied
into generated code on this version:

* 3.13 superinstructions (``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_LOAD_FAST``,
  ``STORE_FAST_STORE_FAST``) become their two halves (same behaviour; liveness and the
  translator then see every read and write by name);
* on 3.12+ every ``LOAD_FAST`` of a local becomes ``LOAD_FAST_CHECK``: 3.12 stopped checking
  ``LOAD_FAST`` for an unbound local (a NULL there crashes the interpreter), and code copied into
  resume, loop-body and try-body functions runs where the compiler never proved the local bound.
"""

from __future__ import annotations

import copy
import dis
import sys
import types
from typing import Any

from bytecode import Bytecode, CellVar, FreeVar, Instr, TryBegin, TryEnd

from fx.weak import IdentityMap

__all__ = [
    "PY", "PY310", "PY312", "PY313", "NULL_AFTER_CALLABLE", "HAS_PREFIX", "HAS_EXCEPTION_TABLE",
    "decode", "offsets_to_indices", "attr_name", "attr_is_method",
    "global_name", "global_pushes_null", "loop_exit_skip", "is_cell_load", "is_benign_handler",
    "restoring_stores", "block_stack_handlers", "remember_qualname", "qualname",
]

PY = sys.version_info[:2]
PY310 = PY == (3, 10)
#: 3.12 or later (PEP 709 inlined comprehensions, LOAD_ATTR's method bit, END_FOR, RETURN_CONST)
PY312 = PY >= (3, 12)
#: 3.13 or later (NULL after the callable, CALL_KW, TO_BOOL, superinstructions)
PY313 = PY >= (3, 13)
#: Where the NULL of the call convention sits: 3.11/3.12 push it before the callable
#: (``NULL, f, args``), 3.13 after (``f, NULL, args``); 3.10 has none.
NULL_AFTER_CALLABLE = PY313
#: The code's instructions set up cells and free variables themselves (3.11+: COPY_FREE_VARS,
#: MAKE_CELL before RESUME); on 3.10 the interpreter does it before the first instruction.
HAS_PREFIX = PY >= (3, 11)
#: 3.11+ code has an exception table (`bytecode` TryBegin/TryEnd); 3.10 a block stack
#: (SETUP_FINALLY / SETUP_WITH ... POP_BLOCK, POP_EXCEPT), see `block_stack_handlers`.
HAS_EXCEPTION_TABLE = PY >= (3, 11)

#: 3.13 superinstructions: name -> the two instructions it stands for.
_SPLIT = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _checked(name: str) -> str:
    return "LOAD_FAST_CHECK" if PY312 and name == "LOAD_FAST" else name


#: code -> its decoded instructions (`decode` hands out copies); by identity: equal code
#: objects of two files are two codes (their file names differ), and a dying code runs no
#: Python (`fx.weak`)
_decoded: "IdentityMap[types.CodeType, Bytecode]" = IdentityMap()


def decode(code: types.CodeType) -> Bytecode:
    """``Bytecode.from_code(code)``, normalised as the module docstring says. Every user of a
    code's instructions goes through here, so instruction indices agree everywhere. A code is
    decoded once (a compile decodes the same code up to nine times, ~1 ms each with
    `bytecode`); each call gets its own copy of the instructions and try ranges, to change."""
    found = _decoded.get(code)
    if found is None:
        found = _decoded[code] = _decode(code)
    bc = Bytecode()
    bc._copy_attr_from(found)
    begins: dict[int, TryBegin] = {}
    items: list = []
    for item in found:
        if isinstance(item, Instr):
            item = item.copy()
        elif isinstance(item, TryBegin):
            begins[id(item)] = copy.copy(item)
            item = begins[id(item)]
        elif isinstance(item, TryEnd):
            item = copy.copy(item)
            item.entry = begins.get(id(item.entry), item.entry)
        items.append(item)  # (labels and SetLineno are values: shared)
    bc.extend(items)
    return bc


def _decode(code: types.CodeType) -> Bytecode:
    bc = Bytecode.from_code(code)
    _keep_handler_depths(code, bc)
    if not PY312:
        return bc
    cells, free = set(code.co_cellvars), set(code.co_freevars)

    def load(name: str, arg: Any, location) -> Instr:
        # (3.13: a LOAD_FAST of a cell or free variable is a LOAD_CLOSURE, which `bytecode`
        # reads with the plain name: assembled that way it would be a new plain local)
        if PY313 and name == "LOAD_FAST" and isinstance(arg, str) and (arg in cells or
                                                                      arg in free):
            return Instr("LOAD_FAST", CellVar(arg) if arg in cells else FreeVar(arg),
                         location=location)
        return Instr(_checked(name) if isinstance(arg, str) else name, arg, location=location)

    out = []
    for item in bc:
        if isinstance(item, Instr):
            halves = _SPLIT.get(item.name)
            if halves is not None:
                for name, arg in zip(halves, item.arg):
                    out.append(load(name, arg, item.location) if name == "LOAD_FAST" else
                               Instr(name, arg, location=item.location))
                continue
            if item.name == "LOAD_FAST":
                item = load("LOAD_FAST", item.arg, item.location)
        out.append(item)
    bc[:] = out
    return bc


def _keep_handler_depths(code: types.CodeType, bc: Bytecode) -> None:
    """(3.11+) Give each decoded try range the stack depth of its exception table entry.
    `bytecode` leaves them unset and computes them when assembling, from the stack where each
    range starts; CPython's is the depth at the start of the statement the handler belongs to,
    which is lower for a range that starts inside a handler (3.12+'s cleanup of a nested
    ``except``: 2 too deep, so an exception there left two stale values on the stack and the
    region analysis read a handler at the wrong depth). `instructions.to_code` keeps the lower
    of the two."""
    if not HAS_EXCEPTION_TABLE:
        return
    entries = dis._parse_exception_table(code)
    begins = [item for item in bc if isinstance(item, TryBegin)]
    if len(begins) != len(entries) or any(b.push_lasti != e.lasti
                                          for b, e in zip(begins, entries)):
        return  # (not one range per entry: leave them to `bytecode`)
    for begin, entry in zip(begins, entries):
        begin.stack_depth = entry.depth


def offsets_to_indices(code: types.CodeType) -> dict[int, int]:
    """Byte offset of each instruction of `code` -> its index in ``decode(code)`` (a split
    superinstruction's offset maps to its first half)."""
    index_of: dict[int, int] = {}
    k = 0
    for inst in dis.get_instructions(code):
        if inst.opname in ("EXTENDED_ARG", "CACHE"):
            continue
        index_of[inst.offset] = k
        k += 2 if PY312 and inst.opname in _SPLIT else 1
    return index_of


def attr_name(inst: Instr) -> str:
    """The attribute name of a LOAD_ATTR / LOAD_METHOD (3.12+ LOAD_ATTR's arg is
    ``(method bit, name)``)."""
    return inst.arg[1] if isinstance(inst.arg, tuple) else inst.arg


def attr_is_method(inst: Instr) -> bool:
    """A LOAD_ATTR that pushes ``[method, self]`` or a NULL with the attribute (3.12+)."""
    return inst.name == "LOAD_ATTR" and isinstance(inst.arg, tuple) and bool(inst.arg[0])


def global_name(inst: Instr) -> str:
    """The name of a LOAD_GLOBAL (3.11+: arg is ``(push NULL, name)``; 3.10: the name)."""
    return inst.arg[1] if isinstance(inst.arg, tuple) else inst.arg


def global_pushes_null(inst: Instr) -> bool:
    return isinstance(inst.arg, tuple) and bool(inst.arg[0])


#: Instructions at a FOR_ITER's exhaustion target that the interpreter skips when the iterator
#: ends (3.12: END_FOR; 3.13: END_FOR, POP_TOP): the loop continues after them.
LOOP_EXIT_OPS: tuple[str, ...] = (("END_FOR", "POP_TOP") if PY313 else
                                  ("END_FOR",) if PY312 else ())


def loop_exit_skip() -> int:
    """How many instructions after a FOR_ITER's target the code continues when the loop ends."""
    return len(LOOP_EXIT_OPS)


def is_cell_load(inst: Instr) -> bool:
    """Pushes a cell object itself: LOAD_CLOSURE (to 3.12), or on 3.13 a LOAD_FAST of a cell or
    free variable (LOAD_CLOSURE became a pseudo-instruction assembled as LOAD_FAST)."""
    return inst.name == "LOAD_CLOSURE" or (
        inst.name in ("LOAD_FAST", "LOAD_FAST_CHECK") and isinstance(inst.arg, (CellVar, FreeVar)))


def restoring_stores(instrs: list[Any]) -> frozenset[int]:
    """Indices of the STORE_FASTs that put back what a LOAD_FAST_AND_CLEAR saved (3.12+ inlined
    comprehensions: the run of SWAP / STORE_FAST / POP_TOP right after the loop's END_FOR, and
    the one in its handler, which starts with a SWAP; the compiler may fold the result's store
    into the run, ``END_FOR; STORE_FAST zs; STORE_FAST k; STORE_FAST v``). The value stored may
    be NULL (x was unbound before the comprehension): such a store does not make x bound.
    (A store of the same name as the result, ``k = [k for k in ...]``, is counted too: only
    less is then taken as certainly bound.)"""
    cleared = {inst.arg for inst in instrs if inst.name == "LOAD_FAST_AND_CLEAR"}
    if not cleared:
        return frozenset()
    found: set[int] = set()
    run = ("SWAP", "STORE_FAST", "POP_TOP", "NOP")  # (NOP: config.debug_insert_nops)
    before = None  # the last instruction that was not a NOP
    for i, inst in enumerate(instrs):
        previous, before = before, (inst.name if inst.name != "NOP" else before)
        if inst.name not in ("END_FOR", "SWAP") or previous in run:
            continue  # (a run starts right after END_FOR, or at its first SWAP)
        j = i + 1 if inst.name == "END_FOR" else i
        while j < len(instrs) and instrs[j].name in run:
            if instrs[j].name == "STORE_FAST" and instrs[j].arg in cleared:
                found.add(j)
            j += 1
    return frozenset(found)


#: 3.10 instructions that push a block whose handler is their jump target
_SETUP_OPS = ("SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH")


def block_stack_handlers(instrs: list[Instr], labels: dict) -> tuple[list, dict, list, dict,
                                                                    list]:
    """(3.10) What the exception table says on 3.11+, from the block stack: per instruction,
    a `bytecode.TryBegin` standing for the innermost SETUP_* block around it (its handler
    is the SETUP's target) or None; each handler's stack depth when it starts; and whether the
    instruction runs inside an ``except``/``finally``/with-exit handler (between the handler's
    start and its POP_EXCEPT, where 3.11 has a cleanup handler). Also: POP_BLOCK index -> the
    TryBegin of the block it pops; and per instruction, how many blocks are on the frame's
    block stack (CPython allows 20). Follows the control flow from the first instruction, the
    block stack as state (the compiler gives every instruction one block stack whatever the way
    there)."""

    n = len(instrs)
    handlers: list = [None] * n
    in_handler = [False] * n
    nesting = [0] * n
    pops: dict[int, Any] = {}
    depths: dict[int, int] = {}
    seen: dict[int, tuple] = {}
    begins: dict[int, TryBegin] = {}  # SETUP index -> its TryBegin
    work: list[tuple[int, tuple, int]] = [(0, (), 0)]
    while work:
        i, blocks, depth = work.pop()
        if i >= n or i in seen:
            continue
        seen[i] = blocks
        inst = instrs[i]
        setups = [b for b in blocks if b != "except"]
        handlers[i] = begins[setups[-1]] if setups else None
        in_handler[i] = "except" in blocks
        nesting[i] = len(blocks)
        after = blocks
        if inst.name in _SETUP_OPS:
            if i not in begins:
                begins[i] = TryBegin(inst.arg, False)
            target = labels[inst.arg]
            depths[target] = depth + inst.stack_effect(jump=True)
            work.append((target, blocks + ("except",), depths[target]))
            after = blocks + (i,)
        elif inst.name == "POP_BLOCK" and blocks:
            after = blocks[:-1]
            if blocks[-1] in begins:
                pops[i] = begins[blocks[-1]]
        elif inst.name == "POP_EXCEPT" and blocks:
            after = blocks[:-1]
        if inst.name in _SETUP_OPS:
            work.append((i + 1, after, depth + inst.stack_effect(jump=False)))
            continue
        if inst.has_jump():
            work.append((labels[inst.arg], after, depth + inst.stack_effect(jump=True)))
        if inst.name not in ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE") and \
                not inst.is_uncond_jump():
            work.append((i + 1, after, depth + inst.stack_effect(jump=False)))
    return handlers, depths, in_handler, pops, nesting


#: (3.10) code -> the qualified name its MAKE_FUNCTION gave (weak keys, by identity: fx.weak)
_qualnames: "IdentityMap[types.CodeType, str]" = IdentityMap()


def remember_qualname(code: types.CodeType, name: str) -> None:
    """(3.10) The qualified name a MAKE_FUNCTION gave functions of `code` (3.10 code objects
    have none of their own): `qualname` answers it, and functions rebuilt in generated code get
    it back (``f.<locals>.<lambda>``, not ``<lambda>``)."""
    if PY310 and isinstance(name, str):
        _qualnames[code] = name


def qualname(code: types.CodeType) -> str:
    """``co_qualname`` (3.11+); on 3.10, which has none, the name a MAKE_FUNCTION the translator
    saw gave it (`remember_qualname`), else the plain name."""
    found = getattr(code, "co_qualname", None)
    if found is not None:
        return found
    return _qualnames.get(code, code.co_name)


def is_benign_handler(instrs: list[Any], start: int) -> bool:
    """Is the exception handler starting at `start` one the compiler made, not the user: it only
    restores state and re-raises? (3.12+: an inlined comprehension's handler restores the
    shadowed loop variable: ``SWAP; POP_TOP; SWAP; STORE_FAST x; RERAISE 0``; a generator's body
    turns StopIteration into RuntimeError: ``CALL_INTRINSIC_1 STOPITERATION_ERROR; RERAISE 1``.)
    The instructions it covers are then not inside a ``try`` for the translator."""
    found = []  # (NOPs skipped: generated code may carry them, config.debug_insert_nops)
    for inst in instrs[start:]:
        if inst.name == "NOP":
            continue
        found.append(inst)
        if inst.name == "RERAISE" or len(found) == 8:
            break
    names = [inst.name for inst in found]
    if not names or names[-1] != "RERAISE":
        return False
    body = names[:-1]
    if body and all(n in ("SWAP", "POP_TOP", "STORE_FAST", "STORE_FAST_MAYBE_NULL")
                    for n in body):
        return True
    if body == ["CALL_INTRINSIC_1"]:
        arg = found[0].arg
        return getattr(arg, "name", "") == "INTRINSIC_STOPITERATION_ERROR" or arg == 3
    return False
