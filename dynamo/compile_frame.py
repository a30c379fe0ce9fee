"""One frame, from the first trace to the transformed code.

In: a frame view from the C hook (code, globals, builtins, argument values, closure), a backend
and the compile options. Out (`trace_frame`): a `CompiledFrame` with the guard function, the
transformed code and the graph, or None when the frame holds nothing to compile; `Unsupported`
(with the user's file:line) when it cannot be captured, for `convert_frame` to decide what
happens then.

The translator (`symbolic_convert.InstructionTranslator`) runs over the frame's bytecode. Where
it meets something it cannot capture, the frame is traced a second time and stops there (a
graph break: `break_exits.break_kind` says how), so that the state at the break is exactly the
state before that instruction. A loop the break falls inside runs in Python with its body as a
function of its own (`loops.plan_loop`); a try statement's body becomes one when that captures
something (`speculate_try_body`). Translation always ends in `compile_subgraph`: the graph is
compiled with the values the rest of the frame needs as outputs, `codegen.transform_code` writes
the transformed code, and the guards are built (`guards.build_check_fn`).
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

from . import compat, config
from .codegen import BreakExit, ReturnExit, transform_code
from . import loop_kernels
from .exc import DataDependent, Unsupported, UserCodeError
from .break_exits import break_kind, kept_alive
from .guards import build_check_fn
from .loop_nest.sites import value_start
from .loops import plan_loop
from .output_graph import GraphResult, OutputGraph
from .region_body import BodyPlan
from .resume import empty_breaks, is_resume_code, plain_loop_reason
from .symbolic_convert import BudgetExceeded, InstructionTranslator
from .variables.base import NullVariable, VariableTracker
from .variables.callables import BuiltinVariable, MethodVariable
from .variables.constant import ConstantVariable
from .variables.containers import DictVariable, DictViewVariable, IteratorVariable, _Sequence
from .variables.functions import (ComprehensionVariable, GeneratorVariable, NestedFunctionVariable,
                                  escaped_cells)
from .variables.ndarray import ArrayRowIterator, NDArrayVariable

__all__ = ["CompiledFrame", "trace_frame", "compile_subgraph"]


@dataclass
class CompiledFrame:
    """The product of translating one frame: what goes into the C cache, plus debug views."""

    check_fn: Callable[..., bool]
    code: types.CodeType
    original_code: types.CodeType
    #: The compiled graph; None when the frame breaks before any operation was recorded.
    result: GraphResult | None
    #: Why the graph ended before the frame's return (a graph break), with file:line.
    break_reason: str | None = None
    seconds: float = 0.0



def trace_frame(frame: Any, backend: Callable, allow_breaks: bool = True,
                dynamic: bool | None = None) -> CompiledFrame | None:
    """Translate one frame. None: nothing to compile. Raises Unsupported when it cannot.

    Where the translator meets something it cannot capture, it traces the frame a second time
    and stops there (a graph break), so that the state at the break is exactly the state before
    that instruction (no half-applied handler left behind): the graph ends, the instruction runs
    in plain Python and a resume function continues the frame. ``allow_breaks=False``
    (``fullgraph=True``) raises instead."""
    started = time.perf_counter()
    code = frame.f_code
    plain = plain_loop_reason(code)
    if plain is not None:
        raise Unsupported(plain)
    break_at: tuple[int, str] | None = None
    raised = False  # the first trace ended in the user's own exception
    reason = None
    conditional: int | None = None  # (an if statement a kernel may run: `_conditional_entry`)
    while True:
        output = OutputGraph(code.co_name, backend, code=code, dynamic=dynamic)
        tx = InstructionTranslator(frame, code, output, break_at)
        if not allow_breaks or tx.info.sees_all_locals or tx.info.shadows_a_cell:
            tx.kernel_entries = set()  # (a kernel ends the graph before its loop)
        elif conditional is not None and break_at is None:
            tx.kernel_entries.add(conditional)
            tx.conditional_entries.add(conditional)
        tx.guard_operands = raised
        try:
            tx.run()
            if break_at is None and tx.break_exit is not None:  # (a loop that runs as one
                break_at, reason = tx.break_at, tx.break_exit.reason  # C kernel: `loop_kernels`)
            break
        except Unsupported as exc:
            if (not allow_breaks or break_at is not None or tx.info.sees_all_locals
                    or tx.info.shadows_a_cell):
                # (a frame that reads its locals by name would see a resume function's; a
                # comprehension shadowing a cell cannot be split: `CodeInfo.shadows_a_cell`)
                raise
            if conditional is None and isinstance(exc, DataDependent):
                conditional = _conditional_entry(tx)
                if conditional is not None:  # (traced again: a kernel may run the statement)
                    exc.with_traceback(None)
                    continue
            entry = tx.info.loop_entry(tx.index)
            if entry is not None:
                # Inside a loop: a break there would nest one resume function per iteration,
                # and a budget overrun means unrolling is too costly. The graph ends before the
                # loop; the loop and what follows run in plain Python.
                break_at = (entry, "loop")
            else:
                kind = None if isinstance(exc, BudgetExceeded) else break_kind(tx, tx.index, exc)
                if kind is None:
                    raise
                break_at = (tx.index, kind)
                raised = isinstance(exc, UserCodeError)
            # (without its traceback, which holds this frame: no reference cycle)
            failure = exc.with_traceback(None)
            failure.__context__ = failure.__cause__ = None  # their tracebacks hold frames too
            what = exc.reason
            if break_at[1] == "region":
                what = ("a try/with statement runs in plain Python inside the compiled code; a "
                        "resume function continues after it")
            reason = f"{what} at {exc.location}" if exc.location else what
    if tx.break_exit is not None:
        if break_at[1] == "kernel":
            _plan_kernel(tx, tx.break_exit)
        if break_at[1] == "loop":
            _plan_loop(tx, tx.break_exit, reason)
            if tx.break_exit.loop_plan is None and not tx.has_operations():
                raise failure  # nothing to compile before the loop or in it: plain Python
        if tx.break_exit.region_body is not None and not speculate_try_body(
                frame, code, backend, dynamic, tx.break_exit.region_body):
            tx.break_exit.region_body = None  # (the block runs in place, in this frame)
        if tx.break_exit.region_body is not None:
            kind = tx.break_exit.region_body.kind
            reason = reason.replace(
                "a try/with statement runs in plain Python inside the compiled code",
                f"a {kind} statement runs in plain Python inside the compiled code, its body "
                "as a function of its own (compiled)")
        tx.break_exit.reason = reason
        return compile_subgraph(tx, tx.break_exit, started)
    cells = {name: tx.locals[name] for name in sorted(tx.cells_written) if name in tx.locals}
    return compile_subgraph(tx, ReturnExit(tx.return_value, cells=cells), started)


def _conditional_entry(tx: InstructionTranslator) -> int | None:
    """Where the ``if`` statement whose condition the trace could not decide starts (the start
    of its condition: `loop_nest.sites.value_start`), when a C kernel may run it
    (`loop_kernels`, `loop_nest.sites.if_at`: the C backend, outside loops and try/with
    statements), or None."""
    index = tx.index
    inst = tx.instructions[index] if index is not None else None
    if (inst is None or not inst.name.startswith("POP_JUMP") or tx.frame.f_code is not tx.code
            or not loop_kernels.wants_kernels(tx)):
        return None
    info = tx.info
    if info.outermost_loop(index) is not None or info.in_exception_block(index):
        return None
    return value_start(info, index)


def speculate_try_body(frame: Any, code: types.CodeType, backend: Callable,
                       dynamic: bool | None, body: BodyPlan) -> bool:
    """Is it worth running a ``try`` statement's body as a function of its own? Only if the
    body captures something before its first graph break: traced once more, into the body as
    if it were not protected (`InstructionTranslator.speculated_body`), up to the first thing
    the translator cannot capture or the way out of the body, the graph must have gained an
    operation. Otherwise the block runs in place, inside the transformed code's copy of the
    statement: in this frame, so a function it calls sees this frame as its caller
    (``sys._getframe(1)``, a tracer it starts with ``f_back.f_trace``: CPython's
    test_sys_settrace settrace_and_raise), as in plain Python. (A ``with`` body, entered
    through its manager's ``__enter__``, always becomes a function: NumPy code under
    ``np.errstate``.)"""
    if body.kind != "try":
        return True
    tx = InstructionTranslator(frame, code, OutputGraph(code.co_name, backend, code=code,
                                                        dynamic=dynamic))
    tx.speculated_body = body
    try:
        tx.run()
    except Unsupported as exc:  # (where capture stops: the operations before it are what counts)
        exc.with_traceback(None)  # (its traceback holds this frame: no reference cycle)
    return tx.ops_before_body is not None and tx.operation_count() > tx.ops_before_body


def _plan_kernel(tx: InstructionTranslator, exit: BreakExit) -> None:
    """The graph ends before a loop that runs as one C kernel (`loop_kernels`, planned where the
    trace stopped): the loop is the graph's last node, every local is stored after the graph,
    and the driver consumes the range on the stack."""
    found = exit.loop_plan
    bound = frozenset(name for name in exit.locals if name not in tx.deleted)
    exit.loop_plan = dataclasses.replace(found, bound_before=bound | exit.untouched_args
                                         ).add_to_graph(tx, exit)
    exit.consumed = len(exit.stack)
    exit.continuations = [(exit.index, 0, tuple(sorted(bound)))]


def _plan_loop(tx: InstructionTranslator, exit: BreakExit, reason: str) -> None:
    """The graph ends before a loop: run it in Python, with its body as a function of its own
    when it is a ``for`` loop that fits (`loops.plan_loop`); else the loop and the rest of the
    frame run in plain Python."""
    index = exit.index
    line = tx.instructions[index].lineno
    bound = frozenset(name for name in (*tx.locals, *exit.untouched_args) if name not in tx.deleted)
    iterates = tx.instructions[index].name == "GET_ITER"
    plan = None
    if len(exit.stack) == (1 if iterates else 0):  # the iterable only, or nothing
        plan = plan_loop(tx.code, index, bound)
    if plan is None:
        exit.plain_loop = f"the loop at line {line} runs in plain Python: {reason}"
        return
    # (the locals the loop leaves alone and nothing after it reads stay alive past it, as at
    # any other break: see loops.LoopPlan.through)
    cheap = kept_alive(tx, exit.untouched_args)
    through = tuple(sorted(cheap - set(plan.carried) - plan.assigned))
    # (a value a kept local has before the loop lives until an iteration rebinds it)
    kept_before = tuple(name for name in plan.kept if name in cheap)
    plan = dataclasses.replace(plan, through=through, kept_before=kept_before)
    exit.loop_plan = plan
    exit.consumed = len(exit.stack)
    # (what is stored before the driver runs)
    exit.continuations = [(index, 0, plan.carried + through + kept_before)]


def _count_empty_break(tx: InstructionTranslator, exit: BreakExit) -> None:
    """A graph break with no graph before it: count it with the breaks in a row that led to
    this frame. Every break compiles a resume function holding the rest of the function, so k
    such breaks (280 attribute reads through ``__getattr__``) cost compile time quadratic in k,
    for nothing: without a graph the transformed code only does in Python what the original
    does (side effects replayed, values passed on). Past `config.max_empty_breaks` the frame is
    not compiled and the rest of the function runs in plain Python."""
    exit.empty_breaks = empty_breaks(tx.code) + 1
    limit = config.max_empty_breaks
    if exit.empty_breaks > limit:
        raise Unsupported(
            f"{limit} graph breaks in a row captured no graph: the rest of the function runs "
            f"in plain Python (dynamo.config.max_empty_breaks = {limit}); the next break: "
            f"{exit.reason}")


#: Builtins that can reach objects a frame did not get (modules, other frames' values): a frame
#: that names one may meet NumPy after a break.
_REACHING_BUILTINS = frozenset({"__import__", "eval", "exec", "globals", "locals", "vars",
                                "getattr", "compile", "breakpoint", "input", "open"})
#: Instructions that read a value from outside the frame's own locals and constants (besides
#: LOAD_GLOBAL; cells and free variables are refused before).
_OUTSIDE_READS = frozenset({"LOAD_NAME", "IMPORT_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


def _inert(vt: VariableTracker) -> bool:
    """`vt` cannot lead to a NumPy value: NULL, a literal of the code or a builtin."""
    if isinstance(vt, NullVariable):
        return True
    if isinstance(vt, ConstantVariable):
        return vt.source is None and isinstance(
            vt.value, (type(None), bool, int, float, complex, str, bytes))
    if isinstance(vt, BuiltinVariable):
        name = getattr(vt.fn, "__name__", None)
        return (isinstance(name, str) and name not in _REACHING_BUILTINS
                and getattr(builtins, name, None) is vt.fn)
    return False


def nothing_after_break(tx: InstructionTranslator, exit: BreakExit) -> bool:
    """True when nothing of this frame can be captured, at this break or after it, for any
    arguments: no graph and no guard before the break but on builtins' names (what the trace
    saw did not depend on the arguments), every value the rest of the frame gets from the
    trace is a literal of the code or a builtin, and its own bytecode reads no global but
    builtins and no closure. Its own instructions then only ever see literals, builtins and
    what those make (functions it calls go through the hook themselves), so the frame runs its
    original code for good instead of transformed code and resume functions doing the same in
    Python: a traceback, ``dis.distb()`` or ``frame.f_code`` shows the user's code, as without
    capture."""
    code = tx.code
    # (a builtin's "not shadowed by a global" guard: the scan below checks the same, and the
    # original code reads whatever the name is on every call)
    if (any(guard.kind != "NOT_IN_GLOBALS" for guard in tx.output.guards)
            or exit.region_body is not None or exit.loop_plan is not None
            or code.co_cellvars or code.co_freevars or is_resume_code(code)):
        return False
    if not all(_inert(vt) for vt in exit.stack):
        return False
    for _, _, live in exit.continuations:
        for name in live:
            if name in exit.locals:
                if not _inert(exit.locals[name]):
                    return False
            elif name in exit.untouched_args or name in tx.argnames:
                return False  # (an argument: anything)
    f_globals = tx.frame.f_globals
    for inst in tx.info.instructions:
        if inst.name in _OUTSIDE_READS:
            return False
        if inst.name == "LOAD_GLOBAL":
            name = compat.global_name(inst)
            if name in f_globals or name in _REACHING_BUILTINS or not hasattr(builtins, name):
                return False
    return True


def compile_subgraph(tx: InstructionTranslator, exit: ReturnExit | BreakExit,
                     started: float) -> CompiledFrame | None:
    """The one way a trace ends: compile the graph so far with the values the rest of the frame
    needs as outputs, and write the transformed code that calls it and then returns (at a
    return) or runs the unsupported instruction and calls a resume function (at a break)."""
    if isinstance(exit, ReturnExit):
        values = _graph_values(exit.value, [])
        for vt in exit.cells.values():
            _graph_values(vt, values)
        single = (isinstance(exit.value, NDArrayVariable) and exit.value.node.op != "placeholder"
                  and not exit.cells)
    else:
        values = []
        for vt in exit.stack:
            _graph_values(vt, values)
        names = set(tx.code.co_cellvars)
        for _, _, live in exit.continuations:
            names.update(live)
        for name in sorted(names):
            if name in exit.locals:
                _graph_values(exit.locals[name], values)
        values += [vt for _, vt in getattr(exit.loop_plan, "graph_locals", ())]
        single = False
    effects = tx.side_effects
    for vt in effects.values():
        _graph_values(vt, values)
    if effects:
        single = False
    exit.side_effects = effects
    location = tx.user_location()
    result = tx.output.compile(values, started, single_output=single)
    if result is None and isinstance(exit, ReturnExit) and not effects and not exit.cells:
        return None
    if isinstance(exit, BreakExit) and result is None and not effects and \
            nothing_after_break(tx, exit):
        return None
    if (isinstance(exit, BreakExit) and result is None and exit.region is None
            and exit.loop_plan is None):
        _count_empty_break(tx, exit)
    try:
        new_code = transform_code(tx.code, result, exit, tx.lineno)
    except Unsupported as exc:
        exc.location = exc.location or location
        raise
    # (after the code is written: rebuilding a size at a break may fix it, a fact to guard)
    guards = tx.output.final_guards()
    tx.output.shape_env.frozen = True
    dump_folder = result.graph_module.meta.get("dump_folder") if result is not None else None
    check_fn = build_check_fn(guards, list(tx.argnames), tx.code.co_name,
                              os.path.join(dump_folder, "guards.py") if dump_folder else None)
    check_fn.graph_module = result.graph_module if result is not None else None
    if result is not None:
        result.compile_seconds = time.perf_counter() - started
    return CompiledFrame(check_fn=check_fn, code=new_code, original_code=tx.code, result=result,
                         break_reason=exit.reason if isinstance(exit, BreakExit) else None,
                         seconds=time.perf_counter() - started)


def _graph_values(vt: VariableTracker, found: list[NDArrayVariable],
                  inside: tuple = ()) -> list[NDArrayVariable]:
    if any(vt is outer for outer in inside):  # (rebuilding it would never end)
        raise Unsupported(f"a {vt.describe()} that contains itself (a reference cycle) cannot "
                          "be rebuilt after the graph")
    inside = (*inside, vt)
    if isinstance(vt, NDArrayVariable):
        found.append(vt)
    elif isinstance(vt, (_Sequence, DictVariable)) and vt.source is None:
        for item in (vt.items if isinstance(vt, _Sequence) else vt.items.values()):
            _graph_values(item, found, inside)
    elif isinstance(vt, DictViewVariable):  # (rebuilt from its dict)
        _graph_values(vt.d, found, inside)
    elif isinstance(vt, MethodVariable):  # ``x.item`` waiting to be called after a break
        _graph_values(vt.obj, found, inside)
    elif isinstance(vt, GeneratorVariable):  # (rebuilt over its iterable, if not started)
        _graph_values(vt.iterable, found, inside)
        for value in escaped_cells(vt.function.cells):
            _graph_values(value, found, inside)
    elif isinstance(vt, ComprehensionVariable):
        for value in escaped_cells(vt.cells):
            _graph_values(value, found, inside)
    elif isinstance(vt, ArrayRowIterator):  # (rebuilt over its array)
        _graph_values(vt.array, found, inside)
    elif isinstance(vt, IteratorVariable) and getattr(vt, "sources", None) is not None:
        for source in vt.sources:  # (a zip or enumerate: rebuilt over its iterators)
            _graph_values(source, found, inside)
    elif isinstance(vt, IteratorVariable):  # the items it has not produced yet
        for item in vt.items[vt.index:]:
            _graph_values(item, found, inside)
    elif isinstance(vt, NestedFunctionVariable):  # its defaults and cells are rebuilt with it
        for part in (vt.defaults, vt.kwdefaults, vt.annotations, *escaped_cells(vt.cells)):
            if part is not None:
                _graph_values(part, found, inside)
    return found

