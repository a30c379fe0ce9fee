"""Symbolic sizes: array dimensions known only as expressions over the graph inputs' sizes.

In: the translator makes a `ShapeEnv` per traced frame and asks it for a `Sym` for every input
dimension it decides to keep dynamic (``env.size_symbol(source_text, dim, value)``). Out: shape
rules (`fx.op_rules`) compute with `Sym` like with ints (``+ - * // %``, comparisons, `min`),
`fx.meta.ArrayMeta` shapes hold them, and the env collects the *facts* the trace relied on,
which become guards (``env.facts``, each a Python condition over ``x.shape[i]`` texts).

An expression is a polynomial with integer coefficients over *atoms*: a size symbol (``s0``), or
an opaque ``//``, ``%``, ``max`` or ``min`` of two polynomials. Equal polynomials mean equal
values, so ``x[1:] + x[:-1]`` (both ``s0 - 1``) broadcast without a guard. Every symbol has a
hint (the size seen while tracing) and is at least 2: sizes 0 and 1 are never symbolic, because
broadcasting and emptiness depend on them.

Whenever Python needs a plain answer (``bool(s0 > 5)``, ``int(s0)``, ``range(s0)``), the answer
is decided from the bounds when they settle it (``s0 >= 2`` always holds), and otherwise it is
read from the hints and recorded as a fact (a guard): the compiled code is only reused when
the fact holds again. So a rule that knows nothing about symbols is still correct: it
specialises (``int(s0)`` records ``s0 == 8``). Nothing here needs a symbolic-algebra library.

*Int* symbols (``env.int_symbol(source, value, text)``) stand for a Python int argument whose
value changed between compiles (at least 2, like a size; its guard text is the argument itself,
``n``), so ``n - 1`` and ``n % 10 == 0`` are expressions and facts over it. `expression` builds a
symbol's value back from its inputs (graph nodes, or bytecode after a graph break).

*Data-dependent* symbols (``env.data_symbol(key, upper)``) stand for the length of ``x[mask]``,
known only when the graph runs: between 0 and ``upper`` (their hint, for backends' size
heuristics), read by no guard. A question about one that the bounds do not settle raises
`DataDependentSize` instead of recording a fact (inside a shape rule: a graph break), so the
trace only relies on what holds for every mask: ``z[m] ** 2 + c[m]`` has length ``s0`` because
both operands carry the same symbol, never because the hints agree.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Sym", "ShapeEnv", "Fact", "is_symbolic", "hint", "sym_min",
           "sym_max", "evaluate", "symbol_number", "MIN_DYNAMIC_SIZE", "DataDependentSize",
           "is_data_dependent", "expression"]

#: The smallest size a symbol stands for (0 and 1 are specialised).
MIN_DYNAMIC_SIZE = 2

# --------------------------------------------------------------------------- polynomials
#
# A polynomial is a tuple of (monomial, coefficient) pairs sorted by monomial, no zero
# coefficients; a monomial is a sorted tuple of atoms (the empty monomial is the constant).
# An atom is an int (symbol number) or a tuple (op, poly, poly) for //, %, max, min.

Poly = tuple
_ZERO: Poly = ()


def _const(c: int) -> Poly:
    return (((), c),) if c else _ZERO


def _symbol(k: int) -> Poly:
    return (((k,), 1),)


def _atom_key(atom: Any) -> tuple:
    return (0, atom) if isinstance(atom, int) else (1, repr(atom))


def _normalize(terms: dict) -> Poly:
    return tuple(sorted(((m, c) for m, c in terms.items() if c),
                        key=lambda mc: [_atom_key(a) for a in mc[0]]))


def _add(p: Poly, q: Poly, sign: int = 1) -> Poly:
    terms = dict(p)
    for m, c in q:
        terms[m] = terms.get(m, 0) + sign * c
    return _normalize(terms)


def _mul(p: Poly, q: Poly) -> Poly:
    terms: dict = {}
    for m1, c1 in p:
        for m2, c2 in q:
            m = tuple(sorted(m1 + m2, key=_atom_key))
            terms[m] = terms.get(m, 0) + c1 * c2
    return _normalize(terms)


def _as_const(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    return None


def _floordiv(p: Poly, q: Poly) -> Poly:
    if p == q and p:  # (sizes: the divisor is checked positive before dividing)
        return _const(1)
    c = _as_const(q)
    if c is not None and c > 0 and all(coef % c == 0 for _, coef in p):
        return tuple((m, coef // c) for m, coef in p)
    if c == 1:
        return p
    return (((("//", p, q),), 1),)


def _mod(p: Poly, q: Poly) -> Poly:
    if p == q and p:
        return _ZERO
    c = _as_const(q)
    if c is not None and c > 0 and all(coef % c == 0 for m, coef in p if m):
        return _const((_as_const(tuple((m, k) for m, k in p if not m)) or 0) % c)
    return (((("%", p, q),), 1),)


def _evaluate(p: Poly, values: Callable[[int], int]) -> int:
    total = 0
    for m, c in p:
        v = c
        for atom in m:
            v *= _evaluate_atom(atom, values)
        total += v
    return total


def _evaluate_atom(atom: Any, values: Callable[[int], int]) -> int:
    if isinstance(atom, int):
        return values(atom)
    op, a, b = atom
    x, y = _evaluate(a, values), _evaluate(b, values)
    return {"//": operator.floordiv, "%": operator.mod, "max": max, "min": min}[op](x, y)


_INF = math.inf


def _bounds(p: Poly, atom_bounds: Callable[[Any], tuple]) -> tuple[float, float]:
    lo = hi = 0.0
    for m, c in p:
        mlo, mhi = 1.0, 1.0
        for atom in m:
            alo, ahi = atom_bounds(atom)
            if alo < 0:  # (never for sizes; keeps products of signed atoms honest)
                return -_INF, _INF
            mlo, mhi = mlo * alo, mhi * ahi
        if c >= 0:
            lo, hi = lo + c * mlo, hi + c * mhi
        else:
            lo, hi = lo + c * mhi, hi + c * mlo
    return lo, hi


def _text(p: Poly, names: Callable[[int], str]) -> str:
    if not p:
        return "0"
    parts = []
    for m, c in sorted(p, key=lambda mc: not mc[0]):  # the constant last: ``s0 - 1``
        factors = [_atom_text(a, names) for a in m]
        if not factors:
            body = str(abs(c))
        elif abs(c) == 1:
            body = " * ".join(factors)
        else:
            body = " * ".join([str(abs(c)), *factors])
        if not parts:
            parts.append(body if c > 0 else f"-{body}")
        else:
            parts.append(f"+ {body}" if c > 0 else f"- {body}")
    return " ".join(parts)


def _atom_text(atom: Any, names: Callable[[int], str]) -> str:
    if isinstance(atom, int):
        return names(atom)
    op, a, b = atom
    if op in ("max", "min"):
        return f"{op}({_text(a, names)}, {_text(b, names)})"
    return f"(({_text(a, names)}) {op} ({_text(b, names)}))"


# --------------------------------------------------------------------------- the env


class DataDependentSize(Exception):
    """A question about a data-dependent size (the length of ``x[mask]``) that its bounds do not
    settle: no guard can check it (no input carries the size), so the trace must not rely on
    it. Inside a shape rule it becomes a `RuleError` (a graph break)."""


@dataclass(frozen=True)
class Fact:
    """A condition the trace relied on: ``lhs op rhs`` (polynomials over symbols)."""

    lhs: Poly
    op: str  # "==", "!=", "<", "<=", ">", ">="
    rhs: Poly

    def text(self, env: "ShapeEnv") -> str:
        """Python text over the inputs' sizes, e.g. ``x.shape[0] == y.shape[1]``."""
        return f"{_text(self.lhs, env.guard_text)} {self.op} {_text(self.rhs, env.guard_text)}"

    def describe(self, env: "ShapeEnv") -> str:
        """The same over symbol names (``s0 == s1``), for logs."""
        return f"{_text(self.lhs, env.symbol_name)} {self.op} {_text(self.rhs, env.symbol_name)}"


_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass
class ShapeEnv:
    """The symbols of one traced frame, their hints, and the facts recorded about them."""

    hints: list[int] = field(default_factory=list)
    #: per symbol: (source text, dimension), e.g. ("x", 0) -> guard text ``x.shape[0]``
    origins: list[tuple[Any, int]] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    #: symbol -> a polynomial it is known to equal (``s1 == s0`` after a broadcast, or
    #: ``s0 == 8`` after ``range(x.shape[0])``): later questions use it, without new facts
    replacements: dict[int, Poly] = field(default_factory=dict)
    #: set once the guards are built: recording another fact is then an error
    frozen: bool = False
    #: data-dependent symbols (``len(x[mask])``) -> their upper bound (the mask's size): no
    #: input carries them, so no fact may involve them; their hint is the upper bound
    data_sizes: dict[int, int] = field(default_factory=dict)
    _by_origin: dict = field(default_factory=dict)

    # Symbols ----------------------------------------------------------------------------

    def size_symbol(self, source: Any, dim: int, value: int, guard_text: str) -> "Sym":
        """The symbol for dimension `dim` of the input at `source` (``guard_text`` is how the
        guard function reads that input, e.g. ``x`` or ``___globals['W']``)."""
        key = (source, dim)
        k = self._by_origin.get(key)
        if k is None:
            if value < MIN_DYNAMIC_SIZE:
                raise ValueError(f"sizes below {MIN_DYNAMIC_SIZE} are never symbolic")
            k = len(self.hints)
            self.hints.append(int(value))
            self.origins.append((guard_text, dim))
            self._by_origin[key] = k
        return Sym(_symbol(k), self)

    def int_symbol(self, source: Any, value: int, guard_text: str) -> "Sym":
        """The symbol for a Python int argument read from `source` (``guard_text`` is how the
        guard function reads it, e.g. ``n``): a size-like int, at least 2 (0, 1 and negative
        ints stay constants), so ``n - 1`` and ``n % 10 == 0`` stay symbolic."""
        key = (source, None)
        k = self._by_origin.get(key)
        if k is None:
            if value < MIN_DYNAMIC_SIZE:
                raise ValueError(f"ints below {MIN_DYNAMIC_SIZE} are never symbolic")
            k = len(self.hints)
            self.hints.append(int(value))
            self.origins.append((guard_text, None))
            self._by_origin[key] = k
        return Sym(_symbol(k), self)

    def data_symbol(self, key: Any, upper: int) -> "Sym":
        """The symbol for a size known only at run time, between 0 and `upper` (the number of
        True values of a boolean mask): one per `key` (the same mask at the same point of the
        trace gives the same symbol, so ``z[m] + c[m]`` broadcasts without a question)."""
        key = ("data", key)
        k = self._by_origin.get(key)
        if k is None:
            k = len(self.hints)
            self.hints.append(int(upper))
            self.origins.append((None, -1))
            self.data_sizes[k] = int(upper)
            self._by_origin[key] = k
        return Sym(_symbol(k), self)

    def is_data_dependent(self, p: Poly) -> bool:
        """Does polynomial `p` involve a data-dependent symbol?"""
        return bool(self.data_sizes) and _mentions(p, self.data_sizes)

    def origin_key(self, k: int) -> tuple[Any, int | None]:
        """(source, dimension) that symbol `k` was made for (dimension None: an int argument,
        `int_symbol`)."""
        return next(key for key, number in self._by_origin.items() if number == k)

    def symbol_name(self, k: int) -> str:
        return f"s{k}"

    def guard_text(self, k: int) -> str:
        if k in self.data_sizes:
            raise DataDependentSize(f"s{k} is a data-dependent size: no guard can read it")
        text, dim = self.origins[k]
        return text if dim is None else f"{text}.shape[{dim}]"

    def specialized(self, k: int) -> int | None:
        """The value symbol `k` was found to equal (a fact pinned it), else None."""
        return _as_const(self._resolve(_symbol(k)))

    def fixed_value(self, value: "Sym") -> int | None:
        """The value a size is known to have from the facts so far (no new fact), else None."""
        return _as_const(self._resolve(value.poly))

    # Reasoning --------------------------------------------------------------------------

    def _resolve(self, p: Poly) -> Poly:
        """`p` with the known replacements substituted (until nothing changes)."""
        for _ in range(len(self.replacements) + 1):
            if not any(isinstance(a, int) and a in self.replacements or not isinstance(a, int)
                       for m, _ in p for a in m):
                return p
            out = _ZERO
            for m, c in p:
                term = _const(c)
                for atom in m:
                    term = _mul(term, self._resolve_atom(atom))
                out = _add(out, term)
            if out == p:
                return p
            p = out
        return p

    def _resolve_atom(self, atom: Any) -> Poly:
        if isinstance(atom, int):
            return self.replacements.get(atom, _symbol(atom))
        op, a, b = atom
        a, b = self._resolve(a), self._resolve(b)
        if op == "//":
            return _floordiv(a, b)
        if op == "%":
            return _mod(a, b)
        ca, cb = _as_const(a), _as_const(b)
        if ca is not None and cb is not None:
            return _const(max(ca, cb) if op == "max" else min(ca, cb))
        return (((op, a, b),), 1)

    def _atom_bounds(self, atom: Any) -> tuple[float, float]:
        if isinstance(atom, int):
            if atom in self.data_sizes:
                return 0.0, float(self.data_sizes[atom])
            return float(MIN_DYNAMIC_SIZE), _INF
        op, a, b = atom
        alo, ahi = _bounds(a, self._atom_bounds)
        blo, bhi = _bounds(b, self._atom_bounds)
        if op == "max":
            return max(alo, blo), max(ahi, bhi)
        if op == "min":
            return min(alo, blo), min(ahi, bhi)
        if op == "%":
            return (0.0, bhi - 1) if blo > 0 else (-_INF, _INF)
        if blo > 0 and alo >= 0:  # //
            return math.floor(alo / bhi) if bhi < _INF else 0.0, \
                (math.floor(ahi / blo) if ahi < _INF else _INF)
        return -_INF, _INF

    def hint_of(self, p: Poly) -> int:
        return _evaluate(p, self.hints.__getitem__)

    def decide(self, lhs: Poly, op: str, rhs: Poly) -> bool:
        """The truth of ``lhs op rhs``: from the bounds when they settle it, else from the hints,
        recorded as a fact."""
        diff = self._resolve(_add(lhs, rhs, -1))
        lo, hi = _bounds(diff, self._atom_bounds)
        static = _static_answer(op, lo, hi)
        if static is not None:
            return static
        result = _OPS[op](self.hint_of(diff), 0)
        self._record(self._resolve(lhs), op if result else _NEGATE[op], self._resolve(rhs))
        return result

    def _record(self, lhs: Poly, op: str, rhs: Poly) -> None:
        if self.is_data_dependent(lhs) or self.is_data_dependent(rhs):
            raise DataDependentSize(
                f"{_text(lhs, self.symbol_name)} {op} {_text(rhs, self.symbol_name)} depends on "
                "a data-dependent size (the length of x[mask]): no guard can check it")
        fact = Fact(lhs, op, rhs)
        if fact in self.facts:
            return
        if self.frozen:
            # The guards are built: a new fact could not be checked, and the code would run
            # for sizes where it is false. A bug in whoever asked (a backend must use `hint`
            # or `evaluate`); never answered silently.
            raise RuntimeError(f"npdynamo: the fact {_text(lhs, self.symbol_name)} {op} "
                               f"{_text(rhs, self.symbol_name)} was relied on after the guards "
                               "were built")
        self.facts.append(fact)
        if op == "==":
            # Learn a replacement for one symbol: the highest-numbered symbol alone on one
            # side, so later questions about it are settled without new facts.
            diff = _add(lhs, rhs, -1)
            for k in sorted({a for m, _ in diff for a in m if isinstance(a, int)}, reverse=True):
                coef = dict(diff).get((k,))
                if coef in (1, -1) and not any(k in m for m, _ in diff if m != (k,)):
                    rest = _add(diff, ((((k,)), coef),), -1)
                    self.replacements[k] = _mul(rest, _const(-coef))
                    break

    def concrete(self, p: Poly) -> int:
        """The value of `p`, fixed by a fact (``p == value``) unless the bounds settle it."""
        p = self._resolve(p)
        c = _as_const(p)
        if c is not None:
            return c
        value = self.hint_of(p)
        self._record(p, "==", _const(value))
        return value

    def guard_facts(self) -> list[str]:
        """The facts as Python conditions, for the guard function: a fact that only pins one
        symbol to a value is left out (the array's shape guard checks that size itself)."""
        out = []
        for fact in self.facts:
            if fact.op == "==" and _is_pin(fact):
                continue
            out.append(fact.text(self))
        return out


def _mentions(p: Poly, symbols: Any) -> bool:
    for m, _ in p:
        for atom in m:
            if isinstance(atom, int):
                if atom in symbols:
                    return True
            elif _mentions(atom[1], symbols) or _mentions(atom[2], symbols):
                return True
    return False


def _is_pin(fact: Fact) -> bool:
    sides = [fact.lhs, fact.rhs]
    consts = [_as_const(s) for s in sides]
    return any(c is not None for c in consts) and any(
        len(s) == 1 and s[0][1] == 1 and len(s[0][0]) == 1 and isinstance(s[0][0][0], int)
        for s in sides)


def _static_answer(op: str, lo: float, hi: float) -> bool | None:
    if op == "==":
        return False if lo > 0 or hi < 0 else (True if lo == hi == 0 else None)
    if op == "!=":
        return True if lo > 0 or hi < 0 else (False if lo == hi == 0 else None)
    if op == "<":
        return True if hi < 0 else (False if lo >= 0 else None)
    if op == "<=":
        return True if hi <= 0 else (False if lo > 0 else None)
    if op == ">":
        return True if lo > 0 else (False if hi <= 0 else None)
    if op == ">=":
        return True if lo >= 0 else (False if hi < 0 else None)
    raise ValueError(op)


# --------------------------------------------------------------------------- Sym


def _poly_of(value: Any, env: ShapeEnv | None) -> Poly | None:
    if isinstance(value, Sym):
        if env is not None and value.env is not env:
            raise ValueError("symbolic sizes of two different traces were mixed")
        return value.poly
    if isinstance(value, bool):
        return _const(int(value))
    if isinstance(value, int) or hasattr(type(value), "__index__") and not isinstance(value, float):
        try:
            return _const(operator.index(value))
        except TypeError:
            return None
    return None


class Sym:
    """An integer known as an expression over input sizes (see the module docstring).

    Arithmetic with ints and other `Sym` gives `Sym` (or an int, when the result is constant);
    comparisons, ``bool``, ``int`` and ``operator.index`` give plain answers (recording a fact
    when the bounds do not settle them)."""

    __slots__ = ("poly", "env")

    def __init__(self, poly: Poly, env: ShapeEnv) -> None:
        self.poly = poly
        self.env = env

    @staticmethod
    def make(poly: Poly, env: ShapeEnv) -> "Sym | int":
        poly = env._resolve(poly)
        c = _as_const(poly)
        return c if c is not None else Sym(poly, env)

    @property
    def hint(self) -> int:
        return self.env.hint_of(self.poly)

    def _binary(self, other: Any, fn: Callable[[Poly, Poly], Poly], swap: bool = False) -> Any:
        q = _poly_of(other, self.env)
        if q is None:
            return NotImplemented
        a, b = (q, self.poly) if swap else (self.poly, q)
        return Sym.make(fn(a, b), self.env)

    def __add__(self, other: Any) -> Any:
        return self._binary(other, _add)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: _add(a, b, -1))

    def __rsub__(self, other: Any) -> Any:
        return self._binary(other, lambda a, b: _add(a, b, -1), swap=True)

    def __mul__(self, other: Any) -> Any:
        return self._binary(other, _mul)

    __rmul__ = __mul__

    def __neg__(self) -> Any:
        return Sym.make(_mul(self.poly, _const(-1)), self.env)

    def __pos__(self) -> "Sym":
        return self

    def _divisor_positive(self, q: Poly) -> None:
        if not self.env.decide(q, ">", _ZERO):
            raise ZeroDivisionError("symbolic size divided by a non-positive number")

    def __floordiv__(self, other: Any) -> Any:
        q = _poly_of(other, self.env)
        if q is None:
            return NotImplemented
        self._divisor_positive(q)
        return Sym.make(_floordiv(self.poly, q), self.env)

    def __rfloordiv__(self, other: Any) -> Any:
        p = _poly_of(other, self.env)
        if p is None:
            return NotImplemented
        self._divisor_positive(self.poly)
        return Sym.make(_floordiv(p, self.poly), self.env)

    def __mod__(self, other: Any) -> Any:
        q = _poly_of(other, self.env)
        if q is None:
            return NotImplemented
        self._divisor_positive(q)
        return Sym.make(_mod(self.poly, q), self.env)

    def __rmod__(self, other: Any) -> Any:
        p = _poly_of(other, self.env)
        if p is None:
            return NotImplemented
        self._divisor_positive(self.poly)
        return Sym.make(_mod(p, self.poly), self.env)

    def _compare(self, other: Any, op: str) -> Any:
        q = _poly_of(other, self.env)
        if q is None:
            return NotImplemented
        return self.env.decide(self.poly, op, q)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "==")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "!=")

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")

    def __hash__(self) -> int:
        return hash(("Sym", self.poly))

    def __bool__(self) -> bool:
        return self.env.decide(self.poly, "!=", _ZERO)

    def __index__(self) -> int:
        return self.env.concrete(self.poly)

    __int__ = __index__

    def __float__(self) -> float:
        return float(self.env.concrete(self.poly))

    def __repr__(self) -> str:
        return _text(self.env._resolve(self.poly), self.env.symbol_name)

    __str__ = __repr__

    def same_as(self, other: Any) -> bool:
        """Structurally the same expression (no fact recorded)."""
        q = _poly_of(other, self.env)
        return q is not None and self.env._resolve(q) == self.env._resolve(self.poly)

    def lower_bound(self) -> float:
        return _bounds(self.env._resolve(self.poly), self.env._atom_bounds)[0]


# --------------------------------------------------------------------------- helpers


_ATOM_FUNCTIONS = {"//": operator.floordiv, "%": operator.mod, "max": max, "min": min}


def expression(value: Any, atom: Callable[[int], Any], apply: Callable[..., Any]) -> Any:
    """`value` (a Sym or an int) built from its symbols at run time: ``atom(k)`` stands for
    symbol k and ``apply(fn, *args)`` for a call of `fn` (``operator.add``, ``max``, ...) on
    ints or earlier results; an int where the value is constant. For graph nodes that compute a
    size (`OutputGraph.size_node`) and for bytecode that recomputes one after a graph break."""
    if not isinstance(value, Sym):
        return value
    return _expression(value.env._resolve(value.poly), atom, apply)


def _expression(p: Poly, atom: Callable[[int], Any], apply: Callable[..., Any]) -> Any:
    constant = _as_const(p)
    if constant is not None:
        return constant
    total: Any = None
    for monomial, coef in sorted(p, key=lambda mc: not mc[0]):  # the constant last
        term: Any = None
        for a in monomial:
            if isinstance(a, int):
                factor = atom(a)
            else:
                op, x, y = a
                factor = apply(_ATOM_FUNCTIONS[op], _expression(x, atom, apply),
                               _expression(y, atom, apply))
            term = factor if term is None else apply(operator.mul, term, factor)
        if term is None:
            term = abs(coef)
        elif abs(coef) != 1:
            term = apply(operator.mul, abs(coef), term)
        if total is None:
            total = term if coef > 0 else apply(operator.neg, term)
        else:
            total = apply(operator.add if coef > 0 else operator.sub, total, term)
    return 0 if total is None else total



def is_symbolic(value: Any) -> bool:
    """A Sym, or a tuple/list holding one (a shape)."""
    if isinstance(value, Sym):
        return True
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, Sym) for v in value)
    return False


def is_data_dependent(value: Any) -> bool:
    """A size, or a shape holding one, that depends on the data (``len(x[mask])``)."""
    if isinstance(value, Sym):
        return value.env.is_data_dependent(value.env._resolve(value.poly))
    if isinstance(value, (tuple, list)):
        return any(is_data_dependent(v) for v in value)
    return False


def hint(value: Any) -> Any:
    """The traced-time value of a size or shape (no fact recorded)."""
    if isinstance(value, Sym):
        return value.hint
    if isinstance(value, tuple):
        return tuple(hint(v) for v in value)
    return value


def evaluate(value: Any, sizes: "Callable[[int], int] | dict[int, int]") -> Any:
    """The value of a size, shape or Sym once the symbols' values are known: `sizes` maps a
    symbol number to its value (a dict or a function; a missing symbol raises KeyError).
    Records no fact. For backends that run one graph for many sizes."""
    lookup = sizes.__getitem__ if isinstance(sizes, dict) else sizes
    if isinstance(value, Sym):
        return _evaluate(value.env._resolve(value.poly), lookup)
    if isinstance(value, tuple):
        return tuple(evaluate(v, lookup) for v in value)
    return value


def symbol_number(value: Any) -> int | None:
    """k if `value` is exactly the symbol s_k (as an input's dimension is), else None."""
    if isinstance(value, Sym) and len(value.poly) == 1:
        m, c = value.poly[0]
        if c == 1 and len(m) == 1 and isinstance(m[0], int):
            return m[0]
    return None


def _minmax(op: str, a: Any, b: Any) -> Any:
    sym = a if isinstance(a, Sym) else b if isinstance(b, Sym) else None
    if sym is None:
        return min(a, b) if op == "min" else max(a, b)
    env = sym.env
    pa, pb = _poly_of(a, env), _poly_of(b, env)
    diff = env._resolve(_add(pa, pb, -1))
    lo, hi = _bounds(diff, env._atom_bounds)
    if lo >= 0:  # a >= b
        return b if op == "min" else a
    if hi <= 0:
        return a if op == "min" else b
    # Not settled by the bounds: decide from the hints (a fact) rather than carry an opaque
    # min/max atom that later questions could not see through.
    a_is_smaller = env.decide(pa, "<=", pb)
    return (a if a_is_smaller else b) if op == "min" else (b if a_is_smaller else a)


def sym_min(a: Any, b: Any) -> Any:
    return _minmax("min", a, b)


def sym_max(a: Any, b: Any) -> Any:
    return _minmax("max", a, b)

