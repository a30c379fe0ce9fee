"""Finalizers: may letting go of a value run code?

Plain Python frees a local's old value at the ``del`` or at the store that rebinds it, and an
object's death may run code (``__del__``, a weakref callback, a code object's free functions,
a generator's ``close()``). The translator only simulates those stores; the transformed code lets
go of the values later, where the graph ends. So for each ``del x`` / ``x = ...`` the translator
asks `drop_may_run_code` whether the old value may hold the last reference to such an object;
if so, the graph ends right there (`InstructionTranslator.check_drop`). Likewise for an
attribute store that replaces an object's value (`instance_value`, `object_may_run_code`).

In: a tracker (or a real object) and which Sources the frame owns. Out: a yes/no; in a loop body
the answer is guarded (`judge_iteration_value`), since every iteration brings other values.
Looks at real objects by type only (``isinstance`` may run a proxy's code).
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from typing import Any, Callable

import numpy as np

from fx.names import held_by

from ..guards import Guard
from ..instructions import UNBOUND
from ..source import GetItemSource, Source
from .base import NullVariable, VariableTracker
from .callables import BuiltinVariable, MethodVariable, NumpyFunctionVariable, UserFunctionVariable
from .constant import ConstantVariable, SymIntVariable, UnspecializedScalarVariable
from .constant import _immutable as is_immutable
from .containers import DictVariable, _Sequence
from .functions import NestedFunctionVariable
from .lazy import LazyVariable
from .ndarray import NDArrayVariable

__all__ = ["drop_may_run_code", "object_may_run_code", "instance_value", "judge_iteration_value",
           "ABSENT", "UNKNOWN"]

#: (`instance_value`) the object holds nothing under the name itself
ABSENT = object()


#: (`instance_value`) what it holds cannot be read without running code
UNKNOWN = object()


_TYPE_DICT = type.__dict__["__dict__"]


def instance_value(obj: Any, name: str) -> Any:
    """What `obj` holds under `name` itself (not its class), read without running the user's
    code and without making its ``__dict__`` (3.11+ keeps an instance's attributes without a
    dict object until one is asked for: making one shows in the garbage collector's counts);
    `ABSENT` when it holds nothing there, `UNKNOWN` when that cannot be read safely."""
    typ = type(obj)
    found = ABSENT  # (the class attribute of that name)
    has_dict = False
    for klass in typ.__mro__:
        # (the class's own namespace: vars() reads ``__dict__``, which a metaclass may define)
        namespace = _TYPE_DICT.__get__(klass, type)
        if found is ABSENT and name in namespace:
            found = namespace[name]
        has_dict = has_dict or "__dict__" in namespace
    if found is not ABSENT:
        kind = type(found)
        if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
            return ABSENT  # (a property or slot: the write goes through it, no instance value)
        if hasattr(kind, "__get__") and not issubclass(
                kind, (types.FunctionType, staticmethod, classmethod)):
            return UNKNOWN  # (reading would run its __get__)
    if not has_dict:
        return ABSENT
    try:
        value = object.__getattribute__(obj, name)
    except AttributeError:
        return ABSENT
    if found is not ABSENT and (value is found or value is getattr(found, "__func__", None)
                                 or type(value) is types.MethodType):
        return ABSENT  # (the class's attribute, not one of the instance)
    return value

#: Values whose death runs no code and that hold no other object.
_INERT_TYPES = (int, float, complex, bool, str, bytes, type(None), range, slice)
#: Objects whose death may run code of their own, or other extensions' (a code object's
#: co_extra free functions; a function or method holds a code object; a generator's close()).
_DEATH_RUNS_CODE = (types.FunctionType, types.CodeType, types.MethodType, types.GeneratorType,
                    types.CoroutineType, types.AsyncGeneratorType, types.FrameType)
#: Objects looked at per check before giving up (and ending the graph).
_DROP_BUDGET = 256


def drop_may_run_code(vt: Any, owns: Callable[[Source], bool], depth: int = 0,
                       judge: Callable[[Any], bool] | None = None) -> bool:
    """Whether letting go of `vt` may free an object whose death runs code (`InstructionTranslator.check_drop`). A
    value read from a source the frame does not own is held there too; arrays and symbolic
    scalars are not looked at (deleting arrays is common and their death runs nothing).
    `judge`, when given, decides for an argument the frame owns, instead of a look at its value
    (`judge_iteration_value`)."""
    if isinstance(vt, LazyVariable):
        if not owns(vt.source):
            return False
        return judge(vt) if judge is not None else object_may_run_code(vt.value)
    if isinstance(vt, (NDArrayVariable, SymIntVariable, UnspecializedScalarVariable,
                       NullVariable)):
        return False
    source = getattr(vt, "source", None)
    if source is not None and not owns(source):
        return False
    if isinstance(vt, ConstantVariable):
        return not is_immutable(vt.value) and object_may_run_code(vt.value)
    if isinstance(vt, (_Sequence, DictVariable)):
        items = vt.items.values() if isinstance(vt, DictVariable) else vt.items
        return depth > 4 or any(drop_may_run_code(item, owns, depth + 1, judge)
                                for item in items)
    if isinstance(vt, (BuiltinVariable, NumpyFunctionVariable)):
        return False  # (a builtin, ufunc or NumPy function: its module holds it)
    if isinstance(vt, MethodVariable):  # (``x.sum``: an array's method)
        return drop_may_run_code(vt.obj, owns, depth + 1, judge)
    if isinstance(vt, NestedFunctionVariable):
        # (its code is a constant of this code, its cells the frame's: only its defaults may
        # hold something of the frame's own)
        parts = [part for part in (vt.defaults, vt.kwdefaults)  # (trackers, or None)
                 if isinstance(part, VariableTracker)]
        return depth > 4 or any(drop_may_run_code(part, owns, depth + 1, judge)
                                for part in parts)
    if isinstance(vt, UserFunctionVariable) and _module_attribute(vt.fn):
        bound = getattr(vt, "bound_self", None)
        return bound is not None and drop_may_run_code(bound, owns, depth + 1, judge)
    if "value" in getattr(vt, "__dict__", ()):  # (the object a tracker stands for)
        return object_may_run_code(vt.value)
    return True  # (a tracker for something made in the frame: unknown)


def _module_attribute(fn: Any) -> bool:
    """`fn` is what its module's namespace holds under its name (so dropping a reference to it
    frees nothing)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return module is not None and held_by(module, getattr(fn, "__name__", "")) is fn


def object_may_run_code(obj: Any) -> bool:
    """Whether freeing `obj` may run code: it, or an object it references (looked at up to
    `_DROP_BUDGET` objects), has a finalizer or weak references, or is a function, code
    object or generator. Classes and modules are held by their modules and not looked at."""
    seen: set[int] = set()
    work = [obj]
    budget = _DROP_BUDGET
    while work:
        item = work.pop()
        # (type-based checks only: isinstance() reads an object's __class__, which runs code
        # for a proxy, and raises ReferenceError for a weakref.proxy whose referent died)
        typ = type(item)
        if id(item) in seen or typ in _INERT_TYPES or issubclass(
                typ, (type, types.ModuleType, types.BuiltinFunctionType)):
            continue
        seen.add(id(item))
        budget -= 1
        if budget < 0 or issubclass(typ, _DEATH_RUNS_CODE) or hasattr(typ, "__del__"):
            return True
        try:
            if weakref.getweakrefcount(item):
                return True
        except TypeError:  # (not weakly referenceable)
            pass
        if issubclass(typ, (np.ndarray, np.generic)):
            continue  # (an array's base is an array or a buffer: nothing runs when it dies)
        work.extend(gc.get_referents(item))
    return False


def judge_iteration_value(tx, vt: LazyVariable) -> bool:
    """(`InstructionTranslator.check_drop` in a loop body function or its continuations)
    Whether dropping `vt`, an argument, may run code, decided so that it holds for every call: these
    frames get other values on every iteration (the driver hands the locals the body
    rebinds over, `loops.LoopPlan.handed_over`), and a look at this call's value would
    decide for all of them. So the value's type is guarded where it settles the question
    (the marker of a kept local no iteration assigned yet; an int, a float, a string, a
    NumPy scalar or array, whose death runs nothing, see `drop_may_run_code`; a short
    tuple of those), and anything else may run code (the graph ends at the store; its type
    is guarded as well)."""
    value = vt.value
    if value is UNBOUND:
        tx.output.add_guard(Guard(vt.source, "ID_MATCH", Guard.identity(UNBOUND)))
        return False

    def settled(v: Any) -> bool:  # (type-based: see object_may_run_code)
        return type(v) in _INERT_TYPES or issubclass(type(v), (np.number, np.bool_)) or (
            type(v) is np.ndarray and not weakref.getweakrefcount(v))

    if settled(value):
        tx.output.add_guard(Guard(vt.source, "TYPE_MATCH", type(value)))
        return False
    if type(value) is tuple and len(value) <= 8 and all(map(settled, value)):
        tx.output.add_guard(Guard(vt.source, "SEQUENCE_LENGTH", (tuple, len(value))))
        for i, item in enumerate(value):
            tx.output.add_guard(Guard(GetItemSource(vt.source, i), "TYPE_MATCH",
                                        type(item)))
        return False
    # (guarded too, though breaking is right for any value: else the version would also
    # take the first iteration's marker, and a next call would run other versions than the
    # first one did, and compile again)
    tx.output.add_guard(Guard(vt.source, "TYPE_MATCH", type(value)))
    return True
