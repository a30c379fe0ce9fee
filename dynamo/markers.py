"""Functions a user calls inside compiled code to steer capture.

`graph_break()` does nothing when it runs; the translator recognises the call
(`variables.callables.UserFunctionVariable`) and ends the graph there, exactly as at a call it
cannot capture: the graph so far is compiled, the call runs in plain Python, and a resume
function continues the frame. Useful to split a long graph, to test, or to see what a break
costs. With ``fullgraph=True`` it raises `FullGraphError` like any other break.
"""

from __future__ import annotations

__all__ = ["graph_break"]


def graph_break() -> None:
    """End the current graph here (no effect when the code is not being compiled)."""
