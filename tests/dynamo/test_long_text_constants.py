"""A long str or bytes from the frame is no constant of the translator's.

CPython's compiler folds no str longer than 4096 characters; npdynamo kept any str it read or
computed as a constant: its repr went into the guard text (compiled on every compile, ~0.2 s
for 10**7 characters) and every call compared the whole string (CPython's test_re
test_search_anchor_at_beginning timed a loop over one, 0.24 s against its 0.1 s bound).
Plain Python is the oracle for results; the guard texts show what is kept.
"""

from __future__ import annotations

import re

import numpy as np

import dynamo
from dynamo.variables.builder import MAX_CONSTANT_TEXT


def searches(s, pattern):
    n = len(s)
    found = re.search(pattern, s)
    return n, found is None, s[:3], s.count("x")


def builds(n, a):
    s = "x" * n
    return s, s[-2:], a + 1     # (a NumPy operation: the frame is compiled)


def _longest_text_constant(fn) -> int:
    return max((len(c) for entry in dynamo.cache_entries(fn) for c in entry.code.co_consts
                if type(c) in (str, bytes)), default=0)


def test_a_long_argument_is_not_guarded_by_value():
    long = "x" * (MAX_CONSTANT_TEXT * 4)
    out = dynamo.explain(searches)(long, r"\Ay")
    assert out.result == searches(long, r"\Ay")
    assert all(len(guard) < 1000 for guard in out.guards), [g[:200] for g in out.guards]
    assert any("no constant" in reason for reason in out.break_reasons), out.break_reasons


def test_a_long_str_computed_in_the_frame_is_made_in_plain_python():
    compiled = dynamo.compile(builds, dynamic=False)
    for n in (10, MAX_CONSTANT_TEXT, MAX_CONSTANT_TEXT + 1, 10 ** 6):
        got, expected = compiled(n, np.arange(2)), builds(n, np.arange(2))
        assert got[:2] == expected[:2] and np.array_equal(got[2], expected[2])
    assert 0 < _longest_text_constant(builds) <= MAX_CONSTANT_TEXT  # (none longer is kept)


def test_short_text_stays_a_constant():
    out = dynamo.explain(searches)("xyz", "y")
    assert out.result == searches("xyz", "y")
    assert not any("no constant" in reason for reason in out.break_reasons), out.break_reasons
