"""C for pointwise kernels: the domain walked as rows cut into blocks, in parallel.

In: a `PointwiseKernel` (``loop_ir``). Out: the C function of the kernel (`pointwise_source`),
its argument block and data pointers laid out as documented there (`kernel.PointwiseRunner`
fills them). Rows whose operands all have unit inner stride take a contiguous ``omp simd``
loop; operands broadcast along the row are read once per row; rolled operands (an inlined
``np.roll``) are read with wrapped indices. Called by `codegen_c.kernel_source`.
"""

from __future__ import annotations

from math import prod
from typing import Any

from .c_expressions import ctype
from .c_flags import forced_values
from .c_loops import PARALLEL, element_loop, operand_decls, output_stores, serial_path
from .loop_ir import Load, PointwiseKernel, Value, rolled_loads

__all__ = ["pointwise_source"]


def _row_invariant(operands: list, shape: tuple[int, ...], axis: int) -> set[int]:
    """Operands whose inner (coalesced) stride is always 0: a single element, or broadcast
    along ``axis`` of a domain whose ``axis`` is longer than 1 (that axis always ends the inner
    run). Static (from the metas), so the kernel can hoist their load out of the inner loop
    and keep the unit-stride ``omp simd`` path for the rest (``x * scalar``).

    With symbolic sizes (dynamic shapes) only what holds for every size counts: a symbolic
    dimension is never taken to be 1 (``s0 - 1`` may be 1 at run time: not hoisting is always
    correct), and the domain's axis must be longer than 1 for every size (its lower bound)."""
    inv = set()
    for i, od in enumerate(operands):
        if all(type(d) is int for d in od.shape) and prod(od.shape) == 1:
            inv.add(i)
            continue
        off = len(shape) - len(od.shape)
        if axis >= 0 and _always_above_one(shape[axis]) and (
                axis < off or type(od.shape[axis - off]) is int and od.shape[axis - off] == 1):
            inv.add(i)
    return inv


def _always_above_one(size: Any) -> bool:
    """Is this size (an int or an `fx.symbolic.Sym`) > 1 whatever the run-time sizes? Reads
    the symbol's bounds only (a comparison on a Sym would record a guard fact)."""
    if type(size) is int:
        return size > 1
    lower = getattr(size, "lower_bound", None)
    return lower is not None and lower() > 1


def pointwise_source(k: PointwiseKernel) -> str:
    """C for a pointwise kernel.

    ``A = [threads, parallel, block, nd, shape[nd], then per input strides[nd] (in elements, 0
    where broadcast)]``; ``P`` = data pointers of the inputs, then of the (C-contiguous) outputs.
    The domain is walked as rows (all but the last dim) cut into blocks of ``block`` elements;
    rows whose inputs all have unit inner stride take the contiguous ``omp simd`` loop.
    """
    n_in = len(k.operands)
    outs = [ctype(v.dtype) for v in k.outputs]
    inv = _row_invariant(k.operands, k.shape, len(k.shape) - 1)
    forced = forced_values(k.outputs)
    slots = {ld: m for m, ld in enumerate(rolled_loads(k.outputs))}
    L = [f"int {k.name}(const int64_t *A, char **P)", "{",
         "    const int nthreads = (int)A[0], par = (int)A[1];",
         "    const int64_t blk = A[2], nd = A[3];",
         "    const int64_t *shape = A + 4, *S = A + 4 + nd;"]
    L += operand_decls(k, n_in, outs)
    if slots:
        return _rolled_pointwise_source(k, L, slots, inv, forced)
    L += _blocked_work(n_in, inv, forced)
    L += [
          "        int64_t r = row" + "".join(f", o{i} = 0" for i in range(n_in)) + ", oo = 0;",
          "        for (int64_t d = nd - 2; d >= 0; d--) {",
          "            const int64_t i = r % shape[d]; r /= shape[d];",
          "            " + " ".join(f"o{i} += i * st{i}[d];" for i in range(n_in)),
          "        }",
          "        oo = row * inner;"]
    for mode in ("contig", "strided"):
        if mode == "contig":
            L.append("        if (contig) {")
            for i, od in enumerate(k.operands):
                if i in inv:  # broadcast along the row: one load per row, hoisted
                    L.append(f"            const {ctype(od.dtype)} x{i} = in{i}[o{i}];")
                else:
                    L.append(f"            const {ctype(od.dtype)} *restrict x{i} = in{i} + o{i};")
            pragma = "#pragma omp simd" + (" reduction(|:keep)" if forced else "")
            load = lambda v: f"x{v.operand}" if v.operand in inv else f"x{v.operand}[j]"  # noqa
        else:
            L.append("        } else {")
            L.append("            " + " ".join(
                f"const int64_t s{i} = st{i}[nd - 1];" for i in range(n_in)))
            pragma = ""
            load = lambda v: f"in{v.operand}[o{v.operand} + j * s{v.operand}]"  # noqa: E731
        L += element_loop(output_stores(k.outputs, "oo + j"), load, "            ", "j0", "j1",
                          pragma, forced)
    L += ["        }", "    }"]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(serial_path(L)) + "\n"


def _blocked_work(n_in: int, inv: set, forced: Any) -> list[str]:
    """The work split of a pointwise kernel: ``outer`` rows of ``inner`` elements in blocks of
    ``blk`` (``nwork`` blocks), whether the inner run is contiguous for every operand, and the
    parallel loop over the blocks up to this block's ``row``, ``j0`` and ``j1``. Hoisted
    (row-invariant) operands must really have stride 0 in the inner run: with a permuted
    domain (NumPy's output order for F-ordered inputs) they may not."""
    return ["    const int64_t inner = shape[nd - 1];",
            "    int64_t outer = 1;",
            "    for (int64_t d = 0; d < nd - 1; d++) outer *= shape[d];",
            "    const int64_t nblk = inner > 0 ? (inner + blk - 1) / blk : 0;",
            "    const int64_t nwork = outer * nblk;",
            "    const int contig = 1" + "".join(f" && st{i}[nd - 1] == {int(i not in inv)}"
                                               for i in range(n_in)) + ";",
            "    int fl = 0;",
            PARALLEL,
            "    {",
            "    feclearexcept(FE_ALL_EXCEPT);",
            *(["    uint64_t keep = 0;"] if forced else []),
            "    #pragma omp for schedule(static)",
            "    for (int64_t w = 0; w < nwork; w++) {",
            "        const int64_t row = w / nblk, j0 = (w % nblk) * blk;",
            "        const int64_t j1 = j0 + blk < inner ? j0 + blk : inner;"]


def _rolled_pointwise_source(k: PointwiseKernel, L: list[str], slots: dict[Load, int],
                             inv: set[int], forced: list[Value]) -> str:
    """`pointwise_source` for a kernel with rolled Loads (an inlined ``np.roll``). Each roll
    slot ``m`` (a rolled Load) has its per-dim shifts ``rs<m>[nd]`` in ``[0, n)`` after the
    strides in ``A`` (`kernel.PointwiseRunner`, which never merges a rolled dim): along dim d
    it reads index ``i - rs[d]``, plus ``n`` when that is negative. Its row offset ``q<m>`` is
    computed like ``o<i>`` with the wrapped outer indices; along the inner dim the block is cut
    where a slot's index wraps (at ``j == rs[nd - 1]``), so between cuts every slot reads a
    unit-stride run and the ``omp simd`` loop stays a plain vector loop."""
    n_in = len(k.operands)
    order = list(slots)
    L += [f"    const int64_t *rs{m} = S + {n_in + m} * nd;" for m in range(len(order))]
    L += _blocked_work(n_in, inv, forced)
    L += [
          "        int64_t r = row" + "".join(f", o{i} = 0" for i in range(n_in))
          + "".join(f", q{m} = 0" for m in range(len(order))) + ", oo = 0;",
          "        for (int64_t d = nd - 2; d >= 0; d--) {",
          "            const int64_t i = r % shape[d]; r /= shape[d];",
          "            " + " ".join(f"o{i} += i * st{i}[d];" for i in range(n_in)),
          *[f"            q{m} += (i >= rs{m}[d] ? i - rs{m}[d] : i - rs{m}[d] + shape[d])"
            f" * st{ld.operand}[d];" for ld, m in slots.items()],
          "        }",
          "        oo = row * inner;",
          "        " + " ".join(f"const int64_t rr{m} = rs{m}[nd - 1];"
                              for m in range(len(order)))]

    def plain(v: Load, mode: str) -> str:
        if mode == "contig":
            return f"x{v.operand}" if v.operand in inv else f"x{v.operand}[j]"
        return f"in{v.operand}[o{v.operand} + j * s{v.operand}]"

    # contiguous rows: runs between the wrap points of the slots' inner indices
    L.append("        if (contig) {")
    for i, od in enumerate(k.operands):
        if i in inv:
            L.append(f"            const {ctype(od.dtype)} x{i} = in{i}[o{i}];")
        else:
            L.append(f"            const {ctype(od.dtype)} *restrict x{i} = in{i} + o{i};")
    for ld, m in slots.items():
        t = ctype(ld.dtype)
        if ld.operand in inv:  # inner stride 0: the inner shift moves nothing
            L.append(f"            const {t} y{m} = in{ld.operand}[q{m}];")
        else:
            L.append(f"            const {t} *restrict y{m} = in{ld.operand} + q{m};")
    L += ["            for (int64_t ja = j0, jb; ja < j1; ja = jb) {",
          "                jb = j1;",
          *[f"                if (rr{m} > ja && rr{m} < jb) jb = rr{m};"
            for m in range(len(order))],
          *[f"                const int64_t e{m} = ja >= rr{m} ? -rr{m} : inner - rr{m};"
            for ld, m in slots.items() if ld.operand not in inv]]

    def load_contig(v: Load) -> str:
        if not v.roll:
            return plain(v, "contig")
        m = slots[v]
        return f"y{m}" if v.operand in inv else f"y{m}[j + e{m}]"

    L += element_loop(output_stores(k.outputs, "oo + j"), load_contig, "                ", "ja",
                      "jb", "#pragma omp simd" + (" reduction(|:keep)" if forced else ""),
                      forced)
    L += ["            }"]
    # any other row: strided reads with the wrapped index computed per element
    L += ["        } else {",
          "            " + " ".join(f"const int64_t s{i} = st{i}[nd - 1];" for i in range(n_in))]

    def load_strided(v: Load) -> str:
        if not v.roll:
            return plain(v, "strided")
        m = slots[v]
        return (f"in{v.operand}[q{m} + (j >= rr{m} ? j - rr{m} : j - rr{m} + inner)"
                f" * s{v.operand}]")

    L += element_loop(output_stores(k.outputs, "oo + j"), load_strided, "            ", "j0",
                      "j1", "", forced)
    L += ["        }", "    }"]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(serial_path(L)) + "\n"
