"""Generated code does not depend on instruction offsets (issue 9: resume functions, exception
tables and prologues differ per version). With `dynamo.config.debug_insert_nops` every code
object npdynamo makes -- transformed code, resume functions, loop and try/with body functions --
gets a NOP before each instruction after its prologue; the program corpus must then behave
exactly as plain NumPy (the oracle of test_corpus.py: results, views, mutations, exceptions,
stdout, warnings), with the same graphs and break reasons as without the NOPs. (Found this way:
3.11's specialised PRECALL skips the CALL that must follow it, and 3.12+'s FOR_ITER the END_FOR
at its target, so the option keeps those pairs together; loop planning assumed GET_ITER and
FOR_ITER adjacent; the recognisers of 3.12 comprehension handlers assumed adjacent stores.)

In: `corpus.PROGRAMS`, the first case of each, on the eager backend (the bytecode is what is
tested here, not the kernels). Run on every CPython version by .ci/run.
"""

from __future__ import annotations

import contextlib
import copy
import dis
import io
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import _C, config
from programs.corpus import PROGRAMS
from programs.oracle import check_program


def _capture(prog, nops: bool) -> tuple:
    """Graph count and break reasons of the first case (on fresh copies of its arguments:
    a program may change them), or the exception it raises."""
    case = prog.cases[0]
    args, kwargs = copy.deepcopy((case.args, case.kwargs))
    dynamo.reset()
    with config.patch(debug_insert_nops=nops), warnings.catch_warnings(), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            out = dynamo.explain(prog.fn)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the program's own error, compared as such
            return ("raised", type(exc).__name__)
    return out.graph_count, out.break_reasons


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program_with_nops_matches_numpy(prog):
    case = prog.cases[0]
    with config.patch(debug_insert_nops=True):
        outcome = check_program(prog.fn, case.args, case.kwargs, "eager", prog.warns)
    if prog.graphs is not None:
        assert outcome.graphs_first_call == prog.graphs
    # The same graphs and breaks: no decision depends on instruction offsets (a loop whose
    # GET_ITER and FOR_ITER were not adjacent ran in plain Python, bootstrap_mean).
    assert _capture(prog, True) == _capture(prog, False)


def _breaks_everywhere(x, log):
    y = np.sin(x)
    def get():
        return y
    try:
        print("in a try body")
        z = np.linalg.inv(np.eye(2) * y[0])
    except np.linalg.LinAlgError:
        z = None
    for i in range(2):
        log.append(i)
        print("loop", i)
    return z, get()


def test_the_generated_code_really_carries_the_nops(capsys):
    # (a test that could not fail if the option did nothing)
    def nops(code):
        names = [i.opname for i in dis.get_instructions(code)]
        return names.count("NOP"), len(names)

    x = np.ones(3)
    with config.patch(debug_insert_nops=True):
        got = dynamo.compile(_breaks_everywhere)(x, [])
    expected = _breaks_everywhere(x, [])
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    (_, code), = _C.get_cache_entries(_breaks_everywhere.__code__)
    count, total = nops(code)
    assert count >= (total - count) // 2, dis.Bytecode(code).dis()
    dynamo.reset()
    dynamo.compile(_breaks_everywhere)(x, [])
    (_, plain), = _C.get_cache_entries(_breaks_everywhere.__code__)
    assert nops(plain)[0] < count
