"""benchmarks/bench_memory.py: a long compiled graph needs no more memory than plain NumPy.

In: the benchmark's kernels at a small size (each measured in its own process). Out: pass/fail:
the table is printed, and the eager and C peaks (tracemalloc) are not above NumPy's by more than
5% plus one array (issue 11: a graph must free each value after its last use, as NumPy does).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_memory.py"


def test_compiled_peak_is_not_above_numpy():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--n", "20000", "--steps", "20"],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0][2:] for r in rows] == ["relax", "named_temporaries",
                                                     "stencil_steps"]
    assert "Compiled peak not above NumPy's: yes" in proc.stdout, proc.stdout


def test_unknown_kernel_is_named():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--kernels", "relax,nope"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown kernel(s) nope; choose from relax" in proc.stderr
