"""Python constants: literals, and values read from guarded sources (scalars, strings, dtypes,
ranges, slices). Operations on constants run eagerly at trace time, through `run_user_op`: an
exception there is the user's own error (`UserCodeError`: the frame runs in plain Python, which
raises it), never an npdynamo internal error."""

from __future__ import annotations

import operator
import types
import weakref
from typing import Any

import numpy as np

from fx.names import dtype_text
from fx.symbolic import MIN_DYNAMIC_SIZE, Sym, expression

from .. import instructions as ins
from ..exc import Unsupported, UserCodeError
from ..guards import Guard
from .base import VariableTracker, made_while_tracing, note_made


__all__ = ["ConstantVariable", "run_user_op", "user_error"]


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis), range, slice,
              np.dtype, np.generic, type, types.FunctionType, types.BuiltinFunctionType,
              types.ModuleType, types.CodeType, np.ufunc)


def _immutable(value: Any) -> bool:
    """Whether `value` may be a constant of generated code (nothing can change it)."""
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return isinstance(value, _IMMUTABLE) and not isinstance(value, np.ndarray)


def user_error(error: type[BaseException], message: str) -> UserCodeError:
    """The user's code raises `error` here; plain Python must run the frame to raise it."""
    return UserCodeError(f"the code raises {error.__name__}: {message} (the frame runs in plain "
                         "Python, which raises it)", error)


def run_user_op(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``: an operation of the user's code on Python constants, run now.

    An exception is the user's (`UserCodeError`). A floating-point warning (NumPy scalars) is
    turned into an error while it runs (``np.errstate`` is per thread): the result would be baked
    into the compiled code and the warning shown only once, so such code is not captured.
    """
    try:
        with np.errstate(all="raise"):
            result = fn(*args, **kwargs)
        note_made(result, *args, *kwargs.values(), getattr(fn, "__self__", None))
        return result
    except FloatingPointError as exc:
        error, message = None, str(exc)
    except Exception as exc:  # noqa: BLE001 - the user's own error, raised again by plain Python
        error, message = type(exc), str(exc)
    # Raised outside the handler: no __context__ holding the failed operation's traceback (its
    # frames lead back to the translator: a reference cycle).
    if error is None:
        raise Unsupported(f"a computation on constants warns or raises ({message}); it is left "
                          "to plain Python, where NumPy's error state decides")
    raise user_error(error, message)


class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, source=None) -> None:
        self.value = value
        self.source = source
        #: (fn, args, kwargs) of the pure call on immutable constants that made a mutable
        #: value (``np.errstate(all="ignore")``): the compiled code makes a new one the same way
        self.made_by: tuple | None = None

    def describe(self) -> str:
        return f"constant {self.value!r}"

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def truth(self) -> bool:
        if isinstance(self.value, (np.ndarray, np.generic)):
            return super().truth()
        return bool(self.value)

    def unpack(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, list, range, str, bytes, frozenset, set)):
            return [ConstantVariable(v) for v in self.value]
        if isinstance(self.value, (bool, int, float, complex, type(None), slice, np.dtype)):
            raise user_error(TypeError, f"{type(self.value).__name__!r} object is not iterable")
        return super().unpack(tx)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not callable(self.value):
            raise user_error(TypeError, f"{type(self.value).__name__!r} object is not callable")
        return super().call_function(tx, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.value, (int, float, complex, np.dtype, slice, range, np.generic, str,
                                   bytes, tuple, frozenset, set)) and not name.startswith("_"):
            attr = run_user_op(getattr, self.value, name)
            if callable(attr):
                # (upward: callables build on constants)
                from .callables import BoundConstantMethodVariable

                return BoundConstantMethodVariable(self.value, name)
            return ConstantVariable(attr)
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        if isinstance(self.value, slice):  # a size in a slice is fixed to its value (a fact)

            parts = (self.value.start, self.value.stop, self.value.step)
            if any(isinstance(v, Sym) for v in parts):  # (else kept: one object, as in Python)
                self.value = slice(*(operator.index(v) if isinstance(v, Sym) else v
                                     for v in parts))
        if not _immutable(self.value) and self.made_by is not None:
            fn, args, kwargs = self.made_by
            codegen.extend(ins.with_null(ins.load_const(fn)))
            for value in (*args, *kwargs.values()):
                codegen.extend(ins.load_const(value))
            codegen.extend(ins.call_sequence(len(args) + len(kwargs), tuple(kwargs)))
            return
        if not _immutable(self.value):
            # A constant of the code is shared by every call: a list, a dict or an iterator made
            # while tracing would carry one call's changes into the next.
            raise Unsupported(f"cannot rebuild {self.describe()} (a mutable object made while "
                              "tracing) in the compiled code")
        if made_while_tracing(self.value):
            # Made anew on every call, as by the plain function (``a[:3] + b[3:] is a`` is
            # False there): the two halves are constants, their sum a new object.
            codegen.extend(ins.load_const(self.value[:1]))
            codegen.extend(ins.load_const(self.value[1:]))
            codegen.extend(ins.binary_add())
            return
        if isinstance(self.value, np.dtype):
            text = dtype_text(self.value)
            if text is not None:
                # Made by the call ``np.dtype(text)`` (the very object), as the plain function
                # makes it on each run: as a constant of the code it would have one reference
                # more than in plain Python for as long as the code lives (sys.getrefcount;
                # NumPy's TestBincount::test_dtype_reference_leaks)
                codegen.extend(ins.with_null(ins.load_const(np.dtype)) + ins.load_const(text)
                               + ins.call(1))
                return
        codegen.extend(ins.load_const(self.value))


class UnspecializedScalarVariable(VariableTracker):
    """A Python int or float argument that is a graph input instead of a constant (its value
    changed between calls, see `dynamo.dynamic_shapes.scalar_is_dynamic`): arithmetic with
    arrays uses it as an input of the graph (guarded by type only); any use that needs its
    value in Python (a shape, an index, a loop count, a print) fixes it: the value is guarded
    and it acts as a constant from then on. An int of at least 2 stays symbolic in int
    arithmetic, comparisons and truth tests (`symbolic`): ``n - 1`` is a `SymIntVariable` and
    ``n % 10 == 0`` records a fact, not the value."""

    def __init__(self, node, value: Any, source, output) -> None:
        self.node = node
        self.value = value
        self.source = source
        self._output = weakref.ref(output)  # (the output graph holds this tracker: no cycle)
        self._fixed = False
        #: its ShapeEnv symbol once a use made one (`symbolic`): graph operations' rules then
        #: see it as a symbolic size
        self.sym: Any = None

    def describe(self) -> str:
        return f"{type(self.value).__name__} argument (a graph input)"

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        if not self._fixed:
            self._fixed = True
            self._output().add_guard(Guard(self.source, "CONSTANT_MATCH",
                                           (type(self.value), self.value)))
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def can_be_symbolic(self) -> bool:
        return not self._fixed and type(self.value) is int and self.value >= MIN_DYNAMIC_SIZE

    def symbolic(self) -> Any:
        """This int as a symbol of the trace's ShapeEnv (`OutputGraph.int_symbol`), or None
        when it cannot be one (a float, a fixed value, an int below 2)."""
        if not self.can_be_symbolic():
            return None
        if self.sym is None:
            self.sym = self._output().int_symbol(self.source, self.value)
        return self.sym

    def truth(self) -> bool:
        sym = self.symbolic()
        return bool(sym) if sym is not None else bool(self.as_python_constant())

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return ConstantVariable(self.as_python_constant(), source=self.source).var_getattr(tx, name)

    def reconstruct(self, codegen) -> None:
        self.source.reconstruct(codegen)


class SymIntVariable(VariableTracker):
    """An int known only symbolically (a `fx.symbolic.Sym`): ``x.shape[0]`` of an array with
    a dynamic dimension, an int argument whose value changed between compiles
    (`OutputGraph.int_symbol`), and arithmetic on them. Arithmetic and comparisons with
    ints and other sizes stay symbolic (`operators.binary_op`); as an argument of a
    graph operation it becomes graph nodes that read the size at run time
    (`OutputGraph.size_node`); after a graph break or at a return it is recomputed from the
    inputs (`reconstruct`). Every other use (printing, a dict key, a call traced into Python)
    fixes it to its value, with a guard (a fact)."""

    def __init__(self, sym: Any) -> None:
        self.sym = sym

    def describe(self) -> str:
        return f"size {self.sym}"

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return operator.index(self.sym)

    def python_type(self) -> type:
        return int

    def truth(self) -> bool:
        return bool(self.sym)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def reconstruct(self, codegen) -> None:
        """Recompute the value from the inputs it is made of (``operator.sub(n, 1)``,
        ``x.shape[0] // 2``), with no fact: the transformed code rebuilds every value before it
        stores anything (`codegen`), so the inputs are still the frame's own."""

        tree = expression(self.sym, lambda k: ("input", k), lambda fn, *args: (fn, args))
        _emit_size(codegen, self.sym.env, tree)


def _emit_size(codegen, env: Any, tree: Any) -> None:
    """Bytecode for a size expression of `fx.symbolic.expression`: ints, ``("input", k)`` for
    symbol k (its argument, or its array's ``.shape[dim]``) and ``(fn, args)`` calls."""

    if isinstance(tree, int):
        codegen.extend(ins.load_const(tree))
    elif tree[0] == "input":
        k = tree[1]
        if k in env.data_sizes:
            raise Unsupported("a size that depends on the data (the length of x[mask]) is "
                              "needed after the graph")
        source, dim = env.origin_key(k)
        source.reconstruct(codegen)
        if dim is not None:
            codegen.extend(ins.load_attr("shape") + ins.load_const(dim) + ins.binary_subscr())
    else:
        fn, args = tree
        codegen.extend(ins.with_null(ins.load_const(fn)))
        for arg in args:
            _emit_size(codegen, env, arg)
        codegen.extend(ins.call(len(args)))
