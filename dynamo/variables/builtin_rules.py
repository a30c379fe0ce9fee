"""The builtins the translator runs by a rule of its own (`BUILTIN_RULES`: ``len``, ``type``,
``isinstance``, ``enumerate``, ``zip``, ``map``, ``filter``, ``sum``, ``getattr``, ...), the
iterators they make, and the tables `callables.BuiltinVariable` consults (pure builtins, the
builtins that consume an iterable, ``operator`` functions that work in place).

In: the call's argument trackers. Out: the result's tracker, or `Unsupported` (the call then
runs in plain Python at a graph break). Part of the trackers' circle with `callables`, whose
`BuiltinVariable` calls these (a rule returns trackers of every kind).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

from .. import instructions as ins
from ..exc import Unsupported, UserCodeError
from ..guards import Guard
from .base import VariableTracker
from .constant import ConstantVariable, _immutable, run_user_op, user_error
from .containers import (DictVariable, DictViewVariable, IteratorVariable, ListVariable,
                         TupleVariable, _Sequence, drain, iterate)
from .ndarray import ArrayRowIterator, NDArrayVariable
from .opaque import OpaqueObjectVariable

__all__ = ["BUILTIN_RULES", "CONSUMERS", "OPERATOR_INPLACE", "OPERATOR_MUTATORS",
           "PURE_BUILTINS", "PURE_MODULES", "all_constant", "constant_call"]


#: Modules whose functions are pure: called on constants, they may run at trace time.
PURE_MODULES = (math, operator)


def all_constant(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> bool:
    return all(a.is_python_constant() for a in [*args, *kwargs.values()])


def constant_call(fn: Callable, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """Run a pure function on constants now; an exception means "let plain Python raise it"."""
    from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

    values = [a.as_python_constant() for a in args]
    kw = {k: v.as_python_constant() for k, v in kwargs.items()}
    result = wrap_constant(run_user_op(fn, *values, **kw))
    if (type(result) is ConstantVariable and not _immutable(result.value)
            and _immutable((fn, *values, *kw.values()))):
        result.made_by = (fn, tuple(values), kw)
    return result



def _len(tx, args, kwargs):
    (arg,) = args
    if isinstance(arg, NDArrayVariable):
        if arg.meta.ndim == 0:
            raise user_error(TypeError, "len() of unsized object (a 0-d array)")
        from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

        return wrap_constant(arg.dim(0))  # (a SymIntVariable for a dynamic size)
    if isinstance(arg, (_Sequence, DictVariable)):
        return ConstantVariable(len(arg.items))
    if isinstance(arg, DictViewVariable):
        return ConstantVariable(len(arg.d.items))
    return constant_call(len, args, kwargs)


def _abs(tx, args, kwargs):
    (arg,) = args
    if isinstance(arg, NDArrayVariable):
        return tx.output.call_function(tx, operator.abs, [arg], {})
    return constant_call(abs, args, kwargs)


def _isinstance(tx, args, kwargs):
    obj, classes = args
    # The exact type of every traced value is guarded, so the answer is a constant.
    classes = classes.as_python_constant()
    return ConstantVariable(run_user_op(issubclass, obj.python_type(), classes))


def _type(tx, args, kwargs):
    """``type(x)``: a constant, as for `_isinstance` (the exact type of every traced value is
    guarded: an array's, ``np.ndarray``; a NumPy scalar's, its dtype's type)."""
    if len(args) != 1 or kwargs:
        # type(name, bases, ns) makes a new class on every call: not a constant
        raise Unsupported("type() with three arguments makes a new class (not traced)")
    from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

    return wrap_constant(args[0].python_type())


def _sequence_ctor(kind):
    def build(tx, args, kwargs):
        if kwargs:
            raise Unsupported(f"{kind.__name__}() with keyword arguments")
        if len(args) > 1:
            raise user_error(TypeError, f"{kind.__name__} expected at most 1 argument, got "
                             f"{len(args)}")
        if kind is tuple and args and type(args[0]) is TupleVariable:
            return args[0]  # (``tuple(t) is t``)
        items = args[0].unpack(tx) if args else []
        return (TupleVariable if kind is tuple else ListVariable)(items)

    return build


def _set_ctor(kind):
    def build(tx, args, kwargs):
        """``set(items)`` of constants: a constant, as a ``{...}`` display of constants is
        (`ValueOpcodes.BUILD_SET`); items that are not constants are left to Python."""
        if kwargs or len(args) > 1:
            raise Unsupported(f"{kind.__name__}() with these arguments")
        items = args[0].unpack(tx) if args else []
        return ConstantVariable(run_user_op(kind, [v.as_python_constant() for v in items]))

    return build


def _items_of(tx, value: VariableTracker) -> VariableTracker:
    """What ``iter(value)`` gives while tracing: rows of an array are read when they are
    reached (the loop body may write to the array first), other values as `iterate` says."""
    if isinstance(value, NDArrayVariable):
        return ArrayRowIterator(tx, value)
    return iterate(tx, value)


class _LazyIterator(IteratorVariable):
    """``enumerate``/``zip`` over iterators whose items are made when reached (`_items_of`)."""

    def __init__(self, sources: list[VariableTracker], kind: type, start: Any = 0) -> None:
        super().__init__([], kind=kind)
        self.sources = sources
        self.start = start
        self.count = 0
        self.done = False

    def _next_items(self) -> list[VariableTracker] | None:
        """One item of each source, or None (and done) when one ran out."""
        items = []
        for source in self.sources:
            item = source.next()
            if item is None:
                self.done = True
                return None
            items.append(item)
        return items

    def next(self) -> VariableTracker | None:
        if self.done or not self.sources:  # (``zip()`` is empty)
            return None
        items = self._next_items()
        if items is None:
            return None
        if self.kind is enumerate:
            items.insert(0, ConstantVariable(run_user_op(operator.add, self.start, self.count)))
        self.count += 1
        return TupleVariable(items)

    def unpack(self, tx) -> list[VariableTracker]:
        return drain(self)

    def reconstruct(self, codegen) -> None:
        # A zip or enumerate object holds nothing but its iterators (and enumerate its count):
        # one made again over them, each where this one left it, is the same to the program
        # (``for a, b in zip(xs, ys)`` whose loop runs with its body as a function). Not once
        # a source ran out: plain Python's stays exhausted, a list iterator rebuilt at the end
        # of its list would see items appended later.
        if self.done:
            raise Unsupported(f"cannot rebuild an exhausted {self.describe()}")
        codegen.extend(ins.with_null(ins.load_const(self.kind)))
        codegen.extend(ins.call(self._arguments(codegen)))

    def _arguments(self, codegen) -> int:
        """Push what the iterator is made again from; how many values."""
        for source in self.sources:
            codegen.reconstruct(source)
        if self.kind is enumerate:
            codegen.extend(ins.load_const(run_user_op(operator.add, self.start, self.count)))
            return len(self.sources) + 1
        return len(self.sources)


class _MapIterator(_LazyIterator):
    """``map(f, *iterables)`` and ``filter(f, iterable)``: each item made when it is reached, f
    called on it then (inlined like any call, so in the program's order); rebuilt, where the
    graph ends with it unfinished, as a new map/filter over the iterators where they are."""

    def __init__(self, tx, fn: VariableTracker, sources: list[VariableTracker], kind: type):
        super().__init__(sources, kind)
        self.tx = tx
        self.fn = fn

    def next(self) -> VariableTracker | None:
        while not self.done:
            items = self._next_items()
            if items is None:
                return None
            if self.kind is map:
                return self.fn.call_function(self.tx, items, {})
            test = items[0]
            if not (self.fn.is_python_constant() and self.fn.as_python_constant() is None):
                test = self.fn.call_function(self.tx, items, {})
            if test.truth():
                return items[0]
        return None

    def _arguments(self, codegen) -> int:
        codegen.reconstruct(self.fn)
        for source in self.sources:
            codegen.reconstruct(source)
        return 1 + len(self.sources)


def _map(tx, args, kwargs):
    if kwargs or len(args) < 2:
        raise Unsupported("map() without a function and iterables, or with keywords")
    return _MapIterator(tx, args[0], [_items_of(tx, a) for a in args[1:]], map)


def _filter(tx, args, kwargs):
    if kwargs or len(args) != 2:
        raise Unsupported("filter() without a function and one iterable, or with keywords")
    return _MapIterator(tx, args[0], [_items_of(tx, args[1])], filter)


def _next(tx, args, kwargs):
    """``next(it)`` / ``next(it, default)`` of an iterator the trace follows."""
    if kwargs or not 1 <= len(args) <= 2 or not isinstance(args[0], (IteratorVariable,
                                                                      ArrayRowIterator)):
        raise Unsupported("next() of a value that is not an iterator the trace follows")
    item = args[0].next()
    if item is not None:
        return item
    if len(args) == 2:
        return args[1]
    raise user_error(StopIteration, "")


def _enumerate(tx, args, kwargs):
    # enumerate(iterable, start=0), either by keyword: any other form (no iterable, an unknown
    # keyword, an argument twice) is left to the call in plain Python, which raises TypeError
    names = ("iterable", "start")
    if len(args) > 2 or set(kwargs) - set(names) or any(n in kwargs for n in names[:len(args)]):
        raise Unsupported("enumerate() called with arguments it does not take")
    bound = dict(zip(names, args), **kwargs)
    if "iterable" not in bound:
        raise Unsupported("enumerate() called without an iterable")
    start = bound["start"].as_python_constant() if "start" in bound else 0
    # (the count is an int: ``enumerate(xs, 1.5)`` raises TypeError, as does a str start)
    start = run_user_op(operator.index, start)
    return _LazyIterator([_items_of(tx, bound["iterable"])], enumerate, start)


def _zip(tx, args, kwargs):
    if kwargs:
        raise Unsupported("zip() with keyword arguments")
    return _LazyIterator([_items_of(tx, a) for a in args], zip)


def _min_max(fn):
    def call(tx, args, kwargs):
        if any(isinstance(a, NDArrayVariable) for a in args):
            raise Unsupported(f"builtin {fn.__name__}() on arrays compares elements in Python (data-dependent)")
        if len(args) == 1 and not args[0].is_python_constant():
            # (the items as one iterable: ``max({"ab": x})`` is "ab", not max("ab"))
            args = [ListVariable(args[0].unpack(tx))]
        return constant_call(fn, args, kwargs)

    return call


def _sum(tx, args, kwargs):
    """sum(items, start=0) is ``start + items[0] + items[1] + ...``, exactly as Python runs it."""
    if len(args) > 2 or set(kwargs) - {"start"}:
        raise Unsupported("sum() with these arguments")
    start = kwargs.get("start", args[1] if len(args) > 1 else ConstantVariable(0))
    if isinstance(start, ConstantVariable) and isinstance(start.value, (str, bytes, bytearray)):
        kind = "strings" if isinstance(start.value, str) else type(start.value).__name__
        raise user_error(TypeError, f"sum() can't sum {kind}")
    from . import operators  # (upward: the operators build on every kind of tracker)

    total = start
    for item in args[0].unpack(tx):
        total = operators.binary_op(tx, operator.add, total, item)
    return total


def _print(tx, args, kwargs):
    raise Unsupported("print() has a side effect that cannot be put in a graph")


def _getattr(tx, args, kwargs):
    if kwargs or len(args) not in (2, 3) or not args[1].is_python_constant():
        raise Unsupported("getattr() with these arguments")
    name = args[1].as_python_constant()
    if not isinstance(name, str):
        raise user_error(TypeError, "attribute name must be string")
    if len(args) == 3:
        if isinstance(args[0], OpaqueObjectVariable):  # (whether the default is taken)
            raise Unsupported(f"getattr() with a default of {args[0].describe()}: npdynamo "
                              "does not trace this type")
    try:
        return args[0].var_getattr(tx, name)
    except UserCodeError as exc:
        if len(args) == 3 and exc.error is AttributeError:
            _guard_absence(tx, args[0], name, "getattr() with a default")
            return args[2]
        raise


def _guard_absence(tx, obj: VariableTracker, name: str, what: str) -> None:
    """`obj` has no attribute `name` now, and the answer is about to be used: an object of a
    user's class gets attributes at run time (``obj.flag = True``), so the absence is guarded
    (NO_ATTRIBUTE: not in its ``__dict__`` nor its class's MRO, checked without running code).
    An object with no source (nothing to guard it through) or a module other than NumPy's
    (whose attributes are trusted, as for reads) is not guarded: the frame breaks there."""

    from .callables import PythonModuleVariable, UserObjectVariable  # (upward: the rules'
    # callers' kinds)

    if isinstance(obj, UserObjectVariable) and obj.source is not None:
        tx.output.add_guard(Guard(obj.source, "NO_ATTRIBUTE", name))
        return
    if isinstance(obj, UserObjectVariable) or (isinstance(obj, PythonModuleVariable)
                                               and not obj.is_numpy):
        raise Unsupported(f"{what} of {obj.describe()}: it has no attribute {name!r} now, and no "
                          "guard would see one added later")


def _hasattr(tx, args, kwargs):
    if args and isinstance(args[0], OpaqueObjectVariable):  # (no guard could keep the answer)
        raise Unsupported(f"hasattr() of {args[0].describe()}: npdynamo does not trace this type")
    try:
        _getattr(tx, args, kwargs)
    except UserCodeError as exc:
        if exc.error is AttributeError:
            _guard_absence(tx, args[0], args[1].as_python_constant(), "hasattr()")
            return ConstantVariable(False)
        raise
    return ConstantVariable(True)


def _dict(tx, args, kwargs):
    if len(args) > 1:
        raise user_error(TypeError, f"dict expected at most 1 argument, got {len(args)}")
    out = DictVariable({})
    if args:
        if not isinstance(args[0], DictVariable):
            raise Unsupported("dict() of a value that is not a dict")
        out.merge(args[0])
    out.items.update(kwargs)  # (keyword names: str constants)
    return out


#: Builtins with a tracing rule. Others, called on constants, run at trace time if pure.
BUILTIN_RULES: dict[Callable, Callable] = {
    len: _len,
    abs: _abs,
    isinstance: _isinstance,
    type: _type,
    tuple: _sequence_ctor(tuple),
    list: _sequence_ctor(list),
    enumerate: _enumerate,
    map: _map,
    set: _set_ctor(set),  # (not frozenset: frozenset(fs) is fs itself, one object)
    next: _next,
    filter: _filter,
    zip: _zip,
    min: _min_max(min),
    max: _min_max(max),
    print: _print,
    sum: _sum,
    getattr: _getattr,
    hasattr: _hasattr,
    dict: _dict,
}

#: Builtins that are pure on constants (safe to call at trace time).
#: builtins that consume an iterable argument whole (or until they know the answer)
CONSUMERS = {any, all, sorted, sum, min, max, list, tuple, set, frozenset, dict}

PURE_BUILTINS = {
    range, int, float, complex, bool, str, round, divmod, pow, sorted, reversed, any, all,
    hash, slice, repr, format, chr, ord, type,
}

#: operator functions that work in place on a mutable first argument (a list tracker), traced
#: like the augmented assignment they stand for
OPERATOR_INPLACE = {
    operator.iadd, operator.iand, operator.iconcat, operator.ifloordiv, operator.ilshift,
    operator.imod, operator.imul, operator.imatmul, operator.ior, operator.ipow,
    operator.irshift, operator.isub, operator.itruediv, operator.ixor,
}
#: operator functions that change their argument; run on constants they would change a copy
OPERATOR_MUTATORS = {operator.setitem, operator.delitem}
