"""`Node`: one operation of an `fx.Graph`, with its use-def links.

A node is created by `Graph.create_node` (or the helpers `placeholder`, `call_function`, ...) and
lives in the graph's doubly linked list. Its ``args``/``kwargs`` may hold other nodes anywhere
inside nested tuples, lists, dicts and slices; assigning them goes through setters that keep
``users`` of the input nodes exact, which is what DCE, CSE and ``replace_all_uses_with`` rely on.

The six-word vocabulary of ``op``:

==============  ==========================================  ======================================
op              target                                      args / kwargs
==============  ==========================================  ======================================
placeholder     the argument name                           ()
get_attr        attribute name on the GraphModule           ()
call_function   the callable (ufunc, numpy function, ...)   call arguments
call_method     the method name, e.g. ``"sum"``             ``args[0]`` is self
output          ``"output"``                                ``(value,)``: what ``forward`` returns
==============  ==========================================  ======================================

Side effects are declared, not guessed: `register_impure` adds a target that DCE must keep.
Errors and warnings are effects too: `may_raise_or_warn` says whether a node could raise or warn
for inputs of its recorded dtypes and shapes (an unused ``x ** x`` on negative integers raises,
an unused ``x / 0.0`` warns, an unused ``np.log(x)`` raises under the caller's ``np.errstate``);
DCE removes only nodes that are neither impure nor able to raise or warn. `may_raise` narrows it to
exceptions when floating-point errors only warn (the C backend fuses no kernel across such a node).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .control import loop_of
from .names import qualified_name
from .op_rules import written_operands
from .weak import IdentityMap

__all__ = ["Node", "map_arg", "map_aggregate", "register_impure", "may_raise_or_warn", "may_raise",
           "OPS"]

OPS = ("placeholder", "get_attr", "call_function", "call_method", "output")

# Targets whose call changes state visible outside the node's own result: DCE must keep them
# even when nobody reads their value.
_IMPURE_FUNCTIONS: set[Any] = {
    operator.setitem,
    operator.delitem,
    print,
    *(
        getattr(operator, name)
        for name in (
            "iadd isub imul itruediv ifloordiv imod ipow imatmul "
            "iand ior ixor ilshift irshift iconcat"
        ).split()
    ),
}

# ndarray methods that mutate self in place (call_method targets are names).
_IMPURE_METHODS: set[str] = {
    "fill", "sort", "partition", "put", "itemset", "resize", "setfield", "setflags",
    "__setitem__", "__delitem__",
    *(f"__i{name}__" for name in (
        "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()
    )),
}


def register_impure(target: Callable[..., Any] | str) -> Callable[..., Any] | str:
    """Declare that calls of ``target`` have side effects (DCE keeps them).

    ``target`` is a callable (for ``call_function`` nodes) or a method name (for ``call_method``).
    Returns ``target`` so it can be used as a decorator.
    """
    if isinstance(target, str):
        _IMPURE_METHODS.add(target)
    else:
        _IMPURE_FUNCTIONS.add(target)
    return target


# Errors and warnings --------------------------------------------------------------------------
# Everything may raise or warn unless listed here. The dtypes and shapes of the inputs are guarded
# and the rules (`fx.op_rules`) already ran NumPy's own checks on them while tracing (shapes,
# axes, constant indices in bounds, casting rules), so what is left is what depends on the data.

# Views, copies and shape operations: no arithmetic on the data, nothing to overflow.
_NEVER_RAISE_FUNCTIONS: set[Any] = {
    np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
    np.broadcast_to, np.flip, np.fliplr, np.flipud, np.rot90, np.diagonal, np.atleast_1d,
    np.atleast_2d, np.atleast_3d, np.ravel, np.copy, np.real, np.imag, np.zeros_like,
    np.ones_like, np.empty_like,
    *(getattr(np, name) for name in ("matrix_transpose", "permute_dims") if hasattr(np, name)),
}
_NEVER_RAISE_METHODS = {"reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten", "copy"}

# Sign changes never set a floating-point flag; on integers only NumPy *scalar* arithmetic
# checks overflow (array loops wrap silently).
_SIGN_OPS = {operator.neg, operator.pos, np.negative, np.positive, abs, operator.abs, np.abs,
             np.absolute}
# Integer/boolean operations that only warn in NumPy scalar arithmetic (overflow).
_WRAPPING_OPS = {operator.add, operator.sub, operator.mul, np.add, np.subtract, np.multiply}
# Comparisons and bit operations: exact on integers and booleans (floats are left alone: whether
# a NaN comparison sets the "invalid" flag has varied between NumPy versions and CPUs).
_EXACT_ON_INTEGERS = {
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
    np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
    operator.and_, operator.or_, operator.xor, operator.invert, operator.lshift, operator.rshift,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
    np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
}
_INTEGER_KINDS = "biu"


def _input_metas(node: Node) -> list[Any] | None:
    """The recorded abstract values of the node's inputs (None if one is unknown)."""
    metas = []
    for n in node.all_input_nodes:
        val = n.meta.get("val")
        if val is None or not hasattr(val, "dtype"):
            return None
        metas.append(val)
    return metas


def _constants(node: Node) -> list[Any]:
    found: list[Any] = []
    map_aggregate((node.args, node.kwargs),
                  lambda v: None if isinstance(v, Node) else found.append(v))
    return found


def _all_integer(node: Node, metas: list[Any]) -> bool:
    return all(m.dtype.kind in _INTEGER_KINDS for m in metas) and all(
        isinstance(c, (bool, int, np.bool_, np.integer)) for c in _constants(node))


def may_raise_or_warn(node: Node) -> bool:
    """True unless ``node`` certainly neither raises nor warns for inputs of its recorded dtypes
    and shapes (``meta["val"]``), whatever the data and the caller's ``np.errstate``."""
    if node.op in ("placeholder", "get_attr", "output"):
        return False
    if node.op not in ("call_function", "call_method"):
        return True
    metas = _input_metas(node)
    if metas is None:
        return True
    target = node.target
    if node.op == "call_method":
        if target in _NEVER_RAISE_METHODS:
            return False
        if target == "astype" and len(node.args) >= 2 and not isinstance(node.args[1], Node):
            return not _safe_cast(metas, node.args[1])
        return True
    try:
        if target in _NEVER_RAISE_FUNCTIONS:
            return False
        if target is operator.getitem:
            # Constant indices were checked against the guarded shape while tracing; an index
            # array's values are data (could be out of bounds).
            return _has_node(node.args[1:])
        if target is np.astype and len(node.args) >= 2 and not isinstance(node.args[1], Node):
            return not _safe_cast(metas, node.args[1])
        if not metas:
            return True
        kinds = {m.dtype.kind for m in metas}
        some_array = not all(m.is_scalar for m in metas)
        if target in _SIGN_OPS:
            return not (kinds == {"f"} or (kinds <= set("iu") and some_array))
        if target in _WRAPPING_OPS:
            return not (_all_integer(node, metas) and some_array)
        if target in _EXACT_ON_INTEGERS:
            return not _all_integer(node, metas)
    except TypeError:  # unhashable target
        return True
    return True


# Calls whose only data-dependent failures on numeric operands are floating-point errors, which
# warn unless an np.errstate mode raises (`may_raise`): ufuncs and their operators, products,
# reductions. Integer powers are the exception (negative exponents raise ValueError).
_FP_ONLY_FUNCTIONS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.matmul, *_SIGN_OPS, *_EXACT_ON_INTEGERS, np.matmul, np.dot,
    np.inner, np.outer, np.vdot, np.sum, np.prod, np.mean, np.std, np.var, np.max, np.min,
    np.amax, np.amin, np.argmax, np.argmin, np.cumsum, np.cumprod, np.where, np.clip,
    np.linalg.norm, np.concatenate, np.stack, np.hstack, np.vstack,
}
_FP_ONLY_METHODS = {"sum", "prod", "mean", "std", "var", "max", "min", "argmax", "argmin",
                    "cumsum", "cumprod", "dot", "astype", "clip"}
_POWERS = {operator.pow, np.power}


def may_raise(node: Node) -> bool:
    """True unless ``node`` certainly raises no exception (a warning is fine) for inputs of its
    recorded dtypes and shapes when no ``np.errstate`` mode raises: like `may_raise_or_warn`,
    but a ufunc, product or reduction of numeric operands (floating-point errors only warn) and
    a call of constants only (checked by the rules while tracing) are safe. An index (``b[i]``),
    an integer power, a Python scalar operand or an unknown call may raise."""
    if not may_raise_or_warn(node):
        return False
    if node.op not in ("call_function", "call_method"):
        return True
    metas = _input_metas(node)
    if metas is None:  # an operand without a recorded dtype (a Python scalar, a list)
        return True
    if not metas:
        return node.is_impure()
    kinds = {m.dtype.kind for m in metas}
    if not kinds <= set("biufc"):
        return True
    target = node.target
    try:
        if node.op == "call_method":
            return target not in _FP_ONLY_METHODS
        if target in _POWERS and not kinds <= set("fc"):
            return True
        return not (isinstance(target, np.ufunc) or target in _FP_ONLY_FUNCTIONS)
    except TypeError:  # unhashable target
        return True


def _has_node(value: Any) -> bool:
    found: list[Node] = []
    map_arg(value, found.append)
    return bool(found)


def _safe_cast(metas: list[Any], dtype: Any) -> bool:
    try:
        return len(metas) == 1 and np.can_cast(metas[0].dtype, np.dtype(dtype), "safe")
    except TypeError:
        return False


def _is_random_state_call(target: Any) -> bool:
    # np.random.rand & co are bound methods of the global RandomState: dropping a dead call
    # would change every later random number.
    owner = getattr(target, "__self__", None)
    return isinstance(owner, (np.random.RandomState, np.random.Generator))


def map_aggregate(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every leaf of ``value``, rebuilding tuples, lists, dicts and slices."""
    kind = type(value)
    if kind is tuple:
        return tuple(map_aggregate(v, fn) for v in value)
    if kind is list:
        return [map_aggregate(v, fn) for v in value]
    if kind is dict:
        return {k: map_aggregate(v, fn) for k, v in value.items()}
    if kind is slice:
        return slice(
            map_aggregate(value.start, fn),
            map_aggregate(value.stop, fn),
            map_aggregate(value.step, fn),
        )
    return fn(value)


def map_arg(value: Any, fn: Callable[[Node], Any]) -> Any:
    """Apply ``fn`` to every `Node` inside ``value`` (other leaves are kept as they are)."""
    return map_aggregate(value, lambda v: fn(v) if isinstance(v, Node) else v)


def _collect_nodes(value: Any, into: dict[Node, None]) -> None:
    map_arg(value, lambda n: into.setdefault(n, None))


class _Strong:
    """A strong reference with the call interface of `weakref.ref` (links of unlinked nodes)."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    def __call__(self) -> Node:
        return self.node


class Node:
    """One operation. See the module docstring for the meaning of ``op``/``target``/``args``.

    No reference cycles: the graph owns its nodes (`Graph._owned`), a node's inputs are strong
    references (its ``args``), and every link back (``graph``, ``users``, ``prev``/``next``) is
    weak. A dropped graph is freed at once by reference counting, not left to the cyclic
    garbage collector (compiled graphs die with their code object).
    """

    __slots__ = (
        "_graph_ref", "name", "op", "target", "_args", "_kwargs", "_input_nodes", "users", "meta",
        "_prev_ref", "_next_ref", "_erased", "__weakref__",
    )

    def __init__(
        self,
        graph: Any,  # (the `Graph` that owns it: graph.py builds on nodes, not the reverse)
        name: str,
        op: str,
        target: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        if op not in OPS and op != "root":
            raise ValueError(f"unknown node op {op!r}; expected one of {', '.join(OPS)}")
        self._graph_ref = weakref.ref(graph)
        self.name = name
        self.op = op
        self.target = target
        self._args: tuple[Any, ...] = ()
        self._kwargs: dict[str, Any] = {}
        self._input_nodes: dict[Node, None] = {}
        #: Nodes reading this one (ordered; weak: users own their inputs, not the reverse; a
        #: dying user is forgotten without running Python code, fx.weak).
        self.users: IdentityMap[Node, None] = IdentityMap()
        self.meta: dict[str, Any] = {}
        self._prev_ref: Callable[[], Node | None] = weakref.ref(self)
        self._next_ref: Callable[[], Node | None] = weakref.ref(self)
        self._erased = False
        self._set_inputs(tuple(args), dict(kwargs or {}))

    # -- inputs ---------------------------------------------------------------------------------

    @property
    def args(self) -> tuple[Any, ...]:
        return self._args

    @args.setter
    def args(self, value: Iterable[Any]) -> None:
        self._set_inputs(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> dict[str, Any]:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict[str, Any]) -> None:
        self._set_inputs(self._args, dict(value))

    @property
    def all_input_nodes(self) -> list[Node]:
        """Nodes read by this node, in order of first appearance in args then kwargs."""
        return list(self._input_nodes)

    def _set_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # The only place that writes _args/_kwargs: it keeps every input's `users` exact.
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = {}
        _collect_nodes(args, self._input_nodes)
        _collect_nodes(kwargs, self._input_nodes)
        for new in self._input_nodes:
            new.users.setdefault(self, None)

    def update_arg(self, index: int, value: Any) -> None:
        """Replace ``args[index]``."""
        args = list(self._args)
        args[index] = value
        self.args = args

    def update_kwarg(self, key: str, value: Any) -> None:
        """Set ``kwargs[key]``."""
        self.kwargs = {**self._kwargs, key: value}

    def replace_input_with(self, old: Node, new: Any) -> None:
        """Replace every occurrence of input ``old`` in this node's args/kwargs by ``new``."""
        swap = lambda n: new if n is old else n  # noqa: E731
        self._set_inputs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(
        self, new: Any, delete_user_cb: Callable[[Node], bool] = lambda user: True
    ) -> list[Node]:
        """Make every user of this node read ``new`` instead; returns the users that changed.

        ``delete_user_cb(user)`` may return False to keep a user on this node (e.g. when ``new``
        itself reads this node).
        """
        changed = [user for user in list(self.users) if delete_user_cb(user)]
        for user in changed:
            user.replace_input_with(self, new)
        return changed

    # -- position in the graph -------------------------------------------------------------------

    @property
    def graph(self) -> Any:
        """The graph this node belongs to (None once that graph was freed)."""
        return self._graph_ref()

    @property
    def _prev(self) -> Node:
        return self._prev_ref()

    @_prev.setter
    def _prev(self, node: Node) -> None:
        self._prev_ref = weakref.ref(node)

    @property
    def _next(self) -> Node:
        return self._next_ref()

    @_next.setter
    def _next(self, node: Node) -> None:
        self._next_ref = weakref.ref(node)

    @property
    def prev(self) -> Node:
        return self._prev

    @property
    def next(self) -> Node:
        return self._next

    def prepend(self, node: Node) -> None:
        """Move or insert ``node`` right before this node."""
        if node is self:
            return
        node._unlink()
        prev = self._prev
        prev._next, node._prev = node, prev
        node._next, self._prev = self, node

    def append(self, node: Node) -> None:
        """Move or insert ``node`` right after this node."""
        self._next.prepend(node)

    def _unlink(self) -> None:
        # Keep our own pointers, made strong: an iterator standing on this node can still step
        # forward even if its neighbours are erased too (no cycle: live nodes never point back).
        prev, nxt = self._prev, self._next
        if prev is not self:
            prev._next = nxt
            nxt._prev = prev
            self._prev_ref, self._next_ref = _Strong(prev), _Strong(nxt)

    # -- properties ------------------------------------------------------------------------------

    def is_impure(self) -> bool:
        """True if the node has effects besides its value (DCE must keep it)."""
        if self.op in ("placeholder", "output"):
            return True
        if self.written():
            return True
        if self.op == "call_function":
            if loop_of(self.target) is not None:  # (a loop nest: `fx.control`)
                return True
            try:
                if self.target in _IMPURE_FUNCTIONS:
                    return True
            except TypeError:  # unhashable target
                pass
            return _is_random_state_call(self.target)
        if self.op == "call_method":
            return self.target in _IMPURE_METHODS
        return False

    def written(self) -> list[Any]:
        """The arguments this call writes into: its outputs, passed positionally
        (``np.negative(y, y)``, ``x.sum(0, None, o)``) or as ``out=``
        (`fx.op_rules.written_operands`)."""
        if self.op not in ("call_function", "call_method"):
            return []
        if self.op == "call_method":
            return written_operands(None, self._args, self._kwargs, method=self.target)
        loop = loop_of(self.target)
        if loop is not None:  # (it declares what it writes)
            return loop.written_arguments(self._args)
        return written_operands(self.target, self._args, self._kwargs)

    def may_raise_or_warn(self) -> bool:
        """True if running the node could raise or warn (see `may_raise_or_warn`)."""
        return may_raise_or_warn(self)

    def format_node(self) -> str:
        """One readable line: ``%mul : float64[8] = call_function[target=operator.mul](...)``."""
        head = f"%{self.name}"
        if "val" in self.meta:
            head += f" : {format_val(self.meta['val'])}"
        if self.op == "output":
            return f"return {format_arg(self._args[0] if self._args else None)}"
        target = self.target if isinstance(self.target, str) else qualified_name(self.target)
        line = f"{head} = {self.op}[target={target}]"
        if self.op in ("placeholder", "get_attr"):
            return line
        return f"{line}(args = {format_arg(self._args)}, kwargs = {format_arg(self._kwargs)})"

    def __repr__(self) -> str:
        return self.name


def format_arg(value: Any) -> str:
    """Readable text of an argument structure: nodes print as ``%name``."""
    kind = type(value)
    if isinstance(value, Node):
        return f"%{value.name}"
    if kind is tuple:
        inner = ", ".join(format_arg(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if kind is list:
        return "[" + ", ".join(format_arg(v) for v in value) + "]"
    if kind is dict:
        return "{" + ", ".join(f"{k}: {format_arg(v)}" for k, v in value.items()) + "}"
    if kind is slice:
        parts = (value.start, value.stop, value.step)
        return "slice(" + ", ".join(format_arg(v) for v in parts) + ")"
    if isinstance(value, np.ndarray):
        return f"array({value.dtype.name}{list(value.shape)})"
    return repr(value)


def format_val(val: Any) -> str:
    """Text of ``meta["val"]``: ArrayMeta prints as ``float64[8]``, tuples element-wise."""
    if type(val) in (tuple, list):
        inner = ", ".join(format_val(v) for v in val)
        return f"({inner},)" if len(val) == 1 and type(val) is tuple else f"({inner})"
    return str(val)
