"""The loop-nest IR: the vocabulary a whole Python loop nest is lowered to before it becomes C.

In: nothing (data types only). Out: the value types of a loop kernel (`Ty`, `ArrTy`), its
statements (`Stmt`, one kind per name in `KINDS`) and `LoopNest`, the lowered loop: its
statements, its locals and how each way out of it continues. Made by `loop_nest.lower`, printed
by `LoopNest.text()` (what ``explain`` and the logs show) and turned into C by
`dynamo.backends.c.c_loop_source`.

The statements are a flat list with labels, the shape of the bytecode they come from: a loop is
its header label, a conditional branch and a jump back; an ``if`` is a branch. Expressions are C
expressions over the kernel's typed variables (``L_x`` a local, ``t7`` a temporary, ``S0_n`` a
range iterator on the stack); the operator rules that write them, with the checks that make the
kernel stop where Python or NumPy would not compute the same thing, are in `loop_nest.scalars`.

Value types: a scalar is a *family* (int, float, bool) and a *tag*: ``py`` a Python object
(``int`` as int64, ``float``, ``bool``), ``np`` a NumPy scalar of the family's 64-bit dtype
(``np.int64``, ``np.float64``, ``np.bool_``), ``rt`` either, known only at run time (a tag
variable travels with the value: ``s = 0.0`` then ``s += x[i]`` makes ``s`` a Python float
before the first iteration and a NumPy float64 after it). Both tags compute the same bits for
every operation the kernel does; where they would not (a division by zero, an overflow, a
NaN made from numbers), the kernel deoptimises instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Ty", "ArrTy", "Stmt", "KINDS", "LoopNest", "Exit", "CTYPE", "DTYPES",
           "SCALAR_TYPES"]

#: family -> the C type of its values
CTYPE = {"int": "long long", "float": "double", "bool": "int"}
#: array dtypes a kernel reads and writes, and the scalar family of their elements
DTYPES = {np.dtype(np.float64): "float", np.dtype(np.int64): "int", np.dtype(np.bool_): "bool"}


@dataclass(frozen=True)
class Ty:
    """A scalar type: family and tag (see the module docstring)."""

    fam: str
    tag: str = "py"

    def __str__(self) -> str:
        names = {"int": ("int", "np.int64"), "float": ("float", "np.float64"),
                 "bool": ("bool", "np.bool_")}[self.fam]
        return {"py": names[0], "np": names[1]}.get(self.tag, f"{names[0]}|{names[1]}")


@dataclass(frozen=True)
class ArrTy:
    """An ndarray local: element dtype and number of dimensions (shape and strides are values
    the kernel reads when it starts, so one build serves every size)."""

    dtype: np.dtype
    ndim: int

    def __str__(self) -> str:
        return f"ndarray[{self.dtype}, {self.ndim}d]"


#: Python's and NumPy's scalar types -> their kernel type (the planner types the arguments by
#: it; the kernel's wrapper checks the values it is called with, and boxes its results, by it)
SCALAR_TYPES: dict[type, Ty] = {
    bool: Ty("bool"), int: Ty("int"), float: Ty("float"),
    np.bool_: Ty("bool", "np"), np.int64: Ty("int", "np"), np.float64: Ty("float", "np"),
}

#: The statement kinds, each with its fields (`Stmt.text` and the C writer,
#: `backends.c.c_loop_source`, print each one):
#:   assign  dst = expr                      (a typed C variable)
#:   check   deopt if cond, for `why`        (where Python or NumPy would differ: raise, warn)
#:   store   array[index] = value            (element write, logged for undo)
#:   label   name:                           (a jump target; `line` is the source line)
#:   goto    goto name
#:   branch  if cond goto then else goto other
#:   header  the outermost loop's head: every 256th time, the state is saved here (a deopt
#:           puts back what the iterations since wrote and returns that state)
#:   poll    Ctrl-C check at a loop head
#:   exit    leave the kernel by way out number k
#:   fast    at an innermost loop's head: when the step is 1 and every test in `tests` holds
#:           for the next chunk of iterations ``[n, end)``, log the old values of the elements
#:           `logs` names, compute the `batches` of ufunc calls (`loop_nest.batches`) and
#:           run the chunk in the loop's fast copy (`loop_nest.fast`)
#:   put     array[index] = value, not logged (a fast copy's proven store, an array statement's)
#:   logview log the old values of a view (address, shape, strides) before it is written
KINDS = {
    "assign": ("dst", "expr"),
    "check": ("cond", "why"),
    "store": ("array", "offset", "value"),
    "label": ("name",),
    "goto": ("name",),
    "branch": ("cond", "then", "other"),
    "header": (),
    "poll": (),
    "exit": ("k",),
    "fast": ("label", "n", "stop", "step", "chunk_n", "chunk_end", "tests", "logs", "outermost",
             "chunk", "light", "batches"),
    "put": ("array", "offset", "value"),
    "logview": ("ptr", "shape", "strides"),
}


@dataclass(frozen=True)
class Stmt:
    kind: str
    args: tuple
    line: int | None = None

    def text(self) -> str:
        a = self.args
        return {
            "assign": lambda: f"    {a[0]} = {a[1]}",
            "check": lambda: f"    deopt if {a[0]}    # {a[1]}",
            "store": lambda: f"    {a[0]}[{a[1]}] = {_value(a[2])}",
            "label": lambda: f"{a[0]}:",
            "goto": lambda: f"    goto {a[0]}",
            "branch": lambda: f"    if {a[0]} goto {a[1]} else {a[2]}",
            "header": lambda: "    header (save the iteration's state)",
            "poll": lambda: "    poll Ctrl-C",
            "exit": lambda: f"    exit {a[0]}",
            "fast": lambda: (f"    fast: if step == 1, chunk [{a[1]}, min({a[1]} + {a[9]}, "
                             f"{a[2]})) and " + " and ".join(a[6] or ("True",))
                             + f": log {len(a[7])} store(s), batch {len(a[11])} ufunc "
                             f"call(s), goto {a[0]}"),
            "put": lambda: f"    {a[0]}[{a[1]}] = {_value(a[2])}    # logged before: not here",
            "logview": lambda: f"    log the view at {a[0]} (shape {', '.join(a[1])})",
        }[self.kind]()


def _value(v: Any) -> str:
    """A stored value as the C has it: ``(double) t28`` for the pair (C type, expression)."""
    return f"({v[0]}) {v[1]}" if isinstance(v, tuple) and len(v) == 2 else str(v)


@dataclass(frozen=True)
class Exit:
    """A way out of the loop: continue at instruction `target` of the original code (the loop
    ran out, or a ``break``), or return the value `value` (C expression, type `ty`)."""

    target: int | None
    value: str | None = None
    ty: Ty | None = None
    value_tag: str | None = None


@dataclass
class LoopNest:
    """A lowered loop nest (see the module docstring)."""

    name: str
    #: where it starts in the original code and where its loop is (`sites.LoopSite`)
    site: Any
    first_line: int | None
    #: the locals it reads or writes, each with its type (an `ArrTy` or a `Ty`)
    locals: dict[str, Ty | ArrTy]
    #: locals whose tag is known only at run time (a tag variable goes with them)
    tagged: frozenset[str]
    #: locals that may be unbound somewhere in the kernel (a bound flag goes with them)
    flagged: frozenset[str]
    #: locals bound when the kernel starts (the values it is called with)
    inputs: tuple[str, ...]
    stmts: list[Stmt]
    #: temporaries: C variable -> C type
    temps: dict[str, str]
    exits: list[Exit] = field(default_factory=list)
    #: (the Python objects the kernel's code names by global: name -> object, and module
    #: attributes: (global name, attribute) -> object), for the guards that keep them
    globals_used: dict = field(default_factory=dict)
    #: the outermost loop iterates over 1-d arrays (`loop_nest.items`): (how many arrays,
    #: enumerated, zipped, enumerate()'s start); None for a range or a ``while``
    items: tuple | None = None
    #: the NumPy inner loops it calls, entry k of its table: ``(ufunc, signature, how)``, how
    #: ``"call"`` (a unary float64 ufunc on a scalar: ``npd_ufunc1(k, x)``) or a reduction of
    #: a 1-d view (``"sum"``, ``"max"``, ``"min"``: ``npd_reduce``, `loop_nest.reductions`)
    ufuncs: tuple = ()
    #: the locals (of `locals`) it assigns somewhere
    assigned: tuple[str, ...] = ()

    def arrays_written(self) -> tuple[str, ...]:
        """The array locals the kernel may store into: those its stores go through, when each
        store's array is a local's (never rebound in the loop, so it is that argument's array);
        otherwise every float64 and int64 array local (bool arrays are read only)."""
        arrays = [n for n, ty in self.locals.items() if isinstance(ty, ArrTy)]
        writable = tuple(n for n in arrays if self.locals[n].dtype != np.bool_)
        alias = {s.args[0]: s.args[1] for s in self.stmts
                 if s.kind == "assign" and s.args[1].isidentifier()}
        found: set[str] = set()
        for s in self.stmts:
            if s.kind not in ("store", "put", "logview"):
                continue
            root = re.match(r"\w+", s.args[0])
            root = root.group(0) if root else ""
            for _ in range(len(alias) + 1):
                if root not in alias:
                    break
                root = alias[root]
            name = root[2:] if root.startswith("L_") else None
            if name not in writable or any(n in self.assigned for n in arrays):
                return writable
            found.add(name)
        return tuple(n for n in writable if n in found)

    @property
    def iterates(self) -> bool:
        return self.site.iterates

    def text(self) -> str:
        """The lowered loop as the kernel's statements, one per line, with source lines."""
        what = "conditional" if getattr(self.site, "kind", "loop") == "if" else "loop nest"
        head = [f"{what} {self.name} (line {self.first_line}):"]
        for name, ty in self.locals.items():
            extra = (" (tag at run time)" if name in self.tagged else "") + (
                " (may be unbound)" if name in self.flagged else "")
            head.append(f"  local {name}: {ty}{extra}")
        for k, ex in enumerate(self.exits, 1):
            head.append(f"  exit {k}: " + (f"continue at instruction {ex.target}"
                                           if ex.target is not None else f"return {ex.value}"))
        return "\n".join(head + [s.text() for s in self.stmts])
