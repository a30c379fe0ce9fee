"""The public entry points that turn capture on and off.

`compile` wraps a function; `optimize` is a context manager (and decorator) under which every
frame is captured; `disable` turns capture off inside; `run` uses existing caches without
compiling; `reset` clears every cache. All of them just set this thread's callback in the C hook
(`_C.set_eval_frame`) and restore the previous one afterwards.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from . import _C
from .backends import Backend, lookup_backend
from .convert_frame import ConvertFrame, compile_lock, touched_codes

__all__ = ["compile", "optimize", "disable", "run", "reset"]


#: One compile callback per (backend, fullgraph), alive for the process. The C cache tags each
#: compiled version with the callback that made it (by address), so the same function compiled
#: with two backends keeps a version for each, and an address is never reused by another one.
_callbacks: dict[tuple[int, bool], ConvertFrame] = {}


def _callback_for(backend: Backend, fullgraph: bool) -> ConvertFrame:
    key = (id(backend), fullgraph)
    with compile_lock:
        if key not in _callbacks:
            _callbacks[key] = ConvertFrame(backend, fullgraph=fullgraph)
        return _callbacks[key]


class _CaptureContext:
    """Sets this thread's hook callback for a `with` block or around each call of a function."""

    def __init__(self, callback: Any) -> None:
        self.callback = callback
        self._saved: list[Any] = []

    def __enter__(self) -> "_CaptureContext":
        self._saved.append(_C.set_eval_frame(self.callback))
        return self

    def __exit__(self, *exc: object) -> None:
        _C.set_eval_frame(self._saved.pop())

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"expected a function to wrap, got {type(fn).__name__}")
        if inspect.isclass(fn):
            raise TypeError("npdynamo wraps functions, not classes; wrap the method or function instead")
        callback = self.callback
        set_eval_frame = _C.set_eval_frame

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prior = set_eval_frame(callback)
            try:
                return fn(*args, **kwargs)
            finally:
                set_eval_frame(prior)

        wrapper._dynamo_orig_fn = fn  # type: ignore[attr-defined]
        wrapper._dynamo_callback = callback  # type: ignore[attr-defined]
        return wrapper


def optimize(backend: str | Backend = "eager", *, fullgraph: bool = False) -> _CaptureContext:
    """Capture every frame run inside: ``with dynamo.optimize("eager"): f(x)``, or a decorator."""
    return _CaptureContext(_callback_for(lookup_backend(backend), bool(fullgraph)))


def compile(fn: Callable | None = None, *, backend: str | Backend = "eager", fullgraph: bool = False,
            dynamic: bool | None = None) -> Any:
    """Compile `fn`: ``dynamo.compile(f)``, ``@dynamo.compile`` or ``@dynamo.compile(backend="c")``.

    Every frame run inside a call of the returned function is captured (functions it calls are
    compiled as frames of their own). ``fullgraph=True`` raises instead of running code that could
    not be captured. ``dynamic``: only static shapes exist in this version (None or False).
    """
    if dynamic not in (None, False):
        raise NotImplementedError("dynamic=True: dynamic shapes are not implemented yet; "
                                  "use dynamic=None (every new shape compiles a new version)")
    context = optimize(backend, fullgraph=fullgraph)
    if fn is None:
        return context
    return context(fn)


def disable(fn: Callable | None = None) -> Any:
    """Turn capture off: ``with dynamo.disable(): ...`` or ``@dynamo.disable`` on a function."""
    context = _CaptureContext(None)
    return context if fn is None else context(fn)


def run(fn: Callable | None = None) -> Any:
    """Run-only mode: reuse compiled versions where guards pass, never compile anything new."""
    context = _CaptureContext(False)
    return context if fn is None else context(fn)


def reset() -> None:
    """Forget every compiled version and every skip decision."""
    with compile_lock:
        for code in list(touched_codes):
            _C.reset_code(code)
        touched_codes.clear()
