"""The oracle for the program corpus: a program compiled by npdynamo must behave like plain NumPy.

In: a corpus `Program`, one of its `Case`s and a backend name ("eager" or "c"). Out:
`check_program` raises AssertionError on any difference, else returns an `Outcome` (graphs
captured by the first compiled call, compile time). Called by `test_corpus.py` and `report.py`.

Compared by tests/support/oracle.py (shared with tests/fuzz/test_control_flow_property.py):
results (exact type, dtype, shape, strides, bits), view-vs-copy relations to the arguments, the
arguments after the call (lists, dicts, objects' attributes: side effects), raised exceptions
(type and message), printed output (stdout), and warnings: any warning is an error (npdynamo's
"internal error" fallback warns), except for programs that warn on purpose (`warns`), whose
warnings are recorded and compared (category and message, in order; on the C backend as a set,
as tests/fuzz does: a fused kernel reports each kind once). The compiled function is called
twice (compile, cache hit).
The C backend runs with ``min_size=0, calibrate=False`` so that even these small arrays go
through its kernels; its results are compared bit for bit too (its math is NumPy's own loops).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import dynamo
from programs.corpus import View
# CountingBackend, assert_same and make_backend are part of this module's interface
# (test_oracle.py patches `make_backend` here).
from support.oracle import CountingBackend, Run, assert_same, compare, make_backend, run

__all__ = ["Outcome", "check_program", "check_program_cases", "CountingBackend",
           "assert_same", "make_backend"]

def _fresh_views(args: tuple) -> tuple:
    # Views are made anew from a fresh copy of their base (a deep copy would be contiguous).
    return tuple(a.make(a.base) if isinstance(a, View) else a for a in args)


def _run(fn: Callable, args: tuple, kwargs: dict, record_warnings: bool = False) -> Run:
    """`fn` on fresh copies of the arguments. Warnings are errors, or with `record_warnings`
    they are recorded (every one, in order) and the call goes on."""
    return run(fn, args, kwargs, record_warnings, fresh=_fresh_views)


@dataclass
class Outcome:
    graphs_first_call: int
    graphs_second_call: int
    compile_seconds: float  # first compiled call minus the eager run time


def check_program(fn: Callable, args: tuple, kwargs: dict, backend: str,
                  warns: bool = False) -> Outcome:
    """Eager `fn` vs `dynamo.compile(fn)` (first call, cache hit); AssertionError on a change."""
    eager = _run(fn, args, kwargs, warns)
    counting = make_backend(backend)
    compiled = dynamo.compile(fn, backend=counting)
    counts = []
    seconds = []
    for attempt in ("first call", "second call (cache hit)"):
        before = counting.count
        comp = _run(compiled, args, kwargs, warns)
        counts.append(counting.count - before)
        seconds.append(comp.seconds)
        compare(eager, comp, attempt, exact_warnings=backend != "c")
    return Outcome(counts[0], counts[1], max(0.0, seconds[0] - eager.seconds))


def check_program_cases(fn: Callable, cases: list[tuple[tuple, dict]], backend: str,
                        warns: bool = False) -> None:
    """One compiled `fn` called with every case in turn, twice round: guards must tell the cases
    apart (dtypes, shapes, values) and each call must still behave like plain NumPy."""
    eager = [_run(fn, args, kwargs, warns) for args, kwargs in cases]
    compiled = dynamo.compile(fn, backend=make_backend(backend))
    for round_ in ("first round", "second round"):
        for i, (args, kwargs) in enumerate(cases):
            compare(eager[i], _run(compiled, args, kwargs, warns), f"{round_}, case {i}",
                    exact_warnings=backend != "c")
