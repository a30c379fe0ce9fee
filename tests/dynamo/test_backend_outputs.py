"""A backend's compiled callable that returns the wrong structure is caught on its first call.

In: user backends whose callables return a list instead of the graph's tuple, too few values, a
0-d array where the graph returns a NumPy scalar, another dtype. Out: a `BackendError` at the
first call naming the backend, what the graph returns and what came back (never the wrong value
passed to the program); a right backend's results equal NumPy's, and after its first call the
transformed code calls the backend's callable directly (no per-call check).
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo.exc import BackendError


def _pair(x):
    return np.sin(x), x * 2.0


def _total(x):
    return np.sum(x) + 1.0


def _wrapping(change):
    def backend(gm, example_inputs):
        forward = gm.forward

        def run(*args):
            return change(forward(*args))

        return run

    backend.__name__ = f"backend_{change.__name__}"
    return backend


def as_list(out):
    return list(out)


def first_only(out):
    return out[:1]


def zero_d(out):
    return np.asarray(out)


def float32(out):
    return tuple(o.astype(np.float32) for o in out)


@pytest.mark.parametrize("fn, change, returned, expected", [
    (_pair, as_list, "a list of 2 value(s)", "a tuple of 2 values (float64[3], float64[3])"),
    (_pair, first_only, "a tuple of 1 value(s)", "a tuple of 2 values"),
    (_total, zero_d, "float64[] where the graph has float64 scalar", "one bare value"),
    (_pair, float32, "value 0: float32[3] where the graph has float64[3]", "a tuple of 2"),
])
def test_a_wrong_structure_raises_naming_the_backend(fn, change, returned, expected):
    dynamo.reset()
    compiled = dynamo.compile(fn, backend=_wrapping(change))
    with pytest.raises(BackendError) as info:
        compiled(np.ones(3))
    text = str(info.value)
    assert f"backend 'backend_{change.__name__}'" in text, text
    assert f"returned {returned}" in text and f"the graph returns {expected}" in text, text


def _identity(out):
    return out


def test_a_right_backend_is_checked_once_then_called_directly():
    dynamo.reset()
    compiled = dynamo.compile(_pair, backend=_wrapping(_identity))
    x = np.arange(3.0)
    for _ in range(3):
        got, expected = compiled(x), _pair(x)
        assert type(got) is tuple and len(got) == 2
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
            assert g.dtype == e.dtype
    (check,) = [c for c in _pair_code_constants() if type(c).__name__ == "OutputCheck"]
    assert check.call is check.compiled  # (the transformed code loads `call`)


def _pair_code_constants():
    from dynamo import _C

    entries = _C.get_cache_entries(_pair.__code__)
    return [const for _, code in entries for const in code.co_consts]


def _labels(labels):
    values, counts = np.unique(labels, return_counts=True)
    return values[counts.argmax()]


def test_a_string_of_a_length_the_graph_does_not_know_passes():
    # (the graph's dtype of a str result is unsized, "<U0"; the backend's is "<U1")
    dynamo.reset()
    labels = np.array(["b", "a", "b", "c"])
    compiled = dynamo.compile(_labels, backend=_wrapping(_identity))
    for _ in range(2):
        got = compiled(labels)
        assert type(got) is np.str_ and got == _labels(labels)
