"""npdynamo: a TorchDynamo-style just-in-time compiler for NumPy code.

``dynamo.compile(fn)`` captures the NumPy operations of each frame run inside `fn` into a graph
(through a PEP 523 frame-evaluation hook and a symbolic bytecode translator), guards it, and runs it
through a backend. See README.md and docs/ for the tour; docs/architecture.md for the layers.
The public names come from `dynamo.api`.
"""

from .api import (  # noqa: F401  (the package hands on the public names of dynamo.api)
    FullGraphError, InternalError, Unsupported, __all__, __version__, cache_entries, compile,
    config, disable, explain, graph_break, list_backends, lookup_backend, mark_dynamic,
    mark_static, optimize, register_backend, report, reset, run, set_logs)
