"""Codegen: writes the transformed bytecode of a captured frame with the `bytecode` package.

In: the original code object, the compiled graph (`GraphResult`, or None when the graph has no
operations) and how the trace ended (`FrameExit`). Out: the transformed code object. Called by
`compile_frame.compile_subgraph`, the one place where translation ends.

Every transformed code keeps the original's prefix (COPY_FREE_VARS, MAKE_CELL, RESUME), calls the
compiled graph with its inputs reloaded from their sources, and then:

* at a return: rebuilds the return value from graph outputs, inputs and constants, and returns;
* at a graph break: rebuilds the values the rest of the frame needs (the value stack, the live
  locals, the contents of cells), runs the one instruction the translator could not capture in
  plain Python, and returns ``tail_call(*args, resume_fn)`` for a resume function
  (`resume.py`) that continues the original code after that instruction (one resume function
  per branch for a conditional jump). The C hook makes that call once this frame has returned,
  so the resume function's frame takes the frame's place: the same caller, the same stack
  depth, one traceback entry.

It keeps the original's argument, cell and free variable layout and only appends locals, with
every argument made positional, so the C hook can call it with the frame's argument slots (see
docs/internals.md). Instructions are spelled by `instructions.py`.

Where a break comes before a loop that runs with its body as a function, or before a try/with
statement whose protected block is a function, the plan object writes its side of the call
(`loops.LoopPlan.emit_driver`, `region_body.BodyPlan.emit_call` and `emit_in_handler`) with the
`Codegen` object and `call_resume` / `make_continuation` from here: each calling convention
lives in the module of its plan, which imports this one, never the other way.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bytecode import CellVar, FreeVar, Instr, Label, TryBegin, TryEnd
from bytecode.flags import CompilerFlags
from bytecode.instr import InstrLocation

from . import compat
from . import instructions as ins
from ._C import own_builtins, stay_in_frame, tail_call
from .bytecode_analysis import Region, code_info
from .exc import Unsupported
from .output_check import OutputCheck
from .resume import (mark_plain_loop, note_empty_breaks, prologue_length, reads_a_bool,
                     rest_of_code, resume_code, super_receiver, target_lineno)
from .tracebacks import relocate_graph_error, traceback_after
from .variables.base import NullVariable, VariableTracker, made_while_tracing
from .variables.containers import DictVariable, ListVariable, TupleVariable
from .variables.constant import ConstantVariable

if TYPE_CHECKING:
    from .output_graph import GraphResult
    from .side_effects import SideEffects

__all__ = ["Codegen", "FrameExit", "ReturnExit", "BreakExit", "transform_code", "argument_names",
           "call_resume", "make_continuation"]

GRAPH_OUT = "___graph_out"
#: Where the transformed code keeps the new values of replayed side effects between loading
#: them all and storing them (deleted right after).
EFFECT_TEMP = "___saved_effect"
#: Where `call_resume` keeps the stack values it passes (a try/with statement's exit) while it
#: pushes the callable under them (deleted right after).
EXIT_TEMP = "___exit_value"
#: Where a graph break that continues in its own frame keeps the stack values while it drops
#: the tail call's callable from under them (deleted right after).
STAY_TEMP = "___stay_stack"


@dataclass
class ReturnExit:
    """The trace reached RETURN_VALUE with `value`."""

    value: VariableTracker
    side_effects: "SideEffects | None" = None
    #: cell variables assigned in the frame -> their values, stored into the cells at the return
    cells: dict = field(default_factory=dict)


@dataclass
class BreakExit:
    """The trace stopped before instruction `index`, which runs in plain Python.

    `stack` is the value stack before it (bottom first; NullVariable for NULL slots), `consumed`
    how many of the top values the instruction (or call sequence) takes, `run` the instructions
    to emit for it (``KW_NAMES``/``PRECALL``/``CALL`` for a call), `locals` the frame's locals by
    name as the translator has them (only the live ones at a continuation are passed),
    `continuations` one (resume index, live locals) per way control leaves the instruction: the
    fall-through first, then the jump target for a conditional jump.
    """

    index: int
    reason: str
    stack: list[VariableTracker]
    consumed: int
    run: list[Instr]
    locals: dict[str, VariableTracker]
    #: per continuation: (index to resume at, values the instruction leaves on the stack there,
    #: names of the live locals to pass)
    continuations: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)
    #: locals the translator never rebound: still the frame's own argument slots
    untouched_args: frozenset[str] = frozenset()
    #: set when the break is before a loop that is not unrolled: why (the resume function
    #: starting with the loop then runs in plain Python)
    plain_loop: str | None = None
    #: set when the break is before a ``for`` loop that runs in Python with its body as a
    #: function (`loops.LoopPlan`): the transformed code drives the loop (`LoopPlan.emit_driver`)
    loop_plan: Any = None  # (a `loops.LoopPlan`; loops builds on this module, so no type here)
    side_effects: "SideEffects | None" = None
    #: set when the break is before a ``try``/``with`` statement that runs in plain Python in
    #: the transformed code (`bytecode_analysis.Region`)
    region: "Region | None" = None
    #: the region's protected block as a body function, or None (the block runs in place)
    region_body: Any = None  # (a `region_body.BodyPlan`, likewise)
    #: graph breaks in a row, this one included, with no graph before them (0: this one ends a
    #: graph): recorded for the resume functions (`resume.note_empty_breaks`)
    empty_breaks: int = 0


FrameExit = ReturnExit | BreakExit


class Codegen:
    """Accumulates instructions; VariableTrackers and Sources append their own rebuild code."""

    def __init__(self, result: GraphResult | None, lineno: int) -> None:
        self.result = result
        self.lineno = lineno
        self.instructions: list[Instr | Label] = []
        self.output_index = {node: i for i, node in enumerate(result.graph_outputs)} if result else {}
        self.built: dict[object, tuple[str, VariableTracker]] = {}
        #: source positions to pad the code with (`emit_pads`)
        self.pads: set[tuple] = set()
        #: (3.10) the lines a handler may leave the frame at (`fix_and_reraise`)
        self.pad_lines: set[int] = set()
        #: continuations that may run in this frame (`_stay`): index in the original code ->
        #: (the label of its entry, whether the stack there holds values)
        self.stay_entries: dict[int, tuple[Label, bool]] = {}
        #: what each `_stay` check runs when it is true: (its label, instructions), emitted
        #: after the code
        self.stay_blocks: list[tuple[Label, list[Instr]]] = []

    def append(self, instr: Instr) -> None:
        instr.lineno = self.lineno
        self.instructions.append(instr)

    def extend(self, instrs: list[Instr]) -> None:
        for instr in instrs:
            self.append(instr)

    def pad_positions(self, positions) -> None:
        """Source positions a traceback entry of this frame may be moved to (see `pads`); a
        code object gives all of its own. (3.10: only the lines, see `fix_and_reraise`.)"""
        if isinstance(positions, types.CodeType):
            if not ins.HAS_EXCEPTION_TABLE:
                self.pad_lines.update(line for _, _, line in positions.co_lines()
                                      if line is not None)
                return
            positions = positions.co_positions()
        positions = [p for p in positions if p is not None and p[0] is not None]
        if ins.HAS_EXCEPTION_TABLE:
            self.pads.update(positions)
        else:
            self.pad_lines.update(p[0] for p in positions)

    def emit_pads(self) -> None:
        """After the code (never run): one NOP per position collected by `pad_positions`. A
        traceback entry of this frame moved to the statement that raised (`tracebacks`) needs
        an instruction of this code with that position: its line and columns are what a printed
        traceback shows, and a handler that restores the frame's position from it gives the
        frame that line."""
        for position in sorted(self.pads, key=lambda p: tuple(-1 if v is None else v for v in p)):
            self.instructions += ins.nop(InstrLocation(*position))

    def extend_located(self, instrs: list[Instr]) -> None:
        """Append instructions that keep their own source positions (the user's instruction
        that runs at a break: a traceback through it shows the user's line and columns)."""
        for instr in instrs:
            if instr.location is None or instr.location.lineno is None:
                instr.lineno = self.lineno
            self.instructions.append(instr)

    def forget_temporaries(self) -> None:
        """Delete the locals used while rebuilding values (the graph's output tuple, containers
        built once), so the frame's locals are the user's again."""
        if self.result is not None and not self.result.single_output:
            self.extend(ins.delete_fast(GRAPH_OUT))
        for name, _ in self.built.values():
            self.extend(ins.delete_fast(name))
        self.built.clear()

    def label(self, label: Label) -> None:
        self.instructions.append(label)

    def label_raw(self, item: "TryBegin | TryEnd") -> None:
        """An exception table pseudo-instruction (a try range opens or closes here) of a user's
        statement copied into generated code. 3.10 has no exception table: the copy brings its
        own SETUP_* and POP_BLOCK instructions. (npdynamo's own handlers: `protect`.)"""
        if ins.HAS_EXCEPTION_TABLE:
            self.instructions.append(item)

    def protect(self, handler: Label) -> "TryBegin | None":
        """Until `unprotect`, an exception goes to `handler`, which starts with the exception
        (and the frame's position) on the stack and must end with `fix_and_reraise`: an
        exception table range (3.11+), or a SETUP_FINALLY block (3.10)."""
        if ins.HAS_EXCEPTION_TABLE:
            begin = TryBegin(handler, True)
            self.instructions.append(begin)
            return begin
        self.extend(ins.setup_finally(handler))
        return None

    def unprotect(self, begin: "TryBegin | None") -> None:
        if ins.HAS_EXCEPTION_TABLE:
            self.instructions.append(TryEnd(begin))
        else:
            self.extend(ins.pop_block())

    def fix_and_reraise(self, fix: Any) -> None:
        """The body of a `protect` handler: `fix` (a `tracebacks` function) rewrites the
        exception's traceback, and the exception is raised on from the statement that raised
        (RERAISE adds no entry). On 3.10 the rewritten traceback also replaces the one on the
        stack, which is what the next handler's ``sys.exc_info()`` gets."""
        if ins.HAS_EXCEPTION_TABLE:
            self.fix_position(fix, 1)
            self.extend(ins.reraise(restore_position=True))
            return
        for item in ins.reraise_with_traceback(traceback_after, fix, sorted(self.pad_lines)):
            if isinstance(item, Instr) and item.lineno is None:
                item.lineno = self.lineno
            self.instructions.append(item)

    def fix_position(self, fix: Any, lasti_below: int | None) -> None:
        """With the exception on top of the stack: call `fix` (a `tracebacks` function) on it;
        the instruction index it answers replaces the frame position the handler pushed,
        `lasti_below` values under the exception (None: none pushed), so that a ``RERAISE 1``
        leaves the frame at the statement that raised, as plain Python does. A Python call is
        fine here: transformed code runs only while no trace or profile function is set."""
        self.extend(ins.with_null(ins.load_const(fix)) + ins.copy(2 + ins.NULL_SLOTS)
                    + ins.call(1))                              # ..., exc, index
        if lasti_below is None:
            self.extend(ins.pop_top())
            return
        replace, done = Label(), Label()
        self.extend(ins.copy(1) + ins.if_not_equal(-1, replace)
                    + ins.pop_top() + ins.jump_forward(done))   # -1: leave the position as it is
        self.label(replace)
        self.extend(ins.swap(lasti_below + 2) + ins.pop_top())  # the index where the position was
        self.label(done)

    def load_graph_value(self, vt: VariableTracker) -> None:
        node = vt.node
        if node in self.output_index:
            if self.result.single_output:
                raise AssertionError("a single-output graph's value is not stored")
            self.extend(ins.load_fast(GRAPH_OUT) + ins.load_const(self.output_index[node]))
            self.extend(ins.binary_subscr())
        elif vt.source is not None:
            vt.source.reconstruct(self)
        else:
            raise Unsupported(f"graph value {node.name} is neither an output nor an input")

    def call_graph(self) -> None:
        """Call the compiled graph; its outputs go to GRAPH_OUT (or stay on the stack when the
        graph returns one bare value). An exception from the graph passes `graph_error_handler`,
        which gives this frame's traceback entry the line of the statement that raised."""
        self.graph_error = Label()
        self.pad_positions(node.meta.get("frame_position")
                           for node in self.result.graph_module.graph.nodes)
        protected = self.protect(self.graph_error)
        compiled = self.result.compiled_fn
        if isinstance(compiled, OutputCheck):  # (its `call`: a check, then the callable itself)
            self.extend(ins.with_null(ins.load_const(compiled) + ins.load_attr("call")))
        else:
            self.extend(ins.with_null(ins.load_const(compiled)))
        for source in self.result.input_sources:
            source.reconstruct(self)
        self.extend(ins.call(len(self.result.input_sources)))
        self.unprotect(protected)
        if not self.result.single_output:
            self.extend(ins.store_fast(GRAPH_OUT))

    def graph_error_handler(self) -> None:
        """The handler of `call_graph`, after the code (the exception on the stack): relocate
        its traceback entry (`relocate_graph_error`) and raise it on (RERAISE adds none)."""
        self.label(self.graph_error)
        self.fix_and_reraise(relocate_graph_error)

    def reconstruct(self, vt: VariableTracker) -> None:
        """Push `vt`. A container or function made in the frame is built once: where it is
        needed again (a list both on the stack and in a local, a function in a local and in a
        list), the same object is reloaded, so a mutation through one name is seen through the
        other and ``is`` holds, as in Python."""
        if isinstance(vt, NullVariable):
            self.extend(ins.push_null())
            return
        # (the class attribute: a LazyVariable would realize itself, and guard, on getattr)
        identity = ((getattr(type(vt), "has_identity", False)
                     and not (isinstance(vt, TupleVariable) and vt.literal is not None))
                    # (an object rebuilt by calling what made it: ``slice(1, 3)`` on 3.11)
                    or (type(vt) is ConstantVariable and vt.made_by is not None))
        shared = (isinstance(vt, (ListVariable, DictVariable)) or identity) and vt.source is None
        key = id(vt)
        if type(vt) is ConstantVariable and vt.source is None and made_while_tracing(vt.value):
            # (a string made anew on every call: one object wherever the frame has it, by
            # value, since two trackers may hold it)
            shared, key = True, ("made", id(vt.value))
        if shared and key in self.built:
            self.extend(ins.load_fast(self.built[key][0]))
            return
        vt.reconstruct(self)
        if shared:
            name = f"___built_{len(self.built)}"
            self.built[key] = (name, vt)  # (vt kept alive so its id is not reused)
            self.extend(ins.copy(1) + ins.store_fast(name))


def transform_code(code: types.CodeType, result: GraphResult | None, exit: FrameExit,
                   lineno: int) -> types.CodeType:
    """The transformed code object for `code`, ending as `exit` says."""
    # A code object without line numbers (its line table removed) stays without: a traceback
    # through it shows f_lineno None, as for the original.
    gen = Codegen(result, lineno if has_line_numbers(code) else None)
    if result is not None:
        gen.call_graph()
    if isinstance(exit, ReturnExit):
        if result is None or not result.single_output:
            gen.reconstruct(exit.value)
        for name, vt in exit.cells.items():
            gen.reconstruct(vt)
            gen.extend(ins.store_deref(CellVar(name)))
        if exit.side_effects:
            exit.side_effects.codegen(gen)
        gen.extend(ins.return_value())
    else:
        _emit_break(gen, code, exit)
    if result is not None:
        gen.graph_error_handler()
    gen.emit_pads()
    if gen.stay_entries:
        _emit_rest(gen, code)
    return _assemble(code, gen.instructions)


def _emit_break(gen: Codegen, code: types.CodeType, exit: BreakExit) -> None:
    """The value stack is rebuilt as the original had it (NULL slots, which the resume function
    re-pushes, left out), under ``NULL, tail_call``; the live locals and cells are stored; the
    side effects are replayed; the instruction runs on its operands; and each way out of it
    returns ``tail_call(*stack, *live_locals, resume_fn)``. No temporaries stay in the frame's
    locals, so a traceback through the instruction shows the user's variables only."""
    deep = exit.stack[:len(exit.stack) - exit.consumed]
    top = exit.stack[len(exit.stack) - exit.consumed:]
    cellvars = list(code.co_cellvars)
    # A loop driver or a try/with statement copied here runs on the stack as the original had
    # it (a handler's stack depth is counted from the bottom): nothing goes under it.
    driven = exit.loop_plan is not None or exit.region is not None
    receiver = super_receiver(code)
    if not driven:
        gen.extend(ins.with_null(ins.load_const(tail_call)))
        if receiver is not None:  # (the resume function's first argument: see super_receiver)
            if receiver in exit.locals:
                gen.reconstruct(exit.locals[receiver])
            elif receiver in exit.untouched_args:
                gen.extend(ins.load_fast(receiver))
            else:
                raise Unsupported(f"super() needs {receiver!r}, which is unbound here")
    # Everything the rest of the frame needs is loaded before anything is stored, and before the
    # instruction runs (which may rebind globals or mutate objects a Source reads through); one
    # of the operands may be read from a local that a store below rebinds (``y = x; x = x + 1;
    # print(y)``).
    for vt in deep:
        if not isinstance(vt, NullVariable):
            gen.reconstruct(vt)
    null_pending = False
    for vt in top:
        gen.reconstruct(vt)
        if null_pending:  # (3.10: the NULL goes in under the callable just pushed)
            gen.extend(ins.null_under_top())
        null_pending = isinstance(vt, NullVariable)
    stores: list[tuple[str, str]] = []  # (how, name): how is "fast" or "cell"
    passed: set[str] = set()
    for _, _, live in exit.continuations:
        passed.update(live)
    if receiver is not None and driven:
        passed.add(receiver)  # (loaded by name where the statement or loop ends)
    for name in sorted(passed):
        if name in exit.locals:
            gen.reconstruct(exit.locals[name])
            stores.append(("fast", name))
    for name in cellvars:
        if name in exit.locals:
            gen.reconstruct(exit.locals[name])
            stores.append(("cell", name))
    for name, vt in getattr(exit.loop_plan, "graph_locals", ()):  # (a loop node's outcome)
        gen.reconstruct(vt)
        stores.append(("fast", name))
    effects = exit.side_effects.load(gen) if exit.side_effects else 0
    stores += [("fast", f"{EFFECT_TEMP}{k}") for k in range(effects)]
    for how, name in reversed(stores):
        gen.extend(ins.store_fast(name) if how == "fast" else ins.store_deref(CellVar(name)))
    gen.forget_temporaries()
    if effects:  # replayed before the instruction runs (it may read what they change)
        for k in range(effects):
            gen.extend(ins.load_fast(f"{EFFECT_TEMP}{k}"))
        for k in range(effects):
            gen.extend(ins.delete_fast(f"{EFFECT_TEMP}{k}"))
        exit.side_effects.store(gen)
    # Arguments the frame deleted before the break (`del x`, a resume function's stack values)
    # are unbound in the original frame: the shadow frame's slots must not keep them alive
    # while the instruction, statement or loop runs.  (Stored first, so deleting a slot never
    # fails.)
    for name in argument_names(code):
        if (name not in exit.locals and name not in exit.untouched_args
                and name not in cellvars):
            gen.extend(ins.load_const(None) + ins.store_fast(name) + ins.delete_fast(name))
    if exit.region is not None:
        _emit_region(gen, code, exit.region, exit.region_body)
        return
    if driven:
        exit.loop_plan.emit_driver(gen, code)
        return
    run = [Instr(instr.name, instr.arg, location=instr.location) for instr in exit.run]
    if run and run[-1].has_jump():
        branch = Label()
        jump = ins.forward_jump(run[-1], branch)
        for instr in jump:
            instr.location = run[-1].location
        run[-1:] = jump
        gen.extend_located(run)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[0])
        gen.label(branch)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[1])
    else:
        gen.extend_located(run)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[0])


def _emit_resume_call(gen: Codegen, code: types.CodeType, exit: BreakExit,
                      deep: list[VariableTracker], continuation: tuple[int, int, tuple[str, ...]]) -> None:
    """With ``NULL, tail_call``, the stack values and the instruction's `pushed` results on the
    stack: return ``tail_call(*stack, *live_locals, resume_fn)`` for the resume function that
    continues at `target`."""
    target, pushed, live = continuation
    # (`pushed`: how many values the instruction pushed, or which of the continuation's new
    # slots are NULLs the resume function pushes itself: 3.12+ ``super().f``)
    layout = pushed if isinstance(pushed, tuple) else (False,) * pushed
    stack_nulls = tuple(isinstance(vt, NullVariable) for vt in deep) + layout
    live = tuple(name for name in live if name in exit.locals or name in exit.untouched_args)
    # Continuing in this frame: the stack values go to temporaries, the callable below them
    # (``NULL, tail_call``, and the receiver) is dropped, and they come back with the NULL
    # slots the original has there.
    on_stack = [i for i, null in enumerate(stack_nulls) if not null]
    reshape: list[Instr] = []
    for i in reversed(on_stack):
        reshape += ins.store_fast(f"{STAY_TEMP}{i}")
    receiver = super_receiver(code)
    if receiver is not None:
        reshape += ins.store_fast(receiver)  # (the value the frame has: see _emit_break)
    reshape += ins.call(0) + ins.pop_top()  # (``tail_call()`` is None)
    for i, null in enumerate(stack_nulls):
        reshape += ins.push_null() if null else ins.load_fast(f"{STAY_TEMP}{i}")
        if i and stack_nulls[i - 1]:  # (3.10: the NULL goes in under the callable)
            reshape += ins.null_under_top()
    for i in on_stack:
        reshape += ins.delete_fast(f"{STAY_TEMP}{i}")
    _stay(gen, code, target, len(stack_nulls), reshape)
    resume = resume_code(code, target, stack_nulls, live)
    note_empty_breaks(resume.code, exit.empty_breaks)
    if exit.plain_loop is not None:
        mark_plain_loop(resume.code, exit.plain_loop)
    for name in resume.live_locals:
        gen.extend(ins.load_fast(name))
    _make_resume_function(gen, code, resume)
    nargs = stack_nulls.count(False) + len(resume.live_locals) + len(resume.cell_args) + 1 + (
        super_receiver(code) is not None)
    gen.extend(ins.call(nargs) + ins.return_value())


def call_resume(gen: Codegen, code: types.CodeType, target: int, names: tuple[str, ...],
                depth: int = 0) -> None:
    """Return ``tail_call(*stack, *names, resume_fn)`` for the resume function for `target`,
    passing the `depth` values on top of the stack and these (bound) locals: at a way out of a
    try/with statement (`_emit_region`), and where a loop driver's loop ends (`loops`)."""
    _stay(gen, code, target, depth, [])
    resume = resume_code(code, target, (False,) * depth, names)
    for k in reversed(range(depth)):
        gen.extend(ins.store_fast(f"{EXIT_TEMP}{k}"))
    gen.extend(ins.with_null(ins.load_const(tail_call)))
    receiver = super_receiver(code)
    if receiver is not None:  # (the resume function's first argument: see super_receiver)
        gen.extend(ins.load_fast(receiver))
    for k in range(depth):
        gen.extend(ins.load_fast(f"{EXIT_TEMP}{k}") + ins.delete_fast(f"{EXIT_TEMP}{k}"))
    for name in resume.live_locals:
        gen.extend(ins.load_fast(name))
    _make_resume_function(gen, code, resume)
    gen.extend(ins.call((receiver is not None) + depth + len(resume.live_locals)
                        + len(resume.cell_args) + 1)
               + ins.return_value())


def _make_resume_function(gen: Codegen, code: types.CodeType, resume) -> None:
    """Push the frame's cells (the resume function's last arguments), then the function."""
    for name in resume.cell_args:
        gen.extend(ins.load_closure(CellVar(name)))
    make_continuation(gen, code, resume.code, resume.closure_names)


def make_continuation(gen: Codegen, code: types.CodeType, fn_code: types.CodeType,
                      closure_names: tuple[str, ...]) -> None:
    """Push a function for `fn_code` (a resume or body function) with the frame's cells named
    `closure_names` (3.10: its cell variables too) and the frame's builtins: MAKE_FUNCTION
    takes those of the globals' ``__builtins__`` now, which the program may have replaced
    since the frame started (`_C.own_builtins`)."""
    gen.extend(ins.with_null(ins.load_const(own_builtins)))
    _load_closure(gen, code, closure_names)
    gen.extend(ins.make_closure(fn_code, len(closure_names)) + ins.call(1))


def _load_closure(gen: Codegen, code: types.CodeType, names: tuple[str, ...]) -> None:
    """Push the cells of `code`'s frame named `names` (a continuation's closure)."""
    for name in names:
        gen.extend(ins.load_closure(CellVar(name) if name in code.co_cellvars else FreeVar(name)))


def _emit_region(gen: Codegen, code: types.CodeType, region: Region,
                 body: Any = None) -> None:
    """The original instructions of a ``try``/``with`` statement, with their exception table
    entries and source positions, then for each way out of it a tail call of the resume
    function that continues there. With a `body` plan, the statement's protected block is a
    call of its body function instead (`BodyPlan.emit_call`, which also writes what the
    statement's handler does first, `BodyPlan.emit_in_handler`)."""
    info = code_info(code)
    members = set(region.members)
    labels = {i: Label() for i in region.members}
    exits = {j: Label() for j in region.exits}

    def label_of(j: int) -> Label:
        return labels[j] if j in members else exits[j]

    open_try: TryBegin | None = None
    open_for = None
    previous = None
    for i in region.members:
        if body is not None and i in body.members:
            if i == body.entry:
                if open_try is not None:
                    gen.label_raw(TryEnd(open_try))
                    open_try = open_for = None
                gen.label(labels[i])
                body.emit_call(gen, code, info.handlers[i], label_of)
            previous = None
            continue
        handler = info.handlers[i]
        if open_try is not None and (handler is not open_for or previous != i - 1):
            gen.label_raw(TryEnd(open_try))
            open_try = open_for = None
        gen.label(labels[i])
        if handler is not None and open_try is None:
            # (the original's depth, an upper bound for `instructions.to_code`: see
            # compat._keep_handler_depths)
            open_try = TryBegin(label_of(info.labels[handler.target]), handler.push_lasti,
                                handler.stack_depth)
            open_for = handler
            gen.label_raw(open_try)
        original = info.instructions[i]
        # (3.10: the body's call has a handler of its own that merges, `BodyPlan.emit_call`)
        merge = body is not None and i == body.handler and ins.HAS_EXCEPTION_TABLE
        if merge and original.name != "PUSH_EXC_INFO":
            body.emit_in_handler(gen, 1 if info.handlers[body.entry].push_lasti else None)
        copy = original.copy()
        if original.has_jump():
            target = info.target(i)
            if target in members:
                copy.arg = labels[target]
            else:  # (the exits come after the statement: 3.12 may jump back to them)
                copy = ins.forward_jump(original, exits[target])[0]
                copy.location = original.location
        # (as the original, also without a line: a handler's PUSH_EXC_INFO has none, and a
        # tracer started in the statement must see no line event there)
        gen.instructions.append(copy)
        if merge and original.name == "PUSH_EXC_INFO":  # (..., lasti?, previous, exc)
            body.emit_in_handler(gen, 2 if info.handlers[body.entry].push_lasti else None)
        falls = original.name not in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS",
                                      "RERAISE") and \
            not original.is_uncond_jump()
        if falls and i + 1 not in members:
            if open_try is not None:
                gen.label_raw(TryEnd(open_try))
                open_try = open_for = None
            for instr in ins.jump_forward(exits[i + 1]):
                instr.location = original.location  # (no new line for a tracer)
                gen.instructions.append(instr)
        previous = i
    if open_try is not None:
        gen.label_raw(TryEnd(open_try))
    for j, (depth, names) in region.exits.items():
        gen.label(exits[j])
        call_resume(gen, code, j, names, depth)


def _stay(gen: Codegen, code: types.CodeType, target: int, depth: int,
          reshape: list[Instr]) -> None:
    """Where the transformed code is about to hand the rest of the frame to the resume function
    for `target`: when ``_C.stay_in_frame()`` says this frame is observable (its frame object
    is referenced from outside it, or a tracer or profiler is now active), run `reshape`, which
    leaves the stack (`depth` slots) as the original has it at `target`, and continue at
    `target` in this frame instead, in a copy of the rest of the original (`_emit_rest`). Then
    a frame taken with ``sys._getframe()`` or from a traceback runs the rest of the function
    (its ``f_lineno`` moves on, it is not left dead in a reference cycle), and a debugger that a
    callee started sees the rest of the function in the same frame, as in plain Python. The
    check costs one C call per graph break; the copy runs uncompiled (the functions it calls
    are captured as usual). Not for a target inside a try/with block (the stack and blocks
    there are not rebuilt): the resume function runs, as before."""
    info = code_info(code)
    if target >= len(info.instructions) or info.in_exception_block(target):
        return
    line = _continuation_line(gen, code, target)
    if target not in gen.stay_entries:
        gen.stay_entries[target] = (Label(), depth > 0)
    block = Label()
    check = (ins.with_null(ins.load_const(stay_in_frame)) + ins.call(0)
             + ins.jump_if_true(block))
    for instr in check:
        instr.lineno = line
        gen.instructions.append(instr)
    out = reshape + ins.jump_forward(gen.stay_entries[target][0])
    for instr in out:
        instr.lineno = line
    gen.stay_blocks.append((block, out))


def _continuation_line(gen: Codegen, code: types.CodeType, target: int) -> int | None:
    """The line the code that continues at `target` in this frame carries: the target's (a
    tracer then sees no line event of its own), or the frame's (none when the code has none)."""
    line = target_lineno(code, target) if gen.lineno is not None else None
    return gen.lineno if line is None else line


def _emit_rest(gen: Codegen, code: types.CodeType) -> None:
    """After the code: the blocks the `_stay` checks jump to, an entry per continuation (the
    transformed code's temporaries unbound, so ``f_locals`` shows the user's names only), and
    the copy of the original's instructions that can run from them (`resume.rest_of_code`)."""
    for label, block in gen.stay_blocks:
        gen.instructions.append(label)
        gen.instructions += block
    temps = sorted({item.arg for item in gen.instructions
                    if isinstance(item, Instr) and item.name in ("STORE_FAST", "DELETE_FAST")
                    and isinstance(item.arg, str) and item.arg.startswith("___")
                    and item.arg not in code.co_varnames})
    rest, labels = rest_of_code(code, gen.stay_entries)
    for target, (entry, has_stack) in gen.stay_entries.items():
        line = _continuation_line(gen, code, target)
        instrs: list[Instr] = []
        if has_stack and reads_a_bool(code, target):
            instrs += ins.to_bool()  # (as a resume function's prologue: see resume._generate)
        for name in temps:
            instrs += ins.load_const(None) + ins.store_fast(name) + ins.delete_fast(name)
        instrs += ins.jump_forward(labels[target])
        for instr in instrs:
            instr.lineno = line
        gen.instructions.append(entry)
        gen.instructions += instrs
    gen.instructions += rest


def _assemble(code: types.CodeType, body: list) -> types.CodeType:
    original = compat.decode(code)
    # The prologue sets the frame up (a continuation's also installs the cells it receives:
    # `resume.prologue_length`).
    instrs = [i for i in original if isinstance(i, Instr)]
    prefix = instrs[:prologue_length(instrs)]
    nargs = len(argument_names(code))
    bc = original
    bc.clear()
    bc.extend(prefix + body)
    bc.argcount = nargs
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS)
    new_code = ins.to_code(bc)
    if new_code.co_varnames[:nargs] != code.co_varnames[:nargs] or new_code.co_freevars != code.co_freevars:
        raise AssertionError("transformed code changed the argument or free variable layout")
    return new_code


def has_line_numbers(code: types.CodeType) -> bool:
    """Whether any instruction of `code` has a line number."""
    return any(line is not None for _, _, line in code.co_lines())


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of the argument slots, in the order the C hook passes them."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return code.co_varnames[:n]
