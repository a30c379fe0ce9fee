"""The ``eager`` backend: run the graph as the plain NumPy calls of its generated Python code.

In: a `fx.GraphModule`. Out: its ``forward``. Registered under ``"eager"`` by `registry`.
"""

from __future__ import annotations

from typing import Callable

import fx

__all__ = ["eager"]


def eager(gm: fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward
