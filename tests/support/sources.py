"""Functions made from source text, each with a code object of its own (so no compile state,
cache entry or constant carries over from another test), in the file the caller names."""

from __future__ import annotations

import numpy as np


def fresh_function(src: str, filename: str, name: str = "f", glb: dict | None = None):
    """`name` from `src` compiled as `filename`, in a new namespace (a copy of `glb`, by
    default ``{"np": np}``)."""
    namespace = dict(glb if glb is not None else {"np": np})
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]
