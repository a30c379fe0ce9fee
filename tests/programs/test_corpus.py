"""Every program of the corpus (tests/programs/corpus.py) behaves exactly like plain NumPy when
compiled by npdynamo, on the eager backend and on the C backend (kernels even for small arrays).

In: `corpus.PROGRAMS` and their argument cases. Out: one test per program, case and backend,
checked by `oracle.check_program` (results, views, argument mutations, exceptions, stdout,
warnings; first call and cache hit). Graph counts are pinned only where a program declares
them (stable, meaningful captures); `report.py` prints the full capture table.

Programs with several cases also run through one compiled function, case after case, twice
round (guards must tell the cases apart). Known npdynamo bugs found by the corpus are listed once,
in `BUGS` (strict xfail: remove an entry when its fix lands and the test then covers it).

Cost: the C backend builds ~200 small kernels with gcc (-O3), kept in the disk cache
(docs/c_backend.md section 6): ~10-45 s with a warm cache; a cold cache (first run, or after a
change of the generated C) adds the gcc time, ~0.3 s per kernel on an idle machine.
"""

from __future__ import annotations

import pytest

from programs.corpus import PROGRAMS
from programs.oracle import check_program, check_program_cases
from programs.report import collect, format_report, summarize

BACKENDS = ("eager", "c")

#: Known npdynamo bugs the corpus found, one entry each, keyed "program[case]-backend",
#: "program[case]" (both backends) or "program" (every case and backend). Minimal repros are in
#: test_bug_repros.py. Remove an entry when its fix lands (strict xfail: the test then fails).
BUGS: dict[str, str] = {}


def _params():
    for prog in PROGRAMS:
        for case in prog.cases:
            for backend in BACKENDS:
                test_id = f"{prog.name}[{case.id}]-{backend}"
                marks = []
                reason = (BUGS.get(test_id) or BUGS.get(f"{prog.name}[{case.id}]")
                          or BUGS.get(prog.name))
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=f"BUG: {reason}"))
                yield pytest.param(prog, case, backend, id=test_id, marks=marks)


def test_the_corpus_is_big_enough():
    assert len(PROGRAMS) >= 80
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)


@pytest.mark.parametrize("prog, case, backend", list(_params()))
def test_program_matches_numpy(prog, case, backend):
    outcome = check_program(prog.fn, case.args, case.kwargs, backend, prog.warns)
    if prog.graphs is not None:
        assert outcome.graphs_first_call == prog.graphs, (
            f"expected {prog.graphs} graph(s), got {outcome.graphs_first_call}")
        assert outcome.graphs_second_call == 0, "the second call with equal inputs recompiled"


def _multi_case_params():
    for prog in PROGRAMS:
        if len(prog.cases) < 2:
            continue
        for backend in BACKENDS:
            test_id = f"{prog.name}-{backend}"
            reasons = [BUGS.get(f"{prog.name}[{case.id}]-{backend}")
                       or BUGS.get(f"{prog.name}[{case.id}]") for case in prog.cases]
            reasons.append(BUGS.get(prog.name))
            reason = next((r for r in reasons if r), None)
            marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {reason}")] if reason else []
            yield pytest.param(prog, backend, id=test_id, marks=marks)


@pytest.mark.parametrize("prog, backend", list(_multi_case_params()))
def test_one_compiled_function_serves_every_case(prog, backend):
    check_program_cases(prog.fn, [(c.args, c.kwargs) for c in prog.cases], backend,
                        prog.warns)


def test_report_counts_graphs_breaks_and_reasons_without_internal_errors():
    rows = collect(backend="eager")
    summary = summarize(rows)
    assert summary.programs == len(PROGRAMS)
    assert summary.cases == sum(len(p.cases) for p in PROGRAMS)
    assert summary.internal_errors == []
    assert 0 < summary.one_graph < summary.programs
    assert sum(summary.break_kinds.values()) == summary.total_breaks > 0
    text = format_report(rows, summary)
    assert "break reasons (count):" in text and f"programs: {summary.programs}" in text
    by_name = {(r.program, r.case): r for r in rows}
    assert by_name[("zscore", "0-float64")].graphs == 1  # a pinned one-graph program
    assert by_name[("mse_with_print", "0-float64")].breaks >= 1  # print always breaks
