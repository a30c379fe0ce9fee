"""The Python code generator of `fx`: a `Graph` -> the source of a plain ``def forward``.

In: a `Graph` (its nodes, their targets and constants). Out: a `PythonCode`, the source of a plain
``def forward(<placeholders>)`` plus the globals it needs (`generate`), which `GraphModule`
executes; the C backend's program printer (``dynamo/backends/c/program.py``) reuses its writer.
Identifiers come from `fx.names`. Example of generated code::

    def forward(x, y):
        sin = numpy.sin(x)  # File: f.py:3 in f, code: return np.sin(x) * y
        mul = sin * y
        return mul

Rules: ``operator`` functions print as Python operators (``a * b``, ``-a``, ``x[0:2, None]``,
``x[i] = v``), NumPy callables as ``numpy.<path>``, other callables and constants that ``repr``
cannot rebuild exactly (arrays, objects) become globals. Node names and globals share one
namespace, so a name can never shadow another or a name the generated code itself uses.
"""

from __future__ import annotations

import builtins
import keyword
import math
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .control import loop_of
from .names import RESERVED, Namespace, dtype_text, held_by, numpy_path
from .node import Node

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["PythonCode", "generate", "paced_frees", "GraphWriter", "heap_bytes", "is_setitem",
           "stack_comment"]


_NUMBER = re.compile(r"^\d[\d_.]*(e[+-]?\d+)?j?$")
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*$")
_DOTTED_CALL = re.compile(r"^[A-Za-z_][\w.]*(\(.*\))$", re.S)
_CALLS = ("call_function", "call_method")


@dataclass
class PythonCode:
    """Generated source of ``forward`` and the globals it must be executed with.

    ``attr_globals`` maps a global name to the ``get_attr`` target whose value it must hold; the
    `GraphModule` fills those in from its ``attrs``.
    """

    src: str
    globals: dict[str, Any]
    attr_globals: dict[str, str] = field(default_factory=dict)
    #: line number in ``src`` -> the node whose statement it is (what raised, for a traceback)
    line_nodes: dict[int, Node] = field(default_factory=dict)


_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
    operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.is_: "is",
    operator.is_not: "is not",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}

# Python's operator precedence (higher binds tighter), for nesting inlined expressions with only
# the parentheses they need. Comparisons are non-associative here: ``(a < b) < c`` keeps its
# parentheses, since ``a < b < c`` means something else.
_PRECEDENCE = {
    "**": 16, "unary": 15, "*": 14, "@": 14, "/": 14, "//": 14, "%": 14, "+": 13, "-": 13,
    "<<": 12, ">>": 12, "&": 11, "^": 10, "|": 9,
    "<": 8, "<=": 8, "==": 8, "!=": 8, ">": 8, ">=": 8, "not ": 7,
}
_ATOM = 100

# NumPy scalar types whose value survives `type(python_value)` exactly.
_EXACT_SCALARS = (np.bool_, np.integer, np.float16, np.float32, np.float64, np.complex64,
                  np.complex128)


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return repr(value)
    if math.isnan(value):
        # (the sign of a NaN shows in results: np.copysign, np.signbit, x * nan's sign bit)
        return "-float('nan')" if math.copysign(1.0, value) < 0 else "float('nan')"
    return f"float('{'-' if value < 0 else ''}inf')"


class GraphWriter:
    """Renders one graph: expressions for values, one statement per node. (The C backend's
    program writer, `backends.c.program`, is one: it renders kernel calls the same way.)"""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.names = Namespace(RESERVED | {n.name for n in graph.nodes})
        self.globals: dict[str, Any] = {"numpy": np, "operator": operator}
        self.by_id: dict[int, str] = {}
        self.attr_globals: dict[str, str] = {}
        self.line_nodes: dict[int, Node] = {}
        self.inline = _inlined_nodes(graph)

    # -- values ----------------------------------------------------------------------------------

    def add_global(self, value: Any, candidate: str) -> str:
        known = self.by_id.get(id(value))
        if known is not None:
            return known
        name = self.names.create_name(candidate)
        self.globals[name] = value
        self.by_id[id(value)] = name
        return name

    def value(self, v: Any) -> str:
        """Python expression for ``v`` (constants round-trip exactly or become globals)."""
        kind = type(v)
        if isinstance(v, Node):
            return self.expression(v) if v in self.inline else v.name
        if v is None or v is Ellipsis or kind in (bool, int, str, bytes):
            return "..." if v is Ellipsis else repr(v)
        if kind is float:
            return _float_text(v)
        if kind is complex:
            # repr(complex(-0.0, 0.0)) is "(-0+0j)", which evaluates to +0j: spell both parts out.
            return f"complex({_float_text(v.real)}, {_float_text(v.imag)})"
        if kind is tuple:
            inner = ", ".join(self.value(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if kind is list:
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if kind is dict:
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        if kind is slice:
            return f"slice({self.value(v.start)}, {self.value(v.stop)}, {self.value(v.step)})"
        return self.numpy_value(v) or self.callable_value(v) or self.add_global(v, "_const_0")

    def numpy_value(self, v: Any) -> str | None:
        if isinstance(v, np.dtype):
            text = dtype_text(v, same_object=False)
            return f"numpy.dtype({text!r})" if text is not None else None
        if isinstance(v, type) and issubclass(v, np.generic) and numpy_path(v):
            return numpy_path(v)
        if isinstance(v, _EXACT_SCALARS) and numpy_path(type(v)):
            py = v.item()
            rebuilt = type(v)(py)
            if rebuilt.tobytes() == v.tobytes() and type(py) in (bool, int, float, complex):
                inner = self.value(py)
                if not inner.startswith("_const"):
                    return f"{numpy_path(type(v))}({inner})"
        return None

    def callable_value(self, v: Any) -> str | None:
        if not callable(v) or isinstance(v, np.ndarray):
            return None
        loop = loop_of(v)
        if loop is not None:  # (its `entry` under its name: no call through the Loop object)
            return self.add_global(loop.entry, loop.__name__)
        path = numpy_path(v)
        if path:
            return path
        name = getattr(v, "__name__", None)
        if isinstance(name, str) and held_by(operator, name) is v:
            return f"operator.{name}"
        return self.add_global(v, name if isinstance(name, str) else type(v).__name__)

    def operand(self, v: Any, attribute: bool = False) -> str:
        """An expression safe as an operand of an operator, a subscript or (``attribute``)
        before a ``.name``: names, calls and brackets as they are, negative literals in parens.
        """
        text = self.value(v)
        if not attribute and _NUMBER.match(text):
            return text
        if _DOTTED.match(text) or (text[0] in "([{'\"" and _balanced(text)):
            return text
        call = _DOTTED_CALL.match(text)
        return text if call and _balanced(call.group(1)) else f"({text})"

    def precedence(self, node: Node) -> int:
        """How tightly the expression an inlined node renders to binds."""
        if not node.kwargs and len(node.args) == 2 and node.op == "call_function" and node.target in _BINARY:
            return _PRECEDENCE[_BINARY[node.target]]
        if not node.kwargs and len(node.args) == 1 and node.op == "call_function" and node.target in _UNARY:
            return _PRECEDENCE["unary" if node.target is not operator.not_ else "not "]
        return _ATOM

    def nested(self, v: Any, parent: str, side: str) -> str:
        """Operand `v` of operator `parent`, parenthesized only where precedence needs it."""
        if not (isinstance(v, Node) and v in self.inline):
            return self.operand(v)
        child, mine = self.precedence(v), _PRECEDENCE[parent]
        if child == _ATOM:  # (rendered once: rendering it here too doubled the work per level)
            return self.operand(v)
        text = self.expression(v)
        right_assoc = parent == "**"
        needs = child < mine or (child == mine and (
            mine == 8 or (side == "right") != right_assoc))
        if parent == "**" and side == "left" and child == _PRECEDENCE["unary"]:
            needs = True  # (-x) ** 2, not -(x ** 2)
        return f"({text})" if needs else text

    def index(self, idx: Any) -> str:
        """Subscript text: slices as ``a:b:c``, Ellipsis as ``...``, tuples without parens."""
        if type(idx) is tuple and idx:
            inner = ", ".join(self.index_item(x) for x in idx)
            return inner + "," if len(idx) == 1 else inner
        return self.index_item(idx)

    def index_item(self, item: Any) -> str:
        if type(item) is not slice:
            return self.value(item)
        start, stop = (
            "" if part is None else self.value(part) for part in (item.start, item.stop)
        )
        text = f"{start}:{stop}"
        return text if item.step is None else f"{text}:{self.value(item.step)}"

    def call_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        parts = [self.value(a) for a in args]
        if all(isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k)
               for k in kwargs):
            parts += [f"{k}={self.value(v)}" for k, v in kwargs.items()]
        elif kwargs:
            parts.append(f"**{self.value(dict(kwargs))}")
        return ", ".join(parts)

    # -- statements ------------------------------------------------------------------------------

    def expression(self, node: Node) -> str:
        args, kwargs, target = node.args, node.kwargs, node.target
        if node.op == "call_method":
            return f"{self.operand(args[0], True)}.{target}({self.call_args(args[1:], kwargs)})"
        simple = not kwargs
        if simple and len(args) == 2 and target in _BINARY:
            sym = _BINARY[target]
            return f"{self.nested(args[0], sym, 'left')} {sym} {self.nested(args[1], sym, 'right')}"
        if simple and len(args) == 1 and target in _UNARY:
            return f"{_UNARY[target]}{self.nested(args[0], 'unary' if target is not operator.not_ else 'not ', 'right')}"
        if simple and len(args) == 2 and target is operator.getitem:
            return f"{self.operand(args[0])}[{self.index(args[1])}]"
        if (simple and len(args) == 2 and target is builtins.getattr
                and isinstance(args[1], str) and args[1].isidentifier()):
            return f"{self.operand(args[0], True)}.{args[1]}"
        return f"{self.callable_value(target)}({self.call_args(args, kwargs)})"

    def statements(self, node: Node) -> list[str]:
        if node.op == "output":
            return [f"return {self.value(node.args[0] if node.args else None)}"]
        if node.op == "get_attr":
            # The node's own name is the global holding the attribute: no statement needed.
            self.attr_globals[node.name] = node.target
            self.globals[node.name] = None
            return []
        if is_setitem(node):
            obj, idx, val = node.args
            lines = [f"{self.operand(obj)}[{self.index(idx)}] = {self.value(val)}"]
            return lines + ([f"{node.name} = None"] if node.users else [])
        loop = loop_of(node.target) if node.op == "call_function" else None
        head = [f"# {loop.comment()}"] if loop is not None else []  # (`fx.control`)
        return head + [f"{node.name} = {self.expression(node)}"]

    def last_uses(self) -> dict[Node, list[Node]]:
        """Statement node -> the values no later statement reads: deleted after it (or, when
        large, after a later allocation: `paced_frees`), so a long graph does not keep every
        intermediate array alive until it returns (as plain NumPy would not)."""
        last: dict[Node, Node] = {}
        for node in self.graph.nodes:
            if node.op == "placeholder" or node in self.inline or node.op == "output":
                continue
            pending, seen = list(node.all_input_nodes), set()
            while pending:  # inputs of values nested into this statement are read here too
                value = pending.pop()
                if value in seen:
                    continue
                seen.add(value)
                if value in self.inline:
                    pending += value.all_input_nodes
                elif value.op in ("call_function", "call_method"):
                    last[value] = node  # (arguments stay: the caller holds them anyway)
            if not node.users and not is_setitem(node):
                last[node] = node  # computed for its effect only (it may warn or raise)
        found: dict[Node, list[Node]] = {}
        output = next((n for n in self.graph.nodes if n.op == "output"), None)
        outputs = set(output.all_input_nodes) if output is not None else set()
        for value, statement in last.items():
            if value not in outputs:
                found.setdefault(statement, []).append(value)
        return found

    def source(self, fn_name: str) -> str:
        params = [n.name for n in self.graph.nodes if n.op == "placeholder"]
        body: list[str] = []
        previous_comment = ""
        dying = self.last_uses()
        statements = [n for n in self.graph.nodes if n.op != "placeholder" and n not in self.inline]
        frees = paced_frees([(dying.get(n, []), [n] if n.op in _CALLS else [])
                             for n in statements])
        for node, dead in zip(statements, frees):
            lines = self.statements(node)
            if dead and node.next.op != "output":  # (returning frees them anyway)
                lines = lines + [f"del {', '.join(sorted(dead))}"]
            # The user's source line heads the statements made from it (shown once, not per node).
            comment = stack_comment(node.meta.get("stack"))
            if comment and comment != previous_comment and lines:
                body.append(f"    #{comment[3:]}")
            previous_comment = comment or previous_comment
            for line in lines:
                body.append(f"    {line}")
                self.line_nodes[len(body) + 1] = node  # (line 1 is the ``def``)
        if not any(line.lstrip().startswith("return ") for line in body):
            body.append("    return None")
        return f"def {fn_name}({', '.join(params)}):\n" + "\n".join(body) + "\n"


# -- when dead values are freed ------------------------------------------------------------------

#: Dead arrays of at least this many bytes are freed in step with new allocations (`paced_frees`);
#: smaller ones right after their last use (they come from NumPy's small-block cache or malloc's
#: bins and never give memory back to the OS).
PACE_MIN_BYTES = 64 * 1024
#: ... and of at most this many: glibc always maps larger blocks with mmap and unmaps them on
#: free, whenever they are freed, so deferring them would only raise the peak.
PACE_MAX_BYTES = 32 * 1024 * 1024
#: At most this many dead arrays wait for an allocation to pair with (bounds the extra memory).
PACE_MAX_PENDING = 8
#: ... and hold at most this many bytes.
PACE_MAX_PENDING_BYTES = 64 * 1024 * 1024
#: Calls whose result is (or may be) a view of an argument, or the argument itself (in-place
#: operators): no new data block to pair with.
_VIEW_METHODS = frozenset({"transpose", "reshape", "view", "ravel", "squeeze", "swapaxes",
                           "__getitem__", "diagonal"})
_VIEW_FUNCTIONS = frozenset({operator.getitem, builtins.getattr, np.transpose, np.reshape,
                             np.ravel, np.squeeze, np.expand_dims, np.broadcast_to, np.asarray,
                             np.asanyarray, np.swapaxes, np.moveaxis, np.atleast_1d,
                             np.atleast_2d, np.atleast_3d, np.diagonal, operator.setitem,
                             operator.iadd, operator.isub, operator.imul, operator.itruediv,
                             operator.ifloordiv, operator.imod, operator.ipow, operator.iand,
                             operator.ior, operator.ixor, operator.ilshift, operator.irshift,
                             operator.imatmul})


def heap_bytes(node: Node) -> int:
    """Bytes of the array a node's value holds (0 for scalars, unknown or symbolic sizes)."""
    meta = node.meta.get("val")
    shape = getattr(meta, "shape", None)
    if shape is None or getattr(meta, "is_scalar", True) or not all(
            isinstance(d, int) for d in shape):
        return 0
    return math.prod(shape) * meta.dtype.itemsize


def _allocates(node: Node) -> bool:
    if node.op == "call_method":
        return node.target not in _VIEW_METHODS
    return node.op == "call_function" and node.target not in _VIEW_FUNCTIONS


def paced_frees(steps: list[tuple[list[Node], list[Node]]]) -> list[list[str]]:
    """Which names to ``del`` after each statement, given per statement the values whose last
    use it is and the values it defines.

    Small values are deleted right after their last use. A large one (`PACE_MIN_BYTES` ..
    `PACE_MAX_BYTES`) waits until a later statement allocates an array of the same size, then
    is deleted right after it, one per allocation, oldest first; at most `PACE_MAX_PENDING`
    values (`PACE_MAX_PENDING_BYTES`) wait, the oldest is deleted beyond that. That is the
    order a NumPy loop frees in (``dx = x.T - x`` allocates the new ``dx``, then drops the old
    one), and what glibc's malloc needs to keep reusing the same blocks:
    deleting several large dead values at once (``del dz, inv_r3`` in an unrolled n-body step)
    leaves more than its trim threshold (twice the largest block freed so far) free at the
    top of the heap, malloc gives it back to the OS, and the next step faults every page of
    its new arrays in again (nbody: 4x the page faults of the NumPy loop, 0.5x its speed).
    The extra memory is what the NumPy loop holds anyway: the old value of each variable.
    """
    out: list[list[str]] = []
    pending: list[Node] = []
    for dying, defined in steps:
        now: list[str] = []
        for v in dying:
            if PACE_MIN_BYTES <= heap_bytes(v) <= PACE_MAX_BYTES:
                pending.append(v)
            else:
                now.append(v.name)
        for d in defined:
            size = heap_bytes(d) if _allocates(d) else 0
            match = next((p for p in pending if heap_bytes(p) == size), None) if size else None
            if match is not None:
                pending.remove(match)
                now.append(match.name)
        while pending and (len(pending) > PACE_MAX_PENDING
                           or sum(map(heap_bytes, pending)) > PACE_MAX_PENDING_BYTES):
            now.append(pending.pop(0).name)
        out.append(now)
    return out


def is_setitem(node: Node) -> bool:
    return (node.op == "call_function" and node.target is operator.setitem and not node.kwargs
            and len(node.args) == 3)


def _uses(value: Any, node: Node) -> int:
    """How many times `node` appears in an argument structure."""
    if value is node:
        return 1
    if isinstance(value, (tuple, list)):
        return sum(_uses(v, node) for v in value)
    if isinstance(value, dict):
        return sum(_uses(v, node) for v in value.values())
    if isinstance(value, slice):
        return sum(_uses(v, node) for v in (value.start, value.stop, value.step))
    return 0


#: Deepest nesting of inlined values in one generated expression.
MAX_NESTING = 24


def _inlined_nodes(graph: Graph) -> set[Node]:
    """Nodes written inside their one user's expression instead of as a named statement.

    A pure call used exactly once, by a call made from the same user source line (or a line of
    the user's expression, when it spans several), with no impure node in between, is nested as
    the user wrote it (``add = numpy.sin(x) * y + 1``). Besides reading like the source, this
    keeps NumPy's temporary elision: an unnamed temporary has one reference, so NumPy may reuse
    its memory for the next operation, exactly as in the original code (and a value of a
    continuation line, named, was computed ahead of the expression and kept alive through it).
    Temporaries the user named stay named. Graphs without source lines are not changed.
    """
    calls = ("call_function", "call_method")
    inline: set[Node] = set()
    depth: dict[Node, int] = {}  # nesting depth of an inlined node's expression
    for node in graph.nodes:
        if node.op not in calls or node.is_impure() or len(node.users) != 1:
            continue
        # A long chain on one line (an unrolled ``s = s + x[i]``) is cut into named statements
        # every MAX_NESTING levels: the printer recurses once per level.
        depth[node] = 1 + max((depth[i] for i in node.all_input_nodes if i in inline), default=0)
        if depth[node] > MAX_NESTING:
            depth[node] = 0
            continue
        (user,) = node.users
        stack = node.meta.get("stack")
        if user.op not in calls or not stack or (user.meta.get("stack") != stack
                                                 and not _within_expression(node, user)):
            continue
        if _uses(user.args, node) + _uses(user.kwargs, node) != 1:
            continue
        between, ok = node.next, True
        while between is not user and ok:
            ok = not between.is_impure()
            between = between.next
        if ok:
            inline.add(node)
    return inline


_FILE_LINE = re.compile(r"^(.*):(\d+)(?:\s|$)")


def _within_expression(node: Node, user: Node) -> bool:
    """Is `node` made on a line of `user`'s expression, which spans several lines (``u + 0.1 *
    (np.roll(u, 1) ...`` continued on the next line), in the same file and frame?"""
    here, there = node.meta.get("stack"), user.meta.get("stack")
    p, q = node.meta.get("frame_position"), user.meta.get("frame_position")
    if not (isinstance(here, str) and isinstance(there, str) and p and q):
        return False
    a, b = _FILE_LINE.match(here), _FILE_LINE.match(there)
    if a is None or b is None or a.group(1) != b.group(1) or q[1] is None or p[0] is None:
        return False
    # (the same frame: an inlined helper's nodes carry the call's position in the root frame,
    # and their own lines in `stack`)
    return q[0] <= int(a.group(2)) <= q[1] and q[0] <= p[0] <= q[1] and \
        p[0] == int(a.group(2)) and q[0] == int(b.group(2))


def _balanced(text: str) -> bool:
    # "(a, b)" is one atom, "(a) + (b)" is not: the opening bracket must close at the end.
    depth, closers = 0, {")": "(", "]": "[", "}": "{"}
    in_str: str | None = None
    for i, ch in enumerate(text):
        if in_str:
            if ch == in_str and text[i - 1] != "\\":
                in_str = None
            continue
        if ch in "'\"":
            in_str = ch
        elif ch in "([{":
            depth += 1
        elif ch in closers:
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return False
    return depth == 0


def stack_comment(stack: Any) -> str:
    """``  # File: f.py:3 in f, code: y = ...`` from ``meta["stack"]`` (str or list of lines)."""
    if not stack:
        return ""
    raw = stack.splitlines() if isinstance(stack, str) else [str(s) for s in stack]
    lines = [line.strip() for line in raw if line.strip()]
    if not lines:
        return ""
    text = lines[0] + (", code: " + " | ".join(lines[1:]) if len(lines) > 1 else "")
    return f"  # File: {text}"


def generate(graph: Graph, fn_name: str = "forward") -> PythonCode:
    """Source of ``def fn_name(<placeholders>)`` for ``graph`` plus the globals it needs."""
    writer = GraphWriter(graph)
    src = writer.source(fn_name)
    return PythonCode(src, writer.globals, writer.attr_globals, writer.line_nodes)
