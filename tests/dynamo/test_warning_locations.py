"""A NumPy warning raised inside a compiled graph names the user's file and line.

``warnings`` takes the file, line and module of the frame that called NumPy: inside a graph
that is the generated code, which used to be ``<fx-graph graph_f_0_0>:5``. The generated
functions now run on code placed at the user's statements (`fx.locations`), so the warning
reads as in plain Python: same file, line, source line and module (filters by module match).
Also: the "default" action shows a warning once per location across compiled versions, a
filter by module matches the warning of a helper inlined from another module, and the casts of
fused C stores and of complex-to-real ``astype`` warn at the user's line.
Oracle: the same function run plainly first.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import dynamo
from fx import locations
from support.oracle import assert_same as oracle_assert_same
from support.sources import fresh_function

BACKENDS = ["eager", "c"]


def logs_a_negative(x):
    y = x + 1
    z = np.log(y)   # RuntimeWarning: invalid value encountered in log
    return z * 2


def _helper_divides(a):
    return a / 0.0  # RuntimeWarning: divide by zero (a call inlined into the graph)


def calls_a_helper(x):
    y = x * 3
    return _helper_divides(y) + 1


def _recorded(fn, *args, action="always"):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter(action)
        fn(*args)
    return [(w.category, str(w.message), w.filename, w.lineno) for w in seen]


@pytest.fixture
def x():
    return np.array([-5.0, 1.0, 2.0] * 4000)  # (large enough for a C kernel)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [logs_a_negative, calls_a_helper])
def test_the_warning_names_the_users_file_and_line(fn, backend, x):
    plain = _recorded(fn, x)
    compiled = dynamo.compile(fn, backend=backend)
    assert plain and plain[0][2] == __file__
    assert _recorded(compiled, x) == plain  # first call (compiles)
    assert _recorded(compiled, x) == plain  # from the cache


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_filter_by_module_matches_compiled_code(backend, x):
    compiled = dynamo.compile(logs_a_negative, backend=backend)
    for run in (logs_a_negative, compiled):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", category=RuntimeWarning, module=__name__)
            with pytest.raises(RuntimeWarning, match="invalid value encountered in log"):
                run(x)


def test_the_default_action_shows_it_once_as_in_python(x):
    compiled = dynamo.compile(logs_a_negative, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(x)  # (compiled outside the recording: the count below is the calls')
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in range(3):
            compiled(x)
    assert len(seen) == 1 and seen[0].lineno == logs_a_negative.__code__.co_firstlineno + 2


def test_the_graph_code_stays_readable_and_is_never_captured(x):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynamo.compile(logs_a_negative, backend=backend)(x)
    (gm,) = graphs
    code = gm.forward.__code__
    assert code.co_filename == __file__  # (runs at the user's lines)
    assert gm.filename.startswith("<fx-graph") and "numpy.log(y)" in gm.code  # (reads as built)
    assert locations.origin(code) is not None
    assert dynamo.trace_rules.skip_reason(code, gm.forward.__globals__) == \
        "generated graph code"


# Warnings across compiled versions, inlined helpers and fused stores ----------------------------


def _log(x):
    return np.log(x) + 1.0


def _messages(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # (Python's own action for a RuntimeWarning)
        fn(np.zeros(3))
        fn(np.zeros(3, np.float32))  # (another dtype: a second compiled version)
        fn(np.zeros(3))
    return [(str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_a_default_warning_is_shown_once_per_location_across_compiled_versions(backend):
    # Python's "default" action shows a warning once per (module, line, text): the registry is
    # the module's ``__warningregistry__``. The relocated graph code runs in globals of its own,
    # so each compiled version has a registry of its own and repeats the warning.
    plain = _messages(_log)
    compiled = _messages(dynamo.compile(_log, backend=backend))
    assert len(plain) == 1
    assert compiled == plain


_HELPER = """
import numpy as np


def doubled_log(x):
    y = x * 2.0
    return np.log(y)
"""


def _import_helper(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "inlined_warning_helper.py").write_text(_HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("inlined_warning_helper")


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_a_module_filter_matches_the_warning_of_an_inlined_helper(backend, tmp_path, monkeypatch):
    # Every node of the graph comes from the helper (another file): the code is relocated to
    # the helper's file:line, but `_locate` records no module for a callee in another file, so
    # the globals keep ``__name__ = "<fx-graph ...>"`` and ``filterwarnings(module=...)`` of the
    # helper's module no longer matches, as it does in plain Python.
    helper = _import_helper(tmp_path, monkeypatch)

    def calls_the_helper(x):
        return helper.doubled_log(x)

    def caught(fn):
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", module="inlined_warning_helper")
            fn(np.zeros(3))
        return [str(w.message) for w in found]

    try:
        assert caught(calls_the_helper) == []
        assert caught(dynamo.compile(calls_the_helper, backend=backend)) == []
    finally:
        sys.modules.pop("inlined_warning_helper", None)


def _casts_on_store(x, y):
    v = x * 1e10
    y[:] = v  # (the float -> int32 cast warns here)
    return y


def _casts_through_a_mask(x, y):
    m = x > 0.5
    y[m] = x[m] * 1e10
    return y


def _overflows_in_a_masked_store(x, y):
    m = x > 0.5
    y[m] = (x[m] * 1e300) * 1e10  # (the overflow of a product nested in the store)
    return y


@pytest.mark.parametrize("fn", [_casts_on_store, _casts_through_a_mask,
                                _overflows_in_a_masked_store])
def test_a_cast_warning_of_a_fused_store_names_the_store_line(fn):
    # The C program's ``line_nodes`` come from ``_ASSIGNED`` (``name = ...`` lines): a store
    # ``y[...] = v`` has no node of its own, so `fx.locations` gives it the user line of the
    # statement above (``v = x * 1e10``, or the mask's). Arrays large enough for a kernel.
    dtype = np.float64 if fn is _overflows_in_a_masked_store else np.int32

    def caught(f):
        x, y = np.linspace(0.0, 1.0, 100_000), np.zeros(100_000, dtype)
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            f(x, y)
        return [(str(w.message), w.filename, w.lineno) for w in found]

    expected = caught(fn)
    assert len(expected) == 1
    assert caught(dynamo.compile(fn, backend="c")) == expected


_COMPLEX_CAST = """
def f(c):
    y = c * 2
    r = y.astype(np.float32)
    return r + 1
"""


def test_complex_to_real_cast_warns_at_the_users_line_as_in_numpy(tmp_path):
    user_file = tmp_path / "cast_module.py"
    user_file.write_text(_COMPLEX_CAST)
    f = fresh_function(_COMPLEX_CAST, str(user_file))
    c = np.array([1 + 2j, 3 - 1j])

    def run(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn(c)
        return result, [(w.category, str(w.message), w.filename, w.lineno) for w in caught]

    want, eager_warnings = run(f)
    assert [w[0] for w in eager_warnings] == [np.exceptions.ComplexWarning]
    compiled = dynamo.compile(f)
    for _ in range(2):
        got, compiled_warnings = run(compiled)
        oracle_assert_same(want, got)
        assert compiled_warnings == eager_warnings
