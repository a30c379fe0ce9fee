"""Abstract evaluation of NumPy operations: dtype, shape and scalar-vs-array, never data.

The translator calls these while tracing user code. Traced values are `ArrayMeta`; every other
argument is the real Python value. Results follow NumPy 2 exactly (NEP 50 promotion, 0-d results
of ufuncs are NumPy scalars, full reductions return scalars, ...); anything the rules cannot
describe exactly, or that NumPy would reject, raises `RuleError`, and the translator then stops
capturing so the frame runs in plain NumPy.

* ``infer_call(target, args, kwargs)``: a NumPy function, any ufunc (and its ``reduce``,
  ``accumulate``, ``outer`` methods), or an `operator` function.
* ``infer_method(name, self_meta, args, kwargs)``: ndarray / NumPy scalar methods.
* ``infer_attr(name, self_meta)``: ``shape ndim dtype size itemsize nbytes`` give Python values,
  ``T mT real imag`` give `ArrayMeta`.
* ``is_supported_function(fn)``, ``is_supported_method(name)``.
* ``written_operands(target, args, kwargs, method=None)``: the outputs a call writes into,
  passed positionally (``np.negative(y, y)``, ``x.sum(0, None, o)``) or as ``out=``.

Every supported callable is registered once with its rule (``register``); ufuncs share
`ufunc_rule`. Methods map to the rule of the equivalent function (``x.sum(1)`` ~
``np.sum(x, 1)``), but the stand-in evaluation calls the method itself, so the method's own
argument conventions (``x.reshape(2, 3)``, ``x.transpose(1, 0)``) are honoured.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules import (  # noqa: F401  (importing registers the rules)
    creation, elementwise, indexing, linalg, numeric, numpy_linalg, reductions, reorder,
    shape_ops, spectral, statistics,
)
from fx.op_rules._core import (
    FUNCTION_RULES, REJECTED, SYMBOLIC_RULES, Call, Result, RuleError, register, signature,
    specialize_call,
)
from fx.op_rules.elementwise import ufunc_rule
from fx.op_rules.reductions import UFUNC_METHOD_RULES

__all__ = [
    "RuleError", "infer_call", "infer_method", "infer_attr", "is_supported_function",
    "is_supported_method", "register", "supported_methods", "written_operands",
]


def _rule_for(target: Any) -> Callable[[Call], Result] | None:
    if isinstance(target, np.ufunc):
        return ufunc_rule
    if isinstance(getattr(target, "__self__", None), np.ufunc):  # np.add.reduce, ...
        return UFUNC_METHOD_RULES.get(getattr(target, "__name__", None))
    try:
        return FUNCTION_RULES.get(target)
    except TypeError:  # unhashable callables have no rule
        return None


def _evaluate(rule: Callable[[Call], Result], call: Call) -> Result:
    try:
        if rule not in SYMBOLIC_RULES:
            call = specialize_call(call)
        return rule(call)
    except RuleError:
        raise
    except Exception as exc:  # a gap in a rule must not crash the compiler: stop capturing
        raise RuleError(f"internal error in the rule for {call.name}: "
                        f"{type(exc).__name__}: {exc}") from exc


def infer_call(target: Any, args: tuple | list, kwargs: dict | None = None) -> Result:
    """The abstract result of ``target(*args, **kwargs)``."""
    try:
        reason = REJECTED.get(target)
    except TypeError:
        reason = None
    if reason is not None:
        raise RuleError(reason)
    rule = _rule_for(target)
    if rule is None:
        name = getattr(target, "__qualname__", repr(target))
        raise RuleError(f"no shape/dtype rule for {name}; it cannot be captured in a graph")
    return _evaluate(rule, Call(target, tuple(args), dict(kwargs or {})))


def is_supported_function(fn: Any) -> bool:
    return _rule_for(fn) is not None


# --------------------------------------------------------------------------- methods

# method name -> the function whose rule computes the result (arguments in function form,
# self first; the stand-in run uses the method itself)
_METHODS: dict[str, Any] = {
    **{name: getattr(np, name) for name in (
        "sum", "prod", "mean", "max", "min", "std", "var", "argmax", "argmin", "any", "all",
        "cumsum", "cumprod", "reshape", "transpose", "swapaxes", "squeeze", "ravel", "copy",
        "clip", "round", "dot", "astype", "argsort", "repeat", "take", "trace",
        "diagonal")},
    "flatten": np.ravel,
    "conj": np.conjugate,
    "conjugate": np.conjugate,
    "__matmul__": operator.matmul,
    "__getitem__": operator.getitem,
    "__setitem__": operator.setitem,
}
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
            "lshift", "rshift", "lt", "le", "eq", "ne", "gt", "ge", "neg", "pos", "invert",
            "abs", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand",
            "ior", "ixor", "ilshift", "irshift", "imatmul"):
    _METHODS[f"__{_op}__"] = getattr(operator, _op + "_" if _op in ("and", "or") else _op)

# x.__radd__(y) is y + x: the operator with the operands swapped
_REFLECTED: dict[str, Any] = {
    f"__r{op}__": getattr(operator, op + "_" if op in ("and", "or") else op)
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
               "lshift", "rshift", "matmul")
}

_REJECTED_METHODS = {
    "item": "x.item() returns a Python value that depends on the data",
    "tolist": "x.tolist() returns Python values that depend on the data",
    "tobytes": "x.tobytes() returns the data itself",
    "nonzero": "x.nonzero() has a data-dependent shape",
    "__bool__": "bool(x) depends on the array's data",
    "__int__": "int(x) depends on the array's data",
    "__float__": "float(x) depends on the array's data",
    "__index__": "operator.index(x) depends on the array's data",
}


def _in_place_method_rule(call: Call) -> Result:
    """x.fill(v), x.sort(axis): mutate x, return None; the stand-in run validates."""
    call.run()
    return None


_IN_PLACE_METHODS = ("fill", "sort")


def infer_method(name: str, self_meta: ArrayMeta, args: tuple | list = (),
                 kwargs: dict | None = None) -> Result:
    """The abstract result of ``self.name(*args, **kwargs)`` for an ndarray or NumPy scalar."""
    if name in _REJECTED_METHODS:
        raise RuleError(_REJECTED_METHODS[name])
    args, kwargs = tuple(args), dict(kwargs or {})
    if name in _IN_PLACE_METHODS:
        return _evaluate(_in_place_method_rule, Call(None, (self_meta,), kwargs, name, args))
    if name in _REFLECTED and len(args) == 1 and not kwargs:
        return infer_call(_REFLECTED[name], (args[0], self_meta), {})
    target = _METHODS.get(name)
    if target is None:
        raise RuleError(f"no shape/dtype rule for the method .{name}(); it cannot be captured")
    call = Call(target, (self_meta,) + args, kwargs, method=name, method_args=args)
    return _evaluate(_rule_for(target), call)


def is_supported_method(name: str) -> bool:
    return name in _METHODS or name in _IN_PLACE_METHODS or name in _REFLECTED


def supported_methods() -> list[str]:
    return sorted([*_METHODS, *_IN_PLACE_METHODS, *_REFLECTED])


# --------------------------------------------------------------------------- outputs


def written_operands(target: Any, args: tuple | list, kwargs: dict,
                     method: str | None = None) -> list:
    """The operands ``target(*args, **kwargs)`` writes into: its outputs, however they are
    passed (``args[0]`` is self for ``method``). Empty for a call that only reads.

    NumPy takes the outputs of ``np.negative(y, y)`` positionally after a ufunc's inputs, the
    ``out`` of ``np.sum(a, 0, None, o)`` / ``a.sum(0, None, o)`` in its place in the
    signature, and ``out=`` as an array or a tuple (``None`` items: no output given). Nodes
    keep the user's form (NumPy warns about some positional outputs, ``np.maximum(x, y, o)``,
    and the compiled call must warn too), so every pass that asks "does this call write
    memory?" (DCE, CSE, the C backend's fusion barriers) asks here."""
    if "out" in kwargs:
        found = kwargs["out"]
    elif method is None and isinstance(target, np.ufunc):
        found = tuple(args[target.nin:])
    else:
        function = target if method is None else _METHODS.get(method)
        position = _out_position(function) if method not in _REFLECTED else None
        found = args[position] if position is not None and len(args) > position else None
    if found is None or found is Ellipsis:
        return []
    return [o for o in found if o is not None] if isinstance(found, tuple) else [found]


def _out_position(function: Any) -> int | None:
    """Where ``out`` may be given positionally in `function`'s signature (self first)."""
    try:
        hit = _OUT_POSITIONS[function]
    except KeyError:
        hit = None
        text = getattr(function, "__text_signature__", None)
        try:  # (a builtin whose text signature has no "out" has none: not parsed, which took
            # ~2 ms on a process's first ``operator.setitem``)
            params = [] if isinstance(text, str) and "out" not in text else list(
                signature(function).parameters.values())
        except (ValueError, TypeError):
            params = []
        for i, param in enumerate(params):
            if param.name == "out":
                if param.kind is param.POSITIONAL_OR_KEYWORD:
                    hit = i
                break
        try:
            _OUT_POSITIONS[function] = hit
        except TypeError:  # unhashable callables are not cached
            pass
    except TypeError:
        return None
    return hit


_OUT_POSITIONS: dict[Any, int | None] = {}


# --------------------------------------------------------------------------- attributes


def _real_dtype(meta: ArrayMeta) -> np.dtype:
    return np.empty(0, meta.dtype).real.dtype


def _transpose(meta: ArrayMeta) -> ArrayMeta:
    return ArrayMeta(meta.dtype, meta.shape[::-1], meta.is_scalar)


def _matrix_transpose(meta: ArrayMeta) -> ArrayMeta:
    if meta.ndim < 2:
        raise RuleError(f"x.mT needs at least 2 dimensions, got {meta.ndim}")
    return ArrayMeta(meta.dtype, meta.shape[:-2] + meta.shape[:-3:-1], False)


_ATTRS: dict[str, Callable[[ArrayMeta], Any]] = {
    "shape": lambda m: m.shape,
    "ndim": lambda m: m.ndim,
    "dtype": lambda m: m.dtype,
    "size": lambda m: m.size,
    "itemsize": lambda m: m.dtype.itemsize,
    "nbytes": lambda m: m.size * m.dtype.itemsize,
    "T": _transpose,
    "mT": _matrix_transpose,
    "real": lambda m: ArrayMeta(_real_dtype(m), m.shape, m.is_scalar),
    "imag": lambda m: ArrayMeta(_real_dtype(m), m.shape, m.is_scalar),
}


def infer_attr(name: str, self_meta: ArrayMeta) -> Any:
    """``shape ndim dtype size itemsize nbytes`` -> Python values; ``T mT real imag`` -> meta."""
    attr = _ATTRS.get(name)
    if attr is None:
        raise RuleError(f"the attribute .{name} is not known to the rules (layout and data "
                        "attributes such as strides, flags and base are not tracked)")
    return attr(self_meta)
