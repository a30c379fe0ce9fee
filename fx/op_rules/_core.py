"""The machinery shared by all rule modules: errors, the registry, stand-ins and shape helpers.

A *rule* receives a `Call` (the NumPy callable or method name, its arguments with traced values as
`ArrayMeta`) and returns the abstract result. Rules get dtypes, scalar-vs-array and NumPy's own
argument validation by running the real NumPy callable on *stand-ins*, never on data:

* ``shrink``: every traced array becomes a real array whose dimensions are ``min(d, 1)``, so it has
  at most one element. Equal dimensions stay equal and broadcastable ones stay broadcastable, so
  NumPy still rejects bad dtypes, axes, casts and empty reductions exactly as it would on the real
  data; the rule itself then computes the true shape and checks what depends on absolute sizes.
  (``shrink2`` caps dimensions at 2 instead, for NumPy code that treats length 1 specially.)
* ``view``: every traced array becomes a zero-strided view of one element with the full shape
  (``np.broadcast_to``). Only for functions that return views (reshape, transpose, basic indexing,
  ...), whose result then *is* the answer.

Used by the rule modules of `fx.op_rules`; nothing here is public except `RuleError`.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any, Union

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from fx.meta import ArrayMeta
from fx.op_rules.numpy_signatures import TEXT_SIGNATURES
from fx.symbolic import Sym, is_data_dependent, is_symbolic, sym_min

Result = Union[ArrayMeta, tuple, None]
Rule = Callable[["Call"], Result]


class NamedResults(tuple):
    """The metas of a call that returns a named tuple (NumPy's ``EighResult``, ``SVDResult``,
    ...): a tuple of `ArrayMeta` whose `kind` is that class (the translator rebuilds the result
    as one, with its fields by name)."""

    kind: type = tuple

    def __new__(cls, kind: type, metas) -> "NamedResults":
        self = super().__new__(cls, metas)
        self.kind = kind
        return self

PY_SCALARS = (bool, int, float, complex)
_MAX_BYTES = np.iinfo(np.intp).max


class RuleError(Exception):
    """The rules cannot describe this operation exactly, or NumPy would reject it.

    The translator treats it as a graph break: the frame runs in plain NumPy, so the user sees
    NumPy's own error (if any).
    """


# --------------------------------------------------------------------------- registry

FUNCTION_RULES: dict[Any, Rule] = {}
# callables known on purpose to have no rule, with the reason (data-dependent results, ...)
REJECTED: dict[Any, str] = {}


def register(*targets: Any) -> Callable[[Rule], Rule]:
    """Decorator: ``@register(np.sum, np.prod)`` makes the rule the one rule of those callables."""

    def deco(rule: Rule) -> Rule:
        for target in targets:
            if target in FUNCTION_RULES and FUNCTION_RULES[target] is not rule:
                raise ValueError(f"{target!r} already has a rule")
            FUNCTION_RULES[target] = rule
        return rule

    return deco


# --------------------------------------------------------------------------- calls


def contains_meta(value: Any) -> bool:
    if isinstance(value, ArrayMeta):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_meta(v) for v in value)
    if isinstance(value, dict):
        return any(contains_meta(v) for v in value.values())
    if isinstance(value, slice):
        return any(contains_meta(v) for v in (value.start, value.stop, value.step))
    return False


def _standin(meta: ArrayMeta, mode: str) -> Any:
    if meta.is_scalar:
        return np.zeros((), meta.dtype)[()]
    if mode == "view":
        # (a symbolic size is fixed here: rules that keep view shapes symbolic do not use this)
        return np.broadcast_to(np.zeros((), meta.dtype), meta.shape)
    cap = 2 if mode == "shrink2" else 1
    # A data-dependent length (of x[mask]) may be 0 at run time: its stand-in has 1 element
    # (dtypes do not depend on it; an error NumPy raises for an empty one, e.g. max(), is
    # raised by the same NumPy call in the graph).
    return np.zeros(tuple(1 if is_data_dependent(d) else operator.index(sym_min(d, cap))
                          for d in meta.shape), meta.dtype)


def _one_element_if_empty(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.size == 0:
        return np.zeros(tuple(max(d, 1) for d in value.shape), value.dtype)
    return value


@dataclass
class Call:
    """One call being evaluated abstractly.

    ``target`` is the NumPy callable whose rule runs. ``args``/``kwargs`` are in *function form*
    (for a method call, ``args[0]`` is self). ``method``/``method_args`` remember a method call so
    the stand-in run uses the method itself, with its own argument conventions.
    """

    target: Any
    args: tuple
    kwargs: dict
    method: str | None = None
    method_args: tuple = ()
    _origin: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.method is not None:
            return f"ndarray.{self.method}"
        return getattr(self.target, "__name__", repr(self.target))

    def _sub(self, value: Any, mode: str) -> Any:
        if isinstance(value, Sym):
            # A size used as a Python int (``y * n``): its traced value, for dtype and checks
            # (no fact: NumPy checks the real value again when the graph runs).
            return value.hint
        if isinstance(value, ArrayMeta):
            standin = _standin(value, mode)
            self._origin[id(standin)] = (standin, value)
            return standin
        if isinstance(value, (tuple, list)):
            return type(value)(self._sub(v, mode) for v in value)
        if isinstance(value, slice) and contains_meta(value):
            raise RuleError(f"{self.name}: a slice with traced bounds is data-dependent")
        if isinstance(value, slice) and is_symbolic((value.start, value.stop, value.step)):
            return slice(*(v.hint if isinstance(v, Sym) else v
                           for v in (value.start, value.stop, value.step)))
        return value

    def run(self, mode: str = "shrink", args: tuple | None = None,
            kwargs: dict | None = None, fn: Any = None) -> Any:
        """Run the real NumPy callable on stand-ins; NumPy's exceptions become `RuleError`.

        ``args``/``kwargs`` override the function-form arguments (rules that must shrink plain
        Python values such as shape tuples pass them); they are ignored for method calls unless
        given explicitly, in which case they are the method's arguments (self first). ``fn``
        overrides the callable (a rule evaluating a helper operation).
        """
        if args is None:
            args = (self.args[0],) + self.method_args if self.method else self.args
        kwargs = self.kwargs if kwargs is None else kwargs
        sargs = self._sub(tuple(args), mode)
        skwargs = {k: self._sub(v, mode) for k, v in kwargs.items()}
        if fn is None:  # the call itself, not a helper operation of the rule
            sargs, skwargs = self._without_standin_warnings(sargs, skwargs)
        if fn is None and self.method:
            fn, sargs = getattr(sargs[0], self.method), sargs[1:]
        elif fn is None:
            fn = self.target
        # No warnings.catch_warnings() here: it swaps the process-wide filters, so other
        # threads' warnings would be lost or changed while a compile runs. np.errstate is a
        # context variable (per thread and task): it silences the floating-point warnings of the
        # stand-in data. The other warnings a stand-in run could emit are avoided before it runs
        # (DeprecationWarnings pass through, attributed to this module: hidden by the default
        # filters; with an "error" filter they become a RuleError, so the frame runs in NumPy).
        try:
            with np.errstate(all="ignore"):
                return fn(*sargs, **skwargs)
        except RuleError:
            raise
        except Exception as exc:  # NumPy rejects these arguments: so must we
            raise RuleError(f"NumPy rejects {self.name}(...): {type(exc).__name__}: {exc}") \
                from exc

    def _without_standin_warnings(self, sargs: tuple, skwargs: dict) -> tuple[tuple, dict]:
        """The arguments for a stand-in run (``sargs``: self first for a method) that emits no
        warning through `warnings`, which cannot be silenced per thread.

        Statistics written in Python (mean, var, std, median, their nan- forms) warn about
        their input's size, from NumPy's own frames (so the compiled call warns exactly as plain
        NumPy does); the stand-in run must not: empty stand-ins get one element, and
        ``ddof``/``correction`` (beyond a one-element stand-in's size) become 0. Neither
        changes the result's dtype, and the rules compute shapes themselves. (The other kind
        measured over the test suites, ComplexWarning of a complex-to-real cast, is kept out of
        stand-in runs by the translator: `dynamo.output_graph` leaves such calls to NumPy.)
        """
        if self.method is None and isinstance(self.target, np.ufunc) and \
                len(sargs) > self.target.nin and "out" not in skwargs:
            # outputs given positionally: NumPy deprecates that for maximum/minimum, and the
            # warning belongs to the compiled call (it warns at the user's line), not the rule
            outs = sargs[self.target.nin:]
            skwargs = {**skwargs, "out": outs + (None,) * (self.target.nout - len(outs))}
            sargs = sargs[:self.target.nin]
        name = self.method or getattr(self.target, "__name__", "")
        statistic = (name in ("mean", "var", "std") or self.target in (
            np.mean, np.var, np.std, np.nanmean, np.nanvar, np.nanstd, np.median, np.nanmedian,
            np.average))
        if statistic:
            # Top-level arguments only (statistics take arrays, not nested structures).
            sargs = tuple(_one_element_if_empty(a) for a in sargs)
            skwargs = {k: _one_element_if_empty(v) for k, v in skwargs.items()}
            if name in ("var", "std", "nanvar", "nanstd"):
                if len(sargs) >= 5:  # ddof given positionally: (self or a, axis, dtype, out, ddof)
                    sargs = (*sargs[:4], 0, *sargs[5:])
                skwargs = {k: (0 if k in ("ddof", "correction") else v)
                           for k, v in skwargs.items()}
        return sargs, skwargs

    def result(self, value: Any, shape: tuple | None = None) -> ArrayMeta:
        """The meta of one stand-in result: a traced input returned as is (``out=``, in-place
        operators) maps back to its meta; otherwise dtype and scalar-ness come from ``value``
        and the shape from the rule (``None``: the stand-in's own shape, for ``view`` runs)."""
        hit = self._origin.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        if isinstance(value, np.generic):
            return ArrayMeta(value.dtype, (), True)
        if isinstance(value, np.ndarray):
            return ArrayMeta(value.dtype, value.shape if shape is None else shape, False)
        raise RuleError(f"{self.name} returns a Python {type(value).__name__}, not an array")

    def scalar_or_result(self, value: Any, shape: tuple) -> ArrayMeta:
        """`result`: a NumPy scalar as NumPy returned one, else an array of `shape`."""
        return self.result(value) if isinstance(value, np.generic) else self.result(value, shape)

    def results(self, value: Any, shapes: list) -> "tuple":
        """The metas of a stand-in run that returned several arrays (`result` each, with its
        shape); a `NamedResults` when NumPy returns a named tuple."""
        metas = tuple(self.result(v, s) for v, s in zip(value, shapes))
        return NamedResults(type(value), metas) if type(value) is not tuple else metas

    def bind(self) -> inspect.BoundArguments:
        """The function-form arguments bound to the target's signature (defaults applied)."""
        try:
            bound = signature(self.target).bind(*self.args, **self.kwargs)
        except TypeError as exc:
            raise RuleError(f"{self.name}: {exc}") from exc
        bound.apply_defaults()
        return bound


_SIGNATURES: dict[Any, inspect.Signature] = {}


def signature(fn: Any) -> inspect.Signature:
    """`fn`'s signature; for a NumPy C function whose NumPy reports none (NumPy 2.2), the one
    NumPy 2.5 reports (`numpy_signatures`)."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = inspect.signature(fn)
        except ValueError:
            sig = _recorded_signature(fn)
        _SIGNATURES[fn] = sig
    return sig


def _recorded_signature(fn: Any) -> inspect.Signature:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__name__", "")
    keys = [f"{module}.{name}", f"numpy.{name}", f"numpy.linalg.{name}"]
    if isinstance(getattr(fn, "__self__", None), np.ufunc):
        keys = [f"ufunc.{name}"]
    for key in keys:
        text = TEXT_SIGNATURES.get(key)
        if text is not None:
            namespace: dict[str, Any] = {}
            text = text.replace("<no value>", "_NoValue")  # (a ufunc's unset keywords)
            exec(f"def stand_in{text}: pass", {"_NoValue": np._NoValue},  # noqa: S102
                 namespace)  # (our own table)
            return inspect.signature(namespace["stand_in"])
    raise ValueError(f"no signature found for {name}")


def given(value: Any) -> bool:
    """Whether an optional argument was passed (NumPy uses ``np._NoValue`` as its default)."""
    return value is not np._NoValue


# --------------------------------------------------------------------------- shapes


def shape_of(value: Any, what: str = "operand") -> tuple[int, ...]:
    """The shape a value takes when NumPy converts it to an array (constants are small)."""
    if isinstance(value, ArrayMeta):
        return value.shape
    if value is None or isinstance(value, PY_SCALARS + (np.generic, str, bytes)):
        return ()
    if contains_meta(value):
        raise RuleError(f"{what}: a list or tuple holding traced arrays is not supported; "
                        "build the array with np.stack instead")
    try:
        return np.shape(value)
    except Exception as exc:
        raise RuleError(f"{what}: cannot take the shape of {type(value).__name__}") from exc


def broadcast(*shapes: tuple[int, ...], what: str = "operands") -> tuple[int, ...]:
    if any(is_symbolic(s) for s in shapes):
        return _broadcast_symbolic(shapes, what)
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as exc:
        raise RuleError(f"{what} cannot be broadcast together: {shapes}") from exc


def _broadcast_symbolic(shapes: tuple, what: str) -> tuple:
    """NumPy's broadcasting over sizes that may be symbolic (a symbol is >= 2, so it never
    stretches; an expression that may be 1, such as ``s0 - 1``, is asked (a fact); two
    different sizes broadcast only if equal, a fact the guards keep)."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list = []
    for axis in range(ndim):
        dims = [shape[axis - ndim + len(shape)] for shape in shapes
                if axis - ndim + len(shape) >= 0]
        dims = [d for d in dims if not (isinstance(d, int) and d == 1)]
        if dims and isinstance(dims[0], Sym) and all(dims[0].same_as(d) for d in dims[1:]):
            out.append(dims[0])  # one size (or 1s beside it): the result, whatever its value
            continue
        size: Any = 1
        for shape in shapes:
            d = shape[axis - ndim + len(shape)] if axis - ndim + len(shape) >= 0 else 1
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(d, Sym) and d.lower_bound() <= 1 and d == 1:
                continue  # (``x[1:]`` of a length-2 array has length 1 and stretches: a fact)
            if isinstance(size, int) and size == 1:
                size = d
            elif isinstance(d, Sym) and d.same_as(size) or d == size:
                # equal (a fact when not the same expression): keep the simpler one
                size = size if isinstance(size, int) or not isinstance(d, int) else d
            else:
                raise RuleError(f"{what} cannot be broadcast together: {shapes}")
        out.append(size)
    return tuple(out)


def normalize_axes(axis: Any, ndim: int, what: str = "axis") -> tuple[int, ...]:
    """All axes for ``None``, else the normalized tuple (NumPy rejects duplicates and range)."""
    if axis is None:
        return tuple(range(ndim))
    try:
        return normalize_axis_tuple(axis, ndim, what)
    except Exception as exc:
        raise RuleError(f"bad {what} {axis!r} for {ndim}-d array: {exc}") from exc


def as_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A creation shape argument (int or sequence of ints) as a tuple; rejects negatives."""
    if isinstance(shape, ArrayMeta) or contains_meta(shape):
        raise RuleError(f"{what} built from traced values is data-dependent")
    def dim(d: Any) -> Any:
        return d if isinstance(d, Sym) else operator.index(d)  # (a size stays symbolic)

    try:
        dims = (dim(shape),) if not isinstance(shape, (tuple, list)) else \
            tuple(dim(d) for d in shape)
    except TypeError as exc:
        raise RuleError(f"{what} must be an int or a sequence of ints, got {shape!r}") from exc
    if any(d < 0 for d in dims):
        raise RuleError(f"negative dimensions are not allowed: {what} {dims}")
    return dims


def check_size(shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    if is_symbolic(shape):
        return  # (checked by NumPy when the graph runs, as in plain code)
    if prod(shape) * max(np.dtype(dtype).itemsize, 1) > _MAX_BYTES:
        raise RuleError(f"{what}: array of shape {shape} is too big for NumPy")


def shrunk(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(operator.index(sym_min(d, 1)) for d in shape)


# --------------------------------------------------------------------------- symbolic sizes

#: Rules that compute with symbolic sizes (`fx.symbolic.Sym`). Any other rule gets its traced
#: arrays with every symbolic size fixed to its value first (a fact, so a guard): always
#: correct, only less general.
SYMBOLIC_RULES: set = set()


def symbolic(rule: Rule) -> Rule:
    """Decorator: the rule handles symbolic sizes itself (see `SYMBOLIC_RULES`)."""
    SYMBOLIC_RULES.add(rule)
    return rule


def _concrete_meta(value: Any) -> Any:
    if isinstance(value, ArrayMeta):
        if not is_symbolic(value.shape):
            return value
        return ArrayMeta(value.dtype, tuple(operator.index(d) for d in value.shape),
                         value.is_scalar)
    if isinstance(value, (tuple, list)):
        return type(value)(_concrete_meta(v) for v in value)
    if isinstance(value, dict):
        return {k: _concrete_meta(v) for k, v in value.items()}
    if isinstance(value, Sym):
        return operator.index(value)
    return value


def _has_symbols(value: Any) -> bool:
    if isinstance(value, ArrayMeta):
        return is_symbolic(value.shape)
    if isinstance(value, (tuple, list)):
        return any(_has_symbols(v) for v in value)
    if isinstance(value, dict):
        return any(_has_symbols(v) for v in value.values())
    if isinstance(value, slice):
        return any(_has_symbols(v) for v in (value.start, value.stop, value.step))
    return isinstance(value, Sym)


def specialize_call(call: "Call") -> "Call":
    """The call with symbolic sizes fixed (for rules not in `SYMBOLIC_RULES`)."""
    if not _has_symbols(call.args) and not _has_symbols(call.kwargs):
        return call
    args, kwargs = _concrete_meta(call.args), _concrete_meta(call.kwargs)
    margs = args[1:] if call.method else call.method_args
    return Call(call.target, tuple(args), kwargs, call.method, tuple(margs))


def out_metas(out: Any) -> tuple:
    """``out=`` normalized to a tuple (NumPy accepts an array or a tuple of them)."""
    if out is None or out is Ellipsis:
        return ()
    return tuple(out) if isinstance(out, tuple) else (out,)
