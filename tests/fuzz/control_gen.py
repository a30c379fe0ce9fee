"""Random NumPy programs *with control flow*, for tests/fuzz/test_control_flow_property.py.

In: a Hypothesis `draw` (through the `control_programs()` strategy). Out: a `ControlProgram`:
Python source defining generated helper functions and one entry function ``f(x, y, n)``, the
concrete arguments to call it with, and an optional ``dynamo.config.max_instructions`` to run it
under (a small budget forces the "loop not unrolled, body compiled as a loop body function" path
cheaply). Every choice is a small integer draw, so Hypothesis shrinks a failing program towards
the first alternative of each choice (the simplest statement, the shortest block).

What the programs contain: data-dependent branches (``if a.sum() > c:``, ``if float(a.max()) <
t:``, ``assert``), constant branches (shapes, dtypes, the Python int ``n``, the loop counter),
calls of generated helpers (plain, with defaults and keyword-only arguments, ``*args``, nested
calls, helpers that print or branch on data), lambdas and closures over locals, ``for`` loops
over ``range(k)`` (short: unrolled; long or containing a print: run in Python with a compiled
body) and over the rows of an array, with ``break``/``continue``/early ``return``, ``while`` loops
with a data-dependent exit (and a counter that bounds them), ``dynamo.graph_break()``, prints of
shapes, dtypes and values, lists built with ``append``, tuple returns, in-place operations on
locals, views and arguments (``a += ...``, ``a[i] = ...``, ``np.add(a, b, out=a)``), and, now
and then, code that raises (``raise``, failing ``assert``, an out-of-bounds index, a wrong call),
plus data-dependent conditional expressions inside expressions (values wait on the stack at the
break), ``float()`` of array data, comprehensions, tuple unpacking, ``nonlocal`` rebinding from a
closure, ``try``/``except`` and ``with`` statements (``np.errstate``, ``contextlib.suppress``).
Each program comes with a second set of arguments (same types and shapes, other values) to check
the guards.

Invariants that keep most programs meaningful (instead of raising early): every array variable
in scope has the shape of ``x``; names first bound inside a block are never read after it (no
accidental UnboundLocalError); ``while`` loops always count towards a bound first thing in the
body.

`KNOWN_BUGS` names open npdynamo bugs found by this fuzzer; the generator avoids the pattern of
each listed bug (see the report of the helper that wrote this file for sources and details).
Remove an entry once fixed: the property test then covers it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

#: Open bugs whose patterns the generator avoids. Each name is checked in `_Gen` where the pattern
#: would be generated. Each has a minimal repro in tests/dynamo/ (strict xfail), in the file of its
#: behaviour under a comment naming the pattern (test_loop_bodies.py, test_recompiles.py,
#: test_dynamic_shapes.py, ...): when that test starts passing, remove the name here. (Removed after
#: 2,000 examples on each backend: try_except_then_call, iterate_rows_of_mutated_array,
#: list_append_then_rebind_in_loop; while_graph_break_continue and return_in_loop_inside_while after
#: their fixes, property test re-run on the eager backend; raise_on_empty_args_unguarded: a user
#: error is no longer a graph break; resume_of_helper_recompiles_per_value: a Python float argument
#: whose value changed is a graph input, issue 7; python_float_nan_sign: NaN constants keep their
#: sign in graph code and guards, issue 7.)
KNOWN_BUGS: set[str] = {
}

#: statement kind (see `_Gen.statement`) -> weight; 0 = a new variable comes first (shrinking)
STATEMENT_WEIGHTS = {0: 3, 4: 2, 5: 1, 6: 3, 7: 4, 8: 2, 9: 2, 10: 1, 11: 3, 12: 2, 13: 1, 14: 1,
                     15: 2, 16: 3, 17: 2, 18: 1, 19: 2, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1,
                     25: 1}

SHAPES = [(4,), (3,), (2, 3), (5,), (3, 2)]
X_DTYPES = ["float64", "float32", "int64"]
CONSTANTS = ["0.0", "0.5", "-1.0", "2.0", "1.5", "-0.25", "3.0"]


@dataclass
class ControlProgram:
    source: str
    args: tuple  # (x, y, n)
    max_instructions: int | None
    features: set[str] = field(default_factory=set)
    #: a second call with other values of the same types and shapes (guards, recompiles)
    other_args: tuple | None = None

    def describe(self) -> str:
        text = f"max_instructions={self.max_instructions}\n"
        for label, args in (("", self.args), ("other ", self.other_args)):
            if args is None:
                continue
            x, y, n = args
            text += (f"{label}args: x = np.array({x.tolist()!r}, dtype=np.{x.dtype}); "
                     f"y = np.array({y.tolist()!r}, dtype=np.{y.dtype}); n = {n}\n")
        return text + f"--- source ---\n{self.source}"


@dataclass
class _Helper:
    name: str
    arrays: int  # positional array parameters
    keywords: tuple[str, ...] = ()  # optional scalar parameters (defaults)
    kwonly: tuple[str, ...] = ()
    star: bool = False  # def h(*ts)


@dataclass
class _Scope:
    arrays: list[str]
    scalars: list[str]  # NumPy scalars (reductions)
    ints: list[str]  # Python ints (n, loop counters)
    callables: list[tuple[str, int]]  # lambdas / closures: (name, number of array params)

    def child(self) -> _Scope:
        return _Scope(list(self.arrays), list(self.scalars), list(self.ints),
                      list(self.callables))


class _Gen:
    def __init__(self, draw: Callable, shape: tuple[int, ...], x_dtype: str) -> None:
        self._draw = draw
        self.unary = ["sin", "cos", "tanh", "abs"]
        self.shape = shape
        self.x_dtype = x_dtype
        self.lines: list[str] = []
        self.counter = 0
        self.helpers: list[_Helper] = []
        self.features: set[str] = set()
        self.in_helper = False
        self.has_list = False
        self.in_while = 0  # while loops around the current statement

    # drawing -----------------------------------------------------------------------------

    def int(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))

    def pick(self, options: list) -> Any:
        return options[self.int(0, len(options) - 1)]

    def chance(self, percent: int) -> bool:
        # 0 shrinks to "no": the simpler program
        return self.int(0, 99) >= 100 - percent

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    # expressions -------------------------------------------------------------------------

    def array(self, scope: _Scope, depth: int = 0) -> str:
        leaf = self.pick(scope.arrays)
        if depth >= 2 or self.int(0, 2) == 0:
            return leaf
        kind = self.int(0, 18)
        sub = lambda: self.array(scope, depth + 1)
        if kind == 0:
            return f"np.{self.pick(self.unary)}({sub()})"
        if kind == 1:
            return f"({sub()} + {sub()})"
        if kind == 2:
            return f"({sub()} - {self.pick(CONSTANTS)})"
        if kind == 3:
            return f"({sub()} * {self.pick(CONSTANTS)})"
        if kind == 4:
            return f"np.maximum({sub()}, {sub()})"
        if kind == 5:
            return f"np.where({sub()} > {self.pick(CONSTANTS)}, {sub()}, {sub()})"
        if kind == 6 and scope.scalars:
            return f"({sub()} * {self.pick(scope.scalars)})"
        if kind == 7 and scope.ints:
            return f"({sub()} + {self.pick(scope.ints)})"
        if kind == 8:
            return f"({sub()} / (np.abs({sub()}) + 1.0))"
        if kind == 9 and self.helpers:
            return self.helper_call(scope, depth + 1)
        if kind == 10 and scope.callables:
            name, nargs = self.pick(scope.callables)
            return f"{name}({', '.join(sub() for _ in range(nargs))})"
        if kind == 11 and "python_float_nan_sign" not in KNOWN_BUGS:
            # may divide by zero: RuntimeWarnings must match too
            return f"({sub()} / {sub()})"
        if kind == 12:
            return f"{sub()}[::-1]" if len(self.shape) == 1 else f"{sub()}[::-1, :]"
        if kind == 13:
            return f"np.clip({sub()}, -1.0, {self.pick(['1.0', '2.5'])})"
        if kind == 14:
            # a data-dependent branch inside an expression: values wait on the stack
            self.features.add("ternary")
            return f"({sub()} if {self.condition(scope, None)} else {sub()})"
        if kind == 15:
            self.features.add("float_value")
            return f"({sub()} * float({sub()}.mean()))"
        if kind == 16:
            return f"{sub()}.copy()"
        if kind == 17:
            # a comprehension is a nested function of its own
            self.features.add("comprehension")
            return f"sum([np.abs(t) for t in ({sub()}, {sub()})])"
        if kind == 18 and not self.in_helper:
            return f"({sub()} * (n + 1))"
        return leaf

    def helper_call(self, scope: _Scope, depth: int) -> str:
        h = self.pick(self.helpers)
        self.features.add("helper_call")
        positional = [self.array(scope, depth) for _ in range(h.arrays)]
        keyword = []
        if h.star:
            positional += [self.array(scope, depth) for _ in range(self.int(0, 2))]
        by_keyword = False
        for kw in h.keywords:
            mode = self.int(0, 2)
            if mode == 1 and not by_keyword:
                positional.append(self.pick(CONSTANTS))
            elif mode == 2:
                by_keyword = True  # later defaults can only be passed by keyword now
                keyword.append(f"{kw}={self.pick(CONSTANTS)}")
            else:
                by_keyword = True
        for kw in h.kwonly:
            if self.chance(50):
                keyword.append(f"{kw}={self.pick(CONSTANTS)}")
        return f"{h.name}({', '.join(positional + keyword)})"

    def scalar(self, scope: _Scope) -> str:
        arr = self.array(scope, 1)
        kind = self.int(0, 4)
        if kind == 0:
            return f"{arr}.sum()"
        if kind == 1:
            return f"{arr}.max()"
        if kind == 2:
            return f"np.mean({arr})"
        if kind == 3:
            return f"float({arr}.min())"
        return f"{arr}[0].sum()"

    def condition(self, scope: _Scope, in_loop: str | None) -> str:
        kind = self.int(0, 9)
        if kind <= 2:
            self.features.add("data_branch")
            return f"{self.scalar(scope)} > {self.pick(CONSTANTS)}"
        if kind == 3:
            self.features.add("data_branch")
            return f"float({self.array(scope, 1)}.max()) < {self.pick(CONSTANTS)}"
        if kind == 4 and not self.in_helper:
            return self.pick([f"x.ndim == {len(self.shape)}", "x.ndim == 2", "x.shape[0] > 3",
                              "x.dtype == np.float32", "x.dtype.kind == 'i'",
                              "y.size >= 6"])
        if kind == 5 and not self.in_helper:
            return f"n > {self.int(0, 4)}"
        if kind == 6 and in_loop:
            return f"{in_loop} % {self.int(2, 3)} == {self.int(0, 1)}"
        if kind == 7 and scope.scalars:
            return f"{self.pick(scope.scalars)} < {self.pick(CONSTANTS)}"
        if kind == 8:
            self.features.add("bool_op")
            return (f"{self.condition(scope, in_loop)} {self.pick(['and', 'or'])} "
                    f"{self.condition(scope, in_loop)}")
        if kind == 9 and self.has_list and not self.in_helper:
            return f"len(lst) > {self.int(0, 3)}"
        return f"{self.scalar(scope)} < {self.pick(CONSTANTS)}"

    def index(self, scope: _Scope, in_loop: str | None) -> str:
        size = self.shape[0]
        if in_loop and self.chance(50):
            return f"{in_loop} % {size}"
        return str(self.int(-size, size - 1))

    # statements --------------------------------------------------------------------------

    def block(self, scope: _Scope, indent: int, depth: int, in_loop: str | None,
              min_statements: int = 1) -> None:
        count = self.int(min_statements, [6, 4, 3][min(depth, 2)])
        start = len(self.lines)
        for _ in range(count):
            self.statement(scope, indent, depth, in_loop)
        if len(self.lines) == start:
            self.emit(indent, "pass")

    def statement(self, scope: _Scope, indent: int, depth: int, in_loop: str | None) -> None:
        nest = depth < 2
        allowed = {
            7: nest, 11: nest and not self.in_helper, 12: nest and not self.in_helper,
            13: not self.in_helper, 14: not self.in_helper,
            15: self.has_list and not self.in_helper, 16: bool(in_loop),
        22: True, 23: nest and "try_except_then_call" not in KNOWN_BUGS,
        24: not self.in_helper, 25: nest,
            17: nest and not in_loop, 19: bool(self.helpers),
        }
        kinds = [k for k in STATEMENT_WEIGHTS if allowed.get(k, True)]
        roll = self.int(0, sum(STATEMENT_WEIGHTS[k] for k in kinds) - 1)
        for kind in kinds:  # the first kind (a new variable) is what shrinking goes to
            roll -= STATEMENT_WEIGHTS[kind]
            if roll < 0:
                break
        if kind <= 3:  # new array variable
            name = self.fresh("a")
            self.emit(indent, f"{name} = {self.array(scope)}")
            scope.arrays.append(name)
        elif kind == 4:  # rebind an existing variable (loop-carried when in a loop)
            target = self.pick(scope.arrays)
            self.emit(indent, f"{target} = {self.array(scope)}")
        elif kind == 5:
            name = self.fresh("s")
            self.emit(indent, f"{name} = {self.scalar(scope)}")
            scope.scalars.append(name)
        elif kind == 6:  # in-place
            self.features.add("inplace")
            target = self.pick(scope.arrays)
            form = self.int(0, 4)
            if form == 0:
                self.emit(indent, f"{target} += {self.array(scope)}")
            elif form == 1:
                self.emit(indent, f"{target}[{self.index(scope, in_loop)}] = "
                                  f"{self.pick(CONSTANTS)}")
            elif form == 2:
                self.emit(indent, f"{target}[1:] *= {self.pick(CONSTANTS)}")
            elif form == 3:
                self.emit(indent, f"np.add({target}, {self.array(scope)}, out={target})")
            else:
                self.emit(indent, f"{target} *= {self.pick(CONSTANTS)}")
        elif kind == 7 and nest:  # if / else
            self.emit(indent, f"if {self.condition(scope, in_loop)}:")
            self.block(scope.child(), indent + 1, depth + 1, in_loop)
            if self.chance(60):
                self.emit(indent, "else:")
                self.block(scope.child(), indent + 1, depth + 1, in_loop)
        elif kind == 8:
            self.features.add("print")
            form = self.int(0, 4)
            arr = self.pick(scope.arrays)
            if form == 0:
                self.emit(indent, f"print('shape', {arr}.shape, {arr}.dtype)")
            elif form == 1:
                self.emit(indent, f"print('value', float({arr}.sum()))")
            elif form == 2:
                self.emit(indent, f"print({arr})")
            elif form == 3 and scope.scalars:
                self.emit(indent, f"print('scalar', {self.pick(scope.scalars)})")
            elif scope.ints:
                self.emit(indent, f"print('ints', {', '.join(scope.ints)})")
            else:
                self.emit(indent, f"print('shape', {arr}.shape)")
        elif kind == 9:
            self.features.add("graph_break")
            self.emit(indent, "dynamo.graph_break()")
        elif kind == 10:
            self.features.add("assert")
            self.emit(indent, f"assert {self.condition(scope, in_loop)}, 'assert {self.counter}'")
            self.counter += 1
        elif kind == 11 and nest and not self.in_helper:
            self.for_loop(scope, indent, depth, long_ok=depth == 0 and not in_loop)
        elif kind == 12 and nest and not self.in_helper:
            self.while_loop(scope, indent, depth)
        elif kind == 13 and not self.in_helper:  # lambda over a local
            self.features.add("lambda")
            name = self.fresh("g")
            captured = self.pick(scope.arrays)
            self.emit(indent, f"{name} = lambda t: np.{self.unary[0]}(t) * "
                              f"{self.pick(CONSTANTS)} + {captured}")
            scope.callables.append((name, 1))
        elif kind == 14 and not self.in_helper:  # closure (nested def) over locals
            self.features.add("closure")
            name = self.fresh("inner")
            captured = self.pick(scope.arrays)
            self.emit(indent, f"def {name}(t, u, k={self.pick(CONSTANTS)}):")
            # the body never assigns the captured name (that would make it a local of `inner`)
            inner = _Scope(["t", "u"], [], [], [])
            self.in_helper = True
            self.block(inner, indent + 1, 2, None)
            self.in_helper = False
            inner.arrays += [captured, f"({self.pick(inner.arrays)} * k)"]
            self.emit(indent + 1, f"return {self.array(inner)}")
            scope.callables.append((name, 2))
        elif kind == 15 and self.has_list and not self.in_helper:
            self.features.add("list")
            item = self.array(scope)
            if "list_append_then_rebind_in_loop" in KNOWN_BUGS:
                item = f"({item}).copy()"
            self.emit(indent, f"lst.append({item})")
        elif kind == 16 and in_loop:
            self.features.add("loop_exit")
            exits = ["break", "continue", f"return {self.pick(scope.arrays)}"]
            if in_loop.startswith("c") and "while_graph_break_continue" in KNOWN_BUGS:
                exits.remove("continue")  # in_loop is a while loop's counter
            if self.in_while and "return_in_loop_inside_while" in KNOWN_BUGS:
                exits.pop()
            exit_ = self.pick(exits)
            self.emit(indent, f"if {self.condition(scope, in_loop)}:")
            self.emit(indent + 1, exit_)
        elif kind == 17 and not in_loop and nest:  # early return from a branch
            self.features.add("early_return")
            self.emit(indent, f"if {self.condition(scope, in_loop)}:")
            value = self.array(scope) if self.in_helper else self.returned(scope)
            self.emit(indent + 1, f"return {value}")
        elif kind == 18 and self.chance(40):  # code that raises
            self.raising(scope, indent, in_loop)
        elif kind == 19 and self.helpers:
            name = self.fresh("a")
            self.emit(indent, f"{name} = {self.helper_call(scope, 0)}")
            scope.arrays.append(name)
        elif kind == 20:  # a view of an argument or local: writes through it alias
            self.features.add("view")
            name = self.fresh("v")
            base = self.pick(scope.arrays)
            self.emit(indent, f"{name} = {base}[::-1]" if len(self.shape) == 1
                      else f"{name} = {base}[::-1, :]")
            scope.arrays.append(name)
        elif kind == 22:  # tuple unpacking, possibly of a data-dependent choice
            self.features.add("unpack")
            p, q = self.fresh("p"), self.fresh("q")
            a, b = self.array(scope), self.array(scope)
            if self.chance(50):
                self.emit(indent, f"{p}, {q} = ({a}, {b}) if {self.condition(scope, in_loop)} "
                                  f"else ({b}, {a})")
            else:
                self.emit(indent, f"{p}, {q} = {a}, {b}")
            scope.arrays += [p, q]
        elif kind == 23:  # try/except: the graph ends before it, Python runs the handler
            self.features.add("try")
            self.emit(indent, "try:")
            self.block(scope.child(), indent + 1, depth + 1, in_loop)
            if self.chance(50):
                self.raising(scope.child(), indent + 1, in_loop)
            self.emit(indent, "except (IndexError, ValueError, AssertionError, TypeError) as exc:")
            self.emit(indent + 1, "print('caught', type(exc).__name__, exc)")
        elif kind == 25:  # a with statement: its body runs as a function of its own
            self.features.add("with")
            form = self.int(0, 2)
            if form == 0:  # never swallows: what the body assigns is read after it
                mode = self.pick(["all='ignore'", "divide='ignore', invalid='ignore'",
                                  "over='ignore'"])
                self.emit(indent, f"with np.errstate({mode}):")
                self.block(scope, indent + 1, depth + 1, in_loop)
            else:  # swallows: the body's names may be unbound after it
                self.emit(indent, "with contextlib.suppress(IndexError, ValueError):")
                self.block(scope.child(), indent + 1, depth + 1, in_loop)
                if form == 2:
                    self.raising(scope.child(), indent + 1, in_loop)
        elif kind == 24:  # a closure rebinding a local of f through `nonlocal`
            self.features.add("nonlocal")
            name = self.fresh("bump")
            target = self.pick([a for a in scope.arrays if not a.startswith("(")])
            self.emit(indent, f"def {name}(t):")
            self.emit(indent + 1, f"nonlocal {target}")
            self.emit(indent + 1, f"{target} = {target} + t")
            self.emit(indent + 1, "return t")
            self.emit(indent, f"{self.fresh('a')} = {name}({self.array(scope)})")
        elif kind == 21:
            self.emit(indent, f"{self.pick(scope.arrays)}[{self.index(scope, in_loop)}] = "
                              f"{self.scalar(scope)}")
            self.features.add("inplace")
        else:
            name = self.fresh("a")
            self.emit(indent, f"{name} = {self.array(scope)}")
            scope.arrays.append(name)

    def raising(self, scope: _Scope, indent: int, in_loop: str | None) -> None:
        self.features.add("raises")
        form = self.int(0, 3)
        if form == 0:
            self.emit(indent, f"if {self.condition(scope, in_loop)}:")
            self.emit(indent + 1, f"raise ValueError(f'bad {{{self.pick(scope.arrays)}.shape}}')")
        elif form == 1:
            self.emit(indent, f"{self.fresh('e')} = {self.pick(scope.arrays)}"
                              f"[{self.shape[0] + self.int(0, 2)}]")
        elif form == 2 and self.helpers:
            h = self.pick(self.helpers)
            if h.star and "raise_on_empty_args_unguarded" not in KNOWN_BUGS:
                self.emit(indent, f"{self.fresh('e')} = {h.name}()")  # ts[0]: IndexError
            else:
                self.emit(indent, f"{self.fresh('e')} = {h.name}({self.pick(scope.arrays)}, "
                                  f"nope=1)")
        else:
            self.emit(indent, f"assert {self.scalar(scope)} > 1e9, 'too small'")

    def for_loop(self, scope: _Scope, indent: int, depth: int, long_ok: bool) -> None:
        self.features.add("for")
        var = self.fresh("i")
        row_scalar = None
        form = self.int(0, 3)
        if form == 3:
            self.features.add("for_rows")
            row = self.fresh("r")
            iterated = self.pick(scope.arrays)
            if "iterate_rows_of_mutated_array" in KNOWN_BUGS:
                iterated += ".copy()"
            self.emit(indent, f"for {var}, {row} in enumerate({iterated}):")
            if len(self.shape) == 1:
                row_scalar = row
        else:
            if form == 2 and not long_ok:
                form = 0
            bound = [str(self.int(0, 4)), "n", str(self.pick([30, 60, 120]))][form]
            if form == 2:
                self.features.add("long_loop")
            self.emit(indent, f"for {var} in range({bound}):")
        body = scope.child()
        body.ints.append(var)
        if row_scalar:
            body.scalars.append(row_scalar)
        self.block(body, indent + 1, depth + 1, var)

    def while_loop(self, scope: _Scope, indent: int, depth: int) -> None:
        self.features.add("while")
        count = self.fresh("c")
        self.emit(indent, f"{count} = 0")
        scope.ints.append(count)
        self.emit(indent, f"while ({self.condition(scope, None)}) and {count} < "
                          f"{self.pick([2, 5, 20])}:")
        self.emit(indent + 1, f"{count} += 1")
        body = scope.child()
        self.in_while += 1
        self.block(body, indent + 1, depth + 1, count)
        self.in_while -= 1

    def returned(self, scope: _Scope) -> str:
        form = self.int(0, 6)
        if form == 0:
            return self.array(scope)
        if form == 1:
            return f"{self.array(scope)}, {self.array(scope)}"
        if form == 2 and self.has_list:
            return f"{self.array(scope)}, lst"
        if form == 3:
            return f"{self.scalar(scope)}"
        if form == 4 and scope.scalars:
            return f"({self.pick(scope.scalars)}, {self.array(scope)})"
        if form == 5:
            return f"{self.array(scope)}, n"
        return self.array(scope)

    # helpers -----------------------------------------------------------------------------

    def helper(self, index: int) -> None:
        name = f"h{index}"
        form = self.int(0, 3)
        if form == 0:
            h = _Helper(name, 2)
            self.emit(0, f"def {name}(t, u):")
        elif form == 1:
            h = _Helper(name, 1, keywords=("scale", "shift"))
            self.emit(0, f"def {name}(t, scale={self.pick(CONSTANTS)}, "
                         f"shift={self.pick(CONSTANTS)}):")
        elif form == 2:
            h = _Helper(name, 1, kwonly=("k",))
            self.emit(0, f"def {name}(t, *, k={self.pick(CONSTANTS)}):")
        else:
            h = _Helper(name, 1, star=True)
            self.emit(0, f"def {name}(*ts):")
            self.emit(1, "t = ts[0]")
            self.emit(1, "for extra in ts[1:]:")
            self.emit(2, "t = t + extra")
        names = {0: ["t", "u"], 1: ["t"], 2: ["t"], 3: ["t"]}[form]
        scalars = {1: ["scale", "shift"], 2: ["k"]}.get(form, [])
        inner = _Scope(names, [], [], [])
        self.in_helper = True
        self.block(inner, 1, 1, None)
        for s in scalars:
            inner.arrays.append(f"({self.pick(names)} * {s})")
        self.emit(1, f"return {self.array(inner)}")
        self.in_helper = False
        self.helpers.append(h)  # only later helpers (and f) call it: no recursion
        self.emit(0, "")


@st.composite
def control_programs(draw: Callable) -> ControlProgram:
    shape = draw(st.sampled_from(SHAPES))
    x_dtype = draw(st.sampled_from(X_DTYPES))
    gen = _Gen(draw, shape, x_dtype)
    gen.emit(0, "import contextlib")
    gen.emit(0, "import numpy as np")
    gen.emit(0, "import dynamo")
    gen.emit(0, "")
    for index in range(gen.int(0, 3)):
        gen.helper(index)
    gen.emit(0, "def f(x, y, n):")
    scope = _Scope(["x", "y"], [], ["n"], [])
    if gen.chance(40):
        gen.has_list = True
        gen.emit(1, "lst = []")
    # the first statement copies x so that most in-place operations hit a local
    if gen.chance(70):
        gen.emit(1, "a0 = x * 1.0" if gen.chance(50) else "a0 = x + y")
        scope.arrays.append("a0")
    gen.block(scope, 1, 0, None, min_statements=2)
    gen.emit(1, f"return {gen.returned(scope)}")
    budget = None
    # long loops always run under a small budget: unrolling them is what the default
    # (100,000 instructions or 1 s of tracing) would try, at a cost CI cannot pay
    if "long_loop" in gen.features or gen.chance(30):
        budget = gen.pick([150, 400, 1000])
        gen.features.add("small_budget")

    args = _arguments(draw, shape, x_dtype)
    other = _arguments(draw, shape, x_dtype)
    return ControlProgram("\n".join(gen.lines) + "\n", args, budget, gen.features, other)


def _arguments(draw: Callable, shape: tuple[int, ...], x_dtype: str) -> tuple:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if x_dtype == "int64":
        x = rng.integers(-3, 4, size=shape).astype(np.int64)
    else:
        x = rng.uniform(-2, 2, size=shape).round(2).astype(x_dtype)
    y = rng.uniform(-2, 2, size=shape).round(2)
    special = draw(st.integers(0, 9))
    if special == 9 and "python_float_nan_sign" not in KNOWN_BUGS:
        y.flat[0] = np.nan
    elif special == 8:
        y.flat[-1] = 0.0
    n = draw(st.integers(0, 5))
    return x, y, n
