"""C for reduction kernels: row programs, with NumPy's pairwise summation for float sums.

In: a `ReductionKernel` (``loop_ir``: reductions over the trailing dims, then an epilogue of
pointwise outputs over the same rows). Out: the C of the kernel (`reduction_source`): per
reduction an element function and, for float sums, NumPy's pairwise summation (8 accumulators
over blocks of 128, halves combined) over the rows `kernel.py` lays out in NumPy's order, so
results match NumPy bit for bit; max/min, argmax/argmin and the other reductions; the
epilogue. `row_buffers` says which summed values are stored in an epilogue output and read
back instead of computed twice. Called by `codegen_c.kernel_source`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .c_expressions import FLOAT_MATH, OPS, ctype, is_float
from .c_flags import forced_values
from .c_loops import body_lines, calls_numpy, element_loop, operand_decls, output_stores
from .c_loops import serial_path
from .loop_ir import Load, Op, Reduction, ReductionKernel, Value, rolled_loads, walk

__all__ = ["reduction_source", "row_buffers"]

_INIT = {"sum": "0", "mean": "0", "prod": "1", "any": "0", "all": "1"}


def _combine(op: str, acc_dt: np.dtype) -> Callable[[str, str], str]:
    """acc <- combine(acc, v) for the sequential reductions."""
    probe = Op(op, (), acc_dt)
    table: dict[str, Callable[[str, str], str]] = {
        "sum": lambda a, v: OPS["add"]([a, v], probe),
        "mean": lambda a, v: OPS["add"]([a, v], probe),
        "prod": lambda a, v: OPS["multiply"]([a, v], probe),
        "max": lambda a, v: OPS["maximum"]([a, v], probe),
        "min": lambda a, v: OPS["minimum"]([a, v], probe),
        "any": lambda a, v: f"(uint8_t)({a} | ({v} != 0))",
        "all": lambda a, v: f"(uint8_t)({a} & ({v} != 0))",
    }
    return table[op]


def _is_costly(v: Value) -> bool:
    return any(isinstance(x, Op) and x.name in FLOAT_MATH for x in walk([v]))


def row_buffers(k: ReductionKernel) -> dict[int, int]:
    """Reductions whose prologue value is stored in an epilogue output: reduction index ->
    epilogue output index.

    Softmax's ``exp(x - max)`` is both summed and divided by the sum; instead of computing it
    twice, the sum phase writes it into the row of the (same-dtype) epilogue output, sums that
    row pairwise (bit-identical order), and the epilogue reads it back while the row is still
    in cache. Only for float sums/means of a value that calls a math function and that the
    epilogue reads; each output row holds one such value.
    """
    cached = k.__dict__.get("_row_buffers")
    if cached is not None:
        return cached
    out: dict[int, int] = {}
    if k.outputs:
        epilogue_values = set(walk(k.outputs))
        free = list(range(len(k.outputs)))
        for i, red in enumerate(k.reductions):
            v = red.value
            if (red.op in ("sum", "mean") and is_float(red.acc_dtype)
                    and v.dtype == red.acc_dtype and v in epilogue_values and _is_costly(v)):
                e = next((e for e in free if k.outputs[e].dtype == v.dtype), None)
                if e is not None:
                    free.remove(e)
                    out[i] = e
    k.__dict__["_row_buffers"] = out
    return out


def _reduction_functions(k: ReductionKernel, i: int, red: Reduction) -> list[str]:
    """Element functions ``<name>_r<i>v{c,s}`` (prologue value, contiguous / strided) and, for
    float sums, NumPy's pairwise summation ``<name>_r<i>pw{c,s}`` (and ``pwb`` over the row
    buffer, see `row_buffers`)."""
    name, acc = f"{k.name}_r{i}", ctype(red.acc_dtype)
    conv = Op("cast", (red.value,), red.acc_dtype, red.value.dtype)
    L: list[str] = []
    variants: list[tuple[str, Callable[[Load], str] | None]] = [
        ("c", lambda v: f"r->p{v.operand}[j]"),
        ("s", lambda v: f"r->p{v.operand}[j * r->s{v.operand}]")]
    if _staged(red):  # read from the row buffer `_fill_row` filled, in every layout
        variants = [("c", None), ("s", None)]
    if i in row_buffers(k):
        variants.append(("b", None))
    for variant, load in variants:
        L += [f"static inline {acc} {name}v{variant}(const {k.name}_row *r, int64_t j)", "{"]
        if load is None:
            L += [f"    return r->b{i}[j];", "}"]
        else:
            lines, names = body_lines([conv], load, "    ")
            L += lines + [f"    return {names[conv]};", "}"]
        if red.op in ("sum", "mean") and is_float(red.acc_dtype):
            f = f"{name}pw{variant}"
            v = f"{name}v{variant}"
            L += [
                # noinline: gcc -O3 would otherwise clone the recursion and triple compile time
                f"__attribute__((noinline)) static {acc} "
                f"{f}(const {k.name}_row *r, int64_t j0, int64_t n)",
                "{",
                "    if (n < 8) {",
                f"        {acc} res = 0;",
                f"        for (int64_t i = 0; i < n; i++) res += {v}(r, j0 + i);",
                "        return res;",
                "    } else if (n <= 128) {",
                f"        {acc} q[8];",
                f"        for (int k = 0; k < 8; k++) q[k] = {v}(r, j0 + k);",
                "        int64_t i;",
                "        for (i = 8; i < n - (n % 8); i += 8) {",
                f"            for (int k = 0; k < 8; k++) q[k] += {v}(r, j0 + i + k);",
                "        }",
                f"        {acc} res = ((q[0] + q[1]) + (q[2] + q[3])) + "
                "((q[4] + q[5]) + (q[6] + q[7]));",
                f"        for (; i < n; i++) res += {v}(r, j0 + i);",
                "        return res;",
                "    }",
                "    int64_t n2 = n / 2; n2 -= n2 % 8;",
                f"    return {f}(r, j0, n2) + {f}(r, j0 + n2, n - n2);",
                "}",
            ]
    return L


def _chunked_sum(c: Callable[[str], str], ind: str) -> list[str]:
    """``acc += `` the pairwise sum of the row's inner run, whole or, when the runtime passed a
    ``chunk`` length shorter than the run (NumPy <= 2.2, see `kernel.pairwise_split`), one
    pairwise sum per chunk, in order. ``c(args)``: the C of a pairwise sum given ``j0, n``."""
    return [f"{ind}if (chunk <= 0 || inner <= chunk) {{",
            f"{ind}    acc += {c('0, inner')};",
            f"{ind}}} else {{",
            f"{ind}    for (int64_t c0 = 0; c0 < inner; c0 += chunk) {{",
            f"{ind}        const int64_t cn = inner - c0 < chunk ? inner - c0 : chunk;",
            f"{ind}        acc += {c('c0, cn')};",
            f"{ind}    }}",
            f"{ind}}}"]


def _staged(red: Reduction) -> bool:
    """Does this reduction's value call a NumPy loop? Then its element functions read the row
    from a buffer filled block by block first (`_fill_row`), never compute one element."""
    return any(calls_numpy(v) for v in walk([red.value]))


def _fill_row(red: Reduction, buf: str, ind: str) -> list[str]:
    """``buf[j] = value`` over the current row (contiguous or strided operands)."""
    L: list[str] = []
    for variant in ("contig", "strided"):
        if variant == "contig":
            L += [f"{ind}if (contig) {{"]
            pragma, load = "#pragma omp simd", lambda v: f"row.p{v.operand}[j]"
        else:
            L += [f"{ind}}} else {{"]
            pragma, load = "", lambda v: f"row.p{v.operand}[j * row.s{v.operand}]"
        L += element_loop([(red.value, f"{buf}[j]")], load, ind, "0", "inner", pragma,
                          rowref=lambda rr: f"row.r{rr.index}")
    return L + [f"{ind}}}"]


def _reduction_phase(k: ReductionKernel, i: int, red: Reduction) -> list[str]:
    """The C of one reduction over the current row; leaves the result in ``row.r<i>``."""
    name, acc = f"{k.name}_r{i}", ctype(red.acc_dtype)
    arg = red.op in ("argmax", "argmin")
    ind = "        "
    L = [f"{ind}{{"]
    buffered = row_buffers(k).get(i)
    if buffered is not None:
        # Compute the row's values once into the epilogue output (vectorised), then sum them
        # pairwise from there.
        n_red = len(k.reductions)
        L += [f"{ind}{acc} acc = 0;",
              f"{ind}for (int64_t q = 0; q < nrows; q++) {{",
              f"{ind}    {k.name}_at(&row, q);",
              f"{ind}    {acc} *restrict bq = out{n_red + buffered} + (o * nrows + q) * inner;",
              f"{ind}    row.b{i} = bq;",
              *_fill_row(red, "bq", ind + "    "),
              *_chunked_sum(lambda a: f"{name}pwb(&row, {a})", ind + "    ")]
    elif arg:
        L += [f"{ind}int64_t best = 0, pos = 0;", f"{ind}{acc} m = 0; int stop = 0;"]
    else:
        init = _INIT.get(red.op)
        L += [f"{ind}{acc} acc = {init};" if init else f"{ind}{acc} acc = 0; int first = 1;"]
    if buffered is None:
        L += [f"{ind}for (int64_t q = 0; q < nrows; q++) {{", f"{ind}    {k.name}_at(&row, q);"]
        if _staged(red):  # the row's values first (NumPy's loops on blocks), then the phase
            L += [f"{ind}    row.b{i} = scratch{i};", *_fill_row(red, f"scratch{i}", ind + "    ")]
    if buffered is not None:
        pass  # the phase is complete (above)
    elif red.op in ("sum", "mean") and is_float(red.acc_dtype):
        L += _chunked_sum(lambda a: f"contig ? {name}pwc(&row, {a}) : {name}pws(&row, {a})",
                          ind + "    ")
    elif arg:
        # NumPy: the first extreme wins, a NaN wins at once (quiet comparisons: no FP flags).
        if is_float(red.acc_dtype):
            cmp_expr = ("DYN_LE(v, m)" if red.op == "argmax" else "DYN_GE(v, m)")
            nan_stop = " if (isnan(m)) { stop = 1; break; }"
        else:
            cmp_expr = "(v <= m)" if red.op == "argmax" else "(v >= m)"
            nan_stop = ""
        L += [f"{ind}    if (stop) break;",
              f"{ind}    for (int64_t j = 0; j < inner; j++, pos++) {{",
              f"{ind}        const {acc} v = {name}vs(&row, j);",
              f"{ind}        if (pos == 0 || !{cmp_expr}) {{ m = v; best = pos;{nan_stop} }}",
              f"{ind}    }}"]
    else:
        comb = _combine(red.op, red.acc_dtype)
        fast = red.op in ("max", "min") and is_float(red.acc_dtype) and \
            isinstance(red.value, Load)
        if fast:
            # Max/min of plain loads: ordinary (signalling) compares vectorise to 2-3
            # instructions instead of the integer-key ones; a NaN input would set FE_INVALID,
            # which NumPy does not report, and loads cannot raise anything else, so the flag
            # is restored after the phase.
            sym = ">" if red.op == "max" else "<"
            comb = lambda a, v: f"((({a} {sym} {v}) | ({a} != {a})) ? {a} : {v})"  # noqa: E731
            L += [f"{ind}    const int fe_keep = fetestexcept(FE_INVALID);"]
        if red.op in ("max", "min"):
            # 32 independent lanes (several vector registers: the compare/blend chain of one
            # register is latency-bound), combined at the end of the row, then the tail.
            # NaN propagation does not depend on the order.
            L += [f"{ind}    int64_t j = 0;",
                  f"{ind}    if (contig && inner >= 64) {{",
                  f"{ind}        {acc} mv[32];",
                  f"{ind}        for (int k = 0; k < 32; k++) mv[k] = {name}vc(&row, k);",
                  f"{ind}        for (j = 32; j + 32 <= inner; j += 32) {{",
                  f"{ind}            #pragma omp simd",
                  f"{ind}            for (int k = 0; k < 32; k++) {{",
                  f"{ind}                const {acc} v = {name}vc(&row, j + k);",
                  f"{ind}                mv[k] = {comb('mv[k]', 'v')};",
                  f"{ind}            }}",
                  f"{ind}        }}",
                  f"{ind}        for (int k = 0; k < 32; k++) {{",
                  f"{ind}            acc = first ? mv[k] : {comb('acc', 'mv[k]')}; first = 0;",
                  f"{ind}        }}",
                  f"{ind}    }}",
                  f"{ind}    for (; j < inner; j++) {{",
                  f"{ind}        const {acc} v = contig ? {name}vc(&row, j) : {name}vs(&row, j);",
                  f"{ind}        acc = first ? v : {comb('acc', 'v')}; first = 0;",
                  f"{ind}    }}"]
            if fast:
                L += [f"{ind}    if (!fe_keep) feclearexcept(FE_INVALID);"]
        else:
            L += [f"{ind}    if (contig) {{",
                  f"{ind}        for (int64_t j = 0; j < inner; j++) "
                  f"acc = {comb('acc', f'{name}vc(&row, j)')};",
                  f"{ind}    }} else {{",
                  f"{ind}        for (int64_t j = 0; j < inner; j++) "
                  f"acc = {comb('acc', f'{name}vs(&row, j)')};",
                  f"{ind}    }}"]
    L.append(f"{ind}}}")
    out_t = _red_out_ctype(red)
    if arg:
        res = "best"
    elif red.op == "mean":
        res = f"({out_t})(acc / ({acc})(nrows * inner))"
    else:
        res = f"({out_t})acc"
    L += [f"{ind}row.r{i} = {res};", f"{ind}rout{i}[o] = row.r{i};", f"{ind}}}"]
    return L


def _red_out_ctype(red: Reduction) -> str:
    return "int64_t" if red.op in ("argmax", "argmin") else ctype(red.out_dtype)


def reduction_source(k: ReductionKernel) -> str:
    """C for a reduction kernel (a row program, see `loop_ir.ReductionKernel`).

    ``A = [threads, parallel, nk, nr, kept shape[nk], reduced shape[nr], then per input: kept
    strides[nk], reduced strides[nr], then chunk]`` (``chunk``: 0, or the length of the pieces
    a float sum's inner run is summed in, NumPy <= 2.2's buffer size); ``P`` = input data
    pointers, then one output per reduction (contiguous over the kept dims), then the epilogue
    outputs (C-contiguous over the domain); ``nk >= 1`` and ``nr >= 1`` (the runtime pads with
    size-1 dims). The last reduced dim is the inner run, summed pairwise (NumPy's algorithm)
    for floats, whole or in ``chunk``-long pieces (`_chunked_sum`).
    """
    n_in, name = len(k.operands), k.name
    if rolled_loads(k.values):  # fusion keeps rolls out of row kernels: never read them here
        raise ValueError(f"{name}: a row kernel cannot read rolled operands")
    preset_values = {k.reductions[i].value for i in row_buffers(k)}
    forced = forced_values(k.outputs, preset_values) if k.outputs else []
    fields = "".join(f" const {ctype(o.dtype)} *p{i}; int64_t s{i};"
                     for i, o in enumerate(k.operands))
    fields += "".join(f" {_red_out_ctype(r)} r{i};" for i, r in enumerate(k.reductions))
    fields += "".join(f" const {ctype(k.reductions[i].acc_dtype)} *b{i};"
                      for i in row_buffers(k))
    # reductions of values from NumPy loops read rows from a per-thread scratch buffer
    scratch = [i for i, r in enumerate(k.reductions) if _staged(r) and i not in row_buffers(k)]
    fields += "".join(f" const {ctype(k.reductions[i].acc_dtype)} *b{i};" for i in scratch)
    fields += " const int64_t *S; int64_t nk, nr; const int64_t *rshape; int64_t base[%d];" % \
        max(1, n_in)
    fields += "".join(f" const void *S_ptr{i};" for i in range(n_in))
    L = [f"typedef struct {{{fields} }} {name}_row;",
         # Point the row's operand pointers at reduced row q (all but the last reduced dim).
         f"static inline void {name}_at({name}_row *row, int64_t q)", "{",
         "    const int64_t nd = row->nk + row->nr;",
         "    " + " ".join(f"int64_t o{i} = row->base[{i}];" for i in range(n_in)),
         "    for (int64_t d = row->nr - 2; d >= 0; d--) {",
         "        const int64_t i = q % row->rshape[d]; q /= row->rshape[d];",
         "        " + " ".join(f"o{i} += i * row->S[{i} * nd + row->nk + d];"
                             for i in range(n_in)),
         "    }",
         "    " + " ".join(f"row->p{i} = ((const {ctype(o.dtype)} *)row->S_ptr{i}) + o{i};"
                         for i, o in enumerate(k.operands)),
         "}"]
    for i, red in enumerate(k.reductions):
        L += _reduction_functions(k, i, red)
    outs = [_red_out_ctype(r) for r in k.reductions] + [ctype(v.dtype) for v in k.outputs]
    L += [f"int {name}(const int64_t *A, char **P)", "{",
          "    const int nthreads = (int)A[0], par = (int)A[1];",
          "    const int64_t nk = A[2], nr = A[3];",
          "    const int64_t *kshape = A + 4, *rshape = A + 4 + nk, *S = A + 4 + nk + nr;",
          "    const int64_t nd = nk + nr;"]
    L += operand_decls(k, n_in, outs)
    L += [f"    {t} *restrict rout{i} = out{i};" for i, t in enumerate(outs[:len(k.reductions)])]
    L += ["    int64_t nout = 1, nrows = 1;",
          "    for (int64_t d = 0; d < nk; d++) nout *= kshape[d];",
          "    for (int64_t d = 0; d < nr - 1; d++) nrows *= rshape[d];",
          "    const int64_t inner = rshape[nr - 1];",
          # The pairwise chunk length (0: the whole inner run; see `_chunked_sum`).
          f"    const int64_t chunk = S[{n_in} * nd];",
          "    const int contig = 1" + "".join(f" && st{i}[nk + nr - 1] == 1"
                                             for i in range(n_in)) + ";",
          "    int fl = 0;",
          "    #pragma omp parallel num_threads(nthreads) if(par) reduction(|:fl)",
          "    {",
          "    feclearexcept(FE_ALL_EXCEPT);",
          *(["    uint64_t keep = 0;"] if forced else []),
          *[f"    {ctype(k.reductions[i].acc_dtype)} *scratch{i} = "
            f"malloc(sizeof *scratch{i} * (inner > 0 ? inner : 1));" for i in scratch],
          "    #pragma omp for schedule(static)",
          "    for (int64_t o = 0; o < nout; o++) {",
          *([" ".join(["        if (", " || ".join(f"!scratch{i}" for i in scratch),
                       ") { fl |= DYN_NO_MEMORY; continue; }"])] if scratch else []),
          f"        {name}_row row;",
          "        row.S = S; row.nk = nk; row.nr = nr; row.rshape = rshape;",
          "        int64_t r = o;",
          "        " + " ".join(f"row.base[{i}] = 0; row.S_ptr{i} = in{i}; row.s{i} = "
                             f"st{i}[nd - 1];" for i in range(n_in)),
          "        for (int64_t d = nk - 1; d >= 0; d--) {",
          "            const int64_t i = r % kshape[d]; r /= kshape[d];",
          "            " + " ".join(f"row.base[{i}] += i * st{i}[d];" for i in range(n_in)),
          "        }"]
    for i, red in enumerate(k.reductions):
        L += _reduction_phase(k, i, red)
    if k.outputs:
        # Epilogue: the pointwise outputs over this row (axes are trailing: the row is a
        # contiguous stretch of nrows * inner elements of every output).
        n_red = len(k.reductions)
        L += ["        for (int64_t q = 0; q < nrows; q++) {",
              f"            {name}_at(&row, q);",
              "            const int64_t oo = (o * nrows + q) * inner;",
              "            const " + name + "_row *rp = &row;"]
        for variant in ("contig", "strided"):
            if variant == "contig":
                L += ["            if (contig) {"]
                pragma = "#pragma omp simd" + (" reduction(|:keep)" if forced else "")
                load = lambda v: f"rp->p{v.operand}[j]"  # noqa: E731
            else:
                L += ["            } else {"]
                pragma = ""
                load = lambda v: f"rp->p{v.operand}[j * rp->s{v.operand}]"  # noqa: E731
            preset = {k.reductions[i].value: f"out{n_red + e}[oo + j]"
                      for i, e in row_buffers(k).items()}
            L += element_loop(output_stores(k.outputs, "oo + j", n_red), load, "            ",
                              "0", "inner", pragma, forced, lambda rr: f"rp->r{rr.index}",
                              preset)
        L += ["            }", "        }"]
    L += ["    }"]
    L += [f"    free(scratch{i});" for i in scratch]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(serial_path(L)) + "\n"
