"""Calibration: is a kernel faster than its own NumPy path, and with how many threads?

In: a kernel runner (`kernel.PointwiseRunner` / `ReductionRunner`, or a `small.SmallRunner`),
the arguments of one call and the kernel's NumPy path. Out: the verdict (`calibrate`: True when
the kernel runs), with the chosen thread count and the timings set on the runner, and stored
next to the kernel library's disk-cache entry (`cache.record_verdict`) so that a new process
reuses it without timing. Called on a kernel's first call by its program step
(``dynamo.backends.c._kernel_step``) and by the whole-graph call of a one-kernel graph
(`small._WholeGraph.decide`). Tests replace `timed` to inject timings (and `calibrate` to
force a verdict): callers look both up on this module at call time.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from fx.weak import IdentityMap

from .cache import read_verdicts, record_verdict

__all__ = ["calibrate", "numpy_quiet", "timed"]

#: Calibration: at most this many timed rounds (NumPy path, then the kernel at each candidate
#: thread count) after the first kernel call, and stop once this much time was spent (after at
#: least `_MIN_ROUNDS`).
_MAX_ROUNDS, _MIN_ROUNDS, _BUDGET_S = 5, 2, 0.05


def timed(candidate: Any, fn: Callable[..., Any], *args: Any) -> float:
    """Seconds one run of ``fn(*args)`` took. ``candidate`` ("numpy" or a thread count) names
    what runs: tests replace this function to inject timings."""
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def numpy_quiet(numpy_path: Callable[..., Any], args: tuple) -> None:
    with np.errstate(all="ignore"):
        numpy_path(*args)


#: Calibration verdicts read from (and written next to) each library's disk-cache entry, per
#: loaded `Library`: {verdict key: verdict dict}.
_verdicts: "IdentityMap[Any, dict]" = IdentityMap()  # (weak keys, by identity: fx.weak)
_verdicts_lock = threading.Lock()


def _stored_verdicts(library: Any) -> dict | None:
    entry = getattr(library, "entry_dir", None)
    if entry is None:
        return None
    with _verdicts_lock:
        found = _verdicts.get(library)
        if found is None:
            found = _verdicts[library] = read_verdicts(entry)
        return found


def calibrate(runner: Any, args: tuple, numpy_path: Callable[..., Any],
              shape: tuple[int, ...] | None = None) -> bool:
    """Is the kernel at least as fast as its NumPy path, and with how many threads?

    Sets ``runner.threads`` (the faster of ``threads`` and 1 when the call would run in
    parallel: a kernel never loses to its own single-threaded run) and ``runner.calibration``
    (best kernel seconds at that count, best NumPy seconds); returns whether the kernel runs.

    A verdict stored with the library's disk-cache entry for this kernel, layout and thread
    option (by an earlier process) is reused without timing. Otherwise the first kernel call
    pays one-off costs (code pages of the fresh library, libmvec) and the machine may be
    shared, so one timing of each is not a verdict: rounds of (NumPy, kernel per thread count)
    alternate until `_MIN_ROUNDS` are done and `_BUDGET_S` is spent (or `_MAX_ROUNDS`), and
    the minima are compared; the verdict is then stored. Every timed run's results are
    discarded (the NumPy runs under errstate 'ignore'): the caller computes the result the user
    sees with the chosen path, so it does not depend on whether this was the first call.
    """
    inputs = args[:len(runner.in_dtypes)]
    key = runner.verdict_key(inputs, shape)
    store = _stored_verdicts(getattr(runner, "library", None)) if key is not None else None
    stored = store.get(key) if store is not None else None
    if stored is not None and stored["threads"] in (1, runner.options.threads):
        runner.threads = stored["threads"]
        runner.calibration = (stored["kernel_s"], stored["numpy_s"])
        runner.calibration_from = "disk cache"
        return stored["use_kernel"]
    candidates = [runner.options.threads]
    if runner.options.threads > 1 and runner.parallel_for(shape):
        candidates.append(1)
    best = dict.fromkeys(candidates, float("inf"))
    numpy_best, spent = float("inf"), 0.0
    for rnd in range(_MAX_ROUNDS):
        t = timed("numpy", numpy_quiet, numpy_path, args)
        numpy_best, spent = min(numpy_best, t), spent + t
        for threads in candidates:
            t = timed(threads, runner, inputs, shape, threads)
            best[threads], spent = min(best[threads], t), spent + t
        if rnd + 1 >= _MIN_ROUNDS and spent > _BUDGET_S:
            break
    threads = min(candidates, key=lambda n: (best[n], n))  # a tie goes to fewer threads
    verdict = best[threads] <= numpy_best
    runner.threads = threads
    runner.calibration = (best[threads], numpy_best)
    runner.thread_timings = best
    runner.calibration_from = "measured"
    if store is not None:
        record = {"use_kernel": verdict, "threads": threads, "kernel_s": best[threads],
                  "numpy_s": numpy_best}
        store[key] = record
        record_verdict(runner.library.entry_dir, key, record)
    return verdict
