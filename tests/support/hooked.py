"""Helpers for tests that watch the C hook and the graphs it runs.

`no_capture_leak`: an autouse fixture (import it into a test module) asserting that no capture
scope is on before a test and none is left on after it. `GraphRuns`: a backend (``gm.forward``)
that counts compiles and graph runs; its ``interrupt`` flag makes the next compile raise
KeyboardInterrupt. Used by tests/dynamo/test_interrupts.py, test_debuggers.py, test_recursion.py,
test_per_code_state.py, test_threads_and_tasks.py, test_tracebacks.py, test_leaves_no_garbage.py
and test_warnings_while_compiling.py.
"""

from __future__ import annotations

import pytest

from dynamo import _C


@pytest.fixture(autouse=True)
def no_capture_leak():
    assert _C.get_eval_frame() is None
    yield
    assert _C.get_eval_frame() is None, "a capture scope leaked"
    assert _C.hook_state()["active_scopes"] == 0


class GraphRuns:
    """A backend (``gm.forward``) that counts compiles and graph runs; ``interrupt`` makes its
    next compile raise KeyboardInterrupt."""

    def __init__(self) -> None:
        self.compiles = self.runs = 0
        self.interrupt = False

    def __call__(self, gm, example_inputs):
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt
        self.compiles += 1

        def run(*args):
            self.runs += 1
            return gm.forward(*args)
        return run

    @property
    def counts(self) -> tuple[int, int]:
        return self.compiles, self.runs
