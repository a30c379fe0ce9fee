"""Loops that are not unrolled: the loop runs in Python, its body as a function of its own.

In: the original code object, the index of a ``for`` loop's GET_ITER (where the translator ended
the graph because the loop was too long to unroll or holds something it cannot capture) and the
locals bound at that point. Out: a `LoopPlan`: the code object of the *body function* and what
the loop driver passes to it and gets back, or None when the loop does not fit this scheme (the
loop and the rest of the frame then run in plain Python). Called by
`compile_frame._plan_loop`.

The body function is a copy of the original code that starts right after the loop's FOR_ITER
with the item pushed, and returns at every way out of one iteration:

    (0, *carried, *kept) the next iteration (the back-edge, ``continue``)
    (1, value)           a ``return`` inside the loop
    (2 + k, *exit_k)     a jump out of the loop (``break``) to exit k

The *driver* goes into the transformed code of the frame (`LoopPlan.emit_driver`, which
`codegen` calls where it writes the graph break before the loop): it runs the ``for`` loop
itself, calls the body function once per item, stores what comes back, and after the loop calls
the resume function of the code that follows. Both sides of this calling convention are here.
The body function is an ordinary function to the C hook, so each call is captured: the loop
body becomes a graph that is reused while its guards hold (a body that specialises on the loop
counter recompiles until `cache_size_limit`).

Every value crossing the boundary must be bound, since Python cannot pass an unbound local: the
plan requires the locals the loop reads to be bound before it, and every local needed after an
exit to be bound on every path to that exit (otherwise None). Cells are shared as the body
function's closure, like a resume function's.

Plain Python keeps a local in the frame until the function returns or rebinds it, and frees the
old value at the store that rebinds it; the object's finalizer runs there, and the local shows
in the frame's locals. So:

- The locals the body stores and the loop never reads back (`LoopPlan.kept`: the loop variable,
  a temporary, a local assigned in one branch) are passed to the body (`LoopPlan.params`; not
  the loop variable, whose old value the driver lets go of right after FOR_ITER, where plain
  Python's store does) and returned by it, at CONTINUE and at each exit (`with_kept`); the
  carried ones and those an exit needs are returned there too, and after the loop they all go
  to the resume function of the code that follows.
- While the body runs the driver holds none of the locals the body may rebind
  (`LoopPlan.handed_over`), nor the item when the body may let go of it early
  (`LoopPlan.hands_item`): it unbinds its own slots and calls the body through `_C.call_owned`,
  which moves the call's references into the body's frame, so the body's frame holds the only
  reference. (With nothing to hand over, a plain call is cheaper: `LoopPlan.owned_call`.)
- A kept local no iteration assigned yet is `instructions.UNBOUND` in the driver, and the body
  receives and returns that marker like a value (it never reads the local before assigning it:
  the local is not live at the loop's head; and the body's frame is not the function's). Where
  the body rebinds such a local, its translator decides whether the old value's death may run
  code on the marker or on an earlier iteration's value: the decision is guarded
  (`variables.finalizers.judge_iteration_value`). A value the local had before the loop
  (`LoopPlan.kept_before`, set by the translator: the cheap ones) is the first iteration's.
- Where the loop ends, the marker must not reach the function's own frames: the driver deletes
  the unbound ones and passes the bound ones on (`LoopPlan.unsure`). All bound, or none of the
  ones that may be unbound, each have a resume function; any other mix continues in the
  driver's frame, in the plain copy of the rest of the function (`codegen._stay`), which a
  target inside a try/with block cannot (the plan is refused then). A loop body's own frames
  pass the marker on (to the body's epilogue, which returns it).
- When the body raises, the driver takes the handed-over locals back from the body's finished
  frame before that frame is cleared (`taken_back`): the frame in the traceback holds them, as
  plain Python's does, and they live as long as it.

The locals the loop leaves alone that nothing after it reads (`LoopPlan.through`, set by the
translator: the ones cheap to pass) are stored before the loop and passed on after it. Not kept
(it dies when the body returns): a local the body deletes (the body could not return it where it
is unbound).
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from bytecode import CellVar, Instr, Label, TryBegin, TryEnd

from . import compat
from . import instructions as ins
from ._C import call_owned
from .bytecode_analysis import CodeMap, code_info
from .codegen import Codegen, call_resume, make_continuation
from .instructions import UNBOUND
from .region_body import body_values
from .resume import (
    continuation_code,
    in_loop_body,
    mark_loop_body,
    place_label,
    super_receiver,
)
from .tracebacks import merge_body_traceback

__all__ = ["LoopPlan", "plan_loop", "taken_back", "ITEM"]

ITEM = "___item"
CONTINUE, RETURN, EXIT = 0, 1, 2
#: the driver's locals: the body function, and what its last call returned
LOOP_BODY = "___loop_body"
LOOP_RESULT = "___loop_result"


@dataclass(frozen=True)
class LoopPlan:
    body: types.CodeType
    #: locals passed to the body (after the item), and returned by it at CONTINUE (same order)
    carried: tuple[str, ...]
    #: for a ``for`` loop: the instruction index after the loop when it runs out of items, and
    #: what to pass there (the carried locals; then `through` and `kept`); None for a ``while``
    #: loop (it leaves through an exit)
    done: tuple[int, tuple[str, ...]] | None
    #: per exit k: (instruction index it jumps to, the locals live there and the carried ones
    #: bound there: the body returns these, then the rest of `kept`, see `with_kept`)
    exits: tuple[tuple[int, tuple[str, ...]], ...]
    closure_names: tuple[str, ...]
    #: a ``for`` loop (the driver iterates and passes each item first), or a ``while`` loop
    iterates: bool = True
    #: the frame's cell variables, whose cells are passed last on each call (as to a resume
    #: function: an emptied one reads as UnboundLocalError)
    cell_args: tuple[str, ...] = ()
    #: locals the body stores (and never deletes) that the loop never reads back: returned after
    #: the carried ones at CONTINUE, and after each exit's live locals (`with_kept`); `UNBOUND`
    #: while no iteration has assigned one
    kept: tuple[str, ...] = ()
    #: those of `kept` that the body assigns first thing (a ``for`` loop's target): the driver
    #: lets go of the old value before the call, as plain Python does at the target's store
    kept_first: tuple[str, ...] = ()
    #: the locals the loop stores or deletes (the kept ones, the carried ones it rebinds, and
    #: the ones it deletes)
    assigned: frozenset[str] = frozenset()
    #: locals bound before the loop that it never touches and nothing after it reads, stored
    #: before the loop and passed on after it anyway, as plain Python keeps them in the frame
    #: until the return (the translator's `kept_alive`: cheap to pass); set per compile by
    #: `compile_frame._plan_loop` (the plan itself is cached per code)
    through: tuple[str, ...] = ()
    #: those of `kept` that the body assigns on every way through an iteration (bound once one
    #: ran)
    always: tuple[str, ...] = ()
    #: per exit: those of `kept` it may leave unbound (assigned on some ways there only)
    exit_unsure: tuple[tuple[str, ...], ...] = ()
    #: those of `kept` bound before the loop to a value cheap to pass (the translator's
    #: `kept_alive`), which the first iteration gets instead of `UNBOUND`; set per compile like
    #: `through`
    kept_before: tuple[str, ...] = ()
    #: whether the driver hands the item over too and the body lets go of its argument slot
    #: (not when an iteration starts by storing it in a local the body never rebinds or
    #: deletes: that local then holds it to the end of the iteration anyway, `_item_held_once`)
    hands_item: bool = True

    @property
    def params(self) -> tuple[str, ...]:
        """The kept locals passed to the body, after the carried ones (the loop variable is
        not: the body assigns it first)."""
        return tuple(name for name in self.kept if name not in self.kept_first)

    @property
    def handed_over(self) -> tuple[str, ...]:
        """The passed locals the body may rebind: the driver unbinds them while the body runs
        (`_C.call_owned` moves the call's references into the body's frame), so the body's
        frame holds the only reference and a store there frees the old value where plain Python
        does."""
        return tuple(name for name in self.carried if name in self.assigned) + self.params

    @property
    def owned_call(self) -> bool:
        """Whether the driver calls the body through `_C.call_owned` (else with a plain CALL,
        which is cheaper: nothing the body may let go of is passed)."""
        return self.hands_item or bool(self.handed_over)

    def unsure(self, exit: int | None) -> tuple[tuple[str, ...], bool]:
        """Where the loop ends (`exit` k, or None when a ``for`` loop runs out of items): the
        kept locals that may be unbound there, and whether they are bound or unbound all
        together (then each of the two sets has a resume function of its own; else a mix
        continues in the driver's frame, see the module docstring)."""
        return _unsure(self.kept if exit is None else self.exit_unsure[exit],
                       self.always if exit is None else (), self.kept_before)

    def emit_driver(self, gen: Codegen, code: types.CodeType) -> None:
        """Write the driver of this loop into `gen`, the transformed code of `code` (see
        `_emit_driver`)."""
        _emit_driver(gen, code, self)


def _unsure(names: tuple[str, ...], together: tuple[str, ...],
            bound: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """(`LoopPlan.unsure`) `names` that are not `bound`, and whether they are all bound or all
    unbound together (`together` are: an iteration assigns them all)."""
    names = tuple(name for name in names if name not in bound)
    return names, len({"" if name in together else name for name in names}) <= 1


_plans = CodeMap()  # (by identity: see bytecode_analysis.CodeMap)


def plan_loop(code: types.CodeType, entry: int, bound: frozenset[str]) -> LoopPlan | None:
    """The (cached) plan for the loop entered at `entry` (a ``for`` loop's GET_ITER, or a
    ``while`` loop's first body instruction), or None."""
    key = (entry, bound)
    per_code = _plans.setdefault(code, {})
    if key not in per_code:
        per_code[key] = _plan(code, entry, bound)
    return per_code[key]


def _plan(code: types.CodeType, entry: int, bound: frozenset[str]) -> LoopPlan | None:
    if super_receiver(code) is not None:
        return None  # (a body function's first argument is the item, not what super() reads)
    info = code_info(code)
    iterates = info.instructions[entry].name == "GET_ITER"
    header = entry + 1 if iterates else entry
    while iterates and header < len(info.instructions) and \
            info.instructions[header].name == "NOP":
        header += 1  # (generated code may carry NOPs: config.debug_insert_nops)
    if iterates and (header >= len(info.instructions)
                     or info.instructions[header].name != "FOR_ITER"):
        return None
    loop = info.outermost_loop(header)
    if loop is None or loop[0] != header:
        return None
    back = loop[1]
    first = header + 1 if iterates else header  # the first instruction of an iteration
    region = range(first, back + 1)
    if any(info.in_exception_block(i) for i in region):
        return None  # try/with inside the body: its handlers' stack depths are not ours to keep
    cells = set(code.co_cellvars) | set(code.co_freevars)
    carried = tuple(sorted(info.live_locals(header) - cells))
    if not set(carried) <= bound:
        return None  # a local the loop reads may be unbound before it
    # (3.12+: the iterator's end continues after the END_FOR the FOR_ITER names)
    done = info.target(header) + compat.loop_exit_skip() if iterates else None

    # Walk the body from its first instruction: locals bound on every path (must-analysis) and
    # the stack depth, to check each way out.
    must: dict[int, frozenset[str]] = {}
    depth: dict[int, int] = {}
    exits: dict[int, int] = {}  # target index -> exit number
    exit_bound: dict[int, frozenset[str]] = {}  # target index -> assigned on every way there
    # (a for loop has its iterator and the item on the stack; a while loop nothing)
    work = [(first, frozenset(carried), 2 if iterates else 0)]
    left: frozenset[str] | None = None
    while work:
        i, names, d = work.pop()
        if i in must:
            merged = must[i] & names
            if depth[i] != d:
                return None
            if merged == must[i]:
                continue
            must[i] = merged
        else:
            must[i], depth[i] = names, d
        names = must[i]
        inst = info.instructions[i]
        names = info.bound_after(i, names)
        if inst.name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"):
            continue
        edges = []
        if inst.has_jump():
            edges.append((info.target(i), True))
        if not inst.is_uncond_jump():
            edges.append((i + 1, False))
        for target, jumped in edges:
            after = d + inst.stack_effect(jump=jumped)
            if target == header or target not in region:
                left = names if left is None else left & names  # (bound at every way out)
            if target == header:
                if not set(carried) <= names or after != (1 if iterates else 0):
                    return None  # back at the header: carried locals bound, the iterator only
            elif target not in region and target < header:
                # back to code before the loop (a ``while`` loop's ``continue`` to its first
                # test): treated as leaving, every iteration would nest one more frame
                return None
            elif target not in region:
                live = info.live_locals(target) - cells
                if not live <= names:
                    return None
                if after != 0:
                    # A way out that leaves values on the stack (in a try/with body function,
                    # a `return` jumps to the block's epilogue with its value): the driver
                    # continues with an empty stack, so this loop is not a body function.
                    return None
                exits.setdefault(target, len(exits))
                exit_bound[target] = exit_bound.get(target, names) & names
            else:
                work.append((target, names, after))
    kept, kept_first, assigned = _kept_locals(info, first, depth, set(carried) | cells, iterates)
    always = tuple(name for name in kept if name in (left or frozenset()))
    # (what the code after each way out may need: the locals live there, and the carried ones
    # bound there, which plain Python keeps until the return)
    exit_list = tuple(sorted(((t, tuple(sorted((info.live_locals(t) - cells)
                                               | (set(carried) & exit_bound[t]))))
                              for t in exits), key=lambda e: exits[e[0]]))
    exit_unsure = tuple(tuple(name for name in kept if name not in exit_bound[t])
                        for t, _ in exit_list)
    # Where a mix of bound and unbound kept locals may reach the code after the loop, that code
    # continues in the driver's frame (see the module docstring), which it cannot inside a
    # try/with block (`codegen._stay`). (A loop body's own frames pass the marker on.)
    ends = [(done, _unsure(kept, always, ()))] if iterates else []
    ends += [(t, _unsure(names, (), ())) for (t, _), names in zip(exit_list, exit_unsure)]
    if not in_loop_body(code) and any(
            not together and (target >= len(info.instructions)
                              or info.in_exception_block(target))
            for target, (_, together) in ends):
        return None
    closure_names, cell_args = tuple(code.co_freevars), tuple(code.co_cellvars)
    params = tuple(name for name in kept if name not in kept_first)
    hands_item = iterates and not _item_held_once(info, first, depth)
    body = _body_code(code, header, first, back, carried + kept,
                      {t: k for k, (t, _) in enumerate(exit_list)},
                      {t: with_kept(names, kept) for t, names in exit_list}, depth,
                      closure_names, cell_args, iterates, carried + params, hands_item)
    return LoopPlan(body, carried, (done, carried) if iterates else None, exit_list,
                    closure_names, iterates, cell_args, kept, kept_first, assigned,
                    always=always, exit_unsure=exit_unsure, hands_item=hands_item)


def _kept_locals(info, first: int, depth: dict[int, int], excluded: set[str],
                 iterates: bool) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]:
    """The locals an iteration stores and never deletes that are not `excluded` (carried,
    cells); those of them it assigns before anything else runs; and every local it stores or
    deletes."""
    stored, deleted = set(), set()
    for i in depth:
        inst = info.instructions[i]
        if isinstance(inst.arg, str) and inst.name in ("STORE_FAST", "LOAD_FAST_AND_CLEAR"):
            stored.add(inst.arg)
        elif isinstance(inst.arg, str) and inst.name == "DELETE_FAST":
            deleted.add(inst.arg)
    # (npdynamo's own locals, ``___stack0`` of a resume function, are not the user's)
    kept = tuple(sorted(name for name in stored - deleted - excluded
                        if not name.startswith("___")))
    firsts: list[str] = []
    i = first
    while iterates and i in depth and info.instructions[i].name in ("STORE_FAST", "NOP"):
        if info.instructions[i].name == "STORE_FAST" and info.instructions[i].arg in kept:
            firsts.append(info.instructions[i].arg)
        i += 1
    return kept, tuple(sorted(set(firsts))), frozenset(stored | deleted)


def _item_held_once(info, first: int, depth: dict[int, int]) -> bool:
    """Whether an iteration starts by storing the item in a local that the body never stores
    again or deletes. (Then the item lives to the end of the iteration whatever else holds it,
    and the driver lets go of it where plain Python's next store into the loop variable does.)"""
    i = first
    while i in depth and info.instructions[i].name == "NOP":
        i += 1
    if i not in depth or info.instructions[i].name != "STORE_FAST":
        return False
    name = info.instructions[i].arg
    return not any(j != i and info.instructions[j].arg == name and info.instructions[j].name in
                   ("STORE_FAST", "DELETE_FAST", "LOAD_FAST_AND_CLEAR") for j in depth)


def taken_back(names: tuple[str, ...], exc: BaseException | None = None) -> tuple:
    """(The driver's handler of an exception from the body's call, before the body's frame is
    cleared) The values `names` have in the frame of the body function that `exc` (default: the
    exception being handled) came out of, `UNBOUND` for a name unbound there (the driver then
    leaves it unbound), or when the body's frame never started."""
    return body_values(names, exc, missing=UNBOUND)


def with_kept(names: tuple[str, ...], kept: tuple[str, ...]) -> tuple[str, ...]:
    """What the body returns at an exit whose live locals are `names` (after the status): those,
    then the kept locals that are not among them."""
    return names + tuple(name for name in kept if name not in names)


def _body_code(code, header, first, back, returned, exit_numbers, exit_live, depth, closure_names,
               cell_args, iterates, params, hands_item):
    original = compat.decode(code)
    info = code_info(code)
    body: list = []
    index = 0
    start = Label()
    epilogues: dict[tuple, Label] = {}

    def epilogue(kind: tuple) -> Label:
        if kind not in epilogues:
            epilogues[kind] = Label()
        return epilogues[kind]

    for item in original:
        if isinstance(item, (TryBegin, TryEnd)):
            continue  # (no handler inside the loop; the dead rest is left out)
        if not isinstance(item, Instr):
            body.append(item)
            continue
        i = index
        index += 1
        if i == first:
            place_label(body, start)
        if item.name in ins.PREFIX_OPS:
            continue
        if i not in depth:
            # Not reachable within one iteration: left out. (Copied, the dead rest would keep
            # its backward jumps, e.g. 3.11's duplicated ``while`` test jumping back into the
            # body, and the body function would look like a loop around its own code.)
            continue
        elif i == back and not item.is_uncond_jump():
            # A while loop's test falls through out of the loop: that is an exit too.
            target = back + 1
            copied = item.copy()
            if copied.has_jump() and info.target(i) == header:
                kind = ("continue", depth[i] + item.stack_effect(jump=True))
                body += ins.forward_jump(item, epilogue(kind))
            else:
                body.append(copied)
            kind = ("exit", target, depth[i] + item.stack_effect(jump=False))
            body += ins.jump_forward(epilogue(kind))
            continue
        elif first <= i <= back:
            if item.name in ("RETURN_VALUE", "RETURN_CONST"):
                # (RETURN, value) is built and returned right here, not by a jump to a shared
                # epilogue: a loop nested in this one, planned later inside the body function,
                # must see a return, not a jump out of it (which it would take for a `break`).
                body += ins.return_tagged_for(item, RETURN, depth[i])
                continue
            if item.has_jump():
                target = info.target(i)
                if target == header or not (header < target <= back):
                    d = depth[i] + item.stack_effect(jump=True)
                    kind = ("continue", d) if target == header else ("exit", target, d)
                    body += ins.forward_jump(item, epilogue(kind))
                    continue
        item = item.copy()
        body.append(item)

    line = info.instructions[header].lineno
    # (cells as in a resume function: see region_body._body_code)
    prologue = ins.copy_free_vars(len(closure_names))
    prologue += ins.install_cells(cell_args)
    prologue += ins.resume()
    if iterates:
        prologue += ins.load_const(None)  # stands in for the iterator: same stack depths
        prologue += ins.load_fast(ITEM)
        if hands_item:  # (the item on the stack only: the body's store then holds it alone)
            prologue += ins.delete_fast(ITEM)
    prologue += ins.jump_forward(start)
    tail: list = []
    for kind, label in epilogues.items():
        tail.append(label)
        if kind[0] == "return":
            extra = kind[1]
            tail += ins.load_const(RETURN) + ins.swap(2) + ins.build_tuple(2)
        else:
            names = returned if kind[0] == "continue" else exit_live[kind[1]]
            status = CONTINUE if kind[0] == "continue" else EXIT + exit_numbers[kind[1]]
            extra = kind[-1]
            tail += ins.load_const(status)
            for name in names:
                tail += ins.load_fast(name)
            tail += ins.build_tuple(1 + len(names))
        tail += ins.drop_below(extra)  # what the loop had on the stack (the iterator stand-in)
        tail += ins.return_value()
    for instr in prologue + [t for t in tail if isinstance(t, Instr)]:
        instr.lineno = line

    new_code = continuation_code(code, original, prologue + body + tail,
                                 ([ITEM] if iterates else []) + list(params) + list(cell_args),
                                 closure_names, f"<loop body at line {line}>",
                                 cellvars=tuple(cell_args))
    mark_loop_body(new_code)
    return new_code


def _emit_driver(gen: Codegen, code: types.CodeType, plan: LoopPlan) -> None:
    """With the carried locals stored (and, for a ``for`` loop, the iterable on the stack): run
    the loop here, calling the body function once per iteration (the module docstring says what
    it returns). The locals the body assigns and the loop never reads back (`LoopPlan.kept`)
    stay in this frame with the value the last iteration gave them, as in plain Python, and go
    on to the code after the loop (`resume_with_kept`), with the ones it leaves alone
    (`LoopPlan.through`). The body gets the item, the kept locals and the carried ones it may
    rebind through `_C.call_owned`, and this frame unbinds them meanwhile
    (`LoopPlan.handed_over`): the body's frame holds the only reference, so a store there frees
    the old value where plain Python does."""
    head, other = Label(), Label()
    on_stack = 1 if plan.iterates else 0  # the iterator
    if plan.iterates:
        gen.extend(ins.get_iter())
    # (`UNBOUND` until an iteration assigns one; a value it had before the loop that is
    # cheap to pass is stored with the carried locals, `LoopPlan.kept_before`)
    for name in plan.kept:
        if name not in plan.kept_before:
            gen.extend(ins.load_const(UNBOUND) + ins.store_fast(name))
    make_continuation(gen, code, plan.body, plan.closure_names)
    gen.extend(ins.store_fast(LOOP_BODY))
    gen.label(head)
    if plan.iterates:
        done = Label()
        gen.extend(ins.for_iter(done) + ins.store_fast(ITEM))
    # The body stores these first thing: plain Python lets go of the previous value right there.
    for name in plan.kept_first:
        gen.extend(ins.delete_fast(name))
    # An exception from the body passes a handler that takes the handed-over locals back from
    # the body's frame and merges the call's traceback entry with the body's
    # (`tracebacks.merge_body_traceback`), then raises it on from the statement that raised
    # (RERAISE 1 adds no entry): one entry for the function at that line, as in plain Python,
    # not also the loop's line.
    mend = Label()
    gen.pad_positions(plan.body)
    protected = gen.protect(mend)
    if plan.owned_call:
        gen.extend(ins.with_null(ins.load_const(call_owned)) + ins.load_fast(LOOP_BODY))
    else:
        gen.extend(ins.with_null(ins.load_fast(LOOP_BODY)))
    if plan.iterates:
        gen.extend(ins.load_fast(ITEM))
        if plan.hands_item:
            gen.extend(ins.delete_fast(ITEM))
    handed = set(plan.handed_over)
    for name in plan.carried + plan.params:
        gen.extend(ins.load_fast(name))
        if name in handed:
            gen.extend(ins.delete_fast(name))
    for name in plan.cell_args:
        gen.extend(ins.load_closure(CellVar(name)))
    gen.extend(ins.call(plan.owned_call + on_stack + len(plan.carried) + len(plan.params)
                        + len(plan.cell_args))
               + ins.store_fast(LOOP_RESULT))
    gen.unprotect(protected)

    def unpack(names: tuple[str, ...]) -> None:
        """Store the values after the status, then let go of the result tuple (it would hold
        them through the next call)."""
        gen.extend(ins.load_fast(LOOP_RESULT) + ins.unpack_sequence(1 + len(names)) + ins.pop_top())
        for name in names:
            gen.extend(ins.store_fast(name))
        gen.extend(ins.delete_fast(LOOP_RESULT))

    def resume_with_kept(target: int, names: tuple[str, ...],
                         unsure: tuple[tuple[str, ...], bool]) -> None:
        """Call the resume function for `target` with `names`, of which the `unsure` ones may be
        `UNBOUND` (`LoopPlan.unsure`): those are deleted here and not passed (`f_locals`
        shows what plain Python's would, were the rest to run in this frame). When they are
        all bound, or all unbound, that is one resume function each; a mix continues in this
        frame, in the plain copy of the rest (`codegen._stay`). A loop body's own frames pass the
        marker on (to the body's epilogue, which returns it)."""
        maybe, together = unsure
        if not maybe or in_loop_body(code):
            call_resume(gen, code, target, names)
            return
        some_unbound = Label()
        for name in maybe:
            gen.extend(ins.load_fast(name) + ins.if_is(UNBOUND, some_unbound))
        call_resume(gen, code, target, names)
        gen.label(some_unbound)
        if not together:
            mixed = Label()
            for name in maybe:
                unbound = Label()
                gen.extend(ins.load_fast(name) + ins.if_is(UNBOUND, unbound)
                           + ins.jump_forward(mixed))
                gen.label(unbound)
        for name in maybe:
            gen.extend(ins.delete_fast(name))
        call_resume(gen, code, target, tuple(name for name in names if name not in maybe))
        if not together:
            gen.label(mixed)
            for name in maybe:
                unbound, bound = Label(), Label()
                gen.extend(ins.load_fast(name) + ins.if_is(UNBOUND, unbound)
                           + ins.jump_forward(bound))
                gen.label(unbound)
                gen.extend(ins.delete_fast(name))
                gen.label(bound)
            # (the plan made sure `call_resume` registered the copy of the rest: see `_plan`)
            gen.extend(ins.jump_forward(gen.stay_entries[target][0]))

    def status_is(value: int, otherwise: Label) -> None:
        gen.extend(ins.load_fast(LOOP_RESULT) + ins.load_const(0) + ins.binary_subscr())
        gen.extend(ins.if_not_equal(value, otherwise))

    status_is(CONTINUE, other)
    unpack(plan.carried + plan.kept)
    gen.extend(ins.jump_backward(head))
    gen.label(other)
    after_return = Label()
    status_is(RETURN, after_return)
    gen.extend(ins.load_fast(LOOP_RESULT) + ins.load_const(1) + ins.binary_subscr())
    gen.extend(ins.drop_below(on_stack))  # the iterator
    gen.extend(ins.return_value())
    gen.label(after_return)
    for k, (target, returned) in enumerate(plan.exits):
        after = Label()
        status_is(EXIT + k, after)
        gen.extend(ins.pop_top() * on_stack)  # the iterator
        names = with_kept(returned, plan.kept)
        unpack(names)
        resume_with_kept(target, names + plan.through, plan.unsure(k))
        gen.label(after)
    gen.extend(ins.load_const(None) + ins.return_value())  # (unreachable: every status is handled)
    gen.label(mend)
    _emit_take_back(gen, plan.handed_over + plan.kept_first)
    gen.fix_and_reraise(merge_body_traceback)
    if plan.iterates:
        gen.label(done)
        gen.extend(ins.loop_exit())
        target, names = plan.done
        resume_with_kept(target, names + plan.through + plan.kept, plan.unsure(None))


def _emit_take_back(gen: Codegen, names: tuple[str, ...]) -> None:
    """In the handler of an exception from a loop body's call (3.11+: the exception on top of
    the stack; 3.10: the one being handled), before the body's frame is cleared: store into
    `names` the values the body's frame had when it raised (`taken_back`), leaving a
    name the body's frame had unbound as it is. Net stack effect zero."""
    if not names:
        return
    gen.extend(ins.with_null(ins.load_const(taken_back)) + ins.load_const(names))
    if ins.HAS_EXCEPTION_TABLE:
        gen.extend(ins.copy(3 + ins.NULL_SLOTS) + ins.call(2))
    else:
        gen.extend(ins.call(1))
    gen.extend(ins.unpack_sequence(len(names)))
    for name in names:
        unbound, stored = Label(), Label()
        gen.extend(ins.copy(1) + ins.if_is(UNBOUND, unbound) + ins.store_fast(name)
                   + ins.jump_forward(stored))
        gen.label(unbound)
        gen.extend(ins.pop_top())
        gen.label(stored)
