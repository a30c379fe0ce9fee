"""Tuples, lists, dicts and iterators built from other VariableTrackers.

A list that came from the frame (it has a source) may be read but not mutated in this version:
mutating it would need the change replayed on the real object after the graph runs.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from .. import instructions as ins
from ..exc import Unsupported
from .base import VariableTracker

if TYPE_CHECKING:
    from ..codegen import Codegen

__all__ = ["TupleVariable", "ListVariable", "DictVariable", "IteratorVariable"]


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
        return self.kind(item.as_python_constant() for item in self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def truth(self) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        from .constant import run_user_op

        key = index.as_python_constant()
        picked = run_user_op(operator.getitem, self.items, key)
        return type(self)(picked) if isinstance(key, slice) else picked

    def reconstruct(self, codegen: "Codegen") -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        for item in self.items:
            codegen.reconstruct(item)
        codegen.extend(self.build(len(self.items)))


class TupleVariable(_Sequence):
    kind = tuple
    build = staticmethod(ins.build_tuple)


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
        if name in LIST_METHODS:
            from .callables import ListMethodVariable

            return ListMethodVariable(self, name)
        return super().var_getattr(tx, name)


#: list methods the translator runs on a list's trackers (the mutating ones also on a list from
#: outside the frame, whose new items are replayed after the graph)
LIST_METHODS = ("append", "extend", "insert", "pop", "clear", "reverse", "copy", "index", "count")
DICT_METHODS = ("get", "keys", "values", "items", "update", "pop", "setdefault", "copy")


class DictVariable(VariableTracker):
    """A dict with constant keys created inside the frame."""

    def __init__(self, items: dict[Any, VariableTracker], source=None) -> None:
        self.items = dict(items)
        self.source = source

    def describe(self) -> str:
        return f"dict of {len(self.items)} items"

    def python_type(self) -> type:
        return dict

    def as_python_constant(self) -> Any:
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        from .constant import ConstantVariable

        return [ConstantVariable(k) for k in self.items]

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        from .constant import run_user_op

        return run_user_op(operator.getitem, self.items, index.as_python_constant())

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in DICT_METHODS:
            from .callables import DictMethodVariable

            return DictMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen: "Codegen") -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        for key, value in self.items.items():
            codegen.extend(ins.load_const(key))
            codegen.reconstruct(value)
        codegen.extend(ins.build_map(len(self.items)))


class IteratorVariable(VariableTracker):
    """An iterator over known items (GET_ITER on a tuple, list, range or small array)."""

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

    def reconstruct(self, codegen: "Codegen") -> None:
        # An iterator over the items not consumed yet (the translator made it from a sequence it
        # knows; no one else holds it, e.g. the one a comprehension is about to consume).
        if self.kind is not None:
            raise Unsupported(f"cannot rebuild an {self.describe()} (its type would change)")
        for item in self.items[self.index:]:
            codegen.reconstruct(item)
        codegen.extend(ins.build_tuple(len(self.items) - self.index) + ins.get_iter())

    def next(self) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item
