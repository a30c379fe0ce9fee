"""The loop-level IR of the C backend: what one fused kernel computes per element.

Lowering (`lowering.py`) turns fx nodes into `Value` expression DAGs; fusion (`fusion.py`) groups
them into kernels; `codegen_c.py` prints kernels as C. A kernel iterates over a *domain* (the
broadcast shape of its outputs, or the input shape of a reduction); shapes and strides are runtime
arguments, so one C function serves every memory layout (`kernel.py` packs them per call).

Values are frozen dataclasses: structurally equal expressions are equal and hash alike, so a
kernel body is a DAG in which every distinct expression is computed once (CSE inside a kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Container, Union

import numpy as np

__all__ = [
    "Load", "Const", "Op", "RowRef", "Value", "Reduction", "Operand", "PointwiseKernel", "ReductionKernel", "Kernel",
    "SUPPORTED_DTYPES", "walk", "roll_value", "rolled_loads",
]

#: dtypes the C code handles (float16/complex/object/... stay NumPy calls).
SUPPORTED_DTYPES: frozenset[np.dtype] = frozenset(
    np.dtype(c) for c in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8")
)


@dataclass(frozen=True)
class Load:
    """Element of kernel input ``operand`` at the current index (broadcast by strides).

    ``roll``: ``((axis, shift), ...)`` (domain axes, ascending, shifts non-zero; a shift is a
    Python int reduced modulo the axis length at run time): the element at index ``i - shift``
    (wrapped) along each of those axes instead, how an inlined ``np.roll`` reads its input
    (`roll_value`). A rolled load is its own *slot* in the kernel (`rolled_loads`): the layout
    block carries its per-dim shifts after the strides.
    """

    operand: int
    dtype: np.dtype
    roll: tuple[tuple[int, Any], ...] = ()


@dataclass(frozen=True, eq=False)
class Const:
    """A compile-time constant, already converted to ``dtype`` (a Python int/float/bool).

    Equal (one value inside a kernel) only when type, dtype and bits agree: ``0.0 == -0.0`` in
    Python, but merging them would turn ``np.clip(x, -0.0, 0.0)`` into ``np.clip(x, -0.0,
    -0.0)``; and two NaN constants are one value.
    """

    value: Any
    dtype: np.dtype

    def _key(self) -> tuple:
        v = self.value
        if isinstance(v, float):
            return (float, repr(v), self.dtype)  # repr: '-0.0' != '0.0', 'nan' == 'nan'
        return (type(v), v, self.dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, eq=True, unsafe_hash=False)
class Op:
    """``name`` applied to ``args`` computing in ``dtype`` (see `c_expressions.OPS` for names).

    ``arg_dtype`` is the dtype the arguments were converted to (differs from ``dtype`` for
    comparisons and casts); ``param`` carries an op's static parameter (e.g. a power exponent).
    """

    name: str
    args: tuple["Value", ...]
    dtype: np.dtype
    arg_dtype: np.dtype | None = None
    param: Any = None

    def __hash__(self) -> int:
        # Expressions are DAGs with shared subtrees: the generated dataclass hash would
        # re-hash every subtree at every level (quadratic). Hash once, keep it.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.name, self.args, self.dtype, self.arg_dtype, self.param))
            object.__setattr__(self, "_hash", h)
        return h


@dataclass(frozen=True)
class RowRef:
    """The result of reduction ``index`` of the enclosing `ReductionKernel`, for the current row
    (outer index): how an epilogue or a later reduction reads an earlier one without memory."""

    index: int
    dtype: np.dtype


Value = Union[Load, Const, Op, RowRef]


def walk(values: list[Value], stop: Container[Value] = ()) -> list[Value]:
    """Every distinct sub-expression of ``values``, operands before their users; values in
    ``stop`` are leaves (their operands are not visited)."""
    seen: dict[Value, None] = {}

    def visit(v: Value) -> None:
        if v in seen:
            return
        if isinstance(v, Op) and v not in stop:
            for a in v.args:
                visit(a)
        seen[v] = None

    for v in values:
        visit(v)
    del visit  # it refers to itself through its closure cell: a cycle left for the gc otherwise
    return list(seen)


def roll_value(v: Value, axis: int, shift: int, size: Any = None) -> Value:
    """``v`` read at index ``i - shift`` along domain ``axis`` (wrapped): every Load below it
    rolled by ``shift`` more (rolls of rolls add up). Constants do not move; a `RowRef` (a
    per-row reduction result) cannot be rolled (fusion never inlines a roll into a row
    kernel). ``size``: the axis length when it is a static int (shifts are then kept modulo it,
    so ``roll(roll(u, 1), -1)`` is ``u`` itself)."""
    memo: dict[Value, Value] = {}
    for w in walk([v]):
        if isinstance(w, Load):
            shifts = dict(w.roll)
            total = shifts.get(axis, 0) + shift
            if type(size) is int:
                total %= size or 1
            if total:
                shifts[axis] = total
            else:
                shifts.pop(axis, None)
            memo[w] = Load(w.operand, w.dtype, tuple(sorted(shifts.items())))
        elif isinstance(w, Op):
            memo[w] = Op(w.name, tuple(memo[a] for a in w.args), w.dtype, w.arg_dtype, w.param)
        elif isinstance(w, RowRef):
            raise ValueError("a per-row reduction result cannot be rolled")
        else:
            memo[w] = w
    return memo[v]


def rolled_loads(values: list[Value]) -> list[Load]:
    """The distinct rolled Loads of ``values`` (the kernel's roll slots), in a fixed order that
    code generation (`codegen_c`) and the runtime (`kernel.py`) share."""
    return [v for v in walk(values) if isinstance(v, Load) and v.roll]


@dataclass
class Operand:
    """A materialised array the kernel reads: produced by graph node ``node`` (an fx Node)."""

    node: Any
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass
class PointwiseKernel:
    """Writes ``outputs[i]`` (one value per domain element) for every index of ``shape``.

    ``out_nodes[i]`` is the fx node whose value ``outputs[i]`` is; ``members`` are all fx nodes
    computed inside (roots and inlined producers, in graph order), for the NumPy fallback path.
    """

    name: str
    shape: tuple[int, ...]
    operands: list[Operand]
    outputs: list[Value]
    out_nodes: list[Any]
    members: list[Any] = field(default_factory=list)

    kind = "pointwise"


@dataclass
class Reduction:
    """One reduction phase: reduce ``value`` with ``op`` (sum/prod/max/min/argmax/argmin/any/
    all/mean) in ``acc_dtype``; the result (``out_dtype``) is graph node ``node``'s value."""

    op: str
    value: Value
    acc_dtype: np.dtype
    out_dtype: np.dtype
    node: Any
    keepdims: bool


@dataclass
class ReductionKernel:
    """A row program over the input domain ``shape``: for every index of the kept (non-reduced)
    dims, run the ``reductions`` in order over the reduced ``axes`` (a later one may read an
    earlier one's result through `RowRef`), then the pointwise ``outputs`` (the *epilogue*,
    written over the whole domain; only when ``axes`` are the trailing dims).

    Softmax is one such kernel: max-reduce, sum-reduce of ``exp(x - max)``, then the divide.
    """

    name: str
    shape: tuple[int, ...]
    operands: list[Operand]
    axes: tuple[int, ...]
    reductions: list[Reduction]
    outputs: list[Value] = field(default_factory=list)
    epilogue_nodes: list[Any] = field(default_factory=list)
    members: list[Any] = field(default_factory=list)

    kind = "reduction"

    @property
    def out_nodes(self) -> list[Any]:
        return [r.node for r in self.reductions] + list(self.epilogue_nodes)

    @property
    def values(self) -> list[Value]:
        return [r.value for r in self.reductions] + list(self.outputs)


Kernel = Union[PointwiseKernel, ReductionKernel]
