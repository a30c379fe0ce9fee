"""The compile callback the C hook calls on a cache miss.

Policy lives here (the C side is mechanism): which frames are skipped for good, the recompile
limit, what happens when the translator meets unsupported code (run the frame unmodified and
record why, or raise with ``fullgraph=True``), and internal errors (warn and fall back, never
crash). Compilation is serialised by one lock; the C hook switches capture off for this thread
while the callback runs, so the compiler never traces itself.
"""

from __future__ import annotations

import dis
import logging
import os
import sys
import sysconfig
import threading
import traceback
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import _C, config
from .exc import BackendError, FullGraphError, InternalError, Unsupported
from .logs import get_logger
from .symbolic_convert import CompiledFrame, trace_frame

__all__ = ["ConvertFrame", "CompileRecord", "compile_lock", "touched_codes", "records", "skip_code"]

compile_lock = threading.RLock()

#: Every code object the compiler has seen, so `reset()` can clear their caches.
touched_codes: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()

log_graph = get_logger("graph_code")
log_guards = get_logger("guards")
log_recompiles = get_logger("recompiles")
log_bytecode = get_logger("bytecode")
log_breaks = get_logger("graph_breaks")


@dataclass
class CompileRecord:
    """One compile event, kept for `explain()` and the debug view."""

    code: types.CodeType
    compiled: CompiledFrame | None = None
    reason: str | None = None          # why the frame was not captured (a graph break)
    recompile_reason: str | None = None
    seconds: float = 0.0


class _Records(threading.local):
    def __init__(self) -> None:
        self.sink: list[CompileRecord] | None = None


records = _Records()


def _record(rec: CompileRecord) -> None:
    if records.sink is not None:
        records.sink.append(rec)


# Skip rules ------------------------------------------------------------------------------------

_PACKAGE_DIRS = tuple(
    os.path.dirname(os.path.abspath(mod.__file__)) + os.sep
    for mod in (sys.modules["dynamo"], sys.modules["fx"], np)
)
_STDLIB_DIRS = tuple(
    {os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])}
)


def skip_reason(code: types.CodeType) -> str | None:
    filename = code.co_filename
    if filename.startswith("<") and filename not in ("<string>", "<stdin>") and not filename.startswith("<ipython"):
        return f"generated code ({filename})"
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE_DIRS):
        return "code of npdynamo or NumPy"
    if path.startswith(_STDLIB_DIRS) and "site-packages" not in path:
        return "standard library code"
    return None


def skip_code(code: types.CodeType) -> None:
    _C.set_code_state(code, _C.SKIP)
    touched_codes.add(code)


def _where(code: types.CodeType) -> str:
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


# The callback ------------------------------------------------------------------------------


@dataclass
class ConvertFrame:
    """The callable installed in the C hook: compile one frame with `backend`."""

    backend: Callable
    fullgraph: bool = False
    warned: "weakref.WeakSet[types.CodeType]" = field(default_factory=weakref.WeakSet)

    def __call__(self, frame: Any) -> tuple[Callable, types.CodeType] | None:
        code = frame.f_code
        reason = skip_reason(code)
        if reason is not None:
            skip_code(code)
            return None
        with compile_lock:
            touched_codes.add(code)
            entries = _C.get_cache_entries(code, self)  # this backend's versions
            if any(check_fn(*frame.args, frame.f_globals, frame.closure) for check_fn, _ in entries):
                # Another thread compiled this version while we waited for the lock: this one
                # call runs unmodified; later calls hit the cache.
                return None
            recompile_reason = self._recompile_reason(frame, entries) if entries else None
            if len(_C.get_cache_entries(code)) >= config.cache_size_limit:
                self._hit_limit(code, recompile_reason)
                return None
            if recompile_reason is not None:
                log_recompiles.info("Recompiling %s: %s", _where(code), recompile_reason)
            try:
                compiled = trace_frame(frame, self.backend)
            except Unsupported as exc:
                return self._unsupported(code, exc, bool(entries), recompile_reason)
            except Exception as exc:
                return self._internal_error(code, exc)
            if compiled is None:
                _record(CompileRecord(code, reason="nothing to compile (no NumPy operations)"))
                if not entries:
                    skip_code(code)
                return None
            _C.set_code_state(compiled.code, _C.SKIP)
            self._log(compiled)
            _record(CompileRecord(code, compiled=compiled, recompile_reason=recompile_reason,
                                  seconds=compiled.result.compile_seconds))
            return compiled.check_fn, compiled.code

    def _recompile_reason(self, frame: Any, entries: list) -> str:
        check_fn = entries[0][0]
        failure = check_fn.first_failure(*frame.args, frame.f_globals, frame.closure)
        return f"guard failed: {failure}" if failure else "guard failed"

    def _hit_limit(self, code: types.CodeType, reason: str | None) -> None:
        _C.set_code_state(code, _C.RUN_ONLY)
        if code not in self.warned:
            self.warned.add(code)
            warnings.warn(
                f"npdynamo: {_where(code)} was recompiled {config.cache_size_limit} times "
                f"(dynamo.config.cache_size_limit); from now on it only reuses the versions already "
                f"compiled and runs in plain Python otherwise. Last {reason}.",
                RuntimeWarning,
                stacklevel=2,
            )

    def _unsupported(self, code, exc: Unsupported, has_entries: bool, recompile_reason) -> None:
        message = f"{exc.reason} at {exc.location}" if exc.location else exc.reason
        if self.fullgraph:
            raise FullGraphError(
                f"fullgraph=True but {_where(code)} could not be captured as one graph: {message}"
            ) from None
        log_breaks.info("Not capturing %s: %s", _where(code), message)
        _record(CompileRecord(code, reason=message, recompile_reason=recompile_reason))
        if not has_entries:
            skip_code(code)
        return None

    def _internal_error(self, code, exc: Exception) -> None:
        if isinstance(exc, BackendError):
            message = str(exc)
        else:
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if not config.suppress_errors:
            raise InternalError(f"npdynamo failed to compile {_where(code)}: {message}") from exc
        warnings.warn(
            f"npdynamo: internal error while compiling {_where(code)}; running it in plain Python. "
            f"{message}. Set dynamo.config.suppress_errors = False to raise instead.",
            RuntimeWarning,
            stacklevel=2,
        )
        log_breaks.info("Internal error compiling %s:\n%s", _where(code), traceback.format_exc())
        _record(CompileRecord(code, reason=f"internal error: {message}"))
        skip_code(code)
        return None

    def _log(self, compiled: CompiledFrame) -> None:
        gm = compiled.result.graph_module
        if log_graph.isEnabledFor(logging.INFO):
            log_graph.info("Graph for %s:\n%s", _where(compiled.original_code), gm.code)
        if log_guards.isEnabledFor(logging.INFO):
            log_guards.info("Guards for %s:\n%s", _where(compiled.original_code), "\n".join(compiled.check_fn.guards))
        if log_bytecode.isEnabledFor(logging.INFO):
            log_bytecode.info("Bytecode of %s:\n%s", _where(compiled.original_code),
                              side_by_side(compiled.original_code, compiled.code))


def side_by_side(original: types.CodeType, transformed: types.CodeType, width: int = 60) -> str:
    """Original and transformed bytecode in two columns."""
    left = _dis_lines(original)
    right = _dis_lines(transformed)
    rows = [f"{'ORIGINAL':<{width}} | TRANSFORMED", f"{'-' * width}-+-{'-' * width}"]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        rows.append(f"{a[:width]:<{width}} | {b}")
    return "\n".join(rows)


def _dis_lines(code: types.CodeType) -> list[str]:
    lines = []
    for inst in dis.get_instructions(code):
        arg = "" if inst.arg is None else f" {inst.argrepr or inst.arg}"
        lines.append(f"{inst.offset:>4} {inst.opname}{arg}")
    return lines
