"""Kernel benchmark for the C backend (issue 3): NumPy vs npdynamo eager vs C, in one table.

In: command-line options. Out: one Markdown table on stdout: per kernel, dtype and size, the best
time of NumPy and of each available implementation, its speed-up over NumPy, the first-call time
of the C backend (trace + codegen + gcc, or the disk cache), and (memory-bound kernels) the
C backend's share of the streaming bandwidth measured in the same run (`benchmarks/bandwidth.py`;
bytes moved = every input read once + every output written once), both with fresh outputs (each
call's output is new memory: page faults included, as NumPy pays them) and "warm" (malloc reuses
the previous output's pages: the kernel alone, comparable to the copy figure; `warm_allocations`).

Columns for numexpr, Numba and torch.compile appear when those packages import (optional extras,
never required); an implementation that fails on a kernel shows ``n/a`` with a footnote. Results
are checked against NumPy (``MISMATCH`` in the table if they differ).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_kernels.py            # full table
    PYTHONPATH=. .venv/bin/python benchmarks/bench_kernels.py --quick    # smoke test
    options: --threads N, --kernels chain10,softmax, --repeats R, --sweep (sizes 1..1M),
             --dynamic (chain10 at 20 lengths: graphs compiled, cost of a new length)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

# -- the kernels -----------------------------------------------------------------------------
# Each kernel: a NumPy function, a maker of inputs for (dtype, nominal size), and whether it is
# memory-bound (then "% of bandwidth" is meaningful). Functions look up `np` at call time, so the
# module imports NumPy only after the thread-count environment variables are set.


def chain10(x, y):
    return ((x * 2.0 + y) * 0.5 - x * y + 1.0) / (y + 2.0) * x - 3.0


def hypot_sum(x, y):
    return np.sum(np.sqrt(x * x + y * y))


def lstm_cell(i, f, g, o, c):
    c_new = 1.0 / (1.0 + np.exp(-f)) * c + 1.0 / (1.0 + np.exp(-i)) * np.tanh(g)
    h = 1.0 / (1.0 + np.exp(-o)) * np.tanh(c_new)
    return h, c_new


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def kmeans_assign(points, centers):
    d2 = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d2, axis=1)


def matmul_relu(a, b, bias):
    return np.maximum(a @ b + bias, 0)


def _rand(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _vectors(count):
    return lambda dtype, n: [_rand(n, dtype, s) for s in range(count)]


def _rows(extra):
    def make(dtype, n):
        x = _rand((max(n // 1024, 1), 1024), dtype, 0)
        return [x] + [_rand(1024, dtype, s + 1) for s in range(extra)]
    return make


def _kmeans_inputs(dtype, n):  # n = number of point coordinates: n/4 points in 4-D, 8 centers
    return [_rand((max(n // 4, 1), 4), dtype, 0), _rand((8, 4), dtype, 1)]


def _matmul_inputs(dtype, n):  # output of n elements: (n/1024, 256) @ (256, 1024) + (1024,)
    return [_rand((max(n // 1024, 1), 256), dtype, 0), _rand((256, 1024), dtype, 1),
            _rand(1024, dtype, 2)]


@dataclass(frozen=True)
class Kernel:
    name: str
    fn: Callable
    inputs: Callable  # (dtype, nominal size) -> list of arrays
    memory_bound: bool
    numexpr: str | None = None  # the same computation for numexpr.evaluate, if it has one
    sizes: tuple[int, ...] = ()  # overrides the default sizes (nominal element counts)


KERNELS = [
    Kernel("chain10", chain10, _vectors(2), True,
           "((x * 2.0 + y) * 0.5 - x * y + 1.0) / (y + 2.0) * x - 3.0"),
    Kernel("hypot_sum", hypot_sum, _vectors(2), True, "sum(sqrt(x * x + y * y))"),
    Kernel("lstm_cell", lstm_cell, _vectors(5), True),
    Kernel("softmax", softmax, _rows(0), True, sizes=(1 << 20, 4096 * 1024, 10 << 20)),
    Kernel("layernorm", layernorm, _rows(2), True),
    Kernel("kmeans_assign", kmeans_assign, _kmeans_inputs, False),
    Kernel("matmul_relu", matmul_relu, _matmul_inputs, False),
]
DEFAULT_SIZES = (1_000_000, 10_000_000)
QUICK_SIZES = (20_000, 200_000)
IN_CACHE_BYTES = 64 << 20  # below this many bytes moved (~2x L3), no "% of bandwidth"


# -- implementations -------------------------------------------------------------------------
@dataclass
class Impl:
    name: str
    make: Callable[[Kernel], Callable]  # kernel -> callable taking the kernel's inputs
    notes: list[str] = field(default_factory=list)


def fresh_copy(fn: Callable) -> Callable:
    """The same function on a new code object. npdynamo caches compiled code per code object
    (not per backend), so the eager and C columns must not share one."""
    code = fn.__code__.replace()
    assert code is not fn.__code__
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    return copy


def _dynamo_impls() -> tuple[list[Impl], str | None]:
    try:
        import dynamo

        compile_fn = dynamo.compile
    except (ImportError, AttributeError) as exc:
        return [], (f"npdynamo public API unavailable ({type(exc).__name__}: {exc}); the "
                    "eager and C columns are skipped. Build dynamo._C and check dynamo.compile.")
    return [Impl("eager", lambda k: compile_fn(fresh_copy(k.fn), backend="eager")),
            Impl("C", lambda k: compile_fn(fresh_copy(k.fn), backend="c"))], None


def _optional_impls() -> list[Impl]:
    impls = []
    try:
        import numexpr

        def make_numexpr(kernel):
            if kernel.numexpr is None:
                raise NotImplementedError("no numexpr expression for this kernel")
            names = kernel.fn.__code__.co_varnames[: kernel.fn.__code__.co_argcount]
            return lambda *args: numexpr.evaluate(kernel.numexpr, dict(zip(names, args)))
        impls.append(Impl("numexpr", make_numexpr))
    except ImportError:
        pass
    try:
        import numba

        impls.append(Impl("numba", lambda k: numba.njit(cache=False)(k.fn)))
    except ImportError:
        pass
    try:
        import torch

        impls.append(Impl("torch.compile", lambda k: torch.compile(k.fn)))
    except ImportError:
        pass
    return impls


# -- measuring -------------------------------------------------------------------------------
def best_time(fn: Callable, args: list, repeats: int, budget_s: float) -> float:
    best, spent = float("inf"), 0.0
    for i in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
        if spent > budget_s and i >= 2:
            break
    return best


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def same_result(got, want, dtype) -> bool:
    got, want = _as_tuple(got), _as_tuple(want)
    if len(got) != len(want):
        return False
    rtol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-9
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if w.dtype.kind in "iub":
            if (g != w).mean() > 1e-3:  # argmin ties may break differently under rounding
                return False
        elif not np.allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.abs(w).max(
                initial=0.0)))):
            return False
    return True


class warm_allocations:
    """Context manager: glibc malloc keeps freed memory instead of returning it to the OS.

    Large arrays normally come from fresh ``mmap`` pages, and the first write to each page is a
    page fault in which the kernel zeroes it: for a fused kernel that writes one output that
    costs about as much as the kernel's own memory traffic (NumPy pays it equally on every
    temporary). Inside this context (``mallopt``: no mmap below 1 GiB, no trimming) the output
    of call n+1 reuses the pages of call n, so the timing shows the kernel alone - the
    figure comparable to the copy bandwidth, which is measured on pre-touched memory.
    """

    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, DEFAULT = -1, -3, 128 * 1024

    def __enter__(self):
        import ctypes

        try:
            self.libc = ctypes.CDLL(None)
            self.ok = bool(self.libc.mallopt(self.M_MMAP_THRESHOLD, 1 << 30)
                           and self.libc.mallopt(self.M_TRIM_THRESHOLD, 1 << 30))
        except (OSError, AttributeError):  # not glibc
            self.ok = False
        return self

    def __exit__(self, *exc):
        if self.ok:
            self.libc.mallopt(self.M_MMAP_THRESHOLD, self.DEFAULT)
            self.libc.mallopt(self.M_TRIM_THRESHOLD, self.DEFAULT)


def bytes_moved(args: list, result) -> int:
    outs = _as_tuple(result)
    return sum(a.nbytes for a in args) + sum(np.asarray(o).nbytes for o in outs)


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def run(args) -> str:
    from bandwidth import measure_bandwidth  # noqa: E402 - after the env is set

    bw_n = 2_000_000 if args.quick else 20_000_000
    bw = measure_bandwidth(bw_n, repeats=3 if args.quick else 10, threads=args.threads)
    bandwidth_gbs = max(bw["copy"], bw["triad"])
    impls, dynamo_problem = _dynamo_impls()
    impls += _optional_impls()
    footnotes: list[str] = [dynamo_problem] if dynamo_problem else []
    wanted = set(args.kernels.split(",")) if args.kernels else None
    kernels = [k for k in KERNELS if wanted is None or k.name in wanted]
    header = ["kernel", "dtype", "size", "NumPy ms"]
    for impl in impls:
        header += [f"{impl.name} ms", f"{impl.name} x"]
    header += ["C 1st call ms", "C % bw", "C warm ms", "C % bw warm"]
    rows = []
    for kernel in kernels:
        compiled: dict[str, Callable | None] = {}
        for impl in impls:
            try:
                compiled[impl.name] = impl.make(kernel)
            except Exception as exc:  # noqa: BLE001 - report and continue
                compiled[impl.name] = None
                footnotes.append(f"{impl.name} on {kernel.name}: {type(exc).__name__}: {exc}")
        sizes = QUICK_SIZES if args.quick else (kernel.sizes or DEFAULT_SIZES)
        for dtype in ("float64", "float32"):
            for n in sizes:
                rows.append(measure_row(kernel, dtype, n, impls, compiled, args, bandwidth_gbs,
                                        footnotes))
    lines = [f"Streaming bandwidth: copy {bw['copy']:.1f} GB/s, triad {bw['triad']:.1f} GB/s "
             f"({args.threads} thread(s)); 'x' = NumPy time / time (higher is better).", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if footnotes:
        lines += ["", "Notes:"] + [f"- {note}" for note in dict.fromkeys(footnotes)]
    return "\n".join(lines)


def measure_row(kernel, dtype, n, impls, compiled, args, bandwidth_gbs, footnotes) -> list[str]:
    inputs = kernel.inputs(np.dtype(dtype), n)
    size = "x".join(map(str, inputs[0].shape))
    expected = kernel.fn(*inputs)
    numpy_s = best_time(kernel.fn, inputs, args.repeats, args.budget)
    row = [kernel.name, dtype, size, fmt_ms(numpy_s)]
    first_call, c_seconds = "n/a", None
    for impl in impls:
        fn = compiled.get(impl.name)
        if fn is None:
            row += ["n/a", ""]
            continue
        try:
            t0 = time.perf_counter()
            got = fn(*inputs)  # first call: tracing / compiling happens here
            first = time.perf_counter() - t0
            ok = same_result(got, expected, dtype)
            seconds = best_time(fn, inputs, args.repeats, args.budget)
        except Exception as exc:  # noqa: BLE001 - one failing implementation must not stop the run
            footnotes.append(f"{impl.name} on {kernel.name} {dtype} {size}: "
                             f"{type(exc).__name__}: {str(exc)[:200]}")
            row += ["n/a", ""]
            continue
        row += [fmt_ms(seconds), f"{numpy_s / seconds:.2f}" + ("" if ok else " MISMATCH")]
        if impl.name == "C":
            first_call, c_seconds = fmt_ms(first), seconds
    percent, moved = "", bytes_moved(inputs, expected)
    warm_ms, warm_percent = "", ""
    if kernel.memory_bound and c_seconds:
        # A working set that fits in the caches measures the caches, not memory.
        percent = "(in cache)" if moved < IN_CACHE_BYTES else \
            f"{100 * moved / c_seconds / 1e9 / bandwidth_gbs:.0f}"
        with warm_allocations() as warm:
            if warm.ok:
                fn = compiled["C"]
                fn(*inputs)  # the pages of this output are reused by the timed calls
                warm_s = best_time(fn, inputs, args.repeats, args.budget)
                warm_ms = fmt_ms(warm_s)
                warm_percent = "(in cache)" if moved < IN_CACHE_BYTES else \
                    f"{100 * moved / warm_s / 1e9 / bandwidth_gbs:.0f}"
    return row + [first_call, percent, warm_ms, warm_percent]


SWEEP_SIZES = (1, 100, 4096, 16384, 65536, 262144, 1 << 20)


def sweep(args) -> str:
    """"No kernel slower than NumPy at any size": C / NumPy / eager at sizes 1..1M per kernel
    and dtype (a fresh compiled copy per size: guards specialise on shapes), worst first."""
    rows = []
    wanted = set(args.kernels.split(",")) if args.kernels else None
    import dynamo

    for kernel in KERNELS:
        if wanted is not None and kernel.name not in wanted:
            continue
        for dtype in ("float64", "float32"):
            for n in SWEEP_SIZES:
                inputs = kernel.inputs(np.dtype(dtype), n)
                c = dynamo.compile(fresh_copy(kernel.fn), backend="c")
                e = dynamo.compile(fresh_copy(kernel.fn), backend="eager")
                c(*inputs), e(*inputs)
                times = [best_time(f, inputs, 200, 0.3) for f in (kernel.fn, c, e)]
                rows.append((times[0] / times[1], kernel.name, dtype, n, *times))
    rows.sort()
    lines = ["| kernel | dtype | size | NumPy us | C us | eager us | C x |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {dt} | {n} | {tn * 1e6:.1f} | {tc * 1e6:.1f} | {te * 1e6:.1f} | {x:.2f} |"
              for x, name, dt, n, tn, tc, te in rows]
    return "\n".join(lines)


def dynamic_lengths(args) -> str:
    """chain10 (float64) called with 20 lengths on the C backend (dynamic shapes): how many
    graphs were compiled, the per-call time at one length against a static compile, and the
    extra cost of the first call at a new length (no gcc: the symbolic kernel is reused)."""
    import dynamo
    from dynamo.backends.c import make_backend

    graphs = []
    inner = make_backend()

    def counting(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    dyn = dynamo.compile(fresh_copy(chain10), backend=counting)
    static = dynamo.compile(fresh_copy(chain10), backend="c", dynamic=False)
    lengths = range(100_000, 120_000, 1_000)
    new_length_s, numpy_new_s = [], []
    for n in lengths:
        x, y = _rand((n,), np.float64, 1), _rand((n,), np.float64, 2)
        for fn, out in ((dyn, new_length_s), (chain10, numpy_new_s)):
            t0 = time.perf_counter()
            fn(x, y)
            t1 = time.perf_counter()
            fn(x, y)
            t2 = time.perf_counter()
            if n >= lengths[2]:  # after the static and the dynamic compile
                out.append((t1 - t0) - (t2 - t1))
    x, y = _rand((lengths[-1],), np.float64, 1), _rand((lengths[-1],), np.float64, 2)
    static(x, y)
    t_np, t_static, t_dyn = (best_time(f, [x, y], args.repeats * 20, args.budget)
                             for f in (chain10, static, dyn))
    new_length_s.sort()
    numpy_new_s.sort()
    return "\n".join([
        f"chain10 float64 at {len(lengths)} lengths ({lengths[0]}..{lengths[-1]}): "
        f"{len(graphs)} graph(s) compiled",
        f"per call at n={lengths[-1]}: NumPy {t_np * 1e6:.1f} us, C static {t_static * 1e6:.1f} us,"
        f" C dynamic {t_dyn * 1e6:.1f} us",
        f"first call at a new length: +{new_length_s[len(new_length_s) // 2] * 1e6:.1f} us "
        f"(median; no build; NumPy's own first call at a new length: "
        f"+{numpy_new_s[len(numpy_new_s) // 2] * 1e6:.1f} us, fresh memory)"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--threads", type=int, default=1, help="threads for C kernels and BLAS")
    parser.add_argument("--kernels", default="", help="comma-separated subset, e.g. chain10")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per cell (best)")
    parser.add_argument("--sweep", action="store_true",
                        help="C vs NumPy vs eager at sizes 1..1M, worst ratio first")
    parser.add_argument("--dynamic", action="store_true",
                        help="C backend at 20 lengths (dynamic shapes): compiles, new-length cost")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 10)
    args.budget = 0.2 if args.quick else 2.0  # seconds per cell before stopping early
    # Thread counts must be fixed before NumPy (BLAS) and dynamo read them.
    for var in ("DYNAMO_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    global np
    import numpy as np  # noqa: F811 - deliberately late, see above

    if args.dynamic:
        print(dynamic_lengths(args))
        return
    print(sweep(args) if args.sweep else run(args))


np: Any = None

if __name__ == "__main__":
    main()
