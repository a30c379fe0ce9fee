"""Inlining: a call to a user's Python function is traced into the caller's graph.

In: the translator making the call, a description of the function (`FunctionSpec`: its code,
how to read its defaults, closure cells and globals, and with which Sources to guard them) and the
call's arguments as VariableTrackers. Out: the VariableTracker of the return value, with every
NumPy operation of the callee recorded in the caller's graph and every value it read guarded.

Called by the function trackers (`variables.callables.UserFunctionVariable`, bound methods, and
`symbolic_convert.NestedFunctionVariable` for functions made by ``def``/``lambda`` inside the
traced code). Arguments are bound exactly as Python binds them (positional, keyword, defaults,
``*args``, ``**kwargs``) by `inspect.Signature.bind`; a call Python would reject raises the user's
TypeError in plain Python. When the callee cannot be captured (a print, a data-dependent branch,
a skipped module, recursion past `MAX_INLINE_DEPTH`), `Unsupported` propagates to the caller's
CALL instruction: the graph breaks at the call site and the callee runs as a frame of its own
(which the hook compiles separately).
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from .exc import Unsupported
from .source import AttrSource, GetItemSource, Source

if TYPE_CHECKING:
    from .symbolic_convert import InstructionTranslator
    from .variables.base import VariableTracker

__all__ = ["FunctionSpec", "Home", "inline_call", "spec_for_function", "MAX_INLINE_DEPTH"]

#: Calls nested deeper than this are not inlined (recursion ends in a graph break).
MAX_INLINE_DEPTH = 12

_NEVER_INLINED = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async gen


class Home(NamedTuple):
    """The module a function's code belongs to, as the translator reads it; each None: the
    compiled frame's own module."""

    #: global name -> tracker (guarded through the function's ``__globals__``)
    load_global: Callable[[str], "VariableTracker"] | None
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
    defaults: dict[str, Callable[[], "VariableTracker"]] = field(default_factory=dict)
    #: free variable name -> tracker of the cell's contents (made on first read)
    free: dict[str, Callable[[], "VariableTracker"]] = field(default_factory=dict)
    #: its module's globals (None: the compiled frame's own)
    home: Home = Home(None, None, None)


def spec_for_function(tx: "InstructionTranslator", fn: types.FunctionType,
                      source: Source | None) -> FunctionSpec:
    """A `FunctionSpec` for a real function object. `source` (where the function was read from)
    lets its defaults, closure contents and foreign globals be guarded; without it, only what
    needs no guard can be read."""
    from .variables.builder import VariableBuilder, wrap_constant

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
    from .guards import Guard

    frame_source, read = own
    tx.output.add_guard(Guard(cell_source, "SAME_OBJECT", frame_source))
    return read


def _cell_contents(wrap, cell, src, name):
    try:
        value = cell.cell_contents
    except ValueError:
        from .variables.constant import user_error

        raise user_error(NameError, f"free variable {name!r} referenced before assignment "
                         "in enclosing scope") from None
    return wrap(value, src, f"the closure variable {name}")


def _foreign_globals(tx, fn, globals_source: Source):
    from .guards import Guard
    from .variables.builder import VariableBuilder, wrap_constant
    from .variables.callables import BuiltinVariable

    namespace = fn.__globals__

    def load(name: str):
        if name in namespace:
            return VariableBuilder(tx, GetItemSource(globals_source, name))(namespace[name])
        builtins_ns = namespace.get("__builtins__", __builtins__)
        if isinstance(builtins_ns, types.ModuleType):
            builtins_ns = vars(builtins_ns)
        if name not in builtins_ns:
            from .variables.constant import user_error

            raise user_error(NameError, f"name {name!r} is not defined")
        tx.output.add_guard(Guard(globals_source, "NOT_IN_DICT", name))
        value = builtins_ns[name]
        return BuiltinVariable(value) if callable(value) else wrap_constant(value)

    return load


def inline_call(tx: "InstructionTranslator", spec: FunctionSpec, args: list["VariableTracker"],
                kwargs: dict[str, "VariableTracker"], cells: list = ()) -> "VariableTracker":
    """Trace a call of `spec` with these arguments inside `tx`'s graph; return its result.
    `cells`: the caller's cells a function made in the traced code closes over."""
    from .symbolic_convert import InliningTranslator
    from .variables.constant import user_error
    from .variables.containers import DictVariable, TupleVariable

    if spec.code.co_flags & _NEVER_INLINED:
        raise Unsupported(f"call to the generator or coroutine function {spec.name} is not inlined")
    from .convert_frame import skip_reason

    skipped = skip_reason(spec.code)
    if skipped is not None:
        raise Unsupported(f"call to {spec.name}: {skipped} is not traced")
    if tx.inline_depth() >= MAX_INLINE_DEPTH:
        raise Unsupported(f"call to {spec.name} nested {MAX_INLINE_DEPTH} calls deep (recursion?)")
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
    inner = InliningTranslator(tx, spec.code, local_values, cells, free=spec.free,
                               home=spec.home)
    inner.run()
    return inner.return_value
