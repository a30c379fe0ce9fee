"""A NumPy warning raised inside a compiled graph names the user's file and line.

``warnings`` takes the file, line and module of the frame that called NumPy: inside a graph
that is the generated code, which used to be ``<fx-graph graph_f_0_0>:5``. The generated
functions now run on code placed at the user's statements (`fx.locations`), so the warning
reads as in plain Python: same file, line, source line and module (filters by module match).
Oracle: the same function run plainly first.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from fx import locations

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
    assert dynamo.convert_frame.skip_reason(code, gm.forward.__globals__) == \
        "generated graph code"
