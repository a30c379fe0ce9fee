"""Write the per-version capture baseline of the program corpus: versions_baseline.json.

In: `corpus.PROGRAMS`, run through `report.collect` (eager backend, empty caches) on CPython
3.11, the reference version. Out: tests/programs/versions_baseline.json, one record per program
case ("program[case]"): graphs (-1: the program raised, on purpose), graph breaks, the break
reasons and the reasons of frames run entirely in plain Python, each normalised by `normalise`
(`report.reason_kind`: no qualnames, files, lines or value names; plus no object addresses), in
the order they happened, and the type of the exception a program raised. `test_versions.py`
collects the same records on whatever interpreter runs it and compares them with this file.

Run (only on 3.11; it refuses other versions):
``cd /work/main && .venv/bin/python tests/programs/make_baseline.py``.
Rerun it whenever the corpus or the 3.11 captures change on purpose (test_versions.py then fails
on 3.11 and says so), and review the diff of the JSON file: every change in it is a change in
what npdynamo captures. The output is deterministic (sorted keys, no timings, no addresses):
running the script twice writes the same bytes (`--check` verifies the file is current).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: make `programs.*` and `dynamo` importable
    _here = Path(__file__).resolve()
    sys.path[:0] = [str(_here.parents[1]), str(_here.parents[2])]

from programs.report import Row, collect, reason_kind

#: Modules a corpus program imports the first time it runs (np.median imports numpy.ma). The
#: import runs inside the compiled frame, so npdynamo traces the import machinery and any import
#: hook (pytest's assertion rewriter): the reasons would depend on what ran before. Imported
#: up front, they do not.
LAZY_IMPORTS = ("numpy.ma",)

BASELINE = Path(__file__).resolve().with_name("versions_baseline.json")
REFERENCE_VERSION = (3, 11)


def normalise(reason: str) -> str:
    """A break reason without anything that varies between runs or versions but its kind."""
    # `<function max at 0x7f...>`: the address changes on every run.
    return re.sub(r" at 0x[0-9a-fA-F]+>", ">", reason_kind(reason))


def record(row: Row) -> dict:
    """What must agree between versions for one program case (a JSON-able dict)."""
    return {
        "graphs": row.graphs,
        "breaks": row.breaks,
        "break_reasons": [normalise(r) for r in row.break_reasons],
        "python_frames": [normalise(r) for r in row.skipped_frames],
        # The type only: CPython rewords its error messages between versions.
        "raised": row.error.split(":", 1)[0] if row.error else "",
    }


def records(rows: list[Row]) -> dict[str, dict]:
    return {f"{r.program}[{r.case}]": record(r) for r in rows}


def collect_records() -> dict[str, dict]:
    """Every corpus case's record on this interpreter (eager backend, from empty caches)."""
    for name in LAZY_IMPORTS:
        importlib.import_module(name)
    return records(collect(backend="eager"))


def render(cases: dict[str, dict]) -> str:
    """The baseline file's text (stable: sorted keys, fixed indentation, final newline)."""
    data = {"python": ".".join(map(str, REFERENCE_VERSION)), "backend": "eager", "cases": cases}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load() -> dict[str, dict]:
    """The committed baseline's records, keyed "program[case]"."""
    if not BASELINE.exists():
        raise FileNotFoundError(
            f"{BASELINE} is missing: generate it on 3.11 with "
            "`.venv/bin/python tests/programs/make_baseline.py`")
    return json.loads(BASELINE.read_text())["cases"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the file differs from a fresh collection")
    opts = parser.parse_args(argv)
    if sys.version_info[:2] != REFERENCE_VERSION:
        print(f"make_baseline.py: the baseline is generated on CPython 3.11, this is "
              f"{sys.version_info.major}.{sys.version_info.minor}; run it with "
              "/work/main/.venv/bin/python", file=sys.stderr)
        return 2
    text = render(collect_records())
    if opts.check:
        current = BASELINE.read_text() if BASELINE.exists() else ""
        print("up to date" if current == text else f"{BASELINE.name} is stale")
        return 0 if current == text else 1
    BASELINE.write_text(text)
    print(f"wrote {BASELINE} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
