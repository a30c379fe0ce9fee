"""A KeyboardInterrupt that lands in a weakref callback during a compile still reaches the user.

CPython runs a weakref callback or finalizer when its object dies, and reports an exception
raised inside it through ``sys.unraisablehook`` ("Exception ignored in: ...") instead of
raising it. A signal handler (Ctrl-C: ``KeyboardInterrupt``) runs in the main thread at its
next call or backward jump, which may be in such a callback.

npdynamo's own objects die without running Python code (`fx.weak`: every weak reference of fx
and dynamo that has a callback has a C one), wherever they die, so a Ctrl-C is never caught in
one of them. But compiling and `dynamo.reset()` also free the program's objects (a value the
translator or a guard held, a user backend's closure) whose weakref callbacks and finalizers
are the program's own Python code, and an interrupt landing there was printed and lost where
plain Python, which would not have freed them at that moment, raises it (found by the SIGINT
storm in tests/dynamo/test_interrupts.py).

`call_keeping_interrupts(fn, *args)` runs ``fn`` with ``sys.unraisablehook`` replaced by a
list's ``append`` (a C call: no bytecode, so no signal handler runs inside the hook itself).
Afterwards the program's hook is restored and gets every recorded report, as CPython would have
given it, except the first exception that is not an `Exception` (``KeyboardInterrupt``, or
``SystemExit`` from a handler): that one is raised, also instead of an `Exception` that ``fn``
raised (whose traceback it then shows as its context). Only the main thread, where signal
handlers run, does this. Callers: `ConvertFrame.__call__` (the compile callback) and
`dynamo.reset`.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

__all__ = ["call_keeping_interrupts"]


def call_keeping_interrupts(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an interrupt reported as unraisable meanwhile is raised afterwards."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    reports: list[Any] = []
    previous = sys.unraisablehook
    # No call between the swap and the try, nor before the hook is restored: a signal handler
    # runs only at a call or a backward jump, so the program's hook is always put back.
    sys.unraisablehook = reports.append
    try:
        result = fn(*args)
    except BaseException:
        sys.unraisablehook = previous
        if reports:
            _hand_over(reports, previous, sys.exc_info()[1])
        raise
    sys.unraisablehook = previous
    if reports:
        _hand_over(reports, previous, None)
    return result


def _hand_over(reports: list[Any], hook: Callable[[Any], Any],
               raised: BaseException | None) -> None:
    interrupt = None
    for report in reports:
        if interrupt is None and report.exc_type is not None and \
                not issubclass(report.exc_type, Exception):
            interrupt = report.exc_value if report.exc_value is not None else report.exc_type()
        else:
            hook(report)
    reports.clear()
    if interrupt is not None and (raised is None or isinstance(raised, Exception)):
        # (without the callback's traceback, which holds npdynamo's frames)
        raise interrupt.with_traceback(None)
