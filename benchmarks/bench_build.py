"""Time the C backend's build layer: cold compile of a 30-op kernel and warm load from disk cache.

In: nothing (options: --repeats). Out: a small table on stdout. Every measurement runs in a fresh
Python process (NumPy and the build module imported before the clock starts, so interpreter start
and NumPy import are excluded, as the issue's target says), timing one `build_library` call:

* cold, empty cache directory: includes the one-time compiler probes (``--version``, OpenMP);
* cold, new kernel: probes cached, gcc compiles the kernel;
* warm: a new process loads the same kernel from the disk cache (no compiler run).

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
    print("| case | build_library median ms | min ms | module import ms | from_cache |")
    print("|---|---|---|---|---|")
    for case, results in runs.items():
        builds = [r["build"] * 1e3 for r in results]
        imports = statistics.median(r["module_import"] * 1e3 for r in results)
        cached = {r["from_cache"] for r in results}
        print(f"| {case} | {statistics.median(builds):.1f} | {min(builds):.1f} | "
              f"{imports:.1f} | {'/'.join(map(str, sorted(cached)))} |")


if __name__ == "__main__":
    main()
