"""Python loop programs: plain Python/NumPy against npdynamo (eager, C) and Numba, side by side.

In: command-line options. Out: a table on stdout (aligned text, or Markdown with ``--markdown``),
one row per program: the steady-state time of the plain function in µs (the baseline), the
speed-up plain time / time (higher is better) of npdynamo eager, npdynamo C and ``numba.njit``
(when numba imports: ``n/a`` otherwise, ``fails`` where Numba cannot compile the program), and
the first-call times of the C backend from an empty disk cache (trace, gcc, load, run) and of
Numba (its compile included); then a geometric-mean row. Every column's result must equal
plain's exactly (an array's dtype, shape and values; a scalar's type and value), on the first
call and on a warm one: ``WRONG`` marks one that does not (and leaves it out of the mean).

The programs are loops over elements as a user writes them, one function object per program,
unchanged for every column (npdynamo compiles a copy on a new code object per column, so no
column reuses another's cache): nine written here (a linear recurrence, bitwise CRC-32 over
Python ints, scalar forward substitution, counting points in a circle, Newton square roots in a
``while`` loop, a 1-D stencil over element loops, a sliding-window range and prefix means by
reductions of slices, a per-element helper function) and the NPBench-style kernels of
`loop_kernels.py` at the benchmark suite's sizes (`suite/`; ``--quick``: its test sizes).
Timing is `run_suite.measure`'s: everything in this one process, rounds that time every column
once (each timed call after untimed warm calls of the same column), best of the rounds.

    .venv/bin/python benchmarks/bench_loops.py                  # every program (~1 min)
    .venv/bin/python benchmarks/bench_loops.py --quick          # small sizes, 3 rounds (< 60 s)
    .venv/bin/python benchmarks/bench_loops.py --only crc32,lu --markdown
    /work/bench_venv/bin/python benchmarks/bench_loops.py       # with Numba (docs/benchmarks.md)
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_suite, suite, loop_kernels

import run_suite  # noqa: E402 - also puts this checkout's `dynamo` on sys.path
import suite  # noqa: E402
from loop_kernels import KERNELS as LOOP_KERNELS  # noqa: E402
from suite.kernel import Kernel, rng  # noqa: E402

COLUMNS = ("eager", "C", "numba")


# -- the programs ----------------------------------------------------------------------------
def recurrence(x):
    y = np.empty_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = 0.5 * y[i - 1] + x[i]
    return y


def crc32(data):
    crc = 0xFFFFFFFF
    for i in range(data.shape[0]):
        crc ^= int(data[i])
        for k in range(8):
            if crc & 1:
                crc = (crc >> 1) ^ 0xEDB88320
            else:
                crc >>= 1
    return crc ^ 0xFFFFFFFF


def forward_substitution(L, b):
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in range(n):
        s = 0.0
        for j in range(i):
            s += L[i, j] * x[j]
        x[i] = (b[i] - s) / L[i, i]
    return x


def points_in_circle(x, y):
    count = 0
    for i in range(x.shape[0]):
        if x[i] * x[i] + y[i] * y[i] <= 1.0:
            count += 1
    return count


def newton_sqrt(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        v = float(a[i])
        g = math.ldexp(1.0, math.frexp(v)[1] // 2)  # 2**(exponent/2): within 2x of the root
        while abs(g * g - v) > 1e-12 * v:
            g = 0.5 * (g + v / g)
        out[i] = g
    return out


def stencil_1d(u0, steps):
    u = u0.copy()
    new = u0.copy()
    n = u.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            new[i] = u[i] + 0.1 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, n - 1):
            u[i] = new[i]
    return u


def window_range(x, k):
    out = np.empty(len(x) - k + 1)
    for i in range(len(x) - k + 1):
        out[i] = x[i:i + k].max() - x[i:i + k].min()
    return out


def prefix_means(x):
    out = np.empty(len(x))
    for i in range(len(x)):
        out[i] = x[:i + 1].sum() / (i + 1)
    return out


def _clip(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def soft_limit(x):
    """A helper function called per element (a kernel inlines it; Numba needs it decorated
    too, so ``numba.njit`` of this unchanged function fails)."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = _clip(x[i] * 3.0, -1.0, 1.0)
    return out


def _lower(n):
    return np.tril(rng(72).random((n, n))) + n * np.eye(n)


#: `small` is the ``--quick`` size, `bench` the default one.
PROGRAMS: list[Kernel] = [
    Kernel("recurrence", "loop", recurrence, lambda n: (rng(70).random(n),),
           small=2_000, bench=20_000),
    Kernel("crc32", "loop", crc32, lambda n: (rng(71).integers(0, 256, n, dtype=np.int64),),
           small=512, bench=4_096),
    Kernel("forward_substitution", "loop", forward_substitution,
           lambda n: (_lower(n), rng(73).random(n)), small=30, bench=300),
    Kernel("points_in_circle", "loop", points_in_circle,
           lambda n: (rng(74).random(n) * 2.0 - 1.0, rng(75).random(n) * 2.0 - 1.0),
           small=10_000, bench=100_000),
    Kernel("newton_sqrt", "loop", newton_sqrt, lambda n: (rng(76).random(n) * 1000.0 + 0.01,),
           small=200, bench=2_000),
    Kernel("stencil_1d", "loop", stencil_1d, lambda n: (rng(77).random(n), 2 * n),
           small=50, bench=200),
    Kernel("window_range", "loop", window_range, lambda n: (rng(78).random(n), 16),
           small=2_000, bench=20_000),
    Kernel("prefix_means", "loop", prefix_means, lambda n: (rng(79).random(n),),
           small=300, bench=3_000),
    Kernel("soft_limit", "loop", soft_limit, lambda n: (rng(80).standard_normal(n),),
           small=10_000, bench=100_000),
    # loop_kernels.py's kernels, with the sizes the suite gives them
    *suite.select(",".join(name for name, _, _ in LOOP_KERNELS)),
]


def select(names: str | None) -> list[Kernel]:
    """The programs named in a comma-separated list (all for None/""); unknown names exit."""
    by_name = {p.name: p for p in PROGRAMS}
    wanted = [n.strip() for n in (names or "").split(",") if n.strip()] or list(by_name)
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown program(s) {', '.join(unknown)}; choose from: "
                         + ", ".join(by_name))
    return [by_name[n] for n in wanted]


# -- checking --------------------------------------------------------------------------------
def exact(got: Any, want: Any) -> bool:
    """Equal to the letter: the same type, and for arrays the same dtype, shape and values
    (NaNs where plain has them); scalars compare with ``==``."""
    if type(got) is not type(want):
        return False
    if isinstance(want, np.ndarray):
        return (got.dtype == want.dtype and got.shape == want.shape
                and np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"))
    return bool(got == want) or (want != want and got != got)  # NaN == NaN here


# -- measuring -------------------------------------------------------------------------------
def columns(cache_dir: Path) -> tuple[dict[str, Callable], dict[str, Callable], list[str]]:
    """name -> (program -> (callable, None)) for `run_suite.measure`, the callables each one
    made (the last per name: checked again after timing), and notes on what is missing. The
    C column's maker points ``$DYNAMO_CACHE_DIR`` at a new empty directory per program (the
    backend reads it at each build), so its first call builds every kernel with gcc."""
    import dynamo  # here, not at the top: main sets $DYNAMO_CACHE_DIR first

    made: dict[str, Callable] = {}
    notes: list[str] = []

    def npdynamo(name: str, backend: str) -> Callable:
        def make(program: Kernel) -> tuple[Callable, None]:
            if backend == "c":
                os.environ["DYNAMO_CACHE_DIR"] = str(cache_dir / program.name)
            made[name] = dynamo.compile(run_suite.fresh_copy(program.fn), backend=backend)
            return made[name], None
        return make

    impls = {"eager": npdynamo("eager", "eager"), "C": npdynamo("C", "c")}
    try:
        import numba  # optional: the `bench` extra, in a side environment
    except ImportError:
        notes.append("Numba does not import in this interpreter: numba column n/a "
                     "(docs/benchmarks.md: the side environment).")
    else:
        def make_numba(program: Kernel) -> tuple[Callable, None]:
            made["numba"] = numba.njit(program.fn)  # the plain function itself, unchanged
            return made["numba"], None
        impls["numba"] = make_numba
    return impls, made, notes


def check_warm(program: Kernel, n: int, row: run_suite.Row, made: dict[str, Callable]) -> None:
    """After timing: each column's result on fresh inputs must be plain's exactly (type too:
    `run_suite.compare` on the first call checks dtype, shape and values only). A Numba column
    that failed to compile is called again for the reason (`run_suite.measure` keeps the first
    line of the message, Numba's headline)."""
    want = program.fn(*program.make(n))
    for name, fn in made.items():
        cell = row.cells[name]
        if cell.error and name == "numba":
            try:
                fn(*program.make(n))
            except Exception as exc:  # noqa: BLE001 - any compile error: the reason is noted
                lines = [line for line in str(exc).splitlines()[1:] if line.strip()]
                cell.error = f"{type(exc).__name__}: {(lines or [''])[0][:160]}"
        elif not cell.error and not cell.verdict and not exact(fn(*program.make(n)), want):
            cell.verdict = "WRONG"


_DISK_FIRST = r"""
import sys, time
sys.path.insert(0, {here!r})
import bench_loops, dynamo
program = {{p.name: p for p in bench_loops.PROGRAMS}}[sys.argv[1]]
args = program.make(int(sys.argv[2]))
fn = dynamo.compile(program.fn, backend="c")
start = time.perf_counter()
fn(*args)
print(time.perf_counter() - start)
"""


def disk_first(program: Kernel, n: int, cache_dir: Path, runs: int = 2) -> float | None:
    """The C column's first call in a new process whose disk cache holds what this one built
    (its kernels and lowered loops): seconds, the best of `runs` processes (None if one
    failed)."""
    env = dict(os.environ, DYNAMO_CACHE_DIR=str(cache_dir / program.name))
    best = None
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _DISK_FIRST.format(
            here=str(Path(__file__).resolve().parent)), program.name, str(n)], env=env,
            capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            return None
        seconds = float(done.stdout.split()[-1])
        best = seconds if best is None else min(best, seconds)
    return best


# -- reporting -------------------------------------------------------------------------------
def cell_text(row: run_suite.Row, name: str) -> str:
    cell = row.cells.get(name)
    if cell is None:
        return "n/a"
    if cell.error:
        return "fails" if name == "numba" else "ERROR"
    if cell.verdict:  # "~" (close, not equal) or "MISMATCH" on the first call, or "WRONG"
        return "WRONG"
    return f"{row.numpy_s / cell.seconds:.2f}"


def first_text(row: run_suite.Row, name: str) -> str:
    cell = row.cells.get(name)
    return "n/a" if cell is None or cell.error else run_suite.fmt_ms(cell.first)


def table(rows: list[run_suite.Row], markdown: bool) -> str:
    header = ["program", "size", "plain µs", *(f"{c} x" for c in COLUMNS), "C 1st ms",
              "C disk 1st ms", "numba 1st ms"]
    disk = [r.disk_first for r in rows]
    body = [[r.kernel.name, r.size, run_suite.fmt_ms(r.numpy_s * 1e3),  # fmt_ms of ms: µs
             *(cell_text(r, c) for c in COLUMNS), first_text(r, "C"),
             "n/a" if d is None else run_suite.fmt_ms(d), first_text(r, "numba")]
            for r, d in zip(rows, disk)]
    means = ["geometric mean", "", ""]
    for name in COLUMNS:
        xs = [float(t) for r in rows if (t := cell_text(r, name))[0].isdigit()]
        means.append(f"{run_suite.geomean(xs):.2f} ({len(xs)}/{len(rows)})" if xs else "n/a")
    for name in ("C", "disk", "numba"):
        firsts = ([d for d in disk if d is not None] if name == "disk" else
                  [r.cells[name].first for r in rows
                   if name in r.cells and not r.cells[name].error])
        means.append(run_suite.fmt_ms(run_suite.geomean(firsts)) if firsts else "n/a")
    body.append(means)
    if markdown:
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                         + ["| " + " | ".join(line) + " |" for line in body])
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(text.ljust(w) if i == 0 else text.rjust(w)
                               for i, (text, w) in enumerate(zip(line, widths)))
                     for line in [header, *body])


WRONG_WHY = {  # cell.verdict -> what differed
    "~": "the first call's result differs from plain's in the last bits (within 1e-7 relative)",
    "MISMATCH": "the first call's result differs from plain's (dtype, shape or values)",
    "WRONG": "a warm call's result differs from plain's (type or values)",
}


def notes_for(rows: list[run_suite.Row]) -> list[str]:
    notes = []
    for row in rows:
        for name, cell in row.cells.items():
            if cell.error:
                notes.append(f"{name} on {row.kernel.name}: {cell.error}")
            elif cell.verdict:
                notes.append(f"{name} on {row.kernel.name}: WRONG, {WRONG_WHY[cell.verdict]}")
    return notes


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 rounds (< 60 s)")
    parser.add_argument("--only", default="", help="comma-separated programs, e.g. crc32,lu")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.add_argument("--repeats", type=int, default=None, help="rounds at most (best of)")
    parser.add_argument("--budget", type=float, default=None,
                        help="rounds stop (3 at least) once the timed calls of a program add "
                             "up to this many seconds per column")
    parser.add_argument("--no-disk", action="store_true",
                        help="no 'C disk 1st' column (a new process per program and run)")
    parser.add_argument("--warm-calls", type=int, default=2,
                        help="untimed calls of a column before each of its timed calls")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 10)
    args.budget = args.budget or (0.05 if args.quick else 1.0)
    args.no_explain = True  # run_suite.measure: no dynamo.explain columns here
    programs = select(args.only)
    saved_env = os.environ.get("DYNAMO_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="npdynamo-loops-") as tmp:
        os.environ["DYNAMO_CACHE_DIR"] = tmp  # before dynamo first reads it
        try:
            import dynamo  # after $DYNAMO_CACHE_DIR is set

            impls, made, notes = columns(Path(tmp))
            rows = []
            for program in programs:
                dynamo.reset()
                made.clear()
                n = program.small if args.quick else program.bench
                row = run_suite.measure(program, n, impls, args)
                check_warm(program, n, row, made)
                row.disk_first = None if args.no_disk else disk_first(program, n, Path(tmp))
                rows.append(row)
                print(f"# {program.name} done", file=sys.stderr, flush=True)
            dynamo.reset()
        finally:
            if saved_env is None:
                os.environ.pop("DYNAMO_CACHE_DIR", None)
            else:
                os.environ["DYNAMO_CACHE_DIR"] = saved_env
    notes += notes_for(rows)
    rounds = (f"best of {args.repeats} rounds" if args.repeats <= 3 else
              f"best of up to {args.repeats} rounds (3 at least; fewer once the timed calls "
              f"add up to {args.budget} s per column)")
    notes.append(f"{'quick' if args.quick else 'default'} sizes; {rounds}, "
                 f"each timed call after {args.warm_calls} untimed calls of its column; x = plain "
                 "time / time (higher is better); first calls: C from an empty disk cache, "
                 "C disk from the disk cache in a new process (best of 2 processes), Numba "
                 "including its compile.")
    text = table(rows, args.markdown) + "\n\n" + "\n".join(f"- {note}" for note in notes)
    print(text)
    return text


if __name__ == "__main__":
    main()
