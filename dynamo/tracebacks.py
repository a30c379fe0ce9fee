"""What transformed code calls when an exception passes one of its calls: the traceback is
made to read as it does in plain Python.

In: an exception caught by a handler of the transformed code around the call of a compiled
graph (`codegen.Codegen.call_graph`) or of a body function (of a loop or of a try/with block,
`loops.LoopPlan.emit_driver`, `region_body.BodyPlan.emit_call`), whose first traceback entry is
the frame's own, at the call. Out: that entry replaced by one of the same frame at the source
position of the user's statement that raised, and (body functions) the body's entry merged into
it. The position must be the position of some instruction of the frame's code, since a
printed traceback reads line and columns from the code at the entry's instruction: transformed
code carries one never-run NOP per source position it may need
(`codegen.Codegen.emit_pads`). These run only while no trace or profile function is set
(frames run their original code then), so calling Python here is invisible to tracers.
"""

from __future__ import annotations

import types

from fx.graph_module import module_for as fx_module_for
from fx.locations import graph_line
from fx.locations import origin as graph_origin

from . import compat
from .bytecode_analysis import CodeMap

__all__ = ["relocate_graph_error", "merge_body_traceback", "traceback_after"]


def relocate_graph_error(exc: BaseException) -> int:
    """Called by transformed code when its graph raised: the frame's traceback entry (at the
    graph's call) is moved to the position of the user's statement that raised, read from the
    node of the deepest generated graph frame in the traceback (``node.meta["frame_position"]``:
    inside an inlined call, the call's position). Left as it is when none is known. The
    generated frames themselves leave the traceback when the exception leaves the frame (the
    C hook). Returns the instruction index of that position in the frame's code, or -1."""
    tb = exc.__traceback__
    if tb is None:
        return -1
    position = None
    t = tb.tb_next
    while t is not None:
        gm, line = _graph_frame(t)
        if gm is not None:
            node = gm.line_nodes.get(line)
            if node is not None and node.meta.get("frame_position") is not None:
                position = node.meta["frame_position"]
        t = t.tb_next
    if position is None:
        return -1
    return _move_entry(exc, tb, tb.tb_next, position)


def _graph_frame(t: types.TracebackType) -> tuple:
    """(owner with ``line_nodes``, line of the generated source) when the entry is in generated
    graph code (relocated to the user's lines: `fx.locations`, or under its own name), else
    (None, None)."""
    code = t.tb_frame.f_code
    found = graph_origin(code)
    if found is not None:
        return found[1], graph_line(code, t.tb_lasti)
    return fx_module_for(code.co_filename), t.tb_lineno


def merge_body_traceback(exc: BaseException) -> int:
    """The exception came out of a body function (of a loop, or of a try/with block) called by
    this frame: its traceback ``[this frame at the call, the body's frame at P, rest...]``
    becomes ``[this frame at P, rest...]``, one entry for the function at the position that
    raised, as plain Python has (the frame is this one, which goes on to run the handler, so
    its ``f_lineno`` and ``f_locals`` are the function's). The body's finished frame is
    cleared (a callee's ``f_back`` still reaches it, but clearing the traceback's frames must
    free what it held). Returns the instruction index of P in this code (a handler that
    pushed the frame's position gets it, so the frame ends at P, as in plain Python), or -1
    (nothing changed: a single entry, an interrupt that landed in the call sequence)."""
    tb = exc.__traceback__
    body = tb.tb_next if tb is not None else None
    if body is None:
        return -1
    position = _position_of(body)
    try:
        body.tb_frame.clear()
    except RuntimeError:  # (still running: left as it is)
        pass
    return _move_entry(exc, tb, body.tb_next, position)


def traceback_after(fix, raised: tuple):
    """(3.10, `instructions.reraise_with_traceback`) `raised` is a handler's (traceback, value,
    type): ``fix(value)``, then what the handler raises on, (line, type, value, the traceback
    `fix` gave the value), `line` being the line its first entry (this frame's) now has. A 3.10
    handler raises the traceback on its stack, not ``__traceback__``."""
    tb, value, kind = raised
    fix(value)
    tb = value.__traceback__
    return (tb.tb_lineno if tb is not None else None), kind, value, tb


def _move_entry(exc: BaseException, tb, rest, position) -> int:
    """Replace `exc`'s first traceback entry `tb` by one of the same frame at `position`
    followed by `rest`; the instruction index used, or -1 when no instruction of the frame's
    code has that position (the entry keeps its place, only `rest` changes). (3.10 has no
    columns: an entry carries its own line number, and -1 is returned.)"""
    if not compat.HAS_EXCEPTION_TABLE:
        exc.__traceback__ = types.TracebackType(rest, tb.tb_frame, tb.tb_lasti, position[0])
        return -1
    index = _pad_index(tb.tb_frame.f_code, position) if position is not None else None
    if index is None:
        exc.__traceback__ = types.TracebackType(rest, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        return -1
    exc.__traceback__ = types.TracebackType(rest, tb.tb_frame, 2 * index, position[0])
    return index


def _position_of(tb):
    """The source position of traceback entry `tb` (3.10: its line only), or None."""
    if not compat.HAS_EXCEPTION_TABLE:
        return (tb.tb_lineno,) if tb.tb_lineno is not None else None
    return _position_at(tb.tb_frame.f_code, tb.tb_lasti // 2)


def _position_at(code: types.CodeType, index: int):
    for i, position in enumerate(code.co_positions()):
        if i == index:
            return position if position[0] is not None else None
    return None


_pads = CodeMap()


def _pad_index(code: types.CodeType, position) -> int | None:
    """The first instruction index of `code` at this source position (the pads:
    `codegen.Codegen.emit_pads`)."""
    found = _pads.get(code)
    if found is None:
        found = {}
        for i, pos in enumerate(code.co_positions()):
            found.setdefault(pos, i)
        _pads[code] = found
    return found.get(tuple(position))
