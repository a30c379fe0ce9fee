"""Large dead values are freed the way a NumPy loop frees them (issue 11, nbody).

In: the suite's nbody kernel (an unrolled time loop whose 720 KB temporaries are rebuilt every
step), compiled with the eager and the C backend. Out: pass/fail on the mechanism, not on a
timing: in the generated code every large dead value is deleted right after the statement that
allocates its successor of the same size, one at a time (`fx.python_code.paced_frees`), and
the C backend does not fuse large values NumPy would hold one after the other into one
multi-output kernel (`fusion.plan_fusion`, rule 3). Deleting several at once hands the top of
glibc's heap back to the OS and every later step faults its pages in again: the last test counts
minor page faults per call in fresh processes against the NumPy loop's.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dynamo
from dynamo.backends.c import make_backend

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from suite.particles import _nbody_inputs, nbody  # noqa: E402

#: nbody at n=100: every n x n float64 temporary is 80 KB (above fx's PACE_MIN_BYTES)
N = 100
LARGE = re.compile(r"^(dx|dy|dz|inv_r3|mul|add)(_\d+)?$")


def _large_names(line: str) -> list[str]:
    return [name for name in line.strip()[4:].split(", ") if LARGE.match(name)]


def _dels(code: str) -> list[str]:
    return [line for line in code.splitlines() if line.strip().startswith("del ")]


def test_eager_graph_frees_each_large_value_after_its_successor_is_allocated():
    codes = []
    eager = dynamo.lookup_backend("eager")

    def capture(gm, example_inputs):
        codes.append(gm.code)
        return eager(gm, example_inputs)

    fn = dynamo.compile(nbody, backend=capture)
    fn(*_nbody_inputs(N))
    (code,) = codes
    lines = code.splitlines()
    for line in _dels(code):
        assert len(_large_names(line)) <= 1, line
    # The first step's dx lives until the second step's dx is allocated, as in the NumPy loop.
    made = next(i for i, line in enumerate(lines) if line.strip().startswith("dx_1 = "))
    freed = next(i for i, line in enumerate(lines)
                 if line.strip().startswith("del ") and "dx" in line.strip()[4:].split(", "))
    assert freed == made + 1, code


def test_c_program_keeps_one_large_product_at_a_time():
    captured = []
    inner = make_backend(calibrate=False)

    def capture(gm, example_inputs):
        compiled = inner(gm, example_inputs)
        captured.append(compiled.program_code)
        return compiled

    dynamo.compile(nbody, backend=capture)(*_nbody_inputs(N))
    (code,) = captured
    # The three `d * inv_r3` for the three `@ mass` are three kernels, each read by its matmul
    # before the next is computed (one multi-output kernel held all three at once).
    calls = [line.split(" = ")[0].strip() for line in code.splitlines()
             if re.search(r" = dyn_k\d+\(", line)]
    assert len(calls) >= 4 * 3, code
    for outputs in calls:
        assert len(_large_names("del " + outputs)) <= 1, code
    for line in _dels(code):
        assert len(_large_names(line)) <= 1, line


FAULTS = """
import resource, sys
sys.path.insert(0, {bench!r})
import dynamo
from dynamo.backends.c import make_backend
from suite.particles import _nbody_inputs, nbody
which = {which!r}
fn = {{"numpy": lambda: nbody, "eager": lambda: dynamo.compile(nbody, backend="eager"),
       "c": lambda: dynamo.compile(nbody, backend=make_backend(calibrate=False))}}[which]()
args = _nbody_inputs(300)
fn(*args); fn(*args)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    fn(*args)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc",
                    reason="counts glibc malloc's page faults")
def test_nbody_faults_no_more_pages_per_call_than_numpy():
    faults = {}
    for which in ("numpy", "eager", "c"):
        proc = subprocess.run([sys.executable, "-c", FAULTS.format(bench=str(BENCH), which=which)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        faults[which] = float(proc.stdout.split()[-1])
    # (NumPy's loop: ~1,000 per call; deleting large values several at a time: 3,000-4,000)
    for which in ("eager", "c"):
        assert faults[which] <= 1.25 * faults["numpy"] + 100, faults


def test_numpy_temporary_read_by_a_kernel_step_is_freed_right_after_it():
    """``np.less(abs(z), 2.0)`` with complex ``z``: ``abs`` stays a NumPy call and the ``less``
    becomes a kernel, so the program names the 320 KB ``abs`` temporary. The eager code nests
    it (NumPy frees it right after the ``less``); the program must free it right after the
    kernel step too, not keep it until the next array of its size (the Mandelbrot step ran at
    0.7x NumPy that way)."""
    import numpy as np

    def step(z, c, n):
        for k in range(3):
            i = np.less(abs(z), 2.0)
            n[i] = k
            z[i] = z[i] ** 2 + c[i]
        return z, n

    x = np.linspace(-2.0, 0.5, 200)
    c = x + x[:, None] * 1j
    programs = []
    c_backend = make_backend(min_size=0, calibrate=False)

    def capture(gm, example_inputs):
        compiled = c_backend(gm, example_inputs)
        programs.append(compiled.program_code)
        return compiled

    fn = dynamo.compile(step, backend=capture)
    fn(np.zeros_like(c), c, np.zeros(c.shape, np.int64))
    (code,) = programs
    lines = [line.strip() for line in code[code.index("def forward"):].splitlines()]
    kernel = next(i for i, line in enumerate(lines) if re.match(r"i = dyn_k\d+\(abs\)", line))
    assert lines[kernel + 1] == "del abs", "\n".join(lines[kernel - 2: kernel + 6])
