"""Settings that change how npdynamo compiles. Read by `convert_frame` at every compile.

Change them as attributes (``dynamo.config.cache_size_limit = 16``), with `patch` (tests), or,
for some, with an environment variable read once at import. Every option is declared once in
`OPTIONS` (name, default, accepted values, environment variable, doc), and every way of setting
it goes through the same validation: a wrong type or value raises TypeError/ValueError naming the
option and what it accepts, an unknown name raises AttributeError listing the known ones (with a
"did you mean"), and a bad environment variable makes ``import dynamo`` fail with a ValueError
naming the variable (a typo in the environment should not silently change nothing).

Skip rules (which code is never captured) are data here too: `skip_dirs`, `include_dirs`,
`skip_files`, `include_files`; see `trace_rules.skip_reason` for how they combine. Code already
seen keeps its decision until ``dynamo.reset()``.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import os
import site
import sys
import sysconfig
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from . import _C

__all__ = [
    "cache_size_limit", "accumulated_cache_size_limit", "guard_self_check", "suppress_errors",
    "emit_warnings",
    "max_instructions", "max_trace_seconds", "max_empty_breaks", "capture_try_bodies",
    "loop_kernels",
    "debug_insert_nops", "debug_check_stack_size",
    "check_accuracy", "repro_dir",
    "dump_dir",
    "skip_modules", "skip_dirs", "include_dirs", "skip_files", "include_files",
    "patch", "OPTIONS", "Option",
]


# Validators: take the value, return the value to store, or raise TypeError/ValueError with the
# accepted values (the caller adds the option name).


def _int_at_least(low: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError(f"expected an int >= {low}, got {value!r} ({type(value).__name__})")
        value = value.__index__()
        if value < low:
            raise ValueError(f"expected an int >= {low}, got {value}")
        return int(value)

    check.accepted = f"an int >= {low}"  # type: ignore[attr-defined]
    return check


def _positive_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number of seconds > 0, got {value!r} ({type(value).__name__})")
    if not value > 0 or value != value:
        raise ValueError(f"expected a number of seconds > 0, got {value!r}")
    return float(value)


_positive_seconds.accepted = "a number of seconds > 0"  # type: ignore[attr-defined]


def _env_float(text: str) -> float:
    return float(text.strip())


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected True or False, got {value!r} ({type(value).__name__})")
    return value


_bool.accepted = "True or False"  # type: ignore[attr-defined]


def _dirs(value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, (tuple, list)):
        raise TypeError(f"expected a tuple of directory paths, got {value!r} "
                        f"({type(value).__name__}); write (path,) for one directory")
    out = []
    for item in value:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"expected directory paths (str or os.PathLike), got {item!r}")
        path = os.path.abspath(os.fspath(item))
        if path not in out:
            out.append(path)
    return tuple(out)


_dirs.accepted = "a tuple of directory paths"  # type: ignore[attr-defined]


def _patterns(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise TypeError(f"expected a tuple of fnmatch patterns, got {value!r} "
                        f"({type(value).__name__}); write (pattern,) for one pattern")
    if not all(isinstance(item, str) for item in value):
        raise TypeError(f"expected patterns as str, got {value!r}")
    return tuple(dict.fromkeys(value))


_patterns.accepted = "a tuple of fnmatch patterns (str)"  # type: ignore[attr-defined]


def _path(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"expected a directory path (str or os.PathLike), got {value!r}")
    return os.fspath(value)


_path.accepted = "a directory path"  # type: ignore[attr-defined]


def _optional_path(value: Any) -> str | None:
    return None if value is None else _path(value)


_optional_path.accepted = "None or a directory path"  # type: ignore[attr-defined]


# Environment parsers: text -> value, ValueError on bad text.


def _env_int(text: str) -> int:
    return int(text.strip())


def _env_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_env_bool.accepted = "0/1, true/false, yes/no, on/off"  # type: ignore[attr-defined]


# Default skip rules ------------------------------------------------------------------------------


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = getattr(spec, "origin", None)
    return os.path.dirname(os.path.abspath(origin)) if origin else None


def _default_skip_dirs() -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(__file__))  # npdynamo never captures itself
    paths = sysconfig.get_paths()
    found = [here, _package_dir("fx"), _package_dir("numpy"), paths["stdlib"], paths["platstdlib"]]
    return _dirs([p for p in found if p])


def _default_include_dirs() -> tuple[str, ...]:
    # Third-party packages are user code, even when site-packages lives inside the stdlib
    # directory (a python.org build); NumPy's own directory is deeper, so it stays skipped.
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"]]
    with contextlib.suppress(Exception):
        found += site.getsitepackages()
    with contextlib.suppress(Exception):
        found.append(site.getusersitepackages())
    return _dirs([p for p in found if p])


# The table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One setting: its default, how values are checked, and where the environment sets it."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    doc: str
    env: str | None = None
    parse_env: Callable[[str], Any] | None = None
    #: Called with the new value after every change (and once at import), for settings the C
    #: extension must know about.
    apply: Callable[[Any], None] | None = None

    @property
    def accepted(self) -> str:
        return getattr(self.check, "accepted", "see the documentation")

    def validate(self, value: Any) -> Any:
        try:
            return self.check(value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"dynamo.config.{self.name}: {exc}") from None


def _apply_guard_self_check(value: bool) -> None:
    _C.set_guard_self_check(value)


def _apply_debug_insert_nops(value: bool) -> None:
    """Generated code is cached per code object (resume functions, loop and try/with body
    plans) and carries the NOPs or not: switching the option drops those caches."""

    for module, cache in (("dynamo.resume", "_resume_codes"), ("dynamo.loops", "_plans"),
                          ("dynamo.region_body", "_plans")):
        loaded = sys.modules.get(module)
        if loaded is not None:
            getattr(loaded, cache).clear()


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("cache_size_limit", 8, _int_at_least(1),
           "Compiled versions kept per code object; past it the code runs in run-only mode "
           "(one warning).", env="DYNAMO_CACHE_SIZE_LIMIT", parse_env=_env_int),
    Option("accumulated_cache_size_limit", 2048, _int_at_least(1),
           "Compiled versions kept over all code objects together (until dynamo.reset()); past "
           "it, a code object that misses runs in run-only mode (one warning, then the "
           "recompiles log names each).",
           env="DYNAMO_ACCUMULATED_CACHE_SIZE_LIMIT", parse_env=_env_int),
    Option("guard_self_check", False, _bool,
           "True: every guard evaluation runs both the C guard program and the Python guard "
           "function and raises AssertionError naming the guard when they disagree (slower; the "
           "test suite runs with it).", env="DYNAMO_GUARD_SELF_CHECK", parse_env=_env_bool,
           apply=_apply_guard_self_check),
    Option("suppress_errors", True, _bool,
           "True: an internal compiler error falls back to plain Python with a warning. False: it "
           "is raised as dynamo.InternalError (useful when debugging npdynamo itself).",
           env="DYNAMO_SUPPRESS_ERRORS", parse_env=_env_bool),
    Option("emit_warnings", False, _bool,
           "npdynamo's own diagnostics (recompile limit, internal error, C build failure, kernel "
           "cache problems, accuracy failures) go to the logger dynamo.<topic> at WARNING level "
           "and to explain(). True: each is also issued as a Python warning (RuntimeWarning, "
           "CBackendWarning, CacheDirWarning, ...) at the user's call. Off by default: warnings "
           "belong to the program (-W error, pytest.warns), which must not see npdynamo.",
           env="DYNAMO_EMIT_WARNINGS", parse_env=_env_bool),
    Option("max_instructions", 100_000, _int_at_least(1),
           "Instructions the translator simulates per frame before giving up (unrolled loops "
           "count).", env="DYNAMO_MAX_INSTRUCTIONS", parse_env=_env_int),
    Option("max_trace_seconds", 0.5, _positive_seconds,
           "CPU seconds (of the compiling thread) a frame may be traced, with what is inlined "
           "into it; past them, or past "
           "max_instructions, a loop is not unrolled: it runs in Python, its body compiled as a "
           "function.", env="DYNAMO_MAX_TRACE_SECONDS", parse_env=_env_float),
    Option("max_empty_breaks", 32, _int_at_least(1),
           "Graph breaks in a row, in one function, with no graph before each: past them the "
           "rest of the function runs in plain Python, uncompiled (every break compiles a "
           "resume function holding the rest of the function, so many such breaks cost compile "
           "time quadratic in their number, for nothing).",
           env="DYNAMO_MAX_EMPTY_BREAKS", parse_env=_env_int),
    Option("capture_try_bodies", True, _bool,
           "True: the body of a try/with statement that ends a graph runs as a function of its "
           "own, which is captured (graphs under np.errstate, in try bodies). False: the whole "
           "statement runs in plain Python.", env="DYNAMO_CAPTURE_TRY_BODIES",
           parse_env=_env_bool),
    Option("loop_kernels", True, _bool,
           "True: with the C backend, a loop of the frame that lowers (for over range, while; "
           "scalar arithmetic and array elements) runs as one C kernel, exact by "
           "deoptimisation (docs/loops.md). False: loops are unrolled or run in Python.",
           env="DYNAMO_LOOP_KERNELS", parse_env=_env_bool),
    Option("debug_insert_nops", False, _bool,
           "True (testing npdynamo itself): every code object npdynamo generates (transformed "
           "code, resume, loop and try/with body functions) gets a NOP before each instruction "
           "after its prologue, which must change nothing: it checks that jumps, exception "
           "ranges, line positions and prologues do not depend on instruction offsets.",
           env="DYNAMO_DEBUG_INSERT_NOPS", parse_env=_env_bool, apply=_apply_debug_insert_nops),
    Option("debug_check_stack_size", False, _bool,
           "True (testing npdynamo itself; the test suite sets it): the stack size of every "
           "code object npdynamo assembles, and its exception handlers' depths, computed in one "
           "pass (dynamo.stack_depth), are checked against bytecode's control-flow graph; a "
           "difference raises.", env="DYNAMO_DEBUG_CHECK_STACK_SIZE", parse_env=_env_bool),
    Option("check_accuracy", False, _bool,
           "True: every call of a compiled graph also runs the graph eagerly on copies of its "
           "inputs and compares; a difference (or a backend error) writes a repro directory "
           "under repro_dir and warns (AccuracyWarning) with its path. Slow: for debugging.",
           env="DYNAMO_CHECK_ACCURACY", parse_env=_env_bool),
    Option("repro_dir", "dynamo_repros", _path,
           "Where check_accuracy writes repro directories (relative: to the current directory).",
           env="DYNAMO_REPRO_DIR", parse_env=str),
    Option("dump_dir", None, _optional_path,
           "A directory: every compiled frame gets a folder there with its graph code (the "
           "code that runs is compiled from that file), bytecode, guards, resume functions "
           "and kernels (see dynamo.dump). None: off.",
           env="DYNAMO_DUMP_DIR", parse_env=str),
    Option("skip_dirs", _default_skip_dirs(), _dirs,
           "Code in these directories is never captured: npdynamo, fx, NumPy and the standard "
           "library by default."),
    Option("include_dirs", _default_include_dirs(), _dirs,
           "Code in these directories is captured even inside a skip_dirs entry. The most specific "
           "(longest) matching directory of the two lists decides; on a tie include_dirs wins. "
           "Default: site-packages (third-party code is user code)."),
    Option("skip_files", ("<*>",), _patterns,
           "fnmatch patterns of code filenames never captured (default: generated code, whose "
           "filename is like '<frozen ...>'). Checked before the directories."),
    Option("include_files", ("<string>", "<stdin>", "<ipython*"), _patterns,
           "fnmatch patterns of code filenames always captured; win over skip_files and the "
           "directories (exec'd strings, the REPL, IPython cells)."),
    Option("skip_modules", ("namedtuple_*",), _patterns,
           "fnmatch patterns of module names (a frame's globals['__name__']) never captured; "
           "checked first. Default: the methods collections.namedtuple generates from strings."),
)}


def _from_environment(option: Option) -> Any:
    text = os.environ.get(option.env) if option.env else None
    if text is None:
        return option.default
    accepted = getattr(option.parse_env, "accepted", option.accepted)
    try:
        return option.check(option.parse_env(text))
    except (TypeError, ValueError):
        raise ValueError(
            f"environment variable {option.env}={text!r} is invalid: dynamo.config.{option.name} "
            f"accepts {accepted}; fix or unset {option.env}"
        ) from None


# Module attributes: the current values (read as dynamo.config.<name>).
cache_size_limit: int
accumulated_cache_size_limit: int
guard_self_check: bool
suppress_errors: bool
emit_warnings: bool
max_instructions: int
max_trace_seconds: float
max_empty_breaks: int
capture_try_bodies: bool
loop_kernels: bool
debug_insert_nops: bool
debug_check_stack_size: bool
check_accuracy: bool
repro_dir: str
dump_dir: str | None
skip_modules: tuple[str, ...]
skip_dirs: tuple[str, ...]
include_dirs: tuple[str, ...]
skip_files: tuple[str, ...]
include_files: tuple[str, ...]
globals().update({name: _from_environment(option) for name, option in OPTIONS.items()})
for _option in OPTIONS.values():
    if _option.apply is not None:
        _option.apply(globals()[_option.name])


def _unknown(name: str) -> AttributeError:
    close = difflib.get_close_matches(name, OPTIONS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return AttributeError(f"dynamo.config has no option {name!r}{hint} "
                          f"(known options: {', '.join(OPTIONS)})")


@contextlib.contextmanager
def patch(**changes: Any) -> Iterator[None]:
    """Temporarily change settings: ``with config.patch(cache_size_limit=2): ...``.

    Every value is validated before any is applied."""
    for name in changes:
        if name not in OPTIONS:
            raise _unknown(name)
    checked = {name: OPTIONS[name].validate(value) for name, value in changes.items()}
    module = sys.modules[__name__]
    saved = {name: getattr(module, name) for name in checked}
    for name, value in checked.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


class _ConfigModule(types.ModuleType):
    """The class of this module: assignments to options are validated, others are refused."""

    def __setattr__(self, name: str, value: Any) -> None:
        option = OPTIONS.get(name)
        if option is not None:
            value = option.validate(value)
        elif not (name.startswith("__") and name.endswith("__")):  # module machinery
            raise _unknown(name)
        super().__setattr__(name, value)
        if option is not None and option.apply is not None:
            option.apply(value)

    def __delattr__(self, name: str) -> None:
        if name in OPTIONS:
            raise AttributeError(f"dynamo.config.{name} cannot be deleted; assign "
                                 f"dynamo.config.OPTIONS[{name!r}].default to restore it")
        super().__delattr__(name)


sys.modules[__name__].__class__ = _ConfigModule
