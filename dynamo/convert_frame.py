"""The compile callback the C hook calls on a cache miss.

Policy lives here (the C side is mechanism): which frames are skipped for good, the recompile
limit, what happens when the translator meets unsupported code (run the frame unmodified and
record why, or raise with ``fullgraph=True``), and internal errors (warn and fall back, never
crash). Compilation is serialised by one lock; the C hook switches capture off for this thread
while the callback runs, so the compiler never traces itself.
"""

from __future__ import annotations

import builtins as _builtins
import functools
import inspect
import logging
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from fx.weak import IdentitySet

from . import _C, config, dump, html_report, trace_rules
from .bytecode_analysis import CodeMap
from .diagnostics import diagnose
from .exc import BackendError, FullGraphError, InternalError, Unsupported, UserCodeError
from .interrupts import call_keeping_interrupts
from .logs import get_logger
from .resume import display_name, in_loop_body
from .compile_frame import CompiledFrame, trace_frame
from .records import NOTHING_TO_COMPILE, CompileRecord, records
from .variables.base import compile_models

__all__ = ["ConvertFrame", "compile_lock", "touched_codes", "skip_code",
           "check_fullgraph_target"]

compile_lock = threading.RLock()

class _TouchedCodes(IdentitySet):
    """Every code object the compiler has seen, so `reset()` can clear their caches. Clearing it
    (what `reset()` does) also forgets each callback's remembered compile failures."""

    def clear(self) -> None:
        for callback in list(_all_callbacks):
            callback.failed.clear()
            callback.warned.clear()
            callback.uncapturable.clear()
        _skipped_uncapturable.clear()
        _accumulated_warned.clear()
        super().clear()


# (Weak sets by identity whose entries die without running Python code: fx.weak.)
touched_codes: "IdentitySet[types.CodeType]" = _TouchedCodes()
_all_callbacks: "IdentitySet[ConvertFrame]" = IdentitySet()
#: Code of functions wrapped with ``fullgraph=True``: a failed capture by another callback must
#: not mark them SKIP (the hook would then never ask the fullgraph callback, which must raise).
_fullgraph_codes: "IdentitySet[types.CodeType]" = IdentitySet()
#: Code marked SKIP because it could not be captured (not by the skip rules or for having no
#: NumPy operations): wrapping it with ``fullgraph=True`` later takes the mark back.
_skipped_uncapturable: "IdentitySet[types.CodeType]" = IdentitySet()

log_graph = get_logger("graph_code")
log_guards = get_logger("guards")
log_recompiles = get_logger("recompiles")
log_bytecode = get_logger("bytecode")
log_breaks = get_logger("graph_breaks")


def _record(rec: CompileRecord) -> None:
    if records.sink is not None:
        records.sink.append(rec)
    html_report.note(rec)  # (text only, the last few thousand: for dynamo.report())


#: Versions kept for a loop body function (or its resume functions): its arguments change on
#: every iteration, so a body that specialises on them (the loop counter as a constant) would
#: otherwise compile one version per iteration up to the cache limit.
LOOP_BODY_VERSIONS = 2


def _version_limit(code: types.CodeType) -> int:
    limit = config.cache_size_limit
    return min(limit, LOOP_BODY_VERSIONS) if in_loop_body(code) else limit


def skip_code(code: types.CodeType) -> None:
    _C.set_code_state(code, _C.SKIP)
    touched_codes.add(code)


def _where(code: types.CodeType) -> str:
    return f"{display_name(code)} ({code.co_filename}:{code.co_firstlineno})"


#: Non-empty once the total-limit warning was given (one per process until reset(): each code
#: object that then misses would otherwise warn on its own).
_accumulated_warned: set[bool] = set()


def _cached_versions() -> int:
    """Compiled versions in the cache over all code objects, for the total limit
    `config.accumulated_cache_size_limit` (entries leave with reset(), their code or their
    backend). Counted at each compile, which is rare next to a compile's own cost."""
    return sum(len(_C.get_cache_entries(code)) for code in list(touched_codes))


def _chain(exc: BaseException | None) -> list[BaseException]:
    """`exc` and every exception its causes and contexts reach."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen[id(item)] = item
        todo += [item.__cause__, item.__context__]
    return list(seen.values())


def _forget_traceback(exc: BaseException, users: BaseException | None) -> None:
    """Drop the tracebacks of a compile's exception (and of the causes and contexts it made)
    once it is handled, and return None. They hold the compiler's frames, one of which may hold
    the exception itself (a reference cycle), and the outermost of them has the user's frame as
    its f_back: kept alive, that frame object would outlive the user's call as garbage
    (``gc.collect()`` counts it) and look referenced from outside (``_C.stay_in_frame``).
    `users` is the exception the user's program was handling when the compile started (a frame
    called from an ``except`` clause or an ``__exit__``): the compile's exceptions have it as
    their context, and it and its chain are the user's, left as they are."""
    keep = {id(item) for item in _chain(users)}
    for item in _chain(exc):
        if id(item) not in keep:
            item.__traceback__ = None
    return None


def _recompile_reason(failures: list[str]) -> str | None:
    if not failures:
        return None
    if len(failures) == 1:
        return f"guard failed: {failures[0]}"
    return f"guard failed in each of the {len(failures)} versions: " + "; ".join(
        f"version {i}: {reason}" for i, reason in enumerate(failures))


# The callback ------------------------------------------------------------------------------


_GENERATOR_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                    | inspect.CO_ITERABLE_COROUTINE)


def check_fullgraph_target(fn: Any) -> None:
    """Raise FullGraphError if `fn` is a generator, coroutine or async generator function: the
    hook never captures their frames, so ``fullgraph=True`` could not keep its promise.
    Otherwise remember `fn`'s code as a fullgraph target: if a compile without fullgraph marked
    it SKIP (it could not be captured), take the mark back, so the fullgraph callback is asked
    and raises instead of the hook running the function uncompiled."""
    target = fn
    for _ in range(100):  # partials and bound methods around the function
        inner = getattr(target, "func", None) if isinstance(target, functools.partial) else \
            getattr(target, "__func__", None)
        if inner is None:
            break
        target = inner
    code = getattr(target, "__code__", None)
    if isinstance(code, types.CodeType) and code.co_flags & _GENERATOR_FLAGS:
        coroutine = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE
        kind = ("an async generator" if code.co_flags & inspect.CO_ASYNC_GENERATOR else
                "a coroutine" if code.co_flags & coroutine else "a generator")
        raise FullGraphError(
            f"fullgraph=True but {_where(code)} is {kind} function: generators and coroutines "
            "are never captured (their frames are suspended and resumed); compile the NumPy work "
            "as a plain function called from it, or drop fullgraph=True"
        )
    if isinstance(code, types.CodeType):
        with compile_lock:
            _fullgraph_codes.add(code)
            _unskip_uncapturable(code)


def _unskip_uncapturable(code: types.CodeType) -> None:
    """Take back the SKIP mark an uncapturable `code` got, so a fullgraph callback is asked
    about it (and raises); the other callbacks keep their verdict without tracing again."""
    if code in _skipped_uncapturable:
        _skipped_uncapturable.discard(code)
        for callback in list(_all_callbacks):
            if not callback.fullgraph:
                callback.uncapturable.add(code)
        if _C.get_code_state(code) == _C.SKIP:
            _C.set_code_state(code, _C.DEFAULT)


#: The builtins as they were when npdynamo was imported (``_`` changes with every expression the
#: interactive interpreter shows).
_BUILTINS = {name: value for name, value in _builtins.__dict__.items() if name != "_"}
_ABSENT = object()


def changed_builtin() -> str | None:
    """The name of a builtin the program removed or replaced since npdynamo was imported, or
    None. (Reads the builtins module's dict directly: `vars` may be one of them.)"""
    current = _builtins.__dict__
    for name, value in _BUILTINS.items():
        if current.get(name, _ABSENT) is not value:
            return name
    return None


def _fullgraph_callback_alive() -> bool:
    # `with optimize(fullgraph=True):` names no function in advance: while such a callback
    # exists, no uncapturable code is marked SKIP (the hook would never ask the callback).
    return any(callback.fullgraph for callback in list(_all_callbacks))


@dataclass(eq=False)  # hashed by identity: the C cache tags entries with the callback
class ConvertFrame:
    """The callable installed in the C hook: compile one frame with `backend`."""

    backend: Callable
    fullgraph: bool = False
    #: ``dynamic=`` of `dynamo.compile` (see `dynamo.dynamic_shapes`)
    dynamic: bool | None = None
    warned: CodeMap = field(default_factory=CodeMap)
    #: Codes this callback failed to compile (internal or backend error): they run unmodified
    #: for this callback only (another backend may still compile them) until `reset()`. (By
    #: identity: asked on every call of such a code, see `CodeMap`.)
    failed: CodeMap = field(default_factory=CodeMap)
    #: Codes this callback could not capture that are not marked SKIP because a fullgraph
    #: callback must still see them (`_fullgraph_codes`): they run unmodified for this callback.
    uncapturable: CodeMap = field(default_factory=CodeMap)

    def __post_init__(self) -> None:
        with compile_lock:
            _all_callbacks.add(self)
            if self.fullgraph:
                for code in list(_skipped_uncapturable):
                    _unskip_uncapturable(code)

    def check_target(self, fn: Any) -> None:
        """Called by the capture scope for each function it wraps (`capture.CaptureScope`)."""
        if self.fullgraph:
            check_fullgraph_target(fn)

    def __call__(self, frame: Any) -> tuple[Callable, types.CodeType] | None:
        # (program objects die while compiling: a Ctrl-C in their weakref callbacks is raised)
        return call_keeping_interrupts(self._call, frame)

    def _call(self, frame: Any) -> tuple[Callable, types.CodeType] | None:
        users = sys.exc_info()[1]  # (the exception the user's program is handling, if any)
        try:
            return self._convert(frame, users)
        except (FullGraphError, InternalError, Warning):
            raise  # (meant for the user: fullgraph=True, suppress_errors=False, -W error)
        except Exception as exc:  # noqa: BLE001 (the user's frame runs whatever went wrong)
            # Outside the compile's own handlers, e.g. a builtin the program replaced
            # (``builtins.len = lru_cache(len)``, CPython's test_functools) failing in the skip
            # rules or the cache bookkeeping: the code runs as written.
            try:
                self._internal_error(frame.f_code, exc)
            except (FullGraphError, InternalError, Warning):
                raise
            except Exception:  # noqa: BLE001 (even reporting it failed: the stdlib needs len)
                self._mark_failed(frame.f_code)
            return _forget_traceback(exc, users)

    def _convert(self, frame: Any, users: BaseException | None = None
                 ) -> tuple[Callable, types.CodeType] | None:
        code = frame.f_code
        if code in self.failed or code in self.uncapturable:
            # First: while a fullgraph callback exists, uncapturable code is not marked SKIP
            # and comes back here on every call (no skip rule matching per call).
            return None
        reason = trace_rules.skip_reason(code, frame.f_globals)
        if reason is not None:
            skip_code(code)
            return None
        with compile_lock:
            ready = self._may_compile(frame)
            if ready is None:
                return None
            entries, recompile_reason = ready
            if recompile_reason is not None:
                log_recompiles.info("Recompiling %s: %s", _where(code), recompile_reason)
            try:
                with compile_models():  # (then emptied: the models of cycles are no garbage)
                    compiled = trace_frame(frame, self.backend, allow_breaks=not self.fullgraph,
                                           dynamic=self.dynamic)
            except UserCodeError as exc:
                self._user_error(code, exc, recompile_reason)
                return _forget_traceback(exc, users)
            except Unsupported as exc:
                self._unsupported(code, exc, bool(entries), recompile_reason)
                return _forget_traceback(exc, users)
            except Exception as exc:
                if isinstance(exc.__cause__ or exc, (RecursionError, MemoryError)):
                    # no stack/memory left now, nothing wrong with the code: retry later
                    return _forget_traceback(exc, users)
                self._internal_error(code, exc)  # (raises InternalError unless suppressed)
                return _forget_traceback(exc, users)
            if compiled is None:
                _record(CompileRecord(code, reason=NOTHING_TO_COMPILE))
                if not entries:
                    skip_code(code)
                return None
            _C.set_code_state(compiled.code, _C.SKIP)
            self._log(compiled)
            if config.dump_dir is not None:
                dump.write_frame(compiled)
            if compiled.break_reason is not None:
                log_breaks.info("Graph break in %s: %s", _where(code), compiled.break_reason)
            _record(CompileRecord(code, compiled=compiled, reason=compiled.break_reason,
                                  recompile_reason=recompile_reason, seconds=compiled.seconds))
            return compiled.check_fn, compiled.code

    def _guard_failures(self, frame: Any, entries: list) -> list[str]:
        """The first failing guard of every version this callback has for the code (most
        recently used first), in plain words (``x.shape[0]: expected 1024, got 2048 (guard:
        x.shape == (1024,))``)."""
        reasons = []
        for check_fn, _ in entries:
            describe = getattr(check_fn, "first_failure", None)
            try:
                failure = (describe(*frame.args, frame.f_globals, frame.closure)
                           if describe else None)
            except Exception as exc:  # a guard whose description fails must not stop the compile
                failure = f"(could not describe: {type(exc).__name__}: {exc})"
            reasons.append(failure or "unknown guard")
        return reasons

    def _hit_limit(self, code: types.CodeType, failures: list[str],
                   accumulated: bool = False) -> None:
        _C.set_code_state(code, _C.RUN_ONLY)
        # The full list goes to the log; the warning names the most recently used version's.
        reason = _recompile_reason(failures)
        last = f"guard failed: {failures[0]}" if failures else None
        if in_loop_body(code) and not accumulated:
            # Expected, not the user's doing: a loop body that specialises on the loop counter.
            message = (f"the loop body recompiles on every iteration ({reason}); it keeps its "
                       f"{LOOP_BODY_VERSIONS} versions and runs in plain Python otherwise")
            log_recompiles.info("%s: %s", _where(code), message)
            _record(CompileRecord(code, reason=message))
            return
        if accumulated:
            what = (f"npdynamo: {_where(code)} was not recompiled: {_cached_versions()} versions "
                    f"are compiled over all functions "
                    f"(dynamo.config.accumulated_cache_size_limit); "
                    f"from now on it only reuses the versions already compiled and runs in plain "
                    f"Python otherwise")
        else:
            what = (f"npdynamo: {_where(code)} was recompiled {config.cache_size_limit} times "
                    f"(dynamo.config.cache_size_limit); from now on it only reuses the versions "
                    f"already compiled and runs in plain Python otherwise")
        message = f"{what}. Last {last}." if last else f"{what}."
        _record(CompileRecord(code, reason=message))
        # Reported once (per code; once in all for the total limit), then only in the log topic.
        if accumulated:
            first = not _accumulated_warned
            _accumulated_warned.add(True)
        else:
            first = code not in self.warned
            self.warned.add(code)
        if first:
            diagnose("recompiles", message, RuntimeWarning)
        else:
            log_recompiles.info("%s (%s)", message, reason)

    def _unsupported(self, code, exc: Unsupported, has_entries: bool, recompile_reason) -> None:
        message = f"{exc.reason} at {exc.location}" if exc.location else exc.reason
        if self.fullgraph:
            raise FullGraphError(
                f"fullgraph=True but {_where(code)} could not be captured as one graph: {message}"
            ) from None
        log_breaks.info("Not capturing %s: %s", _where(code), message)
        _record(CompileRecord(code, reason=message, recompile_reason=recompile_reason))
        if not has_entries:
            if code in _fullgraph_codes or _fullgraph_callback_alive():
                self.uncapturable.add(code)
                touched_codes.add(code)
            else:
                skip_code(code)
                _skipped_uncapturable.add(code)
        return None

    def _user_error(self, code, exc: UserCodeError, recompile_reason) -> None:
        # The user's own code raises for these (guarded) values: run the frame in plain Python,
        # which raises the user's exception with the user's traceback, also with fullgraph=True
        # (a FullGraphError would hide the real bug). Not marked SKIP: other values may compile.
        message = f"{exc.reason} at {exc.location}" if exc.location else exc.reason
        log_breaks.info("Not capturing %s: %s", _where(code), message)
        _record(CompileRecord(code, reason=message, recompile_reason=recompile_reason))
        return None

    def _may_compile(self, frame: Any) -> tuple[list, str | None] | None:
        """(this backend's cached versions, why it recompiles) when `frame` is to be compiled
        now, or None when it runs as it is (another thread compiled it meanwhile, or a cache
        limit is hit). Called with the compile lock held."""
        code = frame.f_code
        touched_codes.add(code)
        entries = _C.get_cache_entries(code, self)  # this backend's versions
        if any(check_fn(*frame.args, frame.f_globals, frame.closure) for check_fn, _ in entries):
            # Another thread compiled this version while we waited for the lock: this one
            # call runs unmodified; later calls hit the cache.
            return None
        failures = self._guard_failures(frame, entries)
        recompile_reason = _recompile_reason(failures)
        if len(_C.get_cache_entries(code)) >= _version_limit(code):
            self._hit_limit(code, failures)
            return None
        if _cached_versions() >= config.accumulated_cache_size_limit:
            self._hit_limit(code, failures, accumulated=True)
            return None
        return entries, recompile_reason

    def _internal_error(self, code, exc: Exception) -> None:
        changed = changed_builtin()
        if changed is not None and not isinstance(exc, BackendError):
            # Not npdynamo's bug: the program removed or replaced a builtin that the compiler
            # (or a library it uses) calls (CPython's test_iter deletes builtins.iter, its
            # test_functools wraps len in lru_cache). The frame runs as written this time, and
            # compiles again on a later call once the builtin is back.
            _record(CompileRecord(code, reason=f"not compiled: the program changed the builtin "
                                               f"{changed!r}, which npdynamo's compiler uses"))
            return None
        if isinstance(exc, BackendError):
            message = str(exc)
        else:
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if not config.suppress_errors:
            raise InternalError(f"npdynamo failed to compile {_where(code)}: {message}") from exc
        diagnose(
            "graph_breaks",
            f"npdynamo: internal error while compiling {_where(code)}; running it in plain Python. "
            f"{message}. Set dynamo.config.suppress_errors = False to raise instead.",
            RuntimeWarning,
        )
        if log_breaks.isEnabledFor(logging.INFO):
            log_breaks.info("Internal error compiling %s:\n%s", _where(code),
                            traceback.format_exc())
        _record(CompileRecord(code, reason=f"internal error: {message}"))
        self._mark_failed(code)
        return None

    def _mark_failed(self, code: types.CodeType) -> None:
        # Remembered for this callback only: another backend may compile this code. (Also in
        # the C cache, so later calls run the code without calling back; reset() clears both.)
        self.failed.add(code)
        touched_codes.add(code)
        _C.set_code_failed(code, self)

    def _log(self, compiled: CompiledFrame) -> None:
        gm = compiled.result.graph_module if compiled.result is not None else None
        if gm is not None and log_graph.isEnabledFor(logging.INFO):
            log_graph.info("Graph for %s:\n%s", _where(compiled.original_code), gm.code)
        if log_guards.isEnabledFor(logging.INFO):
            log_guards.info("Guards for %s:\n%s", _where(compiled.original_code), "\n".join(compiled.check_fn.guards))
        if log_bytecode.isEnabledFor(logging.INFO):
            log_bytecode.info("Bytecode of %s:\n%s", _where(compiled.original_code),
                              dump.side_by_side(compiled.original_code, compiled.code))
