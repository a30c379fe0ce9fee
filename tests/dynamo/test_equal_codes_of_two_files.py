"""Two code objects equal by value (CPython's ``==`` ignores the file name) but of two files are
two codes to npdynamo: each keeps its own decoded instructions, transformed code and loop
kernels, so a warning or a traceback names the file that ran. (A cache of decoded code keyed by
equality gave the second file's function the first one's file name: the differential fuzzer's
programs, one file each, saw warnings attributed to the wrong file.)"""

from __future__ import annotations

import warnings

import numpy as np

import dynamo

SOURCE = """
import numpy as np
def f(x):
    y = x * 2.0
    print(end="")  # (a graph break: the rest runs in a resume function)
    return np.float64(1.0) / (y[0] - y[0])
"""


def _function(path):
    namespace = {}
    exec(compile(SOURCE, str(path), "exec"), namespace)
    return namespace["f"]


def test_equal_codes_of_two_files_keep_their_own_file(tmp_path):
    first, second = _function(tmp_path / "one.py"), _function(tmp_path / "two.py")
    assert first.__code__ == second.__code__  # (equal, as CPython compares codes)
    x = np.ones(3)
    for fn, name in ((first, "one.py"), (second, "two.py")):
        compiled = dynamo.compile(fn, backend="eager")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert np.isinf(compiled(x))
        assert [w.filename.rsplit("/", 1)[-1] for w in caught] == [name]
        (entry,) = dynamo.cache_entries(fn)
        assert entry.code.co_filename.endswith(name)
