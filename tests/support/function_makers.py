"""Functions that make functions, in a module of their own (tests/dynamo/test_inlined_closures.py).

What they make must get this module's globals (``anp``, ``SCALE``: names the tests' module does
not have), builtins, ``__module__``, defaults, keyword defaults, annotations, qualified names and
closure cells, however the caller traced into them lets the made function escape.
"""

from __future__ import annotations

import numpy as anp

SCALE = 3.0


def make_lambda(ans, x):
    return lambda g: anp.conj(g) * SCALE


def make_nested(x, offset=1.5):
    y = x * 2

    def inner(v, k=offset, *, kw=SCALE) -> "anp.ndarray":
        return anp.add(v, y) * k + kw

    return inner


def make_pair():
    count = anp.arange(3.0)

    def get():
        return count

    def add(v):
        return count + v

    count = count * SCALE  # (after both closures are made: they see the last value)
    return get, add


def make_in_comprehension():
    # (3.10/3.11: the comprehension is a function; each lambda closes over its cell ``i``)
    return [lambda v: v * i + SCALE for i in range(3)]


def make_generator(x):
    return (anp.sin(x) * k + SCALE for k in range(2))


def store_in_list(out, x):
    out.append(lambda v: anp.negative(v) + x)


def store_on_attribute(obj, x):
    obj.fn = lambda v: anp.square(v) + SCALE + x.sum()


def apply(fn, x):
    return fn(x) + SCALE
