"""Constants of the generated code keep their type and identity.

In: functions that make NumPy scalars of every type (and Python constants that are equal but
distinct: 0.0 and -0.0, 1, True and 1.0, two NaNs, two equal big ints) while tracing and pass
them on -- live at a graph break (the resume function gets them), returned, made in a loop
body that breaks. Out: plain Python's values, types and ``is`` relations. The code assembler
(the `bytecode` package) keyed constants by ``marshal.dumps``, which sees only the bytes of a
buffer-protocol object, so two scalars with the same bytes became one constant of the first
one's type: ``(np.int8(-1), np.uint8(255))`` came back as two int8 (NumPy's test_arraysetops).
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo import graph_break
from support.oracle import assert_same


def made_scalars():
    # Groups of equal bytes: ff; 00 (one to eight bytes); 01; 'a' as UCS4 and as bytes.
    return (
        np.int8(-1), np.uint8(255), np.bool_(True), np.int8(1), np.uint8(1),
        np.int16(-1), np.uint16(65535), np.float16(0), np.int16(0), np.uint16(0),
        np.int32(-1), np.uint32(4294967295), np.float32(0), np.int32(0), np.uint32(0),
        np.int64(-1), np.uint64(18446744073709551615), np.float64(0), np.int64(0), np.uint64(0),
        np.complex64(0), np.complex128(0), np.longdouble(0), np.clongdouble(0),
        np.datetime64(0, "D"), np.datetime64(0, "h"), np.timedelta64(0, "D"),
        np.timedelta64(1, "D"), np.timedelta64(1, "h"), np.timedelta64(1, "s"),
        np.str_("a"), np.int32(97), np.bytes_(b"a"), np.int8(97), np.void(b"a"),
    )


def scalars_across_a_break():
    values = made_scalars()
    graph_break()
    return values


def scalars_returned():
    return made_scalars()


def scalars_in_a_loop_body():
    out = []
    for _ in range(2):
        values = made_scalars()
        graph_break()  # (a break inside the loop: the body becomes a function of its own)
        out.append(values)
    return out


def identity(values):
    """``values`` in comparable form: each value with its type, and which are one object."""
    flat = [v for group in values for v in group] if isinstance(values, list) else list(values)
    same = [[i for i, w in enumerate(flat) if w is v] for v in flat]
    return [(type(v), repr(v)) for v in flat], same  # (repr: a long double's padding is junk)


@pytest.mark.parametrize("fn", [scalars_across_a_break, scalars_returned, scalars_in_a_loop_body])
def test_numpy_scalars_with_the_same_bytes_stay_apart(fn):
    expected = identity(fn())
    compiled = dynamo.compile(fn)
    for _ in range(2):  # (compile, then a cache hit)
        assert identity(compiled()) == expected


def test_unique_of_timedeltas_in_different_units():
    def f():
        return np.unique([np.timedelta64(1, "D"), np.timedelta64(1, "h")])

    assert_same(f(), dynamo.compile(f)())


def equal_but_distinct_python_constants(x):
    zero = 0.0
    negative_zero = zero * -1.0
    one, true, one_float = 1, 1 == 1, float(1)
    nan, other_nan = float("nan"), float("nan")
    big, other_big = int("7" * 30), int("7" * 30)
    text, data = "ab" + "c", b"ab" + b"c"
    y = np.sin(x)
    graph_break()
    values = (zero, negative_zero, one, true, one_float, nan, other_nan, big, other_big, text,
              data)
    return y, [(type(v), repr(v)) for v in values], [[w is v for w in values] for v in values]


def test_equal_but_distinct_python_constants_stay_apart():
    x = np.arange(3.0)
    expected = equal_but_distinct_python_constants(x)
    compiled = dynamo.compile(equal_but_distinct_python_constants)
    for _ in range(2):
        assert_same(expected, compiled(x))
