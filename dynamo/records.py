"""Compile records: one entry per compile event, for `explain()`, the debug view and tools.

The compile callback (`convert_frame`) writes a `CompileRecord` for every frame it looks at:
compiled (with its `CompiledFrame`), not captured (why), or recompiled (which guard failed).
`records.sink`, a list per thread, collects them while a tool listens (`dynamo.explain`,
`dynamo.tools.CompileCounter`, the pytest plugin); the HTML report keeps the last few thousand
on its own (`html_report.note`).
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["note_loop", "CompileRecord", "records", "NOTHING_TO_COMPILE"]

#: The reason recorded for a frame with no NumPy operation (not a graph break: nothing to do).
NOTHING_TO_COMPILE = "nothing to compile (no NumPy operations)"


@dataclass
class CompileRecord:
    """One compile event, kept for `explain()` and the debug view."""

    code: types.CodeType
    compiled: Any = None               # the `compile_frame.CompiledFrame`, when it compiled
    reason: str | None = None          # why the frame was not captured (a graph break)
    recompile_reason: str | None = None
    seconds: float = 0.0


class _Records(threading.local):
    def __init__(self) -> None:
        self.sink: list[CompileRecord] | None = None
        #: while `explain()` runs: (file, line) of each outermost loop -> what became of it
        #: (a C loop kernel, or the construct that kept it from being one: `loop_kernels`)
        self.loops: dict[tuple[str, int], str] | None = None


def note_loop(filename: str, line: int | None, text: str) -> None:
    """Record what became of the loop at `filename`:`line` (for `explain()`)."""
    if records.loops is not None:
        records.loops[(filename, line or 0)] = text


records = _Records()
