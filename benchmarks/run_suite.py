"""The benchmark suite in one run: every kernel of `benchmarks/suite/` against NumPy.

In: command-line options. Out: a Markdown table on stdout (and in ``--out FILE``): per kernel,
the steady-state time of plain NumPy (best of N) and, for npdynamo eager, npdynamo C, Numba and
torch.compile (the last two only when they import), the time and the ratio NumPy time / time
(higher is better; ``MISMATCH`` when the result differs from NumPy's, ``~`` when it is within
tolerance but not bit-identical), the first-call time (trace + compile + run; for C with gcc,
from an empty disk cache unless ``--warm-cache``), the graphs and graph breaks
(``dynamo.explain``), and the graphs compiled after the first call (recompiles in the steady
state). Then the geometric means and the kernels slower than 0.9x NumPy.

    .venv/bin/python benchmarks/run_suite.py                 # the whole suite (~10-20 min)
    .venv/bin/python benchmarks/run_suite.py --quick         # smoke run: small sizes
    .venv/bin/python benchmarks/run_suite.py --kernels lu,nbody --repeats 20
    /work/bench_venv/bin/python benchmarks/run_suite.py      # with Numba (see docs/benchmarks.md)
"""

from __future__ import annotations

import argparse
import dis
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # `suite`, `loop_kernels`
sys.path.insert(1, str(HERE.parent))  # `dynamo` from this checkout

SLOW = 0.9  # ratios below this are listed as slower than NumPy


def fresh_copy(fn: Callable) -> Callable:
    """The same function on a new code object, so each implementation compiles its own version
    (npdynamo's cache is per code object) and no cached entry of another column is reused."""
    code = fn.__code__.replace()
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    return copy


def numba_version(numba: Any, fn: Callable, _seen: dict | None = None) -> Callable:
    """``numba.njit`` of `fn`, with the suite's helper functions it calls (globals defined in
    `benchmarks/suite/`) jitted as well, or replaced by their ``numba_variant``."""
    seen = {} if _seen is None else _seen
    if fn in seen:
        return seen[fn]
    env = dict(fn.__globals__)
    globals_read = {ins.argval for ins in dis.get_instructions(fn) if ins.opname == "LOAD_GLOBAL"}
    for name in globals_read:  # not co_names: `np.histogram` must not find the kernel histogram
        helper = env.get(name)
        if isinstance(helper, types.FunctionType) and helper.__module__.startswith("suite."):
            env[name] = numba_version(numba, getattr(helper, "numba_variant", helper), seen)
    seen[fn] = jitted = numba.njit(cache=False)(
        types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__))
    return jitted


class Counting:
    """A backend wrapper counting the graphs it compiles (recompiles show as a growing count)."""

    def __init__(self, inner: Callable) -> None:
        self.inner, self.count = inner, 0
        # (a wrapper of the C backend keeps its loop kernels: docs/loops.md)
        self.loop_kernels = getattr(inner, "loop_kernels", False)

    def __call__(self, gm: Any, example_inputs: list) -> Callable:
        self.count += 1
        return self.inner(gm, example_inputs)


@dataclass
class Cell:
    """One implementation on one kernel."""

    seconds: float | None = None
    first: float | None = None
    verdict: str = ""  # "", "~" (close, not bit-identical) or "MISMATCH"
    graphs_first: int | None = None
    graphs_total: int | None = None
    error: str = ""
    #: npdynamo's own warnings on the first call (an internal error falls back to plain Python)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Row:
    kernel: Any
    size: str
    numpy_s: float
    cells: dict[str, Cell] = field(default_factory=dict)
    graphs: int | None = None
    breaks: int | None = None
    ops: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    #: (bench_loops) the C column's first call in a new process, from the disk cache
    disk_first: float | None = None


# -- implementations -------------------------------------------------------------------------
def implementations() -> tuple[dict[str, Callable], list[str]]:
    """name -> (kernel -> (callable, counting backend or None)); plus notes on what is missing."""
    import dynamo
    from dynamo.backends.c import make_backend

    impls: dict[str, Callable] = {}
    notes: list[str] = []

    def npd(make_inner):
        def make(kernel):
            backend = Counting(make_inner())
            return dynamo.compile(fresh_copy(kernel.fn), backend=backend), backend
        return make

    impls["eager"] = npd(lambda: dynamo.lookup_backend("eager"))
    impls["C"] = npd(make_backend)
    try:
        import numba

        def make_numba(kernel):
            return numba_version(numba, kernel.numba or kernel.fn), None
        impls["numba"] = make_numba
    except ImportError:
        notes.append("Numba not importable in this interpreter: no numba column "
                     "(run with /work/bench_venv/bin/python, docs/benchmarks.md).")
    try:
        import torch

        def make_torch(kernel):
            torch._dynamo.reset()
            return torch.compile(fresh_copy(kernel.fn)), None
        impls["torch.compile"] = make_torch
    except ImportError:
        notes.append("torch not importable: no torch.compile column.")
    return impls, notes


# -- measuring -------------------------------------------------------------------------------
def _leaves(value: Any) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def compare(got: Any, want: Any) -> str:
    """"" when bit-identical (type, dtype, shape, values), "~" when close, else "MISMATCH"."""
    import numpy as np

    got_l, want_l = _leaves(got), _leaves(want)
    if len(got_l) != len(want_l):
        return "MISMATCH"
    verdict = ""
    for g, w in zip(got_l, want_l):
        ga, wa = np.asarray(g), np.asarray(w)
        if ga.shape != wa.shape or ga.dtype != wa.dtype:
            return "MISMATCH"
        if np.array_equal(ga, wa, equal_nan=wa.dtype.kind in "fc"):
            continue
        if wa.dtype.kind not in "fc":
            return "MISMATCH"
        scale = max(1.0, float(np.nanmax(np.abs(wa), initial=0.0)))
        if not np.allclose(ga, wa, rtol=1e-7, atol=1e-9 * scale, equal_nan=True):
            return "MISMATCH"
        verdict = "~"
    return verdict


def explain_counts(kernel, args: tuple) -> tuple[int | None, int | None, int | None, list[str]]:
    """Graphs, breaks, ops and break reasons from dynamo.explain (eager: the frontend decides
    graphs and breaks, not the backend). Resets npdynamo's caches: call before compiling."""
    import dynamo

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = dynamo.explain(fresh_copy(kernel.fn), backend="eager")(*args)
    except Exception as exc:  # noqa: BLE001 - a failing explain must not stop the run
        return None, None, None, [f"explain failed: {type(exc).__name__}: {exc}"]
    ops = sum(len(o) for o in out.ops_per_graph)
    reasons = list(out.break_reasons) + [f"(no graph) {r}" for r in out.skipped_frames]
    return out.graph_count, out.graph_break_count, ops, reasons


def measure(kernel, n: int, impls: dict[str, Callable], args) -> Row:
    """One row: first calls (checked against NumPy), then the steady state timed in rounds
    that time NumPy and every implementation once each, best of the rounds: on a shared
    machine a change of load then hits all columns alike instead of one. Each timed call comes
    after ``args.warm_calls`` untimed calls of the same implementation (its own steady state:
    see the loop)."""
    import numpy as np

    inputs = kernel.make(n)
    shape = next((a.shape for a in inputs if isinstance(a, np.ndarray)), ())
    size = "x".join(map(str, shape)) or str(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = kernel.fn(*inputs)
    row = Row(kernel, size, float("inf"))
    if not args.no_explain:
        row.graphs, row.breaks, row.ops, row.break_reasons = explain_counts(kernel, inputs)
    timed: dict[str, tuple[Callable, Any]] = {}
    for name, make in impls.items():
        cell = row.cells[name] = Cell()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fn, counter = make(kernel)
                t0 = time.perf_counter()
                got = fn(*inputs)
                cell.first = time.perf_counter() - t0
            cell.warnings = [str(w.message)[:300] for w in caught
                             if str(w.message).startswith("npdynamo")]
            cell.verdict = compare(got, expected)
            if counter is not None:
                cell.graphs_first = counter.count
            timed[name] = (fn, counter)
        except Exception as exc:  # noqa: BLE001 - one failing implementation must not stop the run
            first_line = str(exc).splitlines()[0][:160] if str(exc) else ""
            cell.error = f"{type(exc).__name__}: {first_line}"
    best = {name: float("inf") for name in ["NumPy", *timed]}
    fns = {"NumPy": kernel.fn, **{name: fn for name, (fn, _) in timed.items()}}
    spent = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rnd in range(args.repeats):
            for name, fn in fns.items():
                try:
                    # Untimed calls first: each implementation is timed from its own steady
                    # state, not from the heap the previous column left (glibc hands freed
                    # blocks back or reuses them depending on who freed what: correlation's
                    # eager column, the same NumPy calls as NumPy's, timed 0.69-0.74x right
                    # after the C column and 1.00x after its own calls).
                    for _ in range(getattr(args, "warm_calls", 0)):
                        fn(*inputs)
                    t0 = time.perf_counter()
                    fn(*inputs)
                    dt = time.perf_counter() - t0
                except Exception as exc:  # noqa: BLE001 - e.g. a later call of one column fails
                    row.cells[name].error = f"{type(exc).__name__} in a later call: {exc}"[:200]
                    del fns[name]
                    break
                best[name], spent = min(best[name], dt), spent + dt
            if rnd >= 2 and spent > args.budget * len(fns):
                break
    row.numpy_s = best["NumPy"]
    for name, (_, counter) in timed.items():
        cell = row.cells[name]
        if not cell.error:
            cell.seconds = best[name]
            if counter is not None:
                cell.graphs_total = counter.count
    return row


def row_to_json(row: Row) -> dict:
    out = {k: v for k, v in vars(row).items() if k not in ("kernel", "cells")}
    out["cells"] = {name: vars(cell) for name, cell in row.cells.items()}
    return out


def measure_in_child(kernel, argv: list[str]) -> Row:
    """`measure` in a fresh process (same options): every kernel starts from the same
    interpreter and malloc state, so one kernel's freed memory does not time the next's."""
    rest, skip = [], False
    for arg in argv:  # drop --kernels/--out (and their values) of the parent's command line
        if skip:
            skip = False
        elif arg in ("--kernels", "--out"):
            skip = True
        elif not arg.startswith(("--kernels=", "--out=")):
            rest.append(arg)
    proc = subprocess.run([sys.executable, __file__, *rest, "--child", "--warm-cache",
                           "--kernels", kernel.name], check=False, capture_output=True, text=True)
    row = Row(kernel, "?", float("nan"))
    if proc.returncode != 0:
        row.break_reasons.append(f"measuring process failed: {proc.stderr.strip()[-300:]}")
        return row
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    cells = data.pop("cells")
    for key, value in data.items():
        setattr(row, key, value)
    row.cells = {name: Cell(**cell) for name, cell in cells.items()}
    return row


# -- reporting -------------------------------------------------------------------------------
def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def ratio(row: Row, name: str) -> float | None:
    cell = row.cells.get(name)
    if cell is None or cell.seconds is None or cell.verdict == "MISMATCH":
        return None
    return row.numpy_s / cell.seconds


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def report(rows: list[Row], names: list[str], notes: list[str], args) -> str:
    header = ["kernel", "family", "size", "NumPy ms"]
    for name in names:
        header += [f"{name} ms", f"{name} x"]
    header += [f"{name} 1st ms" for name in names]
    header += ["graphs", "breaks", "ops", "recompiles"]
    if getattr(args, "no_explain", False):
        header = header[:-4] + ["recompiles"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    footnotes = list(notes)
    for row in rows:
        cells = [row.kernel.name, row.kernel.family, row.size, fmt_ms(row.numpy_s)]
        for name in names:
            cell, x = row.cells[name], ratio(row, name)
            if cell.error:
                footnotes.append(f"{name} on {row.kernel.name}: {cell.error}")
                cells += ["n/a", ""]
                continue
            footnotes.extend(f"{name} on {row.kernel.name}: {w}" for w in cell.warnings)
            shown = "" if x is None else f"{x:.2f}"
            cells += [fmt_ms(cell.seconds), (shown + " " + cell.verdict).strip()]
        cells += [fmt_ms(row.cells[name].first) if not row.cells[name].error else "n/a"
                  for name in names]
        recompiles = [f"{name} +{c.graphs_total - c.graphs_first}" for name, c in row.cells.items()
                      if c.graphs_total is not None and c.graphs_total > c.graphs_first]
        if not getattr(args, "no_explain", False):
            cells += [str(v) if v is not None else "?" for v in (row.graphs, row.breaks, row.ops)]
        cells.append(", ".join(recompiles) or "0")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    summary = []
    for name in names:
        xs = [x for x in (ratio(r, name) for r in rows) if x is not None]
        g = geomean(xs)
        firsts = sorted(r.cells[name].first for r in rows if r.cells[name].first is not None)
        if g is not None:
            summary.append(f"- {name}: geometric mean {g:.2f}x NumPy over {len(xs)} kernels; "
                           f"first call median {fmt_ms(firsts[len(firsts) // 2])} ms, "
                           f"max {fmt_ms(firsts[-1])} ms")
        slow = sorted((x, r.kernel.name) for r in rows
                      if (x := ratio(r, name)) is not None and x < SLOW)
        if slow and name in ("eager", "C"):
            summary.append(f"  slower than {SLOW}x NumPy: "
                           + ", ".join(f"{k} {x:.2f}" for x, k in slow))
        bad = [r.kernel.name for r in rows if r.cells[name].verdict == "MISMATCH"]
        if bad:
            summary.append(f"  MISMATCH (result differs from NumPy): {', '.join(bad)}")
    lines += summary
    reasons = [(r.kernel.name, reason) for r in rows for reason in r.break_reasons]
    if reasons:
        lines += ["", "Graph breaks (dynamo.explain):"]
        lines += [f"- {k}: {reason}" for k, reason in reasons]
    if footnotes:
        lines += ["", "Notes:"] + [f"- {note}" for note in dict.fromkeys(footnotes)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats (smoke run)")
    parser.add_argument("--kernels", default="", help="comma-separated subset, e.g. lu,nbody")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per cell (best of)")
    parser.add_argument("--budget", type=float, default=None, help="seconds per cell at most")
    parser.add_argument("--threads", type=int, default=1, help="threads for C kernels and BLAS")
    parser.add_argument("--warm-calls", type=int, default=2,
                        help="untimed calls of an implementation before each of its timed "
                             "calls (its own steady state; 0: rounds of single calls)")
    parser.add_argument("--warm-cache", action="store_true",
                        help="use the C backend's disk cache (default: an empty one, so first "
                             "calls include gcc)")
    parser.add_argument("--no-explain", action="store_true", help="skip the graphs/breaks columns")
    parser.add_argument("--out", default="", help="also write the table to this file")
    parser.add_argument("--in-process", action="store_true",
                        help="measure every kernel in this process (default: one fresh process "
                             "per kernel)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 10)
    args.budget = args.budget or (0.1 if args.quick else 1.0)
    # Thread counts and the cache directory must be fixed before NumPy and dynamo read them.
    for var in ("DYNAMO_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    cache_tmp = None
    if not args.warm_cache:
        cache_tmp = tempfile.TemporaryDirectory(prefix="npdynamo-suite-")
        os.environ["DYNAMO_CACHE_DIR"] = cache_tmp.name
    import suite

    kernels = suite.select(args.kernels)
    impls, notes = implementations()
    notes.append(f"{'quick' if args.quick else 'benchmark'} sizes, best of {args.repeats} "
                 f"(budget {args.budget} s per cell; each timed call after {args.warm_calls} "
                 f"untimed calls of the same implementation), {args.threads} thread(s); "
                 "x = NumPy time / "
                 "time (higher is better); C first calls "
                 + ("use the existing disk cache" if args.warm_cache
                    else "start from an empty disk cache (gcc included)")
                 + "; '~' = within 1e-7 relative, not bit-identical.")
    if args.child:  # one kernel, for the parent process: the row as JSON
        kernel = kernels[0]
        row = measure(kernel, kernel.small if args.quick else kernel.bench, impls, args)
        print(json.dumps(row_to_json(row)))
        return
    if not args.in_process:
        notes.append("each kernel measured in a fresh process (first calls include loading "
                      "the backend; malloc starts from the same state for every kernel).")
    rows = []
    for kernel in kernels:
        t0 = time.perf_counter()
        if args.in_process:
            rows.append(measure(kernel, kernel.small if args.quick else kernel.bench, impls, args))
        else:
            rows.append(measure_in_child(kernel, argv if argv is not None else sys.argv[1:]))
        print(f"# {kernel.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    text = report(rows, list(impls), notes, args)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if cache_tmp is not None:
        cache_tmp.cleanup()


if __name__ == "__main__":
    main()
