"""Guards: the conditions under which a compiled frame may be reused.

The translator records a `Guard` for every input it actually used (`VariableBuilder` does it when
it wraps a real value). `build_check_fn` turns the set into ONE Python function,

    def ___check_f_0(x, y, ___globals, ___closure):
        return (type(x) is ___ndarray and ... )

whose parameters are the frame's argument slots (in order), its globals dict and its closure: the C
hook calls it with exactly those values on every call. Each guard kind is a method of
`GuardBuilder` named after the kind. The function carries its own description: ``.source`` (the
Python text), ``.guards`` (one line per guard) and ``.first_failure(*args)`` (the first guard that
fails for some inputs, used for recompile reasons).
"""

from __future__ import annotations

import itertools
import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .source import AttrSource, GetItemSource, Source, guard_parameter

__all__ = ["Guard", "GuardBuilder", "build_check_fn"]


class _Identity:
    """Hashable by identity: lets an arbitrary object be the expected value of an ID guard."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


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


class GuardBuilder:
    """Turns guards into Python expressions; objects they compare with become globals."""

    def __init__(self) -> None:
        # Builtins under names no parameter can shadow (a frame may have a local called `type`).
        self.scope: dict[str, object] = {"___ndarray": np.ndarray, "___copysign": math.copysign,
                                         "___type": type, "___len": len, "___repr": repr}
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

    def TYPE_MATCH(self, e: str, expected: type) -> list[str]:
        return [f"___type({e}) is {self.const(expected, expected.__name__)}"]

    def ID_MATCH(self, e: str, expected: _Identity) -> list[str]:
        obj = expected.obj
        return [f"{e} is {self.const(obj, getattr(obj, '__name__', type(obj).__name__))}"]

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
        if typ is float and value != value:
            checks.append(f"{e} != {e}")
        elif typ is float and value == 0.0:
            # 0.0 == -0.0, but the sign shows in results (1/x, x * -0.0): check it too.
            checks.append(f"{e} == 0.0")
            checks.append(f"___copysign(1.0, {e}) == {math.copysign(1.0, value)!r}")
        elif typ is complex:
            # repr keeps the sign of zero parts and NaNs, which == does not.
            checks.append(f"___repr({e}) == {repr(value)!r}")
        elif typ in _SIMPLE_CONSTANT_TYPES or (typ is float and abs(value) != float("inf")):
            checks.append(f"{e} == {value!r}")
        else:
            checks.append(f"{e} == {self.const(value, 'value')}")
        return checks

    def NDARRAY_MATCH(self, e: str, expected: tuple[np.dtype, tuple[int, ...], bool]) -> list[str]:
        dtype, shape, contiguous = expected
        d = self.const(dtype, dtype.name)
        checks = [f"___type({e}) is ___ndarray", f"({e}.dtype is {d} or {e}.dtype == {d})", f"{e}.shape == {shape!r}"]
        if contiguous:
            checks.append(f"{e}.flags.c_contiguous")
        return checks

    def SEQUENCE_LENGTH(self, e: str, expected: tuple[type, int]) -> list[str]:
        typ, length = expected
        return [f"___type({e}) is {self.const(typ, typ.__name__)}", f"___len({e}) == {length}"]

    def DICT_KEYS(self, e: str, expected: tuple[type, frozenset]) -> list[str]:
        typ, keys = expected
        return [f"___type({e}) is {self.const(typ, typ.__name__)}", f"{e}.keys() == {self.const(keys, 'keys')}"]

    def NOT_IN_GLOBALS(self, e: str, expected: str) -> list[str]:
        # `e` is ``___globals['name']``; the name must keep resolving to the builtin.
        return [f"{expected!r} not in ___globals"]

    def NOT_IN_DICT(self, e: str, expected: str) -> list[str]:
        # `e` is another module's globals (a function inlined from there): the name must keep
        # resolving to the builtin.
        return [f"{expected!r} not in {e}"]


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


def build_check_fn(guards: list[Guard], argnames: list[str], code_name: str) -> Callable[..., bool]:
    """Compile `guards` into one check function over (argument slots..., globals, closure)."""
    builder = GuardBuilder()
    # A base object's type is checked before its items and attributes are read.
    unique: dict[tuple, Guard] = {}
    for g in guards:
        unique.setdefault((g.source, g.kind, _hashable(g.expected)), g)
    ordered = sorted(unique.values(), key=lambda g: (_depth(g.source), g.order))
    per_guard = [builder.checks(g) for g in ordered]
    parts = [check for checks in per_guard for check in checks]
    names = [*map(guard_parameter, argnames), "___globals", "___closure"]
    fn_name = f"___check_{''.join(ch if ch.isalnum() else '_' for ch in code_name)}_{next(_check_counter)}"
    body = " and\n            ".join(parts) if parts else "True"
    source = (
        f"def {fn_name}({', '.join(names)}):\n"
        f"    try:\n"
        f"        return ({body})\n"
        f"    except Exception:\n"
        f"        return False\n"
    )
    scope = dict(builder.scope)
    exec(compile(source, f"<guards {fn_name}>", "exec"), scope)
    check_fn = scope.pop(fn_name)  # not left in its own globals: that would be a cycle
    check_fn.source = source
    check_fn.guards = [f"{' and '.join(checks)}    # {g.source.name()}: {g.kind}" for g, checks in zip(ordered, per_guard)]

    def first_failure(*args: object) -> str | None:
        """The first check that fails for these argument slots, globals and closure, with the
        actual value of what it inspects (e.g. ``x.shape == (8,)  (x.shape is (9,))``)."""
        env = dict(builder.scope)
        env.update(zip(names, args))
        for part in parts:
            try:
                ok = eval(part, env)
            except Exception as exc:  # a failing access is a failing guard
                return f"{part}  (raised {type(exc).__name__}: {exc})"
            if not ok:
                return f"{part}  ({_actual(part, env)})"
        return None

    check_fn.first_failure = first_failure
    return check_fn


def _actual(check: str, env: dict) -> str:
    """What the failing check looked at, for the message: ``x.dtype is float32``."""
    subject = check.strip("()").split(" is ")[0].split(" == ")[0].split(" != ")[0]
    try:
        return f"{subject} is {eval(subject, env)!r}"
    except Exception as exc:
        return f"{subject} raised {type(exc).__name__}"
