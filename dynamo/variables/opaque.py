"""OpaqueObjectVariable: an object the translator does not model, reached through a Source.

In: a value of a type npdynamo has no tracker for (an `np.random.Generator`, a file, a logger, a
third-party object) and the Source it was read from. Out: a tracker that can only be passed
around and rebuilt from its source; reading an attribute gives another opaque value (no guard:
nothing is decided from it), and calling one raises `Unsupported`, so the graph breaks exactly
at the call, which runs in plain Python. Made by `VariableBuilder` as its last resort.
"""

from __future__ import annotations

from typing import Any

from ..exc import Unsupported
from ..guards import Guard
from ..source import AttrSource, Source
from .base import VariableTracker

__all__ = ["OpaqueObjectVariable"]


class OpaqueObjectVariable(VariableTracker):
    def __init__(self, value: Any, source: Source) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        typ = type(self.value)
        return f"{typ.__module__}.{typ.__qualname__} object {self.source.name()}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if tx.root().side_effects:
            # The frame changed objects, globals or lists it has not written back yet (they are
            # replayed after the graph), and this object may see them (a weakref.proxy of an
            # object the frame changed, a view of a list): its attribute is read in plain
            # Python after the replay, not now.
            raise Unsupported(f"attribute {name!r} of {self.describe()} read after changes "
                              "that are not written back yet (it may see them)")
        try:
            value = getattr(self.value, name)
        except Exception:
            raise Unsupported(f"attribute {name!r} of {self.describe()} (not traced)") from None
        return OpaqueObjectVariable(value, AttrSource(self.source, name))

    def is_none(self, tx) -> bool:
        """``self is None``, decided for this object's type: a guard on the type makes the
        compiled code run for objects of that type only (reading an attribute gives an opaque
        value with no guard, so without it a None in the next call went unnoticed)."""

        tx.output.add_guard(Guard(self.source, "TYPE_MATCH", type(self.value)))
        return self.value is None

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to {self.describe()}: npdynamo does not trace this type; the "
                          "call runs in plain Python")
