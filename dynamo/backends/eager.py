"""The ``eager`` backend: run the graph as the plain NumPy calls of its generated Python code."""

from __future__ import annotations

from typing import Callable

import fx

from . import register_backend

__all__ = ["eager"]


@register_backend("eager")
def eager(gm: fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward
