"""The symbolic bytecode translator: simulates a frame's bytecode on VariableTrackers, recording
NumPy operations into the OutputGraph.

In: the frame view from the C hook (code, globals, builtins, argument values, closure) and the
`OutputGraph` to record into. Out: the translator's final state: the return value, or where the
trace stopped (`break_exit`, see `break_exits`), for `compile_frame`, which drives it. Code it
cannot capture raises `Unsupported` with the user's file:line.

One handler method per opcode, named after it; the dispatch table is built once per class.
What an operator means is `variables.operators`; what a value can do is its tracker's
(`variables/`). A call of a Python function is inlined by an `InliningTranslator` over the
callee's code (`inline_call`), which records into the same graph.
"""

from __future__ import annotations

import time
import types
from functools import partial
from typing import Any, Callable

from bytecode import CellVar, FreeVar, Instr, Label

from . import compat, config, loop_kernels, trace_rules
from . import instructions as ins
from .break_exits import break_exit
from .bytecode_analysis import code_info
from .codegen import BreakExit, argument_names
from .exc import Unsupported, UserCodeError
from .guards import Guard
from .output_graph import OutputGraph, source_line
from .region_body import BodyPlan
from .resume import in_loop_body, is_resume_code, passed_cells, prologue_length
from .side_effects import SideEffects
from .source import (ClosureCellSource, ClosureSource, GlobalSource, LocalSource,
                     PassedCellSource, Source)
from .value_opcodes import ValueOpcodes
from .variables import (BuiltinVariable, ConstantVariable, DictVariable, NDArrayVariable,
                        NullVariable, VariableBuilder, VariableTracker)
from .variables.builder import wrap_constant
from .variables.constant import user_error
from .variables.containers import iterate
from .variables.finalizers import (ABSENT, UNKNOWN, drop_may_run_code, instance_value,
                                   judge_iteration_value, object_may_run_code)
from .variables.functions import (MAX_INLINE_DEPTH, NEVER_INLINED, CellVariable,
                                  ComprehensionVariable, EscapedCellVariable, FunctionSpec,
                                  HeldMaker, Home, NestedFunctionVariable, Yielded,
                                  bind_arguments, spec_for_function)
from .variables.lazy import LazyVariable, realize
from .variables.ndarray import ArrayRowIterator
from .variables.operators import identical

__all__ = ["InstructionTranslator", "InliningTranslator", "BudgetExceeded"]


class InstructionTranslator(ValueOpcodes):
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
        #: outermost loops that may become a C loop kernel (`loop_kernels`; first pass only,
        #: the frame's own code only)
        self.kernel_entries: set[int] = (
            loop_kernels.loop_entries(self.info)
            if break_at is None and frame.f_code is code and loop_kernels.wants_kernels(self)
            else set())
        #: ``if`` statements whose condition the first pass found to depend on data: where a
        #: kernel may run the whole statement (`loop_kernels`; set by `compile_frame`)
        self.conditional_entries: set[int] = set()
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
                self.break_exit = break_exit(self)
                return
            if self.ip in self.kernel_entries:
                self.kernel_entries.discard(self.ip)
                found = loop_kernels.plan(self, self.ip)
                if found is not None:  # (the trace ends before the loop's first instruction:
                    # the state here is the state before it, so no second trace is needed)
                    self.break_at = (self.ip, "kernel")
                    self.break_exit = break_exit(self)
                    self.break_exit.reason = found.reason
                    self.break_exit.loop_plan = found  # (`compile_frame._plan_kernel`)
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

    # Inlining -----------------------------------------------------------------------------------

    def inline_call(self, spec: FunctionSpec, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker], cells: list = ()) -> VariableTracker:
        """Trace a call of `spec` with these arguments into this graph; return its result.
        `cells`: the caller's cells a function made in the traced code closes over."""
        if spec.code.co_flags & NEVER_INLINED:
            raise Unsupported(f"call to the generator or coroutine function {spec.name} is not "
                              "inlined")
        skipped = trace_rules.skip_reason(spec.code)
        if skipped is not None:
            raise Unsupported(f"call to {spec.name}: {skipped} is not traced")
        if self.inline_depth() >= MAX_INLINE_DEPTH:
            raise Unsupported(f"call to {spec.name} nested {MAX_INLINE_DEPTH} calls deep "
                              "(recursion?)")
        inner = self.inline_translator(spec.code, bind_arguments(spec, args, kwargs), cells,
                                       free=spec.free, home=spec.home)
        inner.run()
        return inner.return_value

    def inline_function(self, fn: types.FunctionType, source: Source | None,
                        args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Trace a call of the real function `fn`, read from `source` (which guards what it
        reads: defaults, closure contents, foreign globals), into this graph."""
        return self.inline_call(spec_for_function(self, fn, source), args, kwargs)

    def inline_translator(self, code: types.CodeType, local_values: dict[str, VariableTracker],
                          cells: list = (), free: dict | None = None,
                          home: Home | None = None) -> "InliningTranslator":
        """A translator for `code` called from here (not run yet: a generator expression's
        runs as its items are asked for)."""
        return InliningTranslator(self, code, local_values, cells, free=free, home=home)

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

    def has_operations(self) -> bool:
        return any(n.op in ("call_function", "call_method") for n in self.output.graph.nodes)

    def operation_count(self) -> int:
        return sum(n.op in ("call_function", "call_method") for n in self.output.graph.nodes)

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
        if self.drop_runs_code(name):
            what = "del" if inst.name == "DELETE_FAST" else "rebinding"
            raise Unsupported(
                f"{what} of local {name!r} may free an object whose finalizer or weakref "
                f"callback runs code: the graph ends here, so it runs before what follows",
                self.user_location())

    def drop_runs_code(self, name: Any) -> bool:
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
        judge = partial(judge_iteration_value, self) if in_loop_body(self.code) else None
        return drop_may_run_code(old, self.owns, judge=judge)

    def removal_runs_code(self, items: list[VariableTracker]) -> bool:
        """(``pop``/``clear`` of a list from outside the frame, `containers.ListMethodVariable`)
        Whether losing these items may run code: their new list is written back after the graph,
        so such a death would come after what follows."""
        return any(drop_may_run_code(item, lambda source: True) for item in items)

    def owns(self, source: Source) -> bool:
        """Whether a value read from `source` may be referenced by this frame only: an argument
        of a resume function (the hook hands the references over when it starts). A function
        called by Python code while a frame hook is installed gets its arguments from a caller
        whose stack still holds them until the call returns (CPython does not move them into
        the frame then), so dropping one frees nothing; anything read from a global, a cell or
        an object is held there too."""
        return isinstance(source, LocalSource) and is_resume_code(self.code)

    def LOAD_CONST(self, inst: Instr) -> None:
        if inst.arg is ins.Held:  # (3.10: a resume function's prologue rebuilding a NULL)
            self.push(HeldMaker())
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
            old = instance_value(realize(obj).value, inst.arg)
            if old is UNKNOWN or (old is not ABSENT and object_may_run_code(old)):
                self.check_replaced(f"attribute {inst.arg!r}", None, None)
        store(self, inst.arg, value)

    def check_replaced(self, what: str, old: VariableTracker | None,
                       owns: Callable[[Source], bool] | None) -> None:
        """Raise (a graph break at this write, which then runs in plain Python in order) when
        the value `what` holds may die with this write and its death runs code: `old` (a
        tracker, checked with `owns`), or None when the caller already found that it may."""
        if old is not None and not drop_may_run_code(old, owns):
            return
        raise Unsupported(
            f"replacing {what} may free an object whose finalizer or weakref callback runs "
            f"code: the graph ends here, so it runs before what follows", self.user_location())

    def STORE_GLOBAL(self, inst: Instr) -> None:
        source = GlobalSource(inst.arg)
        if source in self.output.wrapped:  # (read or written in this trace)
            self.check_replaced(f"global {inst.arg!r}", self.output.wrapped[source],
                                lambda s: s == source or self.owns(s))
        elif object_may_run_code(self.frame.f_globals.get(inst.arg)):
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

    # Prologue --------------------------------------------------------------------------------

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
        is_none = identical(self, value, ConstantVariable(None))
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


class BudgetExceeded(Unsupported):
    """The trace ran past its instruction or time budget."""


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
            raise Yielded  # (back to the consumer; `run` continues after this instruction)

    #: a generator expression's translator: it stops at each yield (`GeneratorVariable`)
    lazy = False


def _dispatch_table(cls: type) -> dict[str, Callable]:
    return {name: getattr(cls, name) for name in dir(cls) if name.isupper() and callable(getattr(cls, name))}


InstructionTranslator.dispatch = _dispatch_table(InstructionTranslator)
InliningTranslator.dispatch = _dispatch_table(InliningTranslator)


