"""Break exits: where a trace may end at a graph break, and how the frame continues after it.

When the translator meets something it cannot capture, `compile_frame.trace_frame` asks
`break_kind` whether the trace may end at that instruction, and how ("at": the instruction runs
in plain Python between the graph and a resume function; "before": the resume function starts
with it; "region": a try/with statement runs in plain Python, its body maybe as a function of
its own). The second trace stops there and `break_exit` describes what the transformed code must
do (`codegen.BreakExit`): which stack values and locals to rebuild, which instructions to run in
Python, and the continuations (resume functions) with the locals each needs.

In: the translator stopped at the break (its stack, locals and code facts). Out: a `BreakExit`.
The locals passed on are those the rest of the frame reads, plus the ones that cost nothing to
keep alive (`kept_alive`), so lifetimes and ``f_locals`` stay as in plain Python.
"""

from __future__ import annotations

import dis
import types
import warnings

import numpy as np
from bytecode import Instr

from . import compat, config
from . import instructions as ins
from .codegen import BreakExit
from .exc import Unsupported, UserCodeError
from .guards import Guard
from .region_body import plan_region_body
from .resume import STACK_PREFIX, in_loop_body
from .source import AttrSource, TypeSource
from .variables.base import NullVariable
from .variables.callables import UserObjectVariable
from .variables.constant import ConstantVariable
from .variables.constant import _immutable as is_immutable
from .variables.functions import NestedFunctionVariable
from .variables.lazy import LazyVariable, realize
from .variables.operators import NAMED_BINARY_OPS

__all__ = ["break_kind", "break_exit", "kept_alive", "region_at", "BREAKABLE"]

#: Instructions that may end a graph: run in plain Python between two graphs. Each consumes a
#: known number of stack values and pushes values that are never NULL.
BREAKABLE = frozenset({
    "CALL", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "STORE_SUBSCR", "COMPARE_OP",
    "CONTAINS_OP", "UNARY_NOT", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "FORMAT_VALUE",
    "BUILD_STRING", "LOAD_ATTR", "STORE_ATTR", "STORE_GLOBAL", "GET_ITER", "UNPACK_SEQUENCE",
    "IMPORT_NAME",
    "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_FALSE", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
    # 3.12+
    "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1",
    "LOAD_SUPER_ATTR",
    # 3.13
    "TO_BOOL", "CALL_KW", "CONVERT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC",
    # 3.10
    "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", *NAMED_BINARY_OPS,
})
CONDITIONAL_JUMPS = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"})


def break_kind(tx, index: int, exc: Unsupported) -> str | None:
    """How the trace may end at instruction `index`, which raised `exc`:

    * ``"at"``: run that instruction in plain Python between the graph and a resume function
      that continues after it (calls, data-dependent branches, ...);
    * ``"before"``: end the graph before it; the resume function starts with it (and, if the
      translator cannot handle it there either, runs in plain Python). Only worth it when the
      graph holds operations.
    * ``"region"``: a ``try``/``with`` statement starts there: the graph ends before it,
      the statement runs in plain Python inside the transformed code (its handlers, exit
      calls and tracebacks are the real ones), and a resume function continues after it.
    * None: no break here; the frame runs in plain Python.

    Never inside a loop (every iteration would nest one more resume function), and an
    instruction inside a ``try``/``with`` block never runs outside its handler."""
    if tx.info.in_loop(index):
        return None  # (the caller ends the graph before the loop instead)
    if region_at(tx, index) is not None:
        return "region"
    inst = tx.instructions[index]
    if inst.name in ("DELETE_FAST", "STORE_FAST") and \
            not tx.info.in_exception_block(index) and not isinstance(exc, UserCodeError):
        return "at"  # (`check_drop`; a ``del`` of an unbound local raises in plain Python)
    # (3.12+: a LOAD_ATTR with the method bit pushes a NULL, as 3.11's LOAD_METHOD)
    if (inst.name in BREAKABLE and not compat.attr_is_method(inst)
            and not tx.info.in_exception_block(index)):
        return "at"
    # Not between KW_NAMES and its CALL: the keyword names are translator state, not a
    # stack value, so a resume function starting there would lose them.
    if tx.has_operations() and not tx.kw_names:
        return "before"
    return None

def kept_alive(tx, untouched: frozenset[str]) -> frozenset[str]:
    """Locals the rest of the frame never reads that are passed on anyway, because passing
    them costs nothing (no graph output, no guard: the resume function never looks at
    them): as in plain Python, they stay alive (and in ``f_locals``) until the function
    returns, so finalizers and weak references see the same lifetimes. Array values
    computed by the graph are not kept: that would make every dead intermediate an
    output."""
    cells = (*tx.code.co_cellvars, *tx.code.co_freevars)  # (they travel as cells)
    kept = {name for name in untouched if name not in cells}
    for name, vt in tx.locals.items():
        if name in tx.deleted or name.startswith(STACK_PREFIX) or name in cells:
            continue
        # (a function made in the frame too: rebuilt by one MAKE_FUNCTION, and a frame
        # taken from a traceback shows it in f_locals, as in plain Python)
        if isinstance(vt, (LazyVariable, NestedFunctionVariable)) or \
                getattr(vt, "source", None) is not None or (
                isinstance(vt, ConstantVariable) and is_immutable(vt.value)):
            kept.add(name)
    return frozenset(kept)

def region_at(tx, index: int):
    """The `bytecode_analysis.Region` of a ``try``/``with`` statement starting at `index`
    with the current stack and locals, or None."""
    if tx.kw_names or any(isinstance(vt, NullVariable) for vt in tx.stack):
        return None
    return tx.info.region(index, len(tx.stack), region_bound(tx, index))

def region_bound(tx, index: int) -> frozenset[str]:
    """The locals the transformed code has bound when a try/with statement starts (the
    ones it stores before it, see graph_break_exit, and the untouched arguments)."""
    untouched = frozenset(name for name in tx.argnames
                          if name not in tx.locals and name not in tx.deleted)
    bound = frozenset(name for name in (*tx.locals, *tx.argnames)
                      if name not in tx.deleted)
    present = (tx.info.live_locals(index) & bound) | kept_alive(tx, untouched)
    cells = set(tx.code.co_cellvars) | set(tx.code.co_freevars)
    return frozenset(name for name in present if name not in cells)


def never_swallows(tx, index: int) -> bool:
    """Is the statement at `index` a ``with`` whose context manager's ``__exit__`` never
    returns true (never swallows an exception)? Known for ``np.errstate`` and
    ``warnings.catch_warnings`` made in the frame, and for an object of a Python class
    (its type is guarded) whose ``__exit__`` returns only None or False constants."""
    if tx.instructions[index].name not in ("BEFORE_WITH", "SETUP_WITH") or not tx.stack:
        return False
    tx.stack[-1] = realize(tx.stack[-1])  # (what it is: guarded, as the answer needs)
    return manager_never_swallows(tx.stack[-1], tx)

def break_exit(tx) -> BreakExit:
    """How the frame continues when the trace stops before instruction `tx.ip`."""
    index, kind = tx.break_at
    inst = tx.instructions[index]
    if kind == "region":
        region = region_at(tx, index)
        if region is None:
            raise AssertionError("the try/with region changed between the two traces")
        untouched = frozenset(name for name in tx.argnames
                              if name not in tx.locals and name not in tx.deleted)
        live = tuple(sorted(tx.info.live_locals(index) | kept_alive(tx, untouched)))
        body = None
        if config.capture_try_bodies:
            body = plan_region_body(tx.code, region, len(tx.stack),
                                    region_bound(tx, index), never_swallows(tx, index))
        return BreakExit(index=index, reason="", stack=list(tx.stack),
                         consumed=len(tx.stack), run=[], locals=dict(tx.locals),
                         continuations=[(index, 0, live)], untouched_args=untouched,
                         region=region, region_body=body)
    if kind == "at" and inst.name in ("DELETE_FAST", "STORE_FAST"):
        return _drop_exit(tx, index, inst)
    span = 1  # (how many of the frame's instructions `run` stands for)
    pushed_layout = None  # (NULL slots the continuation's stack has that `run` did not push)
    if kind in ("before", "loop", "kernel"):
        run: list[Instr] = []
        consumed = 0
    elif inst.name == "CALL":
        run = ins.call_sequence(inst.arg, tx.kw_names)
        consumed = inst.arg + 2
    elif bool_then_jump(tx, index):
        # (3.13: ``if x:`` is TO_BOOL then the jump; both run in Python, so the break is
        # the one 3.12 and earlier make at the jump: two continuations)
        run = [Instr(inst.name, inst.arg), tx.instructions[index + 1].copy()]
        consumed, span = 1, 2
    elif inst.name == "LOAD_SUPER_ATTR" and inst.arg[0]:
        # (3.12+ ``super().f``: run without the method bit, which would push a NULL; the
        # resume function puts the NULL back itself, where the CALL after it expects one)
        run = [Instr(inst.name, (False, *inst.arg[1:]))]
        consumed = 3
        pushed_layout = (False, True) if compat.NULL_AFTER_CALLABLE else (True, False)
    elif inst.name in CONDITIONAL_JUMPS or inst.name == "UNARY_NOT":
        # (3.13's jumps and ``not`` read exact bools: the user's COMPARE_OP cast its result,
        # the graph's is a NumPy bool: cast it first)
        run = ins.to_bool() + [Instr(inst.name, inst.arg)]
        consumed = 1
    else:
        run = [Instr(inst.name, inst.arg)]
        consumed = -inst.pre_and_post_stack_effect(jump=False)[0]
    for instr in run:  # (the user's line and columns: a traceback through it shows them)
        instr.location = inst.location
    targets = [(index + span if run else index, False)]
    if run and run[-1].has_jump():
        targets.append((tx.info.target(index + span - 1), True))
    untouched = frozenset(name for name in tx.argnames
                          if name not in tx.locals and name not in tx.deleted)
    kept = kept_alive(tx, untouched)
    continuations = []
    for target, jumped in targets:
        pushed = consumed + sum(i.stack_effect(jump=jumped and i is run[-1]) for i in run)
        names = tx.info.live_locals(target) | kept
        continuations.append((target, pushed_layout or pushed, tuple(sorted(names))))
    return BreakExit(index=index, reason="", stack=list(tx.stack), consumed=consumed,
                     run=run, locals=dict(tx.locals), continuations=continuations,
                     untouched_args=untouched)

def _drop_exit(tx, index: int, inst: Instr) -> BreakExit:
    """The graph ends at a ``del x`` (or a store into `x`) that may free an object whose
    death runs code (`check_drop`): the transformed code lets go of the old value right
    there (it is not passed on, and an argument slot holding it is cleared), then the resume
    function continues after the ``del``, or runs the store itself (the new value is on
    its stack; `x` unbound)."""
    name = inst.arg
    if in_loop_body(tx.code):
        # (decided again for its guards: the trace that decided stopped at this instruction,
        # and a version without them would take values it was not decided on)
        tx.drop_runs_code(name)
    target = index + 1 if inst.name == "DELETE_FAST" else index
    untouched = frozenset(n for n in tx.argnames
                          if n not in tx.locals and n not in tx.deleted and n != name)
    live = (tx.info.live_locals(target) | kept_alive(tx, untouched)) - {name}
    return BreakExit(index=index, reason="", stack=list(tx.stack), consumed=0, run=[],
                     locals={n: vt for n, vt in tx.locals.items() if n != name},
                     continuations=[(target, 0, tuple(sorted(live)))],
                     untouched_args=untouched)

def bool_then_jump(tx, index: int) -> bool:
    """A TO_BOOL followed by the conditional jump that reads its result (3.13)."""
    return (tx.instructions[index].name == "TO_BOOL" and index + 1 < len(tx.instructions)
            and tx.instructions[index + 1].name in CONDITIONAL_JUMPS)


def manager_never_swallows(vt, tx) -> bool:
    """Does the context manager tracked by `vt` never swallow an exception (its ``__exit__``
    never returns true)? Only what is known for sure: ``np.errstate`` and
    ``warnings.catch_warnings`` made in the frame (their type is certain), and an object of a
    Python class read from a guarded source (`UserObjectVariable`: its type is guarded) whose
    ``__exit__`` is a plain function returning only None or False constants: that function and
    its code are guarded too (a class can be given another ``__exit__``)."""
    if isinstance(vt, ConstantVariable):
        return vt.source is None and type(vt.value) in (np.errstate, warnings.catch_warnings)
    if isinstance(vt, UserObjectVariable):
        # Looked up in the class dicts, never through a descriptor's __get__ (that runs code).
        exit_fn = next((vars(klass)["__exit__"] for klass in type(vt.value).__mro__
                        if "__exit__" in vars(klass)), None)
        if not (isinstance(exit_fn, types.FunctionType) and _returns_only_falsy(exit_fn.__code__)
                and vt.source is not None):
            return False
        exit_source = AttrSource(TypeSource(vt.source), "__exit__")
        tx.output.add_guard(Guard(exit_source, "ID_MATCH", Guard.identity(exit_fn)))
        tx.output.add_guard(Guard(AttrSource(exit_source, "__code__"), "ID_MATCH",
                                  Guard.identity(exit_fn.__code__)))
        return True
    return False


def _returns_only_falsy(code: types.CodeType) -> bool:
    if code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generator, coroutine, async generator
        return False
    previous = None
    for inst in dis.get_instructions(code):
        if inst.opname in ("RETURN_VALUE", "RETURN_CONST") and inst.is_jump_target:
            return False  # (the value may come from another way there)
        if inst.opname == "RETURN_VALUE":
            if previous is None or previous.opname != "LOAD_CONST" or \
                    previous.argval not in (None, False):
                return False
        elif inst.opname == "RETURN_CONST" and inst.argval not in (None, False):
            return False
        if inst.opname not in ("EXTENDED_ARG", "CACHE"):
            previous = inst
    return True
