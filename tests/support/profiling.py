"""`python_frames_during(action)`: the Python frames that start while ``action()`` runs.

``sys.setprofile`` reports a "call" event for every Python frame, also for one started from C
(a weakref callback, a finalizer, a signal handler). Used to check that npdynamo's objects die
without running Python code (fx/weak.py): tests/fx/test_weak.py, tests/dynamo/test_interrupts.py
and tests/backends/test_c_resources.py.
"""

from __future__ import annotations

import gc
import sys
from typing import Callable


def python_frames_during(action: Callable[[], object]) -> list[str]:
    """``file:function`` of each Python frame started while ``action()`` runs (other than
    ``action``'s own)."""
    started: list[str] = []
    me = getattr(action, "__code__", None)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is not me:
            started.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    # (gc.callbacks are the program's Python code run by a collection, e.g. hypothesis's
    # timer: not what is watched here)
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()
    # (the garbage earlier tests left, collected now and not inside `action`: a generator of
    # hypothesis or pytest finalised by the action's gc.collect() runs its Python code)
    gc.collect()
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(previous)
        gc.callbacks[:] = callbacks
    return started
