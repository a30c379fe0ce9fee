"""Random loop programs over scalars and array elements, for tests/fuzz/test_loops_differential.py.

In: a seed (an int). Out: a `LoopProgram`: the Python source of one function
``def f(A, B, n, m, s, k):`` (A, B: NumPy arrays, 1-d or 2-d, float64 or int64, now and then
float32 or int32; n, m: small Python ints, about the arrays' sizes; s: a Python float; k: a
Python int, sometimes huge), the arguments to call it with, and the
``dynamo.config.max_instructions`` to run it under. `make_program(seed)` is deterministic: the
same seed gives the same program and arguments on every machine and Python version (one
`random.Random` makes every choice; no Hypothesis).

What the programs contain (the loop nests "loop kernels" compile to C, and every way they must
stop and leave the rest to Python): ``for`` loops over ``range`` with 1-3 arguments, bounds that
depend on outer loop variables (``range(i)``, ``range(i + 1, n)``, ``range(n - 1, -1, -1)``),
nested up to 3 deep, over the elements of 1-d arrays (``enumerate(A)``,
``enumerate(zip(A, B))``) and over the rows of 2-d arrays (``enumerate(A)``: ``r[0]``,
``r[-1]`` read and written); ``while`` loops on a counter (``while j < n and A[j] > s:``, the counter
incremented first thing in the body, so every loop ends); ``break``/``continue``/``return``
under conditions; ``if``/``elif``/``else`` on scalar comparisons and on array elements, with
``and``/``or``/``not``, in loops and at the top level (sometimes the first statement, before any
loop: the C backend runs a data-dependent one as one kernel); Python int, Python float and NumPy scalar locals (element reads) with
``+ - * / // %``, unary ``-``, ``abs``, ``min``/``max``, ``math.sqrt``, ``math.exp``,
``math.floor``, ``int()``, ``float()``, NumPy ufuncs on scalars (``np.tanh``, ``np.exp``,
``np.log1p``, ``np.maximum``, ``np.power``, ...: NumPy's own loops in a kernel), sums, maxima
and minima of 1-d slices (``A[i, j:].sum()``, ``np.max(B[:i])``), calls of the module's own
functions (`HELPERS`, inlined); augmented assignments on locals, on ``s`` and on elements;
element reads and writes with index expressions (``A[i - 1]``, ``A[i, j + 1]``,
negative constants, computed indices, sometimes out of range on purpose).

And, now and then, what makes a compiled loop stop: Python ints past int64 (``k * 2**62``,
products of big ints: Python's result is exact), division by zero (Python numbers:
ZeroDivisionError; NumPy float64 scalars: inf/nan and a RuntimeWarning), NumPy int64 overflow
(RuntimeWarning), ``math.sqrt`` of a negative and ``math.exp`` of a large number (ValueError,
OverflowError), ``int()`` of inf or NaN, an index out of range (IndexError), a big int or NaN
written into an integer array.

Each program also has a second set of arguments (`LoopProgram.other_args`: the same types and
shapes, other values; n and m may be one off) for a third call.

Invariants that keep most programs running to their end (measured on 1,000 seeds: 63% return,
the rest raise IndexError, ZeroDivisionError, ValueError or OverflowError; 1 in 9 warns):
every local the function returns or reads is assigned before the first loop (no
UnboundLocalError); loop variables and ``while`` counters are never assigned by the body; every
axis of A and B is up to 2 longer than n and m, now and then 1 shorter (``i + 1`` is mostly in
range); loop trip counts stay small (a bound is n, m, an array's length, an outer loop variable
or, at the top level, a constant up to 40, whose variable indexes only as ``t % A.shape[0]``);
no local is multiplied by a local (Python ints grow linearly, not exponentially, over the
iterations). A program runs in well under a millisecond in plain Python.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: (statement kind -> weight) for a statement inside a block; see `_Gen.statement`
STATEMENT_WEIGHTS = {"assign": 6, "augment": 5, "write": 5, "if": 3, "for": 2, "while": 1,
                     "exit": 3, "return": 1}
INT_CONSTANTS = ["0", "1", "2", "3", "-1", "-2", "5", "7"]
FLOAT_CONSTANTS = ["0.5", "1.5", "-1.0", "2.0", "-0.25", "3.0", "0.0"]
#: rarely drawn: the values that make loops deoptimise
RARE_FLOATS = ["1e300", "-0.0", "1e-300", "700.0"]
RARE_INTS = ["2**62", "2**63", "(k * 2**62)", "-2**63", "(n * 2**61)"]
COMPARISONS = ["<", "<=", ">", ">=", "==", "!="]
#: right operands that make a NumPy scalar warn and a Python number raise (`_Gen.stress`)
STRESS = ["* 2**62", "/ 0", "* 1e300", "// 0", "- 2**63", "% 0"]
#: dynamo.config.max_instructions for a program: None (the default) unrolls most of these
#: loops; small budgets make them run in Python with the body compiled as a loop body function
BUDGETS = [None, None, 150, 400, 1500]


@dataclass
class LoopProgram:
    seed: int
    source: str
    #: (A, B, n, m, s, k): the oracle deep-copies them for every run
    args: tuple
    max_instructions: int | None
    features: set[str] = field(default_factory=set)
    #: a third call's arguments: other values of the same types and shapes (guards, recompiles)
    other_args: tuple | None = None

    def describe(self) -> str:
        """Everything needed to run it again: the arguments as Python, the budget, the source."""
        lines = [f"# seed {self.seed} (alone: DYNAMO_FUZZ_LOOPS_SEED={self.seed} "
                 f"DYNAMO_FUZZ_LOOPS=1), dynamo.config.max_instructions={self.max_instructions}",
                 "from numpy import inf, nan"]
        for label, args in (("", self.args), ("other (third call): ", self.other_args)):
            if args is not None:
                a, b, n, m, s, k = args
                lines += [f"{label}A = np.array({a.tolist()!r}, dtype=np.{a.dtype})",
                          f"{label}B = np.array({b.tolist()!r}, dtype=np.{b.dtype})",
                          f"{label}n, m, s, k = {n!r}, {m!r}, {s!r}, {k!r}"]
        return "\n".join(lines + ["--- source ---", self.source])


@dataclass
class _Scope:
    ints: list[str]  # Python int locals statements may rebind
    floats: list[str]  # Python float locals (and s)
    values: list[str]  # locals holding any number, mostly NumPy scalars read from arrays
    fixed: list[str]  # ints nothing in the body rebinds: n, m, loop variables, while counters
    loops: list[str]  # the enclosing loops' variables (and while counters), innermost last
    wide: list[str] = field(default_factory=list)  # loop variables past the arrays' sizes

    def child(self) -> _Scope:
        return _Scope(list(self.ints), list(self.floats), list(self.values), list(self.fixed),
                      list(self.loops), list(self.wide))


class _Gen:
    def __init__(self, rng: random.Random, ndims: dict[str, int]) -> None:
        self.r = rng
        self.ndims = ndims  # array name -> ndim
        self.lines: list[str] = []
        self.counter = 0
        self.features: set[str] = set()
        self.max_lines = rng.randint(8, 24)

    # helpers ------------------------------------------------------------------------------

    def chance(self, percent: int) -> bool:
        return self.r.random() * 100 < percent

    def pick(self, options: list[str]) -> str:
        return self.r.choice(options)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def full(self) -> bool:
        return len(self.lines) >= self.max_lines

    # expressions --------------------------------------------------------------------------

    def int_atom(self, scope: _Scope, free: bool = False) -> str:
        roll = self.r.randrange(100)
        if roll < 35 and scope.loops:
            return self.pick(scope.loops)
        if roll < 60 and scope.ints and not free:
            return self.pick(scope.ints)
        if roll < 72:
            return self.pick(scope.fixed)
        if roll < 75:
            return self.big_int(RARE_INTS)
        if roll < 78:
            return "k"
        if roll < 82:
            return f"len({self.pick(list(self.ndims))})"
        return self.pick(INT_CONSTANTS)

    def big_int(self, options: list[str]) -> str:
        self.features.add("big_int")
        return self.pick(options)

    def arithmetic(self, sub: Callable[[], str], rhs: Callable[[str], str],
                   ops: list[str]) -> str:
        """A form every kind of number has: ``sub op rhs`` (``rhs(op)``: the right operand for
        that operator), ``-sub``, ``abs(sub)``, ``min``/``max``."""
        def binary() -> str:
            op = self.pick(ops)
            self.features.add({"/": "division", "//": "int_division",
                               "%": "int_division"}.get(op, "arithmetic"))
            return f"({sub()} {op} {rhs(op)})"

        return self.r.choice([
            binary, binary, binary,
            lambda: f"(-{sub()})",
            lambda: f"abs({sub()})",
            lambda: f"{self.pick(['min', 'max'])}({sub()}, {rhs('min')})",
        ])()

    def int_expr(self, scope: _Scope, depth: int = 0, free: bool = False) -> str:
        """A Python int. ``free``: no local a statement rebinds (the right side of every
        product is free, so no local is ever multiplied by itself: its size grows linearly)."""
        if depth >= 2 or self.chance(40):
            return self.int_atom(scope, free)
        sub = lambda: self.int_expr(scope, depth + 1, free)  # noqa: E731
        if self.chance(55):
            return self.arithmetic(
                sub, lambda op: self.int_expr(scope, depth + 1, free or op == "*"),
                ["+", "-", "*", "+", "//", "%"])
        floats = lambda: self.float_expr(scope, depth + 1)  # noqa: E731
        return self.r.choice([
            lambda: f"int({floats()})",
            lambda: f"math.floor({floats()})",
            lambda: f"int({self.element(scope)})",
            lambda: f"({sub()} % {self.r.randint(2, 5)})",
            lambda: f"({sub()} * {self.big_int(['2**40', '2**62', 'k'])})",
        ])()

    def float_atom(self, scope: _Scope) -> str:
        roll = self.r.randrange(100)
        if roll >= 95:  # NumPy's own loop of a ufunc on a scalar (a warning now and then)
            self.features.add("ufunc")
            name = self.pick(["tanh", "exp", "log1p", "sin", "arctan", "cbrt", "maximum",
                              "arctan2", "power", "hypot"])
            if name in ("maximum", "arctan2", "power", "hypot"):  # (two arguments)
                return f"np.{name}({self.float_atom(scope)}, {self.number(scope, 2)})"
            return f"np.{name}({self.float_atom(scope)})"
        if roll < 45 and scope.floats:
            return self.pick(scope.floats)
        if roll < 55:
            return "s"
        if roll < 59:
            self.features.add("rare_float")
            return self.pick(RARE_FLOATS)
        return self.pick(FLOAT_CONSTANTS)

    def float_expr(self, scope: _Scope, depth: int = 0) -> str:
        if depth >= 2 or self.chance(40):
            return self.float_atom(scope)
        sub = lambda: self.float_expr(scope, depth + 1)  # noqa: E731
        ints = lambda: self.int_expr(scope, depth + 1)  # noqa: E731
        if self.chance(55):
            return self.arithmetic(sub, lambda op: self.pick([sub, sub, ints])(),
                                   ["+", "-", "*", "/"])
        self.features.add("math")
        return self.r.choice([
            lambda: f"math.sqrt({sub()})",
            lambda: f"math.exp({sub()})",
            lambda: f"float({ints()})",
            lambda: f"({ints()} / {ints()})",
            lambda: f"float({self.element(scope)})",
        ])()

    def index_part(self, scope: _Scope, array: str, axis: int) -> str:
        roll = self.r.randrange(100)
        near = [v for v in scope.loops if v not in scope.wide]  # bounded by about n or m
        if scope.wide and roll < 15:
            # a long loop's variable, wrapped (ZeroDivisionError for an empty axis)
            return f"{self.pick(scope.wide)} % {array}.shape[{axis}]"
        if near and roll < 55:
            return self.pick(near)
        if near and roll < 70:
            return f"{self.pick(near)} {self.pick(['-', '+'])} 1"
        if near and roll < 75:
            return f"n - 1 - {self.pick(near)}"
        if roll < 88:
            return self.pick(["0", "1", "-1", "-2", "2"])
        self.features.add("computed_index")
        return f"{self.int_expr(scope, 1)} % {self.pick(['3', '2', 'n', '4'])}"

    def element(self, scope: _Scope, array: str | None = None) -> str:
        array = array or self.pick(["A", "A", "B"])
        parts = [self.index_part(scope, array, axis) for axis in range(self.ndims[array])]
        return f"{array}[{', '.join(parts)}]"

    def helper_call(self, scope: _Scope, depth: int) -> str:
        """A call of one of the module's `HELPERS` (inlined into a kernel)."""
        self.features.add("helper")
        name = self.pick(["h_gap", "h_gap", "h_twice", "h_maybe"])
        args = [self.number(scope, depth + 1)] + (
            [self.number(scope, depth + 1)] if name == "h_gap" else [])
        return f"{name}({', '.join(args)})"

    def reduction(self, scope: _Scope) -> str:
        """A sum, max or min of a 1-d slice: NumPy's own loop (a max of an empty slice raises
        ValueError; a float sum may overflow and warn)."""
        self.features.add("reduction")
        array = self.pick(["A", "B"])
        lo, hi = (self.pick(["", self.index_part(scope, array, 0)]) for _ in range(2))
        rows = [self.index_part(scope, array, 0)] if self.ndims[array] == 2 else []
        view = f"{array}[{', '.join([*rows, f'{lo}:{hi}'])}]"
        name = self.pick(["sum", "sum", "max", "min"])
        return self.pick([f"{view}.{name}()", f"np.{name}({view})"])

    def value_expr(self, scope: _Scope, depth: int = 0, free: bool = False) -> str:
        """Any number; mostly NumPy scalars (element reads and arithmetic on them). A value
        local may hold a Python int: products keep one side ``free`` (see `int_expr`)."""
        if depth >= 2 or self.chance(35):
            if scope.values and self.chance(40) and not free:
                return self.pick(scope.values)
            if self.chance(8):
                return self.reduction(scope)
            if self.chance(6):
                return self.helper_call(scope, depth)
            return self.element(scope)
        sub = lambda: self.value_expr(scope, depth + 1, free)  # noqa: E731
        if self.chance(60):
            return self.arithmetic(
                sub, lambda op: self.number(scope, depth + 1, free or op == "*"),
                ["+", "-", "*", "+", "-", "*", "/", "//", "%"])
        op = self.pick(["+", "-", "*"])
        return self.r.choice([
            lambda: f"math.{self.pick(['sqrt', 'exp', 'floor'])}({sub()})",
            lambda: f"{self.pick(['int', 'float'])}({sub()})",
            lambda: f"({self.number(scope, depth + 1, free or op == '*')} {op} {sub()})",
            lambda: self.stress(sub()),
            lambda: self.stress(sub()),
        ])()

    def stress(self, operand: str) -> str:
        """What makes a NumPy scalar warn (int64 overflow, division by zero, float overflow)
        and a Python number raise."""
        self.features.add("stress")
        return f"({operand} {self.pick(STRESS)})"

    def number(self, scope: _Scope, depth: int = 0, free: bool = False) -> str:
        """A Python int, a Python float or a NumPy scalar (floats are bounded: always free)."""
        roll = self.r.randrange(3)
        if roll == 0:
            return self.int_expr(scope, depth, free)
        if roll == 1:
            return self.float_expr(scope, depth)
        return self.value_expr(scope, depth, free)

    def condition(self, scope: _Scope, depth: int = 0) -> str:
        roll = self.r.randrange(100)
        if roll < 10 and depth == 0:
            joiner = self.pick([" and ", " or "])
            self.features.add("bool_op")
            return joiner.join(self.condition(scope, 1) for _ in range(2))
        if roll < 15:
            self.features.add("bool_op")
            return f"not ({self.condition(scope, depth + 1)})"
        if roll < 40:
            self.features.add("element_branch")
            return f"{self.element(scope)} {self.pick(COMPARISONS)} {self.pick(['s', '0', '0.5'])}"
        if roll < 50 and scope.loops:
            return f"{self.pick(scope.loops)} % {self.r.randint(2, 3)} == {self.r.randint(0, 1)}"
        if roll < 58 and len(scope.loops) >= 2:
            a, b = self.r.sample(scope.loops, 2)
            return f"{a} {self.pick(COMPARISONS)} {b}"
        return (f"{self.number(scope, 1)} {self.pick(COMPARISONS)} "
                f"{self.number(scope, 1)}")

    # statements ---------------------------------------------------------------------------

    def block(self, scope: _Scope, indent: int, count: int) -> None:
        start = len(self.lines)
        for _ in range(count):
            if self.full() and len(self.lines) > start:
                break
            self.statement(scope, indent)
        if len(self.lines) == start:
            self.emit(indent, "pass")

    def statement(self, scope: _Scope, indent: int) -> None:
        depth = len(scope.loops)
        allowed = {"for": depth < 3 and not self.full(), "while": depth < 3 and not self.full(),
                   "if": not self.full(), "exit": depth > 0, "return": depth > 0}
        kinds = [kd for kd in STATEMENT_WEIGHTS if allowed.get(kd, True)]
        kind = self.r.choices(kinds, [STATEMENT_WEIGHTS[kd] for kd in kinds])[0]
        getattr(self, f"stmt_{kind}")(scope, indent)

    def stmt_assign(self, scope: _Scope, indent: int) -> None:
        roll = self.r.randrange(3)
        if roll == 0 and scope.ints:
            self.emit(indent, f"{self.pick(scope.ints)} = {self.int_expr(scope)}")
        elif roll == 1 and scope.floats:
            self.emit(indent, f"{self.pick(scope.floats)} = {self.float_expr(scope)}")
        else:
            self.emit(indent, f"{self.pick(scope.values)} = {self.value_expr(scope)}")

    def stmt_augment(self, scope: _Scope, indent: int) -> None:
        self.features.add("augmented")
        roll = self.r.randrange(4)
        if roll == 0 and scope.ints:
            op = self.pick(["+=", "-=", "+=", "*=", "//=", "%="])
            # *= only by a free expression: a local squared on every iteration would grow
            # without bound
            rhs = self.int_expr(scope, 1, free=op == "*=")
            self.emit(indent, f"{self.pick(scope.ints)} {op} {rhs}")
        elif roll == 1:
            target = self.pick(scope.floats)  # s is one of them
            self.emit(indent, f"{target} {self.pick(['+=', '-=', '*=', '/='])} "
                              f"{self.pick([self.float_expr(scope, 1), self.element(scope)])}")
        else:
            op = self.pick(['+=', '-=', '*='])
            self.emit(indent, f"{self.pick(scope.values)} {op} "
                              f"{self.value_expr(scope, 1, free=op == '*=')}")

    def stmt_write(self, scope: _Scope, indent: int) -> None:
        self.features.add("element_write")
        target = self.element(scope, self.pick(["A", "A", "B"]))
        op = self.pick(["=", "=", "+=", "-=", "*="])
        rhs = self.number(scope, 1) if self.chance(50) else self.value_expr(scope, 1)
        self.emit(indent, f"{target} {op} {rhs}")

    def stmt_if(self, scope: _Scope, indent: int) -> None:
        self.features.add("if")
        self.emit(indent, f"if {self.condition(scope)}:")
        self.block(scope.child(), indent + 1, self.r.randint(1, 2))
        while self.chance(25) and not self.full():
            self.features.add("elif")
            self.emit(indent, f"elif {self.condition(scope)}:")
            self.block(scope.child(), indent + 1, self.r.randint(1, 2))
        if self.chance(45) and not self.full():
            self.emit(indent, "else:")
            self.block(scope.child(), indent + 1, self.r.randint(1, 2))

    def stmt_exit(self, scope: _Scope, indent: int) -> None:
        exit_ = self.pick(["break", "continue"])
        self.features.add(exit_)
        self.emit(indent, f"if {self.condition(scope)}:")
        self.emit(indent + 1, exit_)

    def stmt_return(self, scope: _Scope, indent: int) -> None:
        self.features.add("early_return")
        self.emit(indent, f"if {self.condition(scope)}:")
        self.emit(indent + 1, f"return {self.returned(scope)}")

    def range_args(self, scope: _Scope, top: bool) -> tuple[str, bool]:
        """The arguments of a ``range`` and whether it may go far past the arrays' sizes."""
        outer = scope.loops[-1] if scope.loops else None
        if outer in scope.wide:
            outer = None
        size = self.pick(["n", "m", "n", f"len({self.pick(list(self.ndims))})"])
        forms = [size, f"{self.r.randint(0, 6)}", f"1, {size}", f"{size} - 1, -1, -1",
                 f"0, {size}, 2", f"min({size}, {self.r.randint(1, 4)})", f"{size} + 1"]
        if outer:
            forms += [outer, f"{outer} + 1, {size}", f"{outer}, {size}", f"{outer}, -1, -1",
                      f"{outer} + 1"]
        if top and self.chance(15):
            self.features.add("long_loop")
            return str(self.r.randint(30, 40)), True
        return self.pick(forms), False

    def stmt_for(self, scope: _Scope, indent: int) -> None:
        self.features.add("for")
        var = "ijq"[len(scope.loops)]  # (statement: at most 3 loops deep)
        flat = [a for a, d in self.ndims.items() if d == 1]
        rows = [a for a, d in self.ndims.items() if d == 2]
        items: list[str] = []
        if rows and self.chance(15):  # over the rows of a 2-d array (views: writes go to it)
            self.features.add("for_rows")
            row = self.fresh("r")
            self.emit(indent, f"for {var}, {row} in enumerate({self.pick(rows)}):")
            items = [f"{row}[0]", f"{row}[-1]", f"{row}[{var} % len({row})]"]
            wide = False
        elif flat and self.chance(20):  # over the elements of 1-d arrays
            self.features.add("for_items")
            items = [self.fresh("e") for _ in range(2 if len(flat) == 2 else 1)]
            over = f"zip({', '.join(flat)})" if len(items) == 2 else flat[0]
            names = f"({', '.join(items)})" if len(items) == 2 else items[0]
            self.emit(indent, f"for {var}, {names} in enumerate({over}):")
            wide = False
        else:
            args, wide = self.range_args(scope, not scope.loops)
            self.emit(indent, f"for {var} in range({args}):")
        body = scope.child()
        body.values.extend(items)
        body.loops.append(var)
        if wide:
            body.wide.append(var)
        body.fixed.append(var)
        self.block(body, indent + 1, self.r.randint(1, 4))

    def stmt_while(self, scope: _Scope, indent: int) -> None:
        self.features.add("while")
        counter = self.fresh("w")
        start = self.pick(["0", "0", "1", scope.loops[-1] if scope.loops else "0"])
        bound = self.pick(["n", "m", "n", f"len({self.pick(list(self.ndims))})",
                           str(self.r.randint(2, 5))])
        self.emit(indent, f"{counter} = {start}")
        test = f"{counter} < {bound}"
        if self.chance(60):
            test += f" and {self.condition(scope.child(), 1)}"
        self.emit(indent, f"while {test}:")
        # the counter first: whatever the body does (continue included), the loop ends
        self.emit(indent + 1, f"{counter} += 1")
        body = scope.child()
        body.loops.append(counter)
        body.fixed.append(counter)
        self.block(body, indent + 1, self.r.randint(1, 3))
        scope.fixed.append(counter)  # readable after the loop (not rebound)

    def returned(self, scope: _Scope) -> str:
        names = scope.ints + scope.floats + scope.values
        chosen = self.r.sample(names, self.r.randint(1, min(4, len(names))))
        return ", ".join(chosen) + ("," if len(chosen) == 1 else "")


def _shape(rng: random.Random, ndim: int, bound: int) -> tuple[int, ...]:
    return tuple(max(0, bound + rng.choice([2, 2, 1, 1, 1, 0, 0, -1])) for _ in range(ndim))


def _array(rng: random.Random, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    size = math.prod(shape)
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        rare = [int(info.max), int(info.min), 2**31 - 1, 2**62, 0]
        values = [rng.choice(rare) if rng.random() < 0.04 else rng.randint(-5, 6)
                  for _ in range(size)]
        values = [v if info.min <= v <= info.max else 0 for v in values]
    else:
        big = float(np.finfo(dtype).max)
        rare = [float("nan"), float("inf"), -big, big, 0.0, -0.0, 1e-30]
        values = [rng.choice(rare) if rng.random() < 0.04
                  else rng.choice([rng.randint(-4, 4), rng.randint(-8, 8) / 4, 0.0])
                  for _ in range(size)]
    return np.array(values, dtype=dtype).reshape(shape)


#: Functions every program has, which its loops may call (a loop kernel inlines them): a
#: branch that returns either argument's type, a division, a call of a call, and a local
#: that is unbound on one path (UnboundLocalError from inside the callee).
HELPERS = """
def h_gap(x, y):
    if x < y:
        return y - x
    return x / 2 + y


def h_scale(x):
    t = x * 3
    return t - 1


def h_twice(x):
    return h_scale(h_scale(x))


def h_maybe(x):
    if x > -2:
        r = x * 2
    return r
"""


def _dtype(rng: random.Random) -> str:
    return rng.choice(["float64"] * 5 + ["int64"] * 3 + ["float32", "int32"])


def make_program(seed: int) -> LoopProgram:
    """The program of `seed` (deterministic)."""
    rng = random.Random(seed)
    ndims = {"A": rng.choice([1, 1, 2]), "B": rng.choice([1, 1, 2])}
    gen = _Gen(rng, ndims)
    gen.emit(0, "import math")
    gen.emit(0, "import numpy as np")
    gen.emit(0, "")
    gen.lines += HELPERS.splitlines()
    gen.emit(0, "")
    gen.emit(0, "")
    gen.max_lines += len(gen.lines)  # (a program's size counts from its function)
    gen.emit(0, "def f(A, B, n, m, s, k):")
    header = len(gen.lines)
    scope = _Scope(ints=[], floats=["s"], values=[], fixed=["n", "m"], loops=[])
    # the locals, all bound before the first loop
    for _ in range(rng.randint(1, 2)):
        name = gen.fresh("c")
        gen.emit(1, f"{name} = {rng.choice(['0', '1', 'n', 'k', '-1'])}")
        scope.ints.append(name)
    for _ in range(rng.randint(0, 2)):
        name = gen.fresh("x")
        gen.emit(1, f"{name} = {rng.choice(['0.0', '1.0', 's', '-0.5'])}")
        scope.floats.append(name)
    for _ in range(rng.randint(1, 2)):
        name = gen.fresh("v")
        gen.emit(1, f"{name} = {rng.choice(['0', '0.0', 's', 'k', '1'])}")
        scope.values.append(name)
    gen.max_lines += len(gen.lines) - header
    # a loop first (or now and then an if statement: a data-dependent one runs as an if
    # statement's kernel), then a few more statements (loops, ifs, plain ones) at the top level
    first = rng.random()
    if first < 0.15:
        gen.features.add("top_if")
        gen.stmt_if(scope, 1)
    elif first < 0.8:
        gen.stmt_for(scope, 1)
    else:
        gen.stmt_while(scope, 1)
    for _ in range(rng.randint(0, 3)):
        if not gen.full():
            gen.statement(scope, 1)
    gen.emit(1, f"return {gen.returned(scope)}")
    # every axis is a little longer than the loops' bounds n and m (most indices near them
    # are in range), or as long (then i + 1 is not), or now and then shorter
    n, m = rng.choice([0, 1, 2, 3, 3, 4, 4, 5, 6]), rng.choice([1, 2, 3, 4, 5])
    a_dtype = _dtype(rng)
    b_dtype = a_dtype if rng.random() < 0.6 else _dtype(rng)
    a = _array(rng, _shape(rng, ndims["A"], max(n, m)), a_dtype)
    b = _array(rng, _shape(rng, ndims["B"], max(n, m)), b_dtype)
    args = (a, b, n, m, *_floats_and_ints(rng))
    # other values of the same types and shapes: n and m one off now and then
    other = (_array(rng, a.shape, a_dtype), _array(rng, b.shape, b_dtype),
             max(0, n + rng.choice([0, 0, 1, -1])), max(0, m + rng.choice([0, 0, 1, -1])),
             *_floats_and_ints(rng))
    return LoopProgram(seed, "\n".join(gen.lines) + "\n", args, rng.choice(BUDGETS),
                       gen.features, other)


def _floats_and_ints(rng: random.Random) -> tuple[float, int]:
    """s and k."""
    return (rng.choice([0.5, -1.0, 0.0, 2.5, 1.25, -0.0, float("nan"), 1e300, 3.0]),
            rng.choice([0, 1, 2, -3, 5, 7, 3, 2**31, 2**40, 2**62, -2**63, 2**64]))
