"""Lower a loop of a code object to the loop-nest IR: an abstract interpretation of its bytecode.

In: the code object, the index of the loop's entry (the start of the statement that makes a
``for`` loop's range, or its GET_ITER with the range on the stack; a ``while`` loop's header;
an ``if`` statement's start: `sites.LoopSite`), the types of the locals bound there and the objects its globals name. Out: a
`LoopNest` (``loop_nest.ir``), or `Refuse` naming the first construct
that stops it (the loop then keeps today's treatment: unrolled, a body function, or Python).
Called by `dynamo.loop_kernels` (the planner, which gets the types from the translator).

Each instruction of the loop is interpreted over typed values (`loop_nest.scalars` for the
arithmetic) twice: first to a fixed point of the types at every jump target (a local must keep
its family; a tag or a bound that differs between paths becomes a run-time tag or flag), then
once more to emit the statements. Stack values are C temporaries (a local's load is copied, so
``a, b = b, a`` reads before it writes); at a jump, the stack goes into the target's slot
variables. What is lowered: ``for`` over ``range`` (1-3 arguments, any int expressions) and
``while``, nested, with ``break``/``continue``/``return``; ``if``/``and``/``or``/``not``;
scalar arithmetic of Python ints, floats and bools and NumPy int64/float64/bool scalars;
elements of float64/int64 arrays read and written and of bool arrays read, with int indices
(negative ones wrap, every index is bounds-checked); ``A.shape[k]``, ``len(A)``, ``abs``,
``min``/``max`` of two, ``int``, ``float``, ``math`` functions and ``np.sqrt``/``np.floor``/...
on scalars (`calls`); slices, dot products (`slices`) and array statements (`elementwise`).
The instruction handlers are `opcodes.Opcodes`; this module is the driver: the blocks of the
loop's region (`sites.region`), their edges and the two passes.
"""

from __future__ import annotations

import types
from typing import Any

from .. import compat
from ..bytecode_analysis import code_info
from . import fast, inline, scalars
from . import items as item_loops
from .ir import CTYPE, ArrTy, Exit, LoopNest, Stmt, Ty
from .opcodes import Opcodes
from .scalars import Refuse, SVal
from .sites import region, site_at
from .slots import Slots
from .values import ItemIterV, RangeV, State, Unbound, merge_local, merge_value

__all__ = ["lower", "Refuse"]


class _Lowering(Opcodes, Slots):
    """One abstract interpretation of the loop (see the module docstring)."""

    def __init__(self, code, entry, local_types, statics, name, globals_dict=None):
        self.info = code_info(code)
        self.code = code
        #: the instructions by position: the loop's code, then every inlined call's (`inline`)
        self.instrs = inline.Positions(self.info)
        self.globals_dict = globals_dict
        #: the positions of the calls inlined so far
        self.inlined: set[int] = set()
        #: every local stored, and its type (an inlined callee's may live in one block only)
        self.stored: dict[str, tuple] = {}
        found = site_at(code, entry)
        if found is None:
            raise Refuse("no loop or if statement starts here")
        self.site = found
        self.header, self.back, self.iterates = found.header, found.back, found.iterates
        self.entry = entry
        self.region = region(code, found)
        for i in self.region:
            if self.info.in_exception_block(i):
                raise Refuse("the loop holds a try/with statement")
        self.statics = statics
        self.name = name
        self.local_types = local_types
        self.entries: dict[int, State] = {}
        self.exits: list[tuple[Exit, State]] = []
        jumps = [i for i in self.region if self.instrs[i].has_jump()]
        self.region = set(self.region)
        self.headers = {self.info.target(i) for i in jumps if self.info.target(i) <= i}
        # (every place a block starts: jump targets, where a range runs out, the header)
        self.targets = {self.info.target(i) for i in jumps} | {self.header} | {
            self.info.target(i) + compat.loop_exit_skip() for i in jumps
            if self.instrs[i].name == "FOR_ITER"}
        self.used_statics: dict = {}
        #: the last instruction of the block where the stack was empty, and whether anything
        #: was stored since (`opcodes.Opcodes.return_exit`)
        self.clean: int | None = None
        self.dirty = False
        #: id of a view -> ids of the array and index it was read with (`opcodes`)
        self.view_origin: dict = {}
        # (final pass only)
        self.emitting = False
        self.stmts: list[Stmt] = []
        self.temps: dict[str, str] = {}
        self.tagged: frozenset[str] = frozenset()
        self.flagged: frozenset[str] = frozenset()
        self.line: int | None = None
        # (fast copies of innermost loops: `fast`; `fast` is the loop whose copy is being
        # emitted, `lin`/`arr_local`/`counter` what the copy knows of its C variables)
        self.fast: fast.FastLoop | None = None
        self.fast_loops: dict[int, fast.FastLoop] = {}
        self.lin: dict = {}
        self.arr_local: dict = {}
        self.counter: dict = {}
        self.proven = None
        self.block_exits: dict[int, list[int]] = {}
        self.exit_seq: list[int] = []
        self.block: int | None = None
        #: the outermost loop over 1-d arrays: (arrays, enumerated, zipped), else None
        self.outer_items: tuple | None = None
        #: the unary ufuncs the loop calls on scalars (`ufunc_slot`)
        self.ufuncs: list = []
        self.batched = 0  # (ufunc call sites computed a chunk at a time: `batches`)
        self.kw_names: tuple = ()  # (KW_NAMES, for the next CALL)

    # the emitter used by `scalars` -------------------------------------------------------------
    def temp(self, ctype: str) -> str:
        name = f"t{len(self.temps)}"
        self.temps[name] = ctype
        return name

    def assign(self, dst: str, expr: str) -> None:
        self.stmts.append(Stmt("assign", (dst, expr), self.line))

    def check(self, cond: str, why: str) -> None:
        self.stmts.append(Stmt("check", (cond, why), self.line))

    def emit(self, kind: str, *args) -> None:
        self.stmts.append(Stmt(kind, args, self.line))

    # ---------------------------------------------------------------------------------------
    def initial_state(self) -> State:
        locals_ = {}
        for name, ty in self.local_types.items():
            locals_[name] = (ty, "yes")
        stack = []
        if self.site.takes_range:
            stack.append(RangeV("rng[0]", "rng[1]", "rng[2]"))
        return State(stack, locals_)

    def run(self) -> LoopNest:
        # pass 1: types to a fixed point
        self.entries = {self.entry: self.initial_state()}
        work = [self.entry]
        rounds = 0
        while work:
            rounds += 1
            if rounds > 2000:
                raise Refuse("the types of the loop do not settle")
            start = work.pop()
            for target, state in self.interpret(start, self.entries[start].copy()):
                if target is None:
                    continue
                old = self.entries.get(target)
                new = state if old is None else self.merge(old, state)
                if old is None or not self.same(old, new):
                    self.entries[target] = new
                    work.append(target)
        self.decide()
        # pass 2: emit
        self.emitting = True
        self.stmts, self.temps, self.exits, self.ufuncs = [], {}, [], []
        self.batched = 0  # (ufunc call sites computed a chunk at a time: `batches`)
        self.fast_loops = fast.candidates(self)
        for start in sorted(self.entries):
            self.interpret(start, self.entries[start].copy())
        fast.emit_copies(self)
        kinds = {}
        for name, (ty, _) in {**self.stored, **self.merged_locals}.items():
            if ty is None:
                continue
            if not inline.is_callee_local(name):
                kinds[name] = ty
                continue
            # (an inlined callee's local: a C variable of the kernel, not the frame's)
            self.temps[f"L_{name}"] = "npd_arr" if isinstance(ty, ArrTy) else CTYPE[ty.fam]
            self.temps.update({f"{v}_{name}": "int" for v, names in (
                ("T", self.tagged), ("B", self.flagged)) if name in names})
        nest = LoopNest(self.name, self.site, self.instrs[self.entry].lineno,
                        kinds, self.tagged & set(kinds), self.flagged & set(kinds),
                        tuple(n for n in kinds if n in self.local_types), self.stmts, self.temps,
                        [ex for ex, _ in self.exits], dict(self.used_statics),
                        self.outer_items, tuple(self.ufuncs),
                        tuple(n for n in kinds if n in self.stored))
        return nest

    def merge(self, a: State, b: State) -> State:
        if len(a.stack) != len(b.stack):
            raise Refuse("paths join with stacks of different depths")
        # (in a's order, then b's: not a set's, whose order changes from process to process
        # and with it the C source, which then misses the disk cache)
        names = list(a.locals) + [n for n in b.locals if n not in a.locals]
        return State([merge_value(x, y) for x, y in zip(a.stack, b.stack)],
                      {n: merge_local(a.locals.get(n, (None, "no")), b.locals.get(n, (None, "no")))
                       for n in names})

    @staticmethod
    def same(a: State, b: State) -> bool:
        def key(v):
            return (type(v), getattr(v, "ty", None), getattr(v, "obj", None))
        return ([key(v) for v in a.stack] == [key(v) for v in b.stack]) and a.locals == b.locals

    def decide(self) -> None:
        """Which locals need a run-time tag or a bound flag, and each local's one family."""
        merged: dict[str, tuple] = {}
        tags: dict[str, set] = {}
        for state in [*self.entries.values(), *(st for _, st in self.exits)]:
            for name, (ty, bound) in state.locals.items():
                merged[name] = merge_local(merged.get(name, (ty, bound)), (ty, bound))
                if isinstance(ty, Ty):
                    tags.setdefault(name, set()).add(ty.tag)
        self.merged_locals = merged
        self.tagged = frozenset(n for n, t in tags.items() if len(t) > 1 or "rt" in t)
        # (a local unbound where the kernel starts and bound at every way out, an ``if``
        # statement's, still needs its flag: the kernel returns it unbound until it is set)
        self.flagged = frozenset(n for n, (ty, b) in merged.items()
                                 if ty is not None and (b != "yes" or n not in self.local_types))

    # ---------------------------------------------------------------------------------------
    def in_region(self, i: int) -> bool:
        return i in self.region

    def interpret(self, start: int, state: State):
        """Run the block at `start`; return the edges [(target or None, state)]."""
        edges: list = []
        i = start
        if self.emitting:
            self.block = start
            self.emit("label", fast.label(self, start))
            self.line = self.instrs[start].lineno
            if start != self.entry:
                state = self.enter(start, state)
            if start == self.header and self.fast is None:
                self.emit("header")
            if start in self.headers and self.fast is None:
                self.emit("poll")
        self.clean, self.dirty = None, False
        while True:
            inst = self.instrs[i]
            if inst.lineno is not None:
                self.line = inst.lineno
            if not state.stack:  # (a statement may start here: see `return_exit`)
                self.clean, self.dirty = i, False
            if len(state.stack) < -inst.pre_and_post_stack_effect(jump=False)[0]:
                # (a value under the loop's own, a loop body function's stand-in for the
                # iterator of the loop around it, which its ``return`` pops)
                raise Refuse("the code reaches below the stack the loop starts with")
            try:
                out = self.step(i, inst, state)
            except Unbound as exc:  # (until a path that binds it joins here, if one does)
                self.check("1", f"local {exc} is unbound (UnboundLocalError)")
                return edges
            if out is not None:
                return out
            i += 1
            if i in self.entries or (not self.emitting and i in self.targets):
                edges.append(self.edge(i, state))
                return edges

    def edge(self, target: int | None, state: State):
        """Leave the block for `target` (or an exit): move the stack into the target's slots."""
        if target is not None and not self.in_region(target):
            self.exit(Exit(target), state)
            return None, state
        if self.emitting and target is not None:
            for k, v in enumerate(state.stack):
                self.to_slot(k, v)
            self.emit("goto", fast.label(self, target))
        return target, state

    def exit(self, ex: Exit, state: State) -> None:
        if ex.target is not None and state.stack:
            raise Refuse("the loop is left with values on the stack")
        for name, (ty, bound) in state.locals.items():
            if ty is None and bound != "no":
                raise Refuse(f"local {name!r} unknown at an exit")
        if self.fast is not None:  # (a fast copy leaves by the checked block's way out)
            if not self.exit_seq:
                raise Refuse("internal: a fast copy has a way out its loop has not")
            k = self.exit_seq.pop(0)
            fast.same_exit(self, self.exits[k - 1][0], ex)
            self.emit("exit", k)
            return
        self.exits.append((ex, state))
        if self.emitting:
            self.emit("exit", len(self.exits))
            self.block_exits.setdefault(self.block, []).append(len(self.exits))

    def ufunc_slot(self, fn, sig: str = "d->d", how: str = "call") -> int:
        """The entry of ufunc `fn`'s loop for `sig` in the kernel's table of NumPy loops (a
        unary float64 call, or the loop a reduction folds with: `LoopNest.ufuncs`)."""
        entry = (fn, sig, how)
        if entry not in self.ufuncs:
            if how == "call" and (fn.nin != sig.index("-") or fn.nout != 1
                                  or sig not in fn.types):
                raise Refuse(f"numpy.{fn.__name__} has no {sig} loop")
            if len(self.ufuncs) == 16:
                raise Refuse("more than 16 NumPy functions in one loop")
            self.ufuncs.append(entry)
        return self.ufuncs.index(entry)

    def iterate_items(self, i: int, x) -> ItemIterV:
        """GET_ITER of 1-d arrays (`items`); the outermost loop's kind goes with the nest."""
        it = item_loops.start(self, x)
        if i == self.site.get_iter:
            if len(it.arrs) > item_loops.MAX_OUTER:
                raise Refuse(f"the outermost loop zips more than {item_loops.MAX_OUTER} arrays")
            self.outer_items = (len(it.arrs), it.enum, it.zipped, it.start)
        return it

    def scalar_binary(self, op: str, a: SVal, b: SVal) -> SVal:
        """``a op b`` of two numbers (in a fast copy without the checks it proves)."""
        if self.fast is not None:
            r = fast.binary(self, op, a, b)
            if r is not None:
                return r
        return scalars.binary(self, op, a, b)

    def store_element(self, arr, off: str, value: tuple) -> None:
        if self.fast is not None:
            fast.store(self, arr, off, value)
        else:
            self.emit("store", arr.c, off, value)


def lower(code: types.CodeType, entry: int, local_types: dict[str, Ty | ArrTy],
          statics: dict[str, Any], name: str = "loop", globals_dict: dict | None = None
          ) -> LoopNest:
    """The loop of `code` entered at instruction `entry` as a `LoopNest` (or `Refuse`); the
    frame's `globals_dict` names the module whose functions are inlined (`inline`)."""
    return _Lowering(code, entry, local_types, statics, name, globals_dict).run()
