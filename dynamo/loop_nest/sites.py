"""Where a loop kernel starts and what it runs: the loop (or ``if`` statement) at an entry of a
code object, and the instructions of its region.

In: a code object and an instruction index. Out: a `LoopSite` (`loop_at`: a ``for`` loop entered
at its GET_ITER or at the statement that makes its range, a ``while`` loop at its header;
`if_at`: an ``if`` statement, its condition first), the instructions a kernel for it runs
(`region`), and where the straight-line code that computes a loop's range or a statement's
condition starts (`range_statement`, `value_start`). Used by the lowering (`lower`), the
planner (`dynamo.loop_kernels`) and `dynamo.compile_frame`.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from .. import compat
from ..bytecode_analysis import code_info

__all__ = ["if_at", "loop_at", "LoopSite", "range_statement", "region", "site_at", "value_start"]


@dataclass(frozen=True)
class LoopSite:
    """Where a loop kernel starts: `entry`, and the loop's GET_ITER (None for a ``while``
    loop), header (its FOR_ITER, or the target of its backward jumps) and last backward jump.
    A ``for`` loop is entered at its GET_ITER (the range is on the stack: `takes_range`) or at
    the start of the statement that makes the range (the kernel computes it: no guard on the
    sizes it reads)."""

    entry: int
    get_iter: int | None
    header: int
    back: int
    #: "loop", or "if": an ``if`` statement of the frame (`if_at`), whose kernel runs the
    #: condition and the branch taken once (its "header" is its entry, `back` its last
    #: instruction; a deoptimisation runs the whole statement again in Python)
    kind: str = "loop"

    @property
    def iterates(self) -> bool:
        return self.get_iter is not None

    @property
    def takes_range(self) -> bool:
        return self.get_iter == self.entry


def loop_at(code: types.CodeType, entry: int) -> LoopSite | None:
    """The loop a kernel entered at instruction `entry` would run, or None."""
    info = code_info(code)
    instrs = info.instructions
    get_iter = None
    if instrs[entry].name == "GET_ITER":
        get_iter = entry
    elif not _backward_target(info, entry):
        get_iter = _range_made_from(info, entry)
        if get_iter is None:
            return None
    if get_iter is not None:
        header = get_iter + 1
        if header >= len(instrs) or instrs[header].name != "FOR_ITER":
            return None
    else:
        header = entry
    back = None
    for i in range(header, len(instrs)):
        if instrs[i].has_jump() and info.target(i) == header:
            back = i
    if back is None:
        return None
    return LoopSite(entry, get_iter, header, back)


def if_at(code: types.CodeType, entry: int) -> LoopSite | None:
    """The ``if`` statement (``if``/``elif``/``else``) starting at instruction `entry`, or None:
    straight-line code from an empty stack computes the condition (``and`` chains too) and a
    conditional jump forward takes it; the statement spans every instruction up to where all
    the forward jumps from inside it land (the end of its last branch)."""
    info = code_info(code)
    instrs = info.instructions
    targets = set(info.labels.values())
    depth, jump = 0, None
    for k in range(entry, min(entry + 64, len(instrs))):
        inst = instrs[k]
        if k != entry and k in targets:
            return None
        if inst.has_jump():
            if not inst.name.startswith("POP_JUMP") or depth != 1 or info.target(k) <= k:
                return None
            jump = k
            break
        if inst.name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"):
            return None
        depth += inst.stack_effect(jump=False)
        if depth < 0:
            return None
    if jump is None:
        return None
    last = info.target(jump) - 1
    while True:
        ends = [info.target(k) - 1 for k in range(entry, last + 1)
                if instrs[k].has_jump() and info.target(k) > k]
        if max(ends, default=last) <= last:
            break
        last = max(ends)
    if any(instrs[k].has_jump() and info.target(k) < entry for k in range(entry, last + 1)):
        return None
    return LoopSite(entry, None, entry, last, "if")


def site_at(code: types.CodeType, entry: int) -> LoopSite | None:
    """The loop (`loop_at`) or else the ``if`` statement (`if_at`) a kernel entered at `entry`
    would run, or None."""
    return loop_at(code, entry) or if_at(code, entry)


def region(code: types.CodeType, site: LoopSite) -> frozenset[int]:
    """The instructions a kernel for `site` runs: everything reached from its entry until the
    flow comes out of the loop's span (`entry` .. last backward jump) with an empty stack (an
    exit). A block the compiler placed after the loop but still holding the loop's iterator
    (3.12's copy of a ``return`` after ``break``) is inside."""
    info = code_info(code)
    instrs = info.instructions
    skip = compat.loop_exit_skip()
    seen: dict[int, int] = {}
    work = [(site.entry, 1 if site.takes_range else 0)]
    while work:
        i, depth = work.pop()
        if i in seen or i >= len(instrs):
            continue
        if not site.entry <= i <= site.back and depth == 0:
            continue  # (an exit)
        seen[i] = depth
        inst = instrs[i]
        if inst.name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"):
            continue
        if inst.name == "FOR_ITER":
            work.append((i + 1, depth + 1))
            work.append((info.target(i) + skip, depth - 1))
            continue
        if inst.has_jump():
            work.append((info.target(i), depth + inst.stack_effect(jump=True)))
            if inst.is_uncond_jump():
                continue
        work.append((i + 1, depth + inst.stack_effect(jump=False)))
    return frozenset(seen)


def _backward_target(info, index: int) -> bool:
    return any(inst.has_jump() and info.target(i) == index
               for i, inst in enumerate(info.instructions) if i >= index)


def _range_made_from(info, start: int) -> int | None:
    """The GET_ITER of a ``for`` loop whose iterable the instructions from `start` compute
    (straight-line, from an empty stack to the one value), or None."""
    targets = set(info.labels.values())
    depth = 0
    instrs = info.instructions
    for k in range(start, min(start + 64, len(instrs))):
        inst = instrs[k]
        if k != start and k in targets:
            return None
        if inst.name == "GET_ITER":
            ok = depth == 1 and k + 1 < len(instrs) and instrs[k + 1].name == "FOR_ITER"
            return k if ok else None
        if inst.has_jump() or inst.name in ("RETURN_VALUE", "RETURN_CONST"):
            return None
        depth += inst.stack_effect(jump=False)
        if depth < 0:
            return None
    return None


def range_statement(info, get_iter: int) -> int | None:
    """The start of the statement that computes the range a GET_ITER iterates (where the
    stack is empty), or None."""
    k = value_start(info, get_iter)
    return k if k is not None and _range_made_from(info, k) == get_iter else None


def value_start(info, index: int) -> int | None:
    """The start of the straight-line code (from an empty stack) that computes the one value
    instruction `index` takes: a ``for`` loop's range (its GET_ITER), an ``if`` statement's
    condition (its conditional jump); or None."""
    need = 1
    targets = set(info.labels.values())
    for k in range(index - 1, max(-1, index - 64), -1):
        inst = info.instructions[k]
        if inst.has_jump() or inst.name in ("RETURN_VALUE", "RETURN_CONST"):
            return None
        need -= inst.stack_effect(jump=False)
        if need == 0:
            return k
        if k in targets or need < 0:
            return None
    return None
