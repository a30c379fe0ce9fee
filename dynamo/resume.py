"""Resume functions: the rest of a frame after a graph break, as a function of its own.

In: the original code object, the index of the instruction to continue at (indexed as in
`bytecode_analysis.CodeInfo`), the shape of the value stack there (which slots hold NULL) and the
live locals. Out: a `ResumeCode` whose code object is a copy of the original with a new prologue:

    COPY_FREE_VARS n          the original's cells and free variables arrive as its closure
    RESUME 0
    PUSH_NULL / LOAD_FAST ___stack0 ...   rebuild the value stack (NULL slots are re-pushed)
    DELETE_FAST ___stack0 ...             so that locals() / f_locals show the user's names only
    JUMP_FORWARD <target>     continue where the original would have continued
    ...the original instructions, unchanged, with cell variables turned into free variables...

Its arguments are the stack values (``___stack0``, ... for the non-NULL slots) followed by the
live locals, by name. Locals that are dead at the target are not passed, so the resume
function's guards only look at what the rest of the frame reads. Cells stay shared with closures
made before the break, because the cells themselves (not their contents) are passed as the closure.

Called by `codegen` when it emits a graph break: the transformed code builds a function from the
code object with ``MAKE_FUNCTION`` (the current cells as closure, the frame's globals) and calls
it. The C hook sees the resume function's frame like any other and compiles it as a frame of its
own. The code object has the user function's name, qualified name, file and first line, and is
called as a tail call (see `codegen`), so its frame is indistinguishable from the function's.
Resume code objects are cached per (code, target, stack shape, live locals), so recompiling a
frame reuses them and their compiled versions.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd
from bytecode.flags import CompilerFlags

from . import instructions as ins

__all__ = ["ResumeCode", "resume_code", "is_resume_code", "origin_names", "mark_plain_loop",
           "plain_loop_reason", "mark_loop_body", "in_loop_body", "inherit_origin", "display_name",
           "super_receiver",
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
    #: Names of the cells and free variables of the original, in closure order.
    closure_names: tuple[str, ...]


_resume_codes: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()
#: resume code -> (name, qualname) of the user's function it continues
_origin: "weakref.WeakKeyDictionary[types.CodeType, tuple[str, str]]" = weakref.WeakKeyDictionary()


#: resume code -> why it starts with a loop that runs in plain Python (not traced)
_plain_loops: "weakref.WeakKeyDictionary[types.CodeType, str]" = weakref.WeakKeyDictionary()


#: loop body functions and the resume functions made from them: their arguments change on every
#: iteration, so they keep few versions (see convert_frame)
_loop_lineage: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


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


#: resume and loop body code -> what `display_name` shows (``f.<resume at line 12>``)
_labels: "weakref.WeakKeyDictionary[types.CodeType, str]" = weakref.WeakKeyDictionary()


def display_name(code: types.CodeType) -> str:
    """The qualified name to show for `code` in explain() and logs: a resume or loop body
    function is named after the part of the user's function it runs."""
    return _labels.get(code, code.co_qualname)


def is_resume_code(code: types.CodeType) -> bool:
    return code in _origin


def inherit_origin(new: types.CodeType, code: types.CodeType) -> None:
    """`new` (a resume or loop body function made from `code`) continues `code`'s function."""
    _origin[new] = origin_names(code)
    if in_loop_body(code):
        _loop_lineage.add(new)


def origin_names(code: types.CodeType) -> tuple[str, str]:
    """(name, qualname) of the user function that `code` is, or continues."""
    return _origin.get(code, (code.co_name, code.co_qualname))


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
    live_locals = tuple(name for name in live_locals if name != receiver)
    key = (target, stack_nulls, live_locals)
    per_code = _resume_codes.setdefault(code, {})
    found = per_code.get(key)
    if found is None:
        found = per_code[key] = _generate(code, target, stack_nulls, live_locals, len(per_code))
    return found


def _generate(code: types.CodeType, target: int, stack_nulls: tuple[bool, ...],
              live_locals: tuple[str, ...], serial: int) -> ResumeCode:
    original = Bytecode.from_code(code)
    cellvars = list(original.cellvars)
    freevars = list(original.freevars)
    closure_names = tuple(cellvars + freevars)

    def to_free(arg):
        return FreeVar(arg.name) if isinstance(arg, (CellVar, FreeVar)) else arg

    body: list = []
    target_label = Label()
    target_lineno = None
    index = 0
    for item in original:
        if isinstance(item, Instr):
            if index == target:
                place_label(body, target_label)
                target_lineno = item.lineno
            index += 1
            if item.name in ins.PREFIX_OPS:
                continue  # the new prologue sets the frame up
            item = item.copy()
            item.arg = to_free(item.arg)
        body.append(item)
    if target_lineno is None:
        target_lineno = code.co_firstlineno

    stack_args = [f"{STACK_PREFIX}{i}" for i, null in enumerate(stack_nulls) if not null]
    prologue: list[Instr] = []
    prologue += ins.copy_free_vars(len(closure_names))
    prologue += ins.resume()
    for i, null in enumerate(stack_nulls):
        prologue += ins.push_null() if null else ins.load_fast(f"{STACK_PREFIX}{i}")
    for name in stack_args:  # on the stack now; the frame's locals are the user's only
        prologue += ins.delete_fast(name)
    prologue += ins.jump_forward(target_label)
    for instr in prologue:
        instr.lineno = target_lineno

    suffix = f" #{serial}" if serial else ""
    receiver = super_receiver(code)
    first = [receiver] if receiver is not None else []
    new_code = continuation_code(code, original, prologue + body,
                                 first + stack_args + list(live_locals),
                                 closure_names, f"<resume at line {target_lineno}{suffix}>")
    return ResumeCode(new_code, tuple(live_locals), tuple(stack_nulls), closure_names)


def place_label(body: list, label: Label) -> None:
    """Append `label` for the instruction about to be appended, but before the
    pseudo-instructions just appended for it (a TryBegin opening a try block there): jumping
    past a TryBegin would leave its handler's stack depth unknown to the assembler."""
    at = len(body)
    while at and isinstance(body[at - 1], (TryBegin, TryEnd, Label)):
        at -= 1
    body.insert(at, label)


def continuation_code(code: types.CodeType, original: Bytecode, instructions: list,
                      argnames: list[str], closure_names: tuple[str, ...],
                      part: str) -> types.CodeType:
    """A code object that continues `code` (a resume or loop body function): these
    instructions, these positional arguments, `code`'s cells and free variables as its free
    variables, and the user function's name, qualified name, file and first line, so its
    frames look like the function's own in tracebacks, `sys._getframe()` and profiles.
    `part` says which part of the function it is (``<resume at line 12>``): `display_name`
    shows it in `explain()` and logs."""
    bc = Bytecode(instructions)
    bc.argnames = list(argnames)
    bc.argcount = len(argnames)
    bc.posonlyargcount = bc.kwonlyargcount = 0
    bc.cellvars = []
    bc.freevars = list(closure_names)
    bc.flags = original.flags & ~(CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS)
    if closure_names:
        bc.flags |= CompilerFlags.NESTED
    name, qualname = origin_names(code)
    bc.name, bc.qualname = name, qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.docstring = None
    new_code = bc.to_code()
    inherit_origin(new_code, code)
    _labels[new_code] = f"{qualname}.{part}"
    return new_code


def resume_function(resume: ResumeCode, globals_: dict, cells: tuple) -> types.FunctionType:
    """A function object for `resume` (what the emitted MAKE_FUNCTION builds; used in tests)."""
    return types.FunctionType(resume.code, globals_, resume.code.co_name, None, cells or None)
