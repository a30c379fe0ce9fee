"""Equal copies of the program's constants, for what npdynamo keeps between calls.

In: a constant read from the frame while tracing (an int, float, str, bytes, range or slice
argument). Out: `detached(value)`, an object equal to it, of its type, that is not the program's
own object. Called by `guards` (the value a CONSTANT_MATCH guard compares with) and
`dynamic_shapes` (the last value of a scalar argument), which live as long as the compiled
version: holding the program's object there would keep it alive after the program dropped it
(a large str or bytes argument stays in memory) and show in ``sys.getrefcount`` (CPython's
test_memoryview test_getbuffer). Small ints and one-character strings are shared singletons
in CPython anyway; they are kept as they are.
"""

from __future__ import annotations

__all__ = ["detached"]


def detached(value: object) -> object:
    typ = type(value)
    if typ is int:
        return value + 0 if value.bit_length() > 8 else value  # (int + 0 is a new object)
    if typ is float:
        return value * 1.0  # (a new object; the sign of a zero and a NaN's payload are kept)
    if typ is str:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
    if typ is bytes:
        return bytes(bytearray(value))
    if typ in (range, slice):
        return typ(*(detached(part) for part in (value.start, value.stop, value.step)))
    return value
