"""dynamo.report / python -m dynamo run --report: one self-contained HTML page (issue 10),
checked as text and rendered in a real headless browser (Debian's chromium; skipped where it is
not installed: .ci/run installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo import html_report as report_module
from dynamo.tools import recording

ROOT = Path(__file__).resolve().parents[2]


def step(x, y):
    a = np.sin(x) * y
    print("norm", float(np.linalg.norm(a)))
    with np.errstate(divide="ignore"):
        b = 1.0 / (a - a + 1.0)
    return b * 2.0 + a


def _run_recorded(backend="c"):
    dynamo.reset()  # (compiled afresh: a cache hit records nothing)
    fn = dynamo.compile(step, backend=backend)
    x = np.linspace(0, 1, 20_000)
    with recording() as rec:
        for n in (20_000, 20_000, 10_000):  # a recompile: a new length
            fn(x[:n], x[:n])
    return rec


def test_the_report_has_every_part(tmp_path, capsys):
    rec = _run_recorded()
    page = dynamo.report(tmp_path / "out.html", rec).read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in \
        page.replace("http://www.w3.org/2000/svg", "")  # self-contained, no network
    assert "id='totals'" in page and "graph breaks" in page
    assert "class='time-chart'" in page  # compile time per frame, as a picture
    assert "class='hits-chart'" in page and "hits / misses" in page  # cache use per frame
    assert "float() of an array value" in page  # a graph break, with its source line:
    assert "print(&quot;norm&quot;, float(np.linalg.norm(a)))" in page
    assert "recompile: guard failed" in page  # a recompile, with the failing guard
    assert "class='graph'" in page or "<svg width" in page  # each graph as a picture
    assert "np.sin" in page and "float64[20000]" in page  # nodes: op, dtype, shape
    assert "def forward(" in page  # the graph as code
    assert "NDARRAY_MATCH" in page  # the guards
    assert "fusion report" in page  # the C backend's fusion report
    # every frame, resume and body functions too (3.10 compiles no with-body function)
    assert sys.version_info < (3, 11) or "with body at line" in page


def test_report_without_a_recording_uses_what_the_process_remembers(tmp_path, capsys):
    _run_recorded(backend="eager")
    page = dynamo.report(tmp_path / "out.html").read_text()
    assert "step" in page and "def forward(" in page


def test_the_graph_picture_without_graphviz(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    nodes = [("x", "placeholder", "placeholder", "float64[3]", []),
             ("sin", "call_function", "np.sin", "float64[3]", ["x"]),
             ("output", "output", "output", "", ["sin"])]
    svg = report_module._graph_picture(nodes)
    assert svg.startswith("<svg class='graph'") and svg.count("<g class='node'>") == 3
    assert svg.count("marker-end=") == 2  # one edge per input


def test_the_command_line_writes_a_report(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import numpy as np\n"
                      "def f(x):\n    return np.cos(x) * 2.0\n"
                      "print(f(np.ones(3)).sum())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "dynamo", "run", "--report",
                           str(tmp_path / "r.html"), str(script)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "npdynamo report:" in done.stderr
    assert "np.cos" in (tmp_path / "r.html").read_text()


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_report_renders_in_a_headless_browser(tmp_path, capsys):
    rec = _run_recorded()
    page = dynamo.report(tmp_path / "out.html", rec)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([_chromium(), *flags, "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    assert "npdynamo report" in rendered and "<svg" in rendered and "def forward(" in rendered
    shot = tmp_path / "report.png"
    done = subprocess.run([_chromium(), *flags, "--window-size=1280,2400",
                           f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a picture with content
    keep = os.environ.get("DYNAMO_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
