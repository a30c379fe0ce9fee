"""Differential fuzzing of loop nests: random scalar/element loops, compiled vs plain Python.

In: `loop_gen.make_program(seed)` for `PROGRAMS` consecutive seeds: one function
``f(A, B, n, m, s, k)`` of ``for``/``while`` loops over Python ints, floats, NumPy scalars and
array elements, with ``break``/``continue``/``return``, big Python ints, divisions by zero, NumPy
overflow, out-of-range indices and math domain errors (see loop_gen's docstring). Each program is
written to a real ``.py`` file and imported (test_differential's `load_function`), then run on
deep copies of the same arguments: once in plain Python (the oracle), then twice through
``dynamo.compile(f, backend=...)`` (first call: compile; second: cache hit, which must capture no
new graph when the program returns), then plain and compiled once more on other values of the
same types and shapes (guards; a Python int that changed becomes a graph input and must stay
exact), for the "eager" and "c" backends, under the program's ``dynamo.config.max_instructions``
(the default unrolls most loops into graphs; small budgets run them in Python with their body
compiled as a loop body function).

What it is for: "loop kernels" (a whole loop nest compiled to one C function) must be exact by
deoptimisation: on a Python int past int64, a zero divisor, an index out of range or a NumPy
warning condition the kernel stops and Python runs on from there, so the exception or warning is
Python's own, after the same partial writes. Today these loops run as graphs or in Python; this
file checks that already, and each kernel path as it lands.

Compared, exactly (tests/support/oracle.py's `compare`, plus test_differential's
`compare_values` for the bits of Python floats, so that -0.0 != 0.0): the returned tuple (type of
each item, NumPy scalar dtype, bits, any NaN equal to any NaN), the arrays' final contents (the
partial writes before an exception included), the exception raised (type and message), and every
warning (category and message, in order; on the C backend each as often in any order: its
schedule may run independent statements in another order, docs/c_backend.md section 1). A
mismatch fails with the seed, both sets of arguments and the program source.
`test_a_wrong_result_is_reported` feeds the comparison wrong results: the test does fail when
compiled code differs. `test_programs_are_compiled` checks that most programs really capture
graphs, `test_programs_are_deterministic_and_varied` that the generator covers what it should.

Known open bugs are listed once, in `KNOWN_BUGS`: a mismatch one of them explains (its matcher
may run the program again, e.g. with the C backend's CSE pass off) is an xfail. Each entry has a
small repro that `test_known_bug_still_open` runs: when it skips with "fixed?", remove the entry.

Cost (2-core machine): ~30 s for 150 programs on both backends with a cold kernel cache (gcc),
~10 s warm (``$DYNAMO_CACHE_DIR``, else ~/.cache/npdynamo).

Run more: ``DYNAMO_FUZZ_LOOPS=5000`` (programs per backend), ``DYNAMO_FUZZ_LOOPS_SEED=N`` (the
first seed; 0 by default, so CI runs the same programs every time), ``DYNAMO_FUZZ_RANDOM=1`` (a
random first seed, printed in each failure), ``DYNAMO_FUZZ_COLLECT=mismatches.txt`` (append every
mismatch there, known bugs included, and keep going), ``DYNAMO_FUZZ_TRACE=current.txt`` (each
program is written there before it runs: after a crash, the file holds the culprit). One program
again:
``DYNAMO_FUZZ_LOOPS_SEED=<seed> DYNAMO_FUZZ_LOOPS=1 pytest tests/fuzz/test_loops_differential.py``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import pathlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import dynamo
from fuzz.loop_gen import LoopProgram, make_program
from fuzz.test_differential import compare_values, load_function
from support.oracle import Run, check_generated, compare, run

PROGRAMS = int(os.environ.get("DYNAMO_FUZZ_LOOPS", "150") or 150)
RANDOM = os.environ.get("DYNAMO_FUZZ_RANDOM", "") not in ("", "0")
FIRST_SEED = (random.SystemRandom().randrange(10**9) if RANDOM
              else int(os.environ.get("DYNAMO_FUZZ_LOOPS_SEED", "0") or 0))
SEEDS = range(FIRST_SEED, FIRST_SEED + PROGRAMS)
COLLECT = os.environ.get("DYNAMO_FUZZ_COLLECT")
TRACE = os.environ.get("DYNAMO_FUZZ_TRACE")
TIMEOUT = 60  # seconds for one program (all its plain and compiled runs); normally ~0.1 s


def _one_nan(value: Any) -> Any:
    """`value` with every NaN of a NumPy float (scalar or array element) made the same NaN."""
    if isinstance(value, (tuple, list)):
        return type(value)(_one_nan(v) for v in value)
    if isinstance(value, (np.ndarray, np.floating)) and value.dtype.kind == "f" \
            and np.isnan(value).any():
        if isinstance(value, np.floating):
            return value.dtype.type(np.nan)
        value = value.copy()
        value[np.isnan(value)] = np.nan
    return value


def compare_runs(plain: Run, comp: Run, attempt: str, in_order: bool = True) -> None:
    """AssertionError (starting with `attempt`) when the compiled run differs from the plain one:
    results and arguments bit for bit, but any NaN equals any NaN (the C backend's NaN payload
    may differ when both operands of + or * are NaNs, docs/c_backend.md section 3), Python
    floats by their bits too (-0.0 != 0.0). ``in_order=False``: the same warnings, each as often,
    in any order (the C backend: its schedule may run a NumPy call before a statement fused into
    a later kernel, docs/c_backend.md section 1, so warnings of independent statements swap)."""
    plain_one, comp_one = (dataclasses.replace(r, value=_one_nan(r.value), args=_one_nan(r.args))
                           for r in (plain, comp))
    compare(plain_one, comp_one, attempt, exact_warnings=in_order)
    if not in_order:
        assert collections.Counter(comp.warnings) == collections.Counter(plain.warnings), (
            f"{attempt}: warned {comp.warnings}, plain Python warned {plain.warnings}")
    if plain.status == "ok":  # the oracle compares Python floats by value: also their bits
        compare_values(plain.value, comp.value, f"{attempt}: result", 0, strict_layout=True)


def check_program(program: LoopProgram, directory: pathlib.Path, backend_name: str,
                  compiler: Callable = dynamo.compile, collect: str | None = COLLECT,
                  in_order: bool | None = None) -> int:
    """AssertionError (with the seed and the program) when compiled `f` differs from plain `f`
    (with `collect`: appended to that file instead); else how many graphs the calls captured.
    ``compiler(fn, backend=...)`` makes the compiled function (a test gives a wrong one).
    `in_order`: warnings compared in order (by default on the eager backend only)."""
    same = functools.partial(compare_runs, in_order=backend_name == "eager"
                             if in_order is None else in_order)
    return check_generated(program, load_function(program.source, str(directory)), backend_name,
                           timeout=TIMEOUT, same=same, compiler=compiler, collect=collect,
                           trace=TRACE)


# Known open bugs ---------------------------------------------------------------------------------


@dataclass
class KnownBug:
    """A mismatch npdynamo is known to have on `backends`: ``matches(program, directory,
    backend, mismatch_text)``; `repro` is a small program that shows it."""

    description: str
    backends: tuple[str, ...]
    matches: Callable[[LoopProgram, pathlib.Path, str, str], bool]
    repro: LoopProgram


def _repro(lines: list[str], a: list, k: int = 0, s: float = 0.0) -> LoopProgram:
    body = "".join(f"    {line}\n" for line in lines)
    return LoopProgram(-1, f"import math\n\n\ndef f(A, B, n, m, s, k):\n{body}",
                       (np.array(a), np.zeros(1), 2, 1, s, k), None)


def _passes(program: LoopProgram, directory: pathlib.Path, backend: str, **options: Any) -> bool:
    try:
        check_program(program, directory, backend, collect=None, **options)
    except AssertionError:
        return False
    return True


def _warnings_only_reordered(program: LoopProgram, directory: pathlib.Path, backend: str,
                             text: str) -> bool:
    return "warned" in text and _passes(program, directory, backend, in_order=False)


#: The ONE place listing open bugs this fuzzer finds: a mismatch one of them explains is an
#: xfail, not a failure. When `test_known_bug_still_open` skips with "fixed?", remove the entry.
KNOWN_BUGS: dict[str, KnownBug] = {
    "graph_code_reorders_warnings": KnownBug(
        "the graph's Python code (fx/python_code.py) inlines single-use values into one "
        "expression: an unrolled loop's `s += B[0]; v *= B[0]` becomes `s = 1.0 + B[0] + B[0]` "
        "then `v = 3 * B[0] * B[0]`, so overflow warnings come in another order",
        ("eager",), _warnings_only_reordered,
        _repro(["v = k", "for j in range(2):", "    s += A[0]", "    v *= A[0]", "return s, v"],
               [1.5e308], k=3, s=1.0)),
    "second_call_recompiles_a_resume": KnownBug(
        "a graph break inside a loop's body (float() of an element, a data-dependent if): "
        "the first call compiles the resume function after it for a later iteration, so the "
        "second call with equal arguments compiles it again for the first one (a guard on the "
        "loop counter or a local's type fails)",
        ("eager", "c"),
        lambda program, directory, backend, text: "second call with equal inputs captured" in text,
        _repro(["v = s", "for i in range(2):", "    v = float(v) + A[i]", "return v,"],
               [0.5, -1.25], s=1.25)),
}


@pytest.fixture(scope="module")
def loop_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("loop_programs")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("backend", ["eager", "c"])
def test_loop_program_matches_python(backend: str, seed: int, loop_dir: pathlib.Path) -> None:
    program = make_program(seed)
    try:
        check_program(program, loop_dir, backend)
    except AssertionError as exc:
        for name, bug in KNOWN_BUGS.items():
            if backend in bug.backends and bug.matches(program, loop_dir, backend, str(exc)):
                pytest.xfail(f"known bug {name}: {bug.description}")
        raise


@pytest.mark.parametrize("name", sorted(KNOWN_BUGS))
def test_known_bug_still_open(name: str, loop_dir: pathlib.Path) -> None:
    """Each `KNOWN_BUGS` entry's repro still fails, and the entry recognises it. When it no
    longer fails this test SKIPS with "fixed?": remove the entry (the fuzzer then covers it)."""
    bug = KNOWN_BUGS[name]
    for backend in bug.backends:
        try:
            check_program(bug.repro, loop_dir, backend, collect=None)
        except AssertionError as exc:
            assert bug.matches(bug.repro, loop_dir, backend, str(exc)), (
                f"{name} does not recognise its repro: {exc}")
            continue
        pytest.skip(f"{name} fixed? its repro now matches Python on {backend}: remove it")


def test_programs_are_deterministic_and_varied(loop_dir: pathlib.Path) -> None:
    """The same seed gives the same program; 300 programs (plain Python only) use every
    construct, most return, and the rest raise each of the errors a compiled loop must stop
    on, or warn as NumPy does."""
    assert make_program(7).source == make_program(7).source
    assert make_program(7).describe() == make_program(7).describe()
    features: collections.Counter = collections.Counter()
    outcomes: collections.Counter = collections.Counter()
    warned = 0
    for seed in range(300):
        program = make_program(seed)
        features.update(program.features)
        result = run(load_function(program.source, str(loop_dir)), program.args)
        outcomes[type(result.value).__name__ if result.status == "raised" else "ok"] += 1
        warned += bool(result.warnings)
    assert set(features) >= {"for", "while", "break", "continue", "early_return", "if", "elif",
                             "bool_op", "element_branch", "element_write", "augmented",
                             "big_int", "division", "int_division", "math", "long_loop",
                             "computed_index", "stress", "reduction", "helper",
                             "for_rows", "top_if"}, features
    assert outcomes["ok"] >= 150, outcomes
    for error in ("IndexError", "ZeroDivisionError", "OverflowError", "ValueError"):
        assert outcomes[error] >= 3, outcomes
    assert warned >= 20, f"only {warned} of 300 programs warned"


def test_programs_are_compiled(loop_dir: pathlib.Path) -> None:
    """Most programs really run compiled code (a graph, a loop body function), or the test above
    would compare Python with itself. (Measured: 29 of these 40 on 3.11, 26 on 3.13, where a
    data-dependent ``if ...: break`` or ``return`` in a loop leaves the whole frame in Python.)"""
    captured = 0
    for seed in range(40):
        try:
            captured += check_program(make_program(seed), loop_dir, "eager", collect=None) > 0
        except AssertionError:  # a mismatch: test_loop_program_matches_python reports it
            pass
    assert captured >= 20, f"only {captured} of 40 programs captured a graph"


def test_a_wrong_result_is_reported(loop_dir: pathlib.Path) -> None:
    """The comparison reports every kind of difference: the fuzzer can fail."""
    source = ("import math\n\n\ndef f(A, B, n, m, s, k):\n    t = 0.0\n    c = k\n"
              "    for i in range(n):\n        A[i] = A[i] / 0.0\n        t += 0.5\n"
              "        c = c * 2**62\n    return t, c, A[0], s\n")
    program = LoopProgram(0, source, (np.array([1.0, 0.0, 3.0]), np.zeros(2), 2, 1, 0.0, 3),
                          None)
    fn = load_function(program.source, str(loop_dir))
    plain = run(fn, program.args)
    t, c, a0, zero = plain.value
    assert plain.status == "ok" and c > 2**63 and np.isnan(plain.args[0][1]), plain
    assert [m.split()[0] for _, m in plain.warnings] == ["divide", "invalid"], plain.warnings
    A, B, *scalars = plain.args
    missing, other_nan = A.copy(), A.copy()
    missing[1] = 0.0  # one element write missing
    other_nan[1] = -other_nan[1]  # another NaN: the same for the comparison
    assert other_nan.tobytes() != A.tobytes()
    replace = dataclasses.replace
    compare_runs(plain, run(fn, program.args), "equal runs")
    compare_runs(plain, replace(plain, args=(other_nan, B, *scalars)), "NaN == NaN")
    compare_runs(plain, replace(plain, warnings=plain.warnings[::-1]), "C: any order",
                 in_order=False)
    wrong = {
        "a value": replace(plain, value=(t + 0.5, c, a0, zero)),
        "a big int off by one": replace(plain, value=(t, c + 1, a0, zero)),
        "a type": replace(plain, value=(np.float64(t), c, a0, zero)),
        "a NumPy scalar's dtype": replace(plain, value=(t, c, np.float32(a0), zero)),
        "the sign of zero": replace(plain, value=(t, c, a0, -zero)),
        "a NaN": replace(plain, value=(t, c, np.float64("nan"), zero)),
        "a partial write": replace(plain, args=(missing, B, *scalars)),
        "a warning": replace(plain, warnings=plain.warnings[:1]),
        "the warnings' order": replace(plain, warnings=plain.warnings[::-1]),
        "an exception": replace(plain, status="raised", value=ZeroDivisionError("division")),
    }
    for what, comp in wrong.items():
        with pytest.raises(AssertionError):
            compare_runs(plain, comp, what)
    with pytest.raises(AssertionError):  # the C backend's comparison: each warning as often
        compare_runs(plain, replace(plain, warnings=plain.warnings[:1] * 2), "C", in_order=False)
    raised = run(fn, (A.copy(), B, 5, 1, 0.0, 3))  # index 3 is out of range: IndexError
    assert raised.status == "raised", raised
    for what, comp in {
        "the exception's message": replace(raised, value=IndexError("index 4 is out of bounds")),
        "the exception's type": replace(raised, value=ValueError(str(raised.value))),
        "a return instead": replace(raised, status="ok", value=(0.0, 0, 0.0, 0.0)),
    }.items():
        with pytest.raises(AssertionError):
            compare_runs(raised, comp, what)

    # and end to end: a "compiled" function that writes one element more fails check_program,
    # naming the seed and showing the source
    def off_by_one(fn: Callable, backend: Callable) -> Callable:
        def wrong_fn(A, B, n, m, s, k):
            result = fn(A, B, n, m, s, k)
            A[-1] += 1.0
            return result
        return wrong_fn

    with pytest.raises(AssertionError, match=r"(?s)arguments after the call.*seed 0.*for i in"):
        check_program(program, loop_dir, "eager", compiler=off_by_one, collect=None)
