"""The debug view: `explain()` and the per-function cache view.

`explain(fn)(*args)` compiles and runs `fn` once from a clean cache, recording every frame that was
compiled or could not be captured, and returns an `ExplainOutput` (graphs, guards, break reasons
at the user's file:line, compile times) with a readable `str()`. `cache_entries(fn)` shows what
the C cache holds for a function: guards, graph code and transformed bytecode of each entry.
Guards are shown as their Python text, one line per guard, each marked ``[C]`` (evaluated by the
C guard program) or ``[Python]`` (a kind the C program runs as Python text).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable

from . import _C
from .dump import side_by_side
from .eval_frame import optimize, reset
from .guards import guard_lines
from .records import NOTHING_TO_COMPILE, CompileRecord, records
from .resume import display_name

__all__ = ["explain", "ExplainOutput", "cache_entries", "CacheEntryView"]


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    #: Why a graph ended before its frame returned (a graph break), with file:line.
    break_reasons: list[str] = field(default_factory=list)
    #: Frames that produced no graph at all and ran in plain Python, with the reason.
    skipped_frames: list[str] = field(default_factory=list)
    ops_per_graph: list[list[str]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    compile_times: list[float] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    fusion_reports: list = field(default_factory=list)  # C backend: one per graph
    #: C backend: each outermost loop met, at file:line, and whether it became a C loop
    #: kernel or, if not, the first construct that stopped it
    loops: list[str] = field(default_factory=list)
    result: Any = None

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        lines.append(f"Op count: {sum(len(ops) for ops in self.ops_per_graph)}")
        for i, (gm, ops, seconds) in enumerate(zip(self.graphs, self.ops_per_graph, self.compile_times)):
            lines.append(f"\nGraph {i} ({len(ops)} ops, compiled in {seconds * 1e3:.2f} ms):")
            lines.extend("    " + line for line in gm.code.strip().splitlines())
        if self.break_reasons:
            lines.append("\nBreak reasons:")
            lines.extend(f"  {i + 1}. {reason}" for i, reason in enumerate(self.break_reasons))
        if self.skipped_frames:
            lines.append("\nFrames run in plain Python:")
            lines.extend(f"  - {reason}" for reason in self.skipped_frames)
        if self.loops:
            lines.append("\nLoops:")
            lines.extend(f"  - {loop}" for loop in self.loops)
        if self.recompile_reasons:
            lines.append("\nRecompile reasons:")
            lines.extend(f"  - {reason}" for reason in self.recompile_reasons)
        if self.guards:
            lines.append("\nGuards:")
            lines.extend(f"  {guard}" for guard in self.guards)
        for i, report in enumerate(self.fusion_reports):
            lines.append(f"\nFusion report, graph {i}:")
            lines.extend("    " + line for line in str(report).splitlines())
        return "\n".join(lines)


def _ops(gm) -> list[str]:
    return [node.format_node() for node in gm.graph.nodes if node.op in ("call_function", "call_method")]


def explain(fn: Callable, backend: Any = "eager") -> Callable[..., ExplainOutput]:
    """``dynamo.explain(f)(*args, **kwargs)``: compile `f` from scratch, run it, report.

    With ``backend="c"`` the report includes the C backend's fusion report for each graph."""

    if not callable(fn):
        raise TypeError(f"explain() expects a function, got {type(fn).__name__}")
    target = getattr(fn, "_dynamo_orig_fn", fn)

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        reset()
        sink: list[CompileRecord] = []
        saved, records.sink = records.sink, sink
        saved_loops, records.loops = records.loops, {}
        loops = records.loops
        try:
            result = optimize(backend)(target)(*args, **kwargs)
        finally:
            records.sink = saved
            records.loops = saved_loops
        out = ExplainOutput(result=result)
        out.loops = [f"{file}:{line}: {text}" for (file, line), text in loops.items()]
        for rec in sink:
            if rec.compiled is not None:
                out.guards.extend(guard_lines(rec.compiled.check_fn))
                if rec.compiled.break_reason is not None:
                    out.break_reasons.append(f"{display_name(rec.code)}: {rec.compiled.break_reason}")
                if rec.compiled.result is not None:
                    gm = rec.compiled.result.graph_module
                    out.graphs.append(gm)
                    out.ops_per_graph.append(_ops(gm))
                    if "fusion_report" in gm.meta:
                        out.fusion_reports.append(gm.meta["fusion_report"])
                    out.compile_times.append(rec.seconds)
            elif rec.reason is not None and not rec.reason.startswith(NOTHING_TO_COMPILE):
                out.skipped_frames.append(f"{display_name(rec.code)}: {rec.reason}")
            if rec.recompile_reason:
                out.recompile_reasons.append(f"{display_name(rec.code)}: {rec.recompile_reason}")
        out.graph_count = len(out.graphs)
        out.graph_break_count = len(out.break_reasons)
        return out

    return run


@dataclass
class CacheEntryView:
    """One compiled version of a function, as stored in the C cache."""

    guards: str
    graph_code: str
    bytecode: str
    check_fn: Callable
    code: types.CodeType

    def __str__(self) -> str:
        return f"Guards:\n{self.guards}\nGraph:\n{self.graph_code}\nBytecode:\n{self.bytecode}"


def cache_entries(fn: Callable) -> list[CacheEntryView]:
    """The compiled versions of `fn` (most recently used first)."""
    fn = getattr(fn, "_dynamo_orig_fn", fn)
    code = getattr(fn, "__code__", fn)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"cache_entries() expects a function or code object, got {type(fn).__name__}")
    views = []
    for check_fn, new_code in _C.get_cache_entries(code):
        gm = getattr(check_fn, "graph_module", None)
        views.append(CacheEntryView(
            guards="\n".join(guard_lines(check_fn)),
            graph_code=gm.code if gm is not None else "",
            bytecode=side_by_side(code, new_code),
            check_fn=check_fn,
            code=new_code,
        ))
    return views
