"""Callable values: NumPy functions and ufuncs, modules, builtins, methods, user functions.

Calls on graph values become graph nodes (through `OutputGraph`); calls whose arguments are all
Python constants and that are known to be pure run at trace time.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import sys
import types
from types import ModuleType
from typing import Any, Callable

import numpy as np

from fx.names import numpy_path
from fx import op_rules

from .. import instructions as ins
from ..exc import Unsupported, UserCodeError
from ..guards import Guard
from ..markers import graph_break
from ..source import AttrSource
from . import numpy_facts
from .base import VariableTracker
from .constant import ConstantVariable, _immutable, run_user_op, user_error
from .containers import (DictVariable, DictViewVariable, IteratorVariable, ListReverseIteratorVariable,
                         ListVariable, TupleVariable, _Sequence, iterate)
from .ndarray import ArrayRowIterator, NDArrayVariable
from .opaque import OpaqueObjectVariable

__all__ = [
    "NumpyFunctionVariable",
    "PythonModuleVariable",
    "BuiltinVariable",
    "MethodVariable",
    "BoundConstantMethodVariable",
    "UserFunctionVariable",
    "UserObjectVariable",
]

#: Modules whose functions are pure: called on constants, they may run at trace time.
PURE_MODULES = (math, operator)


def _all_constant(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> bool:
    return all(a.is_python_constant() for a in [*args, *kwargs.values()])


def _constant_call(fn: Callable, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """Run a pure function on constants now; an exception means "let plain Python raise it"."""
    from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

    values = [a.as_python_constant() for a in args]
    kw = {k: v.as_python_constant() for k, v in kwargs.items()}
    result = wrap_constant(run_user_op(fn, *values, **kw))
    if (type(result) is ConstantVariable and not _immutable(result.value)
            and _immutable((fn, *values, *kw.values()))):
        result.made_by = (fn, tuple(values), kw)
    return result


class NumpyFunctionVariable(VariableTracker):
    """A NumPy function, ufunc or scalar type (``np.float32``) used as a value or called."""

    def __init__(self, fn: Any, source=None) -> None:
        self.fn = fn
        self.source = source

    def describe(self) -> str:
        return numpy_path(self.fn) or f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def as_python_constant(self) -> Any:
        return self.fn  # e.g. ``dtype=np.float32``

    def python_type(self) -> type:
        return type(self.fn)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if isinstance(self.fn, type) or self.fn is np.dtype:
            # np.float32(2.0), np.dtype("f4"): scalar and dtype constructors on constants.
            if _all_constant(args, kwargs):
                return _constant_call(self.fn, args, kwargs)
            raise Unsupported(f"{self.describe()}(...) on a traced array is not supported")
        known = numpy_facts.answer(self.fn, args[0] if args else None, len(args) + len(kwargs))
        if known is not None:  # (np.ndim(x), np.isscalar(x): what the trace knows)
            from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

            kind, found = known
            return args[0].var_getattr(tx, found) if kind == "attribute" else wrap_constant(found)
        if not op_rules.is_supported_function(self.fn):
            raise Unsupported(f"{self.describe()} is not supported by npdynamo yet")
        return tx.output.call_function(tx, self.fn, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.fn, np.ufunc) and name in ("reduce", "accumulate", "outer", "at", "reduceat"):
            method = getattr(self.fn, name)
            if not op_rules.is_supported_function(method):
                raise Unsupported(f"ufunc method {self.describe()}.{name} is not supported yet")
            return NumpyFunctionVariable(method)
        if isinstance(self.fn, np.ufunc) and name in ("nin", "nout", "nargs", "__name__"):
            return ConstantVariable(getattr(self.fn, name))
        return super().var_getattr(tx, name)


#: The tables of names NumPy's module ``__getattr__`` serves (it raises AttributeError for others).
_NUMPY_LAZY = ("__expired_attributes__", "__former_attrs__", "__future_scalars__",
               "__deprecated_attrs__", "__numpy_submodules__")


class PythonModuleVariable(VariableTracker):
    """A module: ``np``, ``np.linalg``, ``math``; attributes are looked up at trace time."""

    def __init__(self, module: ModuleType, source=None) -> None:
        self.module = module
        self.source = source

    def describe(self) -> str:
        return f"module {self.module.__name__}"

    @property
    def is_numpy(self) -> bool:
        """NumPy or one of its submodules: its attributes are trusted not to be reassigned or
        added (read without a guard)."""
        name = self.module.__name__
        return name == "numpy" or name.startswith("numpy.")

    def _attribute(self, name: str, missing: Any) -> Any:
        """The attribute, read without running the module's ``__getattr__``: NumPy's warns for
        deprecated names (``np.chararray``, ``np.object``) and imports subpackages, and at trace
        time that warning would be an extra one, from npdynamo's line (an error under
        ``-W error``). A name only ``__getattr__`` provides (other than an imported submodule)
        is a graph break: the program's own access runs in Python, at its line. NumPy's
        ``__getattr__`` serves the names of its tables (expired, former and future names, lazy
        submodules) and raises AttributeError for any other: such a name is missing."""
        namespace = vars(self.module)
        if name in namespace:
            return namespace[name]
        submodule = sys.modules.get(f"{self.module.__name__}.{name}")
        if submodule is not None:
            return submodule
        if "__getattr__" not in namespace:
            return getattr(self.module, name, missing)  # (a module subclass's own attributes)
        if self.is_numpy and not any(name in namespace.get(table, ()) for table in _NUMPY_LAZY):
            return missing
        raise Unsupported(f"{self.describe()}.{name} is computed by the module's __getattr__ "
                          f"(which may warn or import); it runs in Python")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # (upward: builder makes trackers of every kind)
        from .builder import VariableBuilder, wrap_constant

        missing = object()
        value = self._attribute(name, missing)
        if value is missing:
            raise user_error(AttributeError,
                             f"module {self.module.__name__!r} has no attribute {name!r}")
        # The source (no guard) rebuilds the attribute after a graph break (``np.mgrid``).
        source = AttrSource(self.source, name) if self.source is not None else None
        if self.is_numpy:  # (no guard)
            if isinstance(value, ModuleType):
                return PythonModuleVariable(value, source)
            if isinstance(value, (np.ufunc, type)) or callable(value):
                return NumpyFunctionVariable(value, source)
            vt = wrap_constant(value)
            if isinstance(vt, ConstantVariable) and source is not None:
                vt.source = source
            return vt
        if self.module in PURE_MODULES and callable(value):
            return BuiltinVariable(value)
        if self.source is None:
            raise Unsupported(f"attribute {name!r} of {self.describe()} has no source to guard")
        return VariableBuilder(tx, AttrSource(self.source, name))(value)


# Builtins ---------------------------------------------------------------------------------------


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
    return _constant_call(len, args, kwargs)


def _abs(tx, args, kwargs):
    (arg,) = args
    if isinstance(arg, NDArrayVariable):
        return tx.output.call_function(tx, operator.abs, [arg], {})
    return _constant_call(abs, args, kwargs)


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

    def next(self) -> VariableTracker | None:
        if self.done or not self.sources:  # (``zip()`` is empty)
            return None
        items = []
        for source in self.sources:
            item = source.next()
            if item is None:
                self.done = True
                return None
            items.append(item)
        if self.kind is enumerate:
            items.insert(0, ConstantVariable(run_user_op(operator.add, self.start, self.count)))
        self.count += 1
        return TupleVariable(items)

    def unpack(self, tx) -> list[VariableTracker]:
        rest = []
        while (item := self.next()) is not None:
            rest.append(item)
        return rest

    def reconstruct(self, codegen) -> None:
        # A zip or enumerate object holds nothing but its iterators (and enumerate its count):
        # one made again over them, each where this one left it, is the same to the program
        # (``for a, b in zip(xs, ys)`` whose loop runs with its body as a function). Not once
        # a source ran out: plain Python's stays exhausted, a list iterator rebuilt at the end
        # of its list would see items appended later.
        if self.done:
            raise Unsupported(f"cannot rebuild an exhausted {self.describe()}")
        codegen.extend(ins.with_null(ins.load_const(self.kind)))
        for source in self.sources:
            codegen.reconstruct(source)
        nargs = len(self.sources)
        if self.kind is enumerate:
            codegen.extend(ins.load_const(run_user_op(operator.add, self.start, self.count)))
            nargs += 1
        codegen.extend(ins.call(nargs))


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
        return _constant_call(fn, args, kwargs)

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


class BuiltinVariable(VariableTracker):
    def __init__(self, fn: Callable, source=None) -> None:
        self.fn = fn
        self.source = source

    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def as_python_constant(self) -> Any:
        return self.fn  # e.g. ``dtype=float``

    def python_type(self) -> type:
        return type(self.fn)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.fn in (any, all) and len(args) == 1 and not kwargs and \
                isinstance(args[0], IteratorVariable):
            # As in Python, up to the first item that settles it: a generator's later items
            # are never made (their side effects and errors do not happen).
            while (item := args[0].next()) is not None:
                if item.truth() == (self.fn is any):
                    return ConstantVariable(self.fn is any)
            return ConstantVariable(self.fn is all)
        if self.fn in CONSUMERS and args and isinstance(args[0], IteratorVariable):
            # sorted(x.sum() for x in xs): every item is made (traced) now; hand them over as
            # a list.
            args = [ListVariable(args[0].unpack(tx)), *args[1:]]
        rule = BUILTIN_RULES.get(self.fn)
        if rule is not None:
            return rule(tx, args, kwargs)
        if isinstance(self.fn, type) and issubclass(self.fn, BaseException):
            return ExceptionVariable(self.fn)  # ``raise ValueError("...")``
        if self.fn in (int, float, complex, bool) and any(isinstance(a, NDArrayVariable) for a in args):
            raise Unsupported(
                f"{self.fn.__name__}() of an array value needs its data (data-dependent)"
            )
        from . import operators  # (upward: the operators build on every kind of tracker)

        if self.fn in (operator.is_, operator.is_not) and len(args) == 2 and not kwargs:
            same = operators.identical(tx, args[0], args[1])  # (identity of the trackers' objects, not copies)
            return ConstantVariable(same == (self.fn is operator.is_))
        if self.fn in OPERATOR_INPLACE and len(args) == 2 and not kwargs:
            return operators.binary_op(tx, self.fn, args[0], args[1])  # (``operator.iadd(l, m)`` extends l)
        if self.fn in OPERATOR_MUTATORS:
            # on the constant copy of a list or dict the change would be lost
            raise Unsupported(f"{self.describe()} changes its argument (not traced)")
        if self.fn is reversed and len(args) == 1 and not kwargs and \
                isinstance(args[0], ListVariable):
            return ListReverseIteratorVariable(args[0])  # (live over the list, not a copy)
        pure = self.fn in PURE_BUILTINS or getattr(self.fn, "__module__", None) in ("math", "_operator")
        if pure and _all_constant(args, kwargs):
            return _constant_call(self.fn, args, kwargs)
        if any(isinstance(a, NDArrayVariable) for a in args) and getattr(self.fn, "__module__", "") == "_operator":
            if len(args) == 2 and not kwargs:
                return operators.binary_op(tx, self.fn, args[0], args[1])
            if op_rules.is_supported_function(self.fn):
                return tx.output.call_function(tx, self.fn, args, kwargs)
        raise Unsupported(f"call to {self.describe()} with these arguments is not supported")


class ExceptionVariable(VariableTracker):
    """A builtin exception created in the frame, about to be raised (``RAISE_VARARGS`` then makes
    the frame run in plain Python, which raises the real one). Never rebuilt in compiled code."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def describe(self) -> str:
        return f"{self.cls.__name__} instance"

    def python_type(self) -> type:
        return self.cls


class MethodVariable(VariableTracker):
    """``x.sum`` before it is called: a NumPy method of a graph value."""

    def __init__(self, obj: NDArrayVariable, name: str) -> None:
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return tx.output.call_method(tx, self.name, self.obj, args, kwargs)

    def reconstruct(self, codegen) -> None:
        # After a graph break the call runs in Python: ``x.item`` looked up on the real array.
        self.obj.reconstruct(codegen)
        codegen.extend(ins.load_attr(self.name))


class BoundConstantMethodVariable(VariableTracker):
    """A method of a constant (``(2.5).is_integer``, ``dtype.newbyteorder``): runs at trace time."""

    def __init__(self, value: Any, name: str) -> None:
        self.value = value
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.value!r}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not _all_constant(args, kwargs):
            raise Unsupported(f"{self.describe()} called with traced values")
        return _constant_call(getattr(self.value, self.name), args, kwargs)

    def reconstruct(self, codegen) -> None:
        ConstantVariable(self.value).reconstruct(codegen)  # (refuses mutable values)
        codegen.extend(ins.load_attr(self.name))


class UserFunctionVariable(VariableTracker):
    """A Python function of the user. Not inlined in this version: calling it stops capture of
    the calling frame, and the callee is captured as a frame of its own."""

    def __init__(self, fn: Callable, source=None, bound_self: VariableTracker | None = None) -> None:
        self.fn = fn
        self.source = source
        #: for a method read from an object: the object, passed as the first argument, and the
        #: attribute name it was read under
        self.bound_self = bound_self
        self.bound_name = getattr(fn, "__name__", "")

    def reconstruct(self, codegen) -> None:
        if self.bound_self is not None:
            # ``obj.method``: the bound method, looked up again on the object (after a graph
            # break the call runs in Python and must receive the object as `self`).
            codegen.reconstruct(self.bound_self)
            codegen.extend(ins.load_attr(self.bound_name))
            return
        super().reconstruct(codegen)

    def describe(self) -> str:
        code = getattr(self.fn, "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        return f"function {getattr(self.fn, '__qualname__', self.fn)}{where}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if self.fn is graph_break:
            raise Unsupported("dynamo.graph_break() was called")
        if not isinstance(self.fn, types.FunctionType):
            raise Unsupported(f"call to {self.describe()}: not a plain Python function")
        self_args = [self.bound_self] if self.bound_self is not None else []
        return tx.inline_function(self.fn, self.source, self_args + list(args), kwargs)


class UserClassVariable(VariableTracker):
    """A class defined in Python (plain ``type`` metaclass), read from a guarded source (its
    identity is guarded). ``Cls.method`` gives the function (inlined when called with the object
    first), ``Cls.static_method`` the function, ``Cls.class_method`` the function bound to the
    class; other attributes are passed along as opaque values. Calling the class (making an
    object) is not traced: it breaks the graph."""

    def __init__(self, value: type, source) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        return f"class {self.value.__qualname__} {self.source.name()}"

    def as_python_constant(self) -> Any:
        return self.value  # (the identity is guarded)

    def is_python_constant(self) -> bool:
        return True

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import VariableBuilder  # (upward: builder makes trackers of every kind)
        static = inspect.getattr_static(self.value, name, None)
        source = AttrSource(self.source, name)
        if inspect.isfunction(static) or (isinstance(static, staticmethod)
                                          and inspect.isfunction(static.__func__)):
            return VariableBuilder(tx, source)(getattr(self.value, name))  # (FUNCTION_MATCH)
        if isinstance(static, classmethod) and inspect.isfunction(static.__func__):
            fn = VariableBuilder(tx, AttrSource(source, "__func__"))(static.__func__)
            method = UserFunctionVariable(static.__func__, source=fn.source, bound_self=self)
            method.bound_name = name
            return method
        # A class attribute holding data stays opaque (not a constant under a guard): class
        # counters change under the frame's feet, e.g. in __del__ run by the collector between
        # the guard check and the use (CPython's test_scope testLeaks).
        if static is None or type(static).__flags__ & (1 << 9):
            # missing, or a descriptor defined in Python: reading it would run user code
            raise Unsupported(f"attribute {name!r} of {self.describe()} (not traced)")
        try:
            value = getattr(self.value, name)
        except AttributeError:
            raise Unsupported(f"attribute {name!r} of {self.describe()} (not traced)") from None
        return OpaqueObjectVariable(value, source)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to {self.describe()}: making an object runs in plain Python")


def is_user_class(value: Any) -> bool:
    """A class defined in Python whose attribute reads run no user code (metaclass ``type``)."""
    return type(value) is type and bool(value.__flags__ & (1 << 9)) and not issubclass(
        value, (np.ndarray, np.generic, BaseException))


class UserObjectVariable(VariableTracker):
    """An instance of a user-defined class (``self`` in a method). Reading an attribute wraps the
    attribute's value with a guard on ``obj.attr``; properties, ``__getattr__`` and custom
    ``__getattribute__`` run user code and are not traced; method calls are not inlined yet."""

    def __init__(self, value: Any, source) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        return f"{type(self.value).__qualname__} object {self.source.name()}"

    def python_type(self) -> type:
        return type(self.value)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``obj.name = value``: replayed after the graph; later reads in the trace see it."""
        cls = type(self.value)
        if cls.__setattr__ is not object.__setattr__:
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}, which has its "
                              "own __setattr__")
        static = inspect.getattr_static(cls, name, None)
        if static is not None and hasattr(type(static), "__set__") and \
                type(static).__name__ != "member_descriptor":
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}: a "
                              f"{type(static).__name__} runs code when set")
        tx.root().side_effects.store_attr(self, name, value)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if type(self.value) is functools.partial:
            return self._call_partial(tx, args, kwargs)
        return super().call_function(tx, args, kwargs)

    def _call_partial(self, tx, args, kwargs) -> VariableTracker:
        """``functools.partial(f, *a, **k)(*args, **kw)`` is ``f(*a, *args, **{**k, **kw})``:
        what the partial holds is read (and guarded) through ``p.func``, ``p.args`` and
        ``p.keywords``; the call is then traced like a call of ``f``."""
        from .builder import VariableBuilder  # (upward: builder makes trackers of every kind)

        p = self.value
        func = VariableBuilder(tx, AttrSource(self.source, "func"))(p.func)
        bound = VariableBuilder(tx, AttrSource(self.source, "args"))(p.args)
        keywords = VariableBuilder(tx, AttrSource(self.source, "keywords"))(p.keywords)
        if not isinstance(bound, TupleVariable) or not isinstance(keywords, DictVariable):
            raise Unsupported(f"call to {self.describe()}: its keywords are not traced")
        return func.call_function(tx, [*bound.items, *args], {**keywords.items, **kwargs})

    def _guard_bound_here(self, tx, name: str, fn: Any) -> None:
        """Guard that ``obj.name`` is still the class's function `fn` bound to this object: an
        attribute of that name the object gets later (``obj.forward = other``) wins over the
        class's method, and the guards on the class alone would not see it. (Reading
        ``obj.name`` binds a method, which runs no user code and makes no ``__dict__``.)"""

        bound = AttrSource(self.source, name)
        tx.output.add_guard(Guard(AttrSource(bound, "__func__"), "ID_MATCH", Guard.identity(fn)))
        tx.output.add_guard(Guard(AttrSource(bound, "__self__"), "SAME_OBJECT", self.source))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """``obj.name``, decided as ``object.__getattribute__`` does (a data descriptor of the
        class, then the object's own attribute, then the class attribute or its binding) without
        running the user's code and without making the object's ``__dict__`` (see
        `own_attribute`)."""
        from .builder import VariableBuilder  # (upward: builder makes trackers of every kind)

        obj = self.value
        cls = type(obj)
        if cls.__getattribute__ is not object.__getattribute__:
            # (even for an attribute written in this trace: the read runs the user's code)
            raise Unsupported(f"{self.describe()} has a custom __getattribute__")
        written = tx.root().side_effects.pending_attr(self, name)
        if written is not None:
            return written
        found = class_attribute(cls, name)
        if found is not _MISSING and _is_data_descriptor(found):
            if not isinstance(found, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                raise Unsupported(f"attribute {name!r} of {self.describe()} is a "
                                  f"{type(found).__name__} (running its code is not traced yet)")
            # A slot, ``__class__``, ``__dict__``, ``__weakref__``: read in C, no user code (and
            # ``obj.__dict__`` makes the dict, as it does in plain Python).
            try:
                value = found.__get__(obj, cls)
            except AttributeError:  # (an empty slot)
                return self._missing(name)
            except Exception as exc:  # (another class's slot: TypeError, test_opcache)
                raise Unsupported(f"reading {name!r} of {self.describe()} raises "
                                  f"{type(exc).__name__}: the read runs in plain Python") from None
            return VariableBuilder(tx, AttrSource(self.source, name))(value)
        own = own_attribute(obj, name, found)
        if own is _UNKNOWN:
            raise Unsupported(f"attribute {name!r} of {self.describe()}: the class's "
                              f"{type(found).__name__} runs code unless the object has its own "
                              f"{name!r}, and asking would make the object's __dict__")
        if own is not _MISSING:
            return VariableBuilder(tx, AttrSource(self.source, name))(own)
        if found is _MISSING:
            return self._missing(name)
        if isinstance(found, types.FunctionType):
            # A method: the class's function (guarded by identity through the object's class),
            # called with the object first.
            fn_source = AttrSource(AttrSource(self.source, "__class__"), name)
            fn = VariableBuilder(tx, fn_source)(found)
            self._guard_bound_here(tx, name, found)
            method = UserFunctionVariable(found, source=fn.source, bound_self=self)
            method.bound_name = name
            return method
        if _plain_wrapper(found) and isinstance(found.__func__, types.FunctionType):
            # The function inside, read (and guarded) through the class: ``cls.__dict__[name]``
            # is the descriptor, ``cls.name`` what it gives.
            fn_source = AttrSource(AttrSource(self.source, "__class__"), name)
            if isinstance(found, staticmethod):
                return VariableBuilder(tx, fn_source)(found.__func__)
            method = UserFunctionVariable(found.__func__, bound_self=VariableBuilder(
                tx, AttrSource(self.source, "__class__"))(cls))
            method.bound_name = name
            return method
        if _defines(type(found), "__get__"):
            raise Unsupported(f"attribute {name!r} of {self.describe()} is a "
                              f"{type(found).__name__} (running its code is not traced yet)")
        return VariableBuilder(tx, AttrSource(self.source, name))(found)

    def _missing(self, name: str) -> VariableTracker:
        """``obj.name`` finds nothing: AttributeError, unless the class's ``__getattr__`` (user
        code, not traced) gives something."""
        cls = type(self.value)
        if getattr(cls, "__getattr__", None) is None:  # (the type is guarded)
            raise user_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")
        raise Unsupported(f"{self.describe()} has no attribute {name!r} (it may come from "
                          "__getattr__)")


# Attributes of user objects, looked up without running code or making an instance dict --------

#: A class's own namespace and its MRO, read past any metaclass (which could run code).
_class_namespace = type.__dict__["__dict__"].__get__
_class_mro = type.__dict__["__mro__"].__get__
#: Whether a class's instances have a ``__dict__`` (0: ``__slots__`` only, no dict at all).
_dict_offset = type.__dict__["__dictoffset__"].__get__
_MISSING = object()
_UNKNOWN = object()


def class_attribute(cls: type, name: str) -> Any:
    """What `cls` or the first of its bases (in MRO order) defines under `name`, read from the
    class namespaces without running a descriptor; `_MISSING` when none does."""
    for klass in _class_mro(cls):
        namespace = _class_namespace(klass)
        if name in namespace:
            return namespace[name]
    return _MISSING


def _defines(kind: type, name: str) -> bool:
    return class_attribute(kind, name) is not _MISSING


def _is_data_descriptor(attr: Any) -> bool:
    """A class attribute that comes before the object's own attributes (``__set__`` or
    ``__delete__``: a property, a slot, ``__dict__``)."""
    return _defines(type(attr), "__set__") or _defines(type(attr), "__delete__")


def _plain_wrapper(attr: Any) -> bool:
    """A staticmethod or classmethod whose binding is the built-in one (no subclass's own
    ``__get__``, which would be user code)."""
    for base in (staticmethod, classmethod):
        if isinstance(attr, base):
            return class_attribute(type(attr), "__get__") is _class_namespace(base)["__get__"]
    return False


def own_attribute(obj: Any, name: str, found: Any) -> Any:
    """What `obj` holds under `name` among its own attributes (its instance dict), given the
    class attribute `found` (`class_attribute`; not a data descriptor): the value, `_MISSING`
    when it holds nothing there (or the very object the class gives, which reads the same), or
    `_UNKNOWN` when that cannot be told without running code.

    Never asks for ``obj.__dict__``: on 3.11+ an object keeps its attributes without a dict
    object until one is asked for, and making one shows (the garbage collector's counts,
    ``sys.getsizeof``, CPython's test_gc and test_sys). ``object.__getattribute__`` reads
    the attributes in place: it returns the object's own value when it has one, else what the
    class gives, so where both could give the same object, the class's binding is told apart
    by being new on every read."""
    if not _dict_offset(type(obj)):
        return _MISSING  # (``__slots__`` only: nothing beside the class's slots)
    if found is not _MISSING and _defines(type(found), "__get__"):
        if isinstance(found, types.FunctionType) or (
                _plain_wrapper(found) and isinstance(found, classmethod)
                and isinstance(found.__func__, types.FunctionType)):
            # The class's binding is a new method object on each read (binding a function
            # runs no code; a classmethod of anything else could run its __get__).
            func, owner = (found, obj) if isinstance(found, types.FunctionType) else (
                found.__func__, type(obj))
            value = object.__getattribute__(obj, name)
            if (type(value) is types.MethodType and value.__func__ is func
                    and value.__self__ is owner
                    and object.__getattribute__(obj, name) is not value):
                return _MISSING
            return value
        if _plain_wrapper(found) and isinstance(found, staticmethod):
            value = object.__getattribute__(obj, name)  # (the class gives its __func__ itself)
            return _MISSING if value is found.__func__ else value
        return _UNKNOWN  # (reading through the class would run its __get__)
    try:
        value = object.__getattribute__(obj, name)  # (no descriptor: nothing runs)
    except AttributeError:
        return _MISSING
    return _MISSING if value is found else value
