"""Recording what capture did over a stretch of a program, for the command line and pytest.

In: a ``with recording() as rec:`` block around any code run under capture (on this thread).
Out: ``rec.stats()``, a `CaptureStats` (graphs, graph breaks with the user's file:line, recompiles
with the failing guard, frames run in plain Python with the reason), and ``str()`` of it, a
readable summary. Used by ``python -m dynamo`` (`dynamo.__main__`) and the pytest plugin
(`dynamo.pytest_plugin`); `dynamo.explain` is the same view for one function call.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .records import NOTHING_TO_COMPILE, CompileRecord, records
from .resume import display_name

__all__ = ["recording", "Recording", "CaptureStats"]


@dataclass
class CaptureStats:
    graphs: int = 0
    breaks: list[str] = field(default_factory=list)
    recompiles: list[str] = field(default_factory=list)
    not_captured: list[str] = field(default_factory=list)
    #: frames compiled (one entry per compile: a frame compiled twice appears twice)
    frames: list[str] = field(default_factory=list)
    compile_seconds: float = 0.0

    def __str__(self) -> str:
        lines = [f"graphs: {self.graphs}, graph breaks: {len(self.breaks)}, recompiles: "
                 f"{len(self.recompiles)}, frames run in plain Python: {len(self.not_captured)}, "
                 f"compile time: {self.compile_seconds * 1e3:.1f} ms"]
        for title, items in (("Graph breaks", self.breaks), ("Recompiles", self.recompiles),
                             ("Frames run in plain Python", self.not_captured)):
            if items:
                lines.append(f"{title}:")
                for text, count in Counter(items).most_common():
                    lines.append(f"  - {text}" + (f"  (x{count})" if count > 1 else ""))
        return "\n".join(lines)


class Recording:
    def __init__(self) -> None:
        self.records: list[CompileRecord] = []

    def stats(self) -> CaptureStats:
        out = CaptureStats()
        for rec in self.records:
            where = f"{display_name(rec.code)} ({rec.code.co_filename}:{rec.code.co_firstlineno})"
            if rec.compiled is not None:
                out.frames.append(where)
                out.compile_seconds += rec.seconds
                if rec.compiled.result is not None:
                    out.graphs += 1
                if rec.compiled.break_reason is not None:
                    out.breaks.append(f"{where}: {rec.compiled.break_reason}")
            elif rec.reason is not None and not rec.reason.startswith(NOTHING_TO_COMPILE):
                out.not_captured.append(f"{where}: {rec.reason}")
            if rec.recompile_reason:
                out.recompiles.append(f"{where}: {rec.recompile_reason}")
        return out


class recording:
    """``with recording() as rec:``: every compile on this thread inside is kept in `rec`
    (nested recordings each see the compiles of their own block)."""

    def __enter__(self) -> Recording:
        self._rec = Recording()
        self._saved = records.sink
        records.sink = self._rec.records
        return self._rec

    def __exit__(self, *exc: object) -> None:
        records.sink = self._saved
        if self._saved is not None:
            self._saved.extend(self._rec.records)
