"""Calibration verdicts: stored with the kernel, and the thread count chosen by measurement
(issue 11: slow first calls; threads).

* A kernel's verdict (C or NumPy, and how many threads) is written next to the kernel in its
  disk-cache entry (``verdicts.json``); a new process loading the kernel from the cache reuses
  it without timing anything.
* With ``threads > 1``, calibration also times the kernel on one thread when the call would run
  in parallel, and keeps one thread when that is not slower: a kernel never loses to its own
  single-threaded run. Timings are injected (`calibration.timed`), so the choice is deterministic.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynamo.backends.c as cbackend
from dynamo.backends.c import cache, calibration

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A fresh disk cache: no verdict of an earlier run can answer for the kernel."""
    root = tmp_path / "cache"
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(root))
    return root


def make_fn(c):
    """A kernel, then a NumPy call (the graph runs as a program of steps). Each test uses its
    own constant ``c``: a library (and the verdicts read with it) stays loaded while a
    function compiled by an earlier test is alive."""
    return lambda a, b: np.cumsum(np.sin(a) * b + c)


def inputs(n=50_000):
    return np.linspace(0.0, 1.0, n), np.linspace(1.0, 2.0, n)


def compile_fn(c, **options):
    from support.c_graphs import trace

    args = inputs()
    gm = trace(make_fn(c), args)
    return gm, cbackend.compile_graph(gm, args, min_size=1, **options)


def inject(monkeypatch, timings):
    """Replace the calibration clock: each candidate runs, and takes ``timings[candidate]``."""
    seen = []

    def fake(candidate, run, *args):
        run(*args)
        seen.append(candidate)
        return timings[candidate]

    monkeypatch.setattr(calibration, "timed", fake)
    return seen


def general_runner(runner):
    return getattr(runner, "base", runner)  # (a one-call wrapper keeps the general runner)


@pytest.mark.parametrize("c, timings, threads, use_kernel", [
    (1.5, {"numpy": 1.0, 2: 0.5, 1: 0.3}, 1, True),    # 2 threads slower than 1: one thread
    (2.5, {"numpy": 1.0, 2: 0.3, 1: 0.5}, 2, True),    # 2 threads pay
    (3.5, {"numpy": 1.0, 2: 0.4, 1: 0.4}, 1, True),    # a tie: fewer threads
    (4.5, {"numpy": 0.2, 2: 0.5, 1: 0.3}, 1, False),   # NumPy wins over both
])
def test_thread_count_is_chosen_by_measurement(monkeypatch, private_cache, c, timings, threads,
                                               use_kernel):
    seen = inject(monkeypatch, timings)
    gm, f = compile_fn(c, threads=2, parallel_threshold=1, calibrate=True)
    (runner,) = f.runners.values()
    a, b = inputs()
    assert np.array_equal(f(a, b), gm.forward(a, b)) or use_kernel  # NumPy path: same bits
    np.testing.assert_allclose(f(a, b), gm.forward(a, b), rtol=1e-13)
    assert set(seen) == {"numpy", 1, 2}
    assert runner.use_kernel is use_kernel and runner.threads == threads
    assert runner.calibration == (timings[threads], timings["numpy"])
    if use_kernel:
        # Later calls launch the kernel with the chosen count (the layout plan's block).
        base = general_runner(runner)
        base([a, b])
        blocks = [plan[0] for key, plan in base.plans.items() if plan and key[0] == threads]
        assert blocks and all(block[0] == threads for block in blocks)
        assert blocks[0][1] == int(threads > 1)  # the parallel loop only with 2 threads


def test_one_thread_is_not_timed_when_the_call_would_not_run_in_parallel(monkeypatch,
                                                                          private_cache):
    seen = inject(monkeypatch, {"numpy": 1.0, 2: 0.5, 1: 0.3})
    _, f = compile_fn(5.5, threads=2, parallel_threshold=1 << 30, calibrate=True)
    (runner,) = f.runners.values()
    f(*inputs())
    assert set(seen) == {"numpy", 2} and runner.threads == 2 and runner.use_kernel is True


def test_verdict_is_stored_next_to_the_kernel(monkeypatch, private_cache):
    inject(monkeypatch, {"numpy": 1.0, 2: 0.5, 1: 0.25})
    _, f = compile_fn(6.5, threads=2, parallel_threshold=1, calibrate=True)
    (runner,) = f.runners.values()
    f(*inputs())
    entry = runner.library.entry_dir
    assert entry.parent.parent == private_cache / "kernels"
    stored = cache.read_verdicts(entry)
    assert list(stored.values()) == [{"use_kernel": True, "threads": 1, "kernel_s": 0.25,
                                      "numpy_s": 1.0}]
    # A second compile of the same graph in this process measures nothing either.
    monkeypatch.setattr(calibration, "timed", lambda *a: pytest.fail("timed again"))
    gm2, f2 = compile_fn(6.5, threads=2, parallel_threshold=1, calibrate=True)
    (runner2,) = f2.runners.values()
    np.testing.assert_allclose(f2(*inputs()), gm2.forward(*inputs()), rtol=1e-13)
    assert (runner2.use_kernel, runner2.threads, runner2.calibration_from) == \
        (True, 1, "disk cache")


SCRIPT = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    import dynamo
    from dynamo.backends.c import calibration
    from dynamo.backends.c import compile_graph

    def fresh_process_must_not_time(*args):
        raise AssertionError("calibration timed a kernel")

    if {reuse}:
        calibration.timed = fresh_process_must_not_time
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(compile_graph(gm, example_inputs))
        return compiled[-1]

    def f(x, y):
        a = x
        for i in range(10):
            a = np.sin(a) * y + 0.5
        return np.cumsum(a)

    x, y = np.linspace(0, 1, 100_000), np.linspace(1, 2, 100_000)
    g = dynamo.compile(f, backend=backend)
    t1 = time.perf_counter()
    result = g(x, y)
    t2 = time.perf_counter()
    (program,) = compiled
    sources = sorted({{r.calibration_from for r in program.runners.values()}})
    print(sources, result.tobytes().hex()[:64], f"first call {{(t2 - t1) * 1e3:.1f}} ms",
          sep="|")
""")


def test_a_new_process_reuses_the_stored_verdict(private_cache):
    outputs = []
    for reuse in (False, True):
        proc = subprocess.run([sys.executable, "-c", SCRIPT.format(reuse=reuse)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout.strip().split("|"))
    first, second = outputs
    assert first[0] == "['measured']" and second[0] == "['disk cache']", (first, second)
    assert first[1] == second[1]  # the same path, the same bits


def test_verdict_file_round_trip_and_bad_files(tmp_path):
    good = {"use_kernel": False, "threads": 1, "kernel_s": 2.0, "numpy_s": 1.0}
    assert cache.read_verdicts(tmp_path) == {}
    cache.record_verdict(tmp_path, "k", good)
    assert cache.read_verdicts(tmp_path) == {"k": good}
    with pytest.raises(ValueError, match="not a calibration verdict"):
        cache.record_verdict(tmp_path, "k", {"use_kernel": "yes"})
    path = tmp_path / cache.VERDICTS_NAME
    data = json.loads(path.read_text())
    data["verdicts"]["bad"] = {"use_kernel": 1, "threads": 0}
    path.write_text(json.dumps(data))
    assert cache.read_verdicts(tmp_path) == {"k": good}  # invalid records are dropped
    path.write_text("{not json")
    assert cache.read_verdicts(tmp_path) == {}
    for i in range(cache.MAX_VERDICTS + 3):
        cache.record_verdict(tmp_path, f"k{i}", good)
    kept = cache.read_verdicts(tmp_path)
    assert len(kept) == cache.MAX_VERDICTS and "k0" not in kept and f"k{i}" in kept
