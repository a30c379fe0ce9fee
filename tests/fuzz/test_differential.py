"""Differential fuzzing: random NumPy programs, compiled by npdynamo vs run by plain NumPy.

In: `program_gen.programs` (Hypothesis) makes straight-line programs over many dtypes, layouts,
aliasing patterns, special values, in-place operations, ufuncs (writing into an array given
positionally, as ``out=`` or ``out=(o,)``, with ``where=``, ``casting=``, ``dtype=``: see
`program_gen.OUT_FORMS`), reductions, indexing, matmul, ``np.where``, casts and Python scalars.
Each program is written to a real ``.py`` file, imported as a fresh module, and run on fresh,
identical arguments: once by plain NumPy (the oracle), then twice through ``dynamo.compile(f,
backend=...)`` (first call: compile; second: cache hit), for the "eager" backend and for the C
backend with ``min_size=0`` (so small arrays get kernels), with and without calibration, one or two
threads and a small work block.

Compared, exactly: returned values (type, NumPy scalar vs 0-d array, dtype, shape, strides,
bits with NaN == NaN), which results are views of which arguments, the arguments' final contents,
raised exceptions (type and message), and warnings (category, message and the file:line they name,
every one, in order).
Documented differences of the C backend (docs/c_backend.md section 3), and only there (its
values are NumPy's bits, transcendental functions included): FP warnings are compared as the
set of (category, kind) where kind
is "divide by zero" / "overflow" / "invalid value" / "underflow" (a fused kernel reports each kind
once, through a replay operation); strides of size-1 axes are not compared.

Known open bugs are listed once, in `KNOWN_BUGS`: a mismatch one of them explains is counted,
not failed. Each entry has a small repro that `test_known_bug_still_open` runs: when it skips
with "fixed?", remove the entry; the fuzzer then covers that case again.
`test_c_kernels_really_run` checks that most C examples really run kernels (and are captured).

Cost (2-core machine, cold kernel cache, 2000 examples per backend): ~135 s of CPU (gcc
included); the disk cache (``$DYNAMO_CACHE_DIR``, else ~/.cache/npdynamo) makes reruns cheaper.

Run more: ``DYNAMO_FUZZ_EXAMPLES=20000`` (per backend), ``DYNAMO_FUZZ_RANDOM=1`` (new seed),
``DYNAMO_FUZZ_COLLECT=mismatches.jsonl`` (record every mismatch and keep going, no shrinking),
``DYNAMO_FUZZ_TRACE=current.txt`` (write each program there before running it: after a crash,
the file holds the culprit).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dynamo
from dynamo.backends.c import compile_graph
from fuzz.program_gen import ArgSpec, Program, make_args, other_values, programs

EXAMPLES = int(os.environ.get("DYNAMO_FUZZ_EXAMPLES", "2000") or 2000)
RANDOM = os.environ.get("DYNAMO_FUZZ_RANDOM", "") not in ("", "0")
COLLECT = os.environ.get("DYNAMO_FUZZ_COLLECT") or None
#: Debugging crashes: each program is written to this file before it runs.
TRACE = os.environ.get("DYNAMO_FUZZ_TRACE") or None

#: Reproducible in CI: derandomized (the same programs on every run), no example database,
#: no deadline (a first call may build C kernels with gcc).
fuzz_settings = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.large_base_example],
)

# Known open bugs -----------------------------------------------------------------------------


@dataclass
class KnownBug:
    """A mismatch npdynamo is known to have: ``matches(program, backend, mismatch_text)``."""

    description: str
    matches: Callable[[Program, str, str], bool]
    #: A small program showing the bug (C backend, first variant).
    repro: Program | None = None
    seen: int = 0


def _prog(body: str, *args: ArgSpec, errstate_raise: bool = False) -> Program:
    names = ", ".join(f"a{i}" for i in range(len(args)))
    lines = "".join(f"    {line.strip()}\n" for line in body.split(";"))
    return Program(f"import numpy as np\n\n\ndef f({names}):\n{lines}", args,
                   errstate_raise=errstate_raise)


def _arr(dtype: str, shape: tuple, values: tuple = (), layout: str = "C",
         seed: int | None = None) -> ArgSpec:
    return ArgSpec("array", dtype=dtype, shape=shape, values=values, layout=layout, seed=seed)


#: The ONE place listing open bugs the fuzzer finds. Remove an entry when its fix lands.
#: (Issue 8 fixed the nine C-backend entries this had; their regression tests are in
#: tests/backends/test_c_fuzz_regressions.py.)
KNOWN_BUGS: dict[str, KnownBug] = {
}


# Running one program ---------------------------------------------------------------------------

_module_ids = itertools.count()


def load_function(source: str, directory: str) -> Callable:
    """``f`` from ``source`` written to a new module file in ``directory`` (not in sys.modules)."""
    name = f"fuzz_prog_{os.getpid()}_{next(_module_ids)}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


@dataclass
class Outcome:
    status: str                    # "ok" or "raised"
    value: Any                     # the result, or the exception
    observed: list[Any]            # the arguments' bases after the call
    views: list[list[bool]]        # which results share memory with which arguments
    #: (category, message, file, line) of every warning, in order
    warnings: list[tuple[type, str, str, int]] = field(default_factory=list)


def _flat_arrays(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _flat_arrays(v)]
    return []


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=10**5))
    except np.exceptions.TooHardError:
        return bool(np.may_share_memory(a, b))


def run_once(fn: Callable, prog: Program, other: bool = False) -> Outcome:
    args, observed = make_args(other_values(prog.args) if other else prog.args)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all="raise") if prog.errstate_raise else np.errstate():
            try:
                status, value = "ok", fn(*args)
            except Exception as exc:
                status, value = "raised", exc
    views = [[_shares(r, a) for a in arrays] for r in _flat_arrays(value)] \
        if status == "ok" else []
    return Outcome(status, value, observed, views,
                   [(w.category, str(w.message), w.filename, w.lineno) for w in caught])


# Comparing ---------------------------------------------------------------------------------------

class Mismatch(AssertionError):
    pass


def _float_parts(a: np.ndarray) -> np.ndarray:
    return a.view(a.real.dtype) if a.dtype.kind == "c" else a


def _values_equal(exp: np.ndarray, act: np.ndarray, ulps: int) -> str | None:
    e, a = np.ascontiguousarray(exp), np.ascontiguousarray(act)
    if e.dtype.kind not in "fc":
        return None if e.tobytes() == a.tobytes() else "values differ"
    e, a = _float_parts(e), _float_parts(a)
    en, an = np.isnan(e), np.isnan(a)
    if not np.array_equal(en, an):
        return "NaN positions differ"
    ok = ~en
    eb = e[ok].view(f"u{e.itemsize}")
    ab = a[ok].view(f"u{a.itemsize}")
    if np.array_equal(eb, ab):
        return None
    if ulps:
        ev, av = e[ok].astype(np.float64), a[ok].astype(np.float64)
        with np.errstate(all="ignore"):
            same_inf = (np.isinf(ev) | np.isinf(av)) <= (ev == av)
            spacing = np.spacing(np.maximum(np.abs(e[ok]), np.abs(a[ok]))).astype(np.float64)
            close = np.abs(ev - av) <= ulps * spacing
        if same_inf.all() and (close | (ev == av)).all():
            return None
        return f"values differ by more than {ulps} ULP"
    return "values differ in their bits"


def _layout(a: np.ndarray, strict: bool) -> Any:
    if strict:
        return a.strides
    if a.size == 0:
        return None
    return tuple(s for n, s in zip(a.shape, a.strides) if n != 1)


def compare_values(exp: Any, act: Any, where: str, ulps: int, strict_layout: bool) -> None:
    with np.printoptions(threshold=60, edgeitems=4):
        _compare_values(exp, act, where, ulps, strict_layout)


def _compare_values(exp: Any, act: Any, where: str, ulps: int, strict_layout: bool) -> None:
    if type(act) is not type(exp):
        raise Mismatch(f"{where}: type {type(act).__name__} != NumPy's {type(exp).__name__}"
                       f"\n  NumPy:    {exp!r}\n  compiled: {act!r}")
    if isinstance(exp, (tuple, list)):
        if len(act) != len(exp):
            raise Mismatch(f"{where}: length {len(act)} != {len(exp)}")
        for i, (e, a) in enumerate(zip(exp, act)):
            _compare_values(e, a, f"{where}[{i}]", ulps, strict_layout)
        return
    if isinstance(exp, (np.ndarray, np.generic)):
        if act.dtype != exp.dtype or act.shape != exp.shape:
            raise Mismatch(f"{where}: {act.dtype}{list(act.shape)} != NumPy's "
                           f"{exp.dtype}{list(exp.shape)}")
        why = _values_equal(np.asarray(exp), np.asarray(act), ulps)
        if why:
            raise Mismatch(f"{where}: {why}\n  NumPy:    {exp!r}\n  compiled: {act!r}")
        if isinstance(exp, np.ndarray) and \
                _layout(exp, strict_layout) != _layout(act, strict_layout):
            raise Mismatch(f"{where}: strides {act.strides} != NumPy's {exp.strides} "
                           f"(shape {exp.shape})")
        return
    if isinstance(exp, (float, complex)):  # NaN == NaN, and -0.0 != 0.0
        if _values_equal(np.asarray(exp), np.asarray(act), ulps) is None:
            return
    elif exp == act:
        return
    raise Mismatch(f"{where}: {act!r} != NumPy's {exp!r}")


_FP_KIND = re.compile(r"^(divide by zero|overflow|invalid value|underflow) encountered in ")


def _warning_keys(ws: list[tuple[type, str, str, int]], fused: bool) -> Any:
    """Eager: every warning as raised, with the file:line it names (the user's statement, also
    inside a graph: `fx.locations`). Fused C kernels: the set of (category, kind, file:line)."""
    if not fused:
        return [(c.__name__, m, f"{os.path.basename(f)}:{n}") for c, m, f, n in ws]
    keys = set()
    for c, m, f, n in ws:
        kind = _FP_KIND.match(m)
        keys.add((c.__name__, kind.group(1) if kind else m, f"{os.path.basename(f)}:{n}"))
    return sorted(keys)


def compare(exp: Outcome, act: Outcome, prog: Program, backend: str) -> None:
    c = backend != "eager"
    ulps = 0  # (bit for bit: the C backend's math is NumPy's own loops)
    if exp.status != act.status:
        with np.printoptions(threshold=60, edgeitems=4):
            what = f"raised {exp.value!r}" if exp.status == "raised" else f"returned {exp.value!r}"
            got = f"raised {act.value!r}" if act.status == "raised" else f"returned {act.value!r}"
        with np.printoptions(threshold=60, edgeitems=4):
            raise Mismatch(f"NumPy {what}; compiled {got}")
    if exp.status == "raised":
        if type(act.value) is not type(exp.value) or str(act.value) != str(exp.value):
            raise Mismatch(f"exception: compiled raised {type(act.value).__name__}: "
                           f"{act.value}; NumPy raised {type(exp.value).__name__}: {exp.value}")
    else:
        compare_values(exp.value, act.value, "result", ulps, strict_layout=not c)
        if exp.views != act.views:
            raise Mismatch(f"view-vs-copy relation to the arguments: compiled {act.views}, "
                           f"NumPy {exp.views}")
    compare_values(exp.observed, act.observed, "arguments after the call", ulps, True)
    ew, aw = _warning_keys(exp.warnings, c), _warning_keys(act.warnings, c)
    if ew != aw:
        raw = "" if not c else (f"\n  (as raised: compiled {_warning_keys(act.warnings, False)}; "
                                f"NumPy {_warning_keys(exp.warnings, False)})")
        raise Mismatch(f"warnings: compiled {aw}; NumPy {ew}{raw}")


# Backends --------------------------------------------------------------------------------------

class RecordingC:
    """The C backend with fixed options; remembers what it compiled (to count kernels run)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.compiled: list[Any] = []
        self.__name__ = "fuzz_c_" + "_".join(f"{k}{v}" for k, v in options.items())

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        fn = compile_graph(gm, example_inputs, **self.options)
        self.compiled.append(fn)
        note = getattr(gm.meta.get("fusion_report"), "build_note", "")
        if note.startswith("compiled"):
            STATS.setdefault("builds", {"gcc runs": 0})["gcc runs"] += 1
        return fn

    def kernel_calls(self) -> int:
        return sum(r.calls for fn in self.compiled
                   for r in getattr(fn, "runners", {}).values())


class RecordingEager:
    def __init__(self) -> None:
        self.inner = dynamo.lookup_backend("eager")
        self.compiled: list[Any] = []

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        fn = self.inner(gm, example_inputs)
        self.compiled.append(fn)
        return fn

    def kernel_calls(self) -> int:
        return 0


# min_size=0: every kernel is compiled, even for the fuzzer's small arrays. Variants cover
# calibration on the first call, OpenMP with two threads, and several work blocks per row.
C_VARIANTS = {
    "c": RecordingC(min_size=0, calibrate=False),
    "c-calibrate": RecordingC(min_size=0, calibrate=True),
    "c-threads": RecordingC(min_size=0, calibrate=False, threads=2, parallel_threshold=1,
                            block=3),
}
EAGER = RecordingEager()

#: Per backend: examples run, examples that captured a graph, that ran a kernel, known-bug hits.
STATS: dict[str, dict[str, int]] = {}


def check_program(prog: Program, backend: str, directory: str, variant: int = 0,
                  known: bool = True) -> None:
    """Run ``prog`` with NumPy and compiled; raise `Mismatch` (with the program) on a difference
    that no `KNOWN_BUGS` entry explains (``known=False``: on any difference)."""
    if backend == "eager":
        be = EAGER
    else:
        be = list(C_VARIANTS.values())[variant % len(C_VARIANTS)]
    fn = load_function(prog.source, directory)
    if TRACE:
        with open(TRACE, "w") as fh:
            fh.write(f"# backend {backend} variant {getattr(be, '__name__', backend)}\n"
                     f"{prog.describe()}\n")
    expected = run_once(fn, prog)
    compiled = dynamo.compile(fn, backend=be)
    be.compiled.clear()
    stats = STATS.setdefault(backend, {"examples": 0, "captured": 0, "kernels": 0,
                                       "known": 0, "errors": 0})
    stats["examples"] += 1
    stats["errors"] += expected.status == "raised"
    try:
        for attempt in ("first call", "second call", "call with other data"):
            other = attempt == "call with other data"
            if other:
                expected = run_once(fn, prog, other=True)
            graphs = len(be.compiled)
            actual = run_once(compiled, prog, other=other)
            try:
                compare(expected, actual, prog, backend)
                if attempt == "second call" and len(be.compiled) != graphs:
                    raise Mismatch("the second call with the same arguments compiled again")
            except Mismatch as exc:
                text = f"{attempt}: {exc}"
                for bug in KNOWN_BUGS.values() if known else ():
                    if bug.matches(prog, backend, text):
                        bug.seen += 1
                        stats["known"] += 1
                        return
                variant_name = getattr(be, "__name__", backend)
                described = prog.describe()
                if other:
                    described += "\n# this call's arguments (other data):\n" + "\n".join(
                        f"#   {n}: {a.describe()}"
                        for n, a in zip(prog.arg_names, other_values(prog.args)))
                report = (f"backend {backend} ({variant_name}), {text}\n--- program ---\n"
                          f"{described}")
                if COLLECT and known:
                    with open(COLLECT, "a") as fh:
                        fh.write(json.dumps({"backend": backend, "variant": variant_name,
                                             "attempt": attempt, "mismatch": str(exc),
                                             "program": described}) + "\n")
                    return
                raise Mismatch(report) from None
    finally:
        stats["captured"] += bool(be.compiled)
        stats["kernels"] += be.kernel_calls() > 0
        dynamo.reset()


# The tests -------------------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_differential(backend: str, program_dir) -> None:
    if backend == "c" and shutil.which(os.environ.get("CC") or "gcc") is None:
        pytest.skip("the C backend needs a C compiler")

    @fuzz_settings
    @given(prog=programs(c_mode=backend != "eager"), variant=st.integers(0, 5))
    def fuzz(prog: Program, variant: int) -> None:
        check_program(prog, backend, str(program_dir), variant)

    fuzz()


def test_c_kernels_really_run(program_dir) -> None:
    """A substantial share of the C fuzz programs must lower and run at least one kernel,
    or the C differential test would only be testing NumPy against itself."""
    stats = STATS.get("c")
    if not stats or stats["examples"] < 200:
        if shutil.which(os.environ.get("CC") or "gcc") is None:
            pytest.skip("the C backend needs a C compiler")

        @settings(fuzz_settings, max_examples=200)
        @given(prog=programs(c_mode=True), variant=st.integers(0, 5))
        def fuzz(prog: Program, variant: int) -> None:
            check_program(prog, "c", str(program_dir), variant)

        fuzz()
        stats = STATS["c"]
    print(f"fuzz statistics: {STATS}; known bugs seen: "
          f"{ {name: bug.seen for name, bug in KNOWN_BUGS.items()} }")
    share = stats["kernels"] / stats["examples"]
    assert share >= 0.30, f"only {share:.0%} of the C fuzz programs ran a kernel: {stats}"
    assert stats["captured"] / stats["examples"] >= 0.6, f"few programs were captured: {stats}"


@pytest.mark.parametrize("name", sorted(KNOWN_BUGS))
def test_known_bug_still_open(name: str, program_dir) -> None:
    """Each `KNOWN_BUGS` entry's repro still fails, and the entry recognises it. When it no
    longer fails this test SKIPS with "fixed?": remove the entry (the fuzzer then covers it)."""
    if shutil.which(os.environ.get("CC") or "gcc") is None:
        pytest.skip("the C backend needs a C compiler")
    bug = KNOWN_BUGS[name]
    assert bug.repro is not None, f"{name}: give the entry a repro program"
    try:
        check_program(bug.repro, "c", str(program_dir), known=False)
    except Mismatch as exc:
        text = str(exc).split("\n--- program ---")[0].split("), ", 1)[1]
        assert bug.matches(bug.repro, "c", text), f"{name} does not recognise its repro: {text}"
        return
    pytest.skip(f"{name} fixed? its repro now matches NumPy: remove it from KNOWN_BUGS")
