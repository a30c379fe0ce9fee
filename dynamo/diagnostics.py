"""npdynamo's own diagnostics: logged, and warned into the program only when the user asks.

In: a message about npdynamo itself (a function hit the recompile limit, an internal error made
a frame run in plain Python, the C backend could not build kernels, a kernel cache directory was
refused or an entry was corrupt, a graph's accuracy check failed), with its topic and its
`Warning` category. Out: a WARNING record on the logger ``dynamo.<topic>`` and, only with
``dynamo.config.emit_warnings = True``, a Python warning. Called by `convert_frame`, `dump`,
`repro` and the C backend; the callers also keep the message in compile records, which
``dynamo.explain()`` and the HTML report show.

Why not `warnings`: the warnings machinery belongs to the program being compiled. Its filters
(``-W error``, ``warnings.simplefilter("error")``: NumPy's own test configuration and common in
CI), ``pytest.warns``, ``warnings.catch_warnings(record=True)`` and the "once per location"
registries all observe a warning, so a warning of npdynamo's would make the compiled program
raise, or count, where the plain one does not. A logging record changes nothing the program can
see; with no handler configured, logging's last-resort handler still prints it on stderr.

With ``emit_warnings`` on, the warning is attributed to the first frame outside npdynamo (the
user's call of the compiled function), with that frame's module and registry, as
``warnings.warn`` does for the frame a stacklevel names, so filters by module and "once per
location" apply to it.
"""

from __future__ import annotations

import os
import sys
import warnings

import fx as _fx

from . import config
from .logs import get_logger

__all__ = ["diagnose"]

_OWN_DIRS = tuple(os.path.dirname(os.path.abspath(p)) + os.sep for p in
                  (__file__, _fx.__file__))


def diagnose(topic: str, message: str, category: type[Warning]) -> None:
    """Report `message` on the logger ``dynamo.<topic>`` at WARNING level; also warn with
    `category` at the user's call when ``dynamo.config.emit_warnings`` is True."""
    get_logger(topic).warning("%s", message)
    if config.emit_warnings:
        warn_at_user_code(message, category)


def warn_at_user_code(message: str, category: type[Warning]) -> None:
    """warnings.warn attributed to the first frame outside npdynamo, with that frame's module
    and registry (see the module docstring)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_OWN_DIRS):
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals = frame.f_globals
    registry = module_globals.setdefault("__warningregistry__", {})
    # (no module_globals: it is only for showing the source line, and linecache's lazy loading
    # raises for some loaders, e.g. a script read from stdin)
    lineno = frame.f_lineno  # (None at an instruction without a line: the def line then)
    warnings.warn_explicit(message, category, frame.f_code.co_filename,
                           lineno if lineno is not None else frame.f_code.co_firstlineno,
                           module=module_globals.get("__name__", "<unknown>"), registry=registry)
