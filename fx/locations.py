"""Generated graph code that warns where the user's code warns.

In: a function generated from a graph (`GraphModule.forward`, a C program's function and NumPy
paths) and its ``line_nodes`` (line of the generated source -> the node its statement computes;
each node carries ``meta["location"]``: the user's file, line and module of the statement that
made it). Out (`relocate`): the same function on a copy of its code whose file name and line
numbers are the user's, in globals whose ``__name__`` is the user's module. A warning NumPy
issues inside it (``warnings`` takes the file, line and module of the frame that called NumPy)
then names the user's ``file:line``, shows the user's source line and matches the user's
``warnings.filterwarnings(module=...)``, as in plain Python. The generated source stays as it
was for reading (``gm.code``, ``print_readable``); only the code object that runs is relocated.

`origin` tells npdynamo's own code that a code object is generated (the C hook must not capture
it, tracebacks must hide it), and `graph_line` maps an instruction of a relocated code back to
the line of the generated source (`dynamo.tracebacks` finds the node that raised).

Not relocated (left as generated, under its ``<fx-graph ...>`` name): code whose nodes have no
location (graphs built by hand), and code compiled from a dump file (``config.dump_dir``: a
debugger steps through the generated lines then). Nodes from several files (calls inlined from
another module) are placed at the statement of the compiled frame that made them (its
``meta["root_location"]``): a code object has one file name.
"""

from __future__ import annotations

import bisect
import sys
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .weak import IdentityMap

__all__ = ["relocate", "origin", "graph_line"]

#: relocated code -> (the generated code it was made from, a weak reference to its owner: the
#: owner holds the function, which holds the key)
_origins: "IdentityMap[types.CodeType, tuple[types.CodeType, Any]]" = IdentityMap()


#: module name -> the registry of warnings shown by graph code placed in that module
_registries: dict[str, dict] = {}


def origin(code: types.CodeType) -> "tuple[types.CodeType, Any] | None":
    """(generated code, owner or None once it died) when `code` is relocated graph code, else
    None."""
    found = _origins.get(code)
    return None if found is None else (found[0], found[1]())


def graph_line(code: types.CodeType, lasti: int) -> int | None:
    """The line of the generated source of the instruction at byte offset `lasti` of the
    relocated `code` (the offsets are those of the generated code: only line numbers differ)."""
    found = origin(code)
    if found is None:
        return None
    for start, end, line in found[0].co_lines():
        if start <= lasti < end:
            return line
    return None


def _placement(line_nodes: Mapping[int, Any]) -> tuple[str, dict[int, int], str | None] | None:
    """(file, generated line -> user line, module), or None when no node has a location."""
    located = {line: node.meta["location"] for line, node in line_nodes.items()
               if isinstance(getattr(node, "meta", None), dict) and node.meta.get("location")}
    if not located:
        return None
    files = {loc[0] for loc in located.values()}
    if len(files) > 1:  # (one file per code object: the compiled frame's statements)
        located = {line: node.meta["root_location"] for line, node in line_nodes.items()
                   if line in located and node.meta.get("root_location")}
        files = {loc[0] for loc in located.values()}
        if len(files) != 1:
            return None
    (filename,) = files
    module = next(iter(located.values()))[2]
    return filename, {line: loc[1] for line, loc in located.items()}, module


def _user_lines(code: types.CodeType, lines: dict[int, int]) -> Callable[[int | None], int]:
    """Generated line -> user line: a line without a node of its own (the ``def``, a ``del``,
    the ``return``) takes the user line of the nearest node line above it (the first node's
    for the lines above the first node)."""
    known = sorted(lines)

    def user_line(line: int | None) -> int:
        if line is None:
            return lines[known[0]]
        return lines[known[max(bisect.bisect_right(known, line) - 1, 0)]]

    return user_line


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint(((-value) << 1) | 1 if value < 0 else value << 1)


def _table_311(ranges: list[tuple[int, int, int | None]], first: int) -> bytes:
    """A 3.11+ location table (CPython's Objects/locations.md): one entry per 1-8 code units,
    "no columns" (code 13: a signed line delta) or "no location" (code 15)."""
    out = bytearray()
    line = first
    for start, end, new in ranges:
        units = (end - start) // 2
        while units > 0:
            n = min(8, units)
            if new is None:
                out.append(0x80 | (15 << 3) | (n - 1))
            else:
                out.append(0x80 | (13 << 3) | (n - 1))
                out += _svarint(new - line)
                line = new
            units -= n
    return bytes(out)


def _table_310(ranges: list[tuple[int, int, int | None]], first: int) -> bytes:
    """A 3.10 line table (CPython 3.10's Objects/lnotab_notes.txt): (byte delta <= 254,
    line delta in -127..127, or -128 for no line) pairs."""
    out = bytearray()
    line = first
    for start, end, new in ranges:
        size = end - start
        if new is None:
            delta = -128
        else:
            delta = new - line
            line = new
            while delta > 127:
                out += bytes((0, 127))
                delta -= 127
            while delta < -127:
                out += bytes((0, 256 - 127))
                delta += 127
        while size > 0 or delta:
            step = min(254, size)
            out += bytes((step, delta & 0xFF))
            size -= step
            delta = -128 if new is None else 0
            if size <= 0:
                break
    return bytes(out)


def _relocated_code(code: types.CodeType, filename: str,
                    user_line: Callable[[int | None], int]) -> types.CodeType | None:
    """`code` with only its file name, first line and line table replaced (same bytes, same
    offsets: `graph_line` maps an offset back through the generated code's own table)."""
    ranges = [(start, end, None if line is None else user_line(line))
              for start, end, line in code.co_lines()]
    first = user_line(None)
    try:
        table = (_table_311 if sys.version_info >= (3, 11) else _table_310)(ranges, first)
        new = code.replace(co_filename=filename, co_firstlineno=first, co_linetable=table)
    except (ValueError, TypeError):  # (left as generated: only the warning's place suffers)
        return None
    if _merged(new.co_lines()) != _merged(ranges):  # (an encoding this module got wrong)
        return None
    return new


def _merged(ranges) -> list[tuple[int, int, int | None]]:
    """Address ranges with neighbours of the same line joined (3.12+'s ``co_lines`` joins
    them, 3.10/3.11's does not)."""
    out: list[list] = []
    for start, end, line in ranges:
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1][1] = end
        else:
            out.append([start, end, line])
    return [tuple(r) for r in out]


def relocate(fn: types.FunctionType, line_nodes: Mapping[int, Any], owner: Any = None,
             fn_globals: dict[str, Any] | None = None) -> types.FunctionType:
    """`fn` on a copy of its code placed at the user's statements (see the module docstring),
    or `fn` itself when its nodes have no location. `fn_globals` (default ``fn.__globals__``)
    gets the user's module as ``__name__``; the owner (with ``line_nodes``; default: the new
    function, given ``line_nodes``) is what `origin` returns for the new code."""
    placement = _placement(line_nodes)
    if placement is None:
        return fn
    filename, lines, module = placement
    code = _relocated_code(fn.__code__, filename, _user_lines(fn.__code__, lines))
    if code is None:
        return fn
    new_globals = fn.__globals__ if fn_globals is None else fn_globals
    if isinstance(module, str):
        new_globals["__name__"] = module
        # One registry of shown warnings for all graphs of a module: the "default" action
        # shows a warning once per location, not once per compiled version. (Not the module's
        # own ``__warningregistry__``: adding one to the user's globals would be visible.)
        new_globals["__warningregistry__"] = _registries.setdefault(module, {})
    out = types.FunctionType(code, new_globals, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = fn.__qualname__
    if owner is None:
        owner = out
        out.line_nodes = line_nodes  # type: ignore[attr-defined]
    _origins[code] = (fn.__code__, weakref.ref(owner))
    return out

