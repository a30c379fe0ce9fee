"""The C backend's program: one generated straight-line Python function per compiled graph.

In: the graph of a `GraphModule`, its fusion schedule (fx Nodes run as NumPy calls, and
kernels), which kernels run as C (the others are written out as NumPy statements) and, for a
graph with symbolic sizes, where each size is read from the inputs. Out: a `Program`: its
source (``code``, what ``compiled.program_code`` shows), the generated NumPy path of every C
kernel (``numpy_paths``) and the program function (``fn``). Called by `_compile` in
``dynamo/backends/c/__init__.py``, which makes each kernel's *step* (`Program.bind`: the
callable the program calls for that kernel, choosing between C and the NumPy path).

The text is printed like ``gm.code`` (`fx.python_code`): NumPy nodes are plain statements,
values used once on the same source line are nested as the user wrote them (keeps NumPy's
in-place reuse of unnamed temporaries), each kernel is one statement calling its step, and every
value is deleted right after its last use, so a long graph keeps no more arrays alive than the
NumPy code it came from. Example (``np.sin(x) * y + 1`` fused, then a NumPy ``cumsum``)::

    def dyn_k0_numpy(x, y):
        # File: demo.py:3 in f, code: a = np.sin(x) * y + 1
        add = numpy.sin(x) * y + 1
        return add

    def forward(x, y):
        if fp_warn_mask() is None:  # an np.errstate mode raises: run the graph as written
            return eager_forward(x, y)
        # C kernel dyn_k0 (pointwise, 3 nodes): sin, mul, add
        add = dyn_k0(x, y)
        # File: demo.py:4 in f, code: return np.cumsum(a)
        cumsum = numpy.cumsum(add)
        return cumsum

A dynamic kernel (symbolic sizes) is called as ``dyn_k0(shapes['dyn_k0'], x, y)`` with
``shapes = kernel_shapes((x.shape[0],))`` computed once per call.
"""

from __future__ import annotations

import functools
import itertools
import linecache
import re
import types
from collections.abc import Callable
from typing import Any

from fx.python_code import GraphWriter, is_setitem, paced_frees, stack_comment
from fx.graph_module import register_generated
from fx.locations import relocate
from fx.weak import on_death

from .loop_ir import PointwiseKernel, ReductionKernel

__all__ = ["Program"]

_counter = itertools.count()
#: the first name a program statement assigns
_ASSIGNED = re.compile(r"^\s+(\w+)(?:\s*,\s*\w+)*\s*=[^=]")
_CALLS = ("call_function", "call_method")


def _is_kernel(item: Any) -> bool:
    return isinstance(item, (PointwiseKernel, ReductionKernel))


class _ProgramWriter(GraphWriter):
    """fx's statement printer over contexts (the program body, each kernel's NumPy path)
    instead of one graph in graph order: nesting and deletion are decided per context."""

    def __init__(self, graph: Any) -> None:
        super().__init__(graph)
        self.graph_inline = self.inline  # fx's choice, over graph order

    def context_inline(self, entries: list[Any], results: set[Any]) -> set[Any]:
        """The nodes nested into their one user in this context: fx's rule (single user, same
        source line, pure), and both are statements of this context, each once, with only pure
        NumPy statements between them (no kernel call, no mutation); never one of the
        context's ``results`` (a kernel output may be read only inside its kernel)."""
        count: dict[Any, int] = {}
        pos: dict[Any, int] = {}
        for i, e in enumerate(entries):
            if not _is_kernel(e):
                count[e] = count.get(e, 0) + 1
                pos[e] = i
        inline: set[Any] = set()
        for n in self.graph_inline:
            if count.get(n) != 1 or n in results:
                continue
            (user,) = n.users
            if count.get(user) != 1 or pos[user] < pos[n]:
                continue
            between = entries[pos[n] + 1:pos[user]]
            if all(not _is_kernel(b) and not b.is_impure() for b in between):
                inline.add(n)
        return inline

    def reads(self, node: Any) -> set[Any]:
        """Named values a statement for ``node`` reads (through the values nested in it)."""
        found: set[Any] = set()
        pending = list(node.all_input_nodes)
        while pending:
            v = pending.pop()
            if v in found:
                continue
            if v in self.inline:
                pending += v.all_input_nodes
            else:
                found.add(v)
        return found

    def body(self, entries: list[Any], params: set[Any], results: set[Any],
             kernel_line: Callable[[Any], list[str]], path_args: Callable[[Any], list[Any]],
             ret: Callable[[], str]) -> list[str]:
        """Statements of one context, each value deleted after its last use, then ``ret()``
        (the return statement, rendered with this context's nesting)."""
        self.inline = self.context_inline(entries, results)
        items = [e for e in entries if _is_kernel(e) or e not in self.inline]
        reads: list[set[Any]] = []
        defs: list[set[Any]] = []
        for e in items:
            if _is_kernel(e):
                reads.append(set(path_args(e)))
                defs.append(set(e.out_nodes))
            else:
                reads.append(self.reads(e))
                named = e.op in _CALLS and (not is_setitem(e) or bool(e.users))
                defs.append({e} if named else set())
        live = set(results)
        dying: list[list[Any]] = [[] for _ in items]
        for i in range(len(items) - 1, -1, -1):
            for v in reads[i] | defs[i]:
                if v not in live and v.op in _CALLS and v not in params:
                    dying[i].append(v)
            live -= defs[i]
            live |= reads[i]
        # (large ones in step with new allocations, as a NumPy loop frees them: paced_frees;
        # but a NumPy statement's value that the eager code nests into a user's expression
        # which is now a kernel step is an unnamed temporary there, freed by NumPy right after
        # its one use: so here too. Pacing it kept ``abs(z)`` of ``np.less(abs(z), 2.0)``
        # alive across the Mandelbrot step once the ``less`` was a kernel: 0.7x NumPy, where
        # the eager code runs at 1.0x. Kernel outputs read by NumPy calls stay paced: nbody's
        # ``d * inv_r3`` temporaries of ``@ mass`` freed at once halved its speed.)
        order = {n: i for i, n in enumerate(self.graph.nodes)}
        kernel_outs = {v for e in items if _is_kernel(e) for v in e.out_nodes}
        now = [{v for v in d if _is_kernel(items[i]) and v in self.graph_inline
                and v not in kernel_outs} for i, d in enumerate(dying)]
        dead = paced_frees([(sorted((v for v in d if v not in now[i]), key=order.__getitem__),
                             sorted(defs[i], key=order.__getitem__))
                            for i, d in enumerate(dying)])
        for i in range(len(dead)):
            dead[i] = sorted(v.name for v in now[i]) + dead[i]
        lines: list[str] = []
        previous = ""
        for i, e in enumerate(items):
            if _is_kernel(e):
                stmts = kernel_line(e)
                previous = ""
            else:
                stmts = self.statements(e)
                comment = stack_comment(e.meta.get("stack"))
                if comment and comment != previous and stmts:
                    lines.append(f"#{comment[3:]}")
                previous = comment or previous
            lines += stmts
            if dead[i] and i != len(items) - 1:  # (returning frees them anyway)
                lines.append(f"del {', '.join(sorted(dead[i]))}")
        lines.append(ret())
        return lines


def _tuple_text(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names)


class Program:
    """The generated program of one compiled graph (see the module docstring).

    ``schedule``: kernels and fx Nodes in execution order; ``called``: names of the kernels
    that get a C step (the others run as NumPy statements in place); ``dynamic``: names of the
    called kernels whose domain has symbolic sizes; ``size_sources``: (argument position,
    dimension) per symbol, in the order `kernel_shapes` takes them; ``helpers``: values of the
    program's helper globals: ``fp_warn_mask``, ``eager_forward`` and, with dynamic kernels,
    ``kernel_shapes``. After construction, `bind` each called kernel's step before calling
    ``fn``.
    """

    def __init__(self, gm: Any, schedule: list[Any], called: set[str], dynamic: set[str],
                 size_sources: list[tuple[int, int]], helpers: dict[str, Any]) -> None:
        graph = gm.graph
        w = _ProgramWriter(graph)
        names = w.names
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        params = [n.name for n in placeholders]
        helper = {key: names.create_name(key) for key in helpers}
        kernels = [k for k in schedule if _is_kernel(k) and k.name in called]
        #: kernel name -> (global name of its step, of its NumPy path, the path's arguments)
        self.kernels: dict[str, tuple[str, str, list[Any]]] = {}
        for k in kernels:
            members = set(k.members)
            extra: list[Any] = []
            for n in k.members:
                for a in n.all_input_nodes:
                    if a not in members and a not in extra:
                        extra.append(a)
            operands = [od.node for od in k.operands]
            args = operands + [a for a in extra if a not in operands]
            self.kernels[k.name] = (names.create_name(k.name),
                                    names.create_name(f"{k.name}_numpy"), args)

        def path_args(k: Any) -> list[Any]:
            return self.kernels[k.name][2]

        def kernel_line(k: Any) -> list[str]:
            step, _, args = self.kernels[k.name]
            texts = [w.value(a) for a in args]
            if k.name in dynamic:
                texts.insert(0, f"{shapes}[{k.name!r}]")
            ops = ", ".join(n.name for n in k.members)
            head = f"# C kernel {k.name} ({k.kind}, {len(k.members)} nodes): {ops}"
            if len(head) > 96:
                head = head[:93] + "..."
            outs = _tuple_text([n.name for n in k.out_nodes])
            return [head, f"{outs} = {step}({', '.join(texts)})"]

        shapes = names.create_name("shapes")
        chunks: list[str] = []
        for k in kernels:
            _, path, args = self.kernels[k.name]
            outs = list(k.out_nodes)
            text = f"return {_tuple_text([n.name for n in outs])}"
            body = w.body(list(k.members), set(args), set(outs), kernel_line, path_args,
                          lambda text=text: text)
            chunks.append(f"def {path}({', '.join(a.name for a in args)}):\n"
                          + "".join(f"    {line}\n" for line in body))

        entries: list[Any] = []
        for item in schedule:
            if _is_kernel(item) and item.name not in called:
                entries += item.members  # below min_size (or not built): NumPy statements
            else:
                entries.append(item)
        output = next(n for n in graph.nodes if n.op == "output")
        check = (f"if {helper['fp_warn_mask']}() is None:  # an np.errstate mode raises: "
                 "run the graph as written")
        head = [check, f"    return {helper['eager_forward']}({', '.join(params)})"]
        if dynamic:
            sizes = "".join(f"{params[i]}.shape[{j}], " for i, j in size_sources)
            head.append(f"{shapes} = {helper['kernel_shapes']}(({sizes.rstrip()}))")
        returned = output.args[0] if output.args else None
        body = w.body(entries, set(placeholders), set(output.all_input_nodes), kernel_line,
                      path_args, lambda: f"return {w.value(returned)}")
        self.fn_name = names.create_name("forward")
        chunks.append(f"def {self.fn_name}({', '.join(params)}):\n"
                      + "".join(f"    {line}\n" for line in head + body))
        self.code = "\n".join(chunks)

        fn_globals = dict(w.globals)
        for name, target in w.attr_globals.items():
            fn_globals[name] = gm.attrs[target] if target in getattr(gm, "attrs", {}) \
                else getattr(gm, target)
        for key, value in helpers.items():
            fn_globals[helper[key]] = value
        self.filename = f"<fx-graph c-program_{next(_counter)}>"
        fn_globals["__name__"] = self.filename
        exec(compile(self.code, self.filename, "exec"), fn_globals)  # noqa: S102
        self.fn: Callable[..., Any] = fn_globals.pop(self.fn_name)
        paths = {name: fn_globals.pop(path) for name, (_, path, _) in self.kernels.items()}
        # The NumPy paths get globals of their own: the program's hold the steps, which hold
        # the paths (one shared dict would be a reference cycle, freed only by the collector).
        path_globals = dict(fn_globals)
        #: kernel name -> its generated NumPy path (the kernel's members as NumPy statements)
        self.numpy_paths = {name: types.FunctionType(fn.__code__, path_globals, fn.__name__)
                            for name, fn in paths.items()}
        self.globals = fn_globals
        by_name = {n.name: n for n in graph.nodes}
        #: line of ``code`` -> the node its statement computes
        self.line_nodes = {}
        # A statement that names no value (a store ``y[m] = v``) belongs to the user line its
        # ``# File:`` comment heads: any node of that line places it (warnings, tracebacks).
        headed: dict[str, Any] = {}
        for n in graph.nodes:
            comment = stack_comment(n.meta.get("stack"))
            if comment:
                headed.setdefault(f"#{comment[3:]}".strip(), n)
        current = None
        for lineno, line in enumerate(self.code.splitlines(), 1):
            target = _ASSIGNED.match(line)
            text = line.strip()
            if target and target.group(1) in by_name:
                self.line_nodes[lineno] = by_name[target.group(1)]
            elif text.startswith("#"):
                current = headed.get(text, current)
            elif not line.startswith(" "):
                current = None  # (a new function)
            elif current is not None and text and not text.startswith(
                    ("del ", "return", "if ")):
                self.line_nodes[lineno] = current
        # The functions run at the user's file:line, so NumPy's warnings name them
        # (`fx.locations`; a relocated function maps its lines back through `line_nodes`).
        self.fn = relocate(self.fn, self.line_nodes)
        self.numpy_paths = {name: relocate(fn, self.line_nodes)
                            for name, fn in self.numpy_paths.items()}
        # A traceback through the program shows its lines (kept while the program lives),
        # and the user's statement that raised (`line_nodes`, `dynamo.tracebacks`).
        linecache.cache[self.filename] = (len(self.code), None,
                                          self.code.splitlines(keepends=True), self.filename)
        # (a C callback: ``linecache.cache.pop(filename, ref)``, see fx.weak)
        on_death(self.fn, functools.partial(linecache.cache.pop, self.filename))
        # (registered through the function, which lives as long as the compiled graph does)
        self.fn.line_nodes = self.line_nodes  # type: ignore[attr-defined]
        register_generated(self.filename, self.fn)

    def bind(self, kernel_name: str, step: Callable[..., Any]) -> None:
        """Make ``step`` the callable the program calls for kernel ``kernel_name``."""
        self.globals[self.kernels[kernel_name][0]] = step

    def functions(self) -> list[Callable[..., Any]]:
        """The generated functions (the program and the NumPy paths), for hiding their frames."""
        return [self.fn, *self.numpy_paths.values()]
