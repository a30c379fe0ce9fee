"""The machinery shared by all rule modules: errors, the registry, stand-ins and shape helpers.

A *rule* receives a `Call` (the NumPy callable or method name, its arguments with traced values as
`ArrayMeta`) and returns the abstract result. Rules get dtypes, scalar-vs-array and NumPy's own
argument validation by running the real NumPy callable on *stand-ins*, never on data:

* ``shrink``: every traced array becomes a real array whose dimensions are ``min(d, 1)``, so it has
  at most one element. Equal dimensions stay equal and broadcastable ones stay broadcastable, so
  NumPy still rejects bad dtypes, axes, casts and empty reductions exactly as it would on the real
  data; the rule itself then computes the true shape and checks what depends on absolute sizes.
  (``shrink2`` caps dimensions at 2 instead, for NumPy code that treats length 1 specially.)
* ``view``: every traced array becomes a zero-strided view of one element with the full shape
  (``np.broadcast_to``). Only for functions that return views (reshape, transpose, basic indexing,
  ...), whose result then *is* the answer.

Used by the rule modules of `fx.op_rules`; nothing here is public except `RuleError`.
"""

from __future__ import annotations

import inspect
import operator
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any, Union

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from fx.meta import ArrayMeta

Result = Union[ArrayMeta, tuple, None]
Rule = Callable[["Call"], Result]

PY_SCALARS = (bool, int, float, complex)
_MAX_BYTES = np.iinfo(np.intp).max


class RuleError(Exception):
    """The rules cannot describe this operation exactly, or NumPy would reject it.

    The translator treats it as a graph break: the frame runs in plain NumPy, so the user sees
    NumPy's own error (if any).
    """


# --------------------------------------------------------------------------- registry

FUNCTION_RULES: dict[Any, Rule] = {}
# callables known on purpose to have no rule, with the reason (data-dependent results, ...)
REJECTED: dict[Any, str] = {}


def register(*targets: Any) -> Callable[[Rule], Rule]:
    """Decorator: ``@register(np.sum, np.prod)`` makes the rule the one rule of those callables."""

    def deco(rule: Rule) -> Rule:
        for target in targets:
            if target in FUNCTION_RULES and FUNCTION_RULES[target] is not rule:
                raise ValueError(f"{target!r} already has a rule")
            FUNCTION_RULES[target] = rule
        return rule

    return deco


# --------------------------------------------------------------------------- calls


def contains_meta(value: Any) -> bool:
    if isinstance(value, ArrayMeta):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_meta(v) for v in value)
    if isinstance(value, dict):
        return any(contains_meta(v) for v in value.values())
    if isinstance(value, slice):
        return any(contains_meta(v) for v in (value.start, value.stop, value.step))
    return False


def _standin(meta: ArrayMeta, mode: str) -> Any:
    if meta.is_scalar:
        return np.zeros((), meta.dtype)[()]
    if mode == "view":
        return np.broadcast_to(np.zeros((), meta.dtype), meta.shape)
    cap = 2 if mode == "shrink2" else 1
    return np.zeros(tuple(min(d, cap) for d in meta.shape), meta.dtype)


@dataclass
class Call:
    """One call being evaluated abstractly.

    ``target`` is the NumPy callable whose rule runs. ``args``/``kwargs`` are in *function form*
    (for a method call, ``args[0]`` is self). ``method``/``method_args`` remember a method call so
    the stand-in run uses the method itself, with its own argument conventions.
    """

    target: Any
    args: tuple
    kwargs: dict
    method: str | None = None
    method_args: tuple = ()
    _origin: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.method is not None:
            return f"ndarray.{self.method}"
        return getattr(self.target, "__name__", repr(self.target))

    def _sub(self, value: Any, mode: str) -> Any:
        if isinstance(value, ArrayMeta):
            standin = _standin(value, mode)
            self._origin[id(standin)] = (standin, value)
            return standin
        if isinstance(value, (tuple, list)):
            return type(value)(self._sub(v, mode) for v in value)
        if isinstance(value, slice) and contains_meta(value):
            raise RuleError(f"{self.name}: a slice with traced bounds is data-dependent")
        return value

    def run(self, mode: str = "shrink", args: tuple | None = None,
            kwargs: dict | None = None, fn: Any = None) -> Any:
        """Run the real NumPy callable on stand-ins; NumPy's exceptions become `RuleError`.

        ``args``/``kwargs`` override the function-form arguments (rules that must shrink plain
        Python values such as shape tuples pass them); they are ignored for method calls unless
        given explicitly, in which case they are the method's arguments (self first). ``fn``
        overrides the callable (a rule evaluating a helper operation).
        """
        if args is None:
            args = (self.args[0],) + self.method_args if self.method else self.args
        kwargs = self.kwargs if kwargs is None else kwargs
        sargs = self._sub(tuple(args), mode)
        skwargs = {k: self._sub(v, mode) for k, v in kwargs.items()}
        if fn is None and self.method:
            fn, sargs = getattr(sargs[0], self.method), sargs[1:]
        elif fn is None:
            fn = self.target
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn(*sargs, **skwargs)
        except RuleError:
            raise
        except Exception as exc:  # NumPy rejects these arguments: so must we
            raise RuleError(f"NumPy rejects {self.name}(...): {type(exc).__name__}: {exc}") \
                from exc

    def result(self, value: Any, shape: tuple | None = None) -> ArrayMeta:
        """The meta of one stand-in result: a traced input returned as is (``out=``, in-place
        operators) maps back to its meta; otherwise dtype and scalar-ness come from ``value``
        and the shape from the rule (``None``: the stand-in's own shape, for ``view`` runs)."""
        hit = self._origin.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        if isinstance(value, np.generic):
            return ArrayMeta(value.dtype, (), True)
        if isinstance(value, np.ndarray):
            return ArrayMeta(value.dtype, value.shape if shape is None else shape, False)
        raise RuleError(f"{self.name} returns a Python {type(value).__name__}, not an array")

    def bind(self) -> inspect.BoundArguments:
        """The function-form arguments bound to the target's signature (defaults applied)."""
        try:
            bound = signature(self.target).bind(*self.args, **self.kwargs)
        except TypeError as exc:
            raise RuleError(f"{self.name}: {exc}") from exc
        bound.apply_defaults()
        return bound


_SIGNATURES: dict[Any, inspect.Signature] = {}


def signature(fn: Any) -> inspect.Signature:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    return sig


def given(value: Any) -> bool:
    """Whether an optional argument was passed (NumPy uses ``np._NoValue`` as its default)."""
    return value is not np._NoValue


# --------------------------------------------------------------------------- shapes


def shape_of(value: Any, what: str = "operand") -> tuple[int, ...]:
    """The shape a value takes when NumPy converts it to an array (constants are small)."""
    if isinstance(value, ArrayMeta):
        return value.shape
    if value is None or isinstance(value, PY_SCALARS + (np.generic, str, bytes)):
        return ()
    if contains_meta(value):
        raise RuleError(f"{what}: a list or tuple holding traced arrays is not supported; "
                        "build the array with np.stack instead")
    try:
        return np.shape(value)
    except Exception as exc:
        raise RuleError(f"{what}: cannot take the shape of {type(value).__name__}") from exc


def broadcast(*shapes: tuple[int, ...], what: str = "operands") -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as exc:
        raise RuleError(f"{what} cannot be broadcast together: {shapes}") from exc


def normalize_axes(axis: Any, ndim: int, what: str = "axis") -> tuple[int, ...]:
    """All axes for ``None``, else the normalized tuple (NumPy rejects duplicates and range)."""
    if axis is None:
        return tuple(range(ndim))
    try:
        return normalize_axis_tuple(axis, ndim, what)
    except Exception as exc:
        raise RuleError(f"bad {what} {axis!r} for {ndim}-d array: {exc}") from exc


def as_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A creation shape argument (int or sequence of ints) as a tuple; rejects negatives."""
    if isinstance(shape, ArrayMeta) or contains_meta(shape):
        raise RuleError(f"{what} built from traced values is data-dependent")
    try:
        dims = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else \
            tuple(operator.index(d) for d in shape)
    except TypeError as exc:
        raise RuleError(f"{what} must be an int or a sequence of ints, got {shape!r}") from exc
    if any(d < 0 for d in dims):
        raise RuleError(f"negative dimensions are not allowed: {what} {dims}")
    return dims


def check_size(shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    if prod(shape) * max(np.dtype(dtype).itemsize, 1) > _MAX_BYTES:
        raise RuleError(f"{what}: array of shape {shape} is too big for NumPy")


def shrunk(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(min(d, 1) for d in shape)


def out_metas(out: Any) -> tuple:
    """``out=`` normalized to a tuple (NumPy accepts an array or a tuple of them)."""
    if out is None or out is Ellipsis:
        return ()
    return tuple(out) if isinstance(out, tuple) else (out,)
