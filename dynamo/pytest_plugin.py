"""A pytest plugin: run a project's own test suite under npdynamo capture.

    pytest --dynamo=eager            # every test's call runs inside dynamo.optimize("eager")
    pytest --dynamo=c --dynamo-compare

Loaded automatically once npdynamo is installed (entry point ``pytest11``: ``dynamo``), or with
``-p dynamo.pytest_plugin``. Without ``--dynamo`` it does nothing.

* ``--dynamo=BACKEND``: the test function's call (not its fixtures) runs under capture with that
  backend; the end of the run lists, per test, the graphs, graph breaks and recompiles it caused
  (the tests with the most first), and the totals. Compile caches are kept between tests, as in
  a real program (``--dynamo-reset`` resets them before each test).
* ``--dynamo-compare``: each test's call also runs once in plain Python first; any test whose
  outcome differs (passed vs failed, or a different exception type) is listed at the end and
  fails, with both outcomes. A test that mutates state its fixtures do not rebuild may pass
  once and fail the second time in plain Python too; such tests are reported as differing only
  when the plain second run agrees with the plain first run.
* ``--dynamo-include=DIR`` (repeatable): also capture code under DIR (a library installed in
  site-packages is captured by default; the standard library and NumPy are not, see
  ``dynamo.config.skip_dirs``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("npdynamo", "npdynamo: run the tests under capture")
    group.addoption("--dynamo", metavar="BACKEND", default=None,
                    help='run each test\'s call under dynamo.optimize(BACKEND) ("eager", "c", '
                         "or a registered backend) and report graphs, breaks and recompiles")
    group.addoption("--dynamo-compare", action="store_true", default=False,
                    help="also run each test plainly first and report outcomes that differ")
    group.addoption("--dynamo-reset", action="store_true", default=False,
                    help="reset npdynamo's caches before each test")
    group.addoption("--dynamo-include", metavar="DIR", action="append", default=[],
                    help="also capture code under DIR (repeatable)")


def pytest_configure(config: Any) -> None:
    backend = config.getoption("--dynamo")
    if backend is None:
        if config.getoption("--dynamo-compare"):
            raise pytest.UsageError("--dynamo-compare needs --dynamo=BACKEND")
        return
    import dynamo  # (only with --dynamo: a plain pytest run never loads npdynamo)

    try:
        dynamo.lookup_backend(backend)
    except Exception as exc:  # noqa: BLE001 - an unknown backend name
        raise pytest.UsageError(f"--dynamo: {exc}") from None
    config.pluginmanager.register(_DynamoSession(config, backend), "dynamo-session")


@dataclass
class _TestStats:
    nodeid: str
    graphs: int
    breaks: int
    recompiles: int
    not_captured: int


def _outcome(fn: Any) -> tuple[str, str]:
    try:
        fn()
    except pytest.skip.Exception:
        return ("skipped", "")
    except BaseException as exc:  # noqa: BLE001 - an outcome, compared below
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return ("failed", type(exc).__name__)
    return ("passed", "")


class _DynamoSession:
    def __init__(self, config: Any, backend: str) -> None:
        import dynamo  # (only with --dynamo: a plain pytest run never loads npdynamo)

        self.backend = backend
        self.compare = config.getoption("--dynamo-compare")
        self.reset = config.getoption("--dynamo-reset")
        include = tuple(config.getoption("--dynamo-include"))
        if include:
            dynamo.config.include_dirs = tuple(dynamo.config.include_dirs) + tuple(
                os.path.abspath(d) for d in include)
        self.scope = dynamo.optimize(backend)
        self.stats: list[_TestStats] = []
        self.differences: list[str] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any):
        import dynamo  # (only with --dynamo: a plain pytest run never loads npdynamo)
        from dynamo.tools import recording  # (as above)

        if self.reset:
            dynamo.reset()
        plain = None
        if self.compare:
            plain = _outcome(item.runtest)
        captured: list = []
        original = item.runtest

        def run_captured() -> None:
            with recording() as rec, self.scope:
                try:
                    original()
                finally:
                    captured.append(rec)

        # Replace the call pytest makes by the captured one (the outcome is still pytest's).
        item.runtest = run_captured
        try:
            outcome = yield
        finally:
            item.runtest = original
        if captured:
            st = captured[0].stats()
            self.stats.append(_TestStats(item.nodeid, st.graphs, len(st.breaks),
                                         len(st.recompiles), len(st.not_captured)))
        if plain is not None:
            exc = outcome.excinfo
            if exc is None:
                got = ("passed", "")
            elif issubclass(exc[0], pytest.skip.Exception):
                got = ("skipped", "")
            else:
                got = ("failed", exc[0].__name__)
            if got != plain:
                again = _outcome(original)  # (plain again: does the test depend on its past?)
                if again == plain:
                    text = (f"{item.nodeid}: plain Python {plain[0]}"
                            f"{' (' + plain[1] + ')' if plain[1] else ''}, under npdynamo "
                            f"{got[0]}{' (' + got[1] + ')' if got[1] else ''}")
                    self.differences.append(text)
                    if got[0] == "passed":
                        outcome.force_exception(AssertionError(
                            f"npdynamo changed the outcome: {text}"))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section(f"npdynamo ({self.backend} backend)")
        total = _TestStats("total", *(sum(getattr(s, f) for s in self.stats) for f in
                                      ("graphs", "breaks", "recompiles", "not_captured")))
        tr.write_line(f"{len(self.stats)} tests run under capture: {total.graphs} graphs, "
                      f"{total.breaks} graph breaks, {total.recompiles} recompiles, "
                      f"{total.not_captured} frames run in plain Python")
        busiest = sorted(self.stats, key=lambda s: (-s.graphs, -s.breaks, s.nodeid))[:20]
        if busiest and busiest[0].graphs:
            tr.write_line(f"{'graphs':>7} {'breaks':>7} {'recompiles':>10}  test")
            for s in busiest:
                if s.graphs or s.breaks or s.recompiles:
                    tr.write_line(f"{s.graphs:>7} {s.breaks:>7} {s.recompiles:>10}  {s.nodeid}")
        if self.compare:
            if self.differences:
                tr.write_line(f"{len(self.differences)} tests whose outcome npdynamo changed:")
                for text in self.differences:
                    tr.write_line(f"  {text}")
            else:
                tr.write_line("--dynamo-compare: every test had the same outcome as in plain "
                              "Python")
