"""Recompilation control: the per-code and total cache limits, the limit warning, recompile logs
in plain words, and what explain()/cache_entries() show about guards.

Comes in: compiled functions called with changing inputs (``dynamic=False`` where a test counts
versions per shape, so automatic dynamic shapes do not merge them), and guard lists built by
hand for the message texts. Goes out: assertions on version counts, the warning (text, category,
and that it points at this file, the user's call site), log records and debug views.
"""

from __future__ import annotations

import logging
import types
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import _C, config
from dynamo.guards import Guard, build_check_fn
from dynamo.source import AttrSource, GetItemSource, GlobalSource, LocalSource
from support.oracle import make_backend

X = LocalSource("x")


def _first_failure(guard: Guard, value, globals_=None):
    return build_check_fn([guard], ["x"], "f").first_failure(value, globals_ or {}, None)


@pytest.mark.parametrize("guard, value, text", [
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (1024,), False)), np.ones(2048),
     "x.shape[0]: expected 1024, got 2048"),
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (4,), False)), np.ones(4, np.float32),
     "x.dtype: expected float64, got float32"),
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (4,), False)), [1.0] * 4,
     "type(x): expected ndarray, got list"),
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (2, 2), False)), np.ones(4),
     "x.ndim: expected 2, got 1"),
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (None, 3), False)), np.ones((1, 3)),
     "x.shape[0]: expected a size >= 2 (dynamic), got 1"),
    (Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (3, 2), True)), np.ones((2, 3)).T,
     "x: expected a C-contiguous array"),
    (Guard(X, "CONSTANT_MATCH", (int, 3)), 4, "x: expected 3, got 4"),
    (Guard(X, "CONSTANT_MATCH", (int, 3)), 3.0, "type(x): expected int, got float"),
    (Guard(X, "CONSTANT_MATCH", (float, -0.0)), 0.0, "x: expected -0.0, got 0.0"),
    (Guard(X, "CONSTANT_MATCH", (type(None), None)), 0, "x: expected None, got 0"),
    (Guard(X, "SEQUENCE_LENGTH", (list, 2)), [1, 2, 3], "len(x): expected 2, got 3"),
    (Guard(X, "INT_AT_LEAST", 2), 1, "x: expected an int >= 2 (symbolic), got 1"),
    (Guard(X, "INT_AT_LEAST", 2), 2.5, "type(x): expected int, got float"),
    (Guard(X, "DICT_KEYS", (dict, ("a",))), {"b": 1},
     "x's keys: expected ['a'], got ['b'] (in this order)"),
    (Guard(X, "DICT_KEYS", (dict, ("a", "b"))), {"b": 1, "a": 2},
     "x's keys: expected ['a', 'b'], got ['b', 'a'] (in this order)"),
    (Guard(X, "ID_MATCH", Guard.identity(np)), types, "x: expected module numpy, got module types"),
    (Guard(AttrSource(X, "w"), "TYPE_MATCH", int), types.SimpleNamespace(w="s"),
     "type(x.w): expected int, got str"),
    (Guard(GetItemSource(X, 0), "CONSTANT_MATCH", (int, 1)), [2], "x[0]: expected 1, got 2"),
    (Guard(AttrSource(X, "w"), "TYPE_MATCH", int), types.SimpleNamespace(),
     "x.w: could not be read (AttributeError"),
])
def test_first_failure_in_plain_words(guard, value, text):
    message = _first_failure(guard, value)
    assert message is not None and message.startswith(text), message
    assert "(guard: " in message  # and the Python check that failed


def test_first_failure_names_a_shadowing_global():
    message = build_check_fn([Guard(GlobalSource("len"), "NOT_IN_GLOBALS", "len")], ["x"], "f") \
        .first_failure(1, {"len": len}, None)
    assert message.startswith("global len: expected no global of that name"), message


def _shapes_fn(x):
    return np.sin(x) + 1


def test_limit_warning_points_at_the_call_site_and_names_the_guard():
    # (a warning only when asked for: by default the message goes to logging, see
    # test_no_warnings_leak.py)
    compiled = dynamo.compile(_shapes_fn, dynamic=False)
    with config.patch(cache_size_limit=3, emit_warnings=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 7):
            np.testing.assert_array_equal(compiled(np.ones(n)), np.sin(np.ones(n)) + 1)  # CALL
        np.testing.assert_array_equal(compiled(np.ones(2)), np.sin(np.ones(2)) + 1)
    ours = [w for w in caught if "cache_size_limit" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    w = ours[0]
    assert w.category is RuntimeWarning
    assert w.filename == __file__, w.filename  # the user's call site, not an npdynamo file
    with open(__file__) as fh:
        assert "# CALL" in fh.read().splitlines()[w.lineno - 1]
    text = str(w.message)
    code = _shapes_fn.__code__
    assert f"_shapes_fn ({code.co_filename}:{code.co_firstlineno})" in text
    assert "x.shape[0]: expected 3, got 4" in text
    assert len(_C.get_cache_entries(code)) == 3
    assert _C.get_code_state(code) == _C.RUN_ONLY


def test_after_the_limit_cached_versions_hit_and_misses_run_plain(backend):
    compiled = dynamo.compile(_shapes_fn, backend=backend, dynamic=False)
    with config.patch(cache_size_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (1, 2, 3, 4, 5, 1, 2):
            np.testing.assert_array_equal(compiled(np.ones(n)), np.sin(np.ones(n)) + 1)
    assert backend.count == 2
    hits, misses = _C.code_stats(_shapes_fn.__code__)
    assert hits == 2  # the last two calls


def _make(i):
    namespace = {"np": np}
    exec(f"def g{i}(x):\n    return np.cos(x) * {i}\n", namespace)
    return namespace[f"g{i}"]


def test_accumulated_limit_over_all_functions():
    fns = [_make(i) for i in range(4)]
    with config.patch(accumulated_cache_size_limit=3, emit_warnings=True), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in fns:
            compiled = dynamo.compile(fn)
            for _ in range(2):
                np.testing.assert_array_equal(compiled(np.ones(3)), fn(np.ones(3)))
    ours = [w for w in caught if "accumulated_cache_size_limit" in str(w.message)]
    assert len(ours) == 1 and "g3 (" in str(ours[0].message)
    assert ours[0].filename == __file__
    assert [len(_C.get_cache_entries(fn.__code__)) for fn in fns] == [1, 1, 1, 0]
    dynamo.reset()  # the count starts again
    with config.patch(accumulated_cache_size_limit=3):
        dynamo.compile(fns[3])(np.ones(3))
    assert len(_C.get_cache_entries(fns[3].__code__)) == 1


def test_recompile_log_names_the_failing_guard_of_each_version(caplog):
    compiled = dynamo.compile(_shapes_fn, dynamic=False)
    dynamo.set_logs(recompiles=True)
    logging.getLogger("dynamo").propagate = True
    try:
        with caplog.at_level(logging.INFO, logger="dynamo.recompiles"):
            compiled(np.ones(3))
            compiled(np.ones(4))
            compiled(np.ones(4, np.float32))
    finally:
        dynamo.set_logs()
    lines = [r.getMessage() for r in caplog.records if r.name == "dynamo.recompiles"]
    assert len(lines) == 2, lines
    assert "guard failed: x.shape[0]: expected 3, got 4" in lines[0]
    assert "version 0: x.dtype: expected float64, got float32" in lines[1]
    assert "version 1: x.dtype: expected float64, got float32" in lines[1]


def test_cache_entries_and_explain_show_every_guard():
    compiled = dynamo.compile(_shapes_fn, dynamic=False)
    compiled(np.ones(3))
    compiled(np.ones((2, 2)))
    entries = dynamo.cache_entries(_shapes_fn)
    assert len(entries) == 2
    assert "x.shape == (2, 2)" in entries[0].guards and "x.shape == (3,)" in entries[1].guards
    for entry in entries:
        assert "___globals['np'] is" in entry.guards
        assert "[C]" in entry.guards  # where each guard is evaluated
    out = dynamo.explain(_shapes_fn)(np.ones(5))
    assert any("x.shape" in g for g in out.guards) and any("'np'" in g for g in out.guards)


# A call that raised does not take over later calls ----------------------------------------------


# (control-flow fuzzer pattern `raise_on_empty_args_unguarded`, found once try_except_then_call
# was removed)
def _first_plus_one(*ts):
    return ts[0] + 1


# Fixed: when the user's code raises at a breakable instruction for these values
# (UserCodeError), the second trace still stops before that instruction, but now looks at
# (guards) the values on the stack there, so the entry matches only calls that raise too.
def test_a_call_that_raised_does_not_take_over_later_calls():
    backend = make_backend("eager")
    compiled = dynamo.compile(_first_plus_one, backend=backend)
    y = np.array([1.0, 2.0])
    assert np.array_equal(compiled(y), y + 1)
    with pytest.raises(IndexError, match="tuple index out of range"):
        compiled()
    before = backend.count
    assert np.array_equal(compiled(y), y + 1)
    assert backend.count == before, "the call with the same argument as before compiled again"


def _sine_plus_item(x, t, i):
    y = np.sin(x)
    return y + t[i]


def test_a_call_that_raised_after_a_graph_op_does_not_take_over_later_calls():
    backend = make_backend("eager")
    compiled = dynamo.compile(_sine_plus_item, backend=backend)
    x = np.ones(3)
    assert np.array_equal(compiled(x, (1.0,), 0), np.sin(x) + 1.0)
    with pytest.raises(IndexError, match="tuple index out of range"):
        compiled(x, (), 0)
    before = backend.count
    assert np.array_equal(compiled(x, (1.0,), 0), np.sin(x) + 1.0)
    assert backend.count == before, "the call with the same arguments as before compiled again"
