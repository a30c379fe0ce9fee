"""End-to-end NumPy coverage of the translator, through the public API only.

Each test writes a function the way a user would (``def f(x, y): return np.exp(-x) * y + 1``),
compiles it with ``dynamo.compile(fn, backend=<counting backend>)`` and compares it with plain
NumPy through the `check` fixture (tests/dynamo/conftest.py): same result types, dtypes, shapes,
strides, bit-identical values, same mutations of the arguments, one captured graph, no recompile
on the second call. Families: ufuncs (operators, every NumPy ufunc, ``dtype=``/``out=``/
``where=``), reductions, linear algebra, creation, shape ops. Python-level semantics (NEP 50,
attributes, indexing, mutation, closures, graph breaks, errors) are in test_numpy_semantics.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from support.arrays import data

xfail = pytest.mark.xfail




# Arithmetic operators ----------------------------------------------------------------------


def op_add(x, y):
    return x + y


def op_sub(x, y):
    return x - y


def op_mul(x, y):
    return x * y


def op_truediv(x, y):
    return x / y


def op_floordiv(x, y):
    return x // y


def op_mod(x, y):
    return x % y


def op_pow(x, y):
    return x**y


def op_matmul(x, y):
    return x @ y.T


def op_chain(x, y):
    return (x + y) * (x - y) / (y * y + 1) - x


BINARY_DTYPES = [
    ("float64", "float64"),
    ("float32", "int64"),
    ("int64", "int64"),
    ("int8", "uint8"),
]


@pytest.mark.parametrize("dtypes", BINARY_DTYPES, ids="-".join)
@pytest.mark.parametrize("fn", [op_add, op_sub, op_mul, op_truediv, op_floordiv, op_mod, op_pow,
                                op_matmul, op_chain], ids=lambda f: f.__name__)
def test_binary_operators(check, fn, dtypes):
    y = data(dtypes[1], positive=True)
    if fn is op_pow:  # small exponents: integer powers must not overflow differently
        y = (y % 3).astype(dtypes[1])
    check(fn, data(dtypes[0]), y)


@pytest.mark.parametrize("fn", [op_add, op_sub, op_mul, op_truediv, op_floordiv, op_mod, op_pow],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("other", [2, 2.5, -3, 1.5 + 2j], ids=repr)
def test_binary_operators_with_python_scalars_both_sides(check, fn, other):
    x = data("float64", positive=True)
    if isinstance(other, complex) and fn in (op_floordiv, op_mod):
        check(fn, x, other, graphs=0)  # NumPy raises TypeError: the same error must surface
        return
    check(fn, x, other)
    check(fn, other, x)


def test_bool_operators(check):
    a, b = data("bool"), ~data("bool")
    check(op_add, a, b)
    check(op_mul, a, b)


def neg(x):
    return -x


def pos(x):
    return +x


def inv(x):
    return ~x


def absolute(x):
    return abs(x)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "complex128"])
@pytest.mark.parametrize("fn", [neg, pos, absolute], ids=lambda f: f.__name__)
def test_unary_operators(check, fn, dtype):
    check(fn, data(dtype))


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_invert(check, dtype):
    check(inv, data(dtype))


# Comparisons, logical and bitwise ----------------------------------------------------------


def compare_all(x, y):
    return x < y, x <= y, x == y, x != y, x > y, x >= y


def compare_scalar(x):
    return (x > 0) & (x <= 2.5) | (x == -1)


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("int32", "float32"),
                                    ("uint8", "int8")], ids="-".join)
def test_comparisons(check, dtypes):
    check(compare_all, data(dtypes[0]), data(dtypes[1])[::-1].copy())


def test_comparisons_with_scalars(check):
    check(compare_scalar, data("float64"))
    check(compare_scalar, data("int64"))


def bitwise(x, y):
    return x & y, x | y, x ^ y, x << 1, y >> 1


def logical(x, y):
    return np.logical_and(x, y), np.logical_or(x, y), np.logical_xor(x, y), np.logical_not(x)


@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("uint8", "uint8"), ("int16", "int8")],
                         ids="-".join)
def test_bitwise(check, dtypes):
    check(bitwise, data(dtypes[0]), data(dtypes[1], positive=True))


@pytest.mark.parametrize("dtype", ["bool", "float64", "int32"])
def test_logical(check, dtype):
    check(logical, data(dtype), data(dtype)[::-1].copy())


def bool_bitwise(x, y):
    return x & y, x | y, x ^ y, ~x


def test_bool_bitwise(check):
    check(bool_bitwise, data("bool"), data("bool")[::-1].copy())


# Transcendental and other named ufuncs, written as users write them -------------------------


def transcendental(x):
    return np.exp(x), np.log(np.abs(x) + 1), np.sin(x), np.cos(x), np.tanh(x), np.sqrt(x * x)


def more_math(x, y):
    return (np.arctan2(x, y), np.hypot(x, y), np.maximum(x, y), np.minimum(x, y),
            np.floor(x), np.ceil(y), np.sign(x), np.square(x), np.power(np.abs(x), 0.5))


def user_expression(x, y):
    return np.exp(-x) * y + 1


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_transcendental(check, dtype):
    check(transcendental, data(dtype))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "int32"),
                                    ("int64", "float32")], ids="-".join)
def test_more_math_and_expression(check, dtypes):
    x, y = data(dtypes[0]), data(dtypes[1], positive=True)
    check(more_math, x, y)
    check(user_expression, x, y)


def _every_ufunc():
    """Every ufunc in the numpy namespace, once, with its name."""
    seen, out = set(), []
    for name in sorted(dir(np)):
        obj = getattr(np, name)
        if isinstance(obj, np.ufunc) and obj not in seen and obj.nin in (1, 2):
            seen.add(obj)
            out.append(pytest.param(obj, id=name))
    return out


#: Generalized ufuncs need core dimensions that fit their signature.
GUFUNC_SHAPES = {"(n?,k),(k,m?)->(n?,m?)": [(3, 4), (4, 2)], "(n),(n)->()": [(3, 4), (3, 4)],
                 "(m,n),(n)->(m)": [(3, 4), (4,)], "(n),(n,m)->(m)": [(4,), (4, 3)]}


def _inputs_for(uf):
    """One array per input, of the first loop type among float64/int64/bool the ufunc has."""
    if uf.signature is not None:
        return [np.linspace(0.1, 0.9, int(np.prod(s))).reshape(s) for s in GUFUNC_SHAPES[uf.signature]]
    for code, dtype in (("d", "float64"), ("l", "int64"), ("?", "bool"), ("D", "complex128")):
        signature = code * uf.nin + "->"
        if any(t.startswith(signature) for t in uf.types):
            x = data(dtype, positive=dtype != "bool") if code != "d" else np.linspace(0.1, 0.9, 12)
            return [x] + [x[::-1].copy() for _ in range(uf.nin - 1)]
    return None


def make_caller(uf):
    """A user function calling a ufunc it holds in a closure (one per arity)."""
    if uf.nin == 1:
        def call(x):
            return uf(x)
    else:
        def call(x, y):
            return uf(x, y)
    return call


@pytest.mark.parametrize("uf", _every_ufunc())
def test_every_ufunc(check, uf):
    inputs = _inputs_for(uf)
    if inputs is None:
        pytest.skip(f"{uf.__name__} has no float64/int64/bool/complex128 loop")
    with np.errstate(all="ignore"):
        check(make_caller(uf), *inputs)


# dtype=, out=, where= ---------------------------------------------------------------------


def ufunc_dtype(x, y):
    return np.add(x, y, dtype=np.float32), np.multiply(x, 2, dtype="float64")


def ufunc_out(x, out):
    np.multiply(x, 2, out=out)
    return out


def ufunc_out_returned(x, out):
    return np.exp(x, out=out) + 0


def ufunc_out_tuple(x, out):
    np.add(x, 1, out=(out,))
    return out


def ufunc_where_out(x, out):
    np.sqrt(x, out=out, where=x > 0)
    return out


def ufunc_out_is_input(x):
    np.negative(x, out=x)
    return x


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_ufunc_dtype_keyword(check, dtype):
    check(ufunc_dtype, data(dtype), data(dtype))


@pytest.mark.parametrize("fn", [ufunc_out, ufunc_out_returned, ufunc_out_tuple, ufunc_where_out],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ufunc_out_and_where(check, fn, dtype):
    check(fn, data(dtype), np.full((3, 4), -7.0, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_ufunc_out_is_the_input(check, dtype):
    check(ufunc_out_is_input, data(dtype))


def test_ufunc_out_returns_the_out_object(backend):
    x, out = data("float64"), np.zeros((3, 4))

    def f(x, out):
        return np.add(x, 1, out=out)

    result = dynamo.compile(f, backend=backend)(x, out)
    assert result is out and backend.count == 1
    np.testing.assert_array_equal(out, x + 1)


def ufunc_out_cast_error(x, out):
    return np.add(x, 1.5, out=out)


def test_ufunc_out_casting_error(check):
    check(ufunc_out_cast_error, data("float64"), np.zeros((3, 4), dtype=np.int64), graphs=0)


# Reductions --------------------------------------------------------------------------------


def f_sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims)


def f_mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims)


def f_max(x, axis, keepdims):
    return np.max(x, axis=axis, keepdims=keepdims)


def f_min(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims)


def f_prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims)


def f_std(x, axis, keepdims):
    return np.std(x, axis=axis, keepdims=keepdims)


def f_var(x, axis, keepdims):
    return np.var(x, axis=axis, keepdims=keepdims)


def f_any(x, axis, keepdims):
    return np.any(x, axis=axis, keepdims=keepdims)


def f_all(x, axis, keepdims):
    return np.all(x, axis=axis, keepdims=keepdims)


def f_argmax(x, axis, keepdims):
    return np.argmax(x, axis=axis, keepdims=keepdims)


def f_argmin(x, axis, keepdims):
    return np.argmin(x, axis=axis, keepdims=keepdims)


def m_sum(x, axis, keepdims):
    return x.sum(axis=axis, keepdims=keepdims)


def m_mean(x, axis, keepdims):
    return x.mean(axis=axis, keepdims=keepdims)


def m_max(x, axis, keepdims):
    return x.max(axis=axis, keepdims=keepdims)


def m_min(x, axis, keepdims):
    return x.min(axis=axis, keepdims=keepdims)


def m_prod(x, axis, keepdims):
    return x.prod(axis=axis, keepdims=keepdims)


def m_std(x, axis, keepdims):
    return x.std(axis=axis, keepdims=keepdims)


def m_var(x, axis, keepdims):
    return x.var(axis=axis, keepdims=keepdims)


def m_any(x, axis, keepdims):
    return x.any(axis=axis, keepdims=keepdims)


def m_all(x, axis, keepdims):
    return x.all(axis=axis, keepdims=keepdims)


def m_argmax(x, axis, keepdims):
    return x.argmax(axis=axis, keepdims=keepdims)


def m_argmin(x, axis, keepdims):
    return x.argmin(axis=axis, keepdims=keepdims)


REDUCTIONS = [f_sum, f_mean, f_max, f_min, f_prod, f_std, f_var, f_any, f_all,
              m_sum, m_mean, m_max, m_min, m_prod, m_std, m_var, m_any, m_all]
ARG_REDUCTIONS = [f_argmax, f_argmin, m_argmax, m_argmin]


@pytest.mark.parametrize("keepdims", [False, True], ids=["", "keepdims"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (-1, 0)], ids=repr)
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reductions(check, fn, dtype, axis, keepdims):
    x = data(dtype, shape=(2, 3, 4))
    if dtype == "int32" and fn in (f_prod, m_prod):
        x = (x % 2 + 1).astype(dtype)
    check(fn, x, axis, keepdims)


@pytest.mark.parametrize("keepdims", [False, True], ids=["", "keepdims"])
@pytest.mark.parametrize("axis", [None, 0, -1], ids=repr)
@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
@pytest.mark.parametrize("fn", ARG_REDUCTIONS, ids=lambda f: f.__name__)
def test_arg_reductions(check, fn, dtype, axis, keepdims):
    check(fn, data(dtype, shape=(2, 3, 4)), axis, keepdims)


def reductions_plain(x):
    return x.sum(), np.mean(x), x.max(0), np.min(x, 1), x.prod(axis=-1), x.argmax(), np.argmin(x, 0)


def reductions_ddof_dtype(x):
    return (np.std(x, ddof=1), x.var(axis=0, ddof=1), np.sum(x, axis=1, dtype=np.float32),
            x.mean(dtype=np.float32), x.prod(axis=0, dtype=np.int64), x.sum(1, None, None, True))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16"])
def test_reductions_positional_ddof_dtype(check, dtype):
    check(reductions_plain, data(dtype))
    check(reductions_ddof_dtype, data(dtype))


def bool_reductions(x):
    return x.any(), np.all(x), (x > 0).any(axis=1), np.all(x != 0, axis=0, keepdims=True)


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_bool_reductions(check, dtype):
    check(bool_reductions, data(dtype))


# Linear algebra ----------------------------------------------------------------------------


def linalg_2d(a, b):
    return np.dot(a, b), a.dot(b), np.matmul(a, b), a @ b


def linalg_vectors(u, v):
    return np.dot(u, v), np.vdot(u, v), np.outer(u, v), u @ v, np.einsum("i,i", u, v)


def einsums(a, b):
    return (np.einsum("ij,jk->ik", a, b), np.einsum("ij->ji", a), np.einsum("ij->", a),
            np.einsum("...j,jk->...k", a, b), np.einsum("ij,kj", a, b.T))


def batched_matmul(a, b):
    return a @ b, np.matmul(a, b), np.einsum("...ij,...jk->...ik", a, b)


def matrix_vector(a, v):
    return a @ v, np.dot(a, v), v @ a.T


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"),
                                    ("int64", "float32")], ids="-".join)
def test_linalg(check, dtypes):
    a, b = data(dtypes[0], (3, 4)), data(dtypes[1], (4, 2))
    check(linalg_2d, a, b)
    check(einsums, a, b)
    check(linalg_vectors, a[0].copy(), b[:, 0].copy() * 2)
    check(matrix_vector, a, data(dtypes[1], (4,)))
    check(batched_matmul, data(dtypes[0], (2, 3, 4)), data(dtypes[1], (2, 4, 3)))


def test_einsum_trace_and_complex_vdot(check):
    def f(a, c):
        return np.einsum("ii->", a), np.einsum("ii->i", a), np.vdot(c, c)

    check(f, data("float64", (3, 3)), data("complex128", (5,)))


# Creation ----------------------------------------------------------------------------------


def creation_basic():
    return (np.zeros((2, 3)), np.ones(4), np.full((2, 2), 7.5), np.zeros(3, dtype=np.int32),
            np.ones((2,), dtype="uint8"), np.full((3,), 2, dtype=np.float32), np.eye(3),
            np.eye(3, 4, k=1, dtype=int))


def creation_ranges():
    return (np.arange(5), np.arange(1, 10, 2), np.arange(0.0, 1.0, 0.125),
            np.arange(6, dtype=np.float32), np.linspace(0, 1, 7), np.linspace(-1, 1, 4, endpoint=False),
            np.linspace(0, 10, num=5, dtype=np.int64))


def creation_from_args(x):
    return (np.zeros_like(x), np.ones_like(x, dtype=np.float32), np.full_like(x, 3),
            np.zeros(x.shape) + x, np.ones(x.shape[0]), np.full(x.shape, 0.5, dtype=x.dtype),
            np.arange(x.size).reshape(x.shape), np.eye(x.shape[1], dtype=x.dtype))


def creation_empty(x):
    return np.empty((2, 3)), np.empty(4, dtype=np.int8), np.empty(x.shape, dtype=x.dtype) + 0 * x


def creation_empty_like(x):
    return np.empty_like(x), np.empty_like(x, dtype=np.float32)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16"])
def test_creation_with_arguments(check, dtype):
    check(creation_from_args, data(dtype))


def test_creation_constants(check):
    check(creation_basic)
    check(creation_ranges)


@pytest.mark.parametrize("fn", [
    creation_empty,
    creation_empty_like,
], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_creation_empty_metadata(backend, fn, dtype):
    x = data(dtype)
    expected = fn(x)
    result = dynamo.compile(fn, backend=backend)(x.copy())
    assert backend.count == 1
    for e, r in zip(expected, result):
        assert type(r) is type(e) and r.dtype == e.dtype and r.shape == e.shape


# Shape ops ---------------------------------------------------------------------------------


def reshapes(x):
    return x.reshape((4, 3)), x.reshape(2, 6), x.reshape(-1), np.reshape(x, (2, -1)), x.reshape(3, 2, 2)


def transposes(x):
    return x.T, x.transpose(), np.transpose(x), x.swapaxes(0, 1), np.swapaxes(x, 1, 0)


def transposes_3d(x):
    return x.transpose((2, 0, 1)), x.transpose(1, 0, 2), np.transpose(x, (0, 2, 1)), x.T, x.swapaxes(0, 2)


def squeezes(x):
    y = np.expand_dims(x, 0)
    return (y, np.expand_dims(x, -1), np.expand_dims(x, (0, 2)), y.squeeze(), np.squeeze(y, 0),
            y.squeeze(axis=0), x[None].squeeze())


def flattens(x):
    return x.ravel(), np.ravel(x), x.flatten(), x.T.ravel(), x.T.flatten()


def joins(x, y):
    return (np.concatenate([x, y]), np.concatenate((x, y), axis=1), np.concatenate([x, y], axis=None),
            np.stack([x, y]), np.stack((x, y), axis=-1), np.stack([x, y], 1))


def selects(x, y):
    return (np.where(x > 0, x, y), np.where(x > y, 1.0, 0), np.clip(x, -1, 2), x.clip(0, 1),
            np.clip(x, y, 3), np.broadcast_to(x[0], (5, 4)), np.broadcast_to(x, (2, 3, 4)))


def conversions(x):
    return x.astype(np.float32), x.astype("int8"), x.astype(bool), x.astype(x.dtype), x.copy(), np.copy(x)


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("fn", [reshapes, transposes, squeezes, flattens, conversions],
                         ids=lambda f: f.__name__)
def test_shape_ops(check, fn, dtype):
    check(fn, data(dtype))


@pytest.mark.parametrize("dtype", ["float64", "uint8"])
def test_transposes_3d(check, dtype):
    check(transposes_3d, data(dtype, (2, 3, 4)))


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "int64"), ("int8", "uint8")],
                         ids="-".join)
@pytest.mark.parametrize("fn", [joins, selects], ids=lambda f: f.__name__)
def test_joins_and_selects(check, fn, dtypes):
    check(fn, data(dtypes[0]), data(dtypes[1])[::-1].copy())
