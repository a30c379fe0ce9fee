"""The "run plain, run compiled, compare" oracle shared by whole-program test suites.

In: a function and its arguments, run once in plain Python and through ``dynamo.compile``.
Out: `run` records each call as a `Run` (result or exception, the arguments after the call,
everything printed, every warning); `compare` raises AssertionError on any difference;
`CountingBackend` / `make_backend` count the graphs a compiled function captures (the one
counting backend of the suite: tests/dynamo/conftest.py's `backend` fixture is one too).
Called by tests/programs/oracle.py (the program corpus),
tests/fuzz/test_control_flow_property.py (generated control-flow programs) and
tests/fuzz/test_loops_differential.py (generated loop nests); the corpus keeps its own driver
(how often to call, which backend, what to do on a mismatch), the two fuzzers share
`check_generated` (plain, compiled twice, other arguments, each program's run bounded by
`time_limit`).

Compared (the rules of tests/dynamo/conftest.py's `check`, extended for whole programs):
results (exact type, dtype, shape, strides, bits; within `ulps` ULP where asked), which
results are views of which arguments (and of each other), the arguments after the call
(lists, dicts, objects' attributes: side effects), raised exceptions (type and message),
printed output (stdout), and warnings (category and message, in order, or as a set where a
fused C kernel reports each kind once).
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import pathlib
import signal
import time
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import dynamo


class CountingBackend:
    """``backend(gm, example_inputs) -> callable``: counts and keeps the graphs it was given.

    Each graph is compiled by `inner` (another backend callable), or with no `inner` run as
    NumPy (``gm.forward``, what the "eager" backend does). ``graphs`` and ``example_inputs``
    hold what every compile got, ``count`` how many there were, ``ops()`` a graph's calls.
    """

    def __init__(self, inner: Callable | None = None) -> None:
        self.inner = inner
        self.graphs: list[Any] = []
        self.example_inputs: list[list[Any]] = []

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward if self.inner is None else self.inner(gm, example_inputs)

    @property
    def count(self) -> int:
        return len(self.graphs)

    def ops(self, index: int = -1) -> list[Any]:
        """The call nodes of one recorded graph (the last one by default)."""
        return [n for n in self.graphs[index].graph.nodes
                if n.op in ("call_function", "call_method")]


def make_backend(name: str) -> CountingBackend:
    """"eager", or "c": the C backend with kernels even for tiny arrays, no calibration."""
    if name == "eager":
        return CountingBackend(dynamo.lookup_backend("eager"))
    if name == "c":
        from dynamo.backends.c import make_backend as make_c

        return CountingBackend(make_c(min_size=0, calibrate=False))
    raise ValueError(f"unknown backend {name!r}: use 'eager' or 'c'")


# Comparison -----------------------------------------------------------------------------------

#: Objects compared with `==` even though they have a __dict__ (functions, classes, modules).
_PLAIN = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, types.ModuleType,
          np.ufunc, np.dtype)


def _ulp_close(expected: np.ndarray, actual: np.ndarray, ulps: int) -> bool:
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.dtype.kind != "f":  # complex and integer results are compared bit for bit
        return False
    same_nan = np.isnan(e) == np.isnan(a)
    finite = np.isfinite(e) & np.isfinite(a)
    magnitude = np.where(finite, np.maximum(np.abs(e), np.abs(a)), 1).astype(e.dtype)
    spacing = np.abs(np.spacing(magnitude))
    close = np.where(finite, np.abs(e - a) <= ulps * spacing, (e == a) | np.isnan(e))
    return bool(np.all(same_nan) and np.all(close))


def assert_same(expected: Any, actual: Any, where: str = "result", ulps: int = 0, *,
                objects: str = "attributes") -> None:
    """Same structure, types, dtypes, shapes, strides; bit-identical values (or within `ulps`).

    ``objects``: how user objects (with a ``__dict__``, not functions/classes/modules) compare:
    ``"attributes"`` compares their ``vars()`` (two runs on deep copies of the arguments), or
    ``"identity"`` uses ``==`` (identity unless the class defines ``__eq__``: a result must be
    the very object, e.g. one the function got or a global).
    """
    if objects not in ("attributes", "identity"):
        raise ValueError(f"assert_same: objects={objects!r}; use 'attributes' or 'identity'")
    assert type(actual) is type(expected), (
        f"{where}: type {type(actual).__name__} != eager {type(expected).__name__} "
        f"(eager={expected!r}, compiled={actual!r})"
    )
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{i}]", ulps, objects=objects)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}[{key!r}]", ulps, objects=objects)
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        bits_equal = (np.ascontiguousarray(actual).tobytes()
                      == np.ascontiguousarray(expected).tobytes())
        if not bits_equal:
            assert ulps and _ulp_close(expected, actual, ulps), (
                f"{where}: values differ (eager={expected!r}, compiled={actual!r})"
            )
        if isinstance(expected, np.ndarray):
            assert actual.strides == expected.strides, (
                f"{where}: strides {actual.strides} != eager {expected.strides}"
            )
    elif isinstance(expected, float):
        if math.isnan(expected):
            assert math.isnan(actual), f"{where}: {actual!r} != nan"
        elif actual != expected:
            assert ulps and abs(actual - expected) <= ulps * math.ulp(abs(expected)), (
                f"{where}: {actual!r} != eager {expected!r}"
            )
    elif (objects == "attributes" and hasattr(expected, "__dict__")
          and not isinstance(expected, _PLAIN)):
        # A user object (argument whose attributes the program may write): compare its state.
        assert_same(vars(expected), vars(actual), f"{where}.__dict__", ulps, objects=objects)
    else:
        assert actual == expected, f"{where}: {actual!r} != eager {expected!r}"


def views(result: Any, args: tuple) -> list[list[Any]]:
    """For each array in `result` (flattened): which array arguments and outputs it aliases."""
    flat: list[np.ndarray] = []

    def walk(value: Any) -> None:
        if isinstance(value, np.ndarray):
            flat.append(value)
        elif isinstance(value, (tuple, list)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(result)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    # Also among the outputs themselves: `return y, y` (same object), `return y, y[0]` (a view).
    return [[np.shares_memory(r, a) for a in arrays]
            + [(r is o, np.shares_memory(r, o)) for o in flat] for r in flat]


# Running --------------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by `time_limit`'s alarm: a BaseException, so no `except Exception` in npdynamo
    swallows it."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise `Hang` in the main thread when the block runs longer than `seconds` (generated
    programs: a hang is a failure, not a stuck test run)."""
    def alarm(signum, frame):
        raise Hang(f"the program ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    # Then again every second: a Hang raised where Python only reports exceptions (a
    # destructor, a weakref callback) is lost, and a one-shot timer would leave the run stuck.
    signal.setitimer(signal.ITIMER_REAL, seconds, 1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    status: str  # "ok" or "raised"
    value: Any  # the result, or the exception
    args: tuple  # the arguments the call got, after the call
    kwargs: dict
    stdout: str
    seconds: float
    warnings: list[tuple[type, str]]


def run(fn: Callable, args: tuple, kwargs: dict | None = None, record_warnings: bool = True,
        fresh: Callable[[tuple], tuple] | None = None) -> Run:
    """Call `fn` on deep copies of the arguments (then `fresh(args)`, e.g. to rebuild views,
    which a deep copy makes contiguous). Warnings are recorded (every one, in order), or with
    ``record_warnings=False`` are errors: the call raises them and that is its outcome."""
    call_args, call_kwargs = copy.deepcopy((args, kwargs or {}))
    if fresh is not None:
        call_args = fresh(call_args)
    out = io.StringIO()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always" if record_warnings else "error")
        try:
            status, value = "ok", fn(*call_args, **call_kwargs)
        except Exception as exc:  # noqa: BLE001  (the oracle compares exceptions too)
            status, value = "raised", exc
    return Run(status, value, call_args, call_kwargs, out.getvalue(), time.perf_counter() - start,
               [(w.category, str(w.message)) for w in caught])


def compare(eager: Run, comp: Run, attempt: str, ulps: int = 0,
            exact_warnings: bool = True) -> None:
    """AssertionError (starting with `attempt`) when the compiled run `comp` differs from the
    plain run `eager`. ``exact_warnings=False``: the same set of warnings is enough."""
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
        assert_same(eager.value, comp.value, f"{attempt}: result", ulps)
        assert views(comp.value, comp.args) == views(eager.value, eager.args), (
            f"{attempt}: view-vs-copy relation to the arguments differs from eager")
    assert_same((eager.args, eager.kwargs), (comp.args, comp.kwargs),
                f"{attempt}: arguments after the call", ulps)
    assert comp.stdout == eager.stdout, (
        f"{attempt}: printed {comp.stdout!r}, eager printed {eager.stdout!r}")
    if exact_warnings:
        assert comp.warnings == eager.warnings, (
            f"{attempt}: warned {comp.warnings}, eager warned {eager.warnings}")
    else:  # the C backend: the same warnings, each kind reported at least once (as tests/fuzz)
        assert set(comp.warnings) == set(eager.warnings), (
            f"{attempt}: warned {comp.warnings}, eager warned {eager.warnings}")


def check_compiled(fn: Callable, *args: Any) -> None:
    """Plain `fn` vs ``dynamo.compile(fn)`` with the eager backend, called twice: the same
    result, arguments after the call, output, exception and warnings (`compare`)."""
    eager = run(fn, args)
    compiled = dynamo.compile(fn, backend=make_backend("eager"))
    for attempt in ("first call", "second call (cache hit)"):
        compare(eager, run(compiled, args), attempt)


def check_generated(program: Any, fn: Callable, backend_name: str, *, timeout: int,
                    same: Callable[[Run, Run, str], None] = compare,
                    compiler: Callable = dynamo.compile, collect: str | None = None,
                    trace: str | None = None) -> int:
    """The driver of the generated-program fuzzers (tests/fuzz/test_control_flow_property.py,
    tests/fuzz/test_loops_differential.py): `fn`, made from `program` (which has ``args``,
    ``other_args`` or None, ``max_instructions`` or None, and ``describe()``), runs plainly (the
    oracle), then through ``compiler(fn, backend=make_backend(backend_name))`` twice on equal
    arguments (the first call compiles; the second must capture no new graph when the plain run
    returned: a frame whose code raises is traced again on each call, by design, as it is not
    marked and other values may compile), then both once more on ``other_args`` (guards,
    recompiles), all under ``dynamo.config.max_instructions = program.max_instructions``.
    `same(plain, compiled, attempt)` compares two runs. Returns how many graphs were captured.

    A difference, or a run longer than `timeout` seconds (`Hang`), raises AssertionError with
    ``program.describe()``; with `collect` (a file name) that report is appended there instead
    and 0 returned. `trace`: a file each program is written to before it runs (after a crash,
    it holds the culprit)."""
    if trace:
        pathlib.Path(trace).write_text(program.describe())
    dynamo.reset()
    budget = (dynamo.config.patch(max_instructions=program.max_instructions)
              if program.max_instructions else contextlib.nullcontext())
    try:
        with time_limit(timeout), budget:
            plain = run(fn, program.args)
            backend = make_backend(backend_name)
            compiled = compiler(fn, backend=backend)
            for attempt in ("first call", "second call (cache hit)"):
                before = backend.count
                same(plain, run(compiled, program.args), attempt)
                if attempt != "first call" and plain.status == "ok":
                    assert backend.count == before, (
                        f"{attempt}: the second call with equal inputs captured "
                        f"{backend.count - before} new graph(s)")
            if program.other_args is not None:
                # other values (guards must send them to the right version, or recompile)
                same(run(fn, program.other_args), run(compiled, program.other_args),
                     "third call (other arguments)")
        return backend.count
    except (AssertionError, Hang) as exc:
        message = f"{type(exc).__name__}: {exc}\n{program.describe()}"
        if collect:
            with open(collect, "a") as log:
                log.write(message + "\n" + "=" * 100 + "\n")
            return 0
        raise AssertionError(message) from exc
    finally:
        dynamo.reset()
