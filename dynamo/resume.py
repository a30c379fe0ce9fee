"""Resume functions: the rest of a frame after a graph break, as a function of its own.

In: the original code object, the index of the instruction to continue at (indexed as in
`bytecode_analysis.CodeInfo`), the shape of the value stack there (which slots hold NULL) and the
live locals. Out: a `ResumeCode` whose code object is a copy of the original with a new prologue:

    COPY_FREE_VARS n          the original's free variables arrive as its closure
    LOAD_FAST c; MAKE_CELL c; STORE_FAST c ...
                              the original's cell variables stay cell variables (an empty one
                              reads as UnboundLocalError, as in the original) holding the
                              original's cell objects, which arrive as the last arguments
    RESUME 0
    PUSH_NULL / LOAD_FAST ___stack0 ...   rebuild the value stack (NULL slots are re-pushed)
    DELETE_FAST ___stack0 ...             so that locals() / f_locals show the user's names only
    JUMP_FORWARD <target>     continue where the original would have continued
    ...the original instructions that can run from the target, unchanged...

Its arguments are the stack values (``___stack0``, ... for the non-NULL slots) followed by the
live locals, by name, then the original's cells. Locals that are dead at the target are not
passed, so the resume function's guards only look at what the rest of the frame reads. Cells stay
shared with closures made before the break, because the cells themselves (not their contents) are
passed: free variables as the closure, and each cell variable ``c`` as the argument ``c``, whose
slot the prologue makes a cell variable slot holding that very cell (`passed_cells`; ``f_locals``
and tracebacks then show its contents, as for the original).

Called by `codegen` when it emits a graph break: the transformed code builds a function from the
code object with ``MAKE_FUNCTION`` (the current cells as closure, the frame's globals) and calls
it. The C hook sees the resume function's frame like any other and compiles it as a frame of its
own. The code object has the user function's name, qualified name, file and first line, and is
called as a tail call (see `codegen`), so its frame is indistinguishable from the function's.
Resume code objects are cached per (code, target, stack shape, live locals), so recompiling a
frame reuses them and their compiled versions.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd
from bytecode.flags import CompilerFlags

from . import _C, compat
from . import instructions as ins
from .bytecode_analysis import CodeMap, code_info

__all__ = ["ResumeCode", "resume_code", "is_resume_code", "origin_names", "mark_plain_loop",
           "plain_loop_reason", "mark_loop_body", "in_loop_body", "inherit_origin", "display_name",
           "super_receiver", "passed_cells", "prologue_length", "empty_breaks",
           "note_empty_breaks", "rest_of_code", "target_lineno", "reads_a_bool",
           "STACK_PREFIX"]

STACK_PREFIX = "___stack"


@dataclass(frozen=True)
class ResumeCode:
    """A continuation function's code and how to call it."""

    code: types.CodeType
    #: Argument order after the stack values: the locals the caller passes (a method using
    #: super() also passes `super_receiver(code)`, first of all).
    live_locals: tuple[str, ...]
    #: Stack slots, bottom first: True where the slot holds NULL (re-pushed, not passed).
    stack_nulls: tuple[bool, ...]
    #: Names of the free variables of the original (and of the resume function), in closure
    #: order.
    closure_names: tuple[str, ...]
    #: The original's cell variables, whose cells (LOAD_CLOSURE) are the last arguments.
    cell_args: tuple[str, ...] = ()


_resume_codes = CodeMap()
#: resume code -> (name, qualname) of the user's function it continues
_origin = CodeMap()


#: resume code -> why it starts with a loop that runs in plain Python (not traced)
_plain_loops = CodeMap()


#: loop body functions and the resume functions made from them: their arguments change on every
#: iteration, so they keep few versions (see convert_frame)
_loop_lineage = CodeMap()


#: resume code -> how many graph breaks in a row, each with no graph before it, led to it
#: (`dynamo.config.max_empty_breaks`)
_empty_breaks = CodeMap()


def empty_breaks(code: types.CodeType) -> int:
    """How many graph breaks in a row with no graph before them led to `code` (0 for a user
    function, or a resume function after a graph)."""
    return _empty_breaks.get(code, 0)


def note_empty_breaks(code: types.CodeType, count: int) -> None:
    """A compile continued in resume function `code` after `count` breaks in a row with no
    graph. (Resume code is shared by every version of its caller: the smallest count wins, so
    a version that captured a graph keeps the chain compiled.)"""
    known = _empty_breaks.get(code)
    _empty_breaks[code] = count if known is None else min(known, count)


def mark_loop_body(code: types.CodeType) -> None:
    _loop_lineage.add(code)


def in_loop_body(code: types.CodeType) -> bool:
    """Whether `code` is a loop body function, or continues one after a graph break."""
    return code in _loop_lineage


def mark_plain_loop(code: types.CodeType, reason: str) -> None:
    _plain_loops[code] = reason


def plain_loop_reason(code: types.CodeType) -> str | None:
    """Why `code` (a resume function starting with a loop) is not traced, or None."""
    return _plain_loops.get(code)


def passed_cells(code: types.CodeType) -> frozenset[str]:
    """For a resume function: the cell variables whose argument is a cell object of the
    original frame (the prologue makes it the variable's cell). At hook time the argument is
    the cell itself (3.11+: in the argument slot; 3.10: wrapped in the new cell the frame made
    for the variable, which the hook's frame view reads through): the translator reads its
    contents (an empty one is an UnboundLocalError, as in the original). Read from the code itself (its prologue stores
    into a cell variable's slot before RESUME, which compiled Python never does; on 3.10 it
    calls ``_C.adopt_cells``), not from a registry: code objects compare equal by value, so a
    weak registry keyed by them loses an entry when an equal code object dies."""
    if not code.co_cellvars:
        return frozenset()
    instructions = list(dis.get_instructions(code))
    if instructions[0].opname == "LOAD_CONST" and instructions[0].argval is _C.adopt_cells:
        # (3.10, `instructions.install_cells`: every cell variable that is an argument)
        arguments = set(code.co_varnames[:code.co_argcount])
        return frozenset(name for name in code.co_cellvars if name in arguments)
    names = []
    for inst in instructions:
        if inst.opname == "RESUME":
            return frozenset(names)
        if inst.opname == "STORE_FAST":
            names.append(inst.argval)
    return frozenset()  # (3.10 code that is no continuation: no RESUME)


def prologue_length(instructions: list) -> int:
    """How many of a code's first `instructions` set its frame up (copied into its transformed
    code, not traced): up to RESUME (3.11+), or a 3.10 continuation's ``_C.adopt_cells()``
    call (`instructions.install_cells`)."""
    names = [inst.name for inst in instructions]
    if "RESUME" in names:
        return names.index("RESUME") + 1
    if names[:3] == ["LOAD_CONST", "CALL_FUNCTION", "POP_TOP"] and \
            instructions[0].arg is _C.adopt_cells:
        return 3
    return 0


#: resume and loop body code -> what `display_name` shows (``f.<resume at line 12>``)
_labels = CodeMap()


def display_name(code: types.CodeType) -> str:
    """The qualified name to show for `code` in explain() and logs: a resume or loop body
    function is named after the part of the user's function it runs."""
    return _labels.get(code, compat.qualname(code))


def is_resume_code(code: types.CodeType) -> bool:
    return code in _origin


def inherit_origin(new: types.CodeType, code: types.CodeType) -> None:
    """`new` (a resume or loop body function made from `code`) continues `code`'s function."""
    _origin[new] = origin_names(code)
    if in_loop_body(code):
        _loop_lineage.add(new)


def origin_names(code: types.CodeType) -> tuple[str, str]:
    """(name, qualname) of the user function that `code` is, or continues."""
    return _origin.get(code, (code.co_name, compat.qualname(code)))


def super_receiver(code: types.CodeType) -> str | None:
    """The argument a zero-argument ``super()`` in `code` reads, when a continuation of `code`
    must receive it first: CPython takes ``super()``'s object from the frame's first local
    slot (and its class from the ``__class__`` cell), so a resume function of a method that
    uses ``super()`` has ``self`` as its first argument, before the stack values."""
    if "__class__" not in code.co_freevars or not code.co_argcount:
        return None
    name = code.co_varnames[0]
    return None if name in code.co_cellvars else name


def resume_code(code: types.CodeType, target: int, stack_nulls: tuple[bool, ...],
                live_locals: tuple[str, ...]) -> ResumeCode:
    """The (cached) resume function for continuing `code` at instruction index `target`.
    Its arguments: `super_receiver(code)` if any, the stack values, then `live_locals` (the
    receiver left out of them)."""
    receiver = super_receiver(code)
    # (in the order of the function's own local slots: a frame clears its locals slot by slot
    # when it returns, so finalizers run in the order they would in plain Python)
    slot = {name: i for i, name in enumerate(code.co_varnames)}
    live_locals = tuple(sorted((name for name in live_locals if name != receiver),
                               key=lambda name: (slot.get(name, len(slot)), name)))
    key = (target, stack_nulls, live_locals)
    per_code = _resume_codes.setdefault(code, {})
    found = per_code.get(key)
    if found is None:
        found = per_code[key] = _generate(code, target, stack_nulls, live_locals, len(per_code))
    return found


def _generate(code: types.CodeType, target: int, stack_nulls: tuple[bool, ...],
              live_locals: tuple[str, ...], serial: int) -> ResumeCode:
    original = compat.decode(code)
    cellvars = list(original.cellvars)
    freevars = list(original.freevars)
    # The original's cell variables stay cell variables (reading an emptied one must raise
    # UnboundLocalError, not the NameError of a free variable), holding the original's cells:
    # each arrives as an argument of the same name, and the prologue puts it into the slot.
    closure_names = tuple(freevars)

    body: list = []
    target_label = Label()
    target_lineno = None
    index = 0
    in_prologue = any(isinstance(item, Instr) and item.name == "RESUME" for item in original)
    # Only what can run from the target is copied: a frame with k graph breaks makes k resume
    # functions, and copying the whole function into each made compiling it quadratic in k.
    reachable = _reachable(code, target)
    for item in original:
        if isinstance(item, Instr):
            if index == target:
                place_label(body, target_label)
                target_lineno = item.lineno
            index += 1
            if in_prologue:  # the new prologue sets the frame up
                in_prologue = item.name != "RESUME"
                continue
            if index - 1 not in reachable:
                continue
            item = item.copy()
        body.append(item)
    body = _without_empty_try_ranges(body)
    if target_lineno is None and any(line is not None for _, _, line in code.co_lines()):
        target_lineno = code.co_firstlineno  # (without a line table, the prologue has none)

    stack_args = [f"{STACK_PREFIX}{i}" for i, null in enumerate(stack_nulls) if not null]
    prologue: list[Instr] = []
    prologue += ins.copy_free_vars(len(closure_names))
    prologue += ins.install_cells(cellvars)
    prologue += ins.resume()
    for i, null in enumerate(stack_nulls):
        prologue += ins.push_null() if null else ins.load_fast(f"{STACK_PREFIX}{i}")
        if i and stack_nulls[i - 1]:  # (3.10: the NULL goes in under the callable)
            prologue += ins.null_under_top()
    if stack_nulls and reads_a_bool(code, target):
        # (3.13: a jump or ``not`` there reads an exact bool that the user's COMPARE_OP cast;
        # a graph passes a NumPy bool)
        prologue += ins.to_bool()
    for name in stack_args:  # on the stack now; the frame's locals are the user's only
        prologue += ins.delete_fast(name)
    prologue += ins.jump_forward(target_label)
    for instr in prologue:
        instr.lineno = target_lineno

    suffix = f" #{serial}" if serial else ""
    receiver = super_receiver(code)
    first = [receiver] if receiver is not None else []
    new_code = continuation_code(code, original, prologue + body,
                                 first + stack_args + list(live_locals) + cellvars,
                                 closure_names, f"<resume at line {target_lineno}{suffix}>",
                                 cellvars=tuple(cellvars))
    return ResumeCode(new_code, tuple(live_locals), tuple(stack_nulls), closure_names,
                      tuple(cellvars))


def rest_of_code(code: types.CodeType, targets) -> tuple[list, dict[int, Label]]:
    """The instructions of `code` that can run from any instruction index in `targets` (its
    prologue left out), unchanged, with their exception table entries and source positions;
    and for each target the label placed at it. Transformed code that continues in its own
    frame after a graph break jumps there (`codegen`, ``_C.stay_in_frame``). The labels and
    exception ranges are this copy's own. 3.10 copies every instruction after the prologue: its
    line events start where a line-table range starts, and a range must start where the
    original's does (a target in the middle of a statement reports no new line)."""
    original = compat.decode(code)
    reachable: set[int] = set()
    for target in targets:
        reachable |= _reachable(code, target)
    labels = {target: Label() for target in targets}
    instrs = [item for item in original if isinstance(item, Instr)]
    skip = prologue_length(instrs)
    body: list = []
    index = 0
    for item in original:
        if isinstance(item, Instr):
            if index in labels:
                place_label(body, labels[index])
            index += 1
            if index - 1 < skip or (index - 1 not in reachable and ins.HAS_EXCEPTION_TABLE):
                continue
            item = item.copy()
        body.append(item)
    return _without_empty_try_ranges(body), labels


def target_lineno(code: types.CodeType, index: int) -> int | None:
    """The line of `code`'s instruction `index` (None past the end or without a line)."""

    instructions = code_info(code).instructions
    return instructions[index].lineno if index < len(instructions) else None


def reads_a_bool(code: types.CodeType, index: int) -> bool:
    """Whether instruction `index` of `code` needs an exact bool on top of the stack."""

    instructions = code_info(code).instructions
    return index < len(instructions) and instructions[index].name in (
        "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "UNARY_NOT")


def _reachable(code: types.CodeType, start: int) -> set[int]:
    """Instruction indices reached from `start` (jumps, fall-through and exception edges)."""

    info = code_info(code)
    seen = {start}
    work = [start]
    while work:
        for j in info.successors(work.pop()):
            if j not in seen:
                seen.add(j)
                work.append(j)
    return seen


def _without_empty_try_ranges(body: list) -> list:
    """`body` without the TryBegin/TryEnd pairs that no longer protect an instruction."""
    out: list = []
    opened: int | None = None  # position of the open TryBegin in `out`
    has_instr = False
    for item in body:
        if isinstance(item, TryBegin):
            opened, has_instr = len(out), False
        elif isinstance(item, TryEnd) and opened is not None:
            if not has_instr:
                del out[opened]
                opened = None
                continue
            opened = None
        elif isinstance(item, Instr):
            has_instr = True
        out.append(item)
    return out


def place_label(body: list, label: Label) -> None:
    """Append `label` for the instruction about to be appended, but before the TryBegins just
    appended for it (jumping past a TryBegin would leave its handler's stack depth unknown to
    the assembler) and after the TryEnds that close the range of the instruction before it,
    where `bytecode` puts its own labels: a TryEnd cut off from the range's last instruction
    (a ``raise``) by a label is not seen on that path, the handler's depth is computed from
    another path, and the stack size came out negative (a resume function of CPython 3.13's
    test_contextlib, whose compiler puts a handler's cleanup after the next statement)."""
    at = len(body)
    while at and isinstance(body[at - 1], (TryBegin, Label)):
        at -= 1
    body.insert(at, label)


def continuation_code(code: types.CodeType, original: Bytecode, instructions: list,
                      argnames: list[str], closure_names: tuple[str, ...],
                      part: str, cellvars: tuple[str, ...] = ()) -> types.CodeType:
    """A code object that continues `code` (a resume or loop body function): these
    instructions, these positional arguments, `code`'s cells and free variables as its free
    variables, and the user function's name, qualified name, file and first line, so its
    frames look like the function's own in tracebacks, `sys._getframe()` and profiles.
    `part` says which part of the function it is (``<resume at line 12>``): `display_name`
    shows it in `explain()` and logs. `cellvars` (a resume function's) are arguments that
    bring cells (see `passed_cells`)."""
    bc = Bytecode(instructions)
    bc.argnames = list(argnames)
    bc.argcount = len(argnames)
    bc.posonlyargcount = bc.kwonlyargcount = 0
    bc.cellvars = list(cellvars)
    bc.freevars = list(closure_names)
    bc.flags = original.flags & ~(CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS)
    if closure_names:
        bc.flags |= CompilerFlags.NESTED
    name, qualname = origin_names(code)
    bc.name, bc.qualname = name, qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.docstring = None
    new_code = ins.to_code(bc)
    inherit_origin(new_code, code)
    _labels[new_code] = f"{qualname}.{part}"
    return new_code


def resume_function(resume: ResumeCode, globals_: dict, cells: tuple) -> types.FunctionType:
    """A function object for `resume` (what the emitted MAKE_FUNCTION builds; used in tests)."""
    return types.FunctionType(resume.code, globals_, resume.code.co_name, None, cells or None)
