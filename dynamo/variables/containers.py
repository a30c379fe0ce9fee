"""Tuples, lists, dicts and iterators built from other VariableTrackers, and the methods of
lists and dicts the translator runs itself.

A list that came from the frame (it has a source) may be changed: its new contents are written
back to the real object after the graph (`side_effects`). A dict from outside the frame is
read only: a change to it ends the graph and runs in plain Python.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Iterator
from typing import Any

from .. import instructions as ins
from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable, run_user_op, user_error


__all__ = ["TupleVariable", "ListVariable", "DictVariable", "IteratorVariable", "DictViewVariable",
           "CheckedIteratorVariable", "ListMethodVariable", "DictMethodVariable", "iterate",
           "drain"]


#: ``ids``: the containers whose Python value this thread is building right now
_converting = threading.local()


@contextlib.contextmanager
def _converting_once(vt: VariableTracker) -> Iterator[None]:
    """Around `as_python_constant` of a container: one that contains itself (``L.append(L)``)
    would be converted forever; it is no constant the translator can use."""
    active = getattr(_converting, "ids", None)
    if active is None:
        active = _converting.ids = set()
    if id(vt) in active:
        raise Unsupported(f"a {vt.describe()} that contains itself (a reference cycle)")
    active.add(id(vt))
    try:
        yield
    finally:
        active.discard(id(vt))


class _Sequence(VariableTracker):
    kind: type = tuple
    build = staticmethod(ins.build_tuple)

    def __init__(self, items: list[VariableTracker], source=None) -> None:
        self.items = list(items)
        self.source = source

    def describe(self) -> str:
        return f"{self.kind.__name__} of {len(self.items)} items"

    def python_type(self) -> type:
        return self.kind

    def as_python_constant(self) -> Any:
        with _converting_once(self):
            return self.kind([item.as_python_constant() for item in self.items])

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def truth(self) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if self.kind is tuple and isinstance(key, slice):
            whole = run_user_op(operator.getitem, range(len(self.items)), key)
            if whole.step == 1 and len(whole) == len(self.items):
                return self  # (CPython gives the tuple itself: ``t[:] is t``)
        picked = run_user_op(operator.getitem, self.items, key)
        return type(self)(picked) if isinstance(key, slice) else picked

    def reconstruct(self, codegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        for item in self.items:
            codegen.reconstruct(item)
        codegen.extend(self.build(len(self.items)))


class TupleVariable(_Sequence):
    kind = tuple
    build = staticmethod(ins.build_tuple)
    #: built once where it is needed twice (``t = (x, y); g(t)`` at a break passes the object
    #: that ``t`` holds: ``g(t) is t`` as in Python)
    has_identity = True
    #: the tuple object itself when it is a constant of the code (LOAD_CONST): reloaded as
    #: that constant, so it is the same object on every call, as in Python
    literal: "tuple | None" = None

    def as_python_constant(self) -> Any:
        if self.literal is not None:  # (the object itself: a dict key rebuilt is the same one)
            return self.literal
        return super().as_python_constant()

    def reconstruct(self, codegen) -> None:
        if self.source is None and self.literal is not None:
            codegen.extend(ins.load_const(self.literal))
            return
        super().reconstruct(codegen)


class ListVariable(_Sequence):
    kind = list
    build = staticmethod(ins.build_list)

    #: set by the translator: where changes to a list from outside the frame are recorded
    effects = None

    def check_mutable(self) -> None:
        """Called before the items change: a list from outside the frame gets its new items
        replayed after the graph (`side_effects.py`)."""
        if self.source is not None:
            if self.effects is None:
                raise Unsupported(f"mutating the list {self.source.name()} from outside the frame")
            self.effects.mutated_list(self)

    def append(self, item: VariableTracker) -> None:
        self.check_mutable()
        self.items.append(item)

    def extend(self, items: list[VariableTracker]) -> None:
        self.check_mutable()
        self.items.extend(items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in LIST_ARITY:
            return ListMethodVariable(self, name)
        return super().var_getattr(tx, name)


class DictVariable(VariableTracker):
    """A dict with constant keys created inside the frame."""

    def __init__(self, items: dict[Any, VariableTracker], source=None,
                 key_trackers: dict[Any, VariableTracker] | None = None) -> None:
        self.items = dict(items)
        self.source = source
        #: key -> the tracker of the object the dict holds as that key, where it is not the
        #: constant itself: a key read from the frame (a tuple argument) is rebuilt from where it
        #: came, so the dict holds the frame's object as in Python, not an equal one made while
        #: tracing (which would have another identity, and, made during the compile, stay
        #: tracked by the collector: test_dict test_track_literals)
        self.key_trackers = {k: v for k, v in (key_trackers or {}).items() if k in self.items}

    def key(self, key: Any) -> VariableTracker:
        """The tracker of the object the dict holds as `key`."""
        return self.key_trackers.get(key) or ConstantVariable(key)

    def put(self, key: Any, tracker: VariableTracker, value: VariableTracker) -> None:
        """``d[key] = value`` with `key` (the value of `tracker`): a new key is the object
        `tracker` stands for; an existing one stays the object it was (as in Python)."""
        new = not run_user_op(operator.contains, self.items, key)  # (unhashable: TypeError)
        self.items[key] = value
        if new and _rebuilt_from_tracker(tracker):
            self.key_trackers[key] = tracker

    def merge(self, other: "DictVariable") -> None:
        """``self.update(other)``: keys new to self are other's key objects."""
        for key, value in other.items.items():
            self.put(key, other.key(key), value)

    def remove(self, key: Any) -> VariableTracker:
        self.key_trackers.pop(key, None)
        return self.items.pop(key)

    def describe(self) -> str:
        return f"dict of {len(self.items)} items"

    def python_type(self) -> type:
        return dict

    def as_python_constant(self) -> Any:
        with _converting_once(self):
            return {k: v.as_python_constant() for k, v in self.items.items()}

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [self.key(k) for k in self.items]

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return run_user_op(operator.getitem, self.items, index.as_python_constant())

    def check_mutable(self) -> None:
        """Called before the items change. A dict from outside the frame (an argument, or the
        dict a ``{**a, **b}`` or ``f(**kw)`` was building when a graph break split it: a resume
        function receives it as an argument) would be rebuilt from its source, the real object,
        and the change lost: no replay of dict changes exists, so the graph ends here and the
        change runs in plain Python."""
        if self.source is not None:
            raise Unsupported(f"changing the dict {self.source.name()} from outside the frame")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in DICT_ARITY:
            return DictMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        for key, value in self.items.items():
            codegen.reconstruct(self.key(key))
            codegen.reconstruct(value)
        codegen.extend(ins.build_map(len(self.items)))


def _rebuilt_from_tracker(tracker: VariableTracker) -> bool:
    """Whether a dict key is rebuilt from its tracker, not as the constant: it was read from
    the frame, or is a tuple (built in the frame from such values, or a literal of the code:
    the very object either way)."""
    return tracker.source is not None or isinstance(tracker, TupleVariable)


_LIST_ITERATOR, _LIST_REVERSED = type(iter([])), type(reversed([]))
_RANGE_ITERATOR = type(iter(range(1)))


def _as_range(values: list) -> range | None:
    """A range that yields `values` (ints in one step), or None."""
    if any(type(v) is not int for v in values):
        return None
    if len(values) < 2:
        return range(values[0], values[0] + 1) if values else range(0)
    step = values[1] - values[0]
    if step == 0 or any(b - a != step for a, b in zip(values, values[1:])):
        return None
    return range(values[0], values[-1] + step, step)


class IteratorVariable(VariableTracker):
    """An iterator over known items (GET_ITER on a tuple, list, range or small array)."""

    #: built once where it is needed twice: two names for one iterator advance together
    has_identity = True

    def __init__(self, items: list[VariableTracker], kind: type | None = None) -> None:
        self.items = items
        self.index = 0
        #: the type Python would have made (``enumerate``, ``zip``); None: a plain iterator over
        #: a sequence, which nothing outside the frame can tell from a tuple iterator
        self.kind = kind

    def describe(self) -> str:
        return f"{self.kind.__name__} iterator" if self.kind else "iterator"

    def python_type(self) -> type:
        if self.kind is None:
            return super().python_type()
        return self.kind

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    #: the list tracker this iterates (``iter(lst)``: its very items), or None
    container = None

    def reconstruct(self, codegen) -> None:
        # An iterator over the items not consumed yet (the translator made it from a sequence it
        # knows; no one else holds it, e.g. the one a comprehension is about to consume), of
        # the type Python made: ``reversed(list)``, ``iter(range(...))``.
        if isinstance(self.container, ListVariable):  # (over the same list object, as Python)
            _positioned(codegen, _iterator_at, self.container, self.index)
            return
        rest = self.items[self.index:]
        if self.kind is _LIST_REVERSED:
            codegen.extend(ins.with_null(ins.load_const(reversed)))
            for item in reversed(rest):
                codegen.reconstruct(item)
            codegen.extend(ins.build_list(len(rest)) + ins.call(1))
            return
        if self.kind is _RANGE_ITERATOR:
            span = _as_range([item.as_python_constant() if item.is_python_constant() else None
                              for item in rest])
            if span is None:
                raise Unsupported(f"cannot rebuild a {self.describe()} over these items")
            codegen.extend(ins.load_const(span) + ins.get_iter())
            return
        if self.kind is not None and self.kind is not _LIST_ITERATOR:
            raise Unsupported(f"cannot rebuild an {self.describe()} (its type would change)")
        for item in rest:
            codegen.reconstruct(item)
        build = ins.build_list if self.kind is _LIST_ITERATOR else ins.build_tuple
        codegen.extend(build(len(rest)) + ins.get_iter())

    def next(self) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()``, ``d.items()`` of a dict tracker: a view, as in Python (it
    shows later changes of the dict and has the view's type), not a list."""

    has_identity = True  # (one view object for every name of it, as in Python)

    def __init__(self, d: DictVariable, kind: str) -> None:
        self.d = d
        self.kind = kind

    def describe(self) -> str:
        return f"dict {self.kind} view of a {self.d.describe()}"

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def as_python_constant(self) -> Any:
        return getattr(self.d.as_python_constant(), self.kind)()

    def truth(self) -> bool:
        return bool(self.d.items)

    def make(self, key: Any) -> VariableTracker:
        if self.kind == "keys":
            return self.d.key(key)
        if self.kind == "values":
            return self.d.items[key]
        return TupleVariable([self.d.key(key), self.d.items[key]])

    def unpack(self, tx) -> list[VariableTracker]:
        return [self.make(key) for key in self.d.items]

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.null_before())
        codegen.reconstruct(self.d)
        codegen.extend(ins.load_attr(self.kind) + ins.null_after() + ins.call_sequence(0))


class CheckedIteratorVariable(IteratorVariable):
    """Iteration over a dict (or one of its views) or a set: the items are read when reached,
    and a change of the container's size while it is iterated raises RuntimeError, as in
    Python (other changes of its keys are left to Python: Unsupported)."""

    def __init__(self, keys: Any, make: Any, what: str) -> None:
        self.current_keys = keys  # () -> the container's keys now
        self.snapshot = keys()
        self.make = make
        self.what = what
        self.index = 0
        self.kind = None

    @property
    def items(self) -> list[VariableTracker]:  # (read by IteratorVariable's methods)
        return [self.make(key) for key in self.snapshot]

    def check(self) -> None:
        now = self.current_keys()
        if len(now) != len(self.snapshot):
            raise user_error(RuntimeError, f"{self.what} changed size during iteration")
        if now != self.snapshot:
            raise Unsupported(f"the keys of a {self.what} changed while it was iterated")

    def next(self) -> VariableTracker | None:
        self.check()
        return super().next()

    def unpack(self, tx) -> list[VariableTracker]:
        self.check()
        return super().unpack(tx)


def _iterator_at(lst: Any, index: int):
    """``iter(lst)`` advanced to `index` (a list's or a sequence's iterator, by its pickled
    state)."""
    it = iter(lst)
    it.__setstate__(index)
    return it


def _list_reverse_iterator_at(lst: list, index: int):
    """``reversed(lst)`` at `index` (counting down; -1: exhausted)."""
    it = reversed(lst)
    it.__setstate__(index)
    return it


def _positioned(codegen, make, lst: VariableTracker, index: int) -> None:
    codegen.extend(ins.with_null(ins.load_const(make)))
    codegen.reconstruct(lst)
    codegen.extend(ins.load_const(index) + ins.call(2))


class ListReverseIteratorVariable(IteratorVariable):
    """``reversed(lst)`` of a list tracker: reads the list live by index, counting down, as
    CPython's list_reverseiterator does (a change to the list is seen), and is rebuilt at a
    break over the same list object at the same position."""

    def __init__(self, lst: ListVariable) -> None:
        super().__init__([], _LIST_REVERSED)
        self.lst = lst
        self.position = len(lst.items) - 1

    def next(self) -> VariableTracker | None:
        if 0 <= self.position < len(self.lst.items):
            item = self.lst.items[self.position]
            self.position -= 1
            return item
        self.position = -1
        return None

    def unpack(self, tx) -> list[VariableTracker]:
        return drain(self)

    def reconstruct(self, codegen) -> None:
        _positioned(codegen, _list_reverse_iterator_at, self.lst, self.position)


def drain(iterator: VariableTracker) -> list[VariableTracker]:
    """The items an iterator tracker has left (``list(it)``), taken with its ``next()``."""
    out = []
    while (item := iterator.next()) is not None:
        out.append(item)
    return out


def iterate(tx, value: VariableTracker) -> IteratorVariable:
    """``iter(value)`` for a tracker that is not an array: a list is read live (items appended
    while it is iterated are reached, as in Python), dicts and sets are checked for changes."""
    if isinstance(value, IteratorVariable):
        return value
    if isinstance(value, ListVariable):
        out = IteratorVariable(value.items)  # (the very list of items: changes are seen)
        out.container = value
        return out
    if isinstance(value, DictVariable):
        return CheckedIteratorVariable(lambda: list(value.items), value.key, "dictionary")
    if isinstance(value, DictViewVariable):
        return CheckedIteratorVariable(lambda: list(value.d.items), value.make, "dictionary")
    if isinstance(value, ConstantVariable) and type(value.value) is set:
        return CheckedIteratorVariable(lambda: list(value.value), ConstantVariable, "Set")
    return IteratorVariable(value.unpack(tx))


# The methods of list and dict trackers ----------------------------------------------------------


#: The list and dict methods the translator runs on a container's trackers (the mutating list
#: methods also on a list from outside the frame, whose new items are replayed after the
#: graph), with their (fewest, most) positional arguments.
LIST_ARITY = {"append": (1, 1), "extend": (1, 1), "insert": (2, 2), "pop": (0, 1),
              "clear": (0, 0), "reverse": (0, 0), "copy": (0, 0), "index": (1, 3),
              "count": (1, 1)}
DICT_ARITY = {"get": (1, 2), "keys": (0, 0), "values": (0, 0), "items": (0, 0),
              "update": (0, 1), "pop": (1, 2), "setdefault": (1, 2), "copy": (0, 0)}


def _check_arity(kind: str, name: str, args: list, table: dict) -> None:
    """A wrong number of arguments raises TypeError in Python; the translator, which runs the
    method on trackers, must not make up a result instead."""
    fewest, most = table[name]
    if not fewest <= len(args) <= most:
        raise user_error(TypeError, f"{kind}.{name}() takes {fewest} to {most} arguments "
                         f"({len(args)} given)")


class ListMethodVariable(VariableTracker):
    """``lst.append`` and the other methods of `LIST_ARITY` of a list tracker, run on its
    items (a list from outside the frame gets its new contents written back after the graph)."""

    def __init__(self, lst: ListVariable, name: str) -> None:
        self.lst = lst
        self.name = name

    def reconstruct(self, codegen) -> None:
        codegen.reconstruct(self.lst)  # the same list object as everywhere else in the frame
        codegen.extend(ins.load_attr(self.name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"list.{self.name}() with keyword arguments")
        _check_arity("list", self.name, args, LIST_ARITY)
        return _LIST_METHODS[self.name](tx, self.lst, self.name, args)


def _list_copy(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    return ListVariable(list(lst.items))


def _list_search(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    """``index`` and ``count``: on the items' values (Unsupported for arrays)."""
    values = [v.as_python_constant() for v in lst.items]
    return ConstantVariable(run_user_op(getattr(values, name),
                                        *[a.as_python_constant() for a in args]))


def _list_append(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.append(args[0])
    return ConstantVariable(None)


def _list_extend(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.extend(args[0].unpack(tx))
    return ConstantVariable(None)


def _list_insert(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.check_mutable()
    run_user_op(lst.items.insert, args[0].as_python_constant(), args[1])
    return ConstantVariable(None)


def _list_pop(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.check_mutable()
    _check_removal(tx, lst, name)
    return run_user_op(lst.items.pop, *[a.as_python_constant() for a in args])


def _list_clear(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.check_mutable()
    _check_removal(tx, lst, name)
    lst.items.clear()
    return ConstantVariable(None)


def _list_reverse(tx, lst: ListVariable, name: str, args: list) -> VariableTracker:
    lst.check_mutable()
    lst.items.reverse()
    return ConstantVariable(None)


_LIST_METHODS = {"copy": _list_copy, "index": _list_search, "count": _list_search,
                 "append": _list_append, "extend": _list_extend, "insert": _list_insert,
                 "pop": _list_pop, "clear": _list_clear, "reverse": _list_reverse}


def _check_removal(tx, lst: ListVariable, name: str) -> None:
    """A list from outside the frame loses items: its new contents are written back after the
    graph, and an item whose death runs code (``__del__``, a weakref callback) would then die
    after what follows has run (its finalizer's own changes overwritten by later replays). The
    graph ends here instead, so the removal runs in plain Python, in order."""
    if lst.source is not None and tx.removal_runs_code(lst.items):
        raise Unsupported(f"list.{name}() may free an object whose finalizer or weakref "
                          "callback runs code: the graph ends here, so it runs before what "
                          "follows")


class DictMethodVariable(VariableTracker):
    """``d.get`` and the other methods of `DICT_ARITY` of a dict with known keys, run on its
    trackers (``keys``/``values``/``items`` give live views)."""

    def __init__(self, d: DictVariable, name: str) -> None:
        self.d = d
        self.name = name

    def reconstruct(self, codegen) -> None:
        codegen.reconstruct(self.d)
        codegen.extend(ins.load_attr(self.name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs and self.name != "update":
            raise Unsupported(f"dict.{self.name}() with keyword arguments")
        _check_arity("dict", self.name, args, DICT_ARITY)
        return _DICT_METHODS[self.name](self.d, self.name, args, kwargs)


def _dict_update(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    d.check_mutable()
    if len(args) > 1:
        raise user_error(TypeError, f"update expected at most 1 argument, got {len(args)}")
    for arg in args:
        if not isinstance(arg, DictVariable):
            raise Unsupported("dict.update() from a value that is not a dict")
        d.merge(arg)
    d.items.update(kwargs)  # (keyword names: str constants)
    return ConstantVariable(None)


def _dict_copy(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    return DictVariable(dict(d.items), key_trackers=d.key_trackers)


def _hashed_key(arg: VariableTracker) -> Any:
    key = arg.as_python_constant()
    run_user_op(hash, key)  # (an unhashable key raises TypeError, as in Python)
    return key


def _dict_setdefault(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    d.check_mutable()
    key = _hashed_key(args[0])
    if key not in d.items:
        d.put(key, args[0], args[1] if len(args) > 1 else ConstantVariable(None))
    return d.items[key]


def _dict_pop(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    d.check_mutable()
    key = _hashed_key(args[0])
    if key in d.items:
        return d.remove(key)
    if len(args) > 1:
        return args[1]
    raise user_error(KeyError, repr(key))


def _dict_get(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    key = args[0].as_python_constant()
    found = run_user_op(operator.contains, d.items, key)
    return d.items[key] if found else (args[1] if len(args) > 1 else ConstantVariable(None))


def _dict_view(d: DictVariable, name: str, args: list, kwargs: dict) -> VariableTracker:
    return DictViewVariable(d, name)  # keys, values, items: a live view


_DICT_METHODS = {"update": _dict_update, "copy": _dict_copy, "setdefault": _dict_setdefault,
                 "pop": _dict_pop, "get": _dict_get, "keys": _dict_view, "values": _dict_view,
                 "items": _dict_view}
