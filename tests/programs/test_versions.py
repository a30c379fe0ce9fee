"""The program corpus gives the same graphs, breaks and break reasons on every Python version.

In: versions_baseline.json (made on 3.11 by make_baseline.py) and `corpus.PROGRAMS`, collected on
the interpreter running the test (`report.collect`, eager backend, ~3 s). Out: a failure listing
every program case whose graphs, breaks, break reasons, plain-Python frame reasons or raised
exception type differ from 3.11, unless `KNOWN_DIFFERENCES` lists it for this version with the
reason; and a failure for every listed difference that no longer happens (so the table cannot go
stale). On 3.11 nothing may differ: a failure there means the baseline is stale (rerun
make_baseline.py and review the JSON diff) or a capture regressed.
"""

from __future__ import annotations

import sys

import pytest

from programs.corpus import PROGRAMS
from programs.make_baseline import REFERENCE_VERSION, collect_records, load

VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")

# PEP 709 (3.12+) inlines list/dict/set comprehensions into the enclosing frame. On 3.11 a
# comprehension is a function of its own, called with an iterator: the translator inlines it,
# and when it cannot finish (a break inside), the graph breaks at the call of the comprehension
# function, which then runs as a frame of its own (usually in plain Python: "iterating over
# <iterator> L['.0']"), or the whole outer frame runs in plain Python if the iterator cannot be
# passed to that call. On 3.12+ the comprehension's loop is a loop of the frame: a break inside
# it ends the graph before the loop (the loop and the rest run in plain Python), and when nothing
# precedes the loop the frame runs in plain Python with the reason of the break itself.
_PEP709 = "3.12+ PEP 709 inlines the comprehension into the frame: "

_COMPREHENSION_DIFFERENCES = {
    "dot_products_zip[0]": _PEP709 + (
        "3.11: tracing the <listcomp> stops at float(np.dot(..)); the outer frame cannot pass "
        "the zip iterator to the <listcomp> call (cannot rebuild a zip iterator) and runs in "
        "plain Python, and so does the <listcomp> frame (iterating over zip). 3.12+: one frame "
        "in plain Python with the float() reason. 0 graphs and 0 breaks on both."),
    "stats_dict_comprehension[0-float64]": _PEP709 + (
        "3.11: tracing the <dictcomp> stops at f(x) (np.max taken out of sorted(..)); the outer "
        "frame cannot pass the list iterator to the <dictcomp> call (cannot rebuild constant "
        "<function max>, made while tracing) and runs in plain Python, and so does the "
        "<dictcomp> frame (iterating over list_iterator). 3.12+: one frame in plain Python with "
        "the reason of f(x) (calling constant <function max>). 0 graphs and 0 breaks on both."),
    "global_function_table_and_argmax[0-float64]": _PEP709 + (
        "3.11 also lists the <listcomp> frame (iterating over the array iterator, plain "
        "Python); 3.12+ has no such frame. The outer frame's reason and the counts are equal."),
    "comprehension_with_print[0-float64]": _PEP709 + (
        "3.11: print() inside the <listcomp> breaks the graph at the call of the <listcomp> "
        "function (1 break; that frame then runs in plain Python: iterating over its "
        "tuple_iterator). 3.12+: print() is in a loop of the frame and nothing precedes it, so "
        "the frame runs in plain Python with the print() reason (0 breaks). 0 graphs on both."),
    "generator_with_print[0-float64]": _PEP709 + (
        "3.11: the resume function after chunks() breaks twice at the <listcomp> that iterates "
        "the generator, then the <listcomp> frame runs in plain Python; 3.12+: the loop is in "
        "the resume function, which breaks once and runs in plain Python with the same reason "
        "(as an explicit for loop over the generator does on 3.11). 0 graphs on both."),
}

#: (version, "program[case]") -> why that case differs from 3.11 on that version. Only inherent
#: version differences belong here; a translator bug (e.g. an opcode of one version without a
#: handler) gets fixed in dynamo/ instead, so this test fails on that version until it is.
_SUPER = ("3.12+ compiles ``super().f`` into one LOAD_SUPER_ATTR: the graph breaks at it as at "
          "3.11's call of super, with the same graphs and breaks, but the method reaches the "
          "resume function as a stack value, so the next reason names it without '.transform'")
_NUMPY_22_COUNT = ("NumPy 2.2 (the newest NumPy for 3.10) returns a Python int from "
                   "np.count_nonzero, where NumPy 2.3+ returns np.intp: after the count_nonzero "
                   "break, n_out / x.size is Python arithmetic on constants, so the resume "
                   "function has no graph (1 graph instead of 2); results are right")

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    **{("3.12", case): why for case, why in _COMPREHENSION_DIFFERENCES.items()},
    **{("3.13", case): why for case, why in _COMPREHENSION_DIFFERENCES.items()},
    ("3.12", "super_method_call[0-float64]"): _SUPER,
    ("3.13", "super_method_call[0-float64]"): _SUPER,
    ("3.10", "outlier_fraction[0-float64]"): _NUMPY_22_COUNT,
    ("3.10", "outlier_fraction[1-float32]"): _NUMPY_22_COUNT,
}


def _field_diff(key: str, before: object, now: object, version: str) -> str:
    return f"  {key}: 3.11 baseline {before!r}\n  {' ' * len(key)}  {version} now      {now!r}"


def compare(baseline: dict[str, dict], current: dict[str, dict], version: str,
            known: dict[tuple[str, str], str]) -> list[str]:
    """Problems, one line each: unexpected differences, stale known differences, missing cases."""
    problems = []
    for case in sorted(baseline.keys() | current.keys()):
        if case not in current or case not in baseline:
            where = "the corpus" if case in current else "this run"
            problems.append(f"{case}: missing from the baseline or the corpus (only in {where}); "
                            "regenerate the baseline with make_baseline.py on 3.11")
            continue
        before, now = baseline[case], current[case]
        listed = (version, case) in known
        if before == now and listed:
            problems.append(f"{case}: listed in KNOWN_DIFFERENCES for {version} but no longer "
                            "differs from 3.11; remove the entry")
        elif before != now and not listed:
            fields = [_field_diff(key, before[key], now.get(key), version)
                      for key in before if before[key] != now.get(key)]
            problems.append(f"{case} differs from 3.11 on {version}:\n" + "\n".join(fields))
    for v, case in known:
        if v == version and case not in baseline:
            problems.append(f"{case}: in KNOWN_DIFFERENCES for {version} but not in the corpus")
    return problems


def test_known_differences_name_real_cases_and_versions():
    baseline = load()
    for (version, case), reason in KNOWN_DIFFERENCES.items():
        assert version in SUPPORTED and version != "3.11", (version, case)
        assert case in baseline, f"{case} is not a program case of the baseline"
        assert len(reason) > 20, f"give the reason of {version} {case}"


def test_baseline_covers_every_program_case():
    expected = {f"{p.name}[{c.id}]" for p in PROGRAMS for c in p.cases}
    assert set(load()) == expected, "the corpus changed: rerun make_baseline.py on 3.11"


def test_compare_reports_new_stale_and_missing_differences():
    one = {"graphs": 1, "breaks": 0, "break_reasons": [], "python_frames": [], "raised": ""}
    two = dict(one, graphs=2, breaks=1, break_reasons=["print() has a side effect"])
    baseline = {"a[0]": one, "b[0]": one}
    assert compare(baseline, {"a[0]": one, "b[0]": one}, "3.12", {}) == []
    new = compare(baseline, {"a[0]": two, "b[0]": one}, "3.12", {})
    assert len(new) == 1 and "a[0] differs" in new[0] and "print()" in new[0]
    assert compare(baseline, {"a[0]": two, "b[0]": one}, "3.12", {("3.12", "a[0]"): "x"}) == []
    # A listed difference that is gone fails; one listed for another version does not matter.
    stale = compare(baseline, baseline, "3.12", {("3.12", "a[0]"): "x", ("3.13", "b[0]"): "y"})
    assert len(stale) == 1 and "no longer differs" in stale[0]
    assert len(compare(baseline, {"a[0]": one}, "3.12", {})) == 1
    assert len(compare(baseline, baseline, "3.12", {("3.12", "gone[0]"): "x"})) == 1


@pytest.mark.skipif(VERSION not in SUPPORTED, reason="npdynamo does not run on this version")
def test_same_graphs_and_breaks_as_on_3_11():
    problems = compare(load(), collect_records(), VERSION, KNOWN_DIFFERENCES)
    hint = ("the baseline is stale or a capture changed: rerun make_baseline.py and review the "
            "JSON diff" if sys.version_info[:2] == REFERENCE_VERSION else
            "fix the translator, or list an inherent version difference in KNOWN_DIFFERENCES")
    assert not problems, f"{len(problems)} problem(s) on {VERSION} ({hint}):\n" + \
        "\n".join(problems)
