"""Guards: the conditions under which a compiled frame may be reused.

The translator records a `Guard` for every input it actually used (`VariableBuilder` does it when
it wraps a real value). `build_check_fn` (called by `compile_frame` for every compiled frame)
turns the ordered set into two equivalent things:

* readable Python text, compiled into one function

      def ___check_f_0(x, y, ___globals, ___closure):
          return (___type(x) is ___ndarray and ... )

  whose parameters are the frame's argument slots (in order), its globals dict and its closure;
  each guard kind is a method of `GuardBuilder` named after the kind;
* a `_C.GuardSet`: the same checks as a program the C hook evaluates straight on the frame's
  argument slots (no tuple, dict or Python frame per call). `GuardLowering` emits one C check
  per Python check, so both stop, fail and raise at the same place; a kind or source it does not
  lower runs that guard's own Python text from C (new kinds need only a `GuardBuilder` method).

`build_check_fn` returns the GuardSet, callable from Python like the function
(``check(*arg_slots, globals, closure) -> bool``) and carrying its description: ``.source`` (the
Python text), ``.guards`` (one line per guard), ``.guard_objects``, ``.python_fn`` and
``.first_failure(*args)`` (the first failing guard in plain words, for recompile reasons and the
cache-limit warning: ``x.shape[0]: expected 1024, got 2048``). With
``dynamo.config.guard_self_check`` the hook evaluates both forms on every call and raises
AssertionError naming the guard when they disagree (the test suite runs in that mode).
"""

from __future__ import annotations

import itertools
import math
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import _C
from .constant_copies import detached
from .source import (AttrSource, ClosureSource, GetItemSource, GlobalSource, LocalSource, Source,
                     guard_parameter)

__all__ = ["Guard", "GuardBuilder", "build_check_fn", "guard_lines"]


class _Identity:
    """Hashable by identity: lets an arbitrary object be the expected value of an ID guard."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class _Weak:
    """A guard's expected object held weakly (`_weakened`): a class, function or object the
    program can drop (made by a call: ``class C`` in a function body, a closure), which a strong
    reference from a cached guard would keep alive: its weak references would never die and
    its finalizers never run, as they do in plain Python. Once it died, the guard fails (no
    value can be it any more)."""

    __slots__ = ("ref", "__weakref__")

    def __init__(self, obj: object) -> None:
        self.ref = weakref.ref(obj)

    @property
    def obj(self) -> object:
        return self.ref()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Weak) and other.ref == self.ref

    def __hash__(self) -> int:
        return hash(self.ref)


@dataclass(frozen=True)
class Guard:
    """`kind` names a `GuardBuilder` method; `expected` is what it compares against."""

    source: Source
    kind: str
    expected: Any = None
    order: int = field(default=0, compare=False)

    @staticmethod
    def identity(obj: object) -> _Identity:
        return _Identity(obj)


_SIMPLE_CONSTANT_TYPES = (int, str, bool, type(None), bytes)
#: constants whose equal values can differ in what they show: ``range(0) == range(-10)`` (both
#: empty) but their ``stop`` differs; ``slice(0, 1) == slice(False, True) == slice(0.0, 1)``.
#: Their guard checks each part as a constant of its own (parts of other types: by identity).
_COMPOUND_CONSTANT_TYPES = (range, slice)
_PART_CONSTANT_TYPES = (*_SIMPLE_CONSTANT_TYPES, float, complex)


def _constant_parts(value: range | slice) -> list[tuple[str, object, bool]]:
    """(attribute, part, whether the part is compared as a constant or by identity)."""
    return [(name, part, type(part) in _PART_CONSTANT_TYPES)
            for name in ("start", "stop", "step") for part in [getattr(value, name)]]


class GuardBuilder:
    """Turns guards into Python expressions; objects they compare with become globals."""

    def __init__(self) -> None:
        # Builtins under names no parameter can shadow (a frame may have a local called `type`).
        self.scope: dict[str, object] = {"___ndarray": np.ndarray, "___copysign": math.copysign,
                                         "___type": type, "___len": len, "___repr": repr,
                                         "___id": id, "___tuple": tuple,
                                         "___lacks_attribute": _C.lacks_attribute}
        self._names: dict[int, str] = {}
        self._counter = itertools.count()

    def const(self, obj: object, hint: str) -> str:
        """A global name for `obj` inside the guard function."""
        key = id(obj)
        if key not in self._names:
            safe = "".join(ch if ch.isalnum() else "_" for ch in hint)[:30]
            name = f"___{safe}" if f"___{safe}" not in self.scope else f"___{safe}_{next(self._counter)}"
            self._names[key] = name
            self.scope[name] = obj
        return self._names[key]

    def checks(self, guard: Guard) -> list[str]:
        return getattr(self, guard.kind)(guard.source.guard_expr(), guard.expected)

    # One method per guard kind; each returns the guard's checks, cheapest and most basic first.

    def TYPE_MATCH(self, e: str, expected: type | _Weak) -> list[str]:
        if isinstance(expected, _Weak):  # (a weak reference: called, None once it died)
            name = self.const(expected.ref, expected.obj.__name__ + "_ref")
            return [f"___type({e}) is {name}()"]
        return [f"___type({e}) is {self.const(expected, expected.__name__)}"]

    def ID_MATCH(self, e: str, expected: _Identity | _Weak) -> list[str]:
        obj = expected.obj
        hint = getattr(obj, '__name__', type(obj).__name__)
        if isinstance(expected, _Weak):
            return [f"{e} is {self.const(expected.ref, hint + '_ref')}() is not None"]
        return [f"{e} is {self.const(obj, hint)}"]

    def FUNCTION_MATCH(self, e: str, expected: tuple[_Identity, _Identity]) -> list[str]:
        code, namespace = expected[0].obj, expected[1].obj
        return [f"___type({e}) is {self.const(types.FunctionType, 'function')}",
                f"{e}.__code__ is {self.const(code, code.co_name + '_code')}",
                f"{e}.__globals__ is {self.const(namespace, 'function_globals')}"]

    def CONSTANT_MATCH(self, e: str, expected: tuple[type, object]) -> list[str]:
        typ, value = expected
        if value is None:
            return [f"{e} is None"]
        checks = [f"___type({e}) is {self.const(typ, typ.__name__)}"]
        if typ in _COMPOUND_CONSTANT_TYPES:
            for name, part, constant in _constant_parts(value):
                checks += (self.CONSTANT_MATCH(f"{e}.{name}", (type(part), part)) if constant
                           else [f"{e}.{name} is {self.const(part, name)}"])
        elif typ is float and value != value:
            # NaNs carry a sign too (np.copysign, np.signbit and x * nan show it)
            checks.append(f"{e} != {e}")
            checks.append(f"___copysign(1.0, {e}) == {math.copysign(1.0, value)!r}")
        elif typ is float and value == 0.0:
            # 0.0 == -0.0, but the sign shows in results (1/x, x * -0.0): check it too.
            checks.append(f"{e} == 0.0")
            checks.append(f"___copysign(1.0, {e}) == {math.copysign(1.0, value)!r}")
        elif typ is complex:
            # repr keeps the sign of zero parts and NaNs, which == does not.
            checks.append(f"___repr({e}) == {repr(value)!r}")
        elif typ is int and value.bit_length() > 64:
            # (compared with the object: the repr of a very long int raises ValueError past
            # sys.get_int_max_str_digits())
            checks.append(f"{e} == {self.const(value, 'value')}")
        elif typ in _SIMPLE_CONSTANT_TYPES or (typ is float and abs(value) != float("inf")):
            checks.append(f"{e} == {value!r}")
        else:
            checks.append(f"{e} == {self.const(value, 'value')}")
        return checks

    def NDARRAY_MATCH(self, e: str, expected: tuple[np.dtype, tuple[int, ...], bool]) -> list[str]:
        dtype, shape, contiguous = expected
        d = self.const(dtype, dtype.name)
        checks = [f"___type({e}) is ___ndarray", f"({e}.dtype is {d} or {e}.dtype == {d})"]
        if None not in shape:
            checks.append(f"{e}.shape == {shape!r}")
        else:  # dynamic dimensions (None): any size >= 2
            checks.append(f"{e}.ndim == {len(shape)}")
            checks.extend(f"{e}.shape[{i}] {'>= 2' if n is None else f'== {n}'}"
                          for i, n in enumerate(shape))
        if contiguous:
            checks.append(f"{e}.flags.c_contiguous")
        return checks

    def SAME_OBJECT(self, e: str, expected: Source) -> list[str]:
        # Two inputs that were one mutable object (a list passed twice): the translator tracks
        # it once, so a change through one is seen through the other.
        return [f"{e} is {expected.guard_expr()}"]

    def DISTINCT_OBJECTS(self, e: str, expected: tuple[Source, ...]) -> list[str]:
        # Inputs that were different mutable objects of one type: tracked apart, so no two of
        # them may be one object on a later call (one check, linear in their number).
        items = ", ".join(source.guard_expr() for source in expected)
        return [f"___len({{___id(___o) for ___o in ({items},)}}) == {len(expected)}"]

    def INT_AT_LEAST(self, e: str, expected: int) -> list[str]:
        # An int argument kept symbolic (`OutputGraph.int_symbol`): any int from `expected` on.
        return [f"___type({e}) is {self.const(int, 'int')}", f"{e} >= {expected!r}"]

    def SIZE_FACT(self, e: str, expected: str) -> list[str]:
        # A condition over input sizes that a compile with dynamic shapes relied on; `expected`
        # is its Python text (``x.shape[0] == y.shape[0]``), evaluated after the shape guards.
        return [expected]

    def SEQUENCE_LENGTH(self, e: str, expected: tuple[type, int]) -> list[str]:
        typ, length = expected
        return [f"___type({e}) is {self.const(typ, typ.__name__)}", f"___len({e}) == {length}"]

    def DICT_KEYS(self, e: str, expected: tuple[type, tuple]) -> list[str]:
        # The keys in their order: iterating the dict (list(d), d.items(), ...) shows it.
        typ, keys = expected
        return [f"___type({e}) is {self.const(typ, typ.__name__)}",
                f"___tuple({e}) == {self.const(keys, 'keys')}"]

    def NOT_IN_GLOBALS(self, e: str, expected: str) -> list[str]:
        # `e` is ``___globals['name']``; the name must keep resolving to the builtin.
        return [f"{expected!r} not in ___globals"]

    def NOT_IN_DICT(self, e: str, expected: str) -> list[str]:
        # `e` is another module's globals (a function inlined from there): the name must keep
        # resolving to the builtin.
        return [f"{expected!r} not in {e}"]

    def NO_ATTRIBUTE(self, e: str, expected: str) -> list[str]:
        # ``hasattr(obj, name)`` was False (or getattr() took its default): still no such
        # attribute, in the object's __dict__ or its class's MRO, known without running code.
        return [f"___lacks_attribute({e}, {expected!r})"]



# Lowering to the C program ----------------------------------------------------------------------

# Step kinds and operations of csrc/guards.c (keep in sync with its enums).
_ARG, _GLOBALS, _GLOBAL, _CLOSURE, _ATTR, _ITEM = range(6)
(_TYPE_IS, _IS, _EQ, _NAN, _COPYSIGN, _REPR_EQ, _FUNC_CODE, _FUNC_GLOBALS, _DTYPE, _SHAPE,
 _C_CONTIG, _LEN, _KEYS, _NOT_IN, _PYTHON, _NDIM, _DIM, _SAME_AS, _INT_GE, _TYPE_IS_WEAK,
 _IS_WEAK, _NO_ATTR) = range(22)

_Check = tuple  # (op, path, obj, obj2, n, guard_index): one C check


class GuardLowering:
    """Turns a guard into C checks, one per check `GuardBuilder` writes for it, or None when its
    kind or source is not lowered (the guard then runs its own Python text, called from C)."""

    def __init__(self, argnames: list[str]) -> None:
        self.arg_index = {name: i for i, name in reversed(list(enumerate(argnames)))}

    def path(self, source: Source) -> tuple | None:
        if isinstance(source, LocalSource):
            index = self.arg_index.get(source.local_name)
            return None if index is None else ((_ARG, index),)
        if isinstance(source, GlobalSource):
            return ((_GLOBAL, source.global_name),)
        if isinstance(source, ClosureSource):
            return ((_CLOSURE, source.index),)
        if (isinstance(source, AttrSource) and type(source.attr) is str
                and source.attr.isidentifier()):
            base = self.path(source.base)
            return None if base is None else base + ((_ATTR, source.attr),)
        if isinstance(source, GetItemSource) and type(source.index) in (int, str):
            # The text spells the key as its repr, which gives back an equal int or str.
            base = self.path(source.base)
            return None if base is None else base + ((_ITEM, source.index),)
        return None

    def lower(self, guard: Guard) -> list[tuple] | None:
        """[(op, path, obj, obj2, n), ...] or None."""
        method = getattr(self, guard.kind, None)
        if method is None:
            return None
        if guard.kind == "NOT_IN_GLOBALS":
            return method(((_GLOBALS, None),), guard.expected)
        path = self.path(guard.source)
        return None if path is None else method(path, guard.expected)

    def TYPE_MATCH(self, p, expected):
        if isinstance(expected, _Weak):
            return [(_TYPE_IS_WEAK, p, expected.ref, None, 0)]
        return [(_TYPE_IS, p, expected, None, 0)]

    def ID_MATCH(self, p, expected):
        if isinstance(expected, _Weak):
            return [(_IS_WEAK, p, expected.ref, None, 0)]
        return [(_IS, p, expected.obj, None, 0)]

    def FUNCTION_MATCH(self, p, expected):
        return [(_TYPE_IS, p, types.FunctionType, None, 0),
                (_FUNC_CODE, p, expected[0].obj, None, 0),
                (_FUNC_GLOBALS, p, expected[1].obj, None, 0)]

    def CONSTANT_MATCH(self, p, expected):
        typ, value = expected
        if value is None:
            return [(_IS, p, None, None, 0)]
        checks = [(_TYPE_IS, p, typ, None, 0)]
        if typ in _COMPOUND_CONSTANT_TYPES:
            for name, part, constant in _constant_parts(value):
                part_path = p + ((_ATTR, name),)
                checks += (self.CONSTANT_MATCH(part_path, (type(part), part)) if constant
                           else [(_IS, part_path, part, None, 0)])
        elif typ is float and value != value:
            checks.append((_NAN, p, None, None, 0))
            checks.append((_COPYSIGN, p, None, None, int(math.copysign(1.0, value))))
        elif typ is float and value == 0.0:
            checks.append((_EQ, p, 0.0, None, 0))
            checks.append((_COPYSIGN, p, None, None, int(math.copysign(1.0, value))))
        elif typ is complex:
            checks.append((_REPR_EQ, p, repr(value), None, 0))
        else:  # the text compares with the literal (its repr) or the object: both equal `value`
            checks.append((_EQ, p, value, None, 0))
        return checks

    def NDARRAY_MATCH(self, p, expected):
        dtype, shape, contiguous = expected
        shape = tuple(shape)
        if not all(type(size) is int or size is None for size in shape):
            return None
        checks = [(_TYPE_IS, p, np.ndarray, None, 0), (_DTYPE, p, dtype, None, 0)]
        if None not in shape:
            checks.append((_SHAPE, p, shape, None, 0))
        else:  # `x.ndim == 2`, then `x.shape[i] >= 2` (dynamic) or `x.shape[i] == n`, per size
            checks.append((_NDIM, p, None, None, len(shape)))
            checks.extend((_DIM, p, i, None, -1 if n is None else n) for i, n in enumerate(shape))
        if contiguous:
            checks.append((_C_CONTIG, p, None, None, 0))
        return checks

    def INT_AT_LEAST(self, p, expected):
        return [(_TYPE_IS, p, int, None, 0), (_INT_GE, p, None, None, expected)]

    def SEQUENCE_LENGTH(self, p, expected):
        typ, length = expected
        return [(_TYPE_IS, p, typ, None, 0), (_LEN, p, None, None, length)]

    def DICT_KEYS(self, p, expected):
        typ, keys = expected
        if type(keys) is not tuple:
            return None
        return [(_TYPE_IS, p, typ, None, 0), (_KEYS, p, keys, None, 0)]

    def SAME_OBJECT(self, p, expected):
        other = self.path(expected)
        return None if other is None else [(_SAME_AS, p, other, None, 0)]

    def NOT_IN_GLOBALS(self, p, expected):
        return [(_NOT_IN, p, expected, None, 0)]

    def NOT_IN_DICT(self, p, expected):
        return [(_NOT_IN, p, expected, None, 0)]

    def NO_ATTRIBUTE(self, p, expected):
        return [(_NO_ATTR, p, expected, None, 0)]


def _layout_probe() -> bool:
    a = np.zeros((2, 3))
    return _C.set_ndarray_layout(np.ndarray, a, a.T)


#: Whether guards read ndarrays' dtype/shape/flags from the struct (checked once on real arrays).
NDARRAY_FAST_PATH = _layout_probe()


def _weakened(guard: Guard) -> Guard:
    """`guard`, holding its expected object weakly (`_Weak`) when the program may drop it, and
    an equal copy of a constant (`detached`) instead of the program's own object."""
    if guard.kind == "CONSTANT_MATCH":
        typ, value = guard.expected
        return Guard(guard.source, guard.kind, (typ, detached(value)), guard.order)
    if guard.kind == "TYPE_MATCH":
        obj = guard.expected
    elif guard.kind == "ID_MATCH":
        obj = guard.expected.obj
    else:
        return guard
    if not _mortal(obj):
        return guard
    return Guard(guard.source, guard.kind, _Weak(obj), guard.order)


_TYPE_DICT = type.__dict__["__dict__"]
_MODULE_DICT = types.ModuleType.__dict__["__dict__"]


def _mortal(obj: object) -> bool:
    """Whether the program may drop `obj` while a guard on it is cached: a class or function
    that is not what its module holds under its qualified name (made by a call), an object
    of a Python class, a module that is not the one sys.modules holds under its name (imported
    afresh: test.support's import_fresh_module; CPython's test_struct checks that such a
    module dies) and a builtin function of such a module. (Imported modules, builtins,
    NumPy's callables and module-level classes and functions live as long as their modules:
    held strongly.) Read without running the program's code."""
    typ = type(obj)
    if issubclass(typ, types.ModuleType):
        name = _MODULE_DICT.__get__(obj, types.ModuleType).get("__name__")
        return not (isinstance(name, str) and sys.modules.get(name) is obj)
    if typ is types.BuiltinFunctionType:
        owner = obj.__self__
        return isinstance(owner, types.ModuleType) and _mortal(owner)
    if typ is types.FunctionType:
        return not _held_by_module(obj, obj.__module__)
    if issubclass(typ, type):
        if not obj.__flags__ & _HEAPTYPE:
            return False  # (a static type: int, np.ndarray)
        return not _held_by_module(obj, _TYPE_DICT.__get__(obj, type).get("__module__"))
    if not typ.__flags__ & _HEAPTYPE:
        return False  # (an object of a C type)
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def _held_by_module(obj: object, module_name: Any) -> bool:
    """`obj` is what its module holds under its qualified name (``pkg.mod``, ``Outer.f``)."""
    held: Any = sys.modules.get(module_name) if isinstance(module_name, str) else None
    for part in (getattr(obj, "__qualname__", None) or "").split("."):
        if held is None or part == "<locals>":
            return False
        if isinstance(held, types.ModuleType):
            held = held.__dict__.get(part)
        elif isinstance(held, type):
            held = _TYPE_DICT.__get__(held, type).get(part)
        else:
            return False
    return held is obj


_HEAPTYPE = 1 << 9


def _hashable(value: Any) -> Any:
    """A dict key for a guard's expected value (slices are unhashable before Python 3.12)."""
    try:
        hash(value)
        return value
    except TypeError:
        return (type(value), repr(value))


def _depth(source: Source) -> int:
    depth = 0
    while isinstance(source, (AttrSource, GetItemSource)):
        source, depth = source.base, depth + 1
    return depth


_check_counter = itertools.count()


def _fn_text(fn_name: str, names: list[str], parts: list[str]) -> str:
    body = " and\n            ".join(parts) if parts else "True"
    return (
        f"def {fn_name}({', '.join(names)}):\n"
        f"    try:\n"
        f"        return ({body})\n"
        f"    except Exception:\n"
        f"        return False\n"
    )


def build_check_fn(guards: list[Guard], argnames: list[str], code_name: str,
                   filename: str | None = None) -> Callable[..., bool]:
    """Compile `guards` into a `_C.GuardSet` over (argument slots..., globals, closure) that
    carries the equivalent Python function and its text (see the module docstring). With
    `filename` (the dump directory's guards.py), the text is written there and compiled from
    it, so a debugger steps through the Python guards at their lines."""
    builder = GuardBuilder()
    # A base object's type is checked before its items and attributes are read.
    unique: dict[tuple, Guard] = {}
    for g in guards:
        unique.setdefault((g.source, g.kind, _hashable(g.expected)), g)
    ordered = [_weakened(g) for g in sorted(unique.values(),
                                           key=lambda g: (_depth(g.source), g.order))]
    per_guard = [builder.checks(g) for g in ordered]
    parts = [check for checks in per_guard for check in checks]
    names = [*map(guard_parameter, argnames), "___globals", "___closure"]
    fn_name = f"___check_{''.join(ch if ch.isalnum() else '_' for ch in code_name)}_{next(_check_counter)}"
    source = _fn_text(fn_name, names, parts)

    lowering = GuardLowering(argnames)
    program: list[tuple] = []
    fallbacks: dict[int, str] = {}  # guard index -> name of its own Python function
    fallback_text = []
    for i, (guard, checks) in enumerate(zip(ordered, per_guard)):
        lowered = lowering.lower(guard)
        if lowered is not None and len(lowered) != len(checks):
            lowered = None  # a lowering must mirror the text check by check
        if lowered is None:
            fallbacks[i] = f"{fn_name}_guard{i}"
            fallback_text.append(_fn_text(fallbacks[i], names, checks))
        else:
            program.extend(op + (i,) for op in lowered)
            continue
        program.append((_PYTHON, (), fallbacks[i], None, 0, i))  # the name is replaced below
    scope = dict(builder.scope)
    text = source + "".join(fallback_text)
    if filename is not None:
        try:
            with open(filename, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            filename = None
    exec(compile(text, filename or f"<guards {fn_name}>", "exec"), scope)
    python_fn = scope.pop(fn_name)  # not left in its own globals: that would be a cycle
    for i, name in fallbacks.items():
        fn = scope.pop(name)
        program = [(op, path, fn if op == _PYTHON and guard_i == i else obj, obj2, n, guard_i)
                   for op, path, obj, obj2, n, guard_i in program]
    python_fn.source = source
    try:
        check_fn = _C.GuardSet(len(argnames), program, python_fn)
    except (TypeError, ValueError, OverflowError):
        # An operand the C program refuses (validated there): evaluate the Python text from C.
        check_fn = _C.GuardSet(len(argnames), [(_PYTHON, (), python_fn, None, 0, 0)], python_fn)
    check_fn.source = source
    check_fn.guard_objects = ordered
    check_fn.guards = [f"{' and '.join(checks)}    # {g.source.name()}: {g.kind}"
                       for g, checks in zip(ordered, per_guard)]
    check_fn.lowered = [i not in fallbacks for i in range(len(ordered))]

    def env_for(args: tuple) -> dict:
        env = dict(builder.scope)
        env.update(zip(names, args))
        return env

    def python_verdicts(args: tuple) -> int | None:
        """Index of the first guard whose Python checks fail (None: all pass)."""
        env = env_for(args)
        for i, checks in enumerate(per_guard):
            for part in checks:
                try:
                    ok = eval(part, env)
                except Exception:
                    return i
                if not ok:
                    return i
        return None

    def first_failure(*args: object) -> str | None:
        """The first guard that fails for these argument slots, globals and closure, in plain
        words with the actual value (``x.dtype: expected float64, got float32``) and the check
        that failed, or None when all pass."""
        index = python_verdicts(args)
        if index is None:
            return None
        env = env_for(args)
        guard, checks = ordered[index], per_guard[index]
        failed = checks[0]
        for part in checks:
            try:
                if not eval(part, env):
                    failed = part
                    break
            except Exception:
                failed = part
                break
        return f"{describe_failure(guard, env)} (guard: {failed})"

    def describe_mismatch(guard_set: Any, *args: object) -> str:
        """Which guard the C program and the Python text judge differently (self-check mode;
        the C side passes the set itself: a closure over it would be a reference cycle)."""
        c_check = guard_set.first_failing_check(*args)
        c_index = None if c_check < 0 else guard_set.guard_of_check(c_check)
        py_index = python_verdicts(args)
        candidates = [i for i in (c_index, py_index) if i is not None]
        if not candidates:
            return "both pass guard by guard (a guard with side effects?)"
        i = min(candidates)
        g = ordered[i]
        return (f"first differing guard #{i} ({g.source.name()}: {g.kind}, expected "
                f"{g.expected!r}): `{' and '.join(per_guard[i])}`; C: "
                f"{'fail' if c_index == i else 'pass'}, "
                f"Python: {'fail' if py_index == i else 'pass'}"
                f" ({'lowered to C' if i not in fallbacks else 'Python fallback'})")

    check_fn.first_failure = first_failure
    check_fn.describe_mismatch = describe_mismatch
    return check_fn


# Plain words for a failing guard ------------------------------------------------------------------


def plain_name(source: Source) -> str:
    """How the user would write the value: ``x``, ``self.w``, ``args[0]``, ``W`` (a global)."""
    if isinstance(source, LocalSource):
        return source.local_name
    if isinstance(source, GlobalSource):
        return source.global_name
    if isinstance(source, ClosureSource):
        return source.var_name
    if isinstance(source, AttrSource):
        return f"{plain_name(source.base)}.{source.attr}"
    if isinstance(source, GetItemSource):
        return f"{plain_name(source.base)}[{source.index!r}]"
    return source.name()


def _short(obj: object) -> str:
    if isinstance(obj, types.ModuleType):
        return f"module {obj.__name__}"
    if isinstance(obj, type):
        return obj.__qualname__
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{type(obj).__name__} {getattr(obj, '__qualname__', '?')}"
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_failure(guard: Guard, env: dict) -> str:
    """`guard` (known to fail in `env`, the guard function's namespace) in plain words:
    ``x.shape[0]: expected 1024, got 2048``; ``type(x): expected ndarray, got list``."""
    name = plain_name(guard.source)
    kind, expected = guard.kind, guard.expected
    if kind == "NOT_IN_GLOBALS":
        return f"global {expected}: expected no global of that name (the builtin), got one"
    try:
        value = eval(guard.source.guard_expr(), env)
    except Exception as exc:
        return f"{name}: could not be read ({type(exc).__name__}: {exc})"
    typ = type(value)

    def type_differs(want: type) -> str | None:
        if typ is not want:
            return f"type({name}): expected {want.__qualname__}, got {typ.__qualname__}"
        return None

    if isinstance(expected, _Weak):
        if expected.obj is None:
            return f"{name}: the object it was compiled for is gone (it died)"
        expected = expected.obj if kind == "TYPE_MATCH" else _Identity(expected.obj)
    if kind == "TYPE_MATCH":
        return type_differs(expected) or f"type({name}): expected {expected.__qualname__}"
    if kind == "ID_MATCH":
        return f"{name}: expected {_short(expected.obj)}, got {_short(value)}" + (
            " (another object)" if _short(expected.obj) == _short(value) else "")
    if kind == "FUNCTION_MATCH":
        code = expected[0].obj
        got = getattr(value, "__code__", None)
        if typ is not types.FunctionType:
            return type_differs(types.FunctionType)
        if got is not code:
            return (f"{name}: expected a function with the code of {code.co_name} "
                    f"({code.co_filename}:{code.co_firstlineno}), got {got.co_name} "
                    f"({got.co_filename}:{got.co_firstlineno})")
        return f"{name}: expected a function of the same module, got one with other globals"
    if kind == "CONSTANT_MATCH":
        want_type, want = expected
        if want is None:
            return f"{name}: expected None, got {_short(value)}"
        return type_differs(want_type) or f"{name}: expected {want!r}, got {value!r}"
    if kind == "NDARRAY_MATCH":
        dtype, shape, contiguous = expected
        differs = type_differs(np.ndarray)
        if differs:
            return differs
        if value.dtype != dtype:
            return f"{name}.dtype: expected {dtype}, got {value.dtype}"
        if value.ndim != len(shape):
            return (f"{name}.ndim: expected {len(shape)}, got {value.ndim} (shape {tuple(shape)} "
                    f"vs {value.shape})")
        for i, (want, got) in enumerate(zip(shape, value.shape)):
            if want is None and got < 2:
                return f"{name}.shape[{i}]: expected a size >= 2 (dynamic), got {got}"
            if want is not None and want != got:
                return f"{name}.shape[{i}]: expected {want}, got {got}"
        if contiguous and not value.flags.c_contiguous:
            return f"{name}: expected a C-contiguous array, got strides {value.strides}"
    if kind == "INT_AT_LEAST":
        return type_differs(int) or (f"{name}: expected an int >= {expected} (symbolic), "
                                     f"got {value!r}")
    if kind == "SEQUENCE_LENGTH":
        want_type, length = expected
        return type_differs(want_type) or f"len({name}): expected {length}, got {len(value)}"
    if kind == "DICT_KEYS":
        want_type, keys = expected
        return type_differs(want_type) or (
            f"{name}'s keys: expected {list(keys)!r}, got {list(value)!r} (in this order)")
    if kind == "NOT_IN_DICT":
        return f"{name}: expected no entry {expected!r} (the builtin), got one"
    if kind == "SIZE_FACT":
        return f"{expected}: expected true, got {value!r}"
    if kind == "SAME_OBJECT":
        return f"{name}: expected the same object as {plain_name(expected)}, got another one"
    if kind == "DISTINCT_OBJECTS":
        return (f"{', '.join(plain_name(s) for s in expected)}: expected different objects, "
                "got one object twice")
    return f"{name}: {kind} guard failed (expected {expected!r})"


def guard_lines(check_fn: Any) -> list[str]:
    """One line per guard of a check function: its Python text, where it is evaluated."""
    lines = list(getattr(check_fn, "guards", []))
    lowered = getattr(check_fn, "lowered", None)
    if lowered is None or len(lowered) != len(lines):
        return lines
    return [f"{'[C]' if in_c else '[Python]':<8} {line}" for line, in_c in zip(lines, lowered)]
