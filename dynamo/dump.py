"""The dump directory: everything npdynamo made for each compiled frame, as files.

In: ``dynamo.config.dump_dir`` (``DYNAMO_DUMP_DIR``), a path; None turns dumping off. Out: one
folder per compiled frame (a function, a resume function, a loop or try/with body function),
``<dump_dir>/<serial>_<name>/``:

    graph.py      the graph's generated code: the compiled function is compiled *from this file*,
                  so a debugger steps through it and tracebacks show its lines
    bytecode.txt  the original and the transformed bytecode side by side
    guards.py     the Python guard function; it is compiled from this file (a debugger steps
                  through it) when the frame has a graph
    guards.txt    every guard, and whether the C guard program or Python runs it
    parts.txt     the disassembly of every resume and body function the transformed code makes
    kernels.txt   (C backend) the fusion report with each kernel's C source
    loops.txt     (C loop kernels) each loop node of the graph: its statement IR, then its C
    frame.txt     where the frame is, why its graph ended, compile times

Called by `output_graph.OutputGraph.compile` (`graph_source_path`, before the backend sees the
graph) and by `convert_frame` after a compile (`write_frame`). Files are written as plain text;
a failure to write warns once and turns dumping off for the process (it never breaks a compile).
"""

from __future__ import annotations

import dis
import itertools
import os
import re
import threading
import types
from typing import Any

from fx.control import loop_of

from . import config
from .diagnostics import diagnose
from .guards import guard_lines
from .resume import display_name

__all__ = ["graph_source_path", "write_frame", "side_by_side"]

_serial = itertools.count()
_lock = threading.Lock()
_failed = False


def _folder_name(code: types.CodeType) -> str:

    name = re.sub(r"[^\w.-]+", "_", display_name(code)).strip("_") or "frame"
    return f"{next(_serial):04d}_{name}"


def _make_folder(code: types.CodeType) -> str | None:
    global _failed
    root = config.dump_dir
    if root is None or _failed:
        return None
    with _lock:
        path = os.path.join(os.path.abspath(root), _folder_name(code))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        _failed = True

        diagnose("graph_code", f"npdynamo: cannot write the dump directory {root!r} ({exc}); "
                 "dumping is off for this process", RuntimeWarning)
        return None
    return path


def graph_source_path(code: types.CodeType, meta: dict) -> str | None:
    """The graph.py path for the graph of `code` (its folder made now), or None. The folder is
    remembered in `meta` (the graph module's) for `write_frame`."""
    folder = _make_folder(code)
    if folder is None:
        return None
    meta["dump_folder"] = folder
    return os.path.join(folder, "graph.py")


def write_frame(compiled: Any) -> str | None:
    """Write the files of one compiled frame (a `compile_frame.CompiledFrame`)."""

    if config.dump_dir is None or _failed:
        return None
    gm = compiled.result.graph_module if compiled.result is not None else None
    folder = gm.meta.get("dump_folder") if gm is not None else None
    folder = folder or _make_folder(compiled.original_code)
    if folder is None:
        return None
    code = compiled.original_code
    files = {
        "bytecode.txt": side_by_side(code, compiled.code) + "\n",
        "guards.txt": _guards_text(compiled.check_fn),
        "frame.txt": _frame_text(compiled),
    }
    if not os.path.exists(os.path.join(folder, "guards.py")):  # (written when compiled from it)
        files["guards.py"] = getattr(compiled.check_fn, "source", "") or ""
    parts = _parts_text(compiled.code)
    if parts:
        files["parts.txt"] = parts
    report = gm.meta.get("fusion_report") if gm is not None else None
    if report is not None:
        files["kernels.txt"] = f"{report}\n"
    loops = [n.target for n in gm.graph.nodes if loop_of(n.target)] if gm is not None else []
    if loops:
        files["loops.txt"] = "\n\n".join(
            f"== {loop.__name__} ({loop.where}) ==\n{loop.text()}\n\n-- C --\n"
            f"{getattr(loop.run, 'source', '(no C)')}" for loop in loops) + "\n"
    for name, text in files.items():
        try:
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            return None
    return folder


def _guards_text(check_fn: Any) -> str:

    lines = "\n".join(guard_lines(check_fn))
    return ("The guards of this compiled version ([C]: run by the C guard program; [Python]: "
            f"by the Python function in guards.py):\n{lines}\n")


def _frame_text(compiled: Any) -> str:

    code = compiled.original_code
    lines = [f"frame: {display_name(code)}",
             f"file: {code.co_filename}:{code.co_firstlineno}",
             f"compile seconds: {compiled.seconds:.4f}"]
    if compiled.result is not None:
        lines.append(f"backend seconds: {compiled.result.backend_seconds:.4f}")
        lines.append(f"graph inputs: {', '.join(s.name() for s in compiled.result.input_sources)}")
    lines.append(f"graph break: {compiled.break_reason or 'none (the frame returns)'}")
    return "\n".join(lines) + "\n"


def _parts_text(code: types.CodeType) -> str:
    """The disassembly of the code objects the transformed code makes functions of."""

    chunks = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            chunks.append(f"== {display_name(const)} ==\n{dis.Bytecode(const).dis()}")
    return "\n".join(chunks)


def side_by_side(original: types.CodeType, transformed: types.CodeType, width: int = 60) -> str:
    """Original and transformed bytecode in two columns."""
    left = _dis_lines(original)
    right = _dis_lines(transformed)
    rows = [f"{'ORIGINAL':<{width}} | TRANSFORMED", f"{'-' * width}-+-{'-' * width}"]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        rows.append(f"{a[:width]:<{width}} | {b}")
    return "\n".join(rows)


def _dis_lines(code: types.CodeType) -> list[str]:
    lines = []
    for inst in dis.get_instructions(code):
        arg = "" if inst.arg is None else f" {inst.argrepr or inst.arg}"
        lines.append(f"{inst.offset:>4} {inst.opname}{arg}")
    return lines
