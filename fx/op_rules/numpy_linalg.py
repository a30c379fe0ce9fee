"""Rules for np.linalg: norm, inv, det, solve, cholesky, eigvalsh, matrix_power, pinv, and
the ones with named results (eigh, svd, qr, slogdet: `Call.results`, a `NamedResults` of the
class NumPy returns).

dtype and scalar-vs-array come from running NumPy on small *well-conditioned* stand-ins (identity
matrices: a zero stand-in would look singular); shapes and square/alignment checks are computed
here. Singular inputs are data: NumPy raises LinAlgError when the graph runs, as it would eagerly.
"""

from __future__ import annotations

import operator

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import Call, Result, RuleError, normalize_axes, register, shrunk

__all__: list[str] = []


def _matrix(call: Call, meta: object, what: str) -> ArrayMeta:
    if not isinstance(meta, ArrayMeta) or meta.ndim < 2:
        raise RuleError(f"{call.name}: {what} must be a traced array with at least 2 dimensions")
    if meta.shape[-1] != meta.shape[-2]:
        raise RuleError(f"{call.name}: last 2 dimensions of {what} must be square, got {meta.shape}")
    return meta


def _eye_standin(meta: ArrayMeta) -> np.ndarray:
    """An identity matrix of `meta`'s dtype with every batch dimension shrunk to at most 1."""
    batch = shrunk(meta.shape[:-2])
    return np.broadcast_to(np.eye(1, dtype=meta.dtype), batch + (1, 1)).copy()


@register(np.linalg.inv)
def _inv_rule(call: Call) -> Result:
    a = _matrix(call, call.bind().arguments["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs={})
    return call.result(res, a.shape)


@register(np.linalg.det)
def _det_rule(call: Call) -> Result:
    a = _matrix(call, call.bind().arguments["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs={})
    if not a.shape[:-2]:
        return call.result(res)
    return call.result(res, a.shape[:-2])


@register(np.linalg.solve)
def _solve_rule(call: Call) -> Result:
    b_args = call.bind().arguments
    a, b = _matrix(call, b_args["a"], "a"), b_args["b"]
    if not isinstance(b, ArrayMeta) or b.ndim < 1:
        raise RuleError(f"{call.name}: b must be a traced array")
    m = a.shape[-1]
    if b.ndim == 1:  # NumPy 2: a 1-d b is one right-hand side vector
        if b.shape[0] != m:
            raise RuleError(f"{call.name}: b has {b.shape[0]} rows, a is {m}x{m}")
        batch, tail, b_standin = a.shape[:-2], (m,), np.ones(1, b.dtype)
    else:
        if b.shape[-2] != m:
            raise RuleError(f"{call.name}: b has {b.shape[-2]} rows, a is {m}x{m}")
        try:
            batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        except ValueError as exc:
            raise RuleError(f"{call.name}: batch dimensions do not broadcast: {exc}") from exc
        tail = b.shape[-2:]
        b_standin = np.ones(shrunk(b.shape[:-2]) + (1, min(b.shape[-1], 1)), b.dtype)
    res = call.run(args=(_eye_standin(a), b_standin), kwargs={})
    return call.result(res, batch + tail)


@register(np.linalg.norm)
def _norm_rule(call: Call) -> Result:
    bound = call.bind().arguments
    x, axis, keepdims = bound["x"], bound["axis"], bound["keepdims"]
    if not isinstance(x, ArrayMeta):
        raise RuleError(f"{call.name}: x must be a traced array")
    # NumPy validates ord/axis combinations on the stand-in (same ndim, shrunk sizes).
    res = call.run(args=(np.ones(shrunk(x.shape), x.dtype),), kwargs={
        k: v for k, v in bound.items() if k != "x"})
    axes = normalize_axes(axis, x.ndim)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if isinstance(res, np.generic):
        return call.result(res)
    return call.result(res, shape)


@register(np.linalg.cholesky)
def _cholesky_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrix(call, bound["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs={k: v for k, v in bound.items() if k != "a"})
    return call.result(res, a.shape)


@register(np.linalg.eigvalsh)
def _eigvalsh_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrix(call, bound["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs={k: v for k, v in bound.items() if k != "a"})
    return call.result(res, a.shape[:-1])


@register(np.linalg.matrix_power)
def _matrix_power_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrix(call, bound["a"], "a")
    try:
        n = operator.index(bound["n"])
    except TypeError as exc:
        raise RuleError(f"{call.name}: the exponent must be an integer (NumPy raises)") from exc
    if n == 1:
        raise RuleError(f"{call.name}: a power of 1 is a itself (the same object, NumPy "
                        "returns it): not captured")
    res = call.run(args=(_eye_standin(a), n), kwargs={})
    return call.result(res, a.shape)


def _kwargs(bound: dict) -> dict:
    return {k: v for k, v in bound.items() if k != "a"}


def _matrices(call: Call, bound: dict) -> ArrayMeta:
    """``a``, a stack of matrices (square ones for ``hermitian=True``, as NumPy requires)."""
    a = bound["a"]
    if not isinstance(a, ArrayMeta) or a.ndim < 2:
        raise RuleError(f"{call.name}: a must be a traced array with at least 2 dimensions")
    if bound.get("hermitian") and a.shape[-1] != a.shape[-2]:
        raise RuleError(f"{call.name}: hermitian=True needs square matrices (NumPy raises)")
    return a


@register(np.linalg.pinv)
def _pinv_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrices(call, bound)
    if any(isinstance(v, ArrayMeta) for k, v in bound.items() if k != "a"):
        raise RuleError(f"{call.name}: a traced rcond/rtol is not captured")
    res = call.run(args=(np.ones(shrunk(a.shape), a.dtype),), kwargs=_kwargs(bound))
    return call.result(res, a.shape[:-2] + (a.shape[-1], a.shape[-2]))




@register(np.linalg.eigh)
def _eigh_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrix(call, bound["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs=_kwargs(bound))
    return call.results(res, [a.shape[:-1], a.shape])


@register(np.linalg.svd)
def _svd_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrices(call, bound)
    m, n = a.shape[-2], a.shape[-1]
    k, batch = min(m, n), a.shape[:-2]
    standin = _eye_standin(a) if bound["hermitian"] else np.ones(shrunk(a.shape), a.dtype)
    res = call.run(args=(standin,), kwargs=_kwargs(bound))
    if not bound["compute_uv"]:
        return call.result(res, batch + (k,))
    full = bound["full_matrices"]
    return call.results(res, [batch + (m, m if full else k), batch + (k,),
                              batch + (n if full else k, n)])


@register(np.linalg.qr)
def _qr_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrices(call, bound)
    mode = bound["mode"]
    if mode not in ("reduced", "complete", "r"):
        raise RuleError(f"{call.name}: mode={mode!r} is not captured")
    m, n = a.shape[-2], a.shape[-1]
    k, batch = min(m, n), a.shape[:-2]
    res = call.run(args=(np.ones(shrunk(a.shape), a.dtype),), kwargs=_kwargs(bound))
    if mode == "r":
        return call.result(res, batch + (k, n))
    rows = m if mode == "complete" else k
    return call.results(res, [batch + (m, rows), batch + (rows, n)])


@register(np.linalg.slogdet)
def _slogdet_rule(call: Call) -> Result:
    bound = call.bind().arguments
    a = _matrix(call, bound["a"], "a")
    res = call.run(args=(_eye_standin(a),), kwargs={})
    return call.results(res, [a.shape[:-2], a.shape[:-2]])
