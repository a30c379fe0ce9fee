"""Functions made and called in the traced code, as the translator sees them.

* `FunctionSpec` / `spec_for_function`: what inlining a call needs to know about a real function
  (its code, signature, and how to read its defaults, closure cells and globals, with the
  Sources that guard them); `bind_arguments` binds a call's arguments as Python does. The
  translator inlines the call (`InstructionTranslator.inline_call`): the callee's NumPy
  operations are recorded in the caller's graph, every value it read is guarded. When the
  callee cannot be captured (a print, a data-dependent branch, a skipped module, recursion past
  `MAX_INLINE_DEPTH`), `Unsupported` propagates to the caller's CALL instruction: the graph
  breaks at the call site and the callee runs as a frame of its own.
* `NestedFunctionVariable` (``def``/``lambda`` in the traced code) and `ComprehensionVariable`:
  called, they are inlined; after a graph break they are made again (`rebuild_function`) from
  their code, defaults and cells: the frame's own cells (`CellVariable`) or new cells holding
  the last values of an inlined call's variables (`EscapedCellVariable`).
* `Home`: the module a function's code belongs to (where it reads its globals).
* `GeneratorVariable`: a generator expression's iterator, traced only as far as the items asked
  for (its translator stops at each yield by raising `Yielded`).
* (3.10) `HeldMaker`/`HeldValue`: `instructions.Held`, traced in a resume function's prologue.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from bytecode import CellVar, FreeVar

from .. import compat
from .. import instructions as ins
from ..exc import Unsupported
from ..guards import Guard
from ..source import AttrSource, GetItemSource, Source
from .base import VariableTracker
from .builder import VariableBuilder, wrap_constant
from .callables import BuiltinVariable
from .constant import user_error
from .containers import DictVariable, IteratorVariable, TupleVariable, drain


__all__ = ["FunctionSpec", "Home", "spec_for_function", "bind_arguments", "MAX_INLINE_DEPTH",
           "NEVER_INLINED", "NestedFunctionVariable", "ComprehensionVariable", "CellVariable",
           "EscapedCellVariable", "GeneratorVariable", "Yielded", "HeldMaker", "rebuild_function",
           "escaped_cells"]

#: Calls nested deeper than this are not inlined (recursion ends in a graph break).
MAX_INLINE_DEPTH = 12

#: Code flags of functions never inlined: generator, coroutine, iterable coroutine, async gen.
NEVER_INLINED = 0x20 | 0x80 | 0x100 | 0x200


class Home(NamedTuple):
    """The module a function's code belongs to, as the translator reads it; each None: the
    compiled frame's own module."""

    #: global name -> tracker (guarded through the function's ``__globals__``)
    load_global: Callable[[str], VariableTracker] | None
    #: the ``__globals__`` of functions this code makes
    namespace: dict | None
    #: its ``__name__`` (warnings from its statements name it)
    module: str | None


@dataclass
class FunctionSpec:
    """What the inliner needs to know about the function being called."""

    code: types.CodeType
    name: str
    signature: inspect.Signature
    #: parameter name -> tracker of its default (made on first use, so unused defaults get no guard)
    defaults: dict[str, Callable[[], VariableTracker]] = field(default_factory=dict)
    #: free variable name -> tracker of the cell's contents (made on first read)
    free: dict[str, Callable[[], VariableTracker]] = field(default_factory=dict)
    #: its module's globals (None: the compiled frame's own)
    home: Home = Home(None, None, None)


def spec_for_function(tx, fn: types.FunctionType,
                      source: Source | None) -> FunctionSpec:
    """A `FunctionSpec` for a real function object. `source` (where the function was read from)
    lets its defaults, closure contents and foreign globals be guarded; without it, only what
    needs no guard can be read."""
    code = fn.__code__
    try:
        signature = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError) as exc:
        raise Unsupported(f"the signature of {fn.__qualname__} cannot be read: {exc}") from None
    spec = FunctionSpec(code, fn.__qualname__, signature)

    def wrap(value: Any, value_source: Source | None, what: str):
        if value_source is not None:
            return lambda: VariableBuilder(tx, value_source)(value)
        if isinstance(value, (int, float, complex, str, bytes, bool, type(None))):
            return lambda: wrap_constant(value)
        raise Unsupported(f"{what} of {fn.__qualname__} cannot be guarded (the function has no "
                          "source to read it through)")

    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    defaults = fn.__defaults__ or ()
    first_default = len(positional) - len(defaults)
    for i, param in enumerate(positional[first_default:]):
        src = GetItemSource(AttrSource(source, "__defaults__"), i) if source else None
        spec.defaults[param.name] = _deferred(wrap, defaults[i], src, f"the default of {param.name}")
    for name, value in (fn.__kwdefaults__ or {}).items():
        src = GetItemSource(AttrSource(source, "__kwdefaults__"), name) if source else None
        spec.defaults[name] = _deferred(wrap, value, src, f"the default of {name}")
    root = tx.root()
    for i, name in enumerate(code.co_freevars):
        cell = fn.__closure__[i]
        own = root.own_cell(cell) if source is not None else None
        if own is not None:
            # One of the frame's own cells (a function made before a graph break closes over
            # the resume function's cells): its current value is the frame's, which this trace
            # may have changed (``scale = 4.0`` then ``f(x)``), not the cell's contents now.
            cell_source = GetItemSource(AttrSource(source, "__closure__"), i)
            spec.free[name] = _deferred(_own_cell, tx, cell_source, own)
            continue
        src = AttrSource(GetItemSource(AttrSource(source, "__closure__"), i), "cell_contents") if source else None
        spec.free[name] = _deferred(_cell_contents, wrap, cell, src, name)
    module = fn.__globals__.get("__name__")
    module = module if isinstance(module, str) else None
    spec.home = Home(None, None, module)
    if fn.__globals__ is not tx.root().frame.f_globals:
        if source is None:
            raise Unsupported(f"{fn.__qualname__} comes from another module and was not read "
                              "through a guardable source")
        spec.home = Home(_foreign_globals(tx, fn, AttrSource(source, "__globals__")),
                         fn.__globals__, module)
    return spec


def _deferred(make, *args):
    """Call `make(*args)` to get the tracker factory only when the value is first needed: errors
    (an unguardable value) are raised then, not for values the callee never reads."""
    def get():
        return make(*args)()
    return get


def _own_cell(tx, cell_source: Source, own):
    """Read a closure cell that is the frame's own cell variable, through the frame (guarded:
    the function's cell is that very cell on later calls too)."""
    frame_source, read = own
    tx.output.add_guard(Guard(cell_source, "SAME_OBJECT", frame_source))
    return read


def _cell_contents(wrap, cell, src, name):
    try:
        value = cell.cell_contents
    except ValueError:
        raise user_error(NameError, f"free variable {name!r} referenced before assignment "
                         "in enclosing scope") from None
    return wrap(value, src, f"the closure variable {name}")


def _foreign_globals(tx, fn, globals_source: Source):
    namespace = fn.__globals__

    def load(name: str):
        if name in namespace:
            return VariableBuilder(tx, GetItemSource(globals_source, name))(namespace[name])
        builtins_ns = namespace.get("__builtins__", __builtins__)
        if isinstance(builtins_ns, types.ModuleType):
            builtins_ns = vars(builtins_ns)
        if name not in builtins_ns:
            raise user_error(NameError, f"name {name!r} is not defined")
        tx.output.add_guard(Guard(globals_source, "NOT_IN_DICT", name))
        value = builtins_ns[name]
        return BuiltinVariable(value) if callable(value) else wrap_constant(value)

    return load


def bind_arguments(spec: FunctionSpec, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> dict[str, VariableTracker]:
    """The callee's parameters bound to a call's arguments, exactly as Python binds them
    (positional, keyword, defaults, ``*args``, ``**kwargs``); a call Python would reject raises
    the user's TypeError (in plain Python, after the graph breaks)."""
    try:
        bound = spec.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise user_error(TypeError, f"{spec.name}() {exc}") from None
    local_values: dict[str, VariableTracker] = {}
    for name, param in spec.signature.parameters.items():
        if name in bound.arguments:
            value = bound.arguments[name]
            if param.kind is param.VAR_POSITIONAL:
                value = TupleVariable(list(value))
            elif param.kind is param.VAR_KEYWORD:
                value = DictVariable(dict(value))
        elif param.kind is param.VAR_POSITIONAL:
            value = TupleVariable([])
        elif param.kind is param.VAR_KEYWORD:
            value = DictVariable({})
        elif name in spec.defaults:
            value = spec.defaults[name]()
        else:
            # (3.13's Signature.bind puts a keyword named like a positional-only parameter into
            # **kwargs without noticing the parameter is missing: ``f(something=42)`` for
            # ``def f(something, /, **kwargs)``; CPython's test_positional_only_arg)
            raise user_error(TypeError, f"{spec.name}() missing 1 required positional argument: "
                                        f"{name!r}")
        # (inspect calls a comprehension's implicit ".0" argument "implicit0")
        local_values[".0" if name == "implicit0" and ".0" in spec.code.co_varnames else name] = value
    return local_values


class HeldMaker(VariableTracker):
    """(3.10) `instructions.Held`, the class `null_under_top` calls to put a NULL under a
    callable: the prologue of a resume function runs it, and is traced."""

    def describe(self) -> str:
        return "npdynamo's NULL maker"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return HeldValue(args[0])


class HeldValue(VariableTracker):
    """(3.10) ``Held(f)``: LOAD_METHOD ``value`` on it pushes NULL and f."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value

    def describe(self) -> str:
        return f"{self.value.describe()} held for a call"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return self.value

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_const(ins.Held))
        codegen.reconstruct(self.value)
        codegen.extend(ins.call(1))


class CellVariable(VariableTracker):
    """A cell of the translating frame, captured by a comprehension (LOAD_CLOSURE)."""

    def __init__(self, tx, name: str) -> None:
        self.tx = tx
        self.name = name

    def describe(self) -> str:
        return f"cell {self.name!r}"


class ComprehensionVariable(VariableTracker):
    """A comprehension or generator expression, created by MAKE_FUNCTION and called right away.

    Calling it inlines its bytecode into the calling frame's graph (`InstructionTranslator.inline_translator`)."""

    def __init__(self, tx, code: types.CodeType,
                 cells: list[VariableTracker]) -> None:
        self.home = tx.home()  # (the module of the code that made it)
        self.code = code
        self.cells = cells

    def describe(self) -> str:
        return f"{self.code.co_name} at {self.code.co_filename}:{self.code.co_firstlineno}"

    def reconstruct(self, codegen) -> None:
        # After a graph break (e.g. a print inside it) the comprehension runs as its own frame.
        rebuild_function(codegen, self.code, self.cells, self.home)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if kwargs or len(args) != self.code.co_argcount:
            raise Unsupported(f"unexpected call of {self.describe()}")
        inner = tx.inline_translator(self.code, dict(zip(self.code.co_varnames, args)),
                                     self.cells, home=self.home)
        if self.code.co_name == "<genexpr>":
            inner.lazy = True  # (traced as its items are asked for)
            return GeneratorVariable(self, args[0], inner)
        inner.run()
        return inner.return_value


class NestedFunctionVariable(VariableTracker):
    """A function made by ``def`` or ``lambda`` in the traced code (MAKE_FUNCTION): calling it
    inlines it; after a graph break it is made again from its code, defaults and cells, once
    (`Codegen.reconstruct`: every use at the break gets the same function object)."""

    has_identity = True

    def __init__(self, tx, code: types.CodeType, defaults, kwdefaults,
                 annotations, cells: list[VariableTracker]) -> None:
        self.tx = tx
        self.home = tx.home()  # (the module of the code that made it: its ``__globals__``)
        self.code = code
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.annotations = annotations
        self.cells = cells

    def describe(self) -> str:
        return (f"function {compat.qualname(self.code)} made at "
                f"{self.code.co_filename}:{self.code.co_firstlineno}")

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        spec = FunctionSpec(self.code, compat.qualname(self.code), self._signature(),
                            home=self.home)
        defaults = self.defaults.unpack(tx) if self.defaults is not None else []
        positional = [p for p in spec.signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for param, value in zip(positional[len(positional) - len(defaults):], defaults):
            spec.defaults[param.name] = (lambda v=value: v)
        if self.kwdefaults is not None:
            for name, value in self.kwdefaults.items.items():
                spec.defaults[name] = (lambda v=value: v)
        return tx.inline_call(spec, args, kwargs, cells=self.cells)

    def _signature(self) -> inspect.Signature:
        # A stand-in function with the same code gives the exact signature (defaults are bound
        # from the trackers above, so stand-in defaults only mark which parameters have one).
        n_defaults = len(self.defaults.items) if self.defaults is not None else 0
        kw = dict.fromkeys(self.kwdefaults.items) if self.kwdefaults is not None else None
        closure = tuple(types.CellType() for _ in self.code.co_freevars) or None
        stand_in = types.FunctionType(self.code, {}, None, (None,) * n_defaults or None, closure)
        stand_in.__kwdefaults__ = kw
        return inspect.signature(stand_in)

    def reconstruct(self, codegen) -> None:
        rebuild_function(codegen, self.code, self.cells, self.home,
                          (self.defaults, self.kwdefaults, self.annotations))


def rebuild_function(codegen, code: types.CodeType, cells: list, home: Home,
                      parts: tuple = (None, None, None)) -> None:
    """Push a new function for `code`, as the MAKE_FUNCTION that made it in the trace did:
    `parts` (defaults, keyword defaults, annotations: trackers or None), closing over `cells`
    (the frame's own, or those of inlined calls that have returned: `_push_cell`), with the
    globals of `home`. MAKE_FUNCTION would give it the frame's globals: a function made by a
    callee from another module is made by `instructions.function_in` instead, which gives it
    that module's (and so its builtins and ``__module__``)."""
    foreign = home.namespace is not None
    if foreign:
        codegen.extend(ins.null_before() + ins.load_const(ins.function_in) + ins.null_after()
                       + ins.load_const(code) + ins.load_const(home.namespace))
    flags = 0
    for bit, part in zip((0x01, 0x02, 0x04), parts):
        if part is not None:
            codegen.reconstruct(part)
            flags |= bit
        elif foreign:
            codegen.extend(ins.load_const(None))
    if cells:
        for cell in cells:
            _push_cell(codegen, code, cell)
        codegen.extend(ins.build_tuple(len(cells)))
        flags |= 0x08
    elif foreign:
        codegen.extend(ins.load_const(None))
    codegen.extend(ins.call(6) if foreign else ins.make_function(code, flags))


def _cell_owner(cell: VariableTracker) -> CellVariable | None:
    """The cell variable `cell` is (a free variable of inlined code is its maker's cell): of
    the frame, or of an inlined call; None: a cell of a real function's closure."""
    while (isinstance(cell, CellVariable) and cell.tx is not cell.tx.root()
           and cell.name not in cell.tx.code.co_cellvars):
        cell = cell.tx.cells.get(cell.name)
    return cell if isinstance(cell, CellVariable) else None


def _push_cell(codegen, code: types.CodeType, cell: VariableTracker) -> None:
    """Push the cell object a function being rebuilt closes over: a cell of the frame itself,
    or the cell of a variable of an inlined call (made anew: the call ran inside the graph)."""
    owner = _cell_owner(cell)
    if owner is None:
        raise Unsupported(f"cannot rebuild {compat.qualname(code)} (it closes over a variable "
                          "of a function called in the trace)")
    if owner.tx is not owner.tx.root():
        codegen.reconstruct(owner.tx.escaped_cell(owner.name))
        return
    kind = FreeVar if owner.name in owner.tx.code.co_freevars else CellVar
    codegen.extend(ins.load_closure(kind(owner.name)))


class EscapedCellVariable(VariableTracker):
    """The cell of a cell variable of an inlined call that returned, which a function made in
    it still closes over: rebuilt as a new cell holding the variable's last value (nothing can
    change it any more: the call is over, and an inlined function that assigns a nonlocal
    variable is not traced)."""

    has_identity = True  # (one cell, shared by every function that closes over it)

    def __init__(self, tx, name: str) -> None:
        self.tx = tx
        self.name = name
        self.source = None

    def describe(self) -> str:
        return f"cell {self.name!r} of {compat.qualname(self.tx.code)}"

    def value(self) -> VariableTracker | None:
        """The variable's last value; None when it was unbound."""
        return self.tx.locals.get(self.name)

    def reconstruct(self, codegen) -> None:
        value = self.value()
        codegen.extend(ins.with_null(ins.load_const(types.CellType)))
        if value is not None:
            codegen.reconstruct(value)
        codegen.extend(ins.call(0 if value is None else 1))


def escaped_cells(cells: list) -> list[VariableTracker]:
    """The values in the cells of inlined calls that `cells` (a function's closure) hold."""
    owners = [_cell_owner(cell) for cell in cells]
    return [owner.tx.locals[owner.name] for owner in owners
            if owner is not None and owner.tx is not owner.tx.root()
            and owner.name in owner.tx.locals]


class Yielded(Exception):
    """A lazily traced generator expression produced an item (not an error): raised by its
    translator's YIELD_VALUE, caught by `GeneratorVariable.next`."""


class GeneratorVariable(IteratorVariable):
    """A generator expression's iterator. Its code is traced only as far as the items asked
    for, as in Python: ``any(f(v) for v in xs)`` stops at the first true item, and the side
    effects and errors of later items never happen. Not started yet, it is rebuilt as a new
    generator over the rebuilt iterable after a graph break."""

    has_identity = True  # (rebuilt once: every use at a break gets the same generator)

    def __init__(self, function: "ComprehensionVariable", iterable: VariableTracker,
                 inner) -> None:
        super().__init__(inner.yielded, kind=types.GeneratorType)
        self.function = function
        self.iterable = iterable
        self.inner = inner
        self.started = False

    def describe(self) -> str:
        return f"generator of {self.function.describe()}"

    def next(self) -> VariableTracker | None:
        if self.index >= len(self.items) and self.inner.return_value is None:
            self.started = True
            try:
                self.inner.run()
            except Yielded:
                pass
        return super().next()

    def unpack(self, tx) -> list[VariableTracker]:
        return drain(self)

    def reconstruct(self, codegen) -> None:
        if self.started:
            raise Unsupported(f"cannot rebuild a started {self.describe()}")
        self.function.reconstruct(codegen)
        codegen.reconstruct(self.iterable)
        codegen.extend(ins.call_self_form())  # (the function below its one argument)
