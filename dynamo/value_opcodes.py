"""The opcodes that compute values on the stack: operators, subscripts, building and unpacking
containers and strings, and stack shuffles.

`ValueOpcodes` is a part of `symbolic_convert.InstructionTranslator` (a base class of it): one
handler method per opcode, named after it, found by the translator's dispatch table. These
handlers read and write the value stack only, through the translator's `push`/`pop`/`popn`;
the frame's names, calls, control flow and graph breaks are `symbolic_convert`'s. What each
operator means on trackers is `variables.operators`.
"""

from __future__ import annotations

import operator

from bytecode import Instr

from .exc import Unsupported
from .resume import STACK_PREFIX
from .source import LocalSource
from .variables import ConstantVariable, DictVariable, ListVariable, NDArrayVariable, TupleVariable
from .variables.constant import SymIntVariable, run_user_op, user_error
from .variables.containers import _Sequence
from .variables.lazy import LazyVariable
from .variables.operators import (BINARY_OPS, COMPARE_OPS, NAMED_BINARY_OPS, UNARY_OPS, binary_op,
                                  contains, dict_key, identical, unary_op)

__all__ = ["ValueOpcodes"]


class ValueOpcodes:
    """Handlers of the value opcodes (see the module docstring)."""

    # Operators ---------------------------------------------------------------------------------

    def BINARY_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, BINARY_OPS[inst.arg], a, b))

    def _binary_named(self, inst: Instr) -> None:
        """(3.10) BINARY_ADD, INPLACE_ADD, ...: one instruction per operator."""
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, NAMED_BINARY_OPS[inst.name], a, b))

    def COMPARE_OP(self, inst: Instr) -> None:
        # (`while err > tol` after `err = float(...)`: compared in Python, no guard on err)
        self._refuse_passed_through(self.stack[-2:], "comparing")
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, COMPARE_OPS[inst.arg], a, b))

    def _unary(self, inst: Instr) -> None:
        self.push(unary_op(self, UNARY_OPS[inst.name], self.pop()))

    UNARY_NEGATIVE = UNARY_POSITIVE = UNARY_INVERT = _unary

    def UNARY_NOT(self, inst: Instr) -> None:
        self.push(ConstantVariable(not self.pop().truth()))

    def TO_BOOL(self, inst: Instr) -> None:
        """(3.13) ``bool(x)`` before a conditional jump or ``not``."""
        self.push(ConstantVariable(self.pop().truth()))

    def CALL_INTRINSIC_1(self, inst: Instr) -> None:
        """(3.12+) What 3.11 spelled as instructions of their own."""
        name = getattr(inst.arg, "name", str(inst.arg))
        if name == "INTRINSIC_LIST_TO_TUPLE":
            self.LIST_TO_TUPLE(inst)
        elif name == "INTRINSIC_UNARY_POSITIVE":
            self.push(unary_op(self, operator.pos, self.pop()))
        else:
            raise Unsupported(f"the bytecode CALL_INTRINSIC_1 {name} is not supported")

    def IS_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(ConstantVariable(identical(self, a, b) != bool(inst.arg)))

    def CONTAINS_OP(self, inst: Instr) -> None:
        container = self.pop()
        item = self.pop()
        self.push(ConstantVariable(contains(self, item, container) != bool(inst.arg)))

    def BINARY_SLICE(self, inst: Instr) -> None:
        """(3.12+) ``x[a:b]``: BUILD_SLICE 2 and BINARY_SUBSCR in one."""
        self.BUILD_SLICE(Instr("BUILD_SLICE", 2))
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst: Instr) -> None:
        """(3.12+) ``x[a:b] = v``: BUILD_SLICE 2 and STORE_SUBSCR in one."""
        self.BUILD_SLICE(Instr("BUILD_SLICE", 2))
        self.STORE_SUBSCR(inst)

    def BINARY_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        if isinstance(obj, NDArrayVariable):
            self.push(self.output.call_function(self, operator.getitem, [obj, key], {}))
        elif isinstance(obj, (_Sequence, DictVariable)):
            self.push(obj.getitem(self, key))
        else:
            self.push(binary_op(self, operator.getitem, obj, key))

    def STORE_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, NDArrayVariable) and not obj.meta.is_scalar:
            self.output.call_function(self, operator.setitem, [obj, key, value], {})
        elif isinstance(obj, ListVariable):
            obj.check_mutable()
            run_user_op(operator.setitem, obj.items, key.as_python_constant(), value)
        elif isinstance(obj, DictVariable):
            obj.check_mutable()
            obj.put(dict_key(key), key, value)
        else:
            raise Unsupported(f"item assignment on {obj.describe()}")

    # Building and unpacking --------------------------------------------------------------------

    def BUILD_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instr) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst: Instr) -> None:
        flat = self.popn(2 * inst.arg)
        keys = [dict_key(k) for k in flat[::2]]
        out = DictVariable({})
        for key, tracker, value in zip(keys, flat[::2], flat[1::2]):
            out.put(key, tracker, value)
        self.push(out)

    def BUILD_CONST_KEY_MAP(self, inst: Instr) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(run_user_op(dict, zip(keys, self.popn(inst.arg)))))

    def BUILD_SET(self, inst: Instr) -> None:
        # A set of constants (its items are hashed and compared while tracing).
        values = [v.as_python_constant() for v in self.popn(inst.arg)]
        self.push(ConstantVariable(run_user_op(set, values)))

    def SET_ADD(self, inst: Instr) -> None:
        value = self.pop().as_python_constant()
        target = self.stack[-inst.arg]
        if not (isinstance(target, ConstantVariable) and type(target.value) is set):
            raise Unsupported(f"adding to {target.describe()}")
        run_user_op(target.value.add, value)

    def SET_UPDATE(self, inst: Instr) -> None:
        values = [v.as_python_constant() for v in self.pop().unpack(self)]
        target = self.stack[-inst.arg]
        if not (isinstance(target, ConstantVariable) and type(target.value) is set):
            raise Unsupported(f"updating {target.describe()}")
        run_user_op(target.value.update, values)

    def BUILD_SLICE(self, inst: Instr) -> None:
        parts = self.popn(inst.arg)
        if not all(p.is_python_constant() for p in parts):
            raise Unsupported("a slice bound that is an array value (data-dependent shape)")
        # (a size stays symbolic in the slice: ``x[: n // 2]`` reads n when the graph runs)
        self.push(ConstantVariable(slice(*(p.sym if isinstance(p, SymIntVariable) else
                                           p.as_python_constant() for p in parts))))

    def BUILD_STRING(self, inst: Instr) -> None:
        self._refuse_passed_through(self.stack[len(self.stack) - inst.arg:], "joining")
        parts = [p.as_python_constant() for p in self.popn(inst.arg)]
        self.push(ConstantVariable(run_user_op("".join, parts)))

    def _refuse_passed_through(self, values: list, what: str) -> None:
        """A value a resume function received on its stack and has not looked at is usually
        computed from array data before the break (``float(a.mean())``, or its formatted
        text). Making a string from it here would guard on its exact value and recompile on
        every new one: the graph breaks instead, and Python does it."""
        for raw in values:
            if (type(raw) is LazyVariable and isinstance(raw.source, LocalSource)
                    and raw.source.local_name.startswith(STACK_PREFIX)
                    and type(raw.value) in (float, str)):
                raise Unsupported(f"{what} {raw.source.name()}, a value from before a graph "
                                  "break (no guard on its exact value)")

    def CONVERT_VALUE(self, inst: Instr) -> None:
        """(3.13) The ``!s``/``!r``/``!a`` of an f-string field."""
        self._refuse_passed_through([self.stack[-1]], "formatting")
        conversion = {1: str, 2: repr, 3: ascii}[int(inst.arg)]
        self.push(ConstantVariable(run_user_op(conversion, self.pop().as_python_constant())))

    def FORMAT_SIMPLE(self, inst: Instr) -> None:
        """(3.13) ``format(value)`` of an f-string field without a spec."""
        self._refuse_passed_through([self.stack[-1]], "formatting")
        value = self.pop().as_python_constant()
        self.push(ConstantVariable(run_user_op(format, value, "")))

    def FORMAT_WITH_SPEC(self, inst: Instr) -> None:
        """(3.13) ``format(value, spec)`` of an f-string field."""
        self._refuse_passed_through([self.stack[-2]], "formatting")
        spec = self.pop().as_python_constant()
        value = self.pop().as_python_constant()
        self.push(ConstantVariable(run_user_op(format, value, spec)))

    def FORMAT_VALUE(self, inst: Instr) -> None:
        self._refuse_passed_through([self.stack[-2] if inst.arg & 0x04 else self.stack[-1]],
                                    "formatting")
        spec = self.pop().as_python_constant() if (inst.arg & 0x04) else ""
        value = self.pop().as_python_constant()
        conversion = {1: str, 2: repr, 3: ascii}.get(inst.arg & 0x03)
        if conversion is not None:
            value = run_user_op(conversion, value)
        self.push(ConstantVariable(run_user_op(format, value, spec)))

    def LIST_APPEND(self, inst: Instr) -> None:
        value = self.pop()
        self.stack[-inst.arg].append(value)

    def LIST_EXTEND(self, inst: Instr) -> None:
        seq = self.pop()
        self.stack[-inst.arg].extend(seq.unpack(self))

    def MAP_ADD(self, inst: Instr) -> None:
        value = self.pop()
        key = self.pop()
        target = self.stack[-inst.arg]
        target.check_mutable()
        target.put(dict_key(key), key, value)

    def LIST_TO_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    def DICT_UPDATE(self, inst: Instr) -> None:
        update = self.pop()
        if not isinstance(update, DictVariable):
            raise Unsupported("dict update from a value that is not a dict built in the frame")
        target = self.stack[-inst.arg]
        target.check_mutable()
        if inst.name == "DICT_MERGE" and not target.items.keys().isdisjoint(update.items):
            # ``f(**a, **b)`` with a key in both: Python's TypeError names the callee; the
            # instruction runs in plain Python to raise it
            raise Unsupported("a keyword argument given twice by ** unpacking")
        target.merge(update)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst: Instr) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise user_error(ValueError, f"unpacking {len(items)} values into {inst.arg} names")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst: Instr) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise user_error(ValueError,
                             f"unpacking {len(items)} values into {before + after}+ names")
        middle = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], middle, *items[len(items) - after:]]):
            self.push(item)

    # Stack -----------------------------------------------------------------------------------

    def POP_TOP(self, inst: Instr) -> None:
        self.stack.pop()  # dropped unseen: no guard

    def COPY(self, inst: Instr) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: Instr) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # (3.10's spellings)
    def DUP_TOP(self, inst: Instr) -> None:
        self.push(self.stack[-1])

    def DUP_TOP_TWO(self, inst: Instr) -> None:
        self.stack.extend(self.stack[-2:])

    def _rotate(self, n: int) -> None:
        """Move the top down to position `n` (ROT_TWO ... ROT_N)."""
        top = self.stack.pop()
        self.stack.insert(len(self.stack) - n + 1, top)

    def ROT_TWO(self, inst: Instr) -> None:
        self._rotate(2)

    def ROT_THREE(self, inst: Instr) -> None:
        self._rotate(3)

    def ROT_FOUR(self, inst: Instr) -> None:
        self._rotate(4)

    def ROT_N(self, inst: Instr) -> None:
        self._rotate(inst.arg)


for _name in NAMED_BINARY_OPS:  # (3.10's BINARY_ADD, INPLACE_ADD, ...)
    setattr(ValueOpcodes, _name, ValueOpcodes._binary_named)
