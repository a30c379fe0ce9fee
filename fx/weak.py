"""Weak references whose callbacks run no Python code.

CPython calls the callbacks of an object's weak references the moment the object dies: in
whatever code dropped its last reference, or in the cycle collector, which can start at any
allocation. A callback that is a Python function runs bytecode, and a signal handler (Ctrl-C's
``KeyboardInterrupt``) runs at the next bytecode boundary, so it may run inside the callback.
An exception raised in a weakref callback is not raised: it is reported through
``sys.unraisablehook`` ("Exception ignored in ...") and lost. The standard library's weak
containers (``WeakKeyDictionary``, ``WeakValueDictionary``, ``WeakSet``) and
``weakref.finalize`` all run Python code when an object dies.

npdynamo's objects (graph nodes, generated code, cache entries, compiled libraries) die in the
user's program: when a compiled function is dropped, when a code object dies, when a cycle is
collected. Plain Python would run nothing there, so a Ctrl-C landing in one of our callbacks was
an interrupt the user's program never got (found by the SIGINT storm in
tests/dynamo/test_interrupts.py). So every weak reference that fx and dynamo give a callback
gets a C callable: a bound method of a dict (``dict.pop``), or a `functools.partial` of a C
function. CPython calls those without running any bytecode, so no signal handler can run inside
them; a pending signal is handled at the program's next instruction, as without npdynamo.

- `IdentityMap`: a mapping whose keys are held weakly and compared by identity (code objects
  compare equal by value; graph nodes should never compare at all). A key's value is dropped
  the moment the key dies.
- `IdentitySet`: the same with no values.
- `WeakValueMap`: a mapping to objects held weakly (no callback at all: dead entries are swept
  when the map grows).
- `on_death(obj, callback)`: ``callback(ref)`` when ``obj`` dies (instead of
  ``weakref.finalize``); the callback must be a C callable.

None of these is in a reference cycle with its callbacks, so a map dies by reference count with
its owner. Each is safe to use from several threads under the GIL (no Python code runs between
the steps that must stay together).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["IdentityMap", "IdentitySet", "WeakValueMap", "on_death", "sweep_pending"]

K = TypeVar("K")
V = TypeVar("V")

_MISSING = object()


class IdentityMap(Generic[K, V]):
    """``{key: value}`` with ``key`` held weakly and found by identity; ordered by insertion.

    Two dicts keyed by ``id(key)``: ``_values`` (what a dying key's callback pops: the callback
    is ``functools.partial(_values.pop, id(key))``, called with the dead reference as the
    default) and ``_refs`` (the weak references, which must stay alive to call back). The
    callback holds only ``_values``, so nothing refers back to ``_refs``: no cycle. A dead
    key's reference stays in ``_refs`` until the next sweep or until a new key takes its
    address (CPython calls the callback before the dead key's memory is released, so a new
    object at that address never finds the dead key's value).

    Each value is kept in a 1-tuple: a dict made by a compile and stored as a value is then
    referred to only by another new object, and hidden from ``gc.get_objects()`` with the rest
    of what the compile keeps (csrc/gc_quiet.c leaves a new dict that an older object refers to
    visible: it may be a user object's ``__dict__``)."""

    __slots__ = ("_values", "_refs", "_swept_at", "__weakref__")

    def __init__(self) -> None:
        self._values: dict[int, tuple[V]] = {}
        self._refs: dict[int, weakref.ref] = {}
        self._swept_at = 16

    def _live_ref(self, key: object) -> weakref.ref | None:
        ref = self._refs.get(id(key))
        return ref if ref is not None and ref() is key else None

    def __contains__(self, key: object) -> bool:
        return id(key) in self._values and self._live_ref(key) is not None

    def get(self, key: object, default: Any = None) -> Any:
        k = id(key)
        box = self._values.get(k)
        if box is None or self._live_ref(key) is None:
            return default
        return box[0]

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        k = id(key)
        if self._live_ref(key) is None:
            # (raises TypeError for an object that cannot be weakly referenced, before any
            # change; replacing a dead key's reference drops it: a dropped reference never
            # calls back)
            ref = weakref.ref(key, functools.partial(self._values.pop, k))
            # (the value first: a sweep in another thread in between must not take the new
            # reference for a dead key's)
            self._values[k] = (value,)
            self._refs[k] = ref
            if len(self._refs) > 2 * self._swept_at:
                self._sweep()
        else:
            self._values[k] = (value,)

    def setdefault(self, key: K, default: V = None) -> V:  # type: ignore[assignment]
        value = self.get(key, _MISSING)
        if value is _MISSING:
            self[key] = value = default
        return value

    def pop(self, key: object, default: Any = _MISSING) -> Any:
        if self._live_ref(key) is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        k = id(key)
        del self._refs[k]  # (the reference dies with it: it never calls back)
        box = self._values.pop(k, None)
        if box is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return box[0]

    def __delitem__(self, key: K) -> None:
        self.pop(key)

    def _sweep(self) -> None:
        # (over a copy, popping: another thread may add or pop keys meanwhile)
        values = self._values
        for k, ref in list(self._refs.items()):
            if k not in values or ref() is None:
                if self._refs.get(k) is ref:
                    self._refs.pop(k, None)
        self._swept_at = max(16, len(self._refs))

    def clear(self) -> None:
        self._refs.clear()  # (first: then no reference calls back into _values)
        self._values.clear()

    def items(self) -> list[tuple[K, V]]:
        """A list of the live (key, value) pairs (a copy: keys may die meanwhile)."""
        out = []
        refs = self._refs
        for k, box in list(self._values.items()):
            ref = refs.get(k)
            key = ref() if ref is not None else None
            if key is not None:
                out.append((key, box[0]))
        return out

    def keys(self) -> list[K]:
        return [key for key, _ in self.items()]

    def values(self) -> list[V]:
        return [value for _, value in self.items()]

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.items())

    def __bool__(self) -> bool:
        refs = self._refs
        for k in list(self._values):
            ref = refs.get(k)
            if ref is not None and ref() is not None:
                return True
        return False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} with {len(self)} live keys>"


class IdentitySet(IdentityMap[K, None]):
    """A set of objects held weakly, by identity (`IdentityMap` without values)."""

    __slots__ = ()

    def add(self, obj: K) -> None:
        self[obj] = None

    def discard(self, obj: object) -> None:
        self.pop(obj, None)


class WeakValueMap(Generic[K, V]):
    """``{key: object}`` with the objects held weakly (keys compared as in a dict). No
    callbacks: a dead object's entry reads as missing and is swept when the map has grown to
    twice its size at the last sweep."""

    __slots__ = ("_refs", "_swept_at")

    def __init__(self) -> None:
        self._refs: dict[K, weakref.ref] = {}
        self._swept_at = 16

    def get(self, key: K, default: Any = None) -> Any:
        ref = self._refs.get(key)
        value = ref() if ref is not None else None
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def __getitem__(self, key: K) -> V:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._refs[key] = weakref.ref(value)
        if len(self._refs) > 2 * self._swept_at:
            for k in [k for k, ref in list(self._refs.items()) if ref() is None]:
                self._refs.pop(k, None)
            self._swept_at = max(16, len(self._refs))

    def pop(self, key: K, default: Any = None) -> Any:
        ref = self._refs.pop(key, None)
        value = ref() if ref is not None else None
        return default if value is None else value

    def __len__(self) -> int:
        return sum(1 for ref in list(self._refs.values()) if ref() is not None)

    def clear(self) -> None:
        self._refs.clear()


#: id(reference) -> reference, for `on_death`: a weak reference calls back only while it lives.
_pending: dict[int, weakref.ref] = {}
_pending_swept_at = 64


def on_death(obj: object, callback: Callable[[weakref.ref], Any]) -> None:
    """Call ``callback(ref)`` when ``obj`` dies (also in the cycle collector; not at exit).

    ``callback`` must be a C callable so that no bytecode runs at the death (see the module
    docstring), and it gets the dead weak reference as its last argument: e.g.
    ``functools.partial(some_dict.pop, key)`` (called as ``some_dict.pop(key, ref)``). An
    exception it raises is reported as unraisable. Raises TypeError if ``obj`` cannot be
    weakly referenced."""
    global _pending_swept_at
    ref = weakref.ref(obj, callback)
    _pending[id(ref)] = ref
    if len(_pending) > 2 * _pending_swept_at:
        sweep_pending()
        _pending_swept_at = max(64, len(_pending))


def sweep_pending() -> int:
    """Forget the `on_death` references that have called back; returns how many are left."""
    for k in [k for k, ref in list(_pending.items()) if ref() is None]:
        _pending.pop(k, None)
    return len(_pending)
