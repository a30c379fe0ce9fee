"""VariableBuilder: wraps a real value read from the frame into a VariableTracker and records the
guards that make the wrapping valid (the value's type, and for arrays dtype and shape).

`wrap_constant` wraps values computed at trace time (no source, no guard).
"""

from __future__ import annotations

import builtins
import inspect
import threading
import types
import weakref
from typing import Any

import numpy as np

from fx.symbolic import Sym

from .._C import Wrapped as _Wrapped
from ..exc import Unsupported
from ..guards import Guard
from ..dynamic_shapes import scalar_is_dynamic
from ..source import GetItemSource, LocalSource, Source
from .base import VariableTracker
from .callables import (
    BuiltinVariable,
    NumpyFunctionVariable,
    PythonModuleVariable,
    UserClassVariable,
    UserFunctionVariable,
    UserObjectVariable,
    is_user_class,
)
from .constant import ConstantVariable, SymIntVariable
from .containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from .opaque import OpaqueObjectVariable


__all__ = ["VariableBuilder", "wrap_constant", "CONSTANT_TYPES"]

#: Python values specialised on (guarded by type and value).
CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), range, slice)

_BUILTIN_CALLABLES = {id(v) for v in vars(builtins).values() if callable(v)}
_PROXY_TYPES = (weakref.ProxyType, weakref.CallableProxyType)

#: ``ids``: the tuples, lists and dicts this thread is wrapping item by item right now
_wrapping = threading.local()


def _is_numpy_callable(value: Any) -> bool:
    # (type-based checks: isinstance() and getattr() on an object may run its own
    # __getattribute__, which translation must never do)
    if issubclass(type(value), np.ufunc):
        return True
    if issubclass(type(value), type) and issubclass(value, np.generic):
        return True
    getattribute = inspect.getattr_static(type(value), "__getattribute__", None)
    if isinstance(getattribute, types.FunctionType):  # (reading __module__ would run it)
        return False
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):  # (anything may sit in __module__)
        return False
    return callable(value) and (module == "numpy" or module.startswith("numpy."))


_HEAPTYPE = 1 << 9


def _is_user_object(value: Any) -> bool:
    """An instance of a class defined in Python (not a module, function, class or NumPy value)."""
    typ = type(value)
    return bool(typ.__flags__ & _HEAPTYPE) and not issubclass(typ, (type, np.ndarray, np.generic)) or (
        typ is types.SimpleNamespace
    )


def _tracks_mutation(value: Any) -> bool:
    """Objects whose contents the translator models (and whose changes it replays): aliasing
    between inputs matters for them. (Arrays alias at run time: the graph runs NumPy.)"""
    return type(value) in (list, dict) or _is_user_object(value)


def wrap_constant(value: Any, literal: bool = False) -> VariableTracker:
    """A VariableTracker for a value computed while tracing, or with `literal` a constant of
    the code (LOAD_CONST: a tuple stays that very object when it is rebuilt)."""
    if isinstance(value, Sym):
        return SymIntVariable(value)
    if isinstance(value, tuple):
        out = TupleVariable([wrap_constant(v, literal) for v in value])
        if literal:
            out.literal = value
        return out
    if isinstance(value, list):
        return ListVariable([wrap_constant(v) for v in value])
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value)
    if isinstance(value, (np.ndarray,)):
        raise Unsupported("an ndarray constant computed at trace time")
    if isinstance(value, dict):
        return DictVariable({k: wrap_constant(v) for k, v in value.items()})
    if hasattr(type(value), "__next__"):  # an iterator over constants (reversed(), zip(), ...)
        # (its type: rebuilt as a tuple iterator only where nothing can tell, see iterate())
        kind = None if type(value) is type(iter(())) else type(value)
        return IteratorVariable([wrap_constant(v) for v in value], kind)
    if not literal:
        _refuse_long_text(value)
    return ConstantVariable(value)


#: A str or bytes longer than this is no constant of the translator's (CPython's own compiler
#: folds no longer one either: MAX_STR_SIZE in Python/ast_opt.c). A compiled version would keep
#: it (a constant of its code, or the value its guard compares with on every call) and compile
#: its repr into the guard text: ``s = 'x' * 10**7`` then cost 0.2 s per compile and a 10 MB
#: compare per call (CPython's test_re test_search_anchor_at_beginning timed it).
MAX_CONSTANT_TEXT = 4096


def _refuse_long_text(value: Any) -> None:
    if type(value) in (str, bytes) and len(value) > MAX_CONSTANT_TEXT:
        raise Unsupported(f"a {type(value).__name__} of {len(value)} characters is no constant "
                          f"npdynamo traces (more than {MAX_CONSTANT_TEXT}): it is made and "
                          "used in plain Python")


#: A tuple, list or dict with more items than this is not wrapped item by item (each item would
#: get its own tracker and guard): the instruction that looks into it runs in plain Python.
MAX_TRACED_ITEMS = 256


def _argument_or_item(source: Any) -> bool:
    """A local, or an item of a tuple/list in one (``t[0]``, ``t[1][2]``): where an int or float
    may become a graph input once its value changes between compiles (a loop body function
    gets ``(i, row)`` from ``enumerate`` as one argument: its counter changes every call)."""
    while isinstance(source, GetItemSource) and type(source.index) is int:
        source = source.base
    return isinstance(source, LocalSource)


class VariableBuilder:
    def __init__(self, tx, source: Source) -> None:
        self.tx = tx
        self.source = source

    def guard(self, kind: str, expected: Any = None) -> None:
        self.tx.output.add_guard(Guard(self.source, kind, expected))

    def __call__(self, value: Any) -> VariableTracker:
        output = self.tx.output
        cached = output.wrapped.get(self.source)
        if cached is not None:
            return cached
        tracked = _tracks_mutation(value)
        if tracked:
            # One mutable object reached through two sources (``f(l, l)``, ``self.a is
            # self.b``) is one tracker, so a change through one is seen through the other;
            # different objects of the same type must stay different (guards both ways).
            # (the second guard: `OutputGraph.final_guards`, DISTINCT_OBJECTS)
            for source, obj, vt in output.mutable_inputs:
                if obj is value:
                    self.guard("SAME_OBJECT", source)
                    output.wrapped[self.source] = vt
                    return vt
        vt = self._wrap(value)
        output.wrapped[self.source] = vt
        if tracked:
            output.mutable_inputs.append((self.source, value, vt))
        return vt

    def _wrap(self, value: Any) -> VariableTracker:
        typ = type(value)
        if typ is np.ndarray or (issubclass(typ, np.generic) and typ.__module__ == "numpy"):
            return self.tx.output.add_graph_input(self.source, value)
        if typ in (int, float) and _argument_or_item(self.source):
            output = self.tx.output
            if scalar_is_dynamic(output.code, self.source.name(), value, output.dynamic):
                return output.add_scalar_input(self.source, value)
        if typ in CONSTANT_TYPES:
            _refuse_long_text(value)
            self.guard("CONSTANT_MATCH", (typ, value))
            return ConstantVariable(value, source=self.source)
        if typ is np.dtype or issubclass(typ, np.dtype):
            self.guard("CONSTANT_MATCH", (typ, value))
            return ConstantVariable(value, source=self.source)
        if typ in (tuple, list, dict) and len(value) > MAX_TRACED_ITEMS:
            # (`gc.get_objects()`, a big table: one guard per item would cost more than it saves)
            raise Unsupported(f"a {typ.__name__} of {len(value)} items is too long to trace item "
                              f"by item (more than {MAX_TRACED_ITEMS})")
        if typ in (tuple, list, dict):
            # (a container that contains itself, ``L.append(L)``, would be wrapped forever)
            active = getattr(_wrapping, "ids", None)
            if active is None:
                active = _wrapping.ids = set()
            if id(value) in active:
                raise Unsupported(f"{self.source.name()} is a {typ.__name__} that contains "
                                  "itself (a reference cycle), which is not traced")
            active.add(id(value))
            try:
                return self._wrap_container(value, typ)
            finally:
                active.discard(id(value))
        if typ in _PROXY_TYPES:
            # (a weakref.proxy forwards every attribute read to its referent, and raises
            # ReferenceError once it died: passed along untouched)
            return OpaqueObjectVariable(value, self.source)
        if issubclass(typ, types.ModuleType):
            self.guard("ID_MATCH", Guard.identity(value))
            return PythonModuleVariable(value, source=self.source)
        if _is_numpy_callable(value):
            self.guard("ID_MATCH", Guard.identity(value))
            return NumpyFunctionVariable(value, source=self.source)
        if id(value) in _BUILTIN_CALLABLES and getattr(builtins, getattr(value, "__name__", ""), None) is value:
            self.guard("ID_MATCH", Guard.identity(value))
            return BuiltinVariable(value, source=self.source)
        if type(value) is _Wrapped:
            # A dynamo.compile/disable wrapper (C): calling it changes the capture scope, so the
            # call is never traced; it runs at a graph break like any function not inlined.
            self.guard("ID_MATCH", Guard.identity(value))
            return UserFunctionVariable(value, source=self.source)
        if issubclass(typ, types.FunctionType):
            # The same code and globals, not the same object: a function made anew on every call
            # (a closure, or one rebuilt after a graph break) reuses the compiled version. What
            # inlining reads from it (defaults, closure cells) is read through guarded sources.
            self.guard("FUNCTION_MATCH", (Guard.identity(value.__code__), Guard.identity(value.__globals__)))
            return UserFunctionVariable(value, source=self.source)
        return self._wrap_other(value, typ)

    def _wrap_container(self, value: Any, typ: type) -> VariableTracker:
        if typ in (tuple, list):
            self.guard("SEQUENCE_LENGTH", (typ, len(value)))
            items = [VariableBuilder(self.tx, GetItemSource(self.source, i))(v) for i, v in enumerate(value)]
            cls = TupleVariable if typ is tuple else ListVariable
            vt = cls(items, source=self.source)
            if cls is ListVariable:
                vt.effects = self.tx.root().side_effects  # changes are replayed after the graph
            return vt
        if all(type(k) in (str, int) for k in value):
            self.guard("DICT_KEYS", (typ, tuple(value)))
            items = {k: VariableBuilder(self.tx, GetItemSource(self.source, k))(v) for k, v in value.items()}
            return DictVariable(items, source=self.source)
        return self._wrap_other(value, typ)

    def _wrap_other(self, value: Any, typ: type) -> VariableTracker:
        if _is_user_object(value):
            self.guard("TYPE_MATCH", typ)
            return UserObjectVariable(value, source=self.source)
        if is_user_class(value):
            self.guard("ID_MATCH", Guard.identity(value))
            return UserClassVariable(value, source=self.source)
        # Anything else can still be passed along and called in plain Python after a graph break.
        return OpaqueObjectVariable(value, self.source)
