"""Property: programs with control flow behave the same compiled by npdynamo as in plain Python.

In: `control_gen.control_programs` (Hypothesis) makes programs with data-dependent and constant
branches, generated helpers, lambdas, closures, short and long loops (the long ones under a small
``dynamo.config.max_instructions`` so their body is compiled as a loop body function),
``break``/``continue``/early ``return``, ``while`` loops, ``dynamo.graph_break()``, prints,
lists, tuple returns, in-place operations and code that raises. Each program is written to a
real ``.py`` file (so linecache and ``file:line`` work; npdynamo skips file names starting with
"<"), exec'd, and its ``f(x, y, n)`` run on deep copies of the same arguments: once in plain
Python (the oracle), then twice through ``dynamo.compile(f, backend=...)`` (first call: compile;
second: cache hit, which must capture no new graph when the program returns), then once more
on other values of the same types and shapes (the guards must pick a version valid for them, or
recompile).

Compared, exactly: the return value (type, dtype, shape, strides, bits with NaN == NaN; helpers
from tests/dynamo/conftest.py), which results are views of which arguments, the arguments after
the call, the exception raised (type and message), everything printed, and every warning
(category and message, in order: npdynamo's "internal error" fallback warns, so it fails here).
A run that takes longer than `TIMEOUT` seconds is a hang and fails.

Known open bugs are avoided by the generator (`control_gen.KNOWN_BUGS`).

Run more: ``DYNAMO_FUZZ_PROGRAMS=20000`` (examples for the eager backend; the C backend gets a
twentieth), ``DYNAMO_FUZZ_RANDOM=1`` (a new random seed instead of the derandomized one),
``DYNAMO_FUZZ_COLLECT=mismatches.txt`` (append every mismatch there and keep going, without
shrinking), ``DYNAMO_FUZZ_TRACE=current.txt`` (write each program there before running it: after
a crash, the file holds the culprit).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import io
import os
import pathlib
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import dynamo
from fuzz.control_gen import KNOWN_BUGS, ControlProgram, control_programs


def _load_dynamo_conftest():
    # tests/dynamo is not importable as "dynamo.conftest" (that name is npdynamo itself)
    path = pathlib.Path(__file__).parents[1] / "dynamo" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_control_flow_dynamo_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_oracle = _load_dynamo_conftest()
assert_same = _oracle.assert_same
views = _oracle._views
CountingBackend = _oracle.CountingBackend

EXAMPLES = int(os.environ.get("DYNAMO_FUZZ_PROGRAMS", "2000"))
RANDOM = os.environ.get("DYNAMO_FUZZ_RANDOM", "") not in ("", "0")
COLLECT = os.environ.get("DYNAMO_FUZZ_COLLECT")
TRACE = os.environ.get("DYNAMO_FUZZ_TRACE")
TIMEOUT = 60  # seconds for one program (eager + two compiled calls); far above the normal 0.1 s


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no `except Exception` in npdynamo swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: int):
    def alarm(signum, frame):
        raise Hang(f"the program ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    status: str  # "ok" or "raised"
    value: Any
    args: tuple
    stdout: str
    warnings: list[tuple[type, str]]


def _run(fn: Callable, args: tuple) -> Run:
    call_args = copy.deepcopy(args)
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        try:
            status, value = "ok", fn(*call_args)
        except Exception as exc:  # noqa: BLE001  (the oracle compares exceptions too)
            status, value = "raised", exc
    seen = [(w.category, str(w.message)) for w in caught]
    if "resume_of_helper_recompiles_per_value" in KNOWN_BUGS:
        seen = [w for w in seen if "(dynamo.config.cache_size_limit)" not in w[1]]
    return Run(status, value, call_args, out.getvalue(), seen)


def _load(program: ControlProgram, directory: pathlib.Path) -> Callable:
    digest = hashlib.sha1(program.source.encode()).hexdigest()[:16]
    path = directory / f"ctl_{digest}.py"
    path.write_text(program.source)
    namespace: dict[str, Any] = {"__name__": f"ctl_{digest}", "__file__": str(path)}
    # exec of the generated code, compiled with the real file name (linecache, file:line)
    exec(compile(program.source, str(path), "exec"), namespace)  # noqa: S102
    return namespace["f"]


def check_program(program: ControlProgram, directory: pathlib.Path, backend_name: str) -> None:
    """AssertionError (with the program) when compiled `f` differs from plain `f`."""
    if TRACE:
        pathlib.Path(TRACE).write_text(program.describe())
    fn = _load(program, directory)
    dynamo.reset()
    budget = (dynamo.config.patch(max_instructions=program.max_instructions)
              if program.max_instructions else contextlib.nullcontext())
    try:
        with _time_limit(TIMEOUT), budget:
            eager = _run(fn, program.args)
            backend = CountingBackend() if backend_name == "eager" else _c_backend()
            compiled = dynamo.compile(fn, backend=backend)
            for attempt in ("first call", "second call (cache hit)"):
                before = backend.count
                comp = _run(compiled, program.args)
                _compare(eager, comp, attempt)
                # A frame whose code raises for these values is traced again on each call
                # (by design: it is not marked, other values may compile), so only programs
                # that return must hit the cache.
                if attempt != "first call" and eager.status == "ok":
                    assert backend.count == before, (
                        f"{attempt}: the second call with equal inputs captured "
                        f"{backend.count - before} new graph(s)")
            if program.other_args is not None:
                # other values (guards must send them to the right version, or recompile)
                _compare(_run(fn, program.other_args), _run(compiled, program.other_args),
                         "third call (other arguments)")
    except (AssertionError, Hang) as exc:
        message = f"{type(exc).__name__}: {exc}\n{program.describe()}"
        if COLLECT:
            with open(COLLECT, "a") as log:
                log.write(message + "\n" + "=" * 100 + "\n")
            return
        raise AssertionError(message) from exc
    finally:
        dynamo.reset()


def _compare(eager: Run, comp: Run, attempt: str) -> None:
    if eager.status == "raised":
        assert comp.status == "raised", (
            f"{attempt}: eager raised {eager.value!r}, compiled returned {comp.value!r}")
        assert type(comp.value) is type(eager.value), (
            f"{attempt}: raised {comp.value!r}, eager raised {eager.value!r}")
        assert str(comp.value) == str(eager.value), (
            f"{attempt}: message {comp.value}, eager {eager.value}")
    else:
        if comp.status == "raised":
            raise AssertionError(f"{attempt}: compiled raised {comp.value!r}, eager returned "
                                 f"{eager.value!r}") from comp.value
        assert_same(eager.value, comp.value, f"{attempt}: result")
        assert views(comp.value, comp.args) == views(eager.value, eager.args), (
            f"{attempt}: view-vs-copy relation to the arguments differs from eager")
    assert_same(eager.args, comp.args, f"{attempt}: arguments after the call")
    assert comp.stdout == eager.stdout, (
        f"{attempt}: printed\n{comp.stdout}\neager printed\n{eager.stdout}")
    assert comp.warnings == eager.warnings, (
        f"{attempt}: warnings {comp.warnings}, eager {eager.warnings}")


class _CBackend:
    """The C backend with kernels even for these tiny arrays, counting its graphs."""

    def __init__(self) -> None:
        from dynamo.backends.c import make_backend

        self.inner = make_backend(min_size=0, calibrate=False)
        self.count = 0

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        self.count += 1
        return self.inner(gm, example_inputs)


def _c_backend() -> _CBackend:
    return _CBackend()


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=not RANDOM, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.fixture(scope="module")
def control_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("control_programs")


@given(program=control_programs())
@_settings(EXAMPLES)
def test_control_flow_programs_match_python_eager_backend(program, control_dir):
    check_program(program, control_dir, "eager")


@given(program=control_programs(exact_float_only=True))
@_settings(max(1, EXAMPLES // 20))
def test_control_flow_programs_match_python_c_backend(program, control_dir):
    check_program(program, control_dir, "c")
