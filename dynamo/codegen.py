"""Codegen: writes the transformed bytecode of a captured frame with the `bytecode` package.

In: the original code object, the compiled graph (`GraphResult`, or None when the graph has no
operations) and how the trace ended (`FrameExit`). Out: the transformed code object. Called by
`symbolic_convert.compile_subgraph`, the one place where translation ends.

Every transformed code keeps the original's prefix (COPY_FREE_VARS, MAKE_CELL, RESUME), calls the
compiled graph with its inputs reloaded from their sources, and then:

* at a return: rebuilds the return value from graph outputs, inputs and constants, and returns;
* at a graph break: rebuilds the values the rest of the frame needs (the value stack, the live
  locals, the contents of cells), runs the one instruction the translator could not capture in
  plain Python, and returns the result of calling a resume function (`resume.py`) that continues
  the original code after that instruction (one resume function per branch for a conditional
  jump).

It keeps the original's argument, cell and free variable layout and only appends locals, with
every argument made positional, so the C hook can call it with the frame's argument slots (see
docs/internals.md). Instructions are spelled by `instructions.py`.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label
from bytecode.flags import CompilerFlags

from . import instructions as ins
from . import loops
from .exc import Unsupported
from .loops import ITEM, LoopPlan
from .output_graph import GraphResult
from .resume import mark_plain_loop, resume_code
from .side_effects import SideEffects
from .variables.base import NullVariable, VariableTracker
from .variables.containers import DictVariable, ListVariable

__all__ = ["Codegen", "FrameExit", "ReturnExit", "BreakExit", "transform_code", "argument_names"]

GRAPH_OUT = "___graph_out"
LOOP_BODY = "___loop_body"
#: Where the transformed code keeps the value stack at a break until it calls the resume function.
#: Not the resume functions' own ``___stack0``..., which the frame being compiled may itself be
#: receiving: a value still to be read from one must not be overwritten first.
STACK_TEMP = "___saved_stack"
OPERAND_TEMP = "___saved_operand"
EFFECT_TEMP = "___saved_effect"
LOOP_RESULT = "___loop_result"


@dataclass
class ReturnExit:
    """The trace reached RETURN_VALUE with `value`."""

    value: VariableTracker
    side_effects: "SideEffects | None" = None


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
    #: function (`loops.LoopPlan`): the transformed code drives the loop
    loop_plan: "LoopPlan | None" = None
    side_effects: "SideEffects | None" = None


FrameExit = ReturnExit | BreakExit


class Codegen:
    """Accumulates instructions; VariableTrackers and Sources append their own rebuild code."""

    def __init__(self, result: GraphResult | None, lineno: int) -> None:
        self.result = result
        self.lineno = lineno
        self.instructions: list[Instr | Label] = []
        self.output_index = {node: i for i, node in enumerate(result.graph_outputs)} if result else {}
        self.built: dict[int, tuple[str, VariableTracker]] = {}

    def append(self, instr: Instr) -> None:
        instr.lineno = self.lineno
        self.instructions.append(instr)

    def extend(self, instrs: list[Instr]) -> None:
        for instr in instrs:
            self.append(instr)

    def label(self, label: Label) -> None:
        self.instructions.append(label)

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
        graph returns one bare value)."""
        self.extend(ins.push_null() + ins.load_const(self.result.compiled_fn))
        for source in self.result.input_sources:
            source.reconstruct(self)
        self.extend(ins.call(len(self.result.input_sources)))
        if not self.result.single_output:
            self.extend(ins.store_fast(GRAPH_OUT))

    def reconstruct(self, vt: VariableTracker) -> None:
        """Push `vt`. A container made in the frame is built once: where it is needed again (a
        list both on the stack and in a local), the same object is reloaded, so a mutation
        through one name is seen through the other, as in Python."""
        if isinstance(vt, NullVariable):
            self.extend(ins.push_null())
            return
        shared = isinstance(vt, (ListVariable, DictVariable)) and vt.source is None
        if shared and id(vt) in self.built:
            self.extend(ins.load_fast(self.built[id(vt)][0]))
            return
        vt.reconstruct(self)
        if shared:
            name = f"___built_{len(self.built)}"
            self.built[id(vt)] = (name, vt)  # (vt kept alive so its id is not reused)
            self.extend(ins.copy(1) + ins.store_fast(name))


def transform_code(code: types.CodeType, result: GraphResult | None, exit: FrameExit,
                   lineno: int) -> types.CodeType:
    """The transformed code object for `code`, ending as `exit` says."""
    gen = Codegen(result, lineno)
    if result is not None:
        gen.call_graph()
    if isinstance(exit, ReturnExit):
        if result is None or not result.single_output:
            gen.reconstruct(exit.value)
        if exit.side_effects:
            exit.side_effects.codegen(gen)
        gen.extend(ins.return_value())
    else:
        _emit_break(gen, code, exit)
    return _assemble(code, gen.instructions)


def _emit_break(gen: Codegen, code: types.CodeType, exit: BreakExit) -> None:
    deep = exit.stack[:len(exit.stack) - exit.consumed]
    top = exit.stack[len(exit.stack) - exit.consumed:]
    cellvars = list(code.co_cellvars)
    # Everything the rest of the frame needs is loaded before anything is stored, and before the
    # instruction runs (which may rebind globals or mutate objects a Source reads through).
    saved: list[tuple[str, str]] = []  # (how, name): how is "fast" or "cell"
    for i, vt in enumerate(deep):
        if not isinstance(vt, NullVariable):
            gen.reconstruct(vt)
            saved.append(("fast", f"{STACK_TEMP}{i}"))
    passed: set[str] = set()
    for _, _, live in exit.continuations:
        passed.update(live)
    for name in sorted(passed):
        if name in exit.locals:
            gen.reconstruct(exit.locals[name])
            saved.append(("fast", name))
    for name in cellvars:
        if name in exit.locals:
            gen.reconstruct(exit.locals[name])
            saved.append(("cell", name))
    # The instruction's own operands and the replayed side effects' values too: one of them may
    # be read from a local that a store below rebinds (``y = x; x = x + 1; print(y)``).
    for j, vt in enumerate(top):
        if not isinstance(vt, NullVariable):
            gen.reconstruct(vt)
            saved.append(("fast", f"{OPERAND_TEMP}{j}"))
    effects = exit.side_effects.load(gen) if exit.side_effects else 0
    saved += [("fast", f"{EFFECT_TEMP}{k}") for k in range(effects)]
    for how, name in reversed(saved):
        gen.extend(ins.store_fast(name) if how == "fast" else ins.store_deref(CellVar(name)))
    if effects:  # replayed before the instruction runs (it may read what they change)
        for k in range(effects):
            gen.extend(ins.load_fast(f"{EFFECT_TEMP}{k}"))
        exit.side_effects.store(gen)
    for j, vt in enumerate(top):
        gen.extend(ins.push_null() if isinstance(vt, NullVariable)
                   else ins.load_fast(f"{OPERAND_TEMP}{j}"))
    if exit.loop_plan is not None:
        _emit_loop_driver(gen, code, exit.loop_plan)
        return
    run = [Instr(instr.name, instr.arg) for instr in exit.run]
    if run and run[-1].has_jump():
        branch = Label()
        run[-1:] = ins.forward_jump(run[-1], branch)
        gen.extend(run)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[0])
        gen.label(branch)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[1])
    else:
        gen.extend(run)
        _emit_resume_call(gen, code, exit, deep, exit.continuations[0])


def _emit_resume_call(gen: Codegen, code: types.CodeType, exit: BreakExit,
                      deep: list[VariableTracker], continuation: tuple[int, int, tuple[str, ...]]) -> None:
    """With the instruction's `pushed` results on the stack: call the resume function for
    `target` with the whole stack and the live locals, and return what it returns."""
    target, pushed, live = continuation
    stack_nulls = tuple(isinstance(vt, NullVariable) for vt in deep) + (False,) * pushed
    live = tuple(name for name in live if name in exit.locals or name in exit.untouched_args)
    resume = resume_code(code, target, stack_nulls, live)
    if exit.plain_loop is not None:
        mark_plain_loop(resume.code, exit.plain_loop)
    for j in reversed(range(pushed)):
        gen.extend(ins.store_fast(f"{STACK_TEMP}{len(deep) + j}"))
    gen.extend(ins.push_null())
    for name in code.co_cellvars:
        gen.extend(ins.load_closure(CellVar(name)))
    for name in code.co_freevars:
        gen.extend(ins.load_closure(FreeVar(name)))
    gen.extend(ins.make_closure(resume.code, len(resume.closure_names)))
    nargs = 0
    for i, null in enumerate(stack_nulls):
        if not null:
            gen.extend(ins.load_fast(f"{STACK_TEMP}{i}"))
            nargs += 1
    for name in live:
        gen.extend(ins.load_fast(name))
        nargs += 1
    gen.extend(ins.call(nargs) + ins.return_value())


def _call_resume(gen: Codegen, code: types.CodeType, target: int, names: tuple[str, ...]) -> None:
    """Return the result of the resume function for `target`, passing these (bound) locals."""
    resume = resume_code(code, target, (), names)
    gen.extend(ins.push_null())
    _load_closure(gen, code)
    gen.extend(ins.make_closure(resume.code, len(resume.closure_names)))
    for name in names:
        gen.extend(ins.load_fast(name))
    gen.extend(ins.call(len(names)) + ins.return_value())


def _load_closure(gen: Codegen, code: types.CodeType) -> None:
    for name in code.co_cellvars:
        gen.extend(ins.load_closure(CellVar(name)))
    for name in code.co_freevars:
        gen.extend(ins.load_closure(FreeVar(name)))


def _emit_loop_driver(gen: Codegen, code: types.CodeType, plan: LoopPlan) -> None:
    """With the carried locals stored (and, for a ``for`` loop, the iterable on the stack): run
    the loop here, calling the body function once per iteration (`loops.py` says what it
    returns)."""
    head, other = Label(), Label()
    on_stack = 1 if plan.iterates else 0  # the iterator
    if plan.iterates:
        gen.extend(ins.get_iter())
    _load_closure(gen, code)
    gen.extend(ins.make_closure(plan.body, len(plan.closure_names)) + ins.store_fast(LOOP_BODY))
    gen.label(head)
    if plan.iterates:
        done = Label()
        gen.extend(ins.for_iter(done) + ins.store_fast(ITEM))
    gen.extend(ins.push_null() + ins.load_fast(LOOP_BODY))
    if plan.iterates:
        gen.extend(ins.load_fast(ITEM))
    for name in plan.carried:
        gen.extend(ins.load_fast(name))
    gen.extend(ins.call(on_stack + len(plan.carried)) + ins.store_fast(LOOP_RESULT))

    def unpack(names: tuple[str, ...]) -> None:
        gen.extend(ins.load_fast(LOOP_RESULT) + ins.unpack_sequence(1 + len(names)) + ins.pop_top())
        for name in names:
            gen.extend(ins.store_fast(name))

    def status_is(value: int, otherwise: Label) -> None:
        gen.extend(ins.load_fast(LOOP_RESULT) + ins.load_const(0) + ins.binary_subscr())
        gen.extend(ins.if_not_equal(value, otherwise))

    status_is(loops.CONTINUE, other)
    unpack(plan.carried)
    gen.extend(ins.jump_backward(head))
    gen.label(other)
    after_return = Label()
    status_is(loops.RETURN, after_return)
    gen.extend(ins.load_fast(LOOP_RESULT) + ins.load_const(1) + ins.binary_subscr())
    gen.extend(ins.drop_below(on_stack))  # the iterator
    gen.extend(ins.return_value())
    gen.label(after_return)
    for k, (target, names) in enumerate(plan.exits):
        after = Label()
        status_is(loops.EXIT + k, after)
        gen.extend(ins.pop_top() * on_stack)  # the iterator
        unpack(names)
        _call_resume(gen, code, target, names)
        gen.label(after)
    gen.extend(ins.load_const(None) + ins.return_value())  # (unreachable: every status is handled)
    if plan.iterates:
        gen.label(done)
        target, names = plan.done
        _call_resume(gen, code, target, names)


def _assemble(code: types.CodeType, body: list) -> types.CodeType:
    original = Bytecode.from_code(code)
    prefix = [i for i in original if isinstance(i, Instr) and i.name in ins.PREFIX_OPS]
    nargs = len(argument_names(code))
    bc = original
    bc.clear()
    bc.extend(prefix + body)
    bc.argcount = nargs
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS)
    new_code = bc.to_code()
    if new_code.co_varnames[:nargs] != code.co_varnames[:nargs] or new_code.co_freevars != code.co_freevars:
        raise AssertionError("transformed code changed the argument or free variable layout")
    return new_code


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of the argument slots, in the order the C hook passes them."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return code.co_varnames[:n]
