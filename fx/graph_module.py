"""`GraphModule`: a `Graph` turned into a real Python function.

In: a `Graph` and the values of its ``get_attr`` targets (``attrs``). Out: ``gm.forward``, a plain
module-level function taking the placeholders positionally, generated as readable source
(``gm.code``) by `fx.python_code` and executed once. Backends receive a GraphModule; the
``eager`` backend simply returns ``gm.forward``.

The source is registered in `linecache` under a unique file name (``<fx-graph GraphModule_0>``), so
a traceback from inside ``forward`` shows the generated line, with the user's ``file:line`` in its
trailing comment::

    File "<fx-graph GraphModule_0>", line 3, in forward
        mul = sin * y  # File: f.py:3 in f, code: return np.sin(x) * y
"""

from __future__ import annotations

import functools
import itertools
import linecache
from collections.abc import Callable
from typing import Any

from .graph import Graph
from .locations import relocate
from .python_code import generate
from .weak import WeakValueMap, on_death

__all__ = ["GraphModule", "GraphModuleError", "module_for", "register_generated"]

_counter = itertools.count()


class GraphModuleError(ValueError):
    """The graph cannot be turned into a function (e.g. a get_attr target has no value)."""


def _register_source(filename: str, src: str, fn: Callable[..., Any]) -> None:
    # mtime None tells linecache.checkcache the entry has no file on disk: it is kept until
    # the function that owns it dies.
    linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
    # (a C callback: ``linecache.cache.pop(filename, ref)``, see fx.weak)
    on_death(fn, functools.partial(linecache.cache.pop, filename))


#: generated file name -> its GraphModule while it lives (for tracebacks through ``forward``)
_modules: "WeakValueMap[str, GraphModule]" = WeakValueMap()


def module_for(filename: str) -> "GraphModule | None":
    """The living GraphModule (or other registered owner of generated graph code, with a
    ``line_nodes`` map) whose code has this file name."""
    return _modules.get(filename)


def register_generated(filename: str, owner: Any) -> None:
    """Register generated code that is not a GraphModule's ``forward`` (a backend's program):
    `owner` has ``line_nodes`` (line -> node) and is forgotten when it dies."""
    _modules[filename] = owner


class GraphModule:
    """A graph plus the function generated from it. ``gm(*args)`` calls ``gm.forward``."""

    def __init__(
        self, graph: Graph, attrs: dict[str, Any] | None = None, name: str = "GraphModule"
    ) -> None:
        self.graph = graph
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.name = name
        self.meta: dict[str, Any] = {}
        self.code = ""
        self.globals: dict[str, Any] = {}
        self.filename = ""
        #: a file the generated code is written to and compiled from (so a debugger shows its
        #: lines), or None for a ``<fx-graph ...>`` name kept in linecache only
        self.source_path: str | None = None
        self.forward: Callable[..., Any]
        self.recompile()

    def recompile(self) -> str:
        """Regenerate ``code`` and ``forward`` from ``graph`` (call after editing the graph)."""
        code = generate(self.graph, "forward")
        fn_globals = dict(code.globals)
        for global_name, target in code.attr_globals.items():
            if target not in self.attrs:
                raise GraphModuleError(
                    f"get_attr node %{global_name} reads attribute {target!r}, which is not in "
                    f"attrs (known: {sorted(self.attrs)}); pass its value in GraphModule(attrs=...)"
                )
            fn_globals[global_name] = self.attrs[target]
        if self.source_path is not None:
            with open(self.source_path, "w", encoding="utf-8") as f:
                f.write(code.src)
            self.filename = self.source_path
        else:
            self.filename = f"<fx-graph {self.name}_{next(_counter)}>"
        fn_globals["__name__"] = self.filename
        exec(compile(code.src, self.filename, "exec"), fn_globals)  # noqa: S102
        # Popped: a function in its own globals is a reference cycle (freed only by the cyclic
        # collector); ``forward`` never refers to itself by name.
        self.forward = fn_globals.pop("forward")
        self.code, self.globals = code.src, fn_globals
        #: line of ``code`` -> the node whose statement it is (`module_for` finds the module)
        self.line_nodes = code.line_nodes
        if self.source_path is None:  # (a real file is read from disk)
            # (runs at the user's file:line, so NumPy's warnings name them: fx.locations)
            self.forward = relocate(self.forward, self.line_nodes, self)
            _register_source(self.filename, code.src, self.forward)
        _modules[self.filename] = self
        return self.code

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def print_readable(self, print_output: bool = True) -> str:
        """The source with a header naming the module and its non-trivial globals."""
        lines = [f"# {self.name} ({self.filename})"]
        for key, value in self.globals.items():
            if key in ("numpy", "operator", "forward") or key.startswith("__"):
                continue
            lines.append(f"#   {key} = {_describe(value)}")
        text = "\n".join(lines) + "\n" + self.code
        if print_output:
            print(text)
        return text

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"<{self.name} {self.filename}: {len(self.graph.nodes)} nodes>"


def _describe(value: Any) -> str:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} {dtype}{list(shape)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
