"""NumPy ufunc calls of a fast copy, a chunk at a time: ``trace += np.tanh(a[i, i])`` calls
NumPy's tanh loop once for the chunk's arguments instead of once per iteration.

In: a fast copy just emitted (`fast.emit_copies`: its statements, its loop). Out: the batches
its ``fast`` statement runs before the chunk: for each ufunc call whose argument the copy
computes from the loop variable, locals the loop never assigns, array elements at proven
indices and arithmetic alone, the statements that compute the argument (renamed, with the loop
variable as ``npd_ii``) and the ufunc's table entry; the call in the copy then reads its result
from the batch's buffer (``npd_ubK[i - n]``).

Why it is exact: NumPy's float64 loops compute each element alone (a tail with masked
vectors, no other path for short arrays), so an element's bits do not depend on how many are
computed at once; the arguments are the ones the iterations would compute, as the copy stores
nothing (a batch is only made then: every element the arguments read is the same before the
chunk as during it), and its indices are proven in range. A batch may compute arguments of
iterations the chunk does not reach (a ``break``, a ``return``, a deoptimisation, a call in one
branch of an ``if``): their results go unused, and their IEEE flags at worst make the kernel
deoptimise to the save point before the chunk, from where Python runs the same iterations.
"""

from __future__ import annotations

import re

__all__ = ["find", "MAX_BATCHES"]

#: batched call sites per kernel (each has a buffer of one chunk of doubles)
MAX_BATCHES = 4
_TEMP = re.compile(r"\bt\d+\b")
_LITERALS = re.compile(r"0x[0-9a-fA-F.]+p[+-]?\d+|\b\d+LL\b|\b\d+\b")
_WORDS = re.compile(r"[A-Za-z_]\w*")
_CALL = re.compile(r"^npd_keep\(npd_ufunc1\((\d+), (t\d+)\)\)$")
#: words an argument's statements may hold besides temporaries and locals
_ALLOWED = frozenset({"npd_keep", "double", "long", "data", "strides", "shape"})


def find(lw, loop, first: int, taken: int) -> list[tuple]:
    """The batches of the copy whose statements start at ``lw.stmts[first]`` (`taken`: sites
    batched in this kernel so far); rewrites each batched call to read its buffer."""
    copy = lw.stmts[first:]
    if any(s.kind in ("store", "put", "logview") for s in copy):
        return []
    defs = {s.args[0]: s.args[1] for s in copy
            if s.kind == "assign" and _TEMP.fullmatch(s.args[0])}
    checked = set()
    for s in copy:
        if s.kind == "check":
            checked.update(_TEMP.findall(s.args[0]))
    found = []
    for offset, s in enumerate(copy):
        call = _CALL.match(s.args[1]) if s.kind == "assign" else None
        if call is None or taken + len(found) >= MAX_BATCHES:
            continue
        k, arg = int(call.group(1)), call.group(2)
        chain = _slice(arg, defs, checked, loop)
        if chain is None:
            continue
        site = taken + len(found)
        rename = {t: f"{t}b{site}" for t in chain}

        def renamed(expr: str) -> str:
            expr = _TEMP.sub(lambda m: rename.get(m.group(0), m.group(0)), expr)
            return re.sub(rf"\bL_{loop.induction}\b", "npd_ii", expr)
        body = tuple((lw.temps[t], rename[t], renamed(defs[t])) for t in chain)
        found.append((k, site, body, rename[arg]))
        lw.stmts[first + offset] = type(s)(
            "assign", (s.args[0], f"npd_ub{site}[L_{loop.induction} - {loop.n}]"), s.line)
    return found


def _slice(arg: str, defs: dict, checked: set, loop) -> list[str] | None:
    """The temporaries `arg` is computed from, in the order the copy computes them, or None
    when one of them is not a plain function of the loop variable and unassigned locals."""
    need, seen = [arg], set()
    while need:
        t = need.pop()
        if t in seen:
            continue
        if t not in defs or t in checked:
            return None
        seen.add(t)
        expr = defs[t]
        for word in _WORDS.findall(_LITERALS.sub(" ", expr)):
            if _TEMP.fullmatch(word):
                need.append(word)
            elif word.startswith("L_"):
                name = word[2:]
                if name != loop.induction and name in loop.stored:
                    return None
            elif word not in _ALLOWED:
                return None
    return sorted(seen, key=lambda t: list(defs).index(t))
