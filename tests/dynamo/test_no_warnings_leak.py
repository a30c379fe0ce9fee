"""A compiled program sees exactly the warnings of the plain one: npdynamo's own never reach it.

In: compiled functions that hit the recompile limit or an internal error (npdynamo's
diagnostics), that use object arrays (whose code generation looked up ``numpy.object``, which
warns) and that read deprecated NumPy names. Out: assertions that, with the default
``dynamo.config.emit_warnings = False`` (the suite's conftest turns it on: it is switched off
here), the warnings machinery of the program (``simplefilter("error")``, ``pytest.warns``,
``catch_warnings(record=True)``, ``-W error``) observes the same as for plain Python, with
NumPy as the oracle, and that the diagnostics go to logging instead.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo import config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _user_default():
    dynamo.reset()  # (each test hits the limit afresh: it is reported once per code)
    with config.patch(emit_warnings=False):
        yield


def _add_one(x):
    return np.sin(x) + 1


def _recompile_past_the_limit():
    compiled = dynamo.compile(_add_one, dynamic=False)  # every length a new version
    with config.patch(cache_size_limit=2):
        for n in range(1, 6):
            np.testing.assert_array_equal(compiled(np.ones(n)), _add_one(np.ones(n)))


def test_the_recompile_limit_does_not_raise_under_an_error_filter(caplog):
    with caplog.at_level(logging.WARNING, logger="dynamo.recompiles"), \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        _recompile_past_the_limit()
    assert "dynamo.config.cache_size_limit" in caplog.text  # reported, through logging


def test_the_recompile_limit_is_not_recorded_or_counted():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _recompile_past_the_limit()
    assert caught == []
    with pytest.warns(UserWarning) as counted:  # NumPy's test_allnans counts warnings so
        _recompile_past_the_limit()
        warnings.warn("the program's own", UserWarning)
    assert [str(w.message) for w in counted] == ["the program's own"]


def test_an_internal_error_falls_back_without_a_warning(caplog):
    def broken(gm, example_inputs):
        raise RuntimeError("backend bug")

    def f(x):
        return np.cos(x) * 2.0

    x = np.arange(3.0)
    with caplog.at_level(logging.WARNING, logger="dynamo.graph_breaks"), \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(dynamo.compile(f, backend=broken)(x), f(x))
    assert "internal error" in caplog.text and "backend bug" in caplog.text


def test_asking_for_warnings_gives_them():
    with config.patch(emit_warnings=True), \
            pytest.warns(RuntimeWarning, match="cache_size_limit"):
        _recompile_past_the_limit()


_OBJECT_PROGRAM = """
import warnings
import numpy as np
import dynamo

dynamo.config.suppress_errors = False  # an internal error raises: the compile must succeed
dynamo.config.emit_warnings = False


def arithmetic():
    return np.array([1.0, 2.0], dtype=object) + 1


def cast(a):
    return a.astype(object) * 2, np.asarray(a, dtype=np.object_)


def deprecated_name(a):
    try:  # (NumPy 2.x: a FutureWarning, the program's own, at this line; then AttributeError)
        kind = np.object
    except AttributeError:
        kind = None
    return a + 1, kind


def recorded(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, [(w.category.__name__, str(w.message), w.lineno) for w in caught]


a = np.array([1.0, 2.0])
for fn, args in ((arithmetic, ()), (cast, (a,))):
    expected, got = fn(*args), dynamo.compile(fn)(*args)  # (-W error: any warning raises)
    for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                    got if isinstance(got, tuple) else (got,)):
        assert e.dtype == g.dtype == object and e.tolist() == g.tolist(), (e, g)
compiled = dynamo.compile(deprecated_name)
for _ in range(2):  # the compiling call and a cache hit
    (plain, plain_kind), plain_warnings = recorded(deprecated_name, a)
    (got, got_kind), got_warnings = recorded(compiled, a)
    assert got_warnings == plain_warnings and len(plain_warnings) == 1, (got_warnings,
                                                                         plain_warnings)
    assert got_kind is plain_kind and got.tolist() == plain.tolist()
print("ok")
"""


def test_object_arrays_and_deprecated_names_under_w_error(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(_OBJECT_PROGRAM))
    env = dict(os.environ, PYTHONPATH=str(REPO), DYNAMO_EMIT_WARNINGS="0")
    proc = subprocess.run([sys.executable, "-W", "error", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
