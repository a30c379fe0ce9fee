"""Stack values across the blocks of a loop nest: the `Slots` half of the lowering.

In: a value on the interpreter's stack at a jump (`values`: a scalar, an array, a range or
its iterator, an iterator over arrays, a tuple of these) and its depth. Out: its *slot*, the
C variables that hold it between blocks (``S3f`` a float at depth 3, ``S0n``/``S0stop``/
``S0step`` a range iterator, ``S1a0`` an iterator's first array, ``S2_1f`` item 1 of a tuple),
the assignments into them at the jump (`to_slot`) and the copies out of them where the
target block starts (`enter`, `from_slot`); and the instructions that only move values on the
stack (`stack_op`). Mixed into `lower._Lowering`.
"""

from __future__ import annotations

from typing import Any

from .ir import CTYPE
from .scalars import Refuse, SVal
from .values import AVal, ItemIterV, IterV, RangeV, State, TupleV

__all__ = ["Slots"]


class Slots:
    """Slot variables of `lower._Lowering` (see the module docstring)."""

    def enter(self, start: int, state: State) -> State:
        """At a block's start (emitting): the stack from the slot variables, copied."""
        stack = []
        for k, v in enumerate(state.stack):
            stack.append(self.from_slot(k, v))
        return State(stack, state.locals)

    def slot(self, k: int, v) -> Any:
        if isinstance(v, SVal):
            # (one C variable per slot and family: a slot holds an int in one block, a
            # float in another)
            return SVal(v.ty, f"S{k}{v.ty.fam[0]}", f"S{k}t" if v.ty.tag == "rt" else None)
        if isinstance(v, AVal):
            return AVal(v.ty, f"S{k}a")
        if isinstance(v, IterV):
            return IterV(f"S{k}n", f"S{k}stop", f"S{k}step")
        if isinstance(v, TupleV):
            return TupleV(tuple(self.slot(f"{k}_{j}", x) for j, x in enumerate(v.items)))
        if isinstance(v, ItemIterV):
            return ItemIterV(f"S{k}n", tuple(AVal(a.ty, f"S{k}a{j}") for j, a in
                                             enumerate(v.arrs)), v.enum, v.zipped, v.start)
        if isinstance(v, RangeV):
            return RangeV(f"S{k}rn", f"S{k}rstop", f"S{k}rstep")
        return v

    def from_slot(self, k, v):
        if isinstance(v, TupleV):
            return TupleV(tuple(self.from_slot(f"{k}_{j}", x) for j, x in enumerate(v.items)))
        s = self.slot(k, v)
        if isinstance(s, SVal):
            t = self.temp(CTYPE[s.ty.fam])
            self.declare(s.c, CTYPE[s.ty.fam])
            self.assign(t, s.c)
            tt = None
            if s.tagx:
                tt = self.temp("int")
                self.declare(s.tagx, "int")
                self.assign(tt, s.tagx)
            return SVal(s.ty, t, tt)
        if isinstance(s, AVal):
            self.declare(s.c, "npd_arr")
            t = self.temp("npd_arr")
            self.assign(t, s.c)
            return AVal(s.ty, t)
        if isinstance(s, ItemIterV):
            n = self.temp("long long")
            self.declare(s.n, "long long")
            self.assign(n, s.n)
            arrs = []
            for a in s.arrs:
                self.declare(a.c, "npd_arr")
                arrs.append(AVal(a.ty, self.temp("npd_arr")))
                self.assign(arrs[-1].c, a.c)
            return ItemIterV(n, tuple(arrs), s.enum, s.zipped, s.start)
        if isinstance(s, (IterV, RangeV)):
            parts = []
            for c in (s.n, s.stop, s.step):
                self.declare(c, "long long")
                t = self.temp("long long")
                self.assign(t, c)
                parts.append(t)
            return type(s)(*parts)
        return s

    def declare(self, name: str, ctype: str) -> None:
        old = self.temps.setdefault(name, ctype)
        if old != ctype:  # (a C variable of one type holding another would convert silently)
            raise Refuse(f"internal: the C variable {name} would hold a {old} and a {ctype}")

    def to_slot(self, k, v) -> None:
        """A stack value into the slot variables of position `k` (a tuple item by item)."""
        s = self.slot(k, v)
        if isinstance(s, TupleV):
            for j, x in enumerate(v.items):
                self.to_slot(f"{k}_{j}", x)
        elif isinstance(s, SVal):
            self.declare(s.c, CTYPE[s.ty.fam])
            self.assign(s.c, v.c)
            # (its tag too, whatever this edge's value is: where paths join, a Python float on
            # one and a NumPy float64 on another make the slot's tag a run-time one, read from
            # this variable; an edge that left it unwritten gave the value the other's type)
            self.declare(f"S{k}t", "int")
            self.assign(f"S{k}t", v.tag_c)
        elif isinstance(s, AVal):
            self.declare(s.c, "npd_arr")
            self.assign(s.c, v.c)
        elif isinstance(s, ItemIterV):
            for dst, src in [(s.n, v.n)] + [(a.c, b.c) for a, b in zip(s.arrs, v.arrs)]:
                self.declare(dst, "npd_arr" if dst != s.n else "long long")
                self.assign(dst, src)
        elif isinstance(s, (IterV, RangeV)):
            for dst, src in zip((s.n, s.stop, s.step), (v.n, v.stop, v.step)):
                self.declare(dst, "long long")
                self.assign(dst, src)

    def stack_op(self, inst, st: list) -> None:
        name = inst.name
        if name == "NOP":
            return
        if name == "POP_TOP":
            st.pop()
        elif name == "COPY":
            st.append(st[-inst.arg])
        elif name == "SWAP":
            st[-1], st[-inst.arg] = st[-inst.arg], st[-1]
        elif name == "DUP_TOP":
            st.append(st[-1])
        elif name == "DUP_TOP_TWO":
            st.extend(st[-2:])
        elif name == "ROT_TWO":
            st[-1], st[-2] = st[-2], st[-1]
        elif name == "ROT_THREE":
            st[-3:] = [st[-1], st[-3], st[-2]]
        elif name == "ROT_FOUR":
            st[-4:] = [st[-1], st[-4], st[-3], st[-2]]
