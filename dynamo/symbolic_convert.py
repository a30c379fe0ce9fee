"""The symbolic bytecode translator: simulates a frame's CPython 3.11 bytecode on
VariableTrackers, recording NumPy operations into the OutputGraph.

Input: a frame view from the C hook (code, globals, builtins, argument values, closure) and a
backend. Output (`trace_frame`): a `CompiledFrame` with the guard function, the transformed code
and the graph, or None when the frame holds nothing to compile. Code the translator cannot
capture raises `Unsupported` with the user's file:line; `convert_frame` decides what happens then.

One handler method per opcode, named after it; the dispatch table is built once per class.
"""

from __future__ import annotations

import linecache
import operator
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd
from bytecode.instr import BinaryOp, Compare

from . import config
from .codegen import argument_names, transform_code
from .exc import Unsupported
from .guards import Guard, build_check_fn
from .output_graph import GraphResult, OutputGraph
from .source import ClosureSource, GlobalSource, LocalSource
from .variables import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    IteratorVariable,
    ListVariable,
    NDArrayVariable,
    NullVariable,
    TupleVariable,
    VariableBuilder,
    VariableTracker,
)
from .variables.builder import wrap_constant
from .variables.containers import _Sequence

__all__ = ["InstructionTranslator", "CompiledFrame", "trace_frame"]

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

#: In-place operator -> the operator Python falls back to when the left side is immutable.
INPLACE_FALLBACK = {
    operator.iadd: operator.add, operator.iand: operator.and_, operator.ifloordiv: operator.floordiv,
    operator.ilshift: operator.lshift, operator.imatmul: operator.matmul, operator.imul: operator.mul,
    operator.imod: operator.mod, operator.ior: operator.or_, operator.ipow: operator.pow,
    operator.irshift: operator.rshift, operator.isub: operator.sub, operator.itruediv: operator.truediv,
    operator.ixor: operator.xor,
}

COMPARE_OPS = {
    Compare.LT: operator.lt, Compare.LE: operator.le, Compare.EQ: operator.eq,
    Compare.NE: operator.ne, Compare.GT: operator.gt, Compare.GE: operator.ge,
}

UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert}


@dataclass
class CompiledFrame:
    """The product of translating one frame: what goes into the C cache, plus debug views."""

    check_fn: Callable[..., bool]
    code: types.CodeType
    original_code: types.CodeType
    result: GraphResult


class InstructionTranslator:
    """Translates the frame being compiled (its arguments and closure come from the C hook)."""

    def __init__(self, frame: Any, code: types.CodeType, output: OutputGraph) -> None:
        self.frame = frame
        self.code = code
        self.output = output
        self.argnames = argument_names(self.code)
        self.instructions: list[Instr] = []
        self.labels: dict[Label, int] = {}
        for item in Bytecode.from_code(self.code):
            if isinstance(item, Label):
                self.labels[item] = len(self.instructions)
            elif isinstance(item, (TryBegin, TryEnd)):
                self.lineno = self.code.co_firstlineno
                raise Unsupported("try/except and with blocks are not supported yet",
                                  self.user_location(include_line=False))
            elif isinstance(item, Instr):
                self.instructions.append(item)
        self.stack: list[VariableTracker] = []
        self.locals: dict[str, VariableTracker] = {}
        self.deleted: set[str] = set()
        self.ip = 0
        self.lineno = self.code.co_firstlineno
        self.kw_names: tuple[str, ...] = ()
        self.return_value: VariableTracker | None = None
        self.steps = 0

    # Driver ----------------------------------------------------------------------------------

    def run(self) -> None:
        while self.return_value is None:
            if self.total_steps() > config.max_instructions:
                raise Unsupported(f"more than {config.max_instructions} instructions (a long loop?)",
                                  self.user_location())
            inst = self.instructions[self.ip]
            self.ip += 1
            self.steps += 1
            if inst.lineno is not None:
                self.lineno = inst.lineno
            handler = self.dispatch.get(inst.name)
            try:
                if handler is None:
                    raise Unsupported(f"the bytecode {inst.name} is not supported yet")
                handler(self, inst)
            except Unsupported as exc:
                if exc.location is None:
                    exc.location = self.user_location()
                raise

    def total_steps(self) -> int:
        return self.steps

    def user_location(self, include_line: bool = True) -> str:
        where = f"{self.code.co_filename}:{self.lineno}"
        if include_line:
            text = linecache.getline(self.code.co_filename, self.lineno).strip()
            if text:
                return f"{where}  {text}"
        return where

    def push(self, vt: VariableTracker) -> None:
        self.stack.append(vt)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst: Instr) -> None:
        self.ip = self.labels[inst.arg]

    # Values ----------------------------------------------------------------------------------

    def binary_op(self, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        if op in INPLACE_FALLBACK and not (isinstance(a, NDArrayVariable) and not a.meta.is_scalar):
            if not isinstance(a, ListVariable):
                op = INPLACE_FALLBACK[op]
        if isinstance(a, NDArrayVariable) or isinstance(b, NDArrayVariable):
            return self.output.call_function(self, op, [a, b], {})
        if isinstance(a, _Sequence) or isinstance(b, _Sequence):
            return self._sequence_op(op, a, b)
        if a.is_python_constant() and b.is_python_constant():
            try:
                return wrap_constant(op(a.as_python_constant(), b.as_python_constant()))
            except Exception as exc:
                raise Unsupported(f"{op.__name__} on constants raised {type(exc).__name__}: {exc}") from None
        raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")

    def _sequence_op(self, op: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        """``+`` and ``*`` on tuples and lists (in place for lists built in this frame)."""
        if op in (operator.add, operator.iadd) and isinstance(a, _Sequence) and type(a) is type(b):
            if op is operator.iadd and isinstance(a, ListVariable):
                a.extend(b.unpack(self))
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
        raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()} is not supported")

    def load_argument(self, name: str, is_cell: bool) -> VariableTracker:
        if name in self.locals:
            return self.locals[name]
        if name in self.argnames and name not in self.deleted:
            vt = VariableBuilder(self, LocalSource(name, is_cell))(self.frame.f_locals[name])
            self.locals[name] = vt
            return vt
        raise Unsupported(f"local variable {name!r} is used before it is assigned (UnboundLocalError)")

    # Loads and stores --------------------------------------------------------------------------

    def LOAD_FAST(self, inst: Instr) -> None:
        self.push(self.load_argument(inst.arg, is_cell=False))

    LOAD_FAST_CHECK = LOAD_FAST

    def STORE_FAST(self, inst: Instr) -> None:
        value = self.pop()
        self.locals[inst.arg] = value
        self.deleted.discard(inst.arg)
        self.name_graph_value(value, inst.arg)

    def name_graph_value(self, value: VariableTracker, name: str) -> None:
        """The first local a computed array is stored in names its node (``var = ...`` gives
        ``var`` in the graph code, not ``mean_1``)."""
        if isinstance(value, NDArrayVariable) and value.node.op != "placeholder" and (
            not value.node.meta.get("named") and not name.startswith(".")
        ):
            self.output.graph.rename_node(value.node, name)
            value.node.meta["named"] = True

    def DELETE_FAST(self, inst: Instr) -> None:
        self.locals.pop(inst.arg, None)
        self.deleted.add(inst.arg)

    def LOAD_CONST(self, inst: Instr) -> None:
        self.push(wrap_constant(inst.arg))

    def LOAD_GLOBAL(self, inst: Instr) -> None:
        push_null, name = inst.arg
        if push_null:
            self.push(NullVariable())
        self.push(self.load_global(name))

    def load_global(self, name: str) -> VariableTracker:
        source = GlobalSource(name)
        if source in self.output.wrapped:
            return self.output.wrapped[source]
        if name in self.frame.f_globals:
            return VariableBuilder(self, source)(self.frame.f_globals[name])
        builtins_ns = self.frame.f_builtins
        if name not in builtins_ns:
            raise Unsupported(f"name {name!r} is not defined (NameError)")
        self.output.add_guard(Guard(source, "NOT_IN_GLOBALS", name))
        value = builtins_ns[name]
        vt = BuiltinVariable(value) if callable(value) else wrap_constant(value)
        self.output.wrapped[source] = vt
        return vt

    def LOAD_DEREF(self, inst: Instr) -> None:
        var = inst.arg
        if isinstance(var, CellVar):
            self.push(self.load_argument(var.name, is_cell=True))
            return
        self.push(self.load_free_variable(var.name))

    def load_free_variable(self, name: str) -> VariableTracker:
        index = self.code.co_freevars.index(name)
        source = ClosureSource(name, index)
        if source in self.output.wrapped:
            return self.output.wrapped[source]
        try:
            value = self.frame.closure[index].cell_contents
        except ValueError:
            raise Unsupported(f"free variable {name!r} is referenced before assignment") from None
        return VariableBuilder(self, source)(value)

    def STORE_DEREF(self, inst: Instr) -> None:
        if isinstance(inst.arg, FreeVar):
            raise Unsupported(f"assigning the nonlocal variable {inst.arg.name!r} (a side effect on a closure cell)")
        value = self.pop()
        self.locals[inst.arg.name] = value
        self.name_graph_value(value, inst.arg.name)

    def LOAD_CLOSURE(self, inst: Instr) -> None:
        self.push(CellVariable(self, inst.arg.name))

    def MAKE_FUNCTION(self, inst: Instr) -> None:
        code = self.pop().as_python_constant()
        closure = self.pop() if inst.arg & 0x08 else None
        if inst.arg & 0x07 or code.co_name not in COMPREHENSIONS:
            raise Unsupported(f"creating the function {code.co_name!r} inside a captured frame "
                              "(only comprehensions and generator expressions are inlined)")
        self.push(ComprehensionVariable(code, closure.items if closure is not None else []))

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        raise Unsupported("generator functions are not captured")

    def LOAD_ATTR(self, inst: Instr) -> None:
        self.push(self.pop().var_getattr(self, inst.arg))

    def LOAD_METHOD(self, inst: Instr) -> None:
        obj = self.pop()
        self.push(NullVariable())
        self.push(obj.var_getattr(self, inst.arg))

    def STORE_ATTR(self, inst: Instr) -> None:
        raise Unsupported(f"setting attribute {inst.arg!r} (side effects on objects are not replayed yet)")

    def STORE_GLOBAL(self, inst: Instr) -> None:
        raise Unsupported(f"assigning the global {inst.arg!r} (side effects on globals are not replayed yet)")

    # Calls -----------------------------------------------------------------------------------

    def PUSH_NULL(self, inst: Instr) -> None:
        self.push(NullVariable())

    def PRECALL(self, inst: Instr) -> None:
        pass

    def KW_NAMES(self, inst: Instr) -> None:
        self.kw_names = tuple(inst.arg)

    def CALL(self, inst: Instr) -> None:
        args = self.popn(inst.arg)
        second = self.pop()
        first = self.pop()
        if isinstance(first, NullVariable):
            fn = second
        else:
            fn, args = first, [second, *args]
        kwargs: dict[str, VariableTracker] = {}
        if self.kw_names:
            n = len(self.kw_names)
            kwargs = dict(zip(self.kw_names, args[-n:]))
            args = args[:-n]
            self.kw_names = ()
        self.push(fn.call_function(self, args, kwargs))

    def CALL_FUNCTION_EX(self, inst: Instr) -> None:
        kwargs_vt = self.pop() if inst.arg & 1 else None
        args_vt = self.pop()
        fn = self.pop()
        if self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()
        kwargs = {}
        if kwargs_vt is not None:
            if not isinstance(kwargs_vt, DictVariable):
                raise Unsupported("** arguments that are not a dict built in the frame")
            kwargs = dict(kwargs_vt.items)
        self.push(fn.call_function(self, args_vt.unpack(self), kwargs))

    # Operators ---------------------------------------------------------------------------------

    def BINARY_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(BINARY_OPS[inst.arg], a, b))

    def COMPARE_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(self.binary_op(COMPARE_OPS[inst.arg], a, b))

    def _unary(self, inst: Instr) -> None:
        a = self.pop()
        op = UNARY_OPS[inst.name]
        if isinstance(a, NDArrayVariable):
            self.push(self.output.call_function(self, op, [a], {}))
        else:
            self.push(wrap_constant(op(a.as_python_constant())))

    UNARY_NEGATIVE = UNARY_POSITIVE = UNARY_INVERT = _unary

    def UNARY_NOT(self, inst: Instr) -> None:
        self.push(ConstantVariable(not self.pop().truth()))

    def IS_OP(self, inst: Instr) -> None:
        b = self.pop()
        a = self.pop()
        self.push(ConstantVariable(self._is(a, b) != bool(inst.arg)))

    def _is(self, a: VariableTracker, b: VariableTracker) -> bool:
        if a.is_python_constant() and b.is_python_constant():
            return a.as_python_constant() is b.as_python_constant()
        if a is b:
            return True
        consts = [v for v in (a, b) if isinstance(v, ConstantVariable)]
        if consts and consts[0].value is None:
            return False  # a graph value or container is never None
        raise Unsupported(f"'is' between {a.describe()} and {b.describe()}")

    def CONTAINS_OP(self, inst: Instr) -> None:
        container = self.pop()
        item = self.pop()
        if not item.is_python_constant():
            raise Unsupported(f"'in' with {item.describe()}")
        value = item.as_python_constant()
        if isinstance(container, DictVariable):
            found = value in container.items
        else:
            found = any(v.is_python_constant() and v.as_python_constant() == value
                        for v in container.unpack(self))
        self.push(ConstantVariable(found != bool(inst.arg)))

    def BINARY_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        if isinstance(obj, NDArrayVariable):
            self.push(self.output.call_function(self, operator.getitem, [obj, key], {}))
        elif isinstance(obj, (_Sequence, DictVariable)):
            self.push(obj.getitem(self, key))
        else:
            self.push(self.binary_op(operator.getitem, obj, key))

    def STORE_SUBSCR(self, inst: Instr) -> None:
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, NDArrayVariable) and not obj.meta.is_scalar:
            self.output.call_function(self, operator.setitem, [obj, key, value], {})
        elif isinstance(obj, ListVariable):
            obj.check_mutable()
            obj.items[key.as_python_constant()] = value
        elif isinstance(obj, DictVariable) and obj.source is None:
            obj.items[key.as_python_constant()] = value
        else:
            raise Unsupported(f"item assignment on {obj.describe()}")

    # Building and unpacking --------------------------------------------------------------------

    def BUILD_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instr) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst: Instr) -> None:
        flat = self.popn(2 * inst.arg)
        self.push(DictVariable({k.as_python_constant(): v for k, v in zip(flat[::2], flat[1::2])}))

    def BUILD_CONST_KEY_MAP(self, inst: Instr) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(dict(zip(keys, self.popn(inst.arg)))))

    def BUILD_SLICE(self, inst: Instr) -> None:
        parts = self.popn(inst.arg)
        if not all(p.is_python_constant() for p in parts):
            raise Unsupported("a slice bound that is an array value (data-dependent shape)")
        self.push(ConstantVariable(slice(*(p.as_python_constant() for p in parts))))

    def BUILD_STRING(self, inst: Instr) -> None:
        self.push(ConstantVariable("".join(p.as_python_constant() for p in self.popn(inst.arg))))

    def FORMAT_VALUE(self, inst: Instr) -> None:
        spec = self.pop().as_python_constant() if (inst.arg & 0x04) else ""
        value = self.pop().as_python_constant()
        conversion = {1: str, 2: repr, 3: ascii}.get(inst.arg & 0x03)
        if conversion is not None:
            value = conversion(value)
        self.push(ConstantVariable(format(value, spec)))

    def LIST_APPEND(self, inst: Instr) -> None:
        value = self.pop()
        self.stack[-inst.arg].append(value)

    def LIST_EXTEND(self, inst: Instr) -> None:
        seq = self.pop()
        self.stack[-inst.arg].extend(seq.unpack(self))

    def MAP_ADD(self, inst: Instr) -> None:
        value = self.pop()
        key = self.pop()
        self.stack[-inst.arg].items[key.as_python_constant()] = value

    def LIST_TO_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    def DICT_UPDATE(self, inst: Instr) -> None:
        update = self.pop()
        if not isinstance(update, DictVariable):
            raise Unsupported("dict update from a value that is not a dict built in the frame")
        self.stack[-inst.arg].items.update(update.items)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst: Instr) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg} names (ValueError)")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst: Instr) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise Unsupported(f"unpacking {len(items)} values into {before + after}+ names (ValueError)")
        middle = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], middle, *items[len(items) - after:]]):
            self.push(item)

    # Stack -----------------------------------------------------------------------------------

    def POP_TOP(self, inst: Instr) -> None:
        self.pop()

    def COPY(self, inst: Instr) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: Instr) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    def NOP(self, inst: Instr) -> None:
        pass

    RESUME = COPY_FREE_VARS = MAKE_CELL = NOP

    # Control flow: only branches decided by constants (shapes, dtypes, Python scalars) ---------

    def JUMP_FORWARD(self, inst: Instr) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _pop_jump_if(self, inst: Instr) -> None:
        jump_when = inst.name.endswith("_TRUE")
        if self.pop().truth() == jump_when:
            self.jump(inst)

    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_FORWARD_IF_FALSE = _pop_jump_if
    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_FALSE = _pop_jump_if

    def _pop_jump_if_none(self, inst: Instr) -> None:
        value = self.pop()
        is_none = self._is(value, ConstantVariable(None))
        if is_none == inst.name.endswith("_IF_NONE"):
            self.jump(inst)

    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_FORWARD_IF_NOT_NONE = _pop_jump_if_none
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = _pop_jump_if_none

    def _jump_or_pop(self, inst: Instr) -> None:
        if self.stack[-1].truth() == (inst.name == "JUMP_IF_TRUE_OR_POP"):
            self.jump(inst)
        else:
            self.pop()

    JUMP_IF_TRUE_OR_POP = JUMP_IF_FALSE_OR_POP = _jump_or_pop

    def GET_ITER(self, inst: Instr) -> None:
        value = self.pop()
        self.push(value if isinstance(value, IteratorVariable) else IteratorVariable(value.unpack(self)))

    def FOR_ITER(self, inst: Instr) -> None:
        item = self.stack[-1].next()
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)

    def RETURN_VALUE(self, inst: Instr) -> None:
        self.return_value = self.pop()

    def LOAD_ASSERTION_ERROR(self, inst: Instr) -> None:
        raise Unsupported("a failing assert (the frame runs in plain Python so that it raises)")

    def RAISE_VARARGS(self, inst: Instr) -> None:
        raise Unsupported("raise statement (the frame runs in plain Python so that it raises)")


COMPREHENSIONS = ("<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>")


class CellVariable(VariableTracker):
    """A cell of the translating frame, captured by a comprehension (LOAD_CLOSURE)."""

    def __init__(self, tx: InstructionTranslator, name: str) -> None:
        self.tx = tx
        self.name = name

    def describe(self) -> str:
        return f"cell {self.name!r}"


class ComprehensionVariable(VariableTracker):
    """A comprehension or generator expression, created by MAKE_FUNCTION and called right away.

    Calling it inlines its bytecode into the calling frame's graph (`InliningTranslator`)."""

    def __init__(self, code: types.CodeType, cells: list[VariableTracker]) -> None:
        self.code = code
        self.cells = cells

    def describe(self) -> str:
        return f"{self.code.co_name} at {self.code.co_filename}:{self.code.co_firstlineno}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs or len(args) != self.code.co_argcount:
            raise Unsupported(f"unexpected call of {self.describe()}")
        inner = InliningTranslator(tx, self.code, args, self.cells)
        inner.run()
        if self.code.co_name == "<genexpr>":
            return IteratorVariable(inner.yielded)
        return inner.return_value


class InliningTranslator(InstructionTranslator):
    """Runs a comprehension's code inside its parent's translation: same graph, same guards.
    Free variables read the parent's cells; globals are the parent's."""

    def __init__(self, parent: InstructionTranslator, code: types.CodeType,
                 args: list[VariableTracker], cells: list[VariableTracker]) -> None:
        super().__init__(parent.frame, code, parent.output)
        self.parent = parent
        self.cells = {cell.name: cell for cell in cells if isinstance(cell, CellVariable)}
        self.locals = dict(zip(code.co_varnames, args))
        self.argnames = ()
        self.yielded: list[VariableTracker] = []

    def total_steps(self) -> int:
        return self.steps + self.parent.total_steps()

    def load_free_variable(self, name: str) -> VariableTracker:
        cell = self.cells.get(name)
        if cell is None:
            raise Unsupported(f"free variable {name!r} of {self.code.co_name}")
        owner = cell.tx
        if isinstance(owner, InliningTranslator) and name not in owner.locals:
            return owner.load_free_variable(name)
        return owner.load_argument(name, is_cell=True)

    def load_global(self, name: str) -> VariableTracker:
        return self.parent.load_global(name)

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        self.push(ConstantVariable(None))  # the value sent by the first next(), popped next

    def YIELD_VALUE(self, inst: Instr) -> None:
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))


def _dispatch_table(cls: type) -> dict[str, Callable]:
    return {name: getattr(cls, name) for name in dir(cls) if name.isupper() and callable(getattr(cls, name))}


InstructionTranslator.dispatch = _dispatch_table(InstructionTranslator)
InliningTranslator.dispatch = _dispatch_table(InliningTranslator)


def _graph_values(vt: VariableTracker, found: list[NDArrayVariable]) -> list[NDArrayVariable]:
    if isinstance(vt, NDArrayVariable):
        found.append(vt)
    elif isinstance(vt, _Sequence) and vt.source is None:
        for item in vt.items:
            _graph_values(item, found)
    elif isinstance(vt, DictVariable) and vt.source is None:
        for item in vt.items.values():
            _graph_values(item, found)
    return found


def trace_frame(frame: Any, backend: Callable) -> CompiledFrame | None:
    """Translate one frame. None: nothing to compile. Raises Unsupported when it cannot."""
    started = time.perf_counter()
    tx = InstructionTranslator(frame, frame.f_code, OutputGraph(frame.f_code.co_name, backend))
    tx.run()
    return_value = tx.return_value
    location = tx.user_location()
    single = isinstance(return_value, NDArrayVariable) and return_value.node.op != "placeholder"
    result = tx.output.compile(_graph_values(return_value, []), started, single_output=single)
    if result is None:
        return None
    try:
        new_code = transform_code(tx.code, result, return_value, tx.lineno)
    except Unsupported as exc:
        exc.location = exc.location or location
        raise
    check_fn = build_check_fn(result.guards, list(tx.argnames), tx.code.co_name)
    check_fn.graph_module = result.graph_module
    result.compile_seconds = time.perf_counter() - started
    return CompiledFrame(check_fn=check_fn, code=new_code, original_code=tx.code, result=result)
