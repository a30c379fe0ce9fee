"""Peak memory of a long compiled graph against plain NumPy's (issue 11).

In: command-line options. Out: a Markdown table on stdout: for each long kernel (a time loop the
translator unrolls into one graph of hundreds of nodes), the peak memory of one steady-state call
(after the compiling call) in plain NumPy, with the eager backend and with the C backend, as
traced by `tracemalloc` (NumPy reports its array data to it) and as the growth of the process's
peak resident set (VmHWM, reset through /proc/self/clear_refs; memory a C kernel mallocs itself
shows only here), with the ratio to NumPy and ``HIGHER`` where a compiled peak exceeds NumPy's
by more than 5% plus one array. Each measurement runs in a fresh process, so that one's freed
memory does not serve the next.

Plain NumPy frees a value as soon as its name is rebound (``x = x * a + y`` in a loop keeps two
or three arrays alive); a graph that keeps every intermediate until it returns needs one array per
node instead.

    .venv/bin/python benchmarks/bench_memory.py              # 1M float64 (8 MB per array)
    .venv/bin/python benchmarks/bench_memory.py --n 100000 --steps 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `dynamo` from this checkout


def relax(x, y, steps):
    """A long elementwise chain: each step rebinds x (NumPy frees the old one)."""
    for _ in range(steps):
        x = x * 0.999 + y
    return x


def named_temporaries(x, y, steps):
    """Named temporaries per step, rebound every iteration, with a reduction at the end."""
    for _ in range(steps):
        a = np.sqrt(x * x + 1.0)
        b = a * y - x
        x = b / (a + 2.0)
    return x, x.sum()


def stencil_steps(u, steps):
    """Jacobi time loop on a 1-D grid (slices, writes into a buffer)."""
    u = u.copy()
    v = np.zeros_like(u)
    for _ in range(steps):
        v[1:-1] = 0.5 * u[1:-1] + 0.25 * (u[:-2] + u[2:])
        u[1:-1] = 0.5 * v[1:-1] + 0.25 * (v[:-2] + v[2:])
    return u


KERNELS = {"relax": relax, "named_temporaries": named_temporaries, "stencil_steps": stencil_steps}
np = None  # imported in the measuring process only


def _inputs(name: str, n: int, steps: int) -> tuple:
    rng = np.random.default_rng(0)
    if name == "stencil_steps":
        return rng.random(n), steps
    return rng.random(n), rng.random(n), steps


def _vm_hwm() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def measure_one(kind: str, name: str, n: int, steps: int) -> dict:
    """In this process: peak bytes of one steady-state call of `name` run as `kind`."""
    global np
    import numpy

    np = numpy
    fn = KERNELS[name]
    if kind != "numpy":
        import dynamo

        fn = dynamo.compile(fn, backend=kind)
    args = _inputs(name, n, steps)
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(*args)  # compiles (and calibrates) on the compiled kinds
        fn(*args)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        rss_base, can_reset = _vm_hwm(), _reset_hwm()
        rss_base = _vm_hwm() if can_reset else None
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - base
        rss_peak = _vm_hwm()
    del result
    tracemalloc.stop()
    return {"traced": peak,
            "rss": (rss_peak - rss_base) if (rss_base is not None and rss_peak) else None}


def run(args) -> str:
    array_bytes = args.n * 8
    lines = [(f"Peak memory of one steady-state call, float64 arrays of {args.n} elements "
              f"({array_bytes / 2**20:.1f} MiB each), {args.steps} steps; traced = tracemalloc "
              "peak, RSS = growth of the peak resident set."), "",
             ("| kernel | NumPy traced MiB | eager traced MiB | eager x | C traced MiB | C x | "
              "NumPy RSS MiB | eager RSS MiB | C RSS MiB | verdict |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    worst = []
    for name in args.kernels.split(","):
        res = {}
        for kind in ("numpy", "eager", "c"):
            proc = subprocess.run(
                [sys.executable, __file__, "--measure", kind, "--kernels", name,
                 "--n", str(args.n), "--steps", str(args.steps)],
                check=False, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise SystemExit(f"measuring {name} as {kind} failed:\n{proc.stderr[-2000:]}")
            res[kind] = json.loads(proc.stdout.strip().splitlines()[-1])

        def mib(v):
            return "n/a" if v is None else f"{v / 2**20:.1f}"
        base = res["numpy"]["traced"]
        higher = [kind for kind in ("eager", "c")
                  if res[kind]["traced"] > 1.05 * base + array_bytes]
        worst.extend(f"{name} ({kind})" for kind in higher)
        lines.append(
            f"| {name} | {mib(base)} | {mib(res['eager']['traced'])} | "
            f"{res['eager']['traced'] / base:.2f} | {mib(res['c']['traced'])} | "
            f"{res['c']['traced'] / base:.2f} | {mib(res['numpy']['rss'])} | "
            f"{mib(res['eager']['rss'])} | {mib(res['c']['rss'])} | "
            f"{'HIGHER: ' + ', '.join(higher) if higher else 'ok'} |")
    lines += ["", "Compiled peak not above NumPy's: " + ("yes" if not worst else
                                                         "NO (" + ", ".join(worst) + ")")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="elements per array")
    parser.add_argument("--steps", type=int, default=40, help="time steps (graph length)")
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset")
    parser.add_argument("--measure", default="", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args(argv)
    unknown = [k for k in args.kernels.split(",") if k not in KERNELS]
    if unknown:
        raise SystemExit(f"unknown kernel(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(KERNELS)}")
    if args.measure:
        print(json.dumps(measure_one(args.measure, args.kernels, args.n, args.steps)))
        return
    print(run(args))


if __name__ == "__main__":
    main()
