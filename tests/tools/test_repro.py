"""dynamo.config.check_accuracy, repro directories and the minifier (issue 10).

A deliberately wrong backend (tests/support/bad_backends.py) must be caught on the call, named
in an AccuracyWarning with a repro directory (these tests ask for npdynamo's diagnostics as
warnings: ``emit_warnings=True``); the repro reruns in a fresh process and fails
there; `python -m dynamo minify` shrinks it to the one operation that is wrong. Correct
backends (eager, C) raise no warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo import config
from dynamo.repro import AccuracyWarning, minify, run_repro
from fx import GraphModule
from fx.serialize import graph_from_data, graph_to_data
from support import bad_backends

ROOT = Path(__file__).resolve().parents[2]


def chain(x, y):
    a = np.sin(x) * y
    b = a + np.cos(y)
    c = b * 2.0 - a
    return a, c


def in_place(x):
    x += 1.0
    return np.sqrt(x)


def _run(fn, backend, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = dynamo.compile(fn, backend=backend)(*args)
    return result, [w for w in caught if issubclass(w.category, AccuracyWarning)]


@pytest.fixture
def repro_dir(tmp_path):
    with config.patch(check_accuracy=True, repro_dir=str(tmp_path / "repros"),
                      emit_warnings=True):
        yield tmp_path / "repros"


def test_a_wrong_backend_is_caught_with_a_repro_that_reruns_and_minifies(repro_dir):
    x, y = np.linspace(0, 1, 5), np.linspace(1, 2, 5)
    _, caught = _run(chain, bad_backends.cos_is_sin, x, y)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "differs from the eager one" in message and "result[1]" in message
    directory = Path(message.rsplit("Repro: ", 1)[1])
    assert directory.parent == repro_dir
    assert {p.name for p in directory.iterdir()} >= {"repro.py", "graph.pkl", "inputs.pkl",
                                                      "backend.pkl"}
    script = (directory / "repro.py").read_text()
    assert "numpy.cos(y)" in script  # the graph, readable
    assert run_repro(directory) is not None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    done = subprocess.run([sys.executable, str(directory / "repro.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "values differ" in done.stdout
    # minify: the one wrong operation, alone
    small = minify(directory)
    assert small == directory / "minified"
    code = (small / "repro.py").read_text()
    assert "numpy.cos" in code and "numpy.sin" not in code
    assert run_repro(small) is not None
    cli = subprocess.run([sys.executable, "-m", "dynamo", "minify", str(directory)], env=env,
                         capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert cli.returncode == 0 and "minified repro:" in cli.stdout, cli.stderr


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_correct_backends_raise_no_warning(repro_dir, backend):
    x, y = np.linspace(0, 1, 50_000), np.linspace(1, 2, 50_000)
    result, caught = _run(chain, backend, x, y)
    assert not caught, [str(w.message) for w in caught]
    np.testing.assert_allclose(result[1], chain(x, y)[1], rtol=1e-15)
    _, caught = _run(in_place, backend, np.arange(1.0, 5.0))
    assert not caught
    assert not repro_dir.exists()


def test_a_backend_that_raises_in_a_call_gives_the_eager_result(repro_dir):
    x, y = np.linspace(0, 1, 5), np.linspace(1, 2, 5)
    result, caught = _run(chain, bad_backends.raises_when_called, x, y)
    np.testing.assert_array_equal(result[1], chain(x, y)[1])
    assert len(caught) == 1 and "raised RuntimeError: kernel crashed" in str(caught[0].message)


def test_a_backend_that_raises_while_compiling_leaves_a_repro(repro_dir):
    x, y = np.linspace(0, 1, 5), np.linspace(1, 2, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = dynamo.compile(chain, backend=bad_backends.raises_when_compiling)(x, y)
    np.testing.assert_array_equal(result[1], chain(x, y)[1])  # (the frame ran plainly)
    accuracy = [w for w in caught if issubclass(w.category, AccuracyWarning)]
    assert len(accuracy) == 1 and "while compiling" in str(accuracy[0].message)
    directory = Path(str(accuracy[0].message).rsplit("Repro: ", 1)[1])
    assert "cannot lower this graph" in run_repro(directory)


def test_a_lost_in_place_change_is_caught(repro_dir):
    _, caught = _run(in_place, bad_backends.forgets_in_place, np.arange(1.0, 5.0))
    assert len(caught) == 1 and "input changed in place" in str(caught[0].message)


def test_without_the_option_nothing_is_checked(tmp_path):
    with config.patch(repro_dir=str(tmp_path / "repros")):
        _, caught = _run(chain, bad_backends.cos_is_sin, np.ones(3), np.ones(3))
    assert not caught and not (tmp_path / "repros").exists()


def test_options_are_validated():
    with pytest.raises(TypeError, match="repro_dir"):
        config.repro_dir = 5
    with pytest.raises(TypeError, match="check_accuracy"):
        config.check_accuracy = "yes"


def test_a_graph_survives_serialization():
    def f(x, n):
        y = x[1:n] * 2.0
        return np.clip(y, a_min=0.5, a_max=None), y.sum(axis=0)

    gm = dynamo.explain(f)(np.linspace(0, 1, 6), 4).graphs[0]
    again = GraphModule(graph_from_data(graph_to_data(gm.graph)), gm.attrs)
    assert again.code == gm.code
    x = np.linspace(0, 1, 6)
    for a, b in zip(again.forward(x), gm.forward(x)):
        np.testing.assert_array_equal(a, b)
