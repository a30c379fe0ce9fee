"""Rules for elementwise operations: every ufunc (incl. generalized ufuncs such as matmul), the
`operator` functions behind ndarray operators, and np.where / np.clip / np.round.

dtype, scalar-vs-array and NumPy's validation (NEP 50 weak Python scalars, ``int8 + 300`` ->
OverflowError, same_kind casting of ``out=`` and in-place operators) come from running the real
callable on shrunk stand-ins; the shape is the broadcast of the operand shapes.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    REJECTED, Call, Result, RuleError, broadcast, given, out_metas, register, shape_of, symbolic,
)

__all__ = ["ufunc_rule", "BINARY_OPERATORS", "INPLACE_OPERATORS", "UNARY_OPERATORS"]


def _check_out(call: Call, outs: tuple, shape: tuple[int, ...]) -> None:
    for out in outs:
        if out is None:
            continue
        if not isinstance(out, ArrayMeta) or out.is_scalar:
            raise RuleError(f"{call.name}: out= must be a traced ndarray, got {out!r}")
        if broadcast(shape, out.shape, what=f"{call.name} operands and out=") != out.shape:
            raise RuleError(f"{call.name}: result shape {shape} does not fit out= {out.shape}")


def _check_where(call: Call, where: Any, outs: tuple, nout: int) -> tuple[tuple[int, ...], ...]:
    """``where=`` leaves unselected elements of a fresh result uninitialised: only with out=."""
    if where is True or not given(where):
        return ()
    if len([o for o in outs if o is not None]) < nout:
        raise RuleError(f"{call.name}: where= without out= leaves the unselected elements "
                        "uninitialised (their values are arbitrary); pass out=")
    return (shape_of(where, "where="),)


@symbolic
def ufunc_rule(call: Call) -> Result:
    """One rule for every `np.ufunc`."""
    uf = call.target
    if uf.signature is not None:
        return _gufunc_rule(call)
    inputs, positional_outs = call.args[: uf.nin], call.args[uf.nin:]
    outs = out_metas(call.kwargs.get("out", positional_outs or None))
    extra = _check_where(call, call.kwargs.get("where", True), outs, uf.nout)
    res = call.run()
    shape = broadcast(*(shape_of(x) for x in inputs), *extra, what=f"{uf.__name__} operands")
    _check_out(call, outs, shape)
    if outs:
        shape = broadcast(shape, *(o.shape for o in outs if o is not None))
    if uf.nout == 1:
        return call.result(res, shape)
    return tuple(call.result(r, shape) for r in res)


# --------------------------------------------------------------------------- gufuncs

_CORE = re.compile(r"\(([^()]*)\)")


def _parse_signature(sig: str) -> tuple[list, list]:
    ins, outs = sig.replace(" ", "").split("->")

    def dims(part: str) -> list[list[tuple[str, bool]]]:
        return [[(d.rstrip("?"), d.endswith("?")) for d in m.split(",") if d]
                for m in _CORE.findall(part)]

    return dims(ins), dims(outs)


def gufunc_shape(name: str, signature: str, in_shapes: list) -> tuple[tuple, tuple]:
    """(loop, core) shape of a generalized ufunc's output: loop dimensions broadcast, core
    dimensions matched by name; ``?`` dimensions are dropped when an operand lacks them
    (matmul with 1-d operands)."""
    ins, outs = _parse_signature(signature)
    sizes: dict[str, int] = {}
    dropped: set[str] = set()
    loops = []
    for core, shape in zip(ins, in_shapes):
        if len(shape) < len(core):
            dropped.update(n for n, optional in core if optional)
            core = [(n, o) for n, o in core if not o]
        if len(shape) < len(core):
            raise RuleError(f"{name}: operand of shape {shape} has fewer than {len(core)} "
                            "core dimensions")
        split = len(shape) - len(core)
        loops.append(shape[:split])
        for (label, _), d in zip(core, shape[split:]):
            want = int(label) if label.isdigit() else sizes.setdefault(label, d)
            if want != d:
                raise RuleError(f"{name}: core dimension {label!r} mismatch ({want} vs {d}) "
                                f"for shapes {in_shapes}")
    loop = broadcast(*loops, what=f"{name} loop dimensions")
    return loop, tuple(int(n) if n.isdigit() else sizes[n] for n, _ in outs[0]
                       if n not in dropped)


def _gufunc_rule(call: Call) -> Result:
    uf = call.target
    for key in ("axes", "axis", "keepdims"):
        if key in call.kwargs:
            raise RuleError(f"{uf.__name__}: the {key}= argument of generalized ufuncs is not "
                            "supported by the rules")
    if uf.nout != 1:
        raise RuleError(f"{uf.__name__}: generalized ufuncs with several outputs are not supported")
    inputs, positional_outs = call.args[: uf.nin], call.args[uf.nin:]
    outs = out_metas(call.kwargs.get("out", positional_outs or None))
    _check_where(call, call.kwargs.get("where", True), outs, uf.nout)
    res = call.run()
    loop, core = gufunc_shape(uf.__name__, uf.signature, [shape_of(x) for x in inputs])
    for out in outs:
        if not isinstance(out, ArrayMeta) or out.is_scalar:
            raise RuleError(f"{uf.__name__}: out= must be a traced ndarray")
        split = len(out.shape) - len(core)
        # out's loop dimensions may be larger than the inputs' (they broadcast), its core not
        if split < 0 or out.shape[split:] != core or \
                broadcast(loop, out.shape[:split], what=uf.__name__) != out.shape[:split]:
            raise RuleError(f"{uf.__name__}: result shape {loop + core} does not fit out= "
                            f"{out.shape}")
    return call.result(res, loop + core)


# --------------------------------------------------------------------------- operators

BINARY_OPERATORS = (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.and_, operator.or_, operator.xor, operator.lshift,
    operator.rshift, operator.lt, operator.le, operator.eq, operator.ne, operator.gt,
    operator.ge,
)
INPLACE_OPERATORS = (
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
    operator.irshift,
)
UNARY_OPERATORS = (operator.neg, operator.pos, operator.invert, operator.abs)


@register(*BINARY_OPERATORS, *UNARY_OPERATORS)
@symbolic
def _operator_rule(call: Call) -> Result:
    res = call.run()
    return call.result(res, broadcast(*(shape_of(x) for x in call.args), what=call.name))


@register(*INPLACE_OPERATORS)
@symbolic
def _inplace_rule(call: Call) -> Result:
    res = call.run()
    shape = broadcast(*(shape_of(x) for x in call.args), what=call.name)
    meta = call.result(res, shape)
    target = call.args[0]
    if meta is target and not target.is_scalar and shape != target.shape:
        raise RuleError(f"{call.name}: result shape {shape} does not fit the target "
                        f"{target.shape}")
    return meta


_MATMUL_SIGNATURE = np.matmul.signature


@register(operator.matmul, operator.imatmul)
@symbolic
def _matmul_operator_rule(call: Call) -> Result:
    res = call.run()
    loop, core = gufunc_shape("@", _MATMUL_SIGNATURE, [shape_of(x) for x in call.args])
    shape = loop + core
    meta = call.result(res, shape)
    if meta is call.args[0] and shape != meta.shape:
        raise RuleError(f"@=: result shape {shape} does not fit the target {meta.shape}")
    return meta


REJECTED.update({
    operator.not_: "`not x` / operator.not_ asks for the truth value of an array, which depends "
                   "on its data; compare explicitly, e.g. with .any() or .all()",
    operator.truth: "bool(x) / operator.truth depends on the array's data",
})


# --------------------------------------------------------------------------- where/clip/round


@register(np.isclose, np.nan_to_num, np.real, np.imag, np.angle, abs, pow)
@symbolic
def _elementwise_function_rule(call: Call) -> Result:
    """Python-level elementwise functions (and the builtins abs/pow on arrays)."""
    res = call.run()
    shapes = [shape_of(v) for v in (*call.args, *call.kwargs.values())]
    return call.result(res, broadcast(*shapes, what=call.name))


@register(divmod)
@symbolic
def _divmod_builtin_rule(call: Call) -> Result:
    res = call.run()
    shape = broadcast(*(shape_of(v) for v in call.args), what="divmod")
    if not isinstance(res, tuple):
        raise RuleError(f"divmod returned {type(res).__name__}")
    return tuple(call.result(r, shape) for r in res)


@register(np.where)
@symbolic
def _where_rule(call: Call) -> Result:
    if len(call.args) + len(call.kwargs) == 1:
        raise RuleError("np.where(condition) returns indices whose number depends on the data")
    res = call.run()
    return call.result(res, broadcast(*(shape_of(x) for x in call.args), what="np.where"))


def _with_out(call: Call, res: Any, shape: tuple, out: Any) -> ArrayMeta:
    if out is not None:
        _check_out(call, (out,), shape)
        return call.result(res, out.shape)
    return call.result(res, shape)


@register(np.clip)
@symbolic
def _clip_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind()
    bounds = [b.arguments[k] for k in ("a_min", "a_max")]
    bounds += [b.arguments["kwargs"].get(k, None) for k in ("min", "max")]
    shapes = [shape_of(v) for v in bounds if v is not None and given(v)]
    shape = broadcast(shape_of(b.arguments["a"]), *shapes, what="np.clip operands")
    if "where" in b.arguments["kwargs"]:
        _check_where(call, b.arguments["kwargs"]["where"], out_metas(b.arguments["out"]), 1)
    return _with_out(call, res, shape, b.arguments["out"])


@register(np.round, np.around)
@symbolic
def _round_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind()
    return _with_out(call, res, shape_of(b.arguments["a"]), b.arguments["out"])
