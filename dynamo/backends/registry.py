"""Backend registry: names -> backend callables.

A backend is any callable ``backend(graph_module, example_inputs) -> callable``; the callable it
returns takes the graph's inputs positionally and returns what the graph returns. Backends are
looked up by name (`lookup_backend`, called by ``dynamo.eval_frame`` when a function is compiled
with a backend name), registered with `register_backend`, and listed with `list_backends`;
`backend_spec` names one for another process (pickling, repros). Built in: ``"eager"``
(`eager.eager`: run the graph's generated NumPy code) and ``"c"`` (fuse elementwise and
reduction chains into C kernels built with gcc through cffi; imported at its first lookup).
"""

from __future__ import annotations

import importlib
import weakref
from typing import Any, Callable

from .eager import eager

__all__ = ["register_backend", "lookup_backend", "list_backends", "backend_spec", "Backend"]

Backend = Callable[..., Callable]

_BACKENDS: dict[str, Backend] = {"eager": eager}
_LAZY: dict[str, str] = {"c": "dynamo.backends.c:compile_graph"}


def register_backend(name: str | Backend | None = None, *, replace: bool = False):
    """Register a backend under `name`. Use as ``@register_backend`` (the function's name) or
    ``@register_backend("name")``, or call ``register_backend("name")(fn)``."""
    if callable(name):
        return register_backend(name.__name__)(name)

    def decorator(fn: Backend) -> Backend:
        key = name or fn.__name__
        if not callable(fn):
            raise TypeError(f"a backend must be callable, got {type(fn).__name__}")
        if (key in _BACKENDS or key in _LAZY) and not replace:
            raise ValueError(f"a backend named {key!r} is already registered; pass replace=True to override")
        _BACKENDS[key] = fn
        _LAZY.pop(key, None)
        return fn

    return decorator


def list_backends() -> list[str]:
    return sorted(set(_BACKENDS) | set(_LAZY))


def backend_spec(backend: Any) -> Any:
    """What names `backend` in another process: its registered name when it has one (the other
    process looks it up in its own registry), else the callable itself (a compile callback's
    weak reference to it followed). Used to pickle compiled functions and to write repros."""
    target = getattr(backend, "_ref", None)  # (eval_frame._WeakBackend)
    target = target() if isinstance(target, weakref.ref) else backend
    for name, fn in _BACKENDS.items():
        if fn is target:
            return name
    return target


def lookup_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name or a callable; ValueError naming the known backends."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if backend in _LAZY:
        module_name, attr = _LAZY.pop(backend).split(":")
        _BACKENDS[backend] = getattr(importlib.import_module(module_name), attr)
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known backends: {', '.join(list_backends())}. "
                         "Register your own with dynamo.register_backend(name).")
    return _BACKENDS[backend]
