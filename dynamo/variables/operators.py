"""Python's operators on VariableTrackers: what ``a + b``, ``a < b``, ``-a``, ``a is b`` and
``a in b`` mean while tracing.

In: the translator (for its graph: an operator on an array records a NumPy operation) and the
operands' trackers. Out: the result's tracker, or `Unsupported` when the answer is not known
while tracing (the graph breaks and Python evaluates it). Called by the translator's operator
opcodes (BINARY_OP, COMPARE_OP, IS_OP, CONTAINS_OP, the unary ones) and by the trackers of
``operator.add``, ``sum`` and friends (`callables.BuiltinVariable`).

Arrays go to the graph; sizes and int arguments that can be symbols stay symbolic (no guard on
their values); tuples and lists follow Python's sequence rules; constants are computed with the
user's exception semantics (`constant.run_user_op`).
"""

from __future__ import annotations

import operator
import types
from typing import Any, Callable

import numpy as np
from bytecode.instr import BinaryOp, Compare

from ..exc import Unsupported
from .base import VariableTracker
from .builder import wrap_constant
from .constant import (ConstantVariable, SymIntVariable, UnspecializedScalarVariable,
                       run_user_op)
from .containers import DictVariable, IteratorVariable, ListVariable, _Sequence
from .ndarray import NDArrayVariable
from .opaque import OpaqueObjectVariable

__all__ = ["BINARY_OPS", "COMPARE_OPS", "NAMED_BINARY_OPS", "UNARY_OPS", "binary_op", "unary_op",
           "identical", "contains", "dict_key", "unequal_to_itself", "is_symbolic_int"]

# The operator each opcode means -------------------------------------------------------------

#: BINARY_OP's argument -> the operator
BINARY_OPS: dict[BinaryOp, Callable] = {
    BinaryOp.ADD: operator.add, BinaryOp.AND: operator.and_, BinaryOp.FLOOR_DIVIDE: operator.floordiv,
    BinaryOp.LSHIFT: operator.lshift, BinaryOp.MATRIX_MULTIPLY: operator.matmul,
    BinaryOp.MULTIPLY: operator.mul, BinaryOp.REMAINDER: operator.mod, BinaryOp.OR: operator.or_,
    BinaryOp.POWER: operator.pow, BinaryOp.RSHIFT: operator.rshift, BinaryOp.SUBTRACT: operator.sub,
    BinaryOp.TRUE_DIVIDE: operator.truediv, BinaryOp.XOR: operator.xor,
    BinaryOp.INPLACE_ADD: operator.iadd, BinaryOp.INPLACE_AND: operator.iand,
    BinaryOp.INPLACE_FLOOR_DIVIDE: operator.ifloordiv, BinaryOp.INPLACE_LSHIFT: operator.ilshift,
    BinaryOp.INPLACE_MATRIX_MULTIPLY: operator.imatmul, BinaryOp.INPLACE_MULTIPLY: operator.imul,
    BinaryOp.INPLACE_REMAINDER: operator.imod, BinaryOp.INPLACE_OR: operator.ior,
    BinaryOp.INPLACE_POWER: operator.ipow, BinaryOp.INPLACE_RSHIFT: operator.irshift,
    BinaryOp.INPLACE_SUBTRACT: operator.isub, BinaryOp.INPLACE_TRUE_DIVIDE: operator.itruediv,
    BinaryOp.INPLACE_XOR: operator.ixor,
}

COMPARE_OPS = {
    Compare.LT: operator.lt, Compare.LE: operator.le, Compare.EQ: operator.eq,
    Compare.NE: operator.ne, Compare.GT: operator.gt, Compare.GE: operator.ge,
}
# (3.13: the same comparisons with the result made a bool, for a conditional jump after them)
COMPARE_OPS.update({getattr(Compare, f"{c.name}_CAST"): op for c, op in list(COMPARE_OPS.items())
                    if hasattr(Compare, f"{c.name}_CAST")})

#: (3.10) the binary operators' own instructions
NAMED_BINARY_OPS: dict[str, Callable] = {
    f"{prefix}_{name}": op
    for name, plain, inplace in [
        ("ADD", operator.add, operator.iadd), ("SUBTRACT", operator.sub, operator.isub),
        ("MULTIPLY", operator.mul, operator.imul),
        ("TRUE_DIVIDE", operator.truediv, operator.itruediv),
        ("FLOOR_DIVIDE", operator.floordiv, operator.ifloordiv),
        ("MODULO", operator.mod, operator.imod), ("POWER", operator.pow, operator.ipow),
        ("MATRIX_MULTIPLY", operator.matmul, operator.imatmul),
        ("LSHIFT", operator.lshift, operator.ilshift),
        ("RSHIFT", operator.rshift, operator.irshift),
        ("AND", operator.and_, operator.iand), ("OR", operator.or_, operator.ior),
        ("XOR", operator.xor, operator.ixor)]
    for prefix, op in (("BINARY", plain), ("INPLACE", inplace))
}

UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert}


#: In-place operator -> the operator Python falls back to when the left side is immutable.
INPLACE_FALLBACK = {
    operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imul: operator.mul,
    operator.imod: operator.mod, operator.ior: operator.or_, operator.ipow: operator.pow,
    operator.irshift: operator.rshift, operator.isub: operator.sub, operator.itruediv: operator.truediv,
    operator.ixor: operator.xor,
}


#: Types whose equal values are one object (a value, which guards check, settles identity).
_UNIQUE_PER_VALUE = (type(None), bool, type(Ellipsis), type(NotImplemented), type,
                     types.FunctionType, types.BuiltinFunctionType, types.ModuleType, np.ufunc)


def dict_key(key: VariableTracker) -> Any:
    """The value of a key put into a dict tracker. The dict keeps the value, not the tracker,
    and is rebuilt from it (a constant of the code): a key found only by identity (NaN) would
    be another object than the frame's."""
    value = key.as_python_constant()
    if unequal_to_itself(value):
        raise Unsupported(f"a dict key unequal to itself ({key.describe()})")
    return value


def unequal_to_itself(value: Any) -> bool:
    """NaN, or a value whose ``==`` is not reflexive (containers then match it only by
    identity)."""
    try:
        return not bool(value == value)
    except Exception:  # noqa: BLE001 - no plain answer: treat it as odd
        return True


def binary_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    if op in INPLACE_FALLBACK and not (isinstance(a, NDArrayVariable) and not a.meta.is_scalar):
        if not isinstance(a, ListVariable):
            op = INPLACE_FALLBACK[op]
    if isinstance(a, NDArrayVariable) or isinstance(b, NDArrayVariable):
        return tx.output.call_function(tx, op, [a, b], {})
    if is_symbolic_int(a) or is_symbolic_int(b):
        result = _symbolic_size_op(op, a, b)
        if result is not None:
            return result
    if isinstance(a, _Sequence) or isinstance(b, _Sequence):
        return _sequence_op(tx, op, a, b)
    if a.is_python_constant() and b.is_python_constant():
        return wrap_constant(run_user_op(op, a.as_python_constant(), b.as_python_constant()))
    raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")

def _sequence_op(tx, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """``+`` and ``*`` on tuples and lists (in place for lists built in this frame)."""
    if op in (operator.add, operator.iadd) and isinstance(a, _Sequence) and type(a) is type(b):
        if op is operator.iadd and isinstance(a, ListVariable):
            a.extend(b.unpack(tx))
            return a
        return type(a)(a.items + b.items)
    if op in (operator.mul, operator.imul):
        seq, times = (a, b) if isinstance(a, _Sequence) else (b, a)
        count = times.as_python_constant() if times.is_python_constant() else None
        if isinstance(count, int) and not isinstance(count, bool):
            if op is operator.imul and isinstance(seq, ListVariable):
                seq.check_mutable()
                seq.items[:] = seq.items * count
                return seq
            return type(seq)(seq.items * count)
    if op in (operator.eq, operator.ne) and isinstance(a, _Sequence) and type(a) is type(b):
        # ``x.shape == y.shape``: item by item, stopping at the first difference as Python
        # does (sizes compare symbolically: a guarded fact, not fixed sizes)
        equal = len(a.items) == len(b.items)
        for left, right in zip(a.items, b.items) if equal else ():
            if left is right:
                continue  # (Python checks identity first: ``[nan] == [nan]`` for one nan)
            same = binary_op(tx, operator.eq, left, right)
            if (isinstance(same, ConstantVariable) and same.value is False
                    and left.is_python_constant() and right.is_python_constant()):
                x, y = left.as_python_constant(), right.as_python_constant()
                if x is y or (unequal_to_itself(x) and unequal_to_itself(y)):
                    raise Unsupported(f"comparing {a.describe()} and {b.describe()}: "
                                      "items unequal to themselves (NaN)")
            if not isinstance(same, ConstantVariable) or type(same.value) is not bool:
                raise Unsupported(f"comparing {a.describe()} and {b.describe()}: an item "
                                  "comparison is not a plain bool")
            if not same.value:
                equal = False
                break
        return ConstantVariable(equal if op is operator.eq else not equal)
    raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")


def unary_op(tx, op: Callable, a: VariableTracker) -> VariableTracker:
    """``-a``, ``+a``, ``~a``."""
    if isinstance(a, NDArrayVariable):
        return tx.output.call_function(tx, op, [a], {})
    if is_symbolic_int(a) and op in (operator.neg, operator.pos):
        return wrap_constant(op(_symbolic_operand(a)))
    return wrap_constant(run_user_op(op, a.as_python_constant()))


def identical(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """``a is b``, when the trackers settle it. Guards check values, not object identity,
    and a container's ``as_python_constant`` is a new copy: equal values of a type whose
    objects are not unique per value (1000.5, "ab", a tuple) are left to Python."""
    if a is b:
        return True  # one tracker stands for one object
    scalars = [not isinstance(v, (_Sequence, DictVariable)) and v.is_python_constant()
               for v in (a, b)]
    if all(scalars):
        x, y = a.as_python_constant(), b.as_python_constant()
        if type(x) is not type(y):
            return False
        if isinstance(x, _UNIQUE_PER_VALUE) or (type(x) is int and -5 <= x <= 256):
            return x is y  # (small ints are cached: equal ones are one object)
        if a.source is None and b.source is None:
            # Both made while tracing (``(n + 300) is (n + 300)``), as Python makes them.
            # (After a break they would be rebuilt as one constant of the code.)
            return x is y
        if x == y or (unequal_to_itself(x) and unequal_to_itself(y)):
            raise Unsupported(f"'is' between {a.describe()} and {b.describe()}: equal "
                              "values may or may not be one object")
        return False
    consts = [v for v, scalar in zip((a, b), scalars) if scalar]
    if consts and consts[0].as_python_constant() is None:
        other = b if consts[0] is a else a
        if isinstance(other, OpaqueObjectVariable):  # (no guard says what it is yet)
            return other.is_none(tx)
        return False  # a graph value or container is never None
    if any(isinstance(v, (ListVariable, DictVariable)) for v in (a, b)):
        return False  # (one list or dict object has one tracker: `VariableBuilder`)
    raise Unsupported(f"'is' between {a.describe()} and {b.describe()}")


def contains(tx, item: VariableTracker, container: VariableTracker) -> bool:
    """``item in container``."""
    if not item.is_python_constant():
        raise Unsupported(f"'in' with {item.describe()}")
    value = item.as_python_constant()
    # A value unequal to itself (NaN) is found only as the very object: identity, which
    # guards do not check, unless both are one tracker.
    odd = unequal_to_itself(value)
    if isinstance(container, (_Sequence, IteratorVariable)):
        # Python compares each item by identity, then ``==``, and stops at the first match
        # (an iterator is consumed up to it); an item that is not a constant could match
        # at run time.
        found = False
        items = container.unpack(tx) if isinstance(container, _Sequence) else None
        while True:
            v = (items.pop(0) if items else None) if items is not None else container.next()
            if v is None:
                break
            if v is item:
                found = True
                break
            if not v.is_python_constant():
                raise Unsupported(f"'in' over {container.describe()} holding "
                                  f"{v.describe()}")
            known = v.as_python_constant()
            if odd and (known is value or unequal_to_itself(known)):
                raise Unsupported(f"'in' with {item.describe()}: found or not by identity")
            if known is value or run_user_op(operator.eq, known, value):
                found = True
                break
    elif odd:
        raise Unsupported(f"'in' with {item.describe()}: found or not by identity")
    elif isinstance(container, DictVariable):
        found = run_user_op(operator.contains, container.items, value)
    else:
        # (the container's own ``in``: a substring for str and bytes, hashing for sets)
        found = run_user_op(operator.contains, container.as_python_constant(), value)
    return bool(found)


#: Operations on sizes that stay symbolic (no guard): arithmetic that keeps an int exact, and
#: comparisons (their answer is guarded only when the sizes' bounds do not settle it).
_SIZE_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
             operator.iadd, operator.isub, operator.imul, operator.ifloordiv, operator.imod,
             operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge}


def is_symbolic_int(vt: VariableTracker) -> bool:
    """A size (`SymIntVariable`) or an int argument that can be a symbol (it then becomes one
    when `_symbolic_operand` asks)."""
    return isinstance(vt, SymIntVariable) or (isinstance(vt, UnspecializedScalarVariable)
                                              and vt.can_be_symbolic())


def _symbolic_operand(vt: VariableTracker) -> Any:
    if isinstance(vt, SymIntVariable):
        return vt.sym
    if isinstance(vt, UnspecializedScalarVariable):
        return vt.symbolic()
    return vt.value


def _symbolic_size_op(op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """``n - 1``, ``n * m``, ``n > 5`` for sizes, int arguments that can be symbols and ints;
    None for anything else (the caller then fixes the sizes to their values)."""
    def symbolic(vt: VariableTracker) -> bool:
        return is_symbolic_int(vt) or (isinstance(vt, ConstantVariable)
                                        and type(vt.value) is int)

    if op not in _SIZE_OPS or not symbolic(a) or not symbolic(b):
        return None
    try:
        return wrap_constant(op(_symbolic_operand(a), _symbolic_operand(b)))
    except ZeroDivisionError:
        return None  # (raised again, with the user's traceback, by the plain path)
