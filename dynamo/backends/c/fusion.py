"""Fusion: group the lowerable nodes of an fx graph into kernels and order the whole program.

In: an fx `Graph` (every node with ``meta["val"]``). Out: a `FusionPlan`: the kernels
(`loop_ir.PointwiseKernel` / `ReductionKernel`), a schedule (kernels and NumPy-call nodes in a
valid execution order), and the facts the fusion report prints. Called by `compile_graph`.

Rules, in the order they apply:

1. `lowering.lower` decides per node: pointwise, reduction, or a NumPy call (with a reason).
   Nodes with side effects (in-place operators, ``setitem``, ``out=``, ...) are NumPy calls and
   *barriers*: every node gets an epoch (the number of barriers before it) and nothing is fused
   or moved across epochs, so reads and writes keep their order (inputs may alias).
2. A pointwise node is *inlined* (never materialised) when every user is a lowered node over the
   same domain shape in the same epoch (or, for a per-row value computed only from reduction
   results, a domain it broadcasts to); its expression is then recomputed inside each
   consumer's kernel (inside one kernel it is computed once). Otherwise it is a *root*. A node
   whose expression may raise a floating-point flag, read by a user that could let gcc skip
   computing it (a ``where`` branch, ``v > v``, ``x ** 0``: `_keeps_operand`), is inlined only
   where the C keeps it alive (pointwise loops and epilogues: `c_flags.forced_values`);
   if it could reach a reduction's element function it is a root (stored): either way every
   element is computed, so its flags (NumPy's warnings) are never lost.
3. Pointwise roots with the same domain shape and epoch share a kernel (several outputs) unless
   a root reads, through nodes outside the kernel, something that depends on the kernel - which
   would make a cycle - or an earlier large root (`PACE_MIN_BYTES`) is dead before the root in
   the program (one kernel would keep both alive, where NumPy frees one first). Reductions
   over the same domain and axes share a *row kernel* (one loop over the kept dims, each
   reduction a phase over the row, reading earlier phases' results per row); a pointwise
   root over the same domain that reads one of them joins as the row's epilogue when the axes
   are trailing (softmax and layer-norm become one kernel).
   ``np.roll`` (a pointwise node reading its input through rolled Loads): its input is
   inlined only when that is a roll of stored values (rolls of rolls), a rolled value never
   enters a row kernel (prologue or epilogue), and a root read through a roll is not in the
   reader's kernel (the reader needs other elements than the iteration computes).
4. A NumPy call that may raise (`fx.node.may_raise`: ``b[i]``, ...) cuts its epoch into
   *segments*: roots share a kernel only within a segment, and a value that may raise FP flags
   is not inlined into a later segment (it is stored). A kernel runs after all its operands; one
   spanning ``b[i]`` would hold back its earlier statements' warnings, lost when ``b[i]`` raises.
5. The schedule is a topological order of kernels and NumPy calls (ties broken by graph order),
   with barriers ordered against everything in the neighbouring epochs. As no kernel spans a
   call that may raise, graph order alone runs such a call after every earlier statement and
   before every later one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from fx.node import may_raise
from fx.python_code import PACE_MIN_BYTES, heap_bytes

from .c_flags import ARITHMETIC, keeps, raises_fp
from .loop_ir import (
    Kernel,
    Load,
    Op,
    Operand,
    PointwiseKernel,
    Reduction,
    ReductionKernel,
    RowRef,
    Value,
    walk,
)
from .lowering import Lowered, lower

__all__ = ["FusionPlan", "plan_fusion", "is_mutating"]

_MUTATING_METHODS = frozenset({"fill", "sort", "partition", "put", "itemset", "resize",
                               "setfield", "setflags", "__setitem__", "__delitem__"})


def same_dim(a: Any, b: Any) -> bool:
    """Are two sizes (ints or `fx.symbolic.Sym`) equal for every run-time size? Symbolic sizes
    compare by expression (``s0 - 1`` and ``s0 - 1``), never with ``==``: that would record a
    guard fact after the guards were built. Different expressions may still be equal at run
    time; callers treat them as different (they do not fuse), which is always correct."""
    if type(a) is int and type(b) is int:
        return a == b
    sym = b if type(a) is int else a
    return sym.same_as(a if sym is b else b)


def same_shape(a: tuple, b: tuple) -> bool:
    """`same_dim` for every dimension of two shapes of the same length."""
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Does ``shape`` broadcast to exactly ``target`` for every run-time size? (A dimension
    broadcasts only if it is the int 1 or the same size.)"""
    if len(shape) > len(target):
        return False
    off = len(target) - len(shape)
    return all((type(d) is int and d == 1) or same_dim(d, target[off + i])
               for i, d in enumerate(shape))


def is_mutating(node: Any) -> bool:
    """Does ``node`` write to memory that other nodes can see (a fusion barrier)?"""
    if node.op in ("placeholder", "output", "get_attr"):
        return False
    if node.written():
        return True
    if node.op == "call_method" and (node.target in _MUTATING_METHODS
                                     or str(node.target).startswith("__i")):
        return True
    checker = getattr(node, "is_impure", None)
    return bool(checker()) if checker is not None else False


@dataclass
class FusionPlan:
    """The result of `plan_fusion`; ``schedule`` items are Kernels or fx Nodes (NumPy calls)."""

    kernels: list[Kernel]
    schedule: list[Any]
    not_lowered: dict[Any, str] = field(default_factory=dict)
    materialized_why: dict[Any, str] = field(default_factory=dict)
    split_why: dict[Any, str] = field(default_factory=dict)
    inlined: list[Any] = field(default_factory=list)
    kernel_of: dict[Any, Kernel] = field(default_factory=dict)


class _Builder:
    """Builds one kernel's expressions: inlined nodes become Values, others become Loads."""

    def __init__(self, plans: dict[Any, Lowered], inlined: set[Any]):
        self.plans = plans
        self.inlined = inlined
        self.operands: list[Operand] = []
        self.operand_index: dict[Any, int] = {}
        self.values: dict[Any, Value] = {}
        self.members: set[Any] = set()

    def get(self, node: Any) -> Value:
        if node in self.values:
            return self.values[node]
        if node in self.inlined:
            value = self.plans[node].build(self.get)
            self.members.add(node)
        else:
            idx = self.operand_index.get(node)
            meta = node.meta["val"]
            if idx is None:
                idx = self.operand_index[node] = len(self.operands)
                self.operands.append(Operand(node, meta.dtype, meta.shape))
            value = Load(idx, meta.dtype)
        self.values[node] = value
        return value

    def root(self, node: Any) -> Value:
        value = self.plans[node].build(self.get)
        self.values[node] = value
        self.members.add(node)
        return value


def _leaves(node: Any, plans: dict[Any, Lowered], inlined: set[Any]) -> set[Any]:
    """Materialised nodes that ``node``'s expression reads (through inlined producers)."""
    out: set[Any] = set()
    stack = list(plans[node].inputs)
    seen: set[Any] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in inlined:
            stack.extend(plans[n].inputs)
        else:
            out.add(n)
    return out


def _rolled_leaves(node: Any, plans: dict[Any, Lowered], inlined: set[Any]) -> set[Any]:
    """Materialised nodes that ``node``'s expression reads through an ``np.roll``."""
    out: set[Any] = set()
    stack = [node]
    seen: set[Any] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if plans[n].op == "roll":
            out |= _leaves(n, plans, inlined)
        else:
            stack.extend(i for i in plans[n].inputs if i in inlined)
    return out


def _placeholder_value(plan: Lowered, marked: Any = None) -> Value:
    """``plan``'s expression over one Load per input (operand index = input position); the
    input ``marked`` gets operand -1."""
    index = {n: i for i, n in enumerate(plan.inputs)}
    return plan.build(lambda n: Load(-1 if n is marked else index.get(n, len(index)),
                                     n.meta["val"].dtype))


def _raises_fp(plan: Lowered) -> bool:
    """May ``plan``'s own operation raise a floating-point flag (FE_DIVBYZERO, ...)?"""
    if plan.kind != "pointwise":
        return True
    return any(raises_fp(v) for v in walk([_placeholder_value(plan)]))


def _keeps_operand(user: Lowered, n: Any, risky: set[Any]) -> bool:
    """Does ``user``'s C code compute its input ``n`` for every element, whatever gcc folds
    (`c_flags.keeps`)? Reductions do. Inside a kernel, structurally equal expressions are
    one value (``1 / a > 1 / a`` is ``v > v``, which gcc folds to false), so a comparison or
    other non-arithmetic op reading ``n`` and another value that may raise FP flags (a node
    in ``risky``) counts as not keeping ``n`` either."""
    if user.kind != "pointwise":
        return True
    top = _placeholder_value(user, n)
    mine: dict[Value, bool] = {}  # depends on n
    flagged: dict[Value, bool] = {}  # depends on a risky input (n included)
    for v in walk([top]):
        if isinstance(v, Load):
            mine[v] = v.operand == -1
            flagged[v] = mine[v] or (0 <= v.operand < len(user.inputs)
                                     and user.inputs[v.operand] in risky)
            continue
        if not isinstance(v, Op):
            mine[v] = flagged[v] = False
            continue
        mine[v] = any(mine[a] for a in v.args)
        flagged[v] = any(flagged[a] for a in v.args)
        for i, a in enumerate(v.args):
            if mine[a] and not keeps(v, i):
                return False
        if mine[v] and sum(flagged[a] for a in v.args) >= 2 and v.name not in ARITHMETIC:
            return False
    return True


def plan_fusion(graph: Any, prefix: str = "k") -> FusionPlan:
    """Group ``graph``'s nodes into kernels; see the module docstring for the rules."""
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    plans: dict[Any, Lowered] = {}
    not_lowered: dict[Any, str] = {}
    epoch: dict[Any, int] = {}
    barriers: list[Any] = []
    # Segments: epochs cut further by each NumPy call that may raise (rule 4).
    segment: dict[Any, int] = {}
    cuts: list[Any] = []
    for n in nodes:
        epoch[n] = len(barriers)
        segment[n] = len(cuts)
        if n.op not in ("call_function", "call_method"):
            continue
        if is_mutating(n):
            barriers.append(n)
            cuts.append(n)
            not_lowered[n] = "mutates memory (fusion barrier)"
            continue
        plan, why = lower(n)
        if plan is None:
            not_lowered[n] = why
            if may_raise(n):
                cuts.append(n)
        else:
            plans[n] = plan

    # Ancestor sets as int bitmasks (graphs are small; this keeps the cycle test cheap).
    anc: dict[Any, int] = {}
    for n in nodes:
        mask = 0
        for i in n.all_input_nodes:
            mask |= anc[i] | (1 << pos[i])
        anc[n] = mask

    inlined: set[Any] = set()
    materialized_why: dict[Any, str] = {}
    row_level: dict[Any, bool] = {}
    for n, plan in plans.items():  # graph order: inputs are decided first
        row_level[n] = plan.kind == "pointwise" and plan.op != "roll" and all(
            i in plans and (plans[i].kind == "reduction" or row_level.get(i, False))
            for i in plan.inputs)

    def fits(n: Any, u: Any) -> bool:
        # Same domain; or a per-row value (computed only from reduction results, e.g.
        # sqrt(var + eps)) broadcast into a bigger loop, where it is loop-invariant.
        shape, ushape = plans[n].shape, plans[u].shape
        if same_shape(shape, ushape):
            return True
        return row_level[n] and broadcasts_to(shape, ushape)

    # FP flags must not get lost: a value that may raise one and is read by an op through
    # which gcc may skip computing it (a `where` branch, `v > v`, ...) must be computed for
    # every element anyway (kept alive by the C, or stored).
    risky: set[Any] = set()  # pointwise nodes whose expression (all inlined) may raise
    for n, plan in plans.items():
        if plan.kind == "pointwise" and (_raises_fp(plan) or any(i in risky
                                                                 for i in plan.inputs)):
            risky.add(n)
    flags_in: dict[Any, bool] = {}  # pointwise node -> its inlined expression may raise FE_*
    # Could a node's expression end up inlined into a reduction's element function? (Users
    # come later in graph order: one backward pass, no recursive closure, no reference cycle.)
    feeds_reduction: dict[Any, bool] = {}
    for n in reversed(nodes):
        feeds_reduction[n] = any(u in plans and (plans[u].kind == "reduction"
                                                 or feeds_reduction.get(u, False))
                                 for u in n.users)

    # Nodes whose expression reads rolled Loads (an np.roll, or an inlined input that has one):
    # the row kernels' code reads operands at the current index only, so such a node is never
    # inlined into a reduction's element function nor joins a row kernel as its epilogue.
    rolled: dict[Any, bool] = {}
    # A roll of an inlined expression recomputes that expression at every shift (and a time
    # loop of stencils would nest them exponentially): a roll's input is inlined only when it
    # is itself a roll of stored values (rolls of rolls: one load with the shifts added).
    pure_roll: dict[Any, bool] = {}
    for n, plan in plans.items():
        if plan.kind != "pointwise":
            continue
        rolled[n] = plan.op == "roll" or any(rolled.get(i, False) for i in plan.inputs
                                             if i in inlined)
        pure_roll[n] = plan.op == "roll" and all(i not in inlined or pure_roll.get(i, False)
                                                 for i in plan.inputs)
        users = list(n.users)
        flags_in[n] = _raises_fp(plan) or any(flags_in.get(i, False) for i in plan.inputs
                                               if i in inlined)
        bad = next((u for u in users if u not in plans or epoch[u] != epoch[n]
                    or not fits(n, u)), None)
        dropper = crossed = None
        if bad is None and flags_in[n]:
            dropper = next((u for u in users if not _keeps_operand(plans[u], n, risky)), None)
            crossed = next((u for u in users if segment[u] != segment[n]), None)
        if users and bad is None and rolled[n] and feeds_reduction[n]:
            materialized_why[n] = "a rolled value (np.roll) read by a reduction"
        elif (users and bad is None and not pure_roll[n]
              and any(plans[u].op == "roll" for u in users)):
            materialized_why[n] = ("read by np.roll (a roll of an expression would recompute "
                                   "it for every shift)")
        elif crossed is not None:
            materialized_why[n] = (f"may raise FP flags and {crossed.name} comes after "
                                   f"{cuts[segment[n]].name}, which may raise (stored before it)")
        elif users and bad is None and (dropper is None or not feeds_reduction[n]):
            # A value a user could let gcc skip is kept alive in a pointwise loop (the kernel
            # ORs its bits into a flag sink, `c_flags.forced_values`); a reduction's
            # element functions have no sink, so there it is stored instead.
            inlined.add(n)
        elif dropper is not None:
            materialized_why[n] = (f"may raise FP flags that {dropper.name} could skip "
                                   "(stored, so every element is computed, as in NumPy)")
        elif not users:
            materialized_why[n] = "no users"
        elif bad.op == "output":
            materialized_why[n] = "graph output"
        elif bad not in plans:
            materialized_why[n] = f"read by NumPy call {bad.name}"
        elif epoch[bad] != epoch[n]:
            materialized_why[n] = f"read by {bad.name} after a mutation"
        else:
            materialized_why[n] = f"read by {bad.name} over another shape {plans[bad].shape}"

    # Group roots into kernels.
    groups: list[dict[str, Any]] = []
    split_why: dict[Any, str] = {}

    def cyclic(g: dict[str, Any], leaves: set[Any]) -> bool:
        return any(l not in g["roots"] and anc[l] & g["mask"] for l in leaves)

    def row_readable(g: dict[str, Any], leaves: set[Any]) -> bool:
        # A reduction result can be read per row (RowRef) only if it broadcasts along the
        # reduced axes: keepdims=True, or a reduction over every axis.
        full = len(g["axes"]) == len(g["shape"])
        return all(plans[l].keepdims or full for l in leaves
                   if l in g["roots"] and plans[l].kind == "reduction")

    def outlived(g: dict[str, Any], n: Any) -> Any:
        # A large pointwise root whose every user comes before n in the program: the NumPy code
        # frees it before computing n; a shared kernel would hold both (and several large
        # outputs at once: nbody's three `d * inv_r3` for three `@ mass`), raising the peak
        # and the page faults of fresh blocks (docs/benchmarks.md).
        if heap_bytes(n) < PACE_MIN_BYTES:
            return None
        return next((r for r in g["roots"] if heap_bytes(r) >= PACE_MIN_BYTES and r.users
                     and all(pos[u] < pos[n] for u in r.users)), None)

    for n in nodes:
        plan = plans.get(n)
        if plan is None or n in inlined:
            continue
        leaves = _leaves(n, plans, inlined)
        chosen = None
        for g in reversed(groups):
            if not same_shape(g["shape"], plan.shape) or g["epoch"] != epoch[n]:
                continue
            if g["segment"] != segment[n]:
                if g["kind"] == plan.kind:
                    split_why[n] = (f"{cuts[segment[n] - 1].name} may raise between it and "
                                    f"{g['roots'][0].name}'s kernel")
                continue
            if plan.kind == "reduction":
                # Several reductions over the same rows share one row loop.
                ok = g["kind"] == "reduction" and g["axes"] == plan.axes
            elif g["kind"] == "reduction":
                # A pointwise epilogue: reads one of the row's reductions, axes trailing.
                ok = (g["trailing"] and not rolled.get(n, False)
                      and any(l in g["roots"] for l in leaves))
            elif rolled.get(n) and _rolled_leaves(n, plans, inlined) & set(g["roots"]):
                # A root read through a roll is another element than the one this iteration
                # computes: the reader needs the stored root (a later kernel).
                split_why[n] = (f"reads {g['roots'][0].name}'s kernel's output through np.roll "
                                "(other elements than the iteration computes)")
                continue
            else:
                ended = outlived(g, n)
                if ended is not None:
                    split_why[n] = (f"{ended.name} (large) is dead before it in the program: one "
                                    "kernel would keep both alive")
                    continue
                ok = True
            if not ok or not row_readable(g, leaves):
                continue
            if cyclic(g, leaves):
                split_why[n] = (f"reads a value computed from {g['roots'][0].name}'s kernel "
                                "outside it (fusing would make a cycle)")
                continue
            chosen = g
            break
        if chosen is None:
            nd = len(plan.shape)
            chosen = {"kind": plan.kind, "shape": plan.shape, "epoch": epoch[n],
                      "segment": segment[n], "roots": [],
                      "mask": 0, "axes": plan.axes,
                      "trailing": plan.axes == tuple(range(nd - len(plan.axes), nd))}
            groups.append(chosen)
        chosen["roots"].append(n)
        chosen["mask"] |= 1 << pos[n]

    kernels: list[Kernel] = []
    kernel_of: dict[Any, Kernel] = {}
    for gi, g in enumerate(groups):
        b = _Builder(plans, inlined)
        name = f"{prefix}{gi}"
        if g["kind"] == "pointwise":
            outs = [b.root(r) for r in g["roots"]]
            members = sorted(b.members, key=pos.__getitem__)
            k: Kernel = PointwiseKernel(name, g["shape"], b.operands, outs, list(g["roots"]),
                                        members)
        else:
            reductions: list[Reduction] = []
            epilogue: list[Any] = []
            values: list[Value] = []
            for r in g["roots"]:  # graph order: a phase only reads earlier phases
                p = plans[r]
                if p.kind == "reduction":
                    value = p.build(b.get)
                    b.members.add(r)
                    b.values[r] = RowRef(len(reductions), p.out_dtype)
                    reductions.append(Reduction(p.op, value, p.acc_dtype, p.out_dtype, r,
                                                p.keepdims))
                else:
                    values.append(b.root(r))
                    epilogue.append(r)
            members = sorted(b.members, key=pos.__getitem__)
            k = ReductionKernel(name, g["shape"], b.operands, g["axes"], reductions, values,
                                epilogue, members)
        kernels.append(k)
        for r in g["roots"]:
            kernel_of[r] = k

    schedule = _schedule(nodes, pos, epoch, kernels, kernel_of, plans, inlined, barriers)
    return FusionPlan(kernels, schedule, not_lowered, materialized_why, split_why,
                      sorted(inlined, key=pos.__getitem__), kernel_of)


def _schedule(nodes, pos, epoch, kernels, kernel_of, plans, inlined, barriers) -> list[Any]:
    """Kahn's algorithm over kernels + NumPy-call nodes, earliest graph position first."""
    items: list[Any] = [n for n in nodes if n.op in ("call_function", "call_method", "get_attr")
                        and n not in plans] + list(kernels)
    producer: dict[Any, Any] = {n: n for n in items if not isinstance(n, (PointwiseKernel,
                                                                          ReductionKernel))}
    for node, k in kernel_of.items():
        producer[node] = k
    key: dict[int, tuple[int, int]] = {}
    item_epoch: dict[int, int] = {}
    deps: dict[int, set[int]] = {}
    by_id = {id(i): i for i in items}
    for it in items:
        if isinstance(it, (PointwiseKernel, ReductionKernel)):
            reads = [od.node for od in it.operands]
            first = min(pos[r] for r in it.out_nodes)
            item_epoch[id(it)] = epoch[it.out_nodes[0]]
        else:
            reads = it.all_input_nodes
            first = pos[it]
            item_epoch[id(it)] = epoch[it]
        key[id(it)] = (first, id(it) % 1)
        deps[id(it)] = {id(producer[r]) for r in reads if r in producer} - {id(it)}
    for b in barriers:
        e = epoch[b]
        for it in items:
            if it is b:
                continue
            ie = item_epoch[id(it)]
            if ie == e:
                deps[id(b)].add(id(it))
            elif ie == e + 1:
                deps[id(it)].add(id(b))
    users: dict[int, list[int]] = {i: [] for i in deps}
    for i, ds in deps.items():
        for d in ds:
            users[d].append(i)
    remaining = {i: len(ds) for i, ds in deps.items()}
    ready = [(key[i], i) for i, c in remaining.items() if c == 0]
    heapq.heapify(ready)
    out: list[Any] = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(by_id[i])
        for u in users[i]:
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(ready, (key[u], u))
    if len(out) != len(items):
        raise RuntimeError("C backend: fusion produced a cyclic schedule (internal error)")
    return out
