"""A code object whose compile failed runs unmodified without calling Python (issue 8, item 3).

In:  a function compiled with a backend that raises (an internal error: the frame falls back to
     plain Python and convert_frame remembers the failure for that callback), then called again.
Out: later calls run the original code straight from the C hook (`_C.set_code_failed`, checked
     on a cache miss) without calling the compile callback; another backend still compiles the
     code; `dynamo.reset()` forgets the failure. Results equal plain NumPy throughout.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from dynamo import _C, eval_frame


def one_op(x):
    return np.sin(x) + 1


@pytest.fixture
def asked(monkeypatch):
    """The code objects the compile callback was called for, in order."""
    seen = []
    original = eval_frame._Callback.__call__

    def spy(self, frame):
        seen.append(frame.f_code)
        return original(self, frame)

    monkeypatch.setattr(eval_frame._Callback, "__call__", spy)
    return seen


def test_a_failed_compile_is_not_asked_again(asked):
    calls = []

    def broken(gm, example_inputs):
        calls.append(1)
        raise RuntimeError("this backend always fails")

    x = np.linspace(0, 1, 5)
    with dynamo.config.patch(emit_warnings=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with dynamo.optimize(broken):
                np.testing.assert_array_equal(one_op(x), np.sin(x) + 1)
    assert len(calls) == 1
    assert sum("internal error" in str(w.message) for w in caught) == 1
    assert asked.count(one_op.__code__) == 1  # the later calls never reached Python
    assert _C.code_stats(one_op.__code__)[1] == 3  # (still counted as misses)

    # Per callback: another backend compiles it.
    with dynamo.optimize("eager"):
        np.testing.assert_array_equal(one_op(x), np.sin(x) + 1)
    assert asked.count(one_op.__code__) == 2
    assert len(_C.get_cache_entries(one_op.__code__)) == 1

    # reset() forgets the failure: the broken backend is asked again.
    dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with dynamo.optimize(broken):
            one_op(x)
    assert len(calls) == 2
    assert asked.count(one_op.__code__) == 3


def test_set_code_failed_rejects_what_is_not_code():
    with pytest.raises(TypeError, match="set_code_failed"):
        _C.set_code_failed(one_op, object())
