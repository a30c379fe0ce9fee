"""The generated graph source is readable through linecache and dies with its graph; the
user's own linecache stays as the user left it.

In: compiled functions from a user file, a hand-built graph module that raises, a compiled
function that is dropped. Out: the graph's source shows in tracebacks and ``inspect.getsource``
and leaves linecache when the graph dies (by reference counting); compiling reads the user's
source without adding a linecache entry for the user's file.
"""

from __future__ import annotations

import gc
import inspect
import linecache
import operator
import traceback

import numpy as np
import pytest

import dynamo
import fx
from support.sources import fresh_function


def test_compiling_adds_no_linecache_entry_for_user_files(tmp_path):
    user_file = tmp_path / "user_module.py"
    user_file.write_text("def f(x):\n    return np.sin(x) + 1\n")
    f = fresh_function(user_file.read_text(), str(user_file))
    linecache.clearcache()
    x = np.ones(3)
    gms = []
    compiled = dynamo.compile(f, backend=lambda gm, inputs: gms.append(gm) or gm.forward)
    np.testing.assert_array_equal(compiled(x), np.sin(x) + 1)
    assert len(gms) == 1
    assert str(user_file) not in linecache.cache  # the user's source was read without it
    assert "return np.sin(x) + 1" in gms[0].code  # ...and still shows in the generated code


def test_graph_source_shows_in_tracebacks_and_getsource_and_dies_with_the_graph():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.getitem, (x, 5)))
    gm = fx.GraphModule(g, name="Hardening")
    assert "x[5]" in inspect.getsource(gm.forward)
    with pytest.raises(IndexError) as info:
        gm(np.ones(3))
    text = "".join(traceback.format_exception(info.value))
    assert gm.filename in text and "x[5]" in text
    filename = gm.filename
    del gm, info, text
    assert filename not in linecache.cache  # freed by reference counting, no gc.collect()


def test_compiled_graph_source_is_dropped_with_the_compiled_function():
    f = fresh_function("def f(x):\n    return np.cos(x) * 2\n", __file__)
    names = []

    def backend(gm, inputs):
        names.append(gm.filename)  # keeps only the name, not the graph module
        return gm.forward

    dynamo.compile(f, backend=backend)(np.ones(3))
    assert len(names) == 1 and names[0] in linecache.cache
    del f
    dynamo.reset()
    gc.collect()  # (see test_leaves_no_garbage.py, test_a_dropped_compiled_function_...)
    assert names[0] not in linecache.cache
