"""Capture scopes: which callback the C hook calls for the frames run inside a block or a call.

A `CaptureScope` is a `_C.Capture`: the C hook keeps the current scope's callback in a context
variable (every thread and asyncio task has its own) and enters/leaves it in C, so a
KeyboardInterrupt cannot leave capture switched on. The callback is a compile callback
(`convert_frame.ConvertFrame`: capture), None (`disable`: capture off) or False (`run`: reuse
compiled versions, compile nothing). Used as ``with scope:`` or as a decorator whose C wrapper
runs each call inside the scope. The public entry points are `eval_frame`'s; `output_graph`
runs a backend's callable written in Python with capture off (`disable`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from . import _C

__all__ = ["CaptureScope", "disable", "run"]


class CaptureScope(_C.Capture):
    """A capture scope: ``with`` block (C __enter__/__exit__), or a decorator whose wrapper
    runs each call inside the scope (`_C.Capture.run`)."""

    def __init__(self, callback: Any, backend: Any = None) -> None:
        super().__init__(callback)
        self.backend = backend  # a user backend lives as long as the scopes using it

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"expected a function to wrap, got {type(fn).__name__}")
        if inspect.isclass(fn):
            raise TypeError("npdynamo wraps functions, not classes; wrap the method or function instead")
        check_target = getattr(self.callback, "check_target", None)
        if check_target is not None:
            check_target(fn)  # (fullgraph=True: a generator could never keep the promise)
        # A C callable (no extra Python frame per call) that binds like a function.
        wrapper = functools.update_wrapper(self.wrap(fn), fn)
        wrapper._dynamo_orig_fn = fn
        wrapper._dynamo_callback = self.callback
        return wrapper


def disable(fn: Callable | None = None) -> Any:
    """Turn capture off: ``with dynamo.disable(): ...`` or ``@dynamo.disable`` on a function."""
    context = CaptureScope(None)
    return context if fn is None else context(fn)


def run(fn: Callable | None = None) -> Any:
    """Run-only mode: reuse compiled versions where guards pass, never compile anything new."""
    context = CaptureScope(False)
    return context if fn is None else context(fn)
