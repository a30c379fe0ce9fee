"""Fast copies of innermost ``for`` loops: the iterations without the checks a test before them
proves, so that the C compiler can keep values in registers and vectorise.

In: the lowering (`lower._Lowering`) once it has emitted the loop nest. Out: for each innermost
``for i in range(...)`` loop, a second copy of its blocks (labels ending in ``F``) and, at the
loop's head, a ``fast`` statement: when the range's step is 1, it takes the next chunk of
iterations (at most `CHUNK`), tests once what the checks inside would test on every iteration,
and if all of that holds runs the chunk in the copy, then comes back to the loop's head (where
the save point, Ctrl-C and the IEEE flags are looked at, as after any iteration). When the test
fails the iterations run in the checked loop, one at a time, as they would without this.

What the test proves, for the chunk ``i`` in ``[n, end)``:

* *index arithmetic*: an int that is the loop's variable, or a local the loop never assigns,
  plus or minus literals (``i``, ``i - 1``, ``j + 2``, a row index ``k``) is affine in ``i``;
  its values over the chunk are the two ends, so one test covers every iteration: no int64
  overflow, and as an index, within ``0 .. shape - 1`` (no negative index to wrap, no
  IndexError) of an array the loop never assigns; an array indexed by the loop variable in its
  last axis is contiguous there (a constant stride, which the compiler vectorises; a strided
  view runs the checked loop);
* *counters*: a local the loop changes only by ``x += c`` (``c`` a literal >= 0) cannot pass
  int64 in ``end - n`` iterations when it starts low enough;
* *stores*: a proven element store is not logged one by one; the old values of every element
  it may write in the chunk are logged before the chunk starts (a deoptimisation puts them
  back as it does the others), and the array is writeable.

Everything else in the copy is as in the checked loop (a division's zero test, a float's
IEEE flags, an index the test cannot prove): those keep their checks, which deoptimise as
usual, to the last save point. The copy has neither save point nor poll: the chunk is short,
and the loop's head polls (and, for the outermost loop, saves) right after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..bytecode_analysis import code_info
from . import batches, inline
from .ir import ArrTy, Stmt, Ty
from .scalars import Refuse, SVal, combine_tags
from .values import IterV, State

__all__ = ["CHUNK", "FastLoop", "candidates", "emit_copies", "note_load", "binary", "offset",
           "store", "for_iter", "mark", "label", "same_exit"]

#: iterations per chunk: short enough for Ctrl-C (the head polls after each), long enough
#: that the test before it costs nothing
CHUNK = 16384
_LITERAL = re.compile(r"^-?\d+LL$")
_TEMP = re.compile(r"t\d+")
_MAX_OFFSET = 1 << 40
_STORES = ("STORE_FAST", "DELETE_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
           "LOAD_FAST_AND_CLEAR")


@dataclass
class FastLoop:
    """An innermost ``for`` loop with a fast copy (see the module docstring)."""

    header: int
    back: int
    induction: str
    #: locals the loop assigns (the others keep their values while it runs)
    stored: frozenset
    #: counter local -> the most it grows by in one iteration
    counters: dict
    outermost: bool
    #: the iterator's C expressions at the checked loop's head, and the placeholder there
    entry: IterV | None = None
    placeholder: Stmt | None = None
    prechecks: dict = field(default_factory=dict)
    prelogs: dict = field(default_factory=dict)
    #: the inlined frames its body calls (`inline`: loop-free; their blocks are in the copy)
    frames: frozenset = frozenset()

    def holds(self, pos: int) -> bool:
        """Is the block at `pos` one of the loop's (its own, or an inlined call's)?"""
        return self.header <= pos <= self.back or pos >> inline.SHIFT in self.frames

    @property
    def n(self) -> str:
        return f"F{self.header}n"

    @property
    def end(self) -> str:
        return f"F{self.header}end"

    def span(self, base: str, c: int, lo: str, hi: str) -> None:
        """Test before the chunk: `base` + `c` stays within [lo, hi] over the chunk."""
        a, b = (self.n, f"{self.end} - 1") if base == self.induction else (f"L_{base}",) * 2
        self.prechecks[f"npd_span({a}, {b}, {c}LL, {lo}, {hi})"] = None

    def index(self, base: str, c: int) -> str:
        """The C value of `base` + `c` in the chunk's first iteration (for the undo log)."""
        return f"({self.n} + {c}LL)" if base == self.induction else f"(L_{base} + {c}LL)"


def _stored(instr) -> list[str]:
    if instr.name not in _STORES:
        return []
    return list(instr.arg) if isinstance(instr.arg, tuple) else [instr.arg]


def candidates(lw) -> dict[int, FastLoop]:
    """The innermost range loops of the nest that get a fast copy: header -> `FastLoop`."""
    info = code_info(lw.code)
    instrs = info.instructions
    found = {}
    own = len(instrs)  # (positions past it are inlined calls' instructions: `inline`)
    for h in sorted(lw.headers):
        if h >= own or instrs[h].name != "FOR_ITER":
            continue
        back = max(i for i in lw.region if i < own and instrs[i].has_jump()
                   and info.target(i) == h and i >= h)
        if any(other != h and h < other <= back for other in lw.headers):
            continue  # (not innermost)
        frames = _frames_called(lw, h, back)
        if frames is None:
            continue  # (an inlined call with a loop of its own: not innermost)
        first = _stored(instrs[h + 1])
        if len(first) != 1 or instrs[h + 1].name != "STORE_FAST":
            continue
        stored: list[str] = []
        for i in range(h + 1, back + 1):
            stored += _stored(instrs[i])
        induction = first[0]
        if stored.count(induction) != 1:
            continue
        for frame in frames:  # (a callee's locals change at every call)
            stored += [*frame.params, *frame.others]
        found[h] = FastLoop(h, back, induction, frozenset(stored), _counters(instrs, h, back),
                            outermost=h == lw.header,
                            frames=frozenset(f.number for f in frames))
    return found


def _frames_called(lw, h: int, back: int) -> list | None:
    """The inlined frames the loop's body calls, theirs and so on; None when one of them has
    a loop (then the loop is not innermost)."""
    frames = lw.instrs.frames
    found = [f for pos, f in frames.items() if h < pos <= back and not pos >> inline.SHIFT]
    k = 0
    while k < len(found):
        frame = found[k]
        if any(pos >> inline.SHIFT == frame.number for pos in lw.headers):
            return None
        found += [f for pos, f in frames.items() if pos >> inline.SHIFT == frame.number]
        k += 1
    return found


def _counters(instrs, h: int, back: int) -> dict[str, int]:
    """Locals whose every store in the loop is ``x = x + c`` / ``x += c`` (c a small literal
    >= 0): name -> the sum of the c (the most it grows by per iteration)."""
    grow: dict[str, int] = {}
    other: set[str] = set()
    for i in range(h + 1, back + 1):
        for name in _stored(instrs[i]):
            a, b, op = instrs[i - 3], instrs[i - 2], instrs[i - 1]
            ok = (instrs[i].name == "STORE_FAST" and a.name == "LOAD_FAST" and a.arg == name
                  and b.name == "LOAD_CONST" and type(b.arg) is int and 0 <= b.arg < 1 << 31
                  and (op.name in ("INPLACE_ADD", "BINARY_ADD") or op.name == "BINARY_OP"
                       and getattr(op.arg, "name", "").replace("INPLACE_", "") == "ADD"))
            if ok:
                grow[name] = grow.get(name, 0) + b.arg
            else:
                other.add(name)
    return {n: g for n, g in grow.items() if n not in other}


# -- hooks the lowering calls while it emits a fast copy -------------------------------------
def note_load(lw, name: str, c: str, ty) -> None:
    """A local read into C variable `c`: what the copy knows of its value."""
    loop = lw.fast
    if isinstance(ty, ArrTy):
        if name not in loop.stored:
            lw.arr_local[c] = name
    elif ty.fam == "int":
        if name == loop.induction or name not in loop.stored:
            lw.lin[c] = (name, 0)
        elif name in loop.counters:
            lw.counter[c] = name


def _literal(v: SVal) -> int | None:
    if v.ty.fam == "int" and _LITERAL.match(v.c):
        return int(v.c[:-2])
    return None


def binary(lw, op: str, a: SVal, b: SVal) -> SVal | None:
    """``a + b`` / ``a - b`` of ints whose overflow the test before the chunk excludes, or None
    (then the checked rule applies)."""
    loop = lw.fast
    if op not in ("+", "-") or a.ty.fam != "int" or b.ty.fam != "int":
        return None
    la, lb = _literal(a), _literal(b)
    if a.c in lw.lin and lb is not None:
        base, c = lw.lin[a.c]
        c = c + lb if op == "+" else c - lb
    elif op == "+" and b.c in lw.lin and la is not None:
        base, c = lw.lin[b.c]
        c = c + la
    elif op == "+" and (a.c in lw.counter and lb is not None and 0 <= lb < 1 << 31
                        or b.c in lw.counter and la is not None and 0 <= la < 1 << 31):
        name, lit = (lw.counter[a.c], lb) if a.c in lw.counter else (lw.counter[b.c], la)
        loop.prechecks[f"(L_{name} <= LLONG_MAX - {lit}LL - {loop.counters[name]}LL * "
                       f"({loop.end} - {loop.n}))"] = None
        return _int(lw, op, a, b)
    else:
        return None
    if abs(c) > _MAX_OFFSET:
        return None
    loop.span(base, c, "LLONG_MIN", "LLONG_MAX")
    r = _int(lw, op, a, b)
    lw.lin[r.c] = (base, c)
    return r


def _int(lw, op: str, a: SVal, b: SVal) -> SVal:
    tag = combine_tags(a, b)
    r = lw.temp("long long")
    lw.assign(r, f"({a.c} {op} {b.c})")
    if tag[0] == "rt":
        tr = lw.temp("int")
        lw.assign(tr, tag[1])
        return SVal(Ty("int", "rt"), r, tr)
    return SVal(Ty("int", tag[0]), r)


def offset(lw, arr, items) -> str | None:
    """The byte offset of element `items` of `arr` when the test before the chunk proves every
    index within the array (then `lw.proven` says which elements, for a store), else None."""
    loop = lw.fast
    name = lw.arr_local.get(arr.c)
    lw.proven = None
    if name is None or len(items) != arr.ty.ndim or not all(
            isinstance(x, SVal) and x.c in lw.lin for x in items):
        return None
    parts, dims = [], []
    for k, item in enumerate(items):
        base, c = lw.lin[item.c]
        loop.span(base, c, "0", f"L_{name}.shape[{k}] - 1")
        if base == loop.induction and k == arr.ty.ndim - 1:
            # (along the loop, in the last axis: contiguous, a constant stride the compiler
            # can vectorise; a strided view runs the checked loop)
            size = arr.ty.dtype.itemsize
            loop.prechecks[f"(L_{name}.strides[{k}] == {size})"] = None
            parts.append(f"{item.c} * {size}LL")
        else:
            parts.append(f"{item.c} * {arr.c}.strides[{k}]")
        dims.append((base, c))
    lw.proven = (name, tuple(dims))
    return " + ".join(parts) or "0"


def store(lw, arr, off: str, value: tuple) -> None:
    """An element store in the copy: unlogged where proven (its elements are logged before the
    chunk), else the checked store."""
    if lw.proven is None:
        lw.emit("store", arr.c, off, value)
        return
    name, dims = lw.proven
    loop = lw.fast
    loop.prechecks[f"L_{name}.writeable"] = None
    loop.prelogs[(name, *((loop.index(b, c), b == loop.induction) for b, c in dims))] = None
    lw.emit("put", arr.c, off, value)


def for_iter(lw, i: int, st: list, state: State):
    """The copy's loop head: the chunk's next iteration, or back to the checked head."""
    it = st.pop()
    if not isinstance(it, IterV):
        raise Refuse("FOR_ITER over something other than a range iterator")
    loop = lw.fast
    lw.emit("branch", f"({it.n} >= {loop.end})", f"L{i}_doneF", f"L{i}_bodyF")
    lw.emit("label", f"L{i}_doneF")
    lw.fast = None  # (to the checked head, its own label)
    lw.edge(i, State(list(st) + [it], dict(state.locals)))
    lw.fast = loop
    lw.emit("label", f"L{i}_bodyF")
    item, nxt = lw.temp("long long"), lw.temp("long long")
    lw.assign(item, it.n)
    lw.assign(nxt, f"{it.n} + 1")  # (n < end <= stop: no overflow)
    body = State(list(st) + [IterV(nxt, it.stop, it.step), SVal(Ty("int"), item)],
                 dict(state.locals))
    lw.edge(i + 1, body)
    return []


def mark(lw, i: int, it: IterV) -> None:
    """At the checked loop's head (before its range test): where the fast statement goes."""
    loop = lw.fast_loops[i]
    loop.entry = it
    loop.placeholder = Stmt("fast", (i,), lw.line)
    lw.stmts.append(loop.placeholder)


def emit_copies(lw) -> None:
    """After the checked nest: each candidate loop's copy, and its fast statement (or none,
    when the copy refuses something)."""
    for h, loop in lw.fast_loops.items():
        if loop.placeholder is None:
            continue
        at = lw.stmts.index(loop.placeholder)
        mark_at, temps = len(lw.stmts), dict(lw.temps)
        lw.fast, lw.lin, lw.arr_local, lw.counter = loop, {}, {}, {}
        try:
            for start in sorted(lw.entries):
                if loop.holds(start):
                    lw.exit_seq = list(lw.block_exits.get(start, ()))
                    lw.interpret(start, lw.entries[start].copy())
        except Refuse:
            del lw.stmts[mark_at:]
            lw.temps = temps
            del lw.stmts[at]
            continue
        finally:
            lw.fast = None
        for var in (loop.n, loop.end):
            lw.declare(var, "long long")
        # (an index test of a value also tests that it does not overflow)
        tests = [t for t in loop.prechecks if not (
            t.endswith(", LLONG_MIN, LLONG_MAX)") and any(
                u.startswith(t[:-len("LLONG_MIN, LLONG_MAX)")] + "0, ") for u in loop.prechecks))]
        it = loop.entry
        # (a copy without loops of its own, from array statements, does little per iteration:
        # its chunks count for 1/16 of their iterations towards the next poll)
        light = not any(s.kind == "branch" and s.args[1].startswith("E")
                        for s in lw.stmts[mark_at:])
        found = batches.find(lw, loop, mark_at, lw.batched)
        lw.batched += len(found)
        lw.stmts[at] = Stmt("fast", (f"L{h}F", it.n, it.stop, it.step, loop.n, loop.end,
                                     tuple(tests), tuple(loop.prelogs),
                                     loop.outermost, CHUNK, light, tuple(found)),
                            loop.placeholder.line)


def same_exit(lw, checked, ex) -> None:
    """A way out of a fast copy is its checked block's: a returned value goes where that one
    returns it from."""
    for mine, theirs in ((ex.value, checked.value), (ex.value_tag, checked.value_tag)):
        if mine == theirs:
            continue
        if theirs is None or mine is None or not _TEMP.fullmatch(theirs):
            raise Refuse("internal: a fast copy returns another value")
        lw.assign(theirs, mine)


def label(lw, target: int) -> str:
    """A block's label: in a fast copy, the copy's blocks end in ``F``."""
    loop = lw.fast
    if loop is not None and loop.holds(target):
        return f"{inline.label(target)}F"
    return inline.label(target)

