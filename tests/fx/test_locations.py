"""`fx.locations`: generated code relocated to the user's lines keeps its bytes and offsets.

The line tables are written by `fx.locations` itself (3.10's pairs, 3.11+'s location entries),
so these check the encoding against CPython's own decoder (``co_lines``) on whichever version
runs them, with jumps far beyond one entry's reach in both directions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fx
from fx import locations


def _generated(n: int):
    src = "def forward(a):\n" + "".join(f"    a = a + {i}\n" for i in range(n)) + "    return a\n"
    namespace: dict = {}
    exec(compile(src, "<fx-graph test>", "exec"), namespace)  # noqa: S102
    return namespace["forward"]


@pytest.mark.parametrize("mapping", [
    lambda line: 3000 - 3 * line,               # backwards, small steps
    lambda line: 50000 + line if line % 7 == 0 else 10 + line,  # jumps of ~50,000 both ways
    lambda line: 7,                             # everything on one line
])
def test_the_line_table_says_what_was_asked_and_the_bytes_stay(mapping):
    fn = _generated(400)
    code = fn.__code__
    lines = {line: mapping(line) for line in range(2, 403)}
    new = locations._relocated_code(code, "/user/file.py", locations._user_lines(code, lines))
    assert new is not None
    assert new.co_code == code.co_code and new.co_filename == "/user/file.py"
    user_line = locations._user_lines(code, lines)
    expected = [(start, end, user_line(line)) for start, end, line in code.co_lines()]
    assert locations._merged(new.co_lines()) == locations._merged(expected)


def test_lines_without_a_node_take_the_node_line_above():
    user_line = locations._user_lines(None, {3: 30, 8: 80})
    assert [user_line(n) for n in (None, 1, 3, 5, 8, 9)] == [30, 30, 30, 30, 80, 80]


def test_a_hand_built_graph_is_left_as_generated():
    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(np.log, (x,)))
    gm = fx.GraphModule(graph)
    assert gm.forward.__code__.co_filename.startswith("<fx-graph")
    assert locations.origin(gm.forward.__code__) is None
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        gm(np.array([-1.0]))
    assert seen[0].filename == gm.filename
