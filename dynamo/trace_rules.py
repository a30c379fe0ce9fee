"""Trace rules: which code npdynamo never captures.

In: a code object (and the globals of its frame, for its module's name). Out: why it is never
captured, as a sentence for the debug view, or None to capture it. The rules are settings of
`dynamo.config` (`skip_modules`, `skip_dirs`, `include_dirs`, `skip_files`, `include_files`),
plus one fixed rule: a compiled graph's own generated code is never traced.

Asked by the compile callback (`convert_frame`, once per code object: a skipped code is marked
SKIP in the C cache), by the translator before it inlines a call (a skipped function runs as a
frame of its own), and by `output_graph` for a backend's callable (run with capture off). Call
it as ``trace_rules.skip_reason(...)``: tools that widen the rules for one run (the CPython test
runner in tests/cpython) wrap the module attribute.
"""

from __future__ import annotations

import fnmatch
import os
import types

from fx.graph_module import module_for as fx_module_for
from fx.locations import origin as graph_origin

from . import config

__all__ = ["skip_reason"]


def _longest_match(path: str, dirs: tuple[str, ...]) -> int:
    """Length of the longest directory of `dirs` containing `path` (-1: none)."""
    best = -1
    for d in dirs:
        prefix = d if d.endswith(os.sep) else d + os.sep
        if len(d) > best and (path == d or path.startswith(prefix)):
            best = len(d)
    return best


def skip_reason(code: types.CodeType, f_globals: dict | None = None) -> str | None:
    """Why `code` is never captured, or None to capture it. Reads the rules in `config`: a frame
    of a module matching `skip_modules` (by its globals' ``__name__``) is skipped; then a
    filename matching `include_files` is captured, then one matching `skip_files` is skipped;
    otherwise the most specific directory of `include_dirs` / `skip_dirs` containing the file
    decides (include on a tie; captured when neither contains it)."""
    module = f_globals.get("__name__") if f_globals is not None else None
    # (a graph's code, also from a dump file or relocated to the user's lines)
    if fx_module_for(code.co_filename) is not None or graph_origin(code) is not None:
        return "generated graph code"
    if isinstance(module, str) and any(fnmatch.fnmatchcase(module, p) for p in config.skip_modules):
        return f"code of module {module} (dynamo.config.skip_modules)"
    filename = code.co_filename
    if any(fnmatch.fnmatchcase(filename, p) for p in config.include_files):
        return None
    if any(fnmatch.fnmatchcase(filename, p) for p in config.skip_files):
        return f"generated code or a skipped file ({filename}; dynamo.config.skip_files)"
    path = os.path.abspath(filename)
    skip = _longest_match(path, config.skip_dirs)
    if skip > _longest_match(path, config.include_dirs):
        return f"code in a skipped directory ({path}; dynamo.config.skip_dirs)"
    return None
