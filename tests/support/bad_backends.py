"""Deliberately wrong backends for tests/tools/test_repro.py (importable, so a repro written
with one can be rerun in another process)."""

from __future__ import annotations

import numpy as np


def cos_is_sin(gm, example_inputs):
    """Computes np.sin where the graph says np.cos (a stand-in for a wrong kernel)."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is np.cos:
            node.target = np.sin
    gm.recompile()
    return gm.forward


def raises_when_called(gm, example_inputs):
    def run(*args):
        raise RuntimeError("kernel crashed")
    return run


def raises_when_compiling(gm, example_inputs):
    raise RuntimeError("cannot lower this graph")


def forgets_in_place(gm, example_inputs):
    """Runs the graph on copies of its inputs: an in-place change never reaches the caller."""
    def run(*args):
        return gm.forward(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return run
