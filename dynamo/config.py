"""Settings that change how npdynamo compiles. Read by `convert_frame` at every compile.

Change them as attributes (``dynamo.config.cache_size_limit = 16``) or with `patch` in tests.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

__all__ = ["cache_size_limit", "suppress_errors", "max_instructions", "patch"]

#: Compiled versions kept per code object; past it the code runs in run-only mode (one warning).
cache_size_limit: int = int(os.environ.get("DYNAMO_CACHE_SIZE_LIMIT", "8"))

#: True: an internal compiler error falls back to plain Python with a warning.
#: False: it is raised (useful when debugging npdynamo itself).
suppress_errors: bool = os.environ.get("DYNAMO_SUPPRESS_ERRORS", "1") != "0"

#: Instructions the translator simulates per frame before giving up (unrolled loops count).
max_instructions: int = 100_000


@contextlib.contextmanager
def patch(**changes: object) -> Iterator[None]:
    """Temporarily change settings: ``with config.patch(cache_size_limit=2): ...``."""
    module = globals()
    unknown = [name for name in changes if name not in __all__ or name == "patch"]
    if unknown:
        raise AttributeError(f"unknown config setting(s) {unknown}; known: {__all__[:-1]}")
    saved = {name: module[name] for name in changes}
    module.update(changes)
    try:
        yield
    finally:
        module.update(saved)
