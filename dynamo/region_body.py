"""The body of a ``try``/``with`` statement as a function of its own, so it is captured too.

In: the original code object, a `bytecode_analysis.Region` (a ``try``/``with`` statement that
runs in plain Python inside transformed code, see `codegen._emit_region`), the stack depth at its
start, the locals bound there, and whether a ``with`` statement's context manager is known never
to swallow an exception. Out: a `BodyPlan` whose *body function* holds the statement's protected
block (the ``try`` body, or the ``with`` body), or None when the block does not fit this scheme
(the statement then runs in plain Python as before). Planned by `break_exits.break_exit` (which
also decides whether a ``with`` manager never swallows); `codegen._emit_region` has the plan write the call in place of the
block (`BodyPlan.emit_call`) and the start of the statement's handler
(`BodyPlan.emit_in_handler`), so both sides of the calling convention below are in this module.

The statement itself still runs as written inside the transformed code: ``BEFORE_WITH`` and the
``__exit__`` calls, the ``except`` clauses and ``finally`` code keep their real exception table.
Only the protected block is replaced, by a call of the body function made *inside* the block's
exception table entry, so an exception leaving the body function lands in the statement's own
handler, exactly once, with the stack depth the table says. The body function is an ordinary
function to the C hook: its frame is captured like any other (graphs, breaks, guards), so NumPy
code under ``np.errstate``, in a ``try`` body or under a user's context manager is compiled.

The body function is a copy of the original that starts at the block's first instruction (the
stack values the block starts with are its first arguments; the values under the block, which
it never touches, are stood in for by None) and returns at every way out of the block:

    (0, value)                      a ``return`` inside the block
    (1 + k, (stack...), (locals...)) a way out to exit k: the values the block leaves on the
                                     stack above its own, and the locals it assigned that are
                                     read there

The calling frame hands the locals the block may assign or delete over to the body (it holds None
for them during the call, and `_C.call_owned` moves the references of the call's arguments into
the body's frame), so ``del x`` or ``x = ...`` in the block frees the old value where plain
Python does; a way out returns the new values, and on the exception's way the caller takes them
back from the body's finished frame (`restore_after_exception`).

The frame-level cost of this scheme is one rule about exceptions: when the body function raises,
the locals it assigned and the caller did not pass it are lost (they live in its frame). So the
plan is refused when code on the
exception's way (the handler, or, for a ``with`` whose manager never swallows, the enclosing
handler) may read a local the block assigns. The handler merges the traceback entries of the call
and of the body function's frame into one (`tracebacks.merge_body_traceback`): the frame's own, at
the line that raised, so a traceback reads as it does in plain Python.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

from bytecode import CellVar, Instr, Label, TryBegin, TryEnd

from . import compat
from . import instructions as ins
from ._C import call_owned
from .bytecode_analysis import CodeMap, Region, code_info
from .codegen import Codegen, make_continuation
from .resume import STACK_PREFIX, continuation_code, super_receiver
from .tracebacks import merge_body_traceback

__all__ = ["BodyPlan", "plan_region_body", "RETURN", "EXIT"]

RETURN, EXIT = 0, 1
#: the calling frame's locals: what the body function returned, and the stack values passed to it
BODY_RESULT = "___body_result"
BODY_STACK = "___body_stack"
_TERMINAL = ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE")
#: (3.10) instructions that pop or read the frame's innermost block
_BLOCK_USERS = ("POP_BLOCK", "POP_EXCEPT", "RERAISE", "END_ASYNC_FOR")


@dataclass(frozen=True)
class BodyPlan:
    body: types.CodeType
    #: index of the block's first instruction (where the driver stands in for the block)
    entry: int
    #: every instruction index of the block (left out of the statement's copy)
    members: frozenset[int]
    #: stack values the block starts with, passed first (``___stack0``, ...)
    stack_args: int
    #: locals passed after them
    params: tuple[str, ...]
    #: per exit k: (instruction index it continues at, stack values it returns, locals it returns)
    exits: tuple[tuple[int, int, tuple[str, ...]], ...]
    #: the frame's free variables (the body function's closure); its cell variables' cells are
    #: the last arguments
    closure_names: tuple[str, ...]
    cell_args: tuple[str, ...]
    #: index of the first instruction of the block's handler (where the traceback is merged)
    handler: int
    #: locals the block may assign or delete
    assigned: frozenset[str]
    #: ``try`` or ``with`` (for names and messages)
    kind: str
    #: index of the statement's first instruction (3.10: its SETUP_*; else `entry`, or the
    #: ``with``'s BEFORE_WITH)
    region_start: int

    @property
    def handed_over(self) -> tuple[str, ...]:
        """The passed locals the block may assign or delete: the caller holds None for them
        while the body runs (the body's frame holds the only reference, so ``del x`` frees
        where plain Python does), stores what a way out returns, and, on the exception's way,
        what the body's frame had (`restore_after_exception`)."""
        return tuple(name for name in self.params if name in self.assigned)

    def emit_call(self, gen: Codegen, code: types.CodeType, own: TryBegin, label_of) -> None:
        """Write the call of the body function into `gen`, the transformed code of `code`, in
        place of the block (`_emit_call`); `own` is the block's exception table entry,
        `label_of` maps an instruction index of the statement to its label in `gen`."""
        _emit_call(gen, code, self, own, label_of)

    def emit_in_handler(self, gen: Codegen, lasti_below: int | None) -> None:
        """(3.11+) At the start of the statement's handler, with the exception on top of the
        stack (`lasti_below` as for `Codegen.fix_position`): take the handed-over locals back
        from the body's frame (`restore_after_exception`), then merge the traceback entries of
        the call and of the body's frame (`tracebacks.merge_body_traceback`). In a try/with
        handler this comes after PUSH_EXC_INFO, so an exception from it (an interrupt) leaves
        through the handler's cleanup as one raised in the handler would."""
        gen.extend(restore_after_exception(self))
        gen.fix_position(merge_body_traceback, lasti_below)


_plans = CodeMap()  # (by identity: see bytecode_analysis.CodeMap)


def plan_region_body(code: types.CodeType, region: Region, depth: int, bound: frozenset[str],
                     never_swallows: bool) -> BodyPlan | None:
    """The (cached) body plan of `region`, entered with `depth` stack values and the locals
    `bound` bound, or None."""
    key = (region.start, depth, bound, never_swallows)
    per_code = _plans.setdefault(code, {})
    if key not in per_code:
        per_code[key] = _plan(code, region, depth, bound, never_swallows)
    return per_code[key]


def _plan(code: types.CodeType, region: Region, depth: int, bound: frozenset[str],
          never_swallows: bool) -> BodyPlan | None:
    if super_receiver(code) is not None:
        return None  # (the body function's first arguments are stack values, not the receiver)
    info = code_info(code)
    start = region.start
    first = info.instructions[start]
    kind = "with" if first.name in ("BEFORE_WITH", "SETUP_WITH") else "try"
    # (3.10: the statement starts with the SETUP_* that pushes its block; the block ends at the
    # POP_BLOCK that pops it, which stays in the statement: see `block_end`)
    entry = start + 1 if kind == "with" or not compat.HAS_EXCEPTION_TABLE else start
    depth += kind == "with"  # (the manager becomes __exit__, and __enter__'s value is pushed)
    if entry >= len(info.instructions):
        return None
    own = info.handlers[entry]
    if own is None:
        return None
    if info.block_nesting is not None and info.block_nesting[entry] >= 20:
        return None  # (3.10: the driver's own block would be the 21st, a fatal error)
    handler = info.labels[own.target]
    if handler not in info.handler_depth:
        return None
    base = info.handler_depth[handler] - ins.handler_pushes(own.push_lasti)
    if not 0 <= base <= depth or (kind == "with" and depth - base != 1):
        return None

    def block_end(j: int) -> bool:
        """(3.10) The POP_BLOCK that ends the block: a way out of it."""
        return info.block_pops.get(j) is own

    members_set = set(region.members)

    def inner(h: TryBegin | None, seen: frozenset = frozenset()) -> bool:
        """Is `h` the block's own handler or one whose code lies inside the block? (Compared
        by target: each range of the exception table is a TryBegin of its own.)"""
        if h is None or h.target in seen:
            return False
        if h.target is own.target:
            return True
        return inner(info.handlers[info.labels[h.target]], seen | {h.target})

    # The block: what is reached from its entry without leaving the protection of its handler
    # (nested try statements and their handlers included), with the stack depth of each.
    depths: dict[int, int] = {entry: depth}
    seen = {entry}
    exits: dict[int, int] = {}
    work = [entry]
    while work:
        i = work.pop()
        inst = info.instructions[i]
        edges: list[tuple[int, int]] = []
        if inst.name not in _TERMINAL and not inst.is_uncond_jump():
            edges.append((i + 1, depths[i] + inst.stack_effect(jump=False)))
        if inst.has_jump():
            edges.append((info.target(i), depths[i] + inst.stack_effect(jump=True)))
        h = info.handlers[i]
        if h is not None and h.target is not own.target:
            target = info.labels[h.target]
            if target not in info.handler_depth:
                return None
            edges.append((target, info.handler_depth[target]))
        for j, d in edges:
            if d < base or j >= len(info.instructions) or j <= start:
                return None  # (below the block's stack, or a jump back: a loop around it)
            if inner(info.handlers[j]) and not block_end(j):
                if depths.setdefault(j, d) != d:
                    return None
                if j not in seen:
                    seen.add(j)
                    work.append(j)
            elif exits.setdefault(j, d) != d:
                return None
    members = frozenset(depths)
    if not members <= members_set or handler not in members_set or members & set(exits):
        return None
    if info.block_nesting is not None:
        # (3.10) The body function starts with an empty block stack: whatever pops or reads a
        # block in it must be under a block the body itself pushed (an empty ``try:`` body is
        # just the POP_BLOCK of the statement's own block).
        outer = info.block_nesting[entry]
        if any(info.instructions[i].name in _BLOCK_USERS and info.block_nesting[i] <= outer
               for i in members):
            return None
    # One way in: nothing else in the statement jumps into the block.
    for i in members_set - members:
        if any(j in members and j != entry for j in info.successors(i)):
            return None

    cells = set(code.co_cellvars) | set(code.co_freevars)
    assigned = frozenset(info.instructions[i].arg for i in members
                         if info.instructions[i].name in ("STORE_FAST", "DELETE_FAST",
                                                           "LOAD_FAST_AND_CLEAR"))
    # What the block reads, and what it may assign (so that, returned, such a local holds its
    # current value on every way out). A local unbound before the block stays unbound in the
    # body function: reading it there raises the same UnboundLocalError.
    params = tuple(sorted(((info.live_locals(entry) | assigned) - cells) & bound))
    # Where an exception leaving the block goes: the block's handler, or (a with statement
    # whose manager never swallows) straight on to whatever handles the statement.
    if kind == "with" and never_swallows:
        outer = info.handlers[start]
        on_exception = info.live_locals(info.labels[outer.target]) if outer is not None \
            else frozenset()
    else:
        on_exception = info.live_locals(handler)
    if on_exception & assigned:
        return None  # the handler would read a local the body function assigned

    must = _must_bound(info, members, entry, frozenset(params))
    exit_list: list[tuple[int, int, tuple[str, ...]]] = []
    for j, d in sorted(exits.items()):
        if j not in must or not (info.live_locals(j) & assigned) <= must[j]:
            return None  # a local read after the block may be unbound on one way there
        # (every local the block may have changed and that is bound there: what follows passes
        # the bound locals on, read or not)
        names = tuple(sorted(must[j] & assigned))
        exit_list.append((j, d - base, names))
    closure_names, cell_args = tuple(code.co_freevars), tuple(code.co_cellvars)
    body = _body_code(code, kind, entry, members, depths, base, depth - base, params,
                      {j: k for k, (j, _, _) in enumerate(exit_list)},
                      {j: (above, names) for j, above, names in exit_list}, own, closure_names,
                      cell_args)
    return BodyPlan(body, entry, members, depth - base, params, tuple(exit_list),
                    closure_names, cell_args, handler, assigned, kind, start)


def _must_bound(info, members: frozenset[int], entry: int,
                params: frozenset[str]) -> dict[int, frozenset[str]]:
    """For each instruction reached from the block (inside it or one step out): the locals
    bound on every way there from the entry (where only `params` are bound)."""
    must: dict[int, frozenset[str]] = {entry: params}
    work = [entry]
    while work:
        i = work.pop()
        inst = info.instructions[i]
        before = must[i]
        after = info.bound_after(i, before)
        edges: list[tuple[int, frozenset[str]]] = []
        if inst.name not in _TERMINAL and not inst.is_uncond_jump():
            edges.append((i + 1, after))
        if inst.has_jump():
            edges.append((info.target(i), after))
        h = info.handlers[i]
        if h is not None:
            edges.append((info.labels[h.target], before))
        for j, names in edges:
            old = must.get(j)
            new = names if old is None else old & names
            if new != old:
                must[j] = new
                if j in members:
                    work.append(j)
    return must


def _body_code(code, kind, entry, members, depths, base, stack_args, params, exit_numbers,
               exit_names, own, closure_names, cell_args):
    info = code_info(code)
    cellvars = list(cell_args)
    original = compat.decode(code)
    labels = {i: Label() for i in members}
    epilogues: dict[int, Label] = {}
    body: list = []
    open_try: TryBegin | None = None
    open_for = None
    previous = None
    for i in sorted(members):
        handler = info.handlers[i]
        if handler is not None and handler.target is own.target:
            handler = None  # (the statement's handler is the driver's, outside this function)
        if open_try is not None and (handler is not open_for or previous != i - 1):
            body.append(TryEnd(open_try))
            open_try = open_for = None
        body.append(labels[i])
        if handler is not None and open_try is None and compat.HAS_EXCEPTION_TABLE:
            # (3.10: the block's inner SETUP_* and POP_BLOCK instructions are copied instead)
            open_try = TryBegin(labels[info.labels[handler.target]], handler.push_lasti,
                                handler.stack_depth)  # (an upper bound: see compat.decode)
            open_for = handler
            body.append(open_try)
        item = info.instructions[i]
        if item.name in ("RETURN_VALUE", "RETURN_CONST"):
            # (RETURN, value), returned right here (see loops._body_code for why not shared)
            body += ins.return_tagged_for(item, RETURN, depths[i])
            previous = i
            continue
        copy = item.copy()
        if item.has_jump():
            target = info.target(i)
            if target in members:
                copy.arg = labels[target]
            else:
                copy = ins.forward_jump(item, epilogues.setdefault(target, Label()))[0]
                copy.location = item.location
        body.append(copy)
        falls = item.name not in _TERMINAL and not item.is_uncond_jump()
        if falls and i + 1 not in members:
            if open_try is not None:
                body.append(TryEnd(open_try))
                open_try = open_for = None
            body += ins.jump_forward(epilogues.setdefault(i + 1, Label()))
        previous = i
    if open_try is not None:
        body.append(TryEnd(open_try))

    line = info.instructions[entry].lineno
    stack_names = [f"{STACK_PREFIX}{k}" for k in range(stack_args)]
    # Cells as in a resume function: free variables arrive as the closure, each cell variable
    # as an argument holding the frame's cell, made the variable's cell by the prologue (an
    # empty one reads as UnboundLocalError, as in the original; see resume.passed_cells).
    prologue = ins.copy_free_vars(len(closure_names))
    prologue += ins.install_cells(cellvars)
    prologue += ins.resume()
    prologue += ins.load_const(None) * base  # stand in for the values under the block
    for name in stack_names:
        prologue += ins.load_fast(name)
    for name in stack_names:
        prologue += ins.delete_fast(name)
    prologue += ins.jump_forward(labels[entry])
    tail: list = []
    for target, label in epilogues.items():
        tail.append(label)
        k = exit_numbers[target]
        above, names = exit_names[target]
        tail += ins.build_tuple(above) + ins.load_const(EXIT + k) + ins.swap(2)
        for name in names:
            tail += ins.load_fast(name)
        tail += ins.build_tuple(len(names)) + ins.build_tuple(3)
        tail += ins.drop_below(base) + ins.return_value()
    for instr in prologue + [t for t in tail if isinstance(t, Instr)]:
        instr.lineno = line
    return continuation_code(code, original, prologue + body + tail,
                             stack_names + list(params) + list(cellvars), closure_names,
                             f"<{kind} body at line {line}>", cellvars=tuple(cellvars))


def restore_after_exception(plan: BodyPlan) -> list[Instr]:
    """Instructions for the calling frame, where an exception from the body function's call
    is handled (3.11+: on top of the stack; 3.10: the one being handled), before
    `tracebacks.merge_body_traceback` clears the body's frame: store into the locals handed
    over (`BodyPlan.handed_over`) the values the body's frame had when it raised, as plain
    Python's frame has them at the handler. Net stack effect zero; nothing when none is."""
    names = plan.handed_over
    if not names:
        return []
    seq = ins.with_null(ins.load_const(body_values))
    if compat.HAS_EXCEPTION_TABLE:
        seq += ins.load_const(names) + ins.copy(3 + ins.NULL_SLOTS) + ins.call(2)
    else:
        seq += ins.load_const(names) + ins.call(1)
    seq += ins.unpack_sequence(len(names))
    for name in names:
        seq += ins.store_fast(name)
    return seq


def body_values(names: tuple[str, ...], exc: BaseException | None = None,
                missing: object = None) -> tuple:
    """(`restore_after_exception`) The values `names` have in the frame of the body function
    that `exc` (default: the exception being handled) came out of: its traceback's second
    entry, a frame of the same user function (the body, or a resume function that continued
    it). `missing` for a name unbound there (None: the caller's placeholder; the plan
    guarantees no code on this way reads such a local), and all `missing` when the body's
    frame never started. (`loops.taken_back` asks for `instructions.UNBOUND` instead.)"""
    if exc is None:
        exc = sys.exc_info()[1]
    tb = getattr(exc, "__traceback__", None)
    body = tb.tb_next if tb is not None else None
    if body is None:
        return (missing,) * len(names)
    mine, theirs = tb.tb_frame.f_code, body.tb_frame.f_code
    if (theirs.co_filename, theirs.co_firstlineno, theirs.co_name) != \
            (mine.co_filename, mine.co_firstlineno, mine.co_name):
        return (missing,) * len(names)  # (not the body's: it raised before it started)
    f_locals = body.tb_frame.f_locals
    values = tuple(f_locals.get(name, missing) for name in names)
    if type(f_locals) is dict:
        # (3.10-3.12: a snapshot kept in the frame, which clearing the frame leaves: it would
        # hold the values as long as the finished frame lives)
        for name in names:
            f_locals.pop(name, None)
    return values


def _emit_call(gen: Codegen, code: types.CodeType, plan: BodyPlan, own: TryBegin,
               label_of) -> None:
    """In place of a try/with block (its stack values on the stack): call its body function
    inside the block's exception table entry (an exception from it meets the statement's own
    handler), then continue where it says (the module docstring lists what it returns): the
    values it left on the stack are pushed back, the locals it assigned are stored, and the flow
    goes on at the instruction the block would have reached."""
    for k in reversed(range(plan.stack_args)):
        gen.extend(ins.store_fast(f"{BODY_STACK}{k}"))
    gen.pad_positions(plan.body)
    # (after the stores: the handler's depth is the block's base.) 3.11+: the call is inside
    # the block's own exception table entry, and the statement's handler merges the traceback
    # first. 3.10: the statement's SETUP_* has run; the call gets a block of its own whose
    # handler merges and raises on into the statement's.
    mend = Label()
    if ins.HAS_EXCEPTION_TABLE:
        protected = TryBegin(label_of(plan.handler), own.push_lasti, own.stack_depth)
        gen.label_raw(protected)
    else:
        protected = gen.protect(mend)
    # The body function is called through `_C.call_owned`, which hands the references on this
    # frame's value stack over to the body's frame, and a local the block may assign or delete
    # holds None here while the body runs: the body's frame then holds the only reference, so
    # `del x` or `x = ...` in the block frees the old value where plain Python does (a CALL
    # keeps its arguments until it returns: with the hook installed no version inlines it).
    # (The placeholder stays bound: the way from the handler to the code after the statement
    # passes every bound local on, read or not; the plan guarantees none is read there. A way
    # out stores the locals the block assigned and that are read after it.)
    gen.extend(ins.with_null(ins.load_const(call_owned)))
    make_continuation(gen, code, plan.body, plan.closure_names)
    for k in range(plan.stack_args):
        gen.extend(ins.load_fast(f"{BODY_STACK}{k}"))
    for k in range(plan.stack_args):
        gen.extend(ins.delete_fast(f"{BODY_STACK}{k}"))
    for name in plan.params:
        gen.extend(ins.load_fast(name))
        if name in plan.assigned:
            gen.extend(ins.load_const(None) + ins.store_fast(name))
    for name in plan.cell_args:
        gen.extend(ins.load_closure(CellVar(name)))
    gen.extend(ins.call(1 + plan.stack_args + len(plan.params) + len(plan.cell_args))
               + ins.store_fast(BODY_RESULT))
    if ins.HAS_EXCEPTION_TABLE:
        gen.label_raw(TryEnd(protected))
    else:
        gen.unprotect(protected)

    def item(*path: int) -> None:
        gen.extend(ins.load_fast(BODY_RESULT))
        for k in path:
            gen.extend(ins.load_const(k) + ins.binary_subscr())

    after_return = Label()
    item(0)
    gen.extend(ins.if_not_equal(RETURN, after_return))
    item(1)
    gen.extend(ins.delete_fast(BODY_RESULT) + ins.return_value())
    gen.label(after_return)
    for k, (target, above, names) in enumerate(plan.exits):
        other = Label()
        item(0)
        gen.extend(ins.if_not_equal(EXIT + k, other))
        for v in range(above):
            item(1, v)
        if names:
            item(2)
            gen.extend(ins.unpack_sequence(len(names)))
            for name in names:
                gen.extend(ins.store_fast(name))
        gen.extend(ins.delete_fast(BODY_RESULT) + ins.jump_forward(label_of(target)))
        gen.label(other)
    gen.extend(ins.load_const(None) + ins.return_value())  # (unreachable: every status is handled)
    if not ins.HAS_EXCEPTION_TABLE:
        gen.label(mend)
        gen.extend(restore_after_exception(plan))
        gen.fix_and_reraise(merge_body_traceback)
