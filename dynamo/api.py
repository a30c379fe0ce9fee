"""The public API: what ``import dynamo`` gives (the package re-exports exactly these names).

Importing it checks the interpreter and the C extension first, with a clear message for each,
and applies the ``DYNAMO_LOGS`` environment variable (`logs`).
"""

from __future__ import annotations

import sys

if not (3, 10) <= sys.version_info[:2] <= (3, 13):
    raise ImportError(
        "npdynamo supports CPython 3.10, 3.11, 3.12 and 3.13 (its frame hook uses each "
        "version's interpreter internals); this is Python %d.%d" % sys.version_info[:2]
    )

try:
    from . import _C  # noqa: F401  (fail early with a clear message if the extension is missing)
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "npdynamo's C extension dynamo._C is not built; install with `pip install .` "
        "(or run `python setup.py build_ext --inplace` in a source checkout)"
    ) from exc

from . import config
from .backends import list_backends, lookup_backend, register_backend
from .debug import cache_entries, explain
from .dynamic_shapes import mark_dynamic, mark_static
from .eval_frame import compile, disable, optimize, reset, run
from .exc import FullGraphError, InternalError, Unsupported
from .logs import _from_environment, set_logs
from .markers import graph_break
from .html_report import report

__all__ = [
    "compile",
    "optimize",
    "disable",
    "run",
    "reset",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "explain",
    "cache_entries",
    "report",
    "register_backend",
    "list_backends",
    "lookup_backend",
    "set_logs",
    "config",
    "Unsupported",
    "FullGraphError",
    "InternalError",
]

__version__ = "0.1.0"

_from_environment()
