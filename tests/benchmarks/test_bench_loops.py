"""benchmarks/bench_loops.py: every loop program gives plain Python's result when compiled, and
the script runs.

In: the programs at tiny sizes. Out: pass/fail. Each program runs plainly (the oracle) and
compiled with the eager backend and with the C backend forced to build kernels even for these
tiny arrays (``min_size=0, calibrate=False``, as in test_suite_kernels.py), first call and
cached call; the results must be plain's exactly (`bench_loops.exact`: type, dtype, shape,
values). No timing is asserted. Then a quick run of the script on one cheap program: the table
is printed with ratios, and a wrong result would be flagged.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from support.oracle import make_backend

import dynamo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_loops  # noqa: E402
import run_suite  # noqa: E402

#: Tiny sizes for the programs written in bench_loops.py (the loop_kernels ones: their `small`).
TINY = {"recurrence": 16, "crc32": 8, "forward_substitution": 6, "points_in_circle": 32,
        "newton_sqrt": 8, "stencil_1d": 8}


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("program", bench_loops.PROGRAMS,
                         ids=[p.name for p in bench_loops.PROGRAMS])
def test_program_matches_plain(program, backend):
    n = TINY.get(program.name, program.small)
    want = program.fn(*program.make(n))
    counting = make_backend(backend)
    compiled = dynamo.compile(run_suite.fresh_copy(program.fn), backend=counting)
    for attempt in ("first call", "cached call"):
        got = compiled(*program.make(n))
        assert bench_loops.exact(got, want), f"{program.name} {backend} {attempt}: {got!r}"


def test_the_programs_compute_what_they_say():
    data = np.arange(300, dtype=np.int64) % 256
    assert bench_loops.crc32(data) == zlib.crc32(bytes(data.astype(np.uint8)))
    a = np.array([0.01, 2.0, 1e3])
    np.testing.assert_allclose(bench_loops.newton_sqrt(a), np.sqrt(a), rtol=1e-12)
    assert bench_loops.points_in_circle(np.array([0.0, 1.0, 0.8]), np.array([0.0, 0.5, 0.6])) == 2
    L, b = np.tril(np.ones((4, 4))) + np.eye(4), np.arange(4.0)
    np.testing.assert_allclose(L @ bench_loops.forward_substitution(L, b), b)
    assert {p.name for p in bench_loops.PROGRAMS} >= set(TINY) | {"cholesky", "lu", "trisolv"}


def test_exact_tells_type_dtype_and_values_apart():
    a = np.arange(3.0)
    assert bench_loops.exact(a, a.copy()) and bench_loops.exact(3, 3)
    assert bench_loops.exact(float("nan"), float("nan"))
    assert not bench_loops.exact(np.int64(3), 3)
    assert not bench_loops.exact(a.astype(np.float32), a)
    assert not bench_loops.exact(a + 1e-15, a)
    assert not bench_loops.exact(a[:2], a)


def test_quick_run_prints_the_table(capsys):
    text = bench_loops.main(["--quick", "--only", "crc32", "--markdown"])
    assert capsys.readouterr().out.strip() == text.strip()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| program | size | plain µs | eager x | C x | numba x |")
    assert rows[1].startswith("| crc32 | 512 |") and rows[2].startswith("| geometric mean |")
    assert "WRONG" not in text and "ERROR" not in text
    # (the first call in a new process, from the disk cache this run filled: a time)
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cells = [c.strip() for c in rows[1].strip("|").split("|")]
    assert float(cells[header.index("C disk 1st ms")]) > 0


def test_unknown_program_is_named():
    with pytest.raises(SystemExit, match="unknown program.*nope; choose from: recurrence, crc32"):
        bench_loops.select("crc32,nope")
