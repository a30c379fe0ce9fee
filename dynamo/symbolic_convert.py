"""The symbolic bytecode translator: simulates a frame's CPython 3.11 bytecode on
VariableTrackers, recording NumPy operations into the OutputGraph.

Input: a frame view from the C hook (code, globals, builtins, argument values, closure) and a
backend. Output (`trace_frame`): a `CompiledFrame` with the guard function, the transformed code
and the graph, or None when the frame holds nothing to compile. Code the translator cannot
capture raises `Unsupported` with the user's file:line; `convert_frame` decides what happens then.

One handler method per opcode, named after it; the dispatch table is built once per class.
"""

from __future__ import annotations

import builtins
import dataclasses
import gc
import inspect
import operator
import os
import sys
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from bytecode import CellVar, FreeVar, Instr, Label
from bytecode.instr import BinaryOp, Compare

from fx.names import held_by

from . import compat, config
from . import instructions as ins
from .bytecode_analysis import code_info
from .codegen import BreakExit, ReturnExit, argument_names, transform_code
from .exc import Unsupported, UserCodeError
from .guards import Guard, build_check_fn
from .inline import Home
from .loops import UNBOUND, plan_loop
from .region_body import BodyPlan, exit_never_swallows, plan_region_body
from .output_graph import GraphResult, OutputGraph, source_line
from .resume import (STACK_PREFIX, empty_breaks, in_loop_body, is_resume_code, passed_cells,
                     plain_loop_reason, prologue_length)
from .side_effects import SideEffects
from .source import (ClosureCellSource, ClosureSource, GetItemSource, GlobalSource,
                     LocalSource, Source, guard_parameter)
from .variables import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    IteratorVariable,
    ListVariable,
    MethodVariable,
    NDArrayVariable,
    NullVariable,
    NumpyFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    VariableBuilder,
    VariableTracker,
)
from .variables.builder import wrap_constant
from .variables.constant import _immutable as is_immutable
from .variables.constant import (SymIntVariable, UnspecializedScalarVariable, run_user_op,
                                 user_error)
from .variables.containers import DictViewVariable, _iterator_at, _positioned, _Sequence, iterate
from .variables.lazy import LazyVariable, realize
from .variables.opaque import OpaqueObjectVariable

__all__ = ["InstructionTranslator", "CompiledFrame", "trace_frame"]

BINARY_OPS: dict[BinaryOp, Callable] = {
    BinaryOp.ADD: operator.add, BinaryOp.AND: operator.and_, BinaryOp.FLOOR_DIVIDE: operator.floordiv,
    BinaryOp.LSHIFT: operator.lshift, BinaryOp.MATRIX_MULTIPLY: operator.matmul,
    BinaryOp.MULTIPLY: operator.mul, BinaryOp.REMAINDER: operator.mod, BinaryOp.OR: operator.or_,
    BinaryOp.POWER: operator.pow, BinaryOp.RSHIFT: operator.rshift, BinaryOp.SUBTRACT: operator.sub,
    BinaryOp.TRUE_DIVIDE: operator.truediv, BinaryOp.XOR: operator.xor,
    BinaryOp.INPLACE_ADD: operator.iadd, BinaryOp.INPLACE_AND: operator.iand,
    BinaryOp.INPLACE_FLOOR_DIVIDE: operator.ifloordiv, BinaryOp.INPLACE_LSHIFT: operator.ilshift,
    BinaryOp.INPLACE_MATRIX_MULTIPLY: operator.imatmul, BinaryOp.INPLACE_MULTIPLY: operator.imul,
    BinaryOp.INPLACE_REMAINDER: operator.imod, BinaryOp.INPLACE_OR: operator.ior,
    BinaryOp.INPLACE_POWER: operator.ipow, BinaryOp.INPLACE_RSHIFT: operator.irshift,
    BinaryOp.INPLACE_SUBTRACT: operator.isub, BinaryOp.INPLACE_TRUE_DIVIDE: operator.itruediv,
    BinaryOp.INPLACE_XOR: operator.ixor,
}

#: In-place operator -> the operator Python falls back to when the left side is immutable.
INPLACE_FALLBACK = {
    operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imul: operator.mul,
    operator.imod: operator.mod, operator.ior: operator.or_, operator.ipow: operator.pow,
    operator.irshift: operator.rshift, operator.isub: operator.sub, operator.itruediv: operator.truediv,
    operator.ixor: operator.xor,
}

COMPARE_OPS = {
    Compare.LT: operator.lt, Compare.LE: operator.le, Compare.EQ: operator.eq,
    Compare.NE: operator.ne, Compare.GT: operator.gt, Compare.GE: operator.ge,
}
# (3.13: the same comparisons with the result made a bool, for a conditional jump after them)
COMPARE_OPS.update({getattr(Compare, f"{c.name}_CAST"): op for c, op in list(COMPARE_OPS.items())
                    if hasattr(Compare, f"{c.name}_CAST")})

#: (3.10) the binary operators' own instructions
NAMED_BINARY_OPS: dict[str, Callable] = {
    f"{prefix}_{name}": op
    for name, plain, inplace in [
        ("ADD", operator.add, operator.iadd), ("SUBTRACT", operator.sub, operator.isub),
        ("MULTIPLY", operator.mul, operator.imul),
        ("TRUE_DIVIDE", operator.truediv, operator.itruediv),
        ("FLOOR_DIVIDE", operator.floordiv, operator.ifloordiv),
        ("MODULO", operator.mod, operator.imod), ("POWER", operator.pow, operator.ipow),
        ("MATRIX_MULTIPLY", operator.matmul, operator.imatmul),
        ("LSHIFT", operator.lshift, operator.ilshift),
        ("RSHIFT", operator.rshift, operator.irshift),
        ("AND", operator.and_, operator.iand), ("OR", operator.or_, operator.ior),
        ("XOR", operator.xor, operator.ixor)]
    for prefix, op in (("BINARY", plain), ("INPLACE", inplace))
}

UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert}

#: Types whose equal values are one object (a value, which guards check, settles identity).
_UNIQUE_PER_VALUE = (type(None), bool, type(Ellipsis), type(NotImplemented), type,
                     types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


def _dict_key(key: VariableTracker) -> Any:
    """The value of a key put into a dict tracker. The dict keeps the value, not the tracker,
    and is rebuilt from it (a constant of the code): a key found only by identity (NaN) would
    be another object than the frame's."""
    value = key.as_python_constant()
    if _unequal_to_itself(value):
        raise Unsupported(f"a dict key unequal to itself ({key.describe()})")
    return value


def _unequal_to_itself(value: Any) -> bool:
    """NaN, or a value whose ``==`` is not reflexive (containers then match it only by
    identity)."""
    try:
        return not bool(value == value)
    except Exception:  # noqa: BLE001 - no plain answer: treat it as odd
        return True


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


class InstructionTranslator:
    """Translates the frame being compiled (its arguments and closure come from the C hook)."""

    # The module the code being translated belongs to. A function made by it (``def``,
    # ``lambda``, a comprehension) reads its globals there too, wherever it is called.
    #: reads a global name (None: the frame's own `load_global`)
    global_loader: Callable[[str], VariableTracker] | None = None
    #: the ``__globals__`` of functions made by this code (None: the frame's own)
    namespace: dict | None = None
    #: its ``__name__`` (warnings name it; None: the frame's own)
    module_name: str | None = None

    def __init__(self, frame: Any, code: types.CodeType, output: OutputGraph,
                 break_at: tuple[int, str] | None = None) -> None:
        self.frame = frame
        self.code = code
        self.output = output
        self.argnames = argument_names(self.code)
        #: a resume function's cell variables whose argument slot holds a cell of the original
        #: frame (at hook time: the cell object itself)
        self.passed_cells = passed_cells(code)
        self.info = code_info(code)
        self.instructions: list[Instr] = self.info.instructions
        self.labels: dict[Label, int] = self.info.labels
        #: (instruction index, "at" or "before"): end the graph there (a graph break); set on the
        #: second pass, once the first pass has found where capture must stop.
        self.break_at = break_at
        #: set when the user's code raises at `break_at` for these values (`UserCodeError`): the
        #: trace stops before the instruction, so its operands are looked at (guarded) there,
        #: or the entry would also match the next call that does not raise
        #: (raise_on_empty_args_unguarded)
        self.guard_operands = False
        self.break_exit: BreakExit | None = None
        self.index: int | None = 0  # the instruction being run
        self.stack: list[VariableTracker] = []
        self.locals: dict[str, VariableTracker] = {}
        self.deleted: set[str] = set()
        #: cell variables assigned while tracing (their cells get the values at a return: a
        #: closure made in the frame may be returned or stored)
        self.cells_written: set[str] = set()
        self.ip = 0
        if self.passed_cells:  # (its prologue puts cells into slots: nothing to trace there)
            self.ip = prologue_length(self.instructions)
        self.lineno = self.code.co_firstlineno
        self.kw_names: tuple[str, ...] = ()
        self.return_value: VariableTracker | None = None
        self.steps = 0
        # (CPU time of this thread, not wall time: other processes' load does not change how
        # far a loop is unrolled, so a frame's graphs do not depend on how busy the machine is)
        self.deadline = time.thread_time() + config.max_trace_seconds
        #: changes to objects from outside the frame, replayed after the graph (root only)
        self.side_effects = SideEffects()
        #: (`speculate_try_body`) the try statement's body plan to trace into as if unprotected,
        #: and how many operations the graph held when the body started
        self.speculated_body: BodyPlan | None = None
        self.ops_before_body: int | None = None

    # Driver ----------------------------------------------------------------------------------

    def run(self) -> None:
        while self.return_value is None:
            if self.break_at is not None and self.ip == self.break_at[0]:
                if self.guard_operands:
                    self.stack[:] = [realize(vt) for vt in self.stack]
                self.break_exit = self.graph_break_exit()
                return
            if self.steps & 255 == 255 or self.total_steps() > config.max_instructions:
                self.check_budget()
            body = self.speculated_body
            if body is not None:
                if self.ops_before_body is None and self.ip == body.region_start:
                    self.ops_before_body = self.operation_count()
                    self.ip = body.entry  # (3.10: past the statement's SETUP_FINALLY)
                elif self.ops_before_body is not None and self.ip not in body.members:
                    return  # (out of the body: the speculation has seen what it needed)
            self.index = self.ip
            inst = self.instructions[self.ip]
            self.ip += 1
            self.steps += 1
            if inst.lineno is not None:
                self.lineno = inst.lineno
            handler = self.dispatch.get(inst.name)
            try:
                if self.info.in_exception_block(self.index) and not (
                        body is not None and self.ops_before_body is not None):
                    raise Unsupported("try/except and with blocks are not supported yet")
                if handler is None:
                    raise Unsupported(f"the bytecode {inst.name} is not supported yet")
                handler(self, inst)
            except Unsupported as exc:
                if exc.location is None:
                    exc.location = self.user_location()
                raise

    def total_steps(self) -> int:
        return self.steps

    def check_budget(self) -> None:
        """Tracing stops when a frame (with everything inlined into it) has run too many
        instructions or for too long: long unrolled loops are left to Python instead."""
        root = self.root()
        if self.total_steps() > config.max_instructions:
            what = f"more than {config.max_instructions} instructions (dynamo.config.max_instructions)"
        elif time.thread_time() > root.deadline:
            what = f"more than {config.max_trace_seconds:g} s (dynamo.config.max_trace_seconds)"
        else:
            return
        raise BudgetExceeded(f"tracing took {what}; a loop this long is not unrolled",
                             self.user_location())

    def root(self) -> "InstructionTranslator":
        """The translator of the frame being compiled (not of an inlined call)."""
        return self

    def inline_depth(self) -> int:
        return 0

    def position(self) -> tuple | None:
        """(line, end line, column, end column) of the instruction being run, or None."""
        loc = self.instructions[self.index].location if self.index is not None else None
        if loc is None or loc.lineno is None:
            return None
        return (loc.lineno, loc.end_lineno, loc.col_offset, loc.end_col_offset)

    def user_location(self, include_line: bool = True) -> str:
        where = f"{self.code.co_filename}:{self.lineno}"
        if include_line:
            text = source_line(self.code.co_filename, self.lineno)
            if text:
                return f"{where}  {text}"
        return where

    def push(self, vt: VariableTracker) -> None:
        self.stack.append(vt)

    def pop(self) -> VariableTracker:
        """The top of the stack, realized: the caller is about to look at it."""
        return realize(self.stack.pop())

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return [realize(item) for item in items]

    def jump(self, inst: Instr) -> None:
        self.ip = self.labels[inst.arg]

    # Graph breaks ------------------------------------------------------------------------------

    def break_kind(self, index: int, exc: Unsupported) -> str | None:
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
        if self.info.in_loop(index):
            return None  # (the caller ends the graph before the loop instead)
        if self.region_at(index) is not None:
            return "region"
        inst = self.instructions[index]
        if inst.name in ("DELETE_FAST", "STORE_FAST") and \
                not self.info.in_exception_block(index) and not isinstance(exc, UserCodeError):
            return "at"  # (`check_drop`; a ``del`` of an unbound local raises in plain Python)
        # (3.12+: a LOAD_ATTR with the method bit pushes a NULL, as 3.11's LOAD_METHOD)
        if (inst.name in BREAKABLE and not compat.attr_is_method(inst)
                and not self.info.in_exception_block(index)):
            return "at"
        # Not between KW_NAMES and its CALL: the keyword names are translator state, not a
        # stack value, so a resume function starting there would lose them.
        if self._has_operations() and not self.kw_names:
            return "before"
        return None

    def kept_alive(self, untouched: frozenset[str]) -> frozenset[str]:
        """Locals the rest of the frame never reads that are passed on anyway, because passing
        them costs nothing (no graph output, no guard: the resume function never looks at
        them): as in plain Python, they stay alive (and in ``f_locals``) until the function
        returns, so finalizers and weak references see the same lifetimes. Array values
        computed by the graph are not kept: that would make every dead intermediate an
        output."""
        cells = (*self.code.co_cellvars, *self.code.co_freevars)  # (they travel as cells)
        kept = {name for name in untouched if name not in cells}
        for name, vt in self.locals.items():
            if name in self.deleted or name.startswith(STACK_PREFIX) or name in cells:
                continue
            # (a function made in the frame too: rebuilt by one MAKE_FUNCTION, and a frame
            # taken from a traceback shows it in f_locals, as in plain Python)
            if isinstance(vt, (LazyVariable, NestedFunctionVariable)) or \
                    getattr(vt, "source", None) is not None or (
                    isinstance(vt, ConstantVariable) and is_immutable(vt.value)):
                kept.add(name)
        return frozenset(kept)

    def region_at(self, index: int):
        """The `bytecode_analysis.Region` of a ``try``/``with`` statement starting at `index`
        with the current stack and locals, or None."""
        if self.kw_names or any(isinstance(vt, NullVariable) for vt in self.stack):
            return None
        return self.info.region(index, len(self.stack), self.region_bound(index))

    def region_bound(self, index: int) -> frozenset[str]:
        """The locals the transformed code has bound when a try/with statement starts (the
        ones it stores before it, see graph_break_exit, and the untouched arguments)."""
        untouched = frozenset(name for name in self.argnames
                              if name not in self.locals and name not in self.deleted)
        bound = frozenset(name for name in (*self.locals, *self.argnames)
                          if name not in self.deleted)
        present = (self.info.live_locals(index) & bound) | self.kept_alive(untouched)
        cells = set(self.code.co_cellvars) | set(self.code.co_freevars)
        return frozenset(name for name in present if name not in cells)

    def never_swallows(self, index: int) -> bool:
        """Is the statement at `index` a ``with`` whose context manager's ``__exit__`` never
        returns true (never swallows an exception)? Known for ``np.errstate`` and
        ``warnings.catch_warnings`` made in the frame, and for an object of a Python class
        (its type is guarded) whose ``__exit__`` returns only None or False constants."""
        if self.instructions[index].name not in ("BEFORE_WITH", "SETUP_WITH") or not self.stack:
            return False
        self.stack[-1] = realize(self.stack[-1])  # (what it is: guarded, as the answer needs)
        return exit_never_swallows(self.stack[-1], self)

    def _has_operations(self) -> bool:
        return any(n.op in ("call_function", "call_method") for n in self.output.graph.nodes)

    def operation_count(self) -> int:
        return sum(n.op in ("call_function", "call_method") for n in self.output.graph.nodes)

    def graph_break_exit(self) -> BreakExit:
        """How the frame continues when the trace stops before instruction `self.ip`."""
        index, kind = self.break_at
        inst = self.instructions[index]
        if kind == "region":
            region = self.region_at(index)
            if region is None:
                raise AssertionError("the try/with region changed between the two traces")
            untouched = frozenset(name for name in self.argnames
                                  if name not in self.locals and name not in self.deleted)
            live = tuple(sorted(self.info.live_locals(index) | self.kept_alive(untouched)))
            body = None
            if config.capture_try_bodies:
                body = plan_region_body(self.code, region, len(self.stack),
                                        self.region_bound(index), self.never_swallows(index))
            return BreakExit(index=index, reason="", stack=list(self.stack),
                             consumed=len(self.stack), run=[], locals=dict(self.locals),
                             continuations=[(index, 0, live)], untouched_args=untouched,
                             region=region, region_body=body)
        if kind == "at" and inst.name in ("DELETE_FAST", "STORE_FAST"):
            return self._drop_exit(index, inst)
        span = 1  # (how many of the frame's instructions `run` stands for)
        pushed_layout = None  # (NULL slots the continuation's stack has that `run` did not push)
        if kind in ("before", "loop"):
            run: list[Instr] = []
            consumed = 0
        elif inst.name == "CALL":
            run = ins.call_sequence(inst.arg, self.kw_names)
            consumed = inst.arg + 2
        elif self._bool_then_jump(index):
            # (3.13: ``if x:`` is TO_BOOL then the jump; both run in Python, so the break is
            # the one 3.12 and earlier make at the jump: two continuations)
            run = [Instr(inst.name, inst.arg), self.instructions[index + 1].copy()]
            consumed, span = 1, 2
        elif inst.name == "LOAD_SUPER_ATTR" and inst.arg[0]:
            # (3.12+ ``super().f``: run without the method bit, which would push a NULL; the
            # resume function puts the NULL back itself, where the CALL after it expects one)
            run = [Instr(inst.name, (False, *inst.arg[1:]))]
            consumed = 3
            pushed_layout = (False, True) if compat.NULL_AFTER_CALLABLE else (True, False)
        elif inst.name in _CONDITIONAL_JUMPS or inst.name == "UNARY_NOT":
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
            targets.append((self.info.target(index + span - 1), True))
        untouched = frozenset(name for name in self.argnames
                              if name not in self.locals and name not in self.deleted)
        kept = self.kept_alive(untouched)
        continuations = []
        for target, jumped in targets:
            pushed = consumed + sum(i.stack_effect(jump=jumped and i is run[-1]) for i in run)
            names = self.info.live_locals(target) | kept
            continuations.append((target, pushed_layout or pushed, tuple(sorted(names))))
        return BreakExit(index=index, reason="", stack=list(self.stack), consumed=consumed,
                         run=run, locals=dict(self.locals), continuations=continuations,
                         untouched_args=untouched)

    def _drop_exit(self, index: int, inst: Instr) -> BreakExit:
        """The graph ends at a ``del x`` (or a store into `x`) that may free an object whose
        death runs code (`check_drop`): the transformed code lets go of the old value right
        there (it is not passed on, and an argument slot holding it is cleared), then the resume
        function continues after the ``del``, or runs the store itself (the new value is on
        its stack; `x` unbound)."""
        name = inst.arg
        if in_loop_body(self.code):
            # (decided again for its guards: the trace that decided stopped at this instruction,
            # and a version without them would take values it was not decided on)
            self._drop_runs_code(name)
        target = index + 1 if inst.name == "DELETE_FAST" else index
        untouched = frozenset(n for n in self.argnames
                              if n not in self.locals and n not in self.deleted and n != name)
        live = (self.info.live_locals(target) | self.kept_alive(untouched)) - {name}
        return BreakExit(index=index, reason="", stack=list(self.stack), consumed=0, run=[],
                         locals={n: vt for n, vt in self.locals.items() if n != name},
                         continuations=[(target, 0, tuple(sorted(live)))],
                         untouched_args=untouched)

    def _bool_then_jump(self, index: int) -> bool:
        """A TO_BOOL followed by the conditional jump that reads its result (3.13)."""
        return (self.instructions[index].name == "TO_BOOL" and index + 1 < len(self.instructions)
                and self.instructions[index + 1].name in _CONDITIONAL_JUMPS)

    # Values ----------------------------------------------------------------------------------

    def binary_op(self, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        if op in INPLACE_FALLBACK and not (isinstance(a, NDArrayVariable) and not a.meta.is_scalar):
            if not isinstance(a, ListVariable):
                op = INPLACE_FALLBACK[op]
        if isinstance(a, NDArrayVariable) or isinstance(b, NDArrayVariable):
            return self.output.call_function(self, op, [a, b], {})
        if _is_symbolic_int(a) or _is_symbolic_int(b):
            result = _symbolic_size_op(op, a, b)
            if result is not None:
                return result
        if isinstance(a, _Sequence) or isinstance(b, _Sequence):
            return self._sequence_op(op, a, b)
        if a.is_python_constant() and b.is_python_constant():
            return wrap_constant(run_user_op(op, a.as_python_constant(), b.as_python_constant()))
        raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")

    def _sequence_op(self, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        """``+`` and ``*`` on tuples and lists (in place for lists built in this frame)."""
        if op in (operator.add, operator.iadd) and isinstance(a, _Sequence) and type(a) is type(b):
            if op is operator.iadd and isinstance(a, ListVariable):
                a.extend(b.unpack(self))
                return a
            return type(a)(a.items + b.items)
        if op in (operator.mul, operator.imul):
            seq, times = (a, b) if isinstance(a, _Sequence) else (b, a)
            count = times.as_python_constant() if times.is_python_constant() else None
            if isinstance(count, int) and not isinstance(count, bool):
                if op is operator.imul and isinstance(seq, ListVariable):
                    seq.check_mutable()
                    seq.items[:] = seq.items * count
                    return seq
                return type(seq)(seq.items * count)
        if op in (operator.eq, operator.ne) and isinstance(a, _Sequence) and type(a) is type(b):
            # ``x.shape == y.shape``: item by item, stopping at the first difference as Python
            # does (sizes compare symbolically: a guarded fact, not fixed sizes)
            equal = len(a.items) == len(b.items)
            for left, right in zip(a.items, b.items) if equal else ():
                if left is right:
                    continue  # (Python checks identity first: ``[nan] == [nan]`` for one nan)
                same = self.binary_op(operator.eq, left, right)
                if (isinstance(same, ConstantVariable) and same.value is False
                        and left.is_python_constant() and right.is_python_constant()):
                    x, y = left.as_python_constant(), right.as_python_constant()
                    if x is y or (_unequal_to_itself(x) and _unequal_to_itself(y)):
                        raise Unsupported(f"comparing {a.describe()} and {b.describe()}: "
                                          "items unequal to themselves (NaN)")
                if not isinstance(same, ConstantVariable) or type(same.value) is not bool:
                    raise Unsupported(f"comparing {a.describe()} and {b.describe()}: an item "
                                      "comparison is not a plain bool")
                if not same.value:
                    equal = False
                    break
            return ConstantVariable(equal if op is operator.eq else not equal)
        raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")

    def load_argument(self, name: str, is_cell: bool) -> VariableTracker:
        if name in self.locals:
            return self.locals[name]
        if name in self.passed_cells and name not in self.deleted:
            return self.load_passed_cell(name)
        if name in self.argnames and name not in self.deleted:
            vt = LazyVariable(self, LocalSource(name, is_cell), self.frame.f_locals[name])
            self.locals[name] = vt
            return vt
        raise user_error(UnboundLocalError,
                         f"local variable {name!r} is used before it is assigned")

    # Loads and stores --------------------------------------------------------------------------

    def LOAD_FAST(self, inst: Instr) -> None:
        if compat.is_cell_load(inst):  # (3.13's LOAD_CLOSURE)
            self.LOAD_CLOSURE(inst)
            return
        self.push(self.load_argument(inst.arg, is_cell=False))

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst: Instr) -> None:
        """(3.12+, an inlined comprehension) Save the local its loop variable shadows and
        unbind it; the STORE_FAST after the loop puts the saved value (or unboundness) back."""
        name = inst.arg
        bound = name in self.locals or (name in self.argnames and name not in self.deleted)
        self.push(self.load_argument(name, is_cell=False) if bound else NullVariable())
        self.locals.pop(name, None)
        self.deleted.add(name)

    def STORE_FAST(self, inst: Instr) -> None:
        self.check_drop(inst)
        value = self.stack.pop()  # moving a value does not look at it (it may stay lazy)
        if isinstance(value, NullVariable):  # (restoring an unbound local: LOAD_FAST_AND_CLEAR)
            self.locals.pop(inst.arg, None)
            self.deleted.add(inst.arg)
            return
        self.locals[inst.arg] = value
        self.deleted.discard(inst.arg)
        self.name_graph_value(value, inst.arg)

    def name_graph_value(self, value: VariableTracker, name: str) -> None:
        """The first local a computed array is stored in names its node (``var = ...`` gives
        ``var`` in the graph code, not ``mean_1``)."""
        if isinstance(value, NDArrayVariable) and value.node.op != "placeholder" and (
            not value.node.meta.get("named") and not name.startswith(".")
        ):
            self.output.graph.rename_node(value.node, name)
            value.node.meta["named"] = True

    def DELETE_FAST(self, inst: Instr) -> None:
        name = inst.arg
        bound = name in self.locals or (name in self.argnames and name not in self.deleted)
        if not bound and isinstance(name, str) and not name.startswith("___"):
            # (as Python: ``del x`` of an unbound local raises; the frame then runs plainly)
            raise user_error(UnboundLocalError,
                             f"local variable {name!r} is deleted before it is assigned")
        self.check_drop(inst)
        self.locals.pop(name, None)
        self.deleted.add(name)

    def check_drop(self, inst: Instr) -> None:
        """`del x` / ``x = ...``: the translator only simulates it, and the transformed code
        lets go of the old value where the graph ends, after what follows has read globals and
        attributes. When that value may hold the last reference to an object whose death runs
        code (``__del__``, a weakref callback, a code object's free functions), the graph ends
        here instead (`_drop_exit`), so the object dies before anything after it runs, as in
        plain Python. Array values and constants never stop the graph."""
        name = inst.arg
        if self._drop_runs_code(name):
            what = "del" if inst.name == "DELETE_FAST" else "rebinding"
            raise Unsupported(
                f"{what} of local {name!r} may free an object whose finalizer or weakref "
                f"callback runs code: the graph ends here, so it runs before what follows",
                self.user_location())

    def _drop_runs_code(self, name: Any) -> bool:
        """(`check_drop`) Whether letting go of the value of local `name` may run code."""
        if not isinstance(name, str) or name.startswith("___"):
            return False  # (npdynamo's own locals: a resume function moving its stack values)
        if name in self.locals:
            old = self.locals[name]
        elif name in self.argnames and name not in self.deleted and \
                name not in self.passed_cells:
            old = LazyVariable(self, LocalSource(name, False), self.frame.f_locals[name])
        else:
            return False
        # (in a loop body the decision is guarded: every iteration brings other values; in
        # other continuations an owned argument's slot is cleared at the next break, before
        # anything else runs, so a decision from this call's value is never seen)
        judge = self.judge_iteration_value if in_loop_body(self.code) else None
        return _drop_may_run_code(old, self.owns, judge=judge)

    def owns(self, source: Source) -> bool:
        """Whether a value read from `source` may be referenced by this frame only: an argument
        of a resume function (the hook hands the references over when it starts). A function
        called by Python code while a frame hook is installed gets its arguments from a caller
        whose stack still holds them until the call returns (CPython does not move them into
        the frame then), so dropping one frees nothing; anything read from a global, a cell or
        an object is held there too."""
        return isinstance(source, LocalSource) and is_resume_code(self.code)

    def judge_iteration_value(self, vt: LazyVariable) -> bool:
        """(`check_drop` in a loop body function or its continuations) Whether dropping `vt`,
        an argument, may run code, decided so that it holds for every call: these
        frames get other values on every iteration (the driver hands the locals the body
        rebinds over, `loops.LoopPlan.handed_over`), and a look at this call's value would
        decide for all of them. So the value's type is guarded where it settles the question
        (the marker of a kept local no iteration assigned yet; an int, a float, a string, a
        NumPy scalar or array, whose death runs nothing, see `_drop_may_run_code`; a short
        tuple of those), and anything else may run code (the graph ends at the store; its type
        is guarded as well)."""
        value = vt.value
        if value is UNBOUND:
            self.output.add_guard(Guard(vt.source, "ID_MATCH", Guard.identity(UNBOUND)))
            return False

        def settled(v: Any) -> bool:  # (type-based: see _object_may_run_code)
            return type(v) in _INERT_TYPES or issubclass(type(v), (np.number, np.bool_)) or (
                type(v) is np.ndarray and not weakref.getweakrefcount(v))

        if settled(value):
            self.output.add_guard(Guard(vt.source, "TYPE_MATCH", type(value)))
            return False
        if type(value) is tuple and len(value) <= 8 and all(map(settled, value)):
            self.output.add_guard(Guard(vt.source, "SEQUENCE_LENGTH", (tuple, len(value))))
            for i, item in enumerate(value):
                self.output.add_guard(Guard(GetItemSource(vt.source, i), "TYPE_MATCH",
                                            type(item)))
            return False
        # (guarded too, though breaking is right for any value: else the version would also
        # take the first iteration's marker, and a next call would run other versions than the
        # first one did, and compile again)
        self.output.add_guard(Guard(vt.source, "TYPE_MATCH", type(value)))
        return True

    def LOAD_CONST(self, inst: Instr) -> None:
        if inst.arg is ins.Held:  # (3.10: a resume function's prologue rebuilding a NULL)
            self.push(_HeldMaker())
            return
        self.push(wrap_constant(inst.arg, literal=True))

    def LOAD_GLOBAL(self, inst: Instr) -> None:
        value = self.load_global(compat.global_name(inst))
        self.push_callable(value, compat.global_pushes_null(inst))

    def push_callable(self, value: VariableTracker, null: bool) -> None:
        """Push `value`, with the call convention's NULL (before it to 3.12, after it on 3.13)
        when `null` (LOAD_GLOBAL's and 3.12+ LOAD_ATTR's bit)."""
        if null and not compat.NULL_AFTER_CALLABLE:
            self.push(NullVariable())
        self.push(value)
        if null and compat.NULL_AFTER_CALLABLE:
            self.push(NullVariable())

    def home(self) -> Home:
        """Where the globals of this code and of the functions it makes are."""
        return Home(self.global_loader, self.namespace, self.module_name)

    def load_global(self, name: str) -> VariableTracker:
        source = GlobalSource(name)
        if source in self.output.wrapped:
            return self.output.wrapped[source]
        if name in self.frame.f_globals:
            return VariableBuilder(self, source)(self.frame.f_globals[name])
        builtins_ns = self.frame.f_builtins
        if name not in builtins_ns:
            raise user_error(NameError, f"name {name!r} is not defined")
        self.output.add_guard(Guard(source, "NOT_IN_GLOBALS", name))
        value = builtins_ns[name]
        # The source rebuilds it in generated code: LOAD_GLOBAL finds the builtin, and the guard
        # above says no global shadows it.
        vt = BuiltinVariable(value, source=source) if callable(value) else wrap_constant(value)
        self.output.wrapped[source] = vt
        return vt

    def LOAD_DEREF(self, inst: Instr) -> None:
        var = inst.arg
        if isinstance(var, CellVar):
            self.push(self.load_argument(var.name, is_cell=True))
            return
        self.push(self.load_free_variable(var.name))

    def own_cell(self, cell: Any):
        """If `cell` is one of this frame's cell variables that arrived as a cell (a resume or
        body function's, see `resume.passed_cells`): (the source of the cell object, a reader
        of the variable's current value in this trace); else None."""
        for name in self.passed_cells:
            if name not in self.locals and name in self.deleted:
                continue
            if self.frame.f_locals.get(name) is cell:
                return LocalSource(name), lambda name=name: self.load_argument(name, is_cell=True)
        # (a free variable's cell: a closure made in an outer function, or on 3.10 a resume
        # function's cells, which arrive as its closure; a value stored to it in this trace,
        # ``nonlocal x; x = 4``, is what the inlined function reads)
        closure = self.frame.closure or ()
        for index, name in enumerate(self.code.co_freevars):
            if index < len(closure) and closure[index] is cell:
                return (ClosureCellSource(name, index),
                        lambda name=name: self.load_free_variable(name))
        return None

    def load_passed_cell(self, name: str) -> VariableTracker:
        """The contents of the cell a resume function received as its argument `name`."""
        source = PassedCellSource(name)
        if source in self.output.wrapped:
            return self.output.wrapped[source]
        try:
            value = self.frame.f_locals[name].cell_contents
        except ValueError:
            raise user_error(UnboundLocalError, f"cannot access local variable {name!r} where "
                             "it is not associated with a value") from None
        return VariableBuilder(self, source)(value)

    def load_free_variable(self, name: str) -> VariableTracker:
        index = self.code.co_freevars.index(name)
        source = ClosureSource(name, index)
        if source in self.output.wrapped:
            return self.output.wrapped[source]
        try:
            value = self.frame.closure[index].cell_contents
        except ValueError:
            value = _EMPTY_CELL
        if value is _EMPTY_CELL:
            raise user_error(NameError, f"free variable {name!r} is referenced before assignment")
        return VariableBuilder(self, source)(value)

    def STORE_DEREF(self, inst: Instr) -> None:
        if isinstance(inst.arg, FreeVar):
            # ``nonlocal``: the cell is shared with the enclosing function; replayed after the
            # graph, and later reads in this frame see the new value.
            name = inst.arg.name
            value = self.stack.pop()
            self.output.wrapped[ClosureSource(name, self.code.co_freevars.index(name))] = value
            self.side_effects.cells[name] = value
            return
        value = self.pop()
        self.locals[inst.arg.name] = value
        self.cells_written.add(inst.arg.name)
        self.name_graph_value(value, inst.arg.name)

    def LOAD_CLOSURE(self, inst: Instr) -> None:
        self.push(CellVariable(self, inst.arg.name))

    def MAKE_FUNCTION(self, inst: Instr) -> None:
        flags = inst.arg if isinstance(inst.arg, int) else 0
        # (3.13: MAKE_FUNCTION takes the code only; the SET_FUNCTION_ATTRIBUTEs right after it
        # set what 3.12 and earlier pass as flags, from the same stack positions)
        while self.instructions[self.ip].name == "SET_FUNCTION_ATTRIBUTE":
            flags |= self.instructions[self.ip].arg
            self.ip += 1
        code = self.pop().as_python_constant()
        if isinstance(code, str):  # (3.10: the qualified name is on top of the code)
            name, code = code, self.pop().as_python_constant()
            compat.remember_qualname(code, name)
        closure = self.pop() if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        cells = closure.items if closure is not None else []
        if code.co_name in COMPREHENSIONS and not flags & 0x07:
            self.push(ComprehensionVariable(self, code, cells))
            return
        self.push(NestedFunctionVariable(self, code, defaults, kwdefaults, annotations, cells))

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        raise Unsupported("generator functions are not captured")

    def LOAD_ATTR(self, inst: Instr) -> None:
        # (3.12+: with the method bit, a bound attribute with the call convention's NULL, as
        # 3.11's LOAD_METHOD; the translator never splits a method from its self)
        value = self.pop().var_getattr(self, compat.attr_name(inst))
        self.push_callable(value, compat.attr_is_method(inst))

    def LOAD_SUPER_ATTR(self, inst: Instr) -> None:
        """(3.12+) ``super().name``: not traced (zero-argument super() reads the frame), as the
        call of ``super`` is not on 3.11: the trace stops here."""
        raise Unsupported(f"call to {BuiltinVariable(super).describe()} with these arguments "
                          "is not supported")

    def LOAD_METHOD(self, inst: Instr) -> None:
        obj = self.pop()
        self.push_callable(obj.var_getattr(self, inst.arg), True)

    def STORE_ATTR(self, inst: Instr) -> None:
        obj = self.pop()
        value = self.stack.pop()
        store = getattr(obj, "store_attr", None)
        if store is None:
            raise Unsupported(f"setting attribute {inst.arg!r} of {obj.describe()}")
        # (the write is replayed after the graph: the old value must not die after later reads)
        pending = self.root().side_effects.pending_attr(obj, inst.arg)
        if pending is not None:
            self.check_replaced(f"attribute {inst.arg!r}", pending, lambda _: True)
        elif "value" in getattr(realize(obj), "__dict__", ()):
            old = _instance_value(realize(obj).value, inst.arg)
            if old is _UNKNOWN or (old is not _ABSENT and _object_may_run_code(old)):
                self.check_replaced(f"attribute {inst.arg!r}", None, None)
        store(self, inst.arg, value)

    def check_replaced(self, what: str, old: VariableTracker | None,
                       owns: Callable[[Source], bool] | None) -> None:
        """Raise (a graph break at this write, which then runs in plain Python in order) when
        the value `what` holds may die with this write and its death runs code: `old` (a
        tracker, checked with `owns`), or None when the caller already found that it may."""
        if old is not None and not _drop_may_run_code(old, owns):
            return
        raise Unsupported(
            f"replacing {what} may free an object whose finalizer or weakref callback runs "
            f"code: the graph ends here, so it runs before what follows", self.user_location())

    def STORE_GLOBAL(self, inst: Instr) -> None:
        source = GlobalSource(inst.arg)
        if source in self.output.wrapped:  # (read or written in this trace)
            self.check_replaced(f"global {inst.arg!r}", self.output.wrapped[source],
                                lambda s: s == source or self.owns(s))
        elif _object_may_run_code(self.frame.f_globals.get(inst.arg)):
            self.check_replaced(f"global {inst.arg!r}", None, None)
        value = self.stack.pop()
        self.output.wrapped[GlobalSource(inst.arg)] = value  # later reads see the new value
        self.root().side_effects.globals[inst.arg] = value

    # Calls -----------------------------------------------------------------------------------

    def PUSH_NULL(self, inst: Instr) -> None:
        self.push(NullVariable())

    def PRECALL(self, inst: Instr) -> None:
        pass

    def KW_NAMES(self, inst: Instr) -> None:
        self.kw_names = tuple(inst.arg)

    def CALL(self, inst: Instr) -> None:
        args = self.popn(inst.arg)
        second = self.pop()
        first = self.pop()
        # [NULL, f] (to 3.12) or [f, NULL] (3.13); [method, self] on every version
        if isinstance(first, NullVariable):
            fn = second
        elif isinstance(second, NullVariable):
            fn = first
        else:
            fn, args = first, [second, *args]
        self._call(fn, args)

    def _call(self, fn: VariableTracker, args: list[VariableTracker]) -> None:
        """Call `fn` with `args`, the last ``len(self.kw_names)`` of them by keyword."""
        kwargs: dict[str, VariableTracker] = {}
        if self.kw_names:
            n = len(self.kw_names)
            kwargs = dict(zip(self.kw_names, args[-n:]))
            args = args[:-n]
            self.kw_names = ()
        self.push(fn.call_function(self, args, kwargs))

    def CALL_FUNCTION(self, inst: Instr) -> None:
        """(3.10) A call with no NULL: the callable under the positional arguments."""
        args = self.popn(inst.arg)
        self._call(self.pop(), args)

    def CALL_FUNCTION_KW(self, inst: Instr) -> None:
        """(3.10) CALL_FUNCTION with the keyword names as a constant tuple on top."""
        self.kw_names = tuple(self.pop().as_python_constant())
        self.CALL_FUNCTION(inst)

    CALL_METHOD = CALL  # (3.10: after LOAD_METHOD, [method, self] or [NULL, callable])

    def CALL_KW(self, inst: Instr) -> None:
        """(3.13) CALL with the keyword names as a constant tuple on top of the stack."""
        self.kw_names = tuple(self.pop().as_python_constant())
        self.CALL(inst)

    def CALL_FUNCTION_EX(self, inst: Instr) -> None:
        kwargs_vt = self.pop() if inst.arg & 1 else None
        args_vt = self.pop()
        fn = self.pop()
        if isinstance(fn, NullVariable):  # (3.13: f, NULL, args)
            fn = self.pop()
        elif self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()
        kwargs = {}
        if kwargs_vt is not None:
            if not isinstance(kwargs_vt, DictVariable):
                raise Unsupported("** arguments that are not a dict built in the frame")
            kwargs = dict(kwargs_vt.items)
        self.push(fn.call_function(self, args_vt.unpack(self), kwargs))

    # Operators ---------------------------------------------------------------------------------

    def BINARY_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(BINARY_OPS[inst.arg], a, b))

    def _binary_named(self, inst: Instr) -> None:
        """(3.10) BINARY_ADD, INPLACE_ADD, ...: one instruction per operator."""
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(NAMED_BINARY_OPS[inst.name], a, b))

    def COMPARE_OP(self, inst: Instr) -> None:
        # (`while err > tol` after `err = float(...)`: compared in Python, no guard on err)
        self._refuse_passed_through(self.stack[-2:], "comparing")
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(COMPARE_OPS[inst.arg], a, b))

    def _unary(self, inst: Instr) -> None:
        self._unary_op(UNARY_OPS[inst.name])

    def _unary_op(self, op: Callable) -> None:
        a = self.pop()
        if isinstance(a, NDArrayVariable):
            self.push(self.output.call_function(self, op, [a], {}))
        elif _is_symbolic_int(a) and op in (operator.neg, operator.pos):
            self.push(wrap_constant(op(_symbolic_operand(a))))
        else:
            self.push(wrap_constant(run_user_op(op, a.as_python_constant())))

    UNARY_NEGATIVE = UNARY_POSITIVE = UNARY_INVERT = _unary

    def UNARY_NOT(self, inst: Instr) -> None:
        self.push(ConstantVariable(not self.pop().truth()))

    def TO_BOOL(self, inst: Instr) -> None:
        """(3.13) ``bool(x)`` before a conditional jump or ``not``."""
        self.push(ConstantVariable(self.pop().truth()))

    def CALL_INTRINSIC_1(self, inst: Instr) -> None:
        """(3.12+) What 3.11 spelled as instructions of their own."""
        name = getattr(inst.arg, "name", str(inst.arg))
        if name == "INTRINSIC_LIST_TO_TUPLE":
            self.LIST_TO_TUPLE(inst)
        elif name == "INTRINSIC_UNARY_POSITIVE":
            self._unary_op(operator.pos)
        else:
            raise Unsupported(f"the bytecode CALL_INTRINSIC_1 {name} is not supported")

    def IS_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(ConstantVariable(self._is(a, b) != bool(inst.arg)))

    def _is(self, a: VariableTracker, b: VariableTracker) -> bool:
        """``a is b``, when the trackers settle it. Guards check values, not object identity,
        and a container's ``as_python_constant`` is a new copy: equal values of a type whose
        objects are not unique per value (1000.5, "ab", a tuple) are left to Python."""
        if a is b:
            return True  # one tracker stands for one object
        scalars = [not isinstance(v, (_Sequence, DictVariable)) and v.is_python_constant()
                   for v in (a, b)]
        if all(scalars):
            x, y = a.as_python_constant(), b.as_python_constant()
            if type(x) is not type(y):
                return False
            if isinstance(x, _UNIQUE_PER_VALUE) or (type(x) is int and -5 <= x <= 256):
                return x is y  # (small ints are cached: equal ones are one object)
            if a.source is None and b.source is None:
                # Both made while tracing (``(n + 300) is (n + 300)``), as Python makes them.
                # (After a break they would be rebuilt as one constant of the code.)
                return x is y
            if x == y or (_unequal_to_itself(x) and _unequal_to_itself(y)):
                raise Unsupported(f"'is' between {a.describe()} and {b.describe()}: equal "
                                  "values may or may not be one object")
            return False
        consts = [v for v, scalar in zip((a, b), scalars) if scalar]
        if consts and consts[0].as_python_constant() is None:
            other = b if consts[0] is a else a
            if isinstance(other, OpaqueObjectVariable):  # (no guard says what it is yet)
                return other.is_none(self)
            return False  # a graph value or container is never None
        if any(isinstance(v, (ListVariable, DictVariable)) for v in (a, b)):
            return False  # (one list or dict object has one tracker: `VariableBuilder`)
        raise Unsupported(f"'is' between {a.describe()} and {b.describe()}")

    def CONTAINS_OP(self, inst: Instr) -> None:
        container = self.pop()
        item = self.pop()
        if not item.is_python_constant():
            raise Unsupported(f"'in' with {item.describe()}")
        value = item.as_python_constant()
        # A value unequal to itself (NaN) is found only as the very object: identity, which
        # guards do not check, unless both are one tracker.
        odd = _unequal_to_itself(value)
        if isinstance(container, (_Sequence, IteratorVariable)):
            # Python compares each item by identity, then ``==``, and stops at the first match
            # (an iterator is consumed up to it); an item that is not a constant could match
            # at run time.
            found = False
            items = container.unpack(self) if isinstance(container, _Sequence) else None
            while True:
                v = (items.pop(0) if items else None) if items is not None else container.next()
                if v is None:
                    break
                if v is item:
                    found = True
                    break
                if not v.is_python_constant():
                    raise Unsupported(f"'in' over {container.describe()} holding "
                                      f"{v.describe()}")
                known = v.as_python_constant()
                if odd and (known is value or _unequal_to_itself(known)):
                    raise Unsupported(f"'in' with {item.describe()}: found or not by identity")
                if known is value or run_user_op(operator.eq, known, value):
                    found = True
                    break
        elif odd:
            raise Unsupported(f"'in' with {item.describe()}: found or not by identity")
        elif isinstance(container, DictVariable):
            found = run_user_op(operator.contains, container.items, value)
        else:
            # (the container's own ``in``: a substring for str and bytes, hashing for sets)
            found = run_user_op(operator.contains, container.as_python_constant(), value)
        self.push(ConstantVariable(bool(found) != bool(inst.arg)))

    def BINARY_SLICE(self, inst: Instr) -> None:
        """(3.12+) ``x[a:b]``: BUILD_SLICE 2 and BINARY_SUBSCR in one."""
        self.BUILD_SLICE(Instr("BUILD_SLICE", 2))
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst: Instr) -> None:
        """(3.12+) ``x[a:b] = v``: BUILD_SLICE 2 and STORE_SUBSCR in one."""
        self.BUILD_SLICE(Instr("BUILD_SLICE", 2))
        self.STORE_SUBSCR(inst)

    def BINARY_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        if isinstance(obj, NDArrayVariable):
            self.push(self.output.call_function(self, operator.getitem, [obj, key], {}))
        elif isinstance(obj, (_Sequence, DictVariable)):
            self.push(obj.getitem(self, key))
        else:
            self.push(self.binary_op(operator.getitem, obj, key))

    def STORE_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, NDArrayVariable) and not obj.meta.is_scalar:
            self.output.call_function(self, operator.setitem, [obj, key, value], {})
        elif isinstance(obj, ListVariable):
            obj.check_mutable()
            run_user_op(operator.setitem, obj.items, key.as_python_constant(), value)
        elif isinstance(obj, DictVariable):
            obj.check_mutable()
            obj.put(_dict_key(key), key, value)
        else:
            raise Unsupported(f"item assignment on {obj.describe()}")

    # Building and unpacking --------------------------------------------------------------------

    def BUILD_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instr) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst: Instr) -> None:
        flat = self.popn(2 * inst.arg)
        keys = [_dict_key(k) for k in flat[::2]]
        out = DictVariable({})
        for key, tracker, value in zip(keys, flat[::2], flat[1::2]):
            out.put(key, tracker, value)
        self.push(out)

    def BUILD_CONST_KEY_MAP(self, inst: Instr) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(run_user_op(dict, zip(keys, self.popn(inst.arg)))))

    def BUILD_SET(self, inst: Instr) -> None:
        # A set of constants (its items are hashed and compared while tracing).
        values = [v.as_python_constant() for v in self.popn(inst.arg)]
        self.push(ConstantVariable(run_user_op(set, values)))

    def SET_ADD(self, inst: Instr) -> None:
        value = self.pop().as_python_constant()
        target = self.stack[-inst.arg]
        if not (isinstance(target, ConstantVariable) and type(target.value) is set):
            raise Unsupported(f"adding to {target.describe()}")
        run_user_op(target.value.add, value)

    def SET_UPDATE(self, inst: Instr) -> None:
        values = [v.as_python_constant() for v in self.pop().unpack(self)]
        target = self.stack[-inst.arg]
        if not (isinstance(target, ConstantVariable) and type(target.value) is set):
            raise Unsupported(f"updating {target.describe()}")
        run_user_op(target.value.update, values)

    def BUILD_SLICE(self, inst: Instr) -> None:
        parts = self.popn(inst.arg)
        if not all(p.is_python_constant() for p in parts):
            raise Unsupported("a slice bound that is an array value (data-dependent shape)")
        # (a size stays symbolic in the slice: ``x[: n // 2]`` reads n when the graph runs)
        self.push(ConstantVariable(slice(*(p.sym if isinstance(p, SymIntVariable) else
                                           p.as_python_constant() for p in parts))))

    def BUILD_STRING(self, inst: Instr) -> None:
        self._refuse_passed_through(self.stack[len(self.stack) - inst.arg:], "joining")
        parts = [p.as_python_constant() for p in self.popn(inst.arg)]
        self.push(ConstantVariable(run_user_op("".join, parts)))

    def _refuse_passed_through(self, values: list, what: str) -> None:
        """A value a resume function received on its stack and has not looked at is usually
        computed from array data before the break (``float(a.mean())``, or its formatted
        text). Making a string from it here would guard on its exact value and recompile on
        every new one: the graph breaks instead, and Python does it."""
        for raw in values:
            if (type(raw) is LazyVariable and isinstance(raw.source, LocalSource)
                    and raw.source.local_name.startswith(STACK_PREFIX)
                    and type(raw.value) in (float, str)):
                raise Unsupported(f"{what} {raw.source.name()}, a value from before a graph "
                                  "break (no guard on its exact value)")

    def CONVERT_VALUE(self, inst: Instr) -> None:
        """(3.13) The ``!s``/``!r``/``!a`` of an f-string field."""
        self._refuse_passed_through([self.stack[-1]], "formatting")
        conversion = {1: str, 2: repr, 3: ascii}[int(inst.arg)]
        self.push(ConstantVariable(run_user_op(conversion, self.pop().as_python_constant())))

    def FORMAT_SIMPLE(self, inst: Instr) -> None:
        """(3.13) ``format(value)`` of an f-string field without a spec."""
        self._refuse_passed_through([self.stack[-1]], "formatting")
        value = self.pop().as_python_constant()
        self.push(ConstantVariable(run_user_op(format, value, "")))

    def FORMAT_WITH_SPEC(self, inst: Instr) -> None:
        """(3.13) ``format(value, spec)`` of an f-string field."""
        self._refuse_passed_through([self.stack[-2]], "formatting")
        spec = self.pop().as_python_constant()
        value = self.pop().as_python_constant()
        self.push(ConstantVariable(run_user_op(format, value, spec)))

    def FORMAT_VALUE(self, inst: Instr) -> None:
        self._refuse_passed_through([self.stack[-2] if inst.arg & 0x04 else self.stack[-1]],
                                    "formatting")
        spec = self.pop().as_python_constant() if (inst.arg & 0x04) else ""
        value = self.pop().as_python_constant()
        conversion = {1: str, 2: repr, 3: ascii}.get(inst.arg & 0x03)
        if conversion is not None:
            value = run_user_op(conversion, value)
        self.push(ConstantVariable(run_user_op(format, value, spec)))

    def LIST_APPEND(self, inst: Instr) -> None:
        value = self.pop()
        self.stack[-inst.arg].append(value)

    def LIST_EXTEND(self, inst: Instr) -> None:
        seq = self.pop()
        self.stack[-inst.arg].extend(seq.unpack(self))

    def MAP_ADD(self, inst: Instr) -> None:
        value = self.pop()
        key = self.pop()
        target = self.stack[-inst.arg]
        target.check_mutable()
        target.put(_dict_key(key), key, value)

    def LIST_TO_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    def DICT_UPDATE(self, inst: Instr) -> None:
        update = self.pop()
        if not isinstance(update, DictVariable):
            raise Unsupported("dict update from a value that is not a dict built in the frame")
        target = self.stack[-inst.arg]
        target.check_mutable()
        if inst.name == "DICT_MERGE" and not target.items.keys().isdisjoint(update.items):
            # ``f(**a, **b)`` with a key in both: Python's TypeError names the callee; the
            # instruction runs in plain Python to raise it
            raise Unsupported("a keyword argument given twice by ** unpacking")
        target.merge(update)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst: Instr) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise user_error(ValueError, f"unpacking {len(items)} values into {inst.arg} names")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst: Instr) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise user_error(ValueError,
                             f"unpacking {len(items)} values into {before + after}+ names")
        middle = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], middle, *items[len(items) - after:]]):
            self.push(item)

    # Stack -----------------------------------------------------------------------------------

    def POP_TOP(self, inst: Instr) -> None:
        self.stack.pop()  # dropped unseen: no guard

    def COPY(self, inst: Instr) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: Instr) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # (3.10's spellings)
    def DUP_TOP(self, inst: Instr) -> None:
        self.push(self.stack[-1])

    def DUP_TOP_TWO(self, inst: Instr) -> None:
        self.stack.extend(self.stack[-2:])

    def _rotate(self, n: int) -> None:
        """Move the top down to position `n` (ROT_TWO ... ROT_N)."""
        top = self.stack.pop()
        self.stack.insert(len(self.stack) - n + 1, top)

    def ROT_TWO(self, inst: Instr) -> None:
        self._rotate(2)

    def ROT_THREE(self, inst: Instr) -> None:
        self._rotate(3)

    def ROT_FOUR(self, inst: Instr) -> None:
        self._rotate(4)

    def ROT_N(self, inst: Instr) -> None:
        self._rotate(inst.arg)

    def GEN_START(self, inst: Instr) -> None:
        """(3.10) A generator's first instruction; nothing was sent to an inlined one."""

    def NOP(self, inst: Instr) -> None:
        pass

    RESUME = COPY_FREE_VARS = NOP

    def MAKE_CELL(self, inst: Instr) -> None:
        """Before RESUME: the prologue (a cell variable's slot gets its cell). After it (3.12+):
        an inlined comprehension gives its loop variable a new cell because a closure in its
        body captures it, and the store after the loop puts the shadowed one back. The
        translator names cells by variable, not by cell object, so that closure would read the
        variable's outer cell once it is restored (``[lambda: b for b in c]`` then raised
        NameError: test_listcomps, 3.12+); the comprehension runs in plain Python instead."""
        if any(getattr(i, "name", None) == "RESUME" for i in self.instructions[:self.ip]):
            raise Unsupported(f"a closure over the variable {inst.arg.name!r} of an inlined "
                              "comprehension (a new cell in the middle of the frame)")

    # Control flow: only branches decided by constants (shapes, dtypes, Python scalars) ---------

    def JUMP_FORWARD(self, inst: Instr) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP_FORWARD

    def _pop_jump_if(self, inst: Instr) -> None:
        jump_when = inst.name.endswith("_TRUE")
        if self.pop().truth() == jump_when:
            self.jump(inst)

    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_FORWARD_IF_FALSE = _pop_jump_if
    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_FALSE = _pop_jump_if
    POP_JUMP_IF_TRUE = POP_JUMP_IF_FALSE = _pop_jump_if  # (3.10 absolute; 3.12+ undirected)

    def _pop_jump_if_none(self, inst: Instr) -> None:
        value = self.pop()
        is_none = self._is(value, ConstantVariable(None))
        if is_none == inst.name.endswith("_IF_NONE"):
            self.jump(inst)

    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_FORWARD_IF_NOT_NONE = _pop_jump_if_none
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = _pop_jump_if_none
    POP_JUMP_IF_NONE = POP_JUMP_IF_NOT_NONE = _pop_jump_if_none

    def _jump_or_pop(self, inst: Instr) -> None:
        if self.stack[-1].truth() == (inst.name == "JUMP_IF_TRUE_OR_POP"):
            self.jump(inst)
        else:
            self.pop()

    JUMP_IF_TRUE_OR_POP = JUMP_IF_FALSE_OR_POP = _jump_or_pop

    def GET_ITER(self, inst: Instr) -> None:
        value = self.pop()
        if isinstance(value, NDArrayVariable):
            self.push(ArrayRowIterator(self, value))
            return
        self.push(iterate(self, value))  # (a list is read live; dicts and sets are checked)

    def FOR_ITER(self, inst: Instr) -> None:
        item = self.stack[-1].next()
        if item is None:
            self.pop()
            self.jump(inst)
            self.ip += compat.loop_exit_skip()  # (3.12+ skips the END_FOR there)
        else:
            self.push(item)

    def END_FOR(self, inst: Instr) -> None:
        for _ in range(-inst.stack_effect()):
            self.stack.pop()

    def RETURN_VALUE(self, inst: Instr) -> None:
        self.return_value = self.stack.pop()

    def RETURN_CONST(self, inst: Instr) -> None:
        self.return_value = wrap_constant(inst.arg)

    # try/with blocks are refused up front, so a raise reached while tracing leaves the frame:
    # the user's own exception for these inputs.
    def LOAD_ASSERTION_ERROR(self, inst: Instr) -> None:
        raise user_error(AssertionError, "a failing assert")

    def RAISE_VARARGS(self, inst: Instr) -> None:
        raised = self.stack[-inst.arg] if inst.arg else None
        cls = getattr(raised, "cls", None) or getattr(raised, "fn", None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            cls = Exception
        raise UserCodeError(f"a raise statement ({cls.__name__}) is reached (the frame runs in "
                            "plain Python, which raises)", cls)


_EMPTY_CELL = object()

COMPREHENSIONS = ("<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>")

class _HeldMaker(VariableTracker):
    """(3.10) `instructions.Held`, the class `null_under_top` calls to put a NULL under a
    callable: the prologue of a resume function runs it, and is traced."""

    def describe(self) -> str:
        return "npdynamo's NULL maker"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return _HeldValue(args[0])


class _HeldValue(VariableTracker):
    """(3.10) ``Held(f)``: LOAD_METHOD ``value`` on it pushes NULL and f."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value

    def describe(self) -> str:
        return f"{self.value.describe()} held for a call"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return self.value

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_const(ins.Held))
        codegen.reconstruct(self.value)
        codegen.extend(ins.call(1))


class BudgetExceeded(Unsupported):
    """The trace ran past its instruction or time budget."""

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
_CONDITIONAL_JUMPS = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"})


_ABSENT = object()


_UNKNOWN = object()


_TYPE_DICT = type.__dict__["__dict__"]


def _instance_value(obj: Any, name: str) -> Any:
    """What `obj` holds under `name` itself (not its class), read without running the user's
    code and without making its ``__dict__`` (3.11+ keeps an instance's attributes without a
    dict object until one is asked for: making one shows in the garbage collector's counts);
    `_ABSENT` when it holds nothing there, `_UNKNOWN` when that cannot be read safely."""
    typ = type(obj)
    found = _ABSENT  # (the class attribute of that name)
    has_dict = False
    for klass in typ.__mro__:
        # (the class's own namespace: vars() reads ``__dict__``, which a metaclass may define)
        namespace = _TYPE_DICT.__get__(klass, type)
        if found is _ABSENT and name in namespace:
            found = namespace[name]
        has_dict = has_dict or "__dict__" in namespace
    if found is not _ABSENT:
        kind = type(found)
        if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
            return _ABSENT  # (a property or slot: the write goes through it, no instance value)
        if hasattr(kind, "__get__") and not issubclass(
                kind, (types.FunctionType, staticmethod, classmethod)):
            return _UNKNOWN  # (reading would run its __get__)
    if not has_dict:
        return _ABSENT
    try:
        value = object.__getattribute__(obj, name)
    except AttributeError:
        return _ABSENT
    if found is not _ABSENT and (value is found or value is getattr(found, "__func__", None)
                                 or type(value) is types.MethodType):
        return _ABSENT  # (the class's attribute, not one of the instance)
    return value

#: Values whose death runs no code and that hold no other object.
_INERT_TYPES = (int, float, complex, bool, str, bytes, type(None), range, slice)
#: Objects whose death may run code of their own, or other extensions' (a code object's
#: co_extra free functions; a function or method holds a code object; a generator's close()).
_DEATH_RUNS_CODE = (types.FunctionType, types.CodeType, types.MethodType, types.GeneratorType,
                    types.CoroutineType, types.AsyncGeneratorType, types.FrameType)
#: Objects looked at per check before giving up (and ending the graph).
_DROP_BUDGET = 256


def _drop_may_run_code(vt: Any, owns: Callable[[Source], bool], depth: int = 0,
                       judge: Callable[[Any], bool] | None = None) -> bool:
    """Whether letting go of `vt` may free an object whose death runs code (`check_drop`). A
    value read from a source the frame does not own is held there too; arrays and symbolic
    scalars are not looked at (deleting arrays is common and their death runs nothing).
    `judge`, when given, decides for an argument the frame owns, instead of a look at its value
    (`InstructionTranslator.judge_iteration_value`)."""
    if isinstance(vt, LazyVariable):
        if not owns(vt.source):
            return False
        return judge(vt) if judge is not None else _object_may_run_code(vt.value)
    if isinstance(vt, (NDArrayVariable, SymIntVariable, UnspecializedScalarVariable,
                       NullVariable)):
        return False
    source = getattr(vt, "source", None)
    if source is not None and not owns(source):
        return False
    if isinstance(vt, ConstantVariable):
        return not is_immutable(vt.value) and _object_may_run_code(vt.value)
    if isinstance(vt, (_Sequence, DictVariable)):
        items = vt.items.values() if isinstance(vt, DictVariable) else vt.items
        return depth > 4 or any(_drop_may_run_code(item, owns, depth + 1, judge)
                                for item in items)
    if isinstance(vt, (BuiltinVariable, NumpyFunctionVariable)):
        return False  # (a builtin, ufunc or NumPy function: its module holds it)
    if isinstance(vt, MethodVariable):  # (``x.sum``: an array's method)
        return _drop_may_run_code(vt.obj, owns, depth + 1, judge)
    if isinstance(vt, NestedFunctionVariable):
        # (its code is a constant of this code, its cells the frame's: only its defaults may
        # hold something of the frame's own)
        parts = [part for part in (vt.defaults, vt.kwdefaults)  # (trackers, or None)
                 if isinstance(part, VariableTracker)]
        return depth > 4 or any(_drop_may_run_code(part, owns, depth + 1, judge)
                                for part in parts)
    if isinstance(vt, UserFunctionVariable) and _module_attribute(vt.fn):
        bound = getattr(vt, "bound_self", None)
        return bound is not None and _drop_may_run_code(bound, owns, depth + 1, judge)
    if "value" in getattr(vt, "__dict__", ()):  # (the object a tracker stands for)
        return _object_may_run_code(vt.value)
    return True  # (a tracker for something made in the frame: unknown)


def _module_attribute(fn: Any) -> bool:
    """`fn` is what its module's namespace holds under its name (so dropping a reference to it
    frees nothing)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return module is not None and held_by(module, getattr(fn, "__name__", "")) is fn


def _object_may_run_code(obj: Any) -> bool:
    """Whether freeing `obj` may run code: it, or an object it references (looked at up to
    `_DROP_BUDGET` objects), has a finalizer or weak references, or is a function, code
    object or generator. Classes and modules are held by their modules and not looked at."""
    seen: set[int] = set()
    work = [obj]
    budget = _DROP_BUDGET
    while work:
        item = work.pop()
        # (type-based checks only: isinstance() reads an object's __class__, which runs code
        # for a proxy, and raises ReferenceError for a weakref.proxy whose referent died)
        typ = type(item)
        if id(item) in seen or typ in _INERT_TYPES or issubclass(
                typ, (type, types.ModuleType, types.BuiltinFunctionType)):
            continue
        seen.add(id(item))
        budget -= 1
        if budget < 0 or issubclass(typ, _DEATH_RUNS_CODE) or hasattr(typ, "__del__"):
            return True
        try:
            if weakref.getweakrefcount(item):
                return True
        except TypeError:  # (not weakly referenceable)
            pass
        if issubclass(typ, (np.ndarray, np.generic)):
            continue  # (an array's base is an array or a buffer: nothing runs when it dies)
        work.extend(gc.get_referents(item))
    return False


class ArrayRowIterator(VariableTracker):
    """``for row in x``: each row is read when its iteration starts (x[i] then), so a change to
    x made by an earlier iteration is seen, as in Python (reading every row up front is not)."""

    #: built once where it is needed twice (``zip(it, it)``): one iterator, as in Python
    has_identity = True

    def __init__(self, tx: InstructionTranslator, array: NDArrayVariable) -> None:
        if array.meta.is_scalar or array.meta.ndim == 0:
            raise user_error(TypeError, "iteration over a 0-d array")
        array.dim(0)  # (``for r in x[mask]``: how many rows depends on the data: Unsupported)
        self.tx = tx
        self.array = array
        self.index = 0

    def describe(self) -> str:
        return "iterator over the rows of an array"

    def next(self) -> VariableTracker | None:
        if self.index >= self.array.dim(0):
            return None
        row = self.tx.output.call_function(self.tx, operator.getitem,
                                           [self.array, ConstantVariable(self.index)], {})
        self.index += 1
        return row

    def unpack(self, tx) -> list[VariableTracker]:
        rows = []
        while (row := self.next()) is not None:
            rows.append(row)
        return rows

    def reconstruct(self, codegen) -> None:
        """``iter(x)`` at the row this one reached (an array's iterator is the sequence
        iterator, positioned by its pickled state): it reads the rows live, as this one."""
        _positioned(codegen, _iterator_at, self.array, self.index)


@dataclass(frozen=True)
class PassedCellSource(Source):
    """The contents of the cell a resume function receives as its argument `local_name` (the
    argument slot holds the cell object until the prologue makes it the variable's cell)."""

    local_name: str

    def guard_expr(self) -> str:
        return f"{guard_parameter(self.local_name)}.cell_contents"

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_deref(CellVar(self.local_name)))

    def name(self) -> str:
        return f"L[{self.local_name!r}].cell_contents"


class CellVariable(VariableTracker):
    """A cell of the translating frame, captured by a comprehension (LOAD_CLOSURE)."""

    def __init__(self, tx: InstructionTranslator, name: str) -> None:
        self.tx = tx
        self.name = name

    def describe(self) -> str:
        return f"cell {self.name!r}"


class ComprehensionVariable(VariableTracker):
    """A comprehension or generator expression, created by MAKE_FUNCTION and called right away.

    Calling it inlines its bytecode into the calling frame's graph (`InliningTranslator`)."""

    def __init__(self, tx: InstructionTranslator, code: types.CodeType,
                 cells: list[VariableTracker]) -> None:
        self.home = tx.home()  # (the module of the code that made it)
        self.code = code
        self.cells = cells

    def describe(self) -> str:
        return f"{self.code.co_name} at {self.code.co_filename}:{self.code.co_firstlineno}"

    def reconstruct(self, codegen) -> None:
        # After a graph break (e.g. a print inside it) the comprehension runs as its own frame.
        _rebuild_function(codegen, self.code, self.cells, self.home)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs or len(args) != self.code.co_argcount:
            raise Unsupported(f"unexpected call of {self.describe()}")
        inner = InliningTranslator(tx, self.code, dict(zip(self.code.co_varnames, args)),
                                   self.cells, home=self.home)
        if self.code.co_name == "<genexpr>":
            inner.lazy = True  # (traced as its items are asked for)
            return GeneratorVariable(self, args[0], inner)
        inner.run()
        return inner.return_value


class InliningTranslator(InstructionTranslator):
    """Runs a called function's (or a comprehension's) code inside its caller's translation: same
    graph, same guards. `local_values` binds its parameters; free variables come from `free`
    (name -> tracker factory, for a real function's closure) or from the caller's cells (a
    function or comprehension made in the traced code); globals come from `home` (the module
    the code belongs to: `InstructionTranslator.global_loader`, `namespace`, `module_name`),
    not from the caller, which may belong to another module."""

    def __init__(self, parent: InstructionTranslator, code: types.CodeType,
                 local_values: dict[str, VariableTracker], cells: list[VariableTracker] = (),
                 free: dict[str, Callable[[], VariableTracker]] | None = None,
                 home: Home | None = None) -> None:
        super().__init__(parent.frame, code, parent.output)
        self.parent = parent
        if home is not None:
            self.global_loader, self.namespace, self.module_name = home
        self.cells = {cell.name: cell for cell in cells if isinstance(cell, CellVariable)}
        self.free = free or {}
        self.free_loaded: dict[str, VariableTracker] = {}
        #: escaped cells (`escaped_cell`), by name
        self.escaped: dict[str, EscapedCellVariable] = {}
        self.locals = dict(local_values)
        self.argnames = ()
        self.yielded: list[VariableTracker] = []

    def owns(self, source: Source) -> bool:
        return False  # (what the caller passed in, the caller holds too)

    def total_steps(self) -> int:
        return self.steps + self.parent.total_steps()

    def root(self) -> InstructionTranslator:
        return self.parent.root()

    def inline_depth(self) -> int:
        return self.parent.inline_depth() + 1

    def load_free_variable(self, name: str) -> VariableTracker:
        if name in self.free:
            if name not in self.free_loaded:
                self.free_loaded[name] = self.free[name]()
            return self.free_loaded[name]
        cell = self.cells.get(name)
        if cell is None:
            raise Unsupported(f"free variable {name!r} of {self.code.co_name}")
        owner = cell.tx
        if isinstance(owner, InliningTranslator) and name not in owner.locals:
            return owner.load_free_variable(name)
        return owner.load_argument(name, is_cell=True)

    def load_global(self, name: str) -> VariableTracker:
        if self.global_loader is not None:
            return self.global_loader(name)
        return self.root().load_global(name)

    def escaped_cell(self, name: str) -> "EscapedCellVariable":
        """The cell of this function's cell variable `name`, for a function made here that
        outlives the call (returned, stored, alive at a graph break): one per variable, shared
        by every such function, as Python's cell is."""
        if self.return_value is None:  # (a generator expression stopped at a yield)
            raise Unsupported(f"cannot rebuild a cell of {compat.qualname(self.code)}, which "
                              "has not returned")
        if name not in self.escaped:
            self.escaped[name] = EscapedCellVariable(self, name)
        return self.escaped[name]

    def STORE_DEREF(self, inst: Instr) -> None:
        if isinstance(inst.arg, FreeVar):
            raise Unsupported(f"assigning the nonlocal variable {inst.arg.name!r} of an inlined "
                              "function (a side effect on a closure cell)")
        super().STORE_DEREF(inst)

    def STORE_GLOBAL(self, inst: Instr) -> None:
        if self.global_loader is not None:
            raise Unsupported(f"assigning the global {inst.arg!r} of another module")
        super().STORE_GLOBAL(inst)

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        self.push(ConstantVariable(None))  # the value sent by the first next(), popped next

    def YIELD_VALUE(self, inst: Instr) -> None:
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))
        if self.lazy:
            raise _Yielded  # (back to the consumer; `run` continues after this instruction)

    #: a generator expression's translator: it stops at each yield (`GeneratorVariable`)
    lazy = False


class _Yielded(Exception):
    """A lazily traced generator expression produced an item (not an error)."""


class GeneratorVariable(IteratorVariable):
    """A generator expression's iterator. Its code is traced only as far as the items asked
    for, as in Python: ``any(f(v) for v in xs)`` stops at the first true item, and the side
    effects and errors of later items never happen. Not started yet, it is rebuilt as a new
    generator over the rebuilt iterable after a graph break."""

    has_identity = True  # (rebuilt once: every use at a break gets the same generator)

    def __init__(self, function: "ComprehensionVariable", iterable: VariableTracker,
                 inner: "InliningTranslator") -> None:
        super().__init__(inner.yielded, kind=types.GeneratorType)
        self.function = function
        self.iterable = iterable
        self.inner = inner
        self.started = False

    def describe(self) -> str:
        return f"generator of {self.function.describe()}"

    def next(self) -> VariableTracker | None:
        if self.index >= len(self.items) and self.inner.return_value is None:
            self.started = True
            try:
                self.inner.run()
            except _Yielded:
                pass
        return super().next()

    def unpack(self, tx) -> list[VariableTracker]:
        rest = []
        while (item := self.next()) is not None:
            rest.append(item)
        return rest

    def reconstruct(self, codegen) -> None:
        if self.started:
            raise Unsupported(f"cannot rebuild a started {self.describe()}")
        self.function.reconstruct(codegen)
        codegen.reconstruct(self.iterable)
        codegen.extend(ins.call_self_form())  # (the function below its one argument)


class NestedFunctionVariable(VariableTracker):
    """A function made by ``def`` or ``lambda`` in the traced code (MAKE_FUNCTION): calling it
    inlines it; after a graph break it is made again from its code, defaults and cells, once
    (`Codegen.reconstruct`: every use at the break gets the same function object)."""

    has_identity = True

    def __init__(self, tx: InstructionTranslator, code: types.CodeType, defaults, kwdefaults,
                 annotations, cells: list[VariableTracker]) -> None:
        self.tx = tx
        self.home = tx.home()  # (the module of the code that made it: its ``__globals__``)
        self.code = code
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.annotations = annotations
        self.cells = cells

    def describe(self) -> str:
        return (f"function {compat.qualname(self.code)} made at "
                f"{self.code.co_filename}:{self.code.co_firstlineno}")

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .inline import FunctionSpec, inline_call

        spec = FunctionSpec(self.code, compat.qualname(self.code), self._signature(),
                            home=self.home)
        defaults = self.defaults.unpack(tx) if self.defaults is not None else []
        positional = [p for p in spec.signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for param, value in zip(positional[len(positional) - len(defaults):], defaults):
            spec.defaults[param.name] = (lambda v=value: v)
        if self.kwdefaults is not None:
            for name, value in self.kwdefaults.items.items():
                spec.defaults[name] = (lambda v=value: v)
        return inline_call(tx, spec, args, kwargs, cells=self.cells)

    def _signature(self) -> inspect.Signature:
        # A stand-in function with the same code gives the exact signature (defaults are bound
        # from the trackers above, so stand-in defaults only mark which parameters have one).
        n_defaults = len(self.defaults.items) if self.defaults is not None else 0
        kw = dict.fromkeys(self.kwdefaults.items) if self.kwdefaults is not None else None
        closure = tuple(types.CellType() for _ in self.code.co_freevars) or None
        stand_in = types.FunctionType(self.code, {}, None, (None,) * n_defaults or None, closure)
        stand_in.__kwdefaults__ = kw
        return inspect.signature(stand_in)

    def reconstruct(self, codegen) -> None:
        _rebuild_function(codegen, self.code, self.cells, self.home,
                          (self.defaults, self.kwdefaults, self.annotations))


def _rebuild_function(codegen, code: types.CodeType, cells: list, home: Home,
                      parts: tuple = (None, None, None)) -> None:
    """Push a new function for `code`, as the MAKE_FUNCTION that made it in the trace did:
    `parts` (defaults, keyword defaults, annotations: trackers or None), closing over `cells`
    (the frame's own, or those of inlined calls that have returned: `_push_cell`), with the
    globals of `home`. MAKE_FUNCTION would give it the frame's globals: a function made by a
    callee from another module is made by `instructions.function_in` instead, which gives it
    that module's (and so its builtins and ``__module__``)."""
    foreign = home.namespace is not None
    if foreign:
        codegen.extend(ins.null_before() + ins.load_const(ins.function_in) + ins.null_after()
                       + ins.load_const(code) + ins.load_const(home.namespace))
    flags = 0
    for bit, part in zip((0x01, 0x02, 0x04), parts):
        if part is not None:
            codegen.reconstruct(part)
            flags |= bit
        elif foreign:
            codegen.extend(ins.load_const(None))
    if cells:
        for cell in cells:
            _push_cell(codegen, code, cell)
        codegen.extend(ins.build_tuple(len(cells)))
        flags |= 0x08
    elif foreign:
        codegen.extend(ins.load_const(None))
    codegen.extend(ins.call(6) if foreign else ins.make_function(code, flags))


def _cell_owner(cell: VariableTracker) -> CellVariable | None:
    """The cell variable `cell` is (a free variable of inlined code is its maker's cell): of
    the frame, or of an inlined call; None: a cell of a real function's closure."""
    while (isinstance(cell, CellVariable) and cell.tx is not cell.tx.root()
           and cell.name not in cell.tx.code.co_cellvars):
        cell = cell.tx.cells.get(cell.name)
    return cell if isinstance(cell, CellVariable) else None


def _push_cell(codegen, code: types.CodeType, cell: VariableTracker) -> None:
    """Push the cell object a function being rebuilt closes over: a cell of the frame itself,
    or the cell of a variable of an inlined call (made anew: the call ran inside the graph)."""
    owner = _cell_owner(cell)
    if owner is None:
        raise Unsupported(f"cannot rebuild {compat.qualname(code)} (it closes over a variable "
                          "of a function called in the trace)")
    if owner.tx is not owner.tx.root():
        codegen.reconstruct(owner.tx.escaped_cell(owner.name))
        return
    kind = FreeVar if owner.name in owner.tx.code.co_freevars else CellVar
    codegen.extend(ins.load_closure(kind(owner.name)))


class EscapedCellVariable(VariableTracker):
    """The cell of a cell variable of an inlined call that returned, which a function made in
    it still closes over: rebuilt as a new cell holding the variable's last value (nothing can
    change it any more: the call is over, and an inlined function that assigns a nonlocal
    variable is not traced)."""

    has_identity = True  # (one cell, shared by every function that closes over it)

    def __init__(self, tx: "InliningTranslator", name: str) -> None:
        self.tx = tx
        self.name = name
        self.source = None

    def describe(self) -> str:
        return f"cell {self.name!r} of {compat.qualname(self.tx.code)}"

    def value(self) -> VariableTracker | None:
        """The variable's last value; None when it was unbound."""
        return self.tx.locals.get(self.name)

    def reconstruct(self, codegen) -> None:
        value = self.value()
        codegen.extend(ins.with_null(ins.load_const(types.CellType)))
        if value is not None:
            codegen.reconstruct(value)
        codegen.extend(ins.call(0 if value is None else 1))


def _escaped_cells(cells: list) -> list[VariableTracker]:
    """The values in the cells of inlined calls that `cells` (a function's closure) hold."""
    owners = [_cell_owner(cell) for cell in cells]
    return [owner.tx.locals[owner.name] for owner in owners
            if owner is not None and owner.tx is not owner.tx.root()
            and owner.name in owner.tx.locals]


def _dispatch_table(cls: type) -> dict[str, Callable]:
    return {name: getattr(cls, name) for name in dir(cls) if name.isupper() and callable(getattr(cls, name))}


for _name in NAMED_BINARY_OPS:
    setattr(InstructionTranslator, _name, InstructionTranslator._binary_named)
InstructionTranslator.dispatch = _dispatch_table(InstructionTranslator)
InliningTranslator.dispatch = _dispatch_table(InliningTranslator)


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
        for value in _escaped_cells(vt.function.cells):
            _graph_values(value, found, inside)
    elif isinstance(vt, ComprehensionVariable):
        for value in _escaped_cells(vt.cells):
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
        for part in (vt.defaults, vt.kwdefaults, vt.annotations, *_escaped_cells(vt.cells)):
            if part is not None:
                _graph_values(part, found, inside)
    return found


#: Operations on sizes that stay symbolic (no guard): arithmetic that keeps an int exact, and
#: comparisons (their answer is guarded only when the sizes' bounds do not settle it).
_SIZE_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
             operator.iadd, operator.isub, operator.imul, operator.ifloordiv, operator.imod,
             operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge}


def _is_symbolic_int(vt: VariableTracker) -> bool:
    """A size (`SymIntVariable`) or an int argument that can be a symbol (it then becomes one
    when `_symbolic_operand` asks)."""
    return isinstance(vt, SymIntVariable) or (isinstance(vt, UnspecializedScalarVariable)
                                              and vt.can_be_symbolic())


def _symbolic_operand(vt: VariableTracker) -> Any:
    if isinstance(vt, SymIntVariable):
        return vt.sym
    if isinstance(vt, UnspecializedScalarVariable):
        return vt.symbolic()
    return vt.value


def _symbolic_size_op(op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``n - 1``, ``n * m``, ``n > 5`` for sizes, int arguments that can be symbols and ints;
    None for anything else (the caller then fixes the sizes to their values)."""
    def symbolic(vt: VariableTracker) -> bool:
        return _is_symbolic_int(vt) or (isinstance(vt, ConstantVariable)
                                        and type(vt.value) is int)

    if op not in _SIZE_OPS or not symbolic(a) or not symbolic(b):
        return None
    try:
        return wrap_constant(op(_symbolic_operand(a), _symbolic_operand(b)))
    except ZeroDivisionError:
        return None  # (raised again, with the user's traceback, by the plain path)


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
    while True:
        output = OutputGraph(code.co_name, backend, code=code, dynamic=dynamic)
        tx = InstructionTranslator(frame, code, output, break_at)
        tx.guard_operands = raised
        try:
            tx.run()
            break
        except Unsupported as exc:
            if (not allow_breaks or break_at is not None or tx.info.sees_all_locals
                    or tx.info.shadows_a_cell):
                # (a frame that reads its locals by name would see a resume function's; a
                # comprehension shadowing a cell cannot be split: `CodeInfo.shadows_a_cell`)
                raise
            entry = tx.info.loop_entry(tx.index)
            if entry is not None:
                # Inside a loop: a break there would nest one resume function per iteration,
                # and a budget overrun means unrolling is too costly. The graph ends before the
                # loop; the loop and what follows run in plain Python.
                break_at = (entry, "loop")
            else:
                kind = None if isinstance(exc, BudgetExceeded) else tx.break_kind(tx.index, exc)
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
        if break_at[1] == "loop":
            _plan_loop(tx, tx.break_exit, reason)
            if tx.break_exit.loop_plan is None and not tx._has_operations():
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
    cheap = tx.kept_alive(exit.untouched_args)
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
