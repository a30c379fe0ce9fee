"""Random straight-line NumPy programs for the differential fuzzer (tests/fuzz/).

In: a Hypothesis ``draw`` (through the `programs` strategy). Out: a `Program`: the source text of
``def f(a0, a1, ...)`` plus recipes (`ArgSpec`) that build fresh, identical inputs for every run
(dtype, values, memory layout, aliasing between arguments). Used by tests/fuzz/test_differential.py.

How: the generator *runs* each statement it writes on a private copy of the inputs with NumPy
(warnings and FP errors silenced), so it knows every value's real dtype, shape and aliasing and can
pick operands that broadcast, axes that exist and reshapes that fit. A statement that NumPy rejects
is dropped, or (sometimes) kept as the program's last statement so the program raises. Every
result is compared bit for bit, transcendental functions included: the C backend computes them
with NumPy's own loops (docs/c_backend.md section 3).

Kernel reuse: every distinct kernel costs a gcc run (~0.15 s), so literal constants come from
small pools and programs are short; in C mode (``programs(c_mode=True)``) fewer dtypes, constants
and statements are drawn. Many examples then share C sources (measured: 2000 C-mode examples
build ~600 distinct libraries with a cold cache, and ~50% of the examples run a kernel).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hypothesis import strategies as st

__all__ = ["ArgSpec", "Program", "programs", "make_args", "other_values", "TRANSCENDENTAL",
           "arg_sizes", "resized", "other_scalar"]

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
# Dtypes the C backend lowers are drawn more often (float16/complex stay NumPy calls there).
_DTYPE_WEIGHTED = DTYPES + ["float64"] * 4 + ["float32"] * 3 + ["int64"] * 2 + ["int32", "bool",
                                                                                 "uint8"]
# C mode: fewer dtype combinations, so that programs share kernels (each new one is a gcc run).
_C_DTYPES = ["float64"] * 6 + ["float32"] * 3 + ["int64"] * 3 + ["bool"] * 2 + [
    "int32", "uint8", "int8", "uint64", "float16", "complex128"]

LAYOUTS = ["C", "C", "C", "F", "T", "neg", "slice", "bcast"]


def _value_pool(dt: np.dtype) -> list[Any]:
    """Element values for dtype ``dt``: ordinary ones first (Hypothesis shrinks towards them),
    then signed zeros, extremes, NaN and infinities."""
    if dt.kind == "b":
        return [False, True]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, 2, 3, 5, 7, 100, -1, -2, -7, info.max, info.min, info.max - 1,
                info.min + 1]
        return [v for v in dict.fromkeys(vals) if info.min <= v <= info.max]
    if dt.kind == "f":
        fi = np.finfo(dt)
        return [1.0, 0.0, 2.0, -1.0, 0.5, -3.5, 10.0, 0.25, -0.0, float(fi.max), -float(fi.max),
                float(fi.smallest_subnormal), float(fi.tiny), math.nan, math.inf, -math.inf]
    return [1 + 0j, 0j, 2 - 1j, -1j, 0.5 + 0.5j, complex(-0.0, 0.0), complex(math.nan, 0),
            complex(math.inf, 1), complex(0, -math.inf), complex(1e300, 1e300)]


@dataclass(frozen=True)
class ArgSpec:
    """How to build one argument, fresh for every run.

    kind "array": a new base array of ``dtype``/``base_shape`` filled with ``values`` (or from
    ``seed``), then ``layout`` makes the argument (a view of the base, or the base itself).
    kind "same": the very object of argument ``of``. kind "view": ``view`` (Python source over
    the name ``x``) applied to argument ``of``. kind "scalar": the Python scalar ``value``.
    """

    kind: str
    dtype: str = "float64"
    shape: tuple[int, ...] = ()
    layout: str = "C"
    values: tuple = ()
    seed: int | None = None
    of: int = 0
    view: str = ""
    value: Any = None

    def describe(self) -> str:
        if self.kind == "array":
            fill = f"seed={self.seed}" if self.seed is not None else f"values={list(self.values)}"
            return f"array {self.dtype}{list(self.shape)} layout={self.layout} {fill}"
        if self.kind == "same":
            return f"the same object as argument {self.of}"
        if self.kind == "view":
            return f"view {self.view!r} (x = argument {self.of})"
        return f"Python scalar {self.value!r}"


def _base_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    if layout == "T":
        return shape[::-1]
    if layout == "slice" and shape:
        return (shape[0] * 2 + 1,) + shape[1:]
    if layout == "bcast" and shape:
        return (1,) + shape[1:]
    return shape


def _fill(spec: ArgSpec) -> np.ndarray:
    dt = np.dtype(spec.dtype)
    shape = _base_shape(spec.shape, spec.layout)
    size = math.prod(shape)
    if spec.seed is None:
        flat = list(spec.values)
    else:
        rng = np.random.default_rng(spec.seed)
        if dt.kind == "b":
            flat = (rng.random(size) < 0.5).tolist()
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            flat = rng.integers(max(info.min, -50), min(info.max, 50), size=size,
                                endpoint=True).tolist()
        elif dt.kind == "f":
            flat = (rng.standard_normal(size) * 4).tolist()
        else:
            flat = (rng.standard_normal(size) + 1j * rng.standard_normal(size)).tolist()
        pool = _value_pool(dt)
        for _ in range(min(size, 3)):  # a few special values at seeded places
            flat[int(rng.integers(size))] = pool[int(rng.integers(len(pool)))]
    with np.errstate(all="ignore"):
        return np.array(flat, dtype=dt).reshape(shape)


def _layout(base: np.ndarray, spec: ArgSpec) -> np.ndarray:
    lay = spec.layout
    if lay == "F":
        return np.asfortranarray(base)
    if lay == "T":
        return base.T
    if lay == "neg":
        return base[(slice(None, None, -1),) * base.ndim]
    if lay == "slice" and base.ndim:
        return base[1::2]
    if lay == "bcast" and base.ndim:
        return np.broadcast_to(base, spec.shape)  # read-only, stride 0 on axis 0
    return base


def make_args(specs: tuple[ArgSpec, ...]) -> tuple[list[Any], list[Any]]:
    """Fresh arguments, and the objects to compare after the call (each array's base)."""
    args: list[Any] = []
    observed: list[Any] = []
    for spec in specs:
        if spec.kind == "array":
            base = _fill(spec)
            args.append(_layout(base, spec))
            observed.append(base)
        elif spec.kind == "same":
            args.append(args[spec.of])
        elif spec.kind == "view":
            args.append(eval(spec.view, {"np": np}, {"x": args[spec.of]}))
        else:
            args.append(spec.value)
    return args, observed


def other_values(specs: tuple[ArgSpec, ...]) -> tuple[ArgSpec, ...]:
    """The same arguments (dtypes, shapes, layouts, aliasing, scalars) with other array data:
    a compiled version must not depend on the data it was compiled with."""
    out = []
    for s in specs:
        if s.kind == "array":
            s = replace(s, values=s.values[::-1][1:] + s.values[::-1][:1],
                        seed=None if s.seed is None else s.seed + 1)
        out.append(s)
    return tuple(out)


def arg_sizes(specs: tuple[ArgSpec, ...]) -> list[int]:
    """The distinct dimension sizes >= 2 of the array arguments, ascending (the sizes a
    dynamic-shapes compile may make symbolic; views and aliases follow their argument)."""
    return sorted({d for s in specs if s.kind == "array" for d in s.shape if d >= 2})


def _cycled(values: tuple, size: int) -> tuple:
    if not values:
        return ()
    return tuple(values[i % len(values)] for i in range(size))


def resized(specs: tuple[ArgSpec, ...], sizes: dict[int, int],
            scalars: dict[int, Any] | None = None,
            dims: dict[tuple[int, int], int] | None = None,
            layouts: dict[int, str] | None = None) -> tuple[ArgSpec, ...]:
    """The same arguments with every dimension size ``d`` in `sizes` replaced by ``sizes[d]``
    (the same map for every argument, so equal sizes stay equal and broadcasting patterns stay
    valid when 0 and 1 are kept), the element values cycled over the new size (special values
    stay), and scalar argument ``i`` replaced by ``scalars[i]`` where given. ``dims`` maps
    (argument, dimension) to a size instead, before `sizes` (sizes equal by chance may then
    differ: NumPy may raise); ``layouts`` gives array argument ``i`` another memory layout
    (`LAYOUTS`). For tests/fuzz/test_dynamic_differential.py (dynamic shapes)."""
    out = []
    for i, s in enumerate(specs):
        if s.kind == "array":
            shape = tuple((dims or {}).get((i, k), sizes.get(d, d))
                          for k, d in enumerate(s.shape))
            layout = (layouts or {}).get(i, s.layout) if shape else s.layout
            if shape != s.shape or layout != s.layout:
                size = math.prod(_base_shape(shape, layout))
                s = replace(s, shape=shape, layout=layout,
                            values=_cycled(s.values, size) if s.seed is None else ())
        elif s.kind == "scalar" and scalars and i in scalars:
            s = replace(s, value=scalars[i])
        out.append(s)
    return tuple(out)


def other_scalar(value: Any, k: int) -> Any:
    """Another Python scalar of the same type as `value` (choice `k`: ordinary values first,
    then ones NumPy treats specially: signed zero, NaN, infinities, out-of-range integers)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        # Huge values only for a program that already ran with one: a statement such as
        # ``s1 ** s1`` or ``s1 << s1`` on Python ints would never finish.
        pool = [value + 1, 2, 3, 4, 6, -value - 2, 0, 300, -129, 7]
        if abs(value) >= 2**31:
            pool += [2**63, -2**63 - 1]
    elif isinstance(value, float):
        pool = [value * 2 + 0.5, 2.5, -1.25, -0.0, 0.0, math.nan, math.inf, 1e308]
    else:
        pool = [value + 1j, 2 - 1j, complex(0.0, -0.0), complex(math.nan, 1.0)]
    return pool[k % len(pool)]


@dataclass
class Program:
    """One generated program: source of ``f``, argument recipes and how to run it."""

    source: str
    args: tuple[ArgSpec, ...]
    errstate_raise: bool = False
    expect_error: bool = False
    ops: tuple[str, ...] = ()

    def describe(self) -> str:
        lines = [self.source.rstrip(), "# arguments:"]
        lines += [f"#   {name}: {spec.describe()}" for name, spec in zip(self.arg_names, self.args)]
        if self.errstate_raise:
            lines.append("# run under np.errstate(all='raise')")
        return "\n".join(lines)

    @property
    def arg_names(self) -> list[str]:
        return [f"{'s' if s.kind == 'scalar' else 'a'}{i}" for i, s in enumerate(self.args)]


# Operation tables ---------------------------------------------------------------------------

#: Transcendental ufuncs (libm / libmvec in the C backend: a few ULP from NumPy's loops).
TRANSCENDENTAL = {"exp", "log", "sin", "cos", "tanh", "arcsin", "arctan2", "hypot", "expm1",
                  "log1p", "cbrt", "exp2", "log10", "arctan", "sinh"}
UNARY_FUNCS = ["negative", "absolute", "sqrt", "square", "sign", "floor", "ceil", "rint", "trunc",
               "isnan", "isinf", "isfinite", "signbit", "logical_not", "invert", "reciprocal",
               "positive", "conjugate", *sorted(TRANSCENDENTAL - {"arctan2", "hypot"})]
UNARY_EXPRS = ["-{a}", "abs({a})", "~{a}", "{a} ** 2", "{a} ** 0.5", "{a} ** 3", "+{a}"]
BINARY_OPS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<", "<=", "==", "!=", ">", ">=",
              "<<", ">>"]
BINARY_FUNCS = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin",
                "logical_and", "logical_or", "logical_xor", "copysign", "arctan2", "hypot",
                "power", "fmod", "floor_divide", "remainder", "bitwise_and", "greater", "equal",
                "not_equal", "less_equal"]
#: How `_inplace` passes the output ``{t}`` of a ufunc (``np.negative(y, y)`` is in place).
OUT_FORMS = ["{t}", "out={t}", "out=({t},)", "out={t}, where={t} != 0", "{t}, casting='unsafe'",
             "out={t}, dtype={t}.dtype"]
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "any", "all"]
INPLACE_OPS = ["+=", "-=", "*=", "/=", "//=", "|=", "&=", "**=", "%="]
ASTYPES = ["bool", "int8", "int32", "int64", "uint8", "uint64", "float16", "float32", "float64",
           "complex64", "complex128"]

# Python scalar literals mixed in (NEP 50 weak scalars); a small pool keeps kernels shared.
SCALARS = ["1", "2", "0", "-1", "3", "0.5", "2.0", "-0.0", "1e308", "np.inf", "np.nan", "True",
           "300", "-129", "1j", "(1+2j)", "2**63", "1e-320"]
#: C mode: every distinct constant is a distinct kernel (a gcc run), so fewer of them.
C_SCALARS = ["1", "2", "0", "-1", "0.5", "-0.0", "1e308", "np.inf", "np.nan", "300", "True"]


@functools.lru_cache(maxsize=None)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Cached integer strategies: building strategies inside every draw costs more than the
    program generation itself (Hypothesis validates each new strategy)."""
    return st.integers(lo, hi)


@functools.lru_cache(maxsize=None)
def _index_lists(n: int, size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(_ints(0, n - 1), min_size=size, max_size=size)


def _choice(draw: Any, seq: Any) -> Any:
    """``draw(st.sampled_from(seq))`` without a new strategy per call (shrinks to seq[0])."""
    return seq[draw(_ints(0, len(seq) - 1))]


_BOOLS = st.booleans()


def _is_arr(v: Any) -> bool:
    return isinstance(v, (np.ndarray, np.generic))


class _Gen:
    """The state of one program being generated: names, their real values, text."""

    def __init__(self, draw: Any, names: list[str], values: list[Any], c_mode: bool) -> None:
        self.draw = draw
        self.env: dict[str, Any] = dict(zip(names, values))
        self.lines: list[str] = []
        self.counter = itertools.count()
        self.c_mode = c_mode
        self.error = False
        self.ops: list[str] = []
        self.scalars = C_SCALARS if c_mode else SCALARS

    # -- helpers ---------------------------------------------------------------------------
    def pick(self, pred=lambda v: True, op: str = "", allow_scalar: bool = False) -> str | None:
        cands = [n for n, v in self.env.items()
                 if (_is_arr(v) or (allow_scalar and isinstance(v, (int, float, complex))))
                 and pred(v)]
        if not cands:
            return None
        return _choice(self.draw, cands)

    def scalar(self) -> str:
        return _choice(self.draw, self.scalars)

    def fresh(self) -> str:
        return f"v{next(self.counter)}"

    def run(self, line: str, op: str) -> bool:
        """Execute ``line`` on the generator's values; keep it if NumPy accepts it (or, drawn,
        as the program's last, raising statement). Returns False when the program must end."""
        env = dict(self.env)
        try:
            with np.errstate(all="ignore"), _quiet():
                exec(line, {"np": np}, env)
        except Exception:
            if self.draw(_ints(0, 9)) == 0:  # keep ~10% of the failing statements
                self.lines.append(line)
                self.ops.append(op)
                self.error = True
                return False
            return True
        new = [n for n in env if n not in self.env or env[n] is not self.env[n]]
        if any(not (_is_arr(env[n]) or isinstance(env[n], (int, float, complex, bool)))
               for n in new):
            return True  # e.g. a method returning something else: not worth keeping
        self.env = env
        self.lines.append(line)
        self.ops.append(op)
        return True


class _quiet:
    def __enter__(self) -> None:
        import warnings
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def _bcast_ok(a: Any, b: Any) -> bool:
    try:
        np.broadcast_shapes(np.shape(a), np.shape(b))
        return True
    except ValueError:
        return False


def _axis(g: _Gen, ndim: int) -> str:
    if ndim == 0 or g.draw(_ints(0, 2)) == 0:
        return "None"
    if ndim >= 2 and g.draw(_ints(0, 4)) == 0:
        axes = sorted(g.draw(st.sets(st.integers(0, ndim - 1), min_size=2, max_size=ndim)))
        return "(" + ", ".join(map(str, axes)) + ")"
    return str(g.draw(_ints(-ndim, ndim - 1)))


# Statement kinds ----------------------------------------------------------------------------

def _binary(g: _Gen) -> bool:
    use_func = g.draw(_BOOLS)
    op = _choice(g.draw, (BINARY_FUNCS if use_func else BINARY_OPS))
    a = g.pick(op=op, allow_scalar=True)
    if a is None:
        return True
    kind = g.draw(_ints(0, 3))
    if kind == 0:
        b = g.scalar()
    else:
        b = g.pick(lambda v: _bcast_ok(v, g.env[a]), op=op, allow_scalar=True) or g.scalar()
    x, y = (a, b) if g.draw(_BOOLS) else (b, a)
    expr = f"np.{op}({x}, {y})" if use_func else f"{x} {op} {y}"
    name = g.fresh()
    return g.run(f"{name} = {expr}", op)


def _unary(g: _Gen) -> bool:
    if g.draw(_BOOLS):
        op = _choice(g.draw, (UNARY_FUNCS))
        a = g.pick(op=op)
        text = f"np.{op}({a})"
    else:
        op = _choice(g.draw, (UNARY_EXPRS))
        a = g.pick(op=op)
        text = op.format(a=a)
    if a is None:
        return True
    return g.run(f"{g.fresh()} = {text}", op)


def _reduction(g: _Gen) -> bool:
    op = _choice(g.draw, (REDUCTIONS))
    a = g.pick(op=op)
    if a is None:
        return True
    nd = np.ndim(g.env[a])
    ax = _axis(g, nd)
    if op in ("argmax", "argmin") and ax.startswith("("):
        ax = "0"
    kw = [f"axis={ax}"] if ax != "None" or g.draw(_BOOLS) else []
    if g.draw(_ints(0, 2)) == 0:
        kw.append("keepdims=True")
    if g.draw(_BOOLS):
        text = f"{a}.{op}({', '.join(kw)})"
    else:
        text = f"np.{op}({', '.join([a] + kw)})"
    return g.run(f"{g.fresh()} = {text}", op)


def _shape_op(g: _Gen) -> bool:
    a = g.pick(op="shape")
    if a is None:
        return True
    v = g.env[a]
    shape, nd = np.shape(v), np.ndim(v)
    choices = ["{a}.T", "{a}.reshape(-1)", "{a}[None]", "{a}.copy()", "np.ravel({a})"]
    if nd >= 1:
        choices += ["{a}[::-1]", "{a}[1:]", "{a}[::2]", "{a}[..., None]", "{a}[0]", "{a}[-1]",
                    "{a}[..., ::-1]", "np.squeeze({a})"]
    if nd >= 2:
        perm = ", ".join(map(str, [1, 0, *range(2, nd)]))
        choices += ["{a}[:, 1:]", "{a}.transpose(%s)" % perm, "np.swapaxes({a}, 0, -1)",
                    "{a}[1, ::-1]", "{a}.reshape(%d, -1)" % shape[0]]
    size = int(np.size(v))
    divs = [d for d in range(2, 7) if size % d == 0]
    if divs:
        choices.append("{a}.reshape(%d, -1)" % divs[-1])
        choices.append("{a}.reshape(-1, %d)" % divs[0])
    if nd >= 1 and shape[0] > 5:
        choices.append("{a}[%d]" % shape[0])  # out of bounds: IndexError
    text = _choice(g.draw, (choices)).format(a=a)
    return g.run(f"{g.fresh()} = {text}", "shape")


def _where(g: _Gen) -> bool:
    a = g.pick(op="where")
    if a is None:
        return True
    cond_kind = g.draw(_ints(0, 2))
    if cond_kind == 0:
        c = g.pick(lambda v: np.asarray(v).dtype == bool, op="cond")
        cond = c or f"{a} > 0"
    else:
        c = g.pick(op="cond")
        cond = f"{c} > {_choice(g.draw, (['0', '1', '0.5']))}"
    b = (g.pick(lambda v: _bcast_ok(v, g.env[a]), op="where", allow_scalar=True)
         if g.draw(_BOOLS) else None) or g.scalar()
    return g.run(f"{g.fresh()} = np.where({cond}, {a}, {b})", "where")


def _astype(g: _Gen) -> bool:
    a = g.pick(op="astype_float")
    if a is None:
        return True
    dt = _choice(g.draw, (ASTYPES))
    form = _choice(g.draw, (["{a}.astype(np.{dt})", "{a}.astype('{dt}')",
                                   "np.asarray({a}, dtype=np.{dt})"]))
    return g.run(f"{g.fresh()} = {form.format(a=a, dt=dt)}", "astype_float")


def _matmul(g: _Gen) -> bool:
    a = g.pick(lambda v: np.ndim(v) >= 1, op="matmul")
    if a is None:
        return True
    k = np.shape(g.env[a])[-1]
    b = g.pick(lambda v: np.ndim(v) >= 1 and np.shape(v)[-2 if np.ndim(v) >= 2 else 0] == k,
               op="matmul")
    if b is None or g.draw(_ints(0, 9)) == 0:
        b = g.pick(lambda v: np.ndim(v) >= 1, op="matmul")
    form = _choice(g.draw, (["{a} @ {b}", "np.matmul({a}, {b})", "np.dot({a}, {b})"]))
    return g.run(f"{g.fresh()} = {form.format(a=a, b=b)}", "matmul")


def _inplace(g: _Gen) -> bool:
    t = g.pick(lambda v: isinstance(v, np.ndarray), op="setitem")
    if t is None:
        return True
    tv = g.env[t]
    kind = g.draw(_ints(0, 3))
    src = g.pick(lambda v: _bcast_ok(v, tv) and np.ndim(v) <= np.ndim(tv), op="setitem",
                 allow_scalar=True) if g.draw(_ints(0, 2)) else g.scalar()
    if src is None:
        src = g.scalar()
    if kind == 0:
        op = _choice(g.draw, (INPLACE_OPS))
        return g.run(f"{t} {op} {src}", "inplace")
    if kind == 1:
        idx = _choice(g.draw, (["...", "..., ::-1", "0", "1:", "::2", "-1", ":, 0"]
                                     if tv.ndim >= 2 else ["...", "::-1", "0", "1:", "::2"]))
        return g.run(f"{t}[{idx}] = {src}", "setitem")
    # a ufunc writing into t, its output passed in each form NumPy accepts
    fn = _choice(g.draw, (UNARY_FUNCS if g.draw(_BOOLS) else BINARY_FUNCS))
    operands = [src]
    if fn in BINARY_FUNCS:
        other = g.pick(lambda v: _bcast_ok(v, tv), op=fn, allow_scalar=True) or t
        operands = [other, src] if g.draw(_BOOLS) else [src, other]
    form = _choice(g.draw, OUT_FORMS)
    expr = f"np.{fn}({', '.join(operands)}, {form.format(t=t)})"
    if g.draw(_BOOLS):
        return g.run(f"{g.fresh()} = {expr}", fn)
    return g.run(expr, fn)


def _clip(g: _Gen) -> bool:
    a = g.pick(op="clip")
    if a is None:
        return True
    lo, hi = _choice(g.draw, ([("0", "1"), ("-1", "2.5"), ("None", "3"), ("1", "0"),
                                     ("-0.0", "0.0")]))
    return g.run(f"{g.fresh()} = np.clip({a}, {lo}, {hi})", "clip")


STATEMENTS = [_binary] * 5 + [_unary] * 3 + [_reduction] * 3 + [_shape_op] * 2 + \
    [_where, _astype, _matmul, _clip] + [_inplace] * 2


# Statements about sizes (``programs(sizes=True)``, for the dynamic-shapes fuzzer) ----------------
#
# Each reads sizes from arrays (``x.shape[0]``, ``len(x)``, ``x.size``) or makes results whose
# shape is an expression over them (slices, reshapes, joins, creation, diagonals), so that a
# compile with symbolic sizes has to reason about them and guard what it relied on.

_SIZE_VIEWS = ["{a}[:{a}.shape[0] // 2]", "{a}[{a}.shape[0] // 2:]", "{a}[1:-1]", "{a}[:-2]",
               "{a}[2:5]", "{a}[-3:]", "{a}[::3]", "{a}[::-2]", "{a}[len({a}) - 1]",
               "{a}[len({a}) // 2]", "{a}[:len({b})]", "{a}[:min(len({a}), 3)]",
               "{a}[max(len({a}) - 2, 1):]", "{a}[::len({a}) - 1]", "{a}[-len({b}):]",
               "{a}.reshape({a}.shape[0], -1)", "{a}.reshape(-1, {a}.shape[-1])",
               "{a}.reshape({a}.shape[::-1])", "{a}.reshape({a}.size)", "{a}.reshape(2, -1)",
               "{a}.reshape(-1, 2)", "{a}[1:] + {a}[:-1]", "{a}[..., 1:] - {a}[..., :-1]",
               "np.flip({a}, 0)", "np.expand_dims({a}, 0)", "np.moveaxis({a}, 0, -1)",
               "np.atleast_2d({a})", "np.broadcast_to({a}, (2,) + {a}.shape)", "np.squeeze({a})",
               "{a}[:, None] * {b}[None, :]", "{a}[None] + {b}[:, None]", "np.diff({a})",
               "np.tile({a}, 2)", "np.repeat({a}, 2)", "np.take({a}, [0, -1])", "{a}[[0, -1]]",
               "np.sort({a}, axis=0)", "np.cumsum({a}, axis=0)", "np.add.accumulate({a})",
               "np.ravel({a})[:{b}.size]", "{a}.ravel()[::{a}.shape[0]]", "{a}[..., None] @ {b}",
               "{a}[:len({b})] + {b}", "{a}[-len({b}):] * {b}", "{a}[{b}.shape[0]:]",
               "{a}[len({b}) // 2:len({b})]", "{a}[..., :{b}.shape[-1]] - {b}",
               "{a}[:{b}.shape[0] - 1]", "{a}[:len({a}) - len({b})]", "{a}[{b}.ndim:]"]
_SIZE_VIEWS_2D = ["np.diagonal({a})", "{a}[:, :{a}.shape[1] - 1]", "{a}[:{a}.shape[1], 0]",
                  "np.rot90({a})", "{a}.T @ {a}", "{a} @ {a}.T", "np.trace({a})",
                  "{a}[:, ::-1][1:, :-1]", "np.swapaxes({a}, 0, 1)[:len({b})]"]
_SIZE_ARITH = ["{a} * {a}.shape[0]", "{a} / len({a})", "{a} + {a}.size",
               "{a} - ({a}.shape[-1] - 1)",
               "{a}.sum(axis=0) / {a}.shape[0]", "np.where({a} > 0, {a}.shape[0], -1)",
               "{a} * ({a}.shape[0] % 2)", "{a} // ({a}.shape[0] // 2)", "{a}.mean(axis=0)",
               "np.var({a}, axis=0)", "np.std({a})", "np.ptp({a}, axis=-1)",
               "np.nanmean({a}, axis=-1)", "{a} * (len({a}) == len({b}))",
               "{a} + ({a}.shape[0] > 3)", "{a} * {a}.ndim", "np.cumprod({a}, axis=-1)",
               "np.add.reduce({a}, axis=0)", "np.multiply.outer({a}, {b})", "np.outer({a}, {b})"]
_SIZE_CREATE = ["np.zeros({a}.shape)", "np.ones(({a}.shape[0], 2))", "np.full({a}.shape[-1], 2.5)",
                "np.zeros_like({a})", "np.ones_like({a}, dtype=np.float32)",
                "np.arange({a}.shape[0])", "np.arange(len({a})) * {b}", "np.eye({a}.shape[0])",
                "np.linspace(0, 1, {a}.shape[-1])", "np.full_like({a}, 7)",
                "np.identity(len({a}))", "np.zeros({a}.shape[::-1]) + {b}.T",
                "np.full(({b}.shape[0], {a}.shape[-1]), 1.5)"]
_SIZE_JOIN = ["np.concatenate([{a}, {b}])", "np.concatenate([{a}, {a}[1:]])",
              "np.concatenate([{a}, {b}], axis=-1)", "np.concatenate([{a}, {a}[:, ::2]], axis=1)",
              "np.stack([{a}, {b}])", "np.stack([{a}, {b}], axis=-1)", "np.vstack([{a}, {b}])",
              "np.hstack([{a}, {b}])", "np.concatenate([{a}.ravel(), {b}.ravel()])"]
_SIZE_SETS = ["{a}[:{a}.shape[0] // 2] = {b}", "{a}[1:] = {a}[:-1]", "{a}[::-1] = {a}",
              "{a}[-1] = {b}", "{a}[len({a}) // 2:] *= 2", "{a}[:len({b})] = {b}",
              "{a}[..., :{a}.shape[-1] - 1] += 1", "{a}[{a}.shape[0] - 1] = {a}[0]"]
#: Int scalar arguments used as sizes and indices (graph inputs once their value changed).
_SCALAR_SIZES = ["{a}[:{s}]", "{a}[{s}:]", "{a}[::-1][:{s}]", "{a}[..., :{s}]",
                 "{a}.reshape({s}, -1)", "{a}[-{s}:]", "{a}.reshape({s}, -1).shape[-1] * {a}",
                 "{a}.reshape(-1, {s})[::-1] * 2", "{a}.reshape(-1)[{s}]", "{a}[{s}] + {a}",
                 "np.expand_dims({a}, 0).reshape({s}, -1).T", "len({a}.reshape(-1, {s})) + {a}",
                 "{a}.ravel()[:{s}].size * {a}", "{a}.reshape({s}, -1).sum(axis=0)"]


def _size_statement(g: _Gen) -> bool:
    a = g.pick(lambda v: np.ndim(v) >= 1, op="shape")
    if a is None:
        return True
    b = g.pick(lambda v: np.ndim(v) >= 1, op="shape") or a
    ints = [n for n, v in g.env.items() if type(v) is int and not n.startswith("v")]
    kind = 6 if ints and g.draw(_ints(0, 2)) == 0 else g.draw(_ints(0, 5))
    if kind == 6:
        pool = [t.replace("{s}", _choice(g.draw, ints)) for t in _SCALAR_SIZES]
        op = "shape"
    elif kind == 0:
        pool = _SIZE_VIEWS + (_SIZE_VIEWS_2D if np.ndim(g.env[a]) >= 2 else [])
        op = "shape"
    elif kind == 1:
        pool, op = _SIZE_ARITH, "size_arith"
    elif kind == 2:
        pool, op = _SIZE_CREATE, "size_create"
    elif kind == 3:
        pool, op = _SIZE_JOIN, "size_join"
    else:
        t = g.pick(lambda v: isinstance(v, np.ndarray) and v.ndim >= 1, op="setitem")
        if t is None:
            return True
        text = _choice(g.draw, _SIZE_SETS).format(a=t, b=b)
        return g.run(text, "size_set")
    text = _choice(g.draw, pool).format(a=a, b=b)
    return g.run(f"{g.fresh()} = {text}", op)


SIZE_STATEMENTS = STATEMENTS + [_size_statement] * 19


# Arguments ----------------------------------------------------------------------------------

@st.composite
def _shapes(draw: Any) -> tuple[int, ...]:
    nd = _choice(draw, ([1, 2, 2, 2, 0, 3, 1]))
    shape = tuple(_choice(draw, (3, 4, 2, 1, 5, 0)) for _ in range(nd))
    if 0 in shape and draw(_ints(0, 2)):
        shape = tuple(d or 2 for d in shape)  # empty arrays: rarer
    return shape


@st.composite
def _array_spec(draw: Any, shape: tuple[int, ...] | None = None, c_mode: bool = False) -> ArgSpec:
    dtype = _choice(draw, _C_DTYPES if c_mode else _DTYPE_WEIGHTED)
    if shape is None:
        shape = draw(_shapes())
    layout = _choice(draw, (LAYOUTS))
    if not shape and layout != "C":
        layout = "C"
    big = draw(_ints(0, 14)) == 0
    if big:  # larger arrays: pairwise summation blocks, several work blocks, vector loops
        shape = _choice(draw, ([(300,), (37, 40), (129, 3), (1000,)]))
        return ArgSpec("array", dtype=dtype, shape=shape, layout=layout,
                       seed=draw(_ints(0, 2**16)))
    size = math.prod(_base_shape(shape, layout))
    pool = _value_pool(np.dtype(dtype))
    values = tuple(pool[i] for i in draw(_index_lists(len(pool), size)))
    return ArgSpec("array", dtype=dtype, shape=shape, layout=layout, values=values)


@st.composite
def _arg_specs(draw: Any, c_mode: bool = False) -> tuple[ArgSpec, ...]:
    n = draw(_ints(1, 3))
    specs: list[ArgSpec] = []
    first_shape = draw(_shapes())
    for i in range(n):
        r = draw(_ints(0, 11))
        if i and r == 0:
            specs.append(ArgSpec("same", of=draw(_ints(0, i - 1))))
        elif i and r == 1 and specs[0].kind == "array" and specs[0].shape:
            view = _choice(draw, (["x[::-1]", "x.T", "x[0]", "x[..., 1:]", "x.reshape(-1)"]))
            specs.append(ArgSpec("view", of=0, view=view))
        elif i and r == 2:
            specs.append(ArgSpec("scalar", value=_choice(draw, (
                [2, 0, -1, 1.5, -0.0, math.nan, True, 1j, 2**40]))))
        else:
            # Mostly broadcast-compatible shapes: the same, a trailing part, or size-1 dims.
            mode = draw(_ints(0, 3))
            shape = first_shape if mode <= 1 or i == 0 else (
                first_shape[1:] if mode == 2 else None)
            specs.append(draw(_array_spec(shape, c_mode)))
    return tuple(specs)


@st.composite
def programs(draw: Any, c_mode: bool = False, sizes: bool = False) -> Program:
    """A `Program`; ``c_mode`` draws fewer dtypes, constants and statements; ``sizes``
    also draws statements about sizes (`_size_statement`, for the dynamic-shapes fuzzer)."""
    specs = draw(_arg_specs(c_mode))
    if sizes and draw(_BOOLS):  # an int argument for the statements about sizes
        specs += (ArgSpec("scalar", value=_choice(draw, [2, 3, 4, 1, 6])),)
    if sizes and draw(_ints(0, 2)) == 0:  # an array with sizes of its own
        specs += (draw(_array_spec(None, c_mode)),)
    try:
        values, _ = make_args(specs)
    except (ValueError, IndexError):  # a view that does not fit: the same object instead
        specs = tuple(s if s.kind != "view" else ArgSpec("same", of=s.of) for s in specs)
        values, _ = make_args(specs)
    names = [f"{'s' if s.kind == 'scalar' else 'a'}{i}" for i, s in enumerate(specs)]
    g = _Gen(draw, names, values, c_mode)
    n_stmts = draw(_ints(1, 5 if c_mode else 6))
    for _ in range(n_stmts):
        stmt = _choice(draw, SIZE_STATEMENTS if sizes else STATEMENTS)
        if not stmt(g):
            break
    locals_ = [n for n in g.env if n.startswith("v")]
    if g.error or not locals_:
        ret = names[0] if not locals_ else locals_[-1]
        outs = [ret]
    else:
        k = draw(_ints(1, min(3, len(locals_))))
        outs = list(dict.fromkeys([locals_[-1]] + [_choice(draw, locals_)
                                                    for _ in range(k - 1)]))
        if draw(_ints(0, 9)) == 0:  # an argument returned (mutated or not)
            outs.append(_choice(draw, (names)))
    ret_text = outs[0] if len(outs) == 1 and draw(_ints(0, 3)) else \
        "(" + ", ".join(outs) + ",)"
    body = "\n".join("    " + line for line in g.lines + [f"return {ret_text}"])
    source = f"import numpy as np\n\n\ndef f({', '.join(names)}):\n{body}\n"
    return Program(source=source, args=specs, errstate_raise=draw(_ints(0, 5)) == 0,
                   expect_error=g.error, ops=tuple(g.ops))
