"""The oracle for the program corpus: a program compiled by npdynamo must behave like plain NumPy.

In: a corpus `Program`, one of its `Case`s and a backend name ("eager" or "c"). Out:
`check_program` raises AssertionError on any difference, else returns an `Outcome` (graphs
captured by the first compiled call, compile time). Called by `test_corpus.py` and `report.py`.

Compared, as in tests/dynamo/conftest.py's `check` (same rules, extended for whole programs):
results (exact type, dtype, shape, strides, bits), view-vs-copy relations to the arguments, the
arguments after the call (lists, dicts, objects' attributes: side effects), raised exceptions
(type and message), printed output (stdout), and warnings: any warning is an error (npdynamo's
"internal error" fallback warns), except for programs that warn on purpose (`warns`), whose
warnings are recorded and compared (category and message, in order; on the C backend as a set,
as tests/fuzz does: a fused kernel reports each kind once). The compiled function is called
twice (compile, cache hit).
The C backend runs with ``min_size=0, calibrate=False`` so that even these small arrays go
through its kernels; floats that depend on transcendental functions may differ there by a few
ULP (docs/c_backend.md section 3), so those programs compare C results within `ULPS`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import time
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import dynamo

#: ULP tolerance for transcendental results on the C backend (as tests/fuzz: libm/libmvec are
#: within 4 ULP of NumPy's loops; a few exact operations may follow).
ULPS = 16


class CountingBackend:
    """Wraps a backend callable and counts the graphs it was given."""

    def __init__(self, inner: Callable) -> None:
        self.inner = inner
        self.count = 0

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        self.count += 1
        return self.inner(gm, example_inputs)


def make_backend(name: str) -> CountingBackend:
    if name == "eager":
        return CountingBackend(dynamo.lookup_backend("eager"))
    if name == "c":
        from dynamo.backends.c import make_backend as make_c

        return CountingBackend(make_c(min_size=0, calibrate=False))
    raise ValueError(f"unknown backend {name!r}")


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


def assert_same(expected: Any, actual: Any, where: str = "result", ulps: int = 0) -> None:
    """Same structure, types, dtypes, shapes, strides; bit-identical values (or within `ulps`)."""
    assert type(actual) is type(expected), (
        f"{where}: type {type(actual).__name__} != eager {type(expected).__name__} "
        f"(eager={expected!r}, compiled={actual!r})"
    )
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{i}]", ulps)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}[{key!r}]", ulps)
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
    elif hasattr(expected, "__dict__") and not isinstance(expected, _PLAIN):
        # A user object (argument whose attributes the program may write): compare its state.
        assert_same(vars(expected), vars(actual), f"{where}.__dict__", ulps)
    else:
        assert actual == expected, f"{where}: {actual!r} != eager {expected!r}"


def _views(result: Any, args: tuple) -> list[list[Any]]:
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
    return [[np.shares_memory(r, a) for a in arrays]
            + [(r is o, np.shares_memory(r, o)) for o in flat] for r in flat]


# Running --------------------------------------------------------------------------------------


@dataclass
class Run:
    status: str  # "ok" or "raised"
    value: Any
    args: tuple
    kwargs: dict
    stdout: str
    seconds: float
    warnings: list[tuple[type, str]]


def _run(fn: Callable, args: tuple, kwargs: dict, record_warnings: bool = False) -> Run:
    """Call `fn` on fresh copies of the arguments. Warnings are errors, or with `record_warnings`
    they are recorded (every one, in order) and the call goes on."""
    from programs.corpus import View

    call_args, call_kwargs = copy.deepcopy((args, kwargs))
    # Views are made anew from a fresh copy of their base (a deep copy would be contiguous).
    call_args = tuple(a.make(a.base) if isinstance(a, View) else a for a in call_args)
    out = io.StringIO()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always" if record_warnings else "error")
        try:
            status, value = "ok", fn(*call_args, **call_kwargs)
        except Exception as exc:  # the oracle compares exceptions too
            status, value = "raised", exc
    return Run(status, value, call_args, call_kwargs, out.getvalue(), time.perf_counter() - start,
               [(w.category, str(w.message)) for w in caught])


@dataclass
class Outcome:
    graphs_first_call: int
    graphs_second_call: int
    compile_seconds: float  # first compiled call minus the eager run time


def _compare(eager: Run, comp: Run, attempt: str, ulps: int, exact_warnings: bool = True) -> None:
    if eager.status == "raised":
        assert comp.status == "raised", (
            f"{attempt}: eager raised {eager.value!r}, compiled returned {comp.value!r}")
        assert type(comp.value) is type(eager.value), (
            f"{attempt}: raised {comp.value!r}, eager raised {eager.value!r}")
        assert str(comp.value) == str(eager.value), (
            f"{attempt}: message {comp.value}, eager {eager.value}")
    else:
        if comp.status == "raised":
            raise AssertionError(
                f"{attempt}: compiled raised, eager returned {eager.value!r}") from comp.value
        assert_same(eager.value, comp.value, f"{attempt}: result", ulps)
        assert _views(comp.value, comp.args) == _views(eager.value, eager.args), (
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


def check_program(fn: Callable, args: tuple, kwargs: dict, backend: str,
                  transcendental: bool = False, warns: bool = False) -> Outcome:
    """Eager `fn` vs `dynamo.compile(fn)` (first call, cache hit); AssertionError on a change."""
    ulps = ULPS if (backend == "c" and transcendental) else 0
    eager = _run(fn, args, kwargs, warns)
    counting = make_backend(backend)
    compiled = dynamo.compile(fn, backend=counting)
    counts = []
    seconds = []
    for attempt in ("first call", "second call (cache hit)"):
        before = counting.count
        comp = _run(compiled, args, kwargs, warns)
        counts.append(counting.count - before)
        seconds.append(comp.seconds)
        _compare(eager, comp, attempt, ulps, exact_warnings=backend != "c")
    return Outcome(counts[0], counts[1], max(0.0, seconds[0] - eager.seconds))


def check_program_cases(fn: Callable, cases: list[tuple[tuple, dict]], backend: str,
                        transcendental: bool = False, warns: bool = False) -> None:
    """One compiled `fn` called with every case in turn, twice round: guards must tell the cases
    apart (dtypes, shapes, values) and each call must still behave like plain NumPy."""
    ulps = ULPS if (backend == "c" and transcendental) else 0
    eager = [_run(fn, args, kwargs, warns) for args, kwargs in cases]
    compiled = dynamo.compile(fn, backend=make_backend(backend))
    for round_ in ("first round", "second round"):
        for i, (args, kwargs) in enumerate(cases):
            _compare(eager[i], _run(compiled, args, kwargs, warns), f"{round_}, case {i}", ulps,
                     exact_warnings=backend != "c")
