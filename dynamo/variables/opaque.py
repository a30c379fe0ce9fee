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
        try:
            value = getattr(self.value, name)
        except Exception:
            raise Unsupported(f"attribute {name!r} of {self.describe()} (not traced)") from None
        return OpaqueObjectVariable(value, AttrSource(self.source, name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to {self.describe()}: npdynamo does not trace this type; the "
                          "call runs in plain Python")
