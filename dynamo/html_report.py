"""The HTML report: one self-contained static page of what capture did (issue 10).

In: the compile records of a run (`tools.Recording`, or, by default, the last
`MAX_REMEMBERED` compiles of the process, which `convert_frame` notes here as plain-text
summaries: no strong reference to code, graphs or arrays is kept). Out: ``report(path)`` writes
one HTML file (no scripts, no network) with:

- the totals (graphs, graph breaks, recompiles, frames run in plain Python, compile time);
- a bar chart of compile time per frame (tracing and backend), and one of cache hits and
  misses per frame (the C hook's counts for the frame's code, while it lives);
- a table of every frame seen, compiled or run in plain Python, with the reason;
- per compiled frame: the graph as a picture (a box per node with its op, dtype and shape; laid
  out by Graphviz's ``dot`` when it is installed, else by a built-in layered layout), the graph
  code, the guards, the graph break with its source line, the recompile reason, the bytecode
  side by side and (C backend) the fusion report.

Used by `dynamo.report` and ``python -m dynamo run --report out.html script.py``.
"""

from __future__ import annotations

import collections
import html
import shutil
import subprocess
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _C
from .dump import side_by_side
from .guards import guard_lines
from .records import NOTHING_TO_COMPILE
from .resume import display_name

__all__ = ["report", "FrameSummary", "MAX_REMEMBERED"]

#: compiles remembered for `report()` without an explicit recording
MAX_REMEMBERED = 2000


@dataclass
class FrameSummary:
    """What the report shows of one compile record (text only)."""

    name: str
    where: str
    status: str                      # "compiled" or "plain"
    reason: str | None = None        # graph break, or why it ran in plain Python
    recompile_reason: str | None = None
    seconds: float = 0.0
    backend_seconds: float = 0.0
    graph_code: str | None = None
    #: (name, op, what, meta text, input names) per node
    nodes: list[tuple[str, str, str, str, list[str]]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    fusion_report: str | None = None
    when: float = 0.0
    _codes: tuple[Any, Any] | None = None  # weak references to (original, transformed)

    def cache_stats(self) -> tuple[int, int] | None:
        """(hits, misses) of the frame's code in the C cache now (every version of it), or
        None when the code is gone."""
        original = self._codes[0]() if self._codes is not None else None
        if original is None:
            return None
        return tuple(_C.code_stats(original))  # type: ignore[return-value]

    def bytecode(self) -> str | None:
        if self._codes is None:
            return None
        original, transformed = (ref() for ref in self._codes)
        if original is None or transformed is None:
            return None
        return side_by_side(original, transformed)


_remembered: "collections.deque[FrameSummary]" = collections.deque(maxlen=MAX_REMEMBERED)


def note(rec: Any) -> None:
    """Called by `convert_frame` for every compile record."""
    try:
        _remembered.append(summarize(rec))
    except Exception:  # noqa: BLE001 - the report is a debug view: never fail a compile for it
        pass


def summarize(rec: Any) -> FrameSummary:
    code = rec.code
    out = FrameSummary(display_name(code), f"{code.co_filename}:{code.co_firstlineno}",
                       "compiled" if rec.compiled is not None else "plain",
                       rec.reason, rec.recompile_reason, rec.seconds, when=time.time())
    if rec.compiled is None:
        if rec.reason is not None and rec.reason.startswith(NOTHING_TO_COMPILE):
            out.status = "nothing"
        return out
    compiled = rec.compiled
    out.reason = compiled.break_reason
    try:
        out._codes = (weakref.ref(compiled.original_code), weakref.ref(compiled.code))
    except TypeError:
        pass
    out.guards = guard_lines(compiled.check_fn)
    if compiled.result is not None:
        gm = compiled.result.graph_module
        out.backend_seconds = compiled.result.backend_seconds
        out.graph_code = gm.code
        out.nodes = [(n.name, n.op, _what(n), _meta_text(n.meta.get("val")),
                      [a.name for a in n.all_input_nodes]) for n in gm.graph.nodes]
        report_ = gm.meta.get("fusion_report")
        out.fusion_report = str(report_) if report_ is not None else None
    return out


def _what(node: Any) -> str:
    if node.op in ("placeholder", "output"):
        return node.op
    target = node.target
    if isinstance(target, str):
        return f".{target}()" if node.op == "call_method" else target
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__name__", repr(target))
    if module.startswith("numpy") or type(target).__name__ == "ufunc":
        return f"np.{name}"
    return name


def _meta_text(val: Any) -> str:
    dtype, shape = getattr(val, "dtype", None), getattr(val, "shape", None)
    if dtype is None:
        return "" if val is None else type(val).__name__
    dims = ", ".join(str(d) for d in shape) if shape is not None else "?"
    return f"{dtype}[{dims}]"


# Rendering --------------------------------------------------------------------------------------


def report(path: str | Path, recording: Any = None) -> Path:
    """Write the report of `recording` (a `tools.Recording`; default: the compiles this process
    remembers) to `path`; returns the path."""
    if recording is not None:
        frames = [summarize(rec) for rec in recording.records]
    else:
        frames = list(_remembered)
    path = Path(path)
    path.write_text(render(frames), encoding="utf-8")
    return path


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fbfbfd}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.totals{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.totals div{background:#fff;border:1px solid #dde1ea;border-radius:6px;padding:8px 14px}
.totals b{display:block;font-size:20px}
table{border-collapse:collapse;background:#fff;width:100%}
td,th{border:1px solid #dde1ea;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6} .plain{color:#a33} .compiled{color:#176b34} .nothing{color:#777}
pre{background:#fff;border:1px solid #dde1ea;padding:8px;overflow:auto;font-size:12px}
details{margin:10px 0;background:#fff;border:1px solid #dde1ea;border-radius:6px;padding:6px 10px}
summary{cursor:pointer;font-weight:600} .muted{color:#667}
"""


def render(frames: list[FrameSummary]) -> str:
    graphs = sum(1 for f in frames if f.graph_code is not None)
    breaks = [f for f in frames if f.status == "compiled" and f.reason]
    recompiles = [f for f in frames if f.recompile_reason]
    plain = [f for f in frames if f.status == "plain"]
    total = sum(f.seconds for f in frames)
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>npdynamo report"
             f"</title><style>{_CSS}</style></head><body>",
             "<h1>npdynamo report</h1>",
             f"<div class='muted'>{len(frames)} compile records</div>",
             "<div class='totals' id='totals'>"]
    for label, value in (("graphs", graphs), ("graph breaks", len(breaks)),
                         ("recompiles", len(recompiles)), ("frames in plain Python", len(plain)),
                         ("compile time", f"{total * 1e3:.1f} ms")):
        parts.append(f"<div><b>{value}</b>{label}</div>")
    parts.append("</div>")
    parts.append("<h2>Compile time per frame</h2>")
    parts.append(_time_chart(frames))
    parts.append("<h2>Cache hits and misses per frame</h2>")
    parts.append(_hits_chart(frames))
    parts.append("<h2 id='frames'>Frames</h2><table><tr><th>#</th><th>frame</th><th>where</th>"
                 "<th>status</th><th>ops</th><th>compile ms</th><th>hits / misses</th>"
                 "<th>graph break / reason</th></tr>")
    for i, f in enumerate(frames):
        ops = sum(1 for n in f.nodes if n[1] in ("call_function", "call_method"))
        stats = f.cache_stats()
        hits = f"{stats[0]} / {stats[1]}" if stats is not None else ""
        parts.append(f"<tr><td><a href='#frame{i}'>{i}</a></td><td>{esc(f.name)}</td>"
                     f"<td>{esc(f.where)}</td><td class='{f.status}'>{f.status}</td>"
                     f"<td>{ops or ''}</td><td>{f.seconds * 1e3:.1f}</td><td>{hits}</td>"
                     f"<td>{esc(f.reason or '')}"
                     + (f"<br><i>recompile: {esc(f.recompile_reason)}</i>"
                        if f.recompile_reason else "") + "</td></tr>")
    parts.append("</table><h2>Compiled frames</h2>")
    for i, f in enumerate(frames):
        if f.status != "compiled":
            continue
        parts.append(f"<details id='frame{i}' open><summary>{i}. {esc(f.name)} "
                     f"<span class='muted'>{esc(f.where)}</span></summary>")
        if f.reason:
            parts.append(f"<p><b>Graph break:</b> {esc(f.reason)}</p>")
        if f.recompile_reason:
            parts.append(f"<p><b>Recompiled:</b> {esc(f.recompile_reason)}</p>")
        if f.graph_code is not None:
            parts.append("<p><b>Graph</b></p>" + _graph_picture(f.nodes))
            parts.append(f"<pre class='graph-code'>{esc(f.graph_code)}</pre>")
        else:
            parts.append("<p class='muted'>no graph (no NumPy operation before the break)</p>")
        parts.append(f"<p><b>Guards</b></p><pre>{esc(chr(10).join(f.guards))}</pre>")
        if f.fusion_report:
            parts.append(f"<p><b>C backend fusion report</b></p><pre>{esc(f.fusion_report)}"
                         "</pre>")
        bytecode = f.bytecode()
        if bytecode:
            parts.append(f"<details><summary>Bytecode</summary><pre>{esc(bytecode)}</pre>"
                         "</details>")
        parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _time_chart(frames: list[FrameSummary]) -> str:
    """Horizontal bars: tracing (and the rest of compiling) and backend time per frame."""
    rows = []
    for f in [f for f in frames if f.seconds > 0][:60]:
        backend = min(f.backend_seconds, f.seconds)
        rows.append((f.name, (f.seconds - backend, backend), f"{f.seconds * 1e3:.1f} ms"))
    return _bars("time-chart", rows, (("tracing", "#5b8def"), ("backend", "#f0a33a")),
                 "nothing compiled")


def _hits_chart(frames: list[FrameSummary]) -> str:
    """Horizontal bars per frame (its code, all versions): calls served from the cache (hits)
    and calls that compiled or checked guards in Python (misses)."""
    rows, seen = [], set()
    for f in frames:
        stats = f.cache_stats() if f.status == "compiled" else None
        if stats is not None and (f.name, f.where) not in seen:
            seen.add((f.name, f.where))
            rows.append((f.name, stats, f"{stats[0]} / {stats[1]}"))
    return _bars("hits-chart", rows[:60], (("hits", "#3aa76d"), ("misses", "#d9534f")),
                 "no compiled frame is still alive")


def _bars(css_class: str, rows: list[tuple[str, tuple, str]],
          segments: tuple[tuple[str, str], ...], empty: str) -> str:
    """An SVG of stacked horizontal bars: per row a label, one segment per value (`segments`:
    their names and colours, shown as a legend) and a text after the bar."""
    if not rows:
        return f"<p class='muted'>{empty}</p>"
    most = max(sum(values) for _, values, _ in rows) or 1
    width, bar_h, label_w = 900, 18, 330
    height = len(rows) * (bar_h + 6) + 30
    scale = (width - label_w - 110) / most
    out = [f"<svg class='{css_class}' width='{width}' height='{height}' "
           "xmlns='http://www.w3.org/2000/svg' font-size='12'>"]
    for i, (label, values, text) in enumerate(rows):
        y = 10 + i * (bar_h + 6)
        out.append(f"<text x='0' y='{y + 13}'>{html.escape(label[:48])}</text>")
        x = label_w
        for value, (name, colour) in zip(values, segments):
            out.append(f"<rect x='{x:.1f}' y='{y}' width='{value * scale:.1f}' "
                       f"height='{bar_h}' fill='{colour}'><title>{name}</title></rect>")
            x += value * scale
        out.append(f"<text x='{x + 4:.1f}' y='{y + 13}'>{html.escape(text)}</text>")
    y = height - 8
    x = label_w
    for name, colour in segments:
        out.append(f"<rect x='{x}' y='{y - 10}' width='10' height='10' fill='{colour}'/>"
                   f"<text x='{x + 14}' y='{y}'>{name}</text>")
        x += 80
    out.append("</svg>")
    return "".join(out)


_MAX_DRAWN = 300


def _graph_picture(nodes: list[tuple[str, str, str, str, list[str]]]) -> str:
    """The graph as SVG: Graphviz when ``dot`` is installed, else a layered layout."""
    if not nodes:
        return ""
    if len(nodes) > _MAX_DRAWN:
        note = f"<p class='muted'>the first {_MAX_DRAWN} of {len(nodes)} nodes</p>"
        nodes = nodes[:_MAX_DRAWN]
    else:
        note = ""
    svg = _graphviz(nodes) if shutil.which("dot") else None
    return note + (svg or _layered(nodes))


def _graphviz(nodes: list) -> str | None:
    lines = ["digraph G {", "node [shape=box, fontname=Helvetica, fontsize=10];"]
    known = {n[0] for n in nodes}
    for name, op, what, meta, inputs in nodes:
        label = f"{name}\\n{what}" + (f"\\n{meta}" if meta else "")
        lines.append(f'"{name}" [label="{label}"];')
        for a in inputs:
            if a in known:
                lines.append(f'"{a}" -> "{name}";')
    lines.append("}")
    try:
        done = subprocess.run(["dot", "-Tsvg"], input="\n".join(lines), capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    svg = done.stdout
    return svg[svg.find("<svg"):] if "<svg" in svg else None


def _layered(nodes: list[tuple[str, str, str, str, list[str]]]) -> str:
    """Each node one layer below its deepest input; boxes in a row per layer."""
    layer: dict[str, int] = {}
    for name, op, what, meta, inputs in nodes:
        layer[name] = 1 + max((layer[a] for a in inputs if a in layer), default=-1)
    rows: dict[int, list[str]] = collections.defaultdict(list)
    for name, *_ in nodes:
        rows[layer[name]].append(name)
    box_w, box_h, gap_x, gap_y = 150, 48, 16, 34
    per_row = max(len(r) for r in rows.values())
    width = per_row * (box_w + gap_x) + gap_x
    height = len(rows) * (box_h + gap_y) + gap_y
    pos: dict[str, tuple[float, float]] = {}
    for depth, names in rows.items():
        offset = (width - len(names) * (box_w + gap_x)) / 2
        for i, name in enumerate(names):
            pos[name] = (offset + gap_x / 2 + i * (box_w + gap_x),
                         gap_y / 2 + depth * (box_h + gap_y))
    colors = {"placeholder": "#e6f0ff", "output": "#e9f7ec", "get_attr": "#f3f3f3"}
    out = [f"<svg class='graph' width='{width:.0f}' height='{height:.0f}' "
           "xmlns='http://www.w3.org/2000/svg' font-size='11' font-family='monospace'>",
           "<defs><marker id='arrow' markerWidth='8' markerHeight='8' refX='7' refY='4' "
           "orient='auto'><path d='M0,0 L8,4 L0,8 z' fill='#889'/></marker></defs>"]
    for name, op, what, meta, inputs in nodes:
        x, y = pos[name]
        for a in inputs:
            if a in pos:
                ax, ay = pos[a]
                x1, y1, x2, y2 = ax + box_w / 2, ay + box_h, x + box_w / 2, y
                mid = (y1 + y2) / 2
                out.append(f"<path d='M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} "
                           f"{x2:.0f},{y2 - 2:.0f}' fill='none' stroke='#889' "
                           "marker-end='url(#arrow)'/>")
    for name, op, what, meta, inputs in nodes:
        x, y = pos[name]
        fill = colors.get(op, "#fff8e6")
        out.append(f"<g class='node'><rect x='{x:.0f}' y='{y:.0f}' width='{box_w}' "
                   f"height='{box_h}' rx='5' fill='{fill}' stroke='#8a93a6'/>")
        for k, text in enumerate((name, what, meta)):
            if text:
                out.append(f"<text x='{x + 6:.0f}' y='{y + 14 + 14 * k:.0f}'>"
                           f"{html.escape(text[:22])}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
