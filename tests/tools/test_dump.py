"""dynamo.config.dump_dir: a folder per compiled frame with its graph code (the code that runs
is compiled from that file), bytecode, guards, resume/body functions and kernels (issue 10)."""

from __future__ import annotations

import linecache
import os
import sys
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import config


def with_break(x, y):
    a = np.sin(x) * y
    print("a break")
    with np.errstate(divide="ignore"):
        b = 1.0 / (a - a)
    return b + 1.0


def test_every_compiled_frame_gets_a_folder(tmp_path, capsys):
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm.forward.__code__.co_filename, gm.code))
        return gm.forward

    with config.patch(dump_dir=str(tmp_path)):
        got = dynamo.compile(with_break, backend=backend)(np.ones(3), np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(got, with_break(np.ones(3), np.ones(3)))
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders[0] == "0000_with_break" or folders[0].endswith("_with_break"), folders
    # (3.10 compiles no with-body function: docs/python_versions.md)
    assert sys.version_info < (3, 11) or any("with_body_at_line" in name
                                             for name in folders), folders
    first = tmp_path / folders[0]
    assert {"graph.py", "bytecode.txt", "guards.py", "guards.txt", "frame.txt",
            "parts.txt"} <= {p.name for p in first.iterdir()}
    assert "ORIGINAL" in (first / "bytecode.txt").read_text()
    assert "NDARRAY_MATCH" in (first / "guards.txt").read_text()
    guard_text = (first / "guards.py").read_text()
    assert guard_text.startswith("def ___check_") and "___ndarray" in guard_text
    # the Python guard function is compiled from that file (a debugger steps through it)
    from dynamo import _C

    check_fn = _C.get_cache_entries(with_break.__code__)[0][0]
    assert check_fn.python_fn.__code__.co_filename == str(first / "guards.py")
    assert "print() has a side effect" in (first / "frame.txt").read_text()
    assert "resume at line" in (first / "parts.txt").read_text()
    # the graph runs from the file: a debugger and tracebacks show its lines
    for filename, code in seen:
        assert os.path.isfile(filename) and str(tmp_path) in filename
        assert open(filename).read() == code
        assert linecache.getline(filename, 1).startswith("def forward(")


def test_the_c_backend_dumps_its_kernels(tmp_path):
    def chain(x):
        return ((x * 2.0 + 1.0) * 0.5 - x * x) / (x * x + 2.0)

    with config.patch(dump_dir=str(tmp_path)):
        dynamo.compile(chain, backend="c")(np.linspace(0, 1, 100_000))
    (folder,) = tmp_path.iterdir()
    assert "kernel" in (folder / "kernels.txt").read_text().lower()


def test_a_loop_kernel_dumps_its_ir_and_c(tmp_path):
    def fill(a, n):
        for i in range(n):
            a[i] = i * 0.5
        return a

    with config.patch(dump_dir=str(tmp_path)):
        dynamo.compile(fill, backend="c")(np.zeros(8), 8)
    (folder,) = tmp_path.iterdir()
    text = (folder / "loops.txt").read_text()
    assert text.startswith("== fill_line") and "loop nest fill_line" in text
    assert "-- C --" in text and "int npd_loop(" in text
    assert "loop = fill_line" in (folder / "graph.py").read_text()


def test_an_unwritable_dump_dir_warns_and_compiles(tmp_path, monkeypatch):
    import dynamo.dump as dump

    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(dump, "_failed", False)
    with config.patch(dump_dir=str(blocker / "sub"), emit_warnings=True):
        with pytest.warns(RuntimeWarning, match="cannot write the dump directory"):
            got = dynamo.compile(lambda x: np.cos(x) * 2.0)(np.ones(2))
    np.testing.assert_array_equal(got, np.cos(np.ones(2)) * 2.0)


def test_dump_dir_is_validated():
    with pytest.raises(TypeError, match="dump_dir"):
        config.dump_dir = 3


def test_a_warning_at_a_frame_without_a_line_number_does_not_fail():
    # (warnings.warn_explicit needs an int line; a frame at an instruction without a line
    # number gave None and the warning itself raised TypeError: CPython's test_traceback)
    import types

    from dynamo.diagnostics import warn_at_user_code

    def caller():
        return warn_at_user_code("npdynamo: a test warning", RuntimeWarning)

    code = caller.__code__.replace(co_linetable=b"")  # no line numbers at all
    lineless = types.FunctionType(code, caller.__globals__, "caller", None, caller.__closure__)
    with pytest.warns(RuntimeWarning, match="a test warning"):
        lineless()
