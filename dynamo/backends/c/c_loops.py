"""The loops inside a kernel's C function, and the function frame around them.

In: the values a kernel stores (``loop_ir``) and how the kernel reads its operands. Out: lines
of C: the element loop computing them (`element_loop`, `body_lines`), the declarations of a
kernel's operands (`operand_decls`), and the kernel function outlined into a serial region
(`serial_path`). Called by the kernel printers `c_pointwise` and `c_reduction`.

Math whose last bit is the implementation's own (`c_expressions.NUMPY_LOOP`) is NumPy's own
inner loop, called on blocks of values between stages of the element loop (``DYN_NUMPY<n>``,
declared by `codegen_c.module_source`, which also exports ``npdynamo_set_numpy_loops``).
Each kernel's body is outlined into ``<name>_region``, called directly when ``par`` is 0 and
from an OpenMP ``parallel`` region otherwise (`serial_path`: an empty team costs more than a
small kernel).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .c_expressions import NUMPY_LOOP, OPS, constant, ctype
from .c_flags import keep_lines
from .loop_ir import Const, Kernel, Load, Op, RowRef, Value, walk

__all__ = ["CHUNK", "PARALLEL", "body_lines", "calls_numpy", "element_loop", "operand_decls",
           "output_stores", "serial_path", "slot_name"]


def _read(v: Value, preset: dict, load: Callable[[Load], str],
          rowref: Callable[[RowRef], str]) -> str | None:
    """The C that reads ``v`` when it is not computed here (preset, a load, a row result)."""
    if v in preset:
        return preset[v]
    if isinstance(v, Load):
        return load(v)
    if isinstance(v, RowRef):
        return rowref(v)
    return None


def body_lines(values: list[Value], load: Callable[[Load], str], indent: str,
               rowref: Callable[[RowRef], str] = lambda r: f"r->r{r.index}",
               preset: dict | None = None) -> tuple[list[str], dict]:
    """C statements computing every node of ``values``' DAG once; returns lines and names.
    ``preset`` maps values already available elsewhere (e.g. in a row buffer) to C expressions:
    they are read, not recomputed."""
    lines: list[str] = []
    names: dict[Value, str] = {}
    preset = preset or {}
    for i, v in enumerate(walk(values, preset)):
        if isinstance(v, Const):
            names[v] = constant(v)
            continue
        expr = _read(v, preset, load, rowref)
        if expr is None:
            expr = OPS[v.name]([names[a] for a in v.args], v)
        name = f"v{i}"
        lines.append(f"{indent}const {ctype(v.dtype)} {name} = {expr};")
        names[v] = name
    return lines, names


def calls_numpy(v: Value) -> bool:
    return isinstance(v, Op) and v.name in NUMPY_LOOP


#: Elements per block a kernel hands to a NumPy loop (its buffers stay in L1: 4 KiB each).
CHUNK = 512


def element_loop(stores: list[tuple[Value, str]], load: Callable[[Load], str], indent: str,
                 lo: str, hi: str, pragma: str = "", forced: list[Value] = (),
                 rowref: Callable[[RowRef], str] = lambda r: f"r->r{r.index}",
                 preset: dict | None = None) -> list[str]:
    """The loop ``for (j = lo; j < hi; j++)`` computing ``stores`` (value, C lvalue) and
    keeping ``forced`` values alive (`c_flags.forced_values`), under ``pragma`` (e.g. ``omp simd``).
    ``stores`` may hold equal values (two graph outputs that are one expression, ``1 + a``
    twice: Values are equal by structure) with different lvalues: each pair is one store, so
    stores are never looked up by value.

    Without `NUMPY_LOOP` math it is one loop of `body_lines`. With it, the range is cut into
    blocks of `CHUNK` elements and each block into *stages*: a stage is a plain loop over the
    block computing what it can; between stages, each NumPy-loop op is one call of NumPy's
    inner loop (``DYN_NUMPY<n>``) from buffers ``t<i>`` holding its operands to a buffer of its
    results, which later stages read. An op's stage is one more than its operands' (so chains
    of math work), values crossing stages go through their buffer, and loads are re-read."""
    values = [v for v, _ in stores]
    preset = preset or {}
    order = walk(values, preset)
    if not any(calls_numpy(v) for v in order if v not in preset):
        lines, names = body_lines(values, load, indent + "    ", rowref, preset)
        return ([f"{indent}{pragma}"] if pragma else []) + \
            [f"{indent}for (int64_t j = {lo}; j < {hi}; j++) {{"] + lines + \
            keep_lines(list(forced), names, indent + "    ") + \
            [f"{indent}    {lv} = {names[v]};" for v, lv in stores] + [f"{indent}}}"]
    index = {v: i for i, v in enumerate(order)}
    home: dict[Value, int] = {}  # the stage an Op is available in (leaves: any stage)
    for v in order:
        if isinstance(v, Op) and v not in preset:
            base = max((home.get(a, 0) for a in v.args), default=0)
            home[v] = base + 1 if calls_numpy(v) else base
    last = max(home.values())
    need: list[set[Value]] = [set() for _ in range(last + 1)]
    buffered: dict[Value, int] = {}  # value -> the stage that writes its buffer
    for v in values + list(forced):
        need[home.get(v, 0)].add(v)
    for s in range(last, -1, -1):
        for v in reversed(order):
            if v not in need[s]:
                continue
            if v in home and home[v] < s and not calls_numpy(v):
                buffered[v] = home[v]
                need[home[v]].add(v)
            elif calls_numpy(v) and v not in preset:
                for a in v.args:
                    at = home.get(a, home[v] - 1)
                    buffered[a] = min(buffered.get(a, at), at)
                    need[buffered[a]].add(a)
            elif v in home and v not in preset:
                need[s].update(v.args)
    inner = indent + "    "
    L = [f"{indent}for (int64_t c0 = {lo}; c0 < {hi}; c0 += {CHUNK}) {{",
         f"{inner}const int64_t c1 = c0 + {CHUNK} < {hi} ? c0 + {CHUNK} : {hi};"]
    L += [f"{inner}{ctype(v.dtype)} t{index[v]}[{CHUNK}] __attribute__((aligned(64)));"
          for v in order if v in buffered or calls_numpy(v) and v not in preset]
    for s in range(last + 1):
        for v in order:  # the NumPy loops whose operands are now complete
            if calls_numpy(v) and v not in preset and home[v] == s:
                ts = [f"t{index[a]}" for a in v.args]
                L.append(f"{inner}DYN_NUMPY{len(v.args)}({slot_name(v)}, {', '.join(ts)}, "
                         f"t{index[v]}, c1 - c0);  /* np.{v.name}, NumPy's own loop */")
        L += ([f"{inner}{pragma}"] if pragma else []) + \
            [f"{inner}for (int64_t j = c0; j < c1; j++) {{"]
        names: dict[Value, str] = {}
        for v in order:
            if v not in need[s]:
                continue
            if isinstance(v, Const):
                names[v] = constant(v)
                if buffered.get(v) == s:  # an operand of a NumPy loop
                    L.append(f"{inner}    t{index[v]}[j - c0] = {names[v]};")
                continue
            expr = _read(v, preset, load, rowref)
            if expr is None:
                expr = (f"t{index[v]}[j - c0]" if home[v] < s or calls_numpy(v)
                        else OPS[v.name]([names[a] for a in v.args], v))
            names[v] = f"v{index[v]}"
            L.append(f"{inner}    const {ctype(v.dtype)} v{index[v]} = {expr};")
            if buffered.get(v) == s and not calls_numpy(v):
                L.append(f"{inner}    t{index[v]}[j - c0] = v{index[v]};")
        L += keep_lines([v for v in forced if v in names and home.get(v, 0) == s
                         and not calls_numpy(v)], names, inner + "    ")
        L += [f"{inner}    {lv} = {names[v]};" for v, lv in stores if home.get(v, 0) == s]
        L.append(f"{inner}}}")
    return L + [f"{indent}}}"]


def output_stores(outputs: list[Value], at: str, first: int = 0) -> list[tuple[Value, str]]:
    return [(v, f"out{first + j}[{at}]") for j, v in enumerate(outputs)]


def slot_name(v: Op) -> str:
    """The name of the NumPy loop an op calls, e.g. ``exp_f8`` (``DYN_NP_exp_f8`` in C)."""
    return f"{v.name}_{np.dtype(v.dtype).str[1:]}"


def operand_decls(k: Kernel, n_in: int, out_types: list[str]) -> list[str]:
    """Declarations of inputs ``in<i>`` (strides ``st<i>``, ``nd`` of them at ``S + i * nd``)
    and outputs ``out<j>``; data pointers come in ``P`` (inputs, then outputs)."""
    lines = []
    for i, od in enumerate(k.operands):
        t = ctype(od.dtype)
        lines.append(f"    const {t} *restrict in{i} = (const {t} *)P[{i}]; "
                     f"const int64_t *st{i} = S + {i} * nd;")
    for j, t in enumerate(out_types):
        lines.append(f"    {t} *restrict out{j} = ({t} *)P[{n_in + j}];")
    return lines


PARALLEL = "    #pragma omp parallel num_threads(nthreads) if(par) reduction(|:fl)"


def serial_path(L: list[str]) -> list[str]:
    """The kernel's lines with its body outlined into ``<name>_region`` (one thread's work: its
    ``omp for`` is orphaned, so it binds to whatever region calls it), called directly when
    ``par`` is 0 and from the ``parallel`` region otherwise. A ``parallel if(0)`` region still
    builds a one-thread team, ~0.5 us per call: more than a whole kernel over a few elements
    (measured: 8-element ``sin(x) * y + 1`` 0.61 us with the region, 0.09 us without).
    Outlining, not a second copy of the loops, keeps gcc's time as it was."""
    sig = next(i for i, line in enumerate(L) if line.startswith("int ")
               and line.endswith("(const int64_t *A, char **P)"))
    name = L[sig][4:L[sig].index("(")]
    start = L.index(PARALLEL)
    end = len(L) - 1 - L[::-1].index("    return fl;")
    assert L[start - 1] == "    int fl = 0;" and L[start + 1] == "    {" and L[end - 1] == "    }"
    region = (["__attribute__((noinline)) static int "
               f"{name}_region(const int64_t *A, char **P)", "{"]
              + L[sig + 2:start] + L[start + 1:end] + ["    return fl;", "}"])
    entry = [L[sig], "{",
             f"    if (!A[1]) return {name}_region(A, P);  /* serial: no OpenMP team */",
             "    int fl = 0;",
             "    #pragma omp parallel num_threads((int)A[0]) reduction(|:fl)",
             f"    fl |= {name}_region(A, P);",
             "    return fl;", "}"]
    return L[:sig] + region + entry
