"""How much of the program corpus npdynamo captures: graphs, breaks and the reasons, per program.

In: `corpus.PROGRAMS`. Out: a table on stdout (one row per program case: graphs, breaks, frames
run in plain Python, compile time) and a summary: programs captured in one graph, programs with
zero graphs, total breaks, and every break reason and plain-Python frame reason grouped with
counts (locations stripped), most frequent first. They say what the translator should learn next.

Run: ``cd /work/main && .venv/bin/python tests/programs/report.py [--backend c] [--verbose]``.
`test_corpus.py` calls `collect` and `summarize` so the report keeps working.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import re
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # run as a script: make `programs.*` and `dynamo` importable
    _here = Path(__file__).resolve()
    sys.path[:0] = [str(_here.parents[1]), str(_here.parents[2])]

import dynamo  # noqa: E402
from programs.corpus import PROGRAMS, Program  # noqa: E402


@dataclass
class Row:
    program: str
    case: str
    graphs: int
    breaks: int
    break_reasons: list[str]
    skipped_frames: list[str]
    seconds: float  # explain(): compile and run, from empty caches
    warnings: list[str] = field(default_factory=list)
    error: str = ""


def reason_kind(reason: str) -> str:
    """`qualname: why at file:line` -> `why` (so equal reasons group together)."""
    text = reason.split(": ", 1)[1] if ": " in reason else reason
    text = re.sub(r" at \S+:\d+(\s.*)?$", "", text)  # " at file:line  source line"
    # Names of values, sizes and places vary per program; the kind of reason does not.
    text = re.sub(r"\b[LG]\['[^']*'\](\[\d+\])*", "<value>", text)  # keeps a method name
    text = re.sub(r" \(/\S+:\d+\)", "", text)
    text = re.sub(r"(ndarray \w+)\[[\d, ]*\]", r"\1", text)
    text = re.sub(r"\bof (\w+) object\b", "of an object", text)
    text = re.sub(r"\b(dict|list|tuple) of \d+ items\b", r"\1 of N items", text)
    text = re.sub(r"\bconstant '[^']*'", "a constant", text)
    text = re.sub(r"\bline \d+\b", "line N", text)
    return text.strip()


def collect(programs: list[Program] = PROGRAMS, backend: str = "eager") -> list[Row]:
    rows = []
    for prog in programs:
        for case in prog.cases:
            args, kwargs = copy.deepcopy((case.args, case.kwargs))
            start = time.perf_counter()
            # (npdynamo's diagnostics as warnings, to be counted: internal errors, limits)
            with dynamo.config.patch(emit_warnings=True), \
                    warnings.catch_warnings(record=True) as caught, \
                    contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("always")
                try:
                    out = dynamo.explain(prog.fn, backend=backend)(*args, **kwargs)
                    error = ""
                except Exception as exc:  # programs that raise on purpose: no ExplainOutput
                    out, error = None, f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - start
            if out is None:
                rows.append(Row(prog.name, case.id, -1, 0, [], [], seconds,
                                [str(w.message) for w in caught], error))
                continue
            rows.append(Row(prog.name, case.id, out.graph_count, out.graph_break_count,
                            list(out.break_reasons), list(out.skipped_frames), seconds,
                            [str(w.message) for w in caught]))
    dynamo.reset()
    return rows


@dataclass
class Summary:
    programs: int
    cases: int
    one_graph: int  # programs whose every case is one graph with no break
    zero_graphs: int  # programs whose every case ran without any graph
    total_breaks: int
    break_kinds: Counter
    skipped_kinds: Counter
    slow: list[str]  # cases whose explain() took over 2 s
    internal_errors: list[str]
    npdynamo_warnings: list[str]  # e.g. the cache-limit RuntimeWarning


def summarize(rows: list[Row]) -> Summary:
    by_program: dict[str, list[Row]] = {}
    for row in rows:
        by_program.setdefault(row.program, []).append(row)
    return Summary(
        programs=len(by_program),
        cases=len(rows),
        one_graph=sum(all(r.graphs == 1 and r.breaks == 0 for r in rs)
                      for rs in by_program.values()),
        zero_graphs=sum(all(r.graphs == 0 for r in rs) for rs in by_program.values()),
        total_breaks=sum(r.breaks for r in rows),
        break_kinds=Counter(reason_kind(b) for r in rows for b in r.break_reasons),
        skipped_kinds=Counter(reason_kind(s) for r in rows for s in r.skipped_frames),
        slow=[f"{r.program}[{r.case}] {r.seconds:.2f} s" for r in rows if r.seconds > 2.0],
        internal_errors=[f"{r.program}[{r.case}]: {w}" for r in rows for w in r.warnings
                         if "internal error" in w.lower()],
        npdynamo_warnings=[f"{r.program}[{r.case}]: {w}" for r in rows for w in r.warnings
                           if w.startswith("npdynamo")],
    )


def format_report(rows: list[Row], summary: Summary, verbose: bool = False) -> str:
    lines = [f"{'program[case]':44} {'graphs':>6} {'breaks':>6} {'py frames':>9} {'ms':>8}"]
    for r in rows:
        graphs = "raised" if r.graphs < 0 else str(r.graphs)
        lines.append(f"{r.program + '[' + r.case + ']':44} {graphs:>6} {r.breaks:>6} "
                     f"{len(r.skipped_frames):>9} {r.seconds * 1e3:8.1f}")
        if verbose:
            lines.extend(f"      break: {b}" for b in r.break_reasons)
            lines.extend(f"      python: {s}" for s in r.skipped_frames)
            lines.extend(f"      warning: {w}" for w in r.warnings)
    s = summary
    lines += [
        "",
        f"programs: {s.programs} ({s.cases} cases)",
        f"captured in one graph (no break, every case): {s.one_graph}",
        f"zero graphs (every case ran in plain Python): {s.zero_graphs}",
        f"total graph breaks: {sum(s.break_kinds.values())}",
        "",
        "break reasons (count):",
    ]
    lines += [f"  {n:3d}  {kind}" for kind, n in s.break_kinds.most_common()]
    lines.append("frames run entirely in plain Python, reasons (count):")
    lines += [f"  {n:3d}  {kind}" for kind, n in s.skipped_kinds.most_common()]
    if s.slow:
        lines.append("slower than 2 s: " + ", ".join(s.slow))
    if s.npdynamo_warnings:
        lines.append("npdynamo warnings:")
        lines += [f"  {w}" for w in s.npdynamo_warnings]
    if s.internal_errors:
        lines.append("internal errors:")
        lines += [f"  {e}" for e in s.internal_errors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--verbose", "-v", action="store_true", help="every reason, per case")
    opts = parser.parse_args(argv)
    rows = collect(backend=opts.backend)
    print(format_report(rows, summarize(rows), opts.verbose))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
