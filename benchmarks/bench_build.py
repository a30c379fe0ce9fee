"""Time the C backend's build layer: cold compile of a 30-op kernel and warm load from disk cache.

In: nothing (options: --repeats). Out: a small table on stdout. Every measurement runs in a fresh
Python process (NumPy and the build module imported before the clock starts, so interpreter start
and NumPy import are excluded, as the issue's target says), timing one `build_library` call:

* cold, empty cache directory: includes the one-time compiler probes (``--version``, OpenMP);
* cold, new kernel: probes cached, gcc compiles the kernel;
* warm: a new process loads the same kernel from the disk cache (no compiler run).

A second table times the whole backend (``compile_graph``: passes, fusion, codegen, build or
disk-cache load) on a 30-op NumPy function in new processes, cold and warm; the backend's
one-time module import is shown separately. (With ``PYTHONDONTWRITEBYTECODE=1`` every import
recompiles its source: imports then look several times slower than in a normal install.)
Targets (issue 3): cold ≤ 0.5 s, warm ≤ 20 ms.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_build.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy
t1 = time.perf_counter()
from dynamo.backends.c.build import build_library
t2 = time.perf_counter()
lib = build_library(open(sys.argv[1]).read(), open(sys.argv[2]).read())
t3 = time.perf_counter()
print(json.dumps({"numpy_import": t1 - t0, "module_import": t2 - t1, "build": t3 - t2,
                  "from_cache": lib.from_cache}))
"""

# End to end: a 30-op NumPy function compiled with backend="c" in a new process; the time of
# the backend's compile_graph (passes, fusion, codegen, build/disk-cache load) is reported.
GRAPH_CHILD = r"""
import json, sys, time
import numpy as np
import dynamo
t0 = time.perf_counter()
import dynamo.backends.c as cb
t1 = time.perf_counter()
def f30(x, y):
    a = x * y
    for _ in range(5):
        a = a + 1.5; a = np.exp(a * float(sys.argv[1])); a = a - y
        a = np.sqrt(np.abs(a)); a = np.tanh(a)
    return a
T = {}
def timed(gm, example_inputs):
    t = time.perf_counter()
    fn = cb.compile_graph(gm, example_inputs)
    T["compile"] = time.perf_counter() - t
    T["from_cache"] = fn.fusion_report.build_note.startswith("loaded from disk cache")
    return fn
dynamo.register_backend("c_timed")(timed)
x, y = np.random.rand(100_000), np.random.rand(100_000)
t2 = time.perf_counter()
dynamo.compile(f30, backend="c_timed")(x, y)
T["first_call"] = time.perf_counter() - t2
T["module_import"] = t1 - t0
print(json.dumps(T))
"""
_STEPS = ("a * b", "a + 1.5", "exp(a)", "a - b", "sqrt(fabs(a))", "tanh(a)")


def kernel_30_ops(tag: str) -> tuple[str, str]:
    """A pointwise kernel of 30 operations in the style of the generated code."""
    body = "\n".join(f"        a = {_STEPS[j % len(_STEPS)]};" for j in range(30))
    source = f"""/* bench_build {tag} */
#include <math.h>
#include <stdint.h>
void kernel0(const double *restrict x, const double *restrict y, double *restrict out,
             int64_t n, int threads) {{
#pragma omp parallel for simd num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t i = 0; i < n; i++) {{
        double a = x[i], b = y[i];
{body}
        out[i] = a;
    }}
}}
"""
    return source, "void kernel0(const double *x, const double *y, double *out, int64_t n, " \
                   "int threads);"


def child(cache_dir: Path, src: Path, cdef: Path) -> dict:
    env = dict(os.environ, DYNAMO_CACHE_DIR=str(cache_dir), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", CHILD, str(src), str(cdef)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def print_table(what: str, import_what: str, runs: dict, key: str) -> None:
    """One Markdown table: per case, median/min of `key` (ms), median import time, cache hit."""
    print(f"| case | {what} median ms | min ms | {import_what} ms | from_cache |")
    print("|---|---|---|---|---|")
    for case, results in runs.items():
        times = [r[key] * 1e3 for r in results]
        imports = statistics.median(r["module_import"] * 1e3 for r in results)
        cached = {r["from_cache"] for r in results}
        print(f"| {case} | {statistics.median(times):.1f} | {min(times):.1f} | {imports:.1f} | "
              f"{'/'.join(map(str, sorted(cached)))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"cold, empty cache dir": [], "cold, new kernel": [],
                                   "warm, new process": []}
    with tempfile.TemporaryDirectory(prefix="npdynamo-bench-build-") as tmp:
        for i in range(args.repeats):
            source, cdef = kernel_30_ops(uuid.uuid4().hex)
            src, cdef_path = Path(tmp, f"k{i}.c"), Path(tmp, f"k{i}.cdef")
            src.write_text(source)
            cdef_path.write_text(cdef)
            runs["cold, empty cache dir"].append(child(Path(tmp, f"empty{i}"), src, cdef_path))
            source2, _ = kernel_30_ops(uuid.uuid4().hex)
            src.write_text(source2)
            runs["cold, new kernel"].append(child(Path(tmp, f"empty{i}"), src, cdef_path))
            runs["warm, new process"].append(child(Path(tmp, f"empty{i}"), src, cdef_path))
        graph_runs: dict[str, list[dict]] = {"graph cold (new kernel)": [],
                                             "graph warm, new process": []}
        for i in range(args.repeats):
            env = dict(os.environ, DYNAMO_CACHE_DIR=str(Path(tmp, f"empty{i}")),
                       PYTHONPATH=str(REPO))
            scale = repr(0.001 + i * 1e-9)  # a new constant: a new kernel source
            for case in graph_runs:
                out = subprocess.run([sys.executable, "-c", GRAPH_CHILD, scale], env=env,
                                     capture_output=True, text=True, check=True)
                graph_runs[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print_table("compile_graph", "backend import", graph_runs, "compile")
    print()
    print_table("build_library", "module import", runs, "build")


if __name__ == "__main__":
    main()
