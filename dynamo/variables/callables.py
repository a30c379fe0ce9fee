"""Callable values: NumPy functions and ufuncs, modules, builtins, methods, user functions.

Calls on graph values become graph nodes (through `OutputGraph`); calls whose arguments are all
Python constants and that are known to be pure run at trace time.
"""

from __future__ import annotations

import functools
import inspect
import operator
import sys
import types
from types import ModuleType
from typing import Any, Callable

import numpy as np

from fx.names import numpy_path
from fx import op_rules

from .. import instructions as ins
from ..exc import Unsupported
from ..guards import Guard
from ..markers import graph_break
from ..source import AttrSource
from . import numpy_facts
from .base import VariableTracker
from .builtin_rules import (BUILTIN_RULES, CONSUMERS, OPERATOR_INPLACE, OPERATOR_MUTATORS,
                            PURE_BUILTINS, PURE_MODULES, all_constant, constant_call)
from .constant import ConstantVariable, user_error
from .containers import (DictVariable, IteratorVariable, ListReverseIteratorVariable, ListVariable,
                         TupleVariable)
from .ndarray import NDArrayVariable
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
            if all_constant(args, kwargs):
                return constant_call(self.fn, args, kwargs)
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
        if pure and all_constant(args, kwargs):
            return constant_call(self.fn, args, kwargs)
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
        if self.cls.__new__ is not BaseException.__new__:
            # (``OSError(errno.EEXIST, ...)`` is a FileExistsError: OSError's own __new__)
            raise Unsupported(f"the type of {self.describe()}: its class picks the type of "
                              "its instances")
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
        if not all_constant(args, kwargs):
            raise Unsupported(f"{self.describe()} called with traced values")
        return constant_call(getattr(self.value, self.name), args, kwargs)

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
