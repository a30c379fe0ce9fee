"""`Graph`: an ordered list of `Node`s, the IR every part of npdynamo passes around.

The translator (``dynamo.output_graph``) builds one with ``placeholder``/``call_function``/...;
passes (``fx/passes``; dead code elimination is `Graph.eliminate_dead_code`) rewrite it;
`GraphModule` turns it into Python (`fx.python_code`); backends read it.
Nodes live in a doubly linked list closed by a sentinel ``root`` node, so inserting and erasing
are O(1) and erasing the node an iteration stands on is safe. Example::

    g = Graph()
    x = g.placeholder("x")
    s = g.call_function(np.sin, (x,))
    g.output(g.call_function(operator.mul, (s, 2.0)))
    print(g)   # ->

    %x = placeholder[target=x]
    %sin = call_function[target=numpy.sin](args = (%x,), kwargs = {})
    %mul = call_function[target=operator.mul](args = (%sin, 2.0), kwargs = {})
    return %mul
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .names import RESERVED, Namespace, candidate_name, qualified_name
from .node import Node, format_arg, format_val, map_arg

__all__ = ["Graph", "GraphError"]


class GraphError(RuntimeError):
    """The graph is malformed, or an edit would make it so."""


class _NodeList:
    """Live view of a graph's nodes: ``len``, iteration, ``reversed``.

    Iteration remembers the neighbour before yielding, so the current node may be erased (or
    moved) from inside the loop; nodes erased before being reached are skipped.
    """

    def __init__(self, graph: Graph, reverse: bool = False) -> None:
        self._graph = graph
        self._reverse = reverse

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        step = "_prev" if self._reverse else "_next"
        cur = getattr(root, step)
        while cur is not root:
            following = getattr(cur, step)
            if not cur._erased:
                yield cur
            cur = following

    def __reversed__(self) -> _NodeList:
        return _NodeList(self._graph, not self._reverse)

    def __repr__(self) -> str:
        return f"<nodes {[n.name for n in self]}>"


class Graph:
    """Nodes in program order. See the module docstring."""

    def __init__(self) -> None:
        self._root = Node(self, "", "root", "")
        #: The strong references that keep the nodes alive (links between nodes are weak).
        self._owned: dict[Node, None] = {}
        self._len = 0
        self._namespace = Namespace(RESERVED)
        # New nodes go before `_anchor` ("before" mode) or after it ("after" mode, anchor moves
        # forward so a block of inserts keeps program order).
        self._anchor = self._root
        self._insert_after = False

    @property
    def nodes(self) -> _NodeList:
        return _NodeList(self)

    # -- building --------------------------------------------------------------------------------

    def create_node(
        self,
        op: str,
        target: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> Node:
        """Insert a new node at the current insertion point (the end unless told otherwise).

        ``name`` is a wish; the node gets a unique identifier derived from it (or from
        ``target`` when not given): ``numpy.sin`` -> ``sin``, a second one ``sin_1``.
        """
        args = tuple(args or ())
        self._check_inputs_belong(args, kwargs)
        unique = self._namespace.create_name(name or candidate_name(op, target, args))
        node = Node(self, unique, op, target, args, kwargs)
        self._owned[node] = None
        if self._insert_after:
            self._anchor.append(node)
            self._anchor = node
        else:
            self._anchor.prepend(node)
        self._len += 1
        return node

    def rename_node(self, node: Node, wish: str) -> str:
        """Give `node` a new unique identifier derived from `wish` (e.g. the user's variable
        name); returns the name it got. Generated code changes at the next recompile."""
        if node.graph is not self:
            raise GraphError(f"rename_node: {node.name} belongs to another graph")
        if node.name != wish:  # its current name is already taken by itself
            node.name = self._namespace.create_name(wish)
        return node.name

    def _check_inputs_belong(self, args: Any, kwargs: Any) -> None:
        def check(n: Node) -> Node:
            if n.graph is not self:
                raise GraphError(
                    f"input node %{n.name} belongs to another graph; copy it into this graph "
                    "first (Graph.node_copy) or pass a node of this graph"
                )
            if n._erased:
                raise GraphError(f"input node %{n.name} was erased from the graph")
            return n

        map_arg((args, kwargs), check)

    def placeholder(self, name: str) -> Node:
        return self.create_node("placeholder", name, name=name)

    def get_attr(self, name: str) -> Node:
        return self.create_node("get_attr", name, name=name)

    def call_function(
        self, target: Callable[..., Any], args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Node:
        return self.create_node("call_function", target, args, kwargs)

    def call_method(
        self, name: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Node:
        return self.create_node("call_method", name, args, kwargs)

    def output(self, value: Any) -> Node:
        """The graph's result: a node, or a tuple/list/dict structure holding nodes."""
        return self.create_node("output", "output", (value,), name="output")

    @contextlib.contextmanager
    def _insert_point(self, anchor: Node, after: bool) -> Iterator[None]:
        saved = self._anchor, self._insert_after
        self._anchor, self._insert_after = anchor, after
        try:
            yield
        finally:
            self._anchor, self._insert_after = saved

    def inserting_before(self, node: Node | None = None) -> contextlib.AbstractContextManager:
        """Context manager: new nodes go right before ``node`` (None: at the beginning)."""
        if node is None:
            return self._insert_point(self._root, after=True)
        return self._insert_point(node, after=False)

    def inserting_after(self, node: Node | None = None) -> contextlib.AbstractContextManager:
        """Context manager: new nodes go after ``node``, in creation order (None: at the end)."""
        if node is None:
            return self._insert_point(self._root, after=False)
        return self._insert_point(node, after=True)

    def node_copy(
        self, node: Node, arg_transform: Callable[[Node], Any] = lambda n: n
    ) -> Node:
        """Copy ``node`` (possibly from another graph) into this graph.

        ``arg_transform`` maps each input node of ``node`` to the value to use in the copy
        (typically the copy of that input made earlier). ``meta`` is copied shallowly.
        """
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        copy = self.create_node(node.op, node.target, args, kwargs, name=node.name)
        copy.meta = dict(node.meta)
        return copy

    # -- editing ---------------------------------------------------------------------------------

    def erase_node(self, node: Node) -> None:
        """Remove ``node``; it must have no users left (replace or erase them first)."""
        if node.graph is not self or node._erased:
            raise GraphError(f"%{node.name} is not a live node of this graph")
        if node.users:
            users = ", ".join(f"%{u.name}" for u in node.users)
            raise GraphError(
                f"cannot erase %{node.name}: still used by {users}; call "
                "replace_all_uses_with() or erase the users first"
            )
        if self._anchor is node:
            # Keep the insertion point valid: continue from the neighbour in the same direction.
            self._anchor = node._prev if self._insert_after else node._next
        node._unlink()
        node._erased = True
        node.args, node.kwargs = (), {}
        self._owned.pop(node, None)
        self._len -= 1

    def find_nodes(self, *, op: str | None = None, target: Any = None) -> list[Node]:
        """Nodes with the given ``op`` and/or ``target`` (targets compare by identity or ==)."""
        found = []
        for n in self.nodes:
            if op is not None and n.op != op:
                continue
            if target is not None and not (
                n.target is target or (isinstance(target, str) and n.target == target)
            ):
                continue
            found.append(n)
        return found

    def eliminate_dead_code(self) -> bool:
        """Erase the nodes whose value nobody reads and that have no effect, until none is left;
        True if the graph changed.

        Called by the translator before handing a graph to a backend and by the C backend's
        passes. A node is kept when `Node.is_impure` (placeholders, output, setitem, in-place
        operators, ``out=`` calls, targets registered with `fx.node.register_impure`) or when
        `Node.may_raise_or_warn` (an unused ``x ** x`` on negative integers must still raise,
        an unused ``x / 0.0`` must still warn): removing it would change what the program does.
        """
        changed = False
        while True:
            # Walking backwards erases a whole dead chain in one sweep: by the time we reach a
            # node, its dead users (which come later) are already gone. Loop anyway until a
            # fixed point.
            removed = False
            for node in reversed(self.nodes):
                if not node.users and not node.is_impure() and not node.may_raise_or_warn():
                    self.erase_node(node)
                    removed = True
            if not removed:
                return changed
            changed = True

    # -- checking and printing -------------------------------------------------------------------

    def lint(self) -> None:
        """Raise `GraphError` unless the graph is well formed.

        Checks: list links, every node's inputs are earlier live nodes of this graph, ``users``
        matches the inputs exactly, names are unique identifiers, at most one output and it is
        the last node.
        """
        seen: set[Node] = set()
        names: set[str] = set()
        outputs = 0
        prev = self._root
        for n in self.nodes:
            where = f"%{n.name} ({n.op})"
            if n.graph is not self or n._prev is not prev:
                raise GraphError(f"{where}: broken list links or node of another graph")
            if not n.name.isidentifier() or n.name in names:
                raise GraphError(f"{where}: name is not a unique identifier")
            names.add(n.name)
            read: dict[Node, None] = {}
            map_arg((n.args, n.kwargs), lambda a: read.setdefault(a, None))
            if list(read) != n.all_input_nodes:
                raise GraphError(f"{where}: args/kwargs were changed without the setters")
            for inp in read:
                if inp not in seen:
                    raise GraphError(
                        f"{where} reads %{inp.name}, which is not an earlier node of this graph"
                    )
                if n not in inp.users:
                    raise GraphError(f"{where} reads %{inp.name} but is missing from its users")
            for user in n.users:
                if user._erased or user.graph is not self or n not in user._input_nodes:
                    raise GraphError(f"{where} lists %{user.name} as a user that does not read it")
            if outputs:
                raise GraphError(f"{where} comes after the output node")
            outputs += n.op == "output"
            seen.add(n)
            prev = n
        if len(seen) != self._len:
            raise GraphError(f"node count {self._len} does not match the list ({len(seen)})")

    def format_tabular(self) -> str:
        """The nodes as a table: opcode, name, target, args, kwargs, val."""
        header = ["opcode", "name", "target", "args", "kwargs", "val"]
        rows = [header]
        for n in self.nodes:
            target = n.target if isinstance(n.target, str) else qualified_name(n.target)
            val = format_val(n.meta["val"]) if "val" in n.meta else ""
            rows.append([n.op, n.name, target, format_arg(n.args), format_arg(n.kwargs), val])
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def print_tabular(self) -> None:
        print(self.format_tabular())

    def __str__(self) -> str:
        return "\n".join(n.format_node() for n in self.nodes)

    def __repr__(self) -> str:
        return f"<Graph with {self._len} nodes>"
