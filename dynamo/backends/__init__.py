"""Backends: what turns a captured graph into the callable a compiled frame runs.

`registry` maps names to backends (``register_backend``, ``lookup_backend``, ``list_backends``,
``backend_spec``); ``eager`` runs the graph's generated NumPy code; ``c`` is the optimizing C
backend (its own package, imported when first looked up). Used by ``dynamo.eval_frame`` and
re-exported by ``dynamo``. Backends import `fx` and dynamo's low-level modules (config,
diagnostics, ``_C``), never the translator.
"""

from .registry import Backend, backend_spec, list_backends, lookup_backend, register_backend

__all__ = ["register_backend", "lookup_backend", "list_backends", "backend_spec", "Backend"]
