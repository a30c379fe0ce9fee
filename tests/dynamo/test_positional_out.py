"""Outputs passed positionally write where NumPy writes, on both backends.

``np.logical_not(m, m)``, ``np.clip(b, 0, 1, b)``, ``b.sum(0, None, o)``: NumPy takes an output
array in the place of a positional parameter. The graph keeps the call as written (NumPy warns
about some of these forms, and the compiled call must warn too), and every pass that asks
whether a node writes memory reads its outputs from `fx.Node.written` (positional or
``out=``): dead-code elimination kept only ``out=`` calls whose result was unused, and
common-subexpression elimination merged two equal values when one was then written through a
positional output. The generated test over every ufunc and calling form is
tests/fuzz/test_ufunc_calling_forms.py; these are the repros and the non-ufunc forms.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import dynamo
from fx import Graph
from support.oracle import compare, make_backend, run

BACKENDS = ["eager", pytest.param("c", marks=pytest.mark.skipif(
    shutil.which("gcc") is None, reason="needs gcc"))]


def check(fn, *args, calls: int = 2) -> None:
    """Plain vs compiled (`calls` times: compile, then cache hits), everything compared."""
    for backend in ("eager", "c") if shutil.which("gcc") else ("eager",):
        dynamo.reset()
        be = make_backend(backend)
        compiled = dynamo.compile(fn, backend=be)
        for i in range(calls):
            compare(run(fn, args), run(compiled, args), f"{backend}, call {i + 1}",
                    exact_warnings=backend == "eager")
        assert be.count >= 1, f"{fn.__name__}: nothing was captured ({backend})"


def logical_not_in_place(a):
    m = a > 2
    np.logical_not(m, m)
    return m


def negative_in_place(a):
    y = a * 1
    np.negative(y, y)
    return y


def comparison_into_first_operand(a, b):
    y = a * 1
    z = b + 1
    np.greater(y, z, y)
    return y


def shifts_into_operands(a):
    y = a + 1
    np.left_shift(y, 1, y)
    np.right_shift(y, 2, y)
    np.bitwise_xor(y, 3, y)
    np.invert(y, y)
    return y


def modf_first_output_only(a):
    frac = np.zeros(a.shape)
    np.modf(a * 3, frac)
    return frac


@pytest.mark.parametrize("fn,args", [
    (logical_not_in_place, (np.arange(5.0),)),
    (negative_in_place, (np.arange(5.0),)),
    (comparison_into_first_operand, (np.arange(5.0), np.full(5, 2.0))),
    (shifts_into_operands, (np.arange(6),)),
    (modf_first_output_only, (np.linspace(0, 2, 7),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_ufunc_output_given_positionally_is_written(fn, args):
    check(fn, *args)


def mandelbrot(n, m, itermax):
    """The classic NumPy Mandelbrot (in-place ufuncs with positional outputs in a loop)."""
    ix, iy = np.mgrid[0:n, 0:m]
    x = np.linspace(-2.0, 0.5, n)[ix]
    y = np.linspace(-1.25, 1.25, m)[iy]
    c = x + complex(0, 1) * y
    img = np.zeros(c.shape, dtype=int)
    ix.shape = n * m
    iy.shape = n * m
    c.shape = n * m
    z = np.copy(c)
    for i in range(itermax):
        if not len(z):
            break
        np.multiply(z, z, z)
        np.add(z, c, z)
        rem = abs(z) > 2.0
        img[ix[rem], iy[rem]] = i + 1
        np.logical_not(rem, rem)
        z = z[rem]
        ix, iy = ix[rem], iy[rem]
        c = c[rem]
    return img


def test_mandelbrot_with_positional_outputs():
    check(mandelbrot, 24, 32, 12)


def function_outputs_given_positionally(a):
    y = a * 1
    total, clipped, running, rounded, taken = (np.zeros(()), np.zeros(4), np.zeros(4),
                                               np.zeros(4), np.zeros(2))
    np.sum(y, 0, None, total)
    np.clip(y, 1, 2, clipped)
    np.cumsum(y, 0, None, running)
    np.around(y, 1, rounded)
    np.take(y, [0, 1], 0, taken)
    np.add.reduce(y, 0, None, total)
    return total, clipped, running, rounded, taken


def method_outputs_given_positionally(a, out):
    y = a * 1
    clipped = np.zeros(4)
    y.clip(0, 1, clipped)
    y.sum(0, None, out)
    return clipped


@pytest.mark.parametrize("fn,args", [
    (function_outputs_given_positionally, (np.arange(4.0) * 0.7,)),
    (method_outputs_given_positionally, (np.arange(4.0) * 0.7, np.zeros(()))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_function_and_method_outputs_given_positionally(fn, args):
    check(fn, *args)


def equal_values_one_clipped_in_place(x):
    a = np.abs(x)
    b = np.abs(x)
    np.clip(b, 0.0, 1.0, b)
    return a + b


def equal_values_one_clipped_by_method(x):
    a = np.negative(x)
    b = np.negative(x)
    b.clip(0.0, 1.0, b)
    return a + b


@pytest.mark.parametrize("fn", [equal_values_one_clipped_in_place,
                                equal_values_one_clipped_by_method], ids=lambda f: f.__name__)
def test_equal_values_are_not_merged_when_one_is_written_positionally(fn):
    """(CSE merged ``a`` and ``b``: the C backend returned 2 * clip(|x|) instead of
    |x| + clip(|x|).)"""
    check(fn, np.linspace(-3, 3, 7))


def maximum_into_first_operand(a, b):
    y = a * 1
    np.maximum(y, b, y)
    return y


def test_numpy_deprecation_of_a_positional_output_warns_once_at_the_users_line():
    """NumPy 2 deprecates ``np.maximum(x, y, out)``: the compiled call warns exactly as plain
    NumPy does, once per call, and the rules' trial run on stand-in data does not warn."""
    check(maximum_into_first_operand, np.arange(4.0), np.full(4, 2.0))


@pytest.mark.parametrize("call,written", [
    (lambda g, x: g.call_function(np.negative, (x, x)), 1),
    (lambda g, x: g.call_function(np.negative, (x,), {"out": x}), 1),
    (lambda g, x: g.call_function(np.modf, (x,), {"out": (x, None)}), 1),
    (lambda g, x: g.call_function(np.modf, (x, x, x)), 2),
    (lambda g, x: g.call_function(np.sum, (x, 0, None, x)), 1),
    (lambda g, x: g.call_function(np.add.reduce, (x, 0, None, x)), 1),
    (lambda g, x: g.call_method("clip", (x, 0, 1, x)), 1),
    (lambda g, x: g.call_method("sum", (x, 0)), 0),
    (lambda g, x: g.call_function(np.add, (x, x)), 0),
    (lambda g, x: g.call_function(np.take, (x, [0], 0)), 0),
])
def test_a_node_knows_the_outputs_it_writes(call, written):
    g = Graph()
    x = g.placeholder("x")
    node = call(g, x)
    assert node.written() == [x] * written
    assert node.is_impure() == bool(written)
