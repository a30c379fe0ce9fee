"""Run CPython's own regression tests plainly or under npdynamo's global capture.

In:  CPython `test` package module names (``test_code``, ``test_sys_settrace``, ...) on the command
     line, ``--capture none|import|eager|c``, ``--json PATH``, ``-k``/``-x`` id filters.
Out: a JSON file ``{"outcomes": {test_id: status}, "details": {test_id: text}, "seconds": s,
     "translator": {...counts...}}`` where status is one of pass, fail, error, skip, xfail, xpass.
     Exit code 0 whatever the tests did (the caller compares outcome sets); a crash of the
     interpreter is a non-zero exit (and no JSON if it happened before the tests finished).

Called by tests/cpython/test_cpython_suite.py, one subprocess per (module, capture mode), and by
hand::

    .venv/bin/python tests/cpython/run_cpython_tests.py --capture eager --json /tmp/e.json \\
        test_generators
    .venv/bin/python tests/cpython/run_cpython_tests.py --compare test_with test_raise

``--compare`` runs each module plainly and under capture in subprocesses and prints the
differences. Under capture the whole unittest run sits inside ``with dynamo.optimize(backend):``
and the skip rules are widened so that code of CPython's `test` package (which lives in the
standard library directory that npdynamo skips) IS translated: the point is to run the translator
and the hook on a large body of real Python code and check that nothing observable changes.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import fnmatch
import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# Outcome collection ----------------------------------------------------------------------------


class OutcomeResult(unittest.TestResult):
    """Records one status per test id (and per failing subtest id), plus failure text."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__()
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, str] = {}
        self.verbose = verbose
        self._subtest_failed: set[str] = set()
        self.durations: dict[str, float] = {}
        self._started = 0.0

    def _set(self, test, status: str, detail: str | None = None) -> None:
        test_id = test.id() if hasattr(test, "id") else str(test)
        self.outcomes[test_id] = status
        if detail:
            self.details[test_id] = detail[-3000:]
        if self.verbose:
            sys.__stderr__.write(f"  {status}\n")
            sys.__stderr__.flush()

    def startTest(self, test) -> None:
        super().startTest(test)
        self._started = time.perf_counter()
        if self.verbose:
            sys.__stderr__.write(f"{test.id()} ...")
            sys.__stderr__.flush()

    def stopTest(self, test) -> None:
        super().stopTest(test)
        test_id = test.id()
        self.durations[test_id] = time.perf_counter() - self._started
        if test_id not in self.outcomes and test_id in self._subtest_failed:
            self._set(test, "fail")

    def addSuccess(self, test) -> None:
        self._set(test, "pass")

    def addFailure(self, test, err) -> None:
        super().addFailure(test, err)
        self._set(test, "fail", self.failures[-1][1])

    def addError(self, test, err) -> None:
        super().addError(test, err)
        self._set(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason) -> None:
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test, err) -> None:
        self._set(test, "xfail")

    def addUnexpectedSuccess(self, test) -> None:
        self._set(test, "xpass")

    def addSubTest(self, test, subtest, err) -> None:
        if err is not None:
            status = "fail" if issubclass(err[0], test.failureException) else "error"
            text = "".join(traceback.format_exception(*err))
            self._set(subtest, status, text)
            self._subtest_failed.add(test.id())


# Capture ---------------------------------------------------------------------------------------


class TranslatorCounts:
    """Stands in for ``dynamo.records.records.sink``: counts compile records without keeping the
    code objects alive (test_gc and friends watch object lifetimes)."""

    def __init__(self, test_dir: str) -> None:
        self.test_dir = test_dir
        self.seen_test_codes = 0           # codes of the test package the callback was asked about
        self.kinds: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[str] = collections.Counter()
        self.internal_errors: collections.Counter[str] = collections.Counter()
        self.graphs: list[str] = []

    def append(self, rec) -> None:
        if not is_test_code(rec.code.co_filename, self.test_dir):
            self.kinds["other"] += 1
            return
        if rec.compiled is not None:
            self.kinds["graph"] += 1
            # (3.10 codes have no co_qualname)
            name = getattr(rec.code, "co_qualname", rec.code.co_name)
            self.graphs.append(f"{name} ({os.path.basename(rec.code.co_filename)})")
        elif rec.reason and rec.reason.startswith("nothing to compile"):
            self.kinds["no_numpy_ops"] += 1
        elif rec.reason and rec.reason.startswith("internal error"):
            self.kinds["internal_error"] += 1
            self.reasons[rec.reason[:200]] += 1
            self.internal_errors[rec.reason[:300]] += 1
        else:
            self.kinds["fallback"] += 1
            # Strip the location so the same reason from many functions groups together.
            self.reasons[(rec.reason or "?").split(" at ")[0][:120]] += 1

    def summary(self) -> dict:
        return {
            "seen_test_codes": self.seen_test_codes,
            "kinds": dict(self.kinds),
            "top_fallback_reasons": self.reasons.most_common(15),
            "internal_errors": self.internal_errors.most_common(5),
            "graphs": self.graphs[:50],
        }


#: Filenames of the code doctest compiles from the test package's docstrings (test_listcomps,
#: test_genexps, test_setcomps and test_unpack_ex are doctests only on 3.10/3.11).
DOCTEST_FILES = "<doctest test.*>"


def is_test_code(filename: str, test_dir: str) -> bool:
    """Code of CPython's test package: a file under `test_dir`, or a doctest from one."""
    return (os.path.abspath(filename).startswith(test_dir)
            or fnmatch.fnmatchcase(filename, DOCTEST_FILES))


def enable_test_package_translation(test_dir: str, counts: TranslatorCounts,
                                   only_tests: bool = False) -> str:
    """Make npdynamo translate code under `test_dir` (CPython's test package, inside the standard
    library directory that npdynamo skips). Returns how it was done.

    Uses ``dynamo.config.include_dirs`` (the most specific directory wins, so the test package
    beats the stdlib entry of ``skip_dirs``); on a tree without that option it falls back to
    wrapping ``trace_rules.skip_reason`` in this process. Either way ``skip_reason`` is wrapped
    to count the test-package code objects the callback was asked about, and to keep this
    runner's own code out of capture.
    """
    from dynamo import config, trace_rules

    original = trace_rules.skip_reason
    if isinstance(getattr(config, "include_dirs", None), tuple):
        if only_tests:  # diagnosis: keep site-packages out, to separate its bugs from others
            config.skip_dirs = (*config.skip_dirs, *config.include_dirs)
            config.include_dirs = (test_dir,)
        else:
            config.include_dirs = (*config.include_dirs, test_dir)
        # (doctests are compiled from strings: generated code, which `skip_files` skips)
        config.include_files = (*config.include_files, DOCTEST_FILES)
        how = "dynamo.config.include_dirs"
    else:
        how = "monkeypatched trace_rules.skip_reason"

    runner_file = os.path.abspath(__file__)

    def skip_reason(code, *args, **kwargs):
        if os.path.abspath(code.co_filename) == runner_file:
            # This runner is the harness (like unittest itself): its outcome bookkeeping must not
            # be changed by what it measures.
            return "the CPython test runner"
        if is_test_code(code.co_filename, test_dir):
            counts.seen_test_codes += 1
            if how.startswith("monkeypatched"):
                return None
        return original(code, *args, **kwargs)

    trace_rules.skip_reason = skip_reason
    return how


# Running ---------------------------------------------------------------------------------------


def setup_test_support() -> None:
    """What regrtest does before running tests, minus its environment bookkeeping."""
    from test import support

    support.verbose = 0
    support.failfast = False
    # Like `python -m test` without -u: resource-hungry tests (cpu, network, ...) are skipped.
    # DYNAMO_CPYTHON_RESOURCES=all or a comma list turns them on.
    wanted = os.environ.get("DYNAMO_CPYTHON_RESOURCES", "")
    support.use_resources = None if wanted == "all" else [r for r in wanted.split(",") if r]
    support.record_original_stdout(sys.stdout)


def _filtered(suite, patterns: list[str], excludes: list[str]):
    """The tests of `suite` whose id contains one of `patterns` (all of them if none) and none
    of `excludes`."""
    if not patterns and not excludes:
        return suite
    out = unittest.TestSuite()
    for test in _flatten(suite):
        test_id = test.id()
        if patterns and not any(p in test_id for p in patterns):
            continue
        if any(x in test_id for x in excludes):
            continue
        out.addTest(test)
    return out


def _flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


def run_module(name: str, capture: str, verbose: bool, match: list[str] | None = None,
               exclude: list[str] | None = None, only_tests: bool = False) -> dict:
    import test

    if capture != "none":
        # Before the test module, as a user would. "none" never imports npdynamo: it is the
        # oracle. "import" imports it without capturing, to tell the two causes apart.
        import dynamo

    setup_test_support()
    module = importlib.import_module(f"test.{name}")
    suite = _filtered(unittest.TestLoader().loadTestsFromModule(module), match or [],
                      exclude or [])
    result = OutcomeResult(verbose=verbose)
    translator = None
    how = None
    # Tests print a lot; keep it out of the report (the JSON has the failure text).
    sink = io.StringIO() if not verbose else None
    start = time.perf_counter()
    if capture in ("none", "import"):
        _run_quietly(suite, result, sink)
    else:
        from dynamo import records

        test_dir = os.path.dirname(os.path.abspath(test.__file__)) + os.sep
        counts = TranslatorCounts(test_dir)
        how = enable_test_package_translation(test_dir, counts, only_tests)
        records.records.sink = counts
        # unittest calls the result from inside the test's (captured) frames; recording and
        # formatting an outcome is the harness's business, so it runs uncaptured, as in "none".
        for method in _RESULT_METHODS:
            setattr(result, method, dynamo.disable(getattr(result, method)))
        try:
            with dynamo.optimize(capture):
                _run_quietly(suite, result, sink)
        finally:
            records.records.sink = None
        translator = counts.summary()
    seconds = time.perf_counter() - start
    return {
        "module": name,
        "capture": capture,
        "include_mechanism": how,
        "seconds": round(seconds, 2),
        "outcomes": result.outcomes,
        "details": result.details,
        "slowest": sorted(((round(t, 2), k) for k, t in result.durations.items()),
                          reverse=True)[:10],
        "translator": translator,
    }


_RESULT_METHODS = ("startTest", "stopTest", "addSuccess", "addFailure", "addError", "addSkip",
                   "addExpectedFailure", "addUnexpectedSuccess", "addSubTest")


def _run_quietly(suite, result, sink) -> None:
    if sink is None:
        suite.run(result)
        return
    # Only sys.stdout: several tests check what reaches sys.stderr themselves.
    saved = sys.stdout
    sys.stdout = sink
    try:
        suite.run(result)
    finally:
        sys.stdout = saved


# Comparing -------------------------------------------------------------------------------------


def run_in_subprocess(module: str, capture: str, timeout: float = 900,
                      exclude: tuple[str, ...] = (), match: tuple[str, ...] = (),
                      hard_exit: bool = False) -> dict:
    """Run one module in a fresh interpreter. A crash or timeout comes back as
    ``{"crashed": text}`` (and ``"outcomes"`` too if the crash came after they were written,
    i.e. at interpreter exit)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__),
               "--capture", capture, "--json", out, module]
        for pattern in exclude:
            cmd += ["-x", pattern]
        for pattern in match:
            cmd += ["-k", pattern]
        if hard_exit:
            cmd.append("--hard-exit")
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                                  timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-4000:]
            return {"crashed": f"timeout after {timeout}s\n{tail!r}",
                    "wall": time.perf_counter() - start}
        wall = time.perf_counter() - start
        data = {}
        if os.path.exists(out):
            with open(out) as f:
                data = json.load(f)
        if proc.returncode != 0 or not data:
            where = "at exit, after the tests ran" if data else "while running the tests"
            data["crashed"] = f"exit code {proc.returncode} {where}\n{proc.stderr[-6000:]}"
        data["wall"] = round(wall, 2)
        return data


def differences(plain: dict, captured: dict) -> dict[str, tuple[str | None, str | None]]:
    """Test ids whose status differs: ``{id: (plain_status, captured_status)}``."""
    a, b = plain["outcomes"], captured["outcomes"]
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="test module names, e.g. test_generators")
    parser.add_argument("--capture", default="none", choices=["none", "import", "eager", "c"])
    parser.add_argument("--json", help="write the outcomes here")
    parser.add_argument("-k", dest="match", action="append", default=[],
                        help="only tests whose id contains this (repeatable)")
    parser.add_argument("-x", dest="exclude", action="append", default=[],
                        help="skip tests whose id contains this (repeatable)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each test as it runs")
    parser.add_argument("--only-tests", action="store_true",
                        help="capture only the test package (not site-packages), for diagnosis")
    parser.add_argument("--hard-exit", action="store_true",
                        help="os._exit(0) once the JSON is written: skip interpreter teardown "
                             "(for modules whose teardown crash is a known, listed bug)")
    parser.add_argument("--compare", action="store_true",
                        help="run each module plainly and under capture (subprocesses); "
                             "print differences")
    args = parser.parse_args(argv)

    if args.compare:
        capture = "eager" if args.capture == "none" else args.capture
        # "import" has no translator counts
        report_counts = capture != "import"
        status = 0
        for module in args.modules:
            plain = run_in_subprocess(module, "none")
            captured = run_in_subprocess(module, capture)
            for label, data in (("plain", plain), (capture, captured)):
                if "crashed" in data:
                    print(f"{module} [{label}] CRASHED: {data['crashed']}")
                    status = 1
            if "outcomes" not in plain or "outcomes" not in captured:
                continue
            diff = differences(plain, captured)
            print(f"{module}: {len(plain['outcomes'])} tests, plain {plain['wall']}s, "
                  f"{capture} {captured['wall']}s, {len(diff)} differences"
                  + (f"; translator {captured['translator']['kinds']} "
                     f"({captured['include_mechanism']})" if report_counts else ""))
            for test_id, (p, c) in diff.items():
                status = 1
                print(f"  {test_id}: plain={p} {capture}={c}")
                detail = captured["details"].get(test_id) or plain["details"].get(test_id)
                if detail:
                    print("    " + detail.strip().replace("\n", "\n    ")[-1500:])
        return status

    if len(args.modules) != 1:
        parser.error("give exactly one module without --compare")
    faulthandler.enable()
    data = run_module(args.modules[0], args.capture, args.verbose, args.match,
                      args.exclude, args.only_tests)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    else:
        counts = collections.Counter(data["outcomes"].values())
        print(json.dumps({"seconds": data["seconds"], "counts": counts,
                          "translator": data["translator"]}, indent=1))
    if args.hard_exit:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
