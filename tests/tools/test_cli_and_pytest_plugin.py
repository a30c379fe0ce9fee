"""``python -m dynamo run|explain`` and the pytest plugin (``--dynamo``), run as a user would:
in a subprocess, on a script or a test file of their own in a temporary folder. Oracle: the
same script or test run without npdynamo (its output and exit status)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import sys
import numpy as np

def step(x):
    y = np.sin(x) * 2
    print("mean", round(float(y.mean()), 3))
    return y + 1

for n in (4, 5, 6):
    step(np.arange(float(n)))
print("args", sys.argv[1:])
if "--fail" in sys.argv:
    raise ValueError("boom")
if "--exit" in sys.argv:
    sys.exit(3)
"""


def _run(args: list[str], cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return path


@pytest.mark.parametrize("extra", [[], ["--fail"], ["--exit"], ["a", "--b"]])
def test_run_behaves_like_python_and_keeps_the_exit_status(script, extra):
    plain = _run([str(script), *extra], script.parent)
    captured = _run(["-m", "dynamo", "run", str(script), *extra], script.parent)
    assert captured.stdout == plain.stdout
    assert captured.returncode == plain.returncode
    if "--fail" in extra:
        assert captured.stderr.strip().splitlines()[-1] == "ValueError: boom"
        assert "runpy" not in captured.stderr  # the traceback starts at the script, as Python's


def test_explain_lists_graphs_breaks_and_recompiles_at_the_users_lines(script):
    out = _run(["-m", "dynamo", "explain", "prog.py"], script.parent)
    assert out.returncode == 0, out.stderr
    assert "npdynamo (eager backend) on prog.py" in out.stderr
    line = textwrap.dedent(SCRIPT).splitlines().index('    print("mean", round(float(y.mean()), 3))') + 1
    assert "Graph breaks:" in out.stderr and f"{script}:{line}" in out.stderr
    assert "float() of an array value" in out.stderr
    graphs = int(out.stderr.split("graphs: ")[1].split(",")[0])
    assert graphs >= 2


def test_run_with_the_c_backend_and_a_summary(script):
    out = _run(["-m", "dynamo", "run", "--backend", "c", "--summary", "prog.py"], script.parent)
    assert out.returncode == 0, out.stderr
    assert "npdynamo (c backend)" in out.stderr and "graphs:" in out.stderr


def test_bad_command_lines_get_clear_errors(script):
    out = _run(["-m", "dynamo", "run", "--backend", "nope", "prog.py"], script.parent)
    assert out.returncode == 2 and "unknown backend 'nope'" in out.stderr
    out = _run(["-m", "dynamo", "run", "missing.py"], script.parent)
    assert out.returncode == 2 and "no such script: missing.py" in out.stderr
    out = _run(["-m", "dynamo"], script.parent)
    assert out.returncode == 2 and "run,explain" in out.stderr


# The pytest plugin -------------------------------------------------------------------------------

TESTS = """
import numpy as np

STATE = []

def smooth(x):
    return (x[1:] + x[:-1]) / 2

def test_smooth():
    for n in (4, 5, 6):
        assert smooth(np.ones(n)).shape == (n - 1,)

def test_prints():
    print("hello")
    assert (np.ones(3) * 2).sum() == 6

def test_fails():
    assert smooth(np.ones(3)).sum() == 99
"""


@pytest.fixture
def test_file(tmp_path):
    path = tmp_path / "test_user.py"
    path.write_text(textwrap.dedent(TESTS))
    return path


def _pytest(test_file, *options):
    return _run(["-m", "pytest", "-p", "dynamo.pytest_plugin", "-p", "no:cacheprovider",
                 *options, str(test_file)], test_file.parent)


def test_the_plugin_reports_graphs_per_test_and_keeps_outcomes(test_file):
    out = _pytest(test_file, "--dynamo=eager", "--dynamo-compare")
    assert "1 failed, 2 passed" in out.stdout, out.stdout
    assert "npdynamo (eager backend)" in out.stdout
    assert "3 tests run under capture" in out.stdout
    assert "test_user.py::test_smooth" in out.stdout.split("npdynamo (eager backend)")[1]
    assert "every test had the same outcome as in plain Python" in out.stdout


def test_the_plugin_does_nothing_without_its_option(test_file):
    out = _pytest(test_file)
    assert "1 failed, 2 passed" in out.stdout and "tests run under capture" not in out.stdout


def test_the_plugin_rejects_bad_options(test_file):
    out = _pytest(test_file, "--dynamo=nope")
    assert out.returncode != 0 and "unknown backend 'nope'" in out.stderr
    out = _pytest(test_file, "--dynamo-compare")
    assert out.returncode != 0 and "--dynamo-compare needs --dynamo=BACKEND" in out.stderr


def test_compare_reports_a_test_whose_outcome_npdynamo_changes(tmp_path):
    # A backend that computes something else: the outcome changes, and --dynamo-compare says so.
    # (Zeros of each output's own dtype: a bool output times 0 would be an int, which npdynamo's
    # check of a backend's outputs reports as a BackendError before any value is compared.)
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import numpy as np
        import dynamo

        def zero(o):
            return type(o)(0) if isinstance(o, np.generic) else np.zeros_like(o)

        @dynamo.register_backend("wrong")
        def wrong(gm, example_inputs):
            def run(*args):
                out = gm.forward(*args)
                return tuple(map(zero, out)) if isinstance(out, tuple) else zero(out)
            return run
    """))
    path = tmp_path / "test_wrong.py"
    path.write_text(textwrap.dedent("""
        import numpy as np

        def double(x):
            return x * 2

        def test_double():
            assert double(np.ones(3)).sum() == 6
    """))
    out = _pytest(path, "--dynamo=wrong", "--dynamo-compare")
    assert "plain Python passed, under npdynamo failed (AssertionError)" in out.stdout, out.stdout


def test_a_third_party_test_suite_runs_under_capture_with_the_same_outcomes(tmp_path):
    """numpy-financial's own tests (26, written by others, installed from the package index):
    every outcome as in plain Python, and real graphs captured from the library's code."""
    pytest.importorskip("numpy_financial")
    out = _run(["-m", "pytest", "-p", "dynamo.pytest_plugin", "-p", "no:cacheprovider",
                "-W", "ignore::RuntimeWarning", "--pyargs", "numpy_financial",
                "--dynamo=eager", "--dynamo-compare"], tmp_path)
    assert "26 passed" in out.stdout, out.stdout[-3000:]
    assert "every test had the same outcome as in plain Python" in out.stdout
    summary = out.stdout.split("npdynamo (eager backend)")[1]
    graphs = int(summary.split("tests run under capture: ")[1].split(" graphs")[0])
    assert graphs >= 20, summary
