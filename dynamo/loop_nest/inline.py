"""Calls of Python functions inside a loop kernel, inlined: ``out[i] = clip(a[i], lo, hi)``
with ``def clip(v, lo, hi): ...`` in the same module runs the body of ``clip`` in the kernel.

In: the lowering (`lower._Lowering`) at a call of a plain Python function it knows when
compiling (a global of the frame's module, guarded like any global the loop reads), and the
arguments' abstract values. Out: the edges of the call: the callee's body is interpreted as
more blocks of the same nest, at *positions* of its own (frame ``s``'s instruction ``j`` is
position ``s << SHIFT | j``; the loop's own code is frame 0), and each ``return`` of the
callee goes on, with the returned value on the stack, right after the call.

Each call site is a frame of its own (its own labels, its own C variables): the callee's
locals are C variables ``L_npd<s>_<name>``, never a local of the user's frame, so a kernel
does not give them back to Python. A callee's parameters are bound from the arguments; its
other locals start unbound at every call (a read before a store deoptimises: Python raises
UnboundLocalError there). Nothing else of the call needs to be rebuilt on a deoptimisation: a
kernel deoptimises to its last save point, at the head of the outermost loop, outside every
call, and the iteration runs again in Python, calls included.

What is inlined: a function whose ``__globals__`` are the loop's module (its own globals are
then guarded as the loop's), called with positional and keyword arguments (the parameters left
out have defaults that are numbers: constants of the kernel, guarded on their values), with no
closure, no ``*args``/``**kwargs``, no keyword-only parameters, no try/with, no generator,
not recursive, at most `MAX_DEPTH` calls deep; its body is lowered by the same rules as the loop
(anything else in it refuses the loop, naming the construct). An innermost loop's fast copy
(`fast`) holds copies of the blocks of the loop-free functions its body calls; a loop that
calls a function with a loop of its own is not innermost, and loops inside inlined functions
run checked.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from .. import compat
from ..bytecode_analysis import code_info
from .scalars import Refuse, constant
from .values import State, Static, TupleV

__all__ = ["SHIFT", "MAX_DEPTH", "PREFIX", "Frame", "Positions", "inlinable", "enter", "leave",
           "is_callee_local", "returned_constant", "label"]

#: positions of frame s start at s << SHIFT
SHIFT = 20
MAX_DEPTH = 4
#: the callee's locals are named PREFIX<s>_<name>
PREFIX = "npd"
_LOCAL_OPS = ("LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_LOAD_FAST",
              "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_FAST_AND_CLEAR")
_NOT_INLINED = 0x20 | 0x80 | 0x100 | 0x200 | 0x04 | 0x08  # generator, coroutine, *args, **kw


@dataclass
class Frame:
    """One inlined call site: the callee's code, its instructions with the locals renamed,
    where its returns go on (`ret`, a position of the calling frame) and the codes of the
    frames it is inside (no recursion)."""

    number: int
    fn: types.FunctionType
    instrs: list
    info: object
    ret: int
    chain: tuple
    params: tuple
    others: tuple
    #: the indices in ``fn.__defaults__`` of the defaults the call takes
    defaults: tuple = ()
    #: the names of the call's keyword arguments (its last arguments)
    kw: tuple = ()

    @property
    def base(self) -> int:
        return self.number << SHIFT


class Positions:
    """The instructions of the loop's code and of every inlined frame, by position."""

    def __init__(self, info) -> None:
        self.infos = [info]
        self.lists = [info.instructions]
        self.frames: dict[int, Frame] = {}  # call position -> its frame

    def __getitem__(self, pos: int):
        return self.lists[pos >> SHIFT][pos & ((1 << SHIFT) - 1)]

    def target(self, pos: int) -> int:
        frame = pos >> SHIFT
        return (frame << SHIFT) + self.infos[frame].target(pos & ((1 << SHIFT) - 1))

    def frame_of(self, pos: int) -> Frame | None:
        number = pos >> SHIFT
        for frame in self.frames.values():
            if frame.number == number:
                return frame
        return None


def inlinable(lw, fn) -> bool:
    """A plain Python function of the loop's own module (others are `calls.call`'s)."""
    return isinstance(fn, types.FunctionType) and fn.__globals__ is lw.globals_dict


def is_callee_local(name: str) -> bool:
    head, _, _ = name.partition("_")
    return head.startswith(PREFIX) and head[len(PREFIX):].isdigit()


def _rename(instr, names: dict[str, str]):
    if instr.name not in _LOCAL_OPS or isinstance(instr.arg, int):
        return instr
    copy = instr.copy()
    arg = instr.arg
    copy.arg = tuple(names[n] for n in arg) if isinstance(arg, tuple) else names[arg]
    return copy


def _frame(lw, pos: int, fn: types.FunctionType, nargs: int, kw: tuple) -> Frame:
    """The frame of the call at `pos` (made the first time the lowering gets there)."""
    where = lw.instrs
    frame = where.frames.get(pos)
    if frame is not None:
        if frame.fn is not fn:
            raise Refuse("a call site that calls two different functions")
        return frame
    code = fn.__code__
    name = fn.__qualname__
    if any(is_callee_local(n) for n in lw.code.co_varnames):
        raise Refuse("a local of the loop's function is named like an inlined call's (npd<k>_)")
    outer = where.frame_of(pos)
    chain = (outer.chain if outer else (lw.code,))
    if code in chain:
        raise Refuse(f"a recursive call of {name}()")
    if len(chain) > MAX_DEPTH:
        raise Refuse(f"calls inlined more than {MAX_DEPTH} deep")
    if (code.co_flags & _NOT_INLINED or code.co_freevars or code.co_cellvars
            or code.co_kwonlyargcount or code.co_posonlyargcount > code.co_argcount):
        raise Refuse(f"{name}() has a closure, *args, **kwargs, keyword-only parameters or "
                     "is a generator (not inlined)")
    defaults = fn.__defaults__ or ()
    params = code.co_varnames[:code.co_argcount]
    positional = nargs - len(kw)
    if (positional > len(params) or len(set(kw)) != len(kw)
            or any(k not in params[max(positional, code.co_posonlyargcount):] for k in kw)):
        raise Refuse(f"{name}() called with arguments that do not match its parameters")
    taken = []  # (the indices in __defaults__ of the parameters the call leaves out)
    for j in range(positional, len(params)):
        k = j - (len(params) - len(defaults))
        if params[j] in kw:
            continue
        if k < 0 or type(defaults[k]) not in (int, float, bool):
            raise Refuse(f"{name}() called without {params[j]!r}, whose default is not a "
                         "number (only defaults that are numbers are inlined)")
        taken.append(k)
    info = code_info(code)
    if any(info.in_exception_block(j) for j in range(len(info.instructions))):
        raise Refuse(f"{name}() holds a try/with statement")
    number = len(where.lists)
    names = {}
    for n in code.co_varnames:
        if not n.isascii() or not n.isidentifier():
            raise Refuse(f"the local {n!r} of {name}() is not an ASCII name")
        names[n] = f"{PREFIX}{number}_{n}"
    instrs = [_rename(instr, names) for instr in info.instructions]
    frame = Frame(number, fn, instrs, info, pos + 1, (*chain, code),
                  tuple(names[n] for n in code.co_varnames[:code.co_argcount]),
                  tuple(names[n] for n in code.co_varnames[code.co_argcount:]),
                  tuple(taken), kw)
    if taken:  # (the defaults it takes are guarded on their values: `loop_kernels`)
        known = [g for g, obj in lw.used_statics.items() if obj is fn and isinstance(g, str)]
        if not known:
            raise Refuse(f"{name}() uses defaults and is not named by a global")
        for k in frame.defaults:
            lw.used_statics[("__defaults__", known[0], k)] = defaults[k]
    where.frames[pos] = frame
    where.lists.append(instrs)
    where.infos.append(info)
    base = frame.base
    lw.region = lw.region | {base + j for j in range(len(instrs))}
    lw.targets.add(pos + 1)
    for j, instr in enumerate(instrs):
        if instr.has_jump():
            target = base + info.target(j)
            lw.targets.add(target)
            if target <= base + j:
                lw.headers.add(target)
            if instr.name == "FOR_ITER":
                lw.targets.add(target + compat.loop_exit_skip())
    lw.inlined.add(pos)
    return frame


def enter(lw, pos: int, fn: types.FunctionType, args: list, state: State, kw: tuple = ()):
    """The call at `pos` of `fn` with `args`, the last of them named by `kw` (the stack below
    them is the caller's): bind the parameters, unbind the other locals, go to the callee's
    first instruction."""
    frame = _frame(lw, pos, fn, len(args), kw)
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    positional = len(args) - len(kw)
    given = dict(zip(params, args[:positional]))
    given.update(zip(kw, args[positional:]))
    defaults = fn.__defaults__ or ()
    first_default = len(params) - len(defaults)
    args = [given[p] if p in given else constant(defaults[j - first_default])
            for j, p in enumerate(params)]
    for name, value in zip(frame.params, args):
        state.locals.pop(name, None)  # (a fresh binding: another call may have had another type)
        lw.store_local(name, value, state)
    for name in frame.others:
        state.locals.pop(name, None)
        if lw.emitting and name in lw.flagged:
            lw.assign(f"B_{name}", "0")
    return [lw.edge(frame.base, state)]


def leave(lw, pos: int, value, state: State):
    """A ``return`` of the callee at `pos`: its value on the caller's stack, its locals gone,
    and on after the call."""
    frame = lw.instrs.frame_of(pos)
    if frame is None:
        raise Refuse("internal: a return outside every inlined frame")
    mine = frame.params + frame.others
    locals_ = {n: v for n, v in state.locals.items() if n not in mine}
    return [lw.edge(frame.ret, State([*state.stack, value], locals_))]


def label(pos: int) -> str:
    """A block's label: ``L<j>`` in the loop's code, ``L<j>_in<s>`` in inlined frame s."""
    frame, j = pos >> SHIFT, pos & ((1 << SHIFT) - 1)
    return f"L{j}_in{frame}" if frame else f"L{j}"


def returned_constant(value):
    """The value ``RETURN_CONST`` returns, as a stack value (not a number nor None: an empty
    tuple, which a kernel's return leaves to Python)."""
    if value is None:
        return Static(None)
    return constant(value) if isinstance(value, (int, float)) else TupleV(())
