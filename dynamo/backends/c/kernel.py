"""Kernel runtime: run one compiled kernel on real arrays, or its NumPy path when that is better.

In: a kernel description (`loop_ir`), the loaded cffi function for it (from `build.py`), the
backend options. Out: `PointwiseRunner` / `ReductionRunner`, callables taking the kernel's input
values (ndarrays / NumPy scalars, in operand order) and returning its output values.
Called by the program `compile_graph` builds (`dynamo/backends/c/__init__.py`).

Per layout (cached by the inputs' shapes and strides): broadcast each input's strides over the
kernel domain (0 where broadcast, negative strides kept), drop size-1 dims and merge dims that
are contiguous for every operand (so most calls run one flat loop), and pack threads, shape and
strides into an ``int64_t[]`` block. Per call: collect data pointers, allocate outputs, call the
kernel; cffi releases the GIL during the call. No input is ever copied.

Dynamic shapes: a kernel planned over symbolic sizes (``kernel.shape`` holds `fx.symbolic.Sym`)
is called with its concrete domain shape, ``runner(inputs, shape)``, which the program computes
from the sizes of the graph's inputs; everything shape-dependent (output shapes, layout blocks)
is derived from that shape per call (cached per layout), so one kernel serves every size.

Floating-point errors: the kernel returns the FE_* flags it raised (a runner call returns
``(outputs, flags)``). The program (`compile_graph`) keeps the kernel's outputs only when no
raised flag's ``np.errstate`` mode is 'warn' (`fp_warn_mask`); otherwise it discards them and
runs the kernel's NumPy path, so the warnings are NumPy's own (category, message naming the
ufunc, order) and spurious flags of libm (e.g. ``hypot(inf, nan)``) never surface. When any
mode is 'raise', 'call', 'print' or 'log', or 'under' is not 'ignore' (NumPy's default; libm
and NumPy's loops disagree on underflow flags), the kernel is not used at all (`fp_warn_mask`
is None) and the NumPy path runs instead (the program `compile_graph` builds then runs the whole
graph as written), so exceptions and callbacks happen exactly where NumPy would raise them.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from .c_expressions import NUMPY_LOOP
from .config import COptions
from .loop_ir import Load, Op, PointwiseKernel, ReductionKernel, RowRef, rolled_loads, walk

__all__ = ["PointwiseRunner", "ReductionRunner", "fp_warn_mask", "numpy_modes_ok",
           "broadcast_strides", "coalesce", "output_order"]

# glibc x86-64 <fenv.h> bit values.
FE_INVALID, FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW = 0x01, 0x04, 0x08, 0x20

_QUIET_MODES = frozenset(("ignore", "warn"))
#: np.geterr() category -> the FE_* bit the kernel reports for it.
_FE_BITS = {"divide": FE_DIVBYZERO, "over": FE_OVERFLOW, "invalid": FE_INVALID,
            "under": FE_UNDERFLOW}


try:  # NumPy >= 2: the errstate lives in a context variable; each errstate() makes a new object
    from numpy._core._multiarray_umath import _extobj_contextvar as _errstate_var
except ImportError:  # pragma: no cover - older/other NumPy: always ask geterr()
    _errstate_var = None
_modes_cache: tuple[Any, int | None] = (object(), None)


#: Returned by a kernel with its FE_* flags when it could not allocate a buffer (its outputs
#: are unwritten): DYN_NO_MEMORY in the kernels' C.
NO_MEMORY = 1 << 30


def _compute_mask() -> int | None:
    modes = np.geterr()
    if not all(mode in _QUIET_MODES for mode in modes.values()) or modes["under"] != "ignore":
        # Underflow flags are not reliable across math libraries (libmvec's atan2 does not
        # raise FE_UNDERFLOW where NumPy's loop does): with 'under' reported, only NumPy runs.
        return None
    return sum(bit for name, bit in _FE_BITS.items() if modes.get(name) == "warn")


def fp_warn_mask() -> int | None:
    """The FE_* bits whose ``np.errstate`` mode is 'warn' (a kernel raising one of them must
    give way to its NumPy path, which warns exactly as NumPy does), or None when some mode is
    'raise'/'call'/'print'/'log' or underflow is reported (kernels must not run at all).

    Cached per errstate object (a 0.1 us context-variable read instead of a 1-3 us
    ``np.geterr()`` on every kernel call).
    """
    global _modes_cache
    if _errstate_var is not None:
        current = _errstate_var.get()
        cached = _modes_cache  # one read: (object, answer) stay consistent across threads
        if current is cached[0]:
            return cached[1]
        mask = _compute_mask()
        _modes_cache = (current, mask)
        return mask
    return _compute_mask()


def numpy_modes_ok() -> bool:
    """True when every ``np.geterr()`` mode is 'ignore' or 'warn' (kernels may run)."""
    return fp_warn_mask() is not None


def broadcast_strides(arr: np.ndarray, shape: tuple[int, ...]) -> list[int] | None:
    """Element strides of ``arr`` broadcast to ``shape`` (None if not expressible, or if ``arr``
    does not broadcast to ``shape``: the kernel would read out of bounds, so its NumPy path
    runs instead; with symbolic sizes the domain is computed, not read from a meta)."""
    item = arr.itemsize
    out = [0] * len(shape)
    off = len(shape) - arr.ndim
    if off < 0:
        return None
    for d, (n, s) in enumerate(zip(arr.shape, arr.strides)):
        if n == 1:
            continue
        if n != shape[off + d]:
            return None
        if s % item:
            return None
        out[off + d] = s // item
    return out


def coalesce(shape: list[int], strides: list[list[int]],
             pinned: Any = ()) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand. Dims in
    ``pinned`` (rolled axes: their index wraps) are never merged with a neighbour."""
    keep = [d for d, n in enumerate(shape) if n != 1]
    new_shape: list[int] = []
    new_strides: list[list[int]] = [[] for _ in strides]
    last = -1
    for d in keep:
        n = shape[d]
        if new_shape and d not in pinned and last not in pinned and all(
                ns[-1] == st[d] * n for ns, st in zip(new_strides, strides)):
            new_shape[-1] *= n
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[d]
            continue
        new_shape.append(n)
        last = d
        for ns, st in zip(new_strides, strides):
            ns.append(st[d])
    return new_shape, new_strides


def output_order(shape: tuple[int, ...], strides: list[list[int]]) -> list[int]:
    """NumPy's ``order='K'`` output layout: the domain's axes, outermost first.

    The same insertion sort as NumPy's iterator (``npyiter_find_best_axis_ordering``): an axis
    moves inside another only if every operand with non-zero strides on both agrees that it is
    the smaller stride (by absolute value); on a conflict C order wins. Broadcast (stride-0)
    and size-1 axes never decide. So F-ordered or transposed inputs give outputs laid out like
    NumPy's, with positive strides (as NumPy allocates them).
    """
    nd = len(shape)
    perm = list(range(nd - 1, -1, -1))  # iterator order: innermost axis first
    for i0 in range(1, nd):
        j0, ipos = perm[i0], i0
        for i1 in range(i0 - 1, -1, -1):
            j1 = perm[i1]
            ambiguous, swap = True, False
            for st in strides:
                s0, s1 = st[j0], st[j1]
                if s0 and s1:
                    if abs(s1) <= abs(s0):
                        swap = False  # C order wins conflicts: any "no" sticks
                    elif ambiguous:
                        swap = True
                    ambiguous = False
            if not ambiguous:
                if not swap:
                    break
                ipos = i1
        if ipos != i0:
            del perm[i0]
            perm.insert(ipos, j0)
    return perm[::-1]


_bufsize_cache: tuple[Any, int] = (object(), 0)


def bufsize() -> int:
    """``np.getbufsize()``, cached per errstate object (``np.setbufsize`` makes a new one, as
    ``np.errstate`` does): a 0.1 us context-variable read instead of a ~1 us call."""
    global _bufsize_cache
    if _errstate_var is None:  # pragma: no cover - NumPy without the context variable
        return np.getbufsize()
    current = _errstate_var.get()
    cached = _bufsize_cache
    if current is cached[0]:
        return cached[1]
    size = np.getbufsize()
    _bufsize_cache = (current, size)
    return size


#: What `pairwise_split` found (None until it is first asked).
_split: str | None = None


def pairwise_split() -> str:
    """How this NumPy cuts a float sum's pairwise run (the innermost reduced dim, coalesced),
    found once by a probe: "whole" (NumPy >= 2.3: the run is one pairwise sum, whatever its
    length), "chunks" (NumPy <= 2.2: its buffered reduce iterator hands the loop at most
    ``np.getbufsize()`` elements at a time even when nothing is copied, so a longer run is
    ``acc += pairwise(chunk)`` chunk after chunk, each chunk starting at a multiple of the
    buffer size from the run's start) or "unknown" (neither: runs longer than the buffer
    size are left to NumPy).

    The probe: 8193 zeros but x[0] = 1 and x[4096] = x[8192] = 2**-53, buffer 8192. Whole,
    the halves [0, 4096) and [4096, 8193) give 1 + 2**-52 exactly; in chunks, the first chunk
    rounds 1 + 2**-53 to 1 (ties to even) and so does adding the last element."""
    global _split
    if _split is None:
        with np.errstate():  # restores the buffer size (it lives in the same context)
            np.setbufsize(8192)
            x = np.zeros(8193)
            x[0] = 1.0
            x[4096] = x[8192] = 2.0 ** -53
            total = float(np.add.reduce(x))
        _split = {1.0 + 2.0 ** -52: "whole", 1.0: "chunks"}.get(total, "unknown")
    return _split


#: Reductions whose float result depends on the order of the additions/multiplications.
ORDERED_REDUCTIONS = frozenset(("sum", "mean", "prod"))
#: Longest kept inner run for which a float sum that NumPy accumulates row after row (its inner
#: loop runs along a kept dim: ``x.sum(axis=0)`` of a C array) still runs as a kernel.
SEQUENTIAL_MAX = 4


def reduce_iteration(shape: tuple[int, ...], strides: list[int],
                     axes: set[int]) -> list[tuple[list[int], bool]]:
    """How NumPy's ``add.reduce`` walks an input of ``shape``/``strides`` (elements) over
    ``axes``: the iterator's coalesced dims, outermost first, as (original dims, reduced).

    The reduction's nditer drops size-1 dims, orders the axes by the input's strides alone
    (`output_order`: the result is allocated afterwards, contiguous in that order, and negative
    strides are not flipped), then merges neighbours that are contiguous for the input and for
    the result (two reduced dims, or two kept dims, never one of each). Per result element the
    additions follow the reduced dims in that order; when the innermost dim is reduced, each
    run along it is summed pairwise (``*out += pairwise_sum(run)``), otherwise every element is
    added in turn (the inner loop runs over a kept dim: ``out[j] += x[i, j]``).
    """
    perm = [d for d in output_order(shape, [strides]) if shape[d] != 1]
    out_stride: dict[int, int] = {}
    size = 1
    for d in reversed(perm):
        if d not in axes:
            out_stride[d] = size
            size *= shape[d]
    dims: list[tuple[list[int], bool]] = []
    last = (0, 0)  # (input stride, result stride) of the innermost dim of dims[-1]
    for d in perm:
        n, s, o, r = shape[d], strides[d], out_stride.get(d, 0), d in axes
        if dims and dims[-1][1] == r and last == (s * n, o * n):
            dims[-1][0].append(d)
        else:
            dims.append(([d], r))
        last = (s, o)
    return dims


def _contiguous_strides(shape: tuple[int, ...], perm: list[int]) -> list[int]:
    """Element strides of a fresh array of ``shape`` laid out in axis order ``perm``."""
    st = [0] * len(shape)
    size = 1
    for d in reversed(perm):
        st[d] = size if shape[d] != 1 else 0
        size *= shape[d]
    return st


#: Layout plans kept per runner before the cache starts over.
_MAX_PLANS = 256


def _finish(out: np.ndarray, meta: Any) -> Any:
    # A NumPy ufunc on 0-d inputs (or a full reduction) returns a NumPy scalar, not a 0-d array.
    if getattr(meta, "is_scalar", False):
        return out.reshape(())[()]
    return out


class _Runner:
    """Shared per-call machinery: input checks, cached layout blocks, data pointers, FP flags.

    ``plans`` maps the inputs' (shapes, strides) to a ready cffi ``int64_t[]`` block (threads,
    shape and strides), so a repeated call only collects data pointers and allocates outputs.
    """

    def __init__(self, kernel: Any, fn: Callable[..., int], ffi: Any, options: COptions):
        self.kernel = kernel
        self.fn = fn
        self.ffi = ffi
        self.options = options
        self.in_dtypes = [od.dtype for od in kernel.operands]
        self.plans: dict[tuple, Any] = {}
        #: The domain has symbolic sizes: every call passes the concrete shape (see module doc).
        self.dynamic = any(not isinstance(d, int) for d in kernel.shape)
        #: Kernel launches so far (tests assert that the kernel really ran).
        self.calls = 0
        #: (best kernel seconds, best NumPy seconds) measured by calibration, if it ran.
        self.calibration: tuple[float, float] | None = None
        #: OpenMP threads the kernel runs with: ``options.threads`` until calibration finds
        #: one thread faster (part of every layout plan's key).
        self.threads = options.threads
        #: Inputs a NumPy-loop op (exp, sin, ...) reads directly: eager NumPy runs its loop on
        #: the input itself, and its loops take another code path (other bits) for a negative
        #: stride; the kernel calls them on contiguous blocks, so such layouts run NumPy's path.
        values = kernel.outputs if kernel.kind == "pointwise" else kernel.values
        self.math_inputs = sorted({a.operand for v in walk(values) if isinstance(v, Op)
                                   and v.name in NUMPY_LOOP for a in v.args
                                   if isinstance(a, Load) and not a.roll})

    def _arrays(self, inputs: list[Any]) -> list[np.ndarray] | None:
        arrays = []
        for value, dt in zip(inputs, self.in_dtypes):
            arr = value if type(value) is np.ndarray else np.asarray(value)
            if arr.dtype != dt or not arr.flags.aligned:
                return None
            arrays.append(arr)
        return arrays

    #: Whether a plan depends on ``np.getbufsize()`` (then it is part of the plan's key).
    bufsize_dependent = False

    def _arrays_and_plan(self, inputs: list[Any],
                         shape: tuple[int, ...] | None) -> tuple[list[np.ndarray], Any] | None:
        """The input arrays and the cached plan for their (shapes, strides) and the domain
        ``shape``, made on first sight; None when this kernel cannot run these inputs (the
        NumPy path runs instead)."""
        arrays = self._arrays(inputs)
        if arrays is None:
            return None
        key: Any = (self.threads, tuple((a.shape, a.strides) for a in arrays))
        if self.bufsize_dependent:
            key = (bufsize(), key)
        if self.dynamic:
            if shape is None:
                raise TypeError(f"kernel {self.kernel.name} has symbolic sizes: pass its "
                                "concrete domain shape")
            key = (shape, key)
        else:
            shape = self.kernel.shape
        plan = self.plans.get(key, False)
        if plan is False:
            if len(self.plans) >= _MAX_PLANS:
                # Many sizes (dynamic shapes) or layouts: start over rather than grow forever.
                self.plans.clear()
            plan = self.plans[key] = False if any(
                s < 0 for i in self.math_inputs for s in arrays[i].strides
            ) else self._plan(arrays, tuple(shape))  # type: ignore[arg-type]
        return None if plan is False else (arrays, plan)

    def _plan(self, arrays: list[np.ndarray], shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def _pointer(self, arr: np.ndarray) -> Any:
        # from_buffer is the cheap way to an address, but only for a C-contiguous buffer
        # (whose start is the data pointer); other views go through ctypes.
        if arr.flags.c_contiguous:
            return self.ffi.from_buffer(arr)
        return self.ffi.cast("char *", arr.ctypes.data)

    def _run(self, block: Any, arrays: list[np.ndarray], outs: list[np.ndarray],
             threads: int | None = None) -> int:
        """Launch the kernel; returns the FE_* flags it raised (0 with ``fp_errors=False``).
        ``threads``: run with this many threads instead of the plan's (calibration)."""
        if threads is not None and threads != block[0]:
            block = self._block(list(block))
            block[1] = int(threads > 1 and block[1])
            block[0] = threads
        ptrs = [self._pointer(a) for a in arrays]
        ptrs.extend(self.ffi.from_buffer(o) for o in outs)
        flags = self.fn(block, ptrs)
        if flags & NO_MEMORY:  # (outputs unwritten: NumPy too raises when it cannot allocate)
            raise MemoryError("npdynamo's C kernel could not allocate its row buffer")
        self.calls += 1
        return flags if self.options.fp_errors else 0

    def _par(self, size: int) -> list[int]:
        threads = self.threads
        return [threads, int(threads > 1 and size >= self.options.parallel_threshold)]

    def parallel_for(self, shape: tuple[int, ...] | None = None) -> bool:
        """Would a call over domain ``shape`` (default: the kernel's) run its parallel loop
        with ``options.threads``? (Only then does the thread count matter.)"""
        size = prod(self.kernel.shape if shape is None else shape)
        return self.options.threads > 1 and size >= self.options.parallel_threshold

    def verdict_key(self, inputs: Any, shape: tuple[int, ...] | None = None) -> str | None:
        """The key of a calibration verdict for these inputs: the kernel, the thread options,
        the domain and the inputs' layout (what decides which path is faster), as text."""
        arrays = self._arrays(list(inputs))
        if arrays is None:
            return None
        o = self.options
        return repr((self.kernel.name, o.threads, o.parallel_threshold, o.block,
                     tuple(self.kernel.shape if shape is None else shape),
                     tuple((a.shape, a.strides) for a in arrays)))

    def _block(self, values: list[int]) -> Any:
        return self.ffi.new("int64_t[]", values)


class PointwiseRunner(_Runner):
    """Runs a `PointwiseKernel`: ``runner(inputs) -> (outputs, FE flags)`` or None (use NumPy).

    Each output is laid out as NumPy would lay it out (order 'K' over the temporaries eager code
    makes on the way to that output, not over the whole kernel's operands; `_node_orders`):
    the kernel runs in the axis order most outputs want,
    and an output that wants another order is copied into it (one extra pass, rare: outputs of
    one kernel reading inputs of different layouts).
    """

    kernel: PointwiseKernel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        k = self.kernel
        # NumPy's layout of each output follows the temporaries eager code creates on the way
        # (each fused-away node is one, laid out by its own rule over its own inputs), not
        # the kernel's inputs directly: `a.astype(np.int32) <= +a` with `a` broadcast is
        # C-ordered in NumPy (the `+a` temporary is C, it wins the conflict with the astype's
        # F order) although `a` alone would leave the order open.
        # Steps: (member node, rule, its array input nodes); "like": ndarray.astype (order
        # 'K' copies the input's stride order, PyArray_NewLikeArray); "iter": ufuncs, where,
        # clip (the iterator's rule, `output_order`).
        operand_of = {od.node: i for i, od in enumerate(k.operands)}
        known = set(operand_of)
        self.layout_steps: list[tuple[Any, str, list[Any]]] = []
        for n in k.members:
            ins = [x for x in n.all_input_nodes if x in known]
            # np.roll's result is np.empty_like(a) (order 'K'), like astype's.
            rule = "like" if (n.op == "call_method" and n.target == "astype"
                              or n.op == "call_function" and n.target is np.roll) else "iter"
            self.layout_steps.append((n, rule, ins))
            known.add(n)
        self.operand_of = operand_of
        #: Roll slots (`loop_ir.rolled_loads`): per slot ((domain axis, shift), ...); their
        #: per-dim shifts follow the strides in the layout block.
        self.rolls = [ld.roll for ld in rolled_loads(k.outputs)]

    def _node_orders(self, strides: list[list[int]],
                     shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The axis order (outermost first) NumPy gives each output, from the inputs' domain
        strides, following every fused-away temporary (see ``__init__``)."""
        st: dict[Any, list[int]] = {n: strides[i] for n, i in self.operand_of.items()}
        order: dict[Any, tuple[int, ...]] = {}
        for n, rule, ins in self.layout_steps:
            if rule == "like" and len(ins) == 1 and len(shape) > 1:
                src = st[ins[0]]
                perm = sorted(range(len(shape)), key=lambda d: -abs(src[d]))
            elif rule == "like":
                perm = list(range(len(shape)))
            else:
                perm = output_order(shape, [st[x] for x in ins])
            order[n] = tuple(perm)
            st[n] = _contiguous_strides(shape, perm)
        return [order[n] if n in order else
                tuple(output_order(shape, [st[n]] if n in st else []))
                for n in self.kernel.out_nodes]

    def _plan(self, arrays: list[np.ndarray], shape: tuple[int, ...]) -> Any:
        """(layout block or None for an empty domain, iteration axis order or None for C,
        per output None or the axis order it must be copied into, domain shape)."""
        domain = shape
        strides = [broadcast_strides(a, shape) for a in arrays]
        if any(st is None for st in strides):
            return False
        wanted = self._node_orders(strides, shape)  # type: ignore[arg-type]
        perm = list(max(wanted, key=wanted.count)) if wanted else list(range(len(shape)))
        fixes = [None if list(w) == perm else list(w) for w in wanted]
        if not any(fixes):
            fixes = None
        # Each roll slot's shift per domain dim, in [0, n) (a roll wraps modulo the length).
        shifts = [[0] * len(shape) for _ in self.rolls]
        for sh, roll in zip(shifts, self.rolls):
            for axis, s in roll:
                sh[axis] = s % (shape[axis] or 1)
        if perm == sorted(perm):
            perm = None
        else:
            # Run the kernel over the permuted domain: outputs are C-contiguous there, which
            # is NumPy's layout once transposed back.
            shape = tuple(shape[p] for p in perm)
            strides = [[st[p] for p in perm] for st in strides]  # type: ignore[index]
            shifts = [[sh[p] for p in perm] for sh in shifts]
        pinned = {d for sh in shifts for d, s in enumerate(sh) if s}
        # The shifts coalesce like strides (a rolled dim is never merged; other dims carry 0).
        cshape, cstrides = coalesce(list(shape), strides + shifts,  # type: ignore[operator]
                                    pinned)
        if not cshape:
            cshape, cstrides = [1], [[0] for _ in cstrides]
        size = prod(shape)
        values = [*self._par(size), self.options.block, len(cshape), *cshape]
        for st in cstrides:
            values.extend(st)
        return (self._block(values) if size else None), perm, fixes, domain

    def __call__(self, inputs: Any, shape: tuple[int, ...] | None = None,
                 threads: int | None = None) -> tuple[list[Any], int] | None:
        """``shape``: the concrete domain, required when the kernel's sizes are symbolic;
        ``threads``: override the thread count (calibration times each candidate)."""
        k = self.kernel
        found = self._arrays_and_plan(inputs, shape)
        if found is None:
            return None
        arrays, (block, perm, fixes, shape) = found
        flags = 0
        if perm is None:
            outs = [np.empty(shape, v.dtype) for v in k.outputs]
            if block is not None:
                flags = self._run(block, arrays, outs, threads)
            if fixes is None:
                return [_finish(o, n.meta.get("val")) for o, n in zip(outs, k.out_nodes)], flags
        else:
            pshape = tuple(shape[p] for p in perm)
            back = np.argsort(perm)
            outs = [np.empty(pshape, v.dtype) for v in k.outputs]
            if block is not None:
                flags = self._run(block, arrays, outs, threads)
            outs = [o.transpose(back) for o in outs]
            if fixes is None:
                return outs, flags
        for j, order in enumerate(fixes):
            if order is not None:
                dst = np.empty(tuple(shape[p] for p in order), outs[j].dtype)
                dst = dst.transpose(np.argsort(order))
                np.copyto(dst, outs[j])
                outs[j] = dst
        return outs, flags


class ReductionRunner(_Runner):
    """Runs a `ReductionKernel`: ``runner(inputs) -> (results, FE flags)`` or None (NumPy)."""

    kernel: ReductionKernel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        k = self.kernel
        axes = set(k.axes)
        self.kept = [d for d in range(len(k.shape)) if d not in axes]
        self.red = [d for d in range(len(k.shape)) if d in axes]
        self.red_out = [(np.dtype(np.intp) if r.op in ("argmax", "argmin") else r.out_dtype,
                         r.keepdims, r.node.meta.get("val")) for r in k.reductions]
        self.epi_out = [(v.dtype, n.meta.get("val")) for v, n in zip(k.outputs, k.epilogue_nodes)]
        # Per output (reductions, then epilogue outputs): the operands whose layout decides
        # NumPy's layout of that output, and whether it is an epilogue (over the whole domain).
        # A reduction's operands include those of earlier phases it reads (RowRef); an
        # epilogue's are its direct loads: the row values it reads are reduction results,
        # each checked as an output of its own (C over the kept dims, or the kernel declines).
        red_ops = [{v.operand for v in walk([r.value]) if isinstance(v, Load)}
                   for r in k.reductions]
        for i, r in enumerate(k.reductions):
            for v in walk([r.value]):
                if isinstance(v, RowRef):
                    red_ops[i] |= red_ops[v.index]
        self.out_operands: list[tuple[list[int], bool]] = [(sorted(o), False) for o in red_ops]
        self.out_operands += [(sorted({x.operand for x in walk([v]) if isinstance(x, Load)}),
                               True) for v in k.outputs]
        # Per order-sensitive float reduction (sum/mean/prod), what NumPy's reduce iterates:
        # ("load", j, cast) an input directly (its own strides decide) or ("temp", operands,
        # rowrefs, cast) a fresh temporary eager code computes first (laid out in order 'K'
        # over what it reads); ``cast``: the reduce converts each element (np.mean of
        # integers), so NumPy copies the input through its buffer (np.getbufsize() elements)
        # and sums each buffer pairwise: the kernel matches only when one buffer holds it all.
        self.order_src: list[Any] = []
        for r in k.reductions:
            if r.op not in ORDERED_REDUCTIONS or r.acc_dtype.kind != "f":
                self.order_src.append(False)
            elif isinstance(r.value, Load):
                self.order_src.append(("load", r.value.operand, r.value.dtype != r.acc_dtype))
            else:
                vals = walk([r.value])
                self.order_src.append(("temp", sorted({v.operand for v in vals
                                                       if isinstance(v, Load)}),
                                       sorted({v.index for v in vals if isinstance(v, RowRef)}),
                                       r.value.dtype != r.acc_dtype))
        self.has_arg = any(r.op in ("argmax", "argmin") for r in k.reductions)
        # NumPy's order depends on the buffer size for casting reduces (all NumPy versions)
        # and, where NumPy sums a long pairwise run in buffer-sized chunks, for every float sum.
        self.bufsize_dependent = any(
            src is not False and (src[-1] or (r.op != "prod" and pairwise_split() != "whole"))
            for src, r in zip(self.order_src, k.reductions))

    def _numpy_order(self, shape: tuple[int, ...],
                     strides: list[list[int]]) -> Any:
        """The reduced dims NumPy's reduce walks for this kernel's order-sensitive reductions:
        (groups of dims outermost first, whether the innermost group is a pairwise run); None
        when there is no such reduction, False when they disagree or one cannot be matched."""
        spec: Any = None
        red = set(self.red)
        for src in self.order_src:
            if src is False:
                continue
            if src[-1] and prod(shape) > bufsize():
                return False
            if src[0] == "load":
                vst = strides[src[1]]
            else:
                votes = [strides[j] for j in src[1]]
                # An earlier reduction's result, as eager code has it: C order over the kept
                # dims (other layouts were declined above), broadcast along the reduced ones.
                kept_c = _contiguous_strides(shape, self.kept)
                votes += [[0 if d in red else kept_c[d] for d in range(len(shape))]
                          for _ in src[2]]
                vst = _contiguous_strides(shape, output_order(shape, votes))
            it = reduce_iteration(shape, vst, red)
            if len(it) >= 2 and it[-1][1] and it[-2][1]:
                # Two reduced dims innermost that do not merge (x[::-1].sum()): NumPy buffers
                # the input to sum them as one pairwise run, which the kernel cannot walk.
                return False
            if it and not it[-1][1] and prod(shape[d] for d in it[-1][0]) > SEQUENTIAL_MAX:
                # NumPy adds row after row, vectorised along the kept dim; the row kernel
                # would walk one column at a time, an element per step (40x slower on
                # (1000, 1000).sum(axis=0)): only narrow kept runs stay kernels.
                return False
            key = (tuple(tuple(g) for g, r in it if r), bool(it) and it[-1][1])
            if spec is None:
                spec = key
            elif spec != key:
                return False
        return spec

    def _plan(self, arrays: list[np.ndarray], shape: tuple[int, ...]) -> Any:
        """(layout block or None for an empty result, domain shape, result shape, result
        shape with keepdims)."""
        strides = [broadcast_strides(a, shape) for a in arrays]
        if any(st is None for st in strides):
            return False
        kept, red = self.kept, self.red
        # NumPy lays out each epilogue (and multi-dim reduction) output like the operands that
        # output reads; the row kernel writes C order, so other layouts run as NumPy calls.
        for ops, epilogue in self.out_operands:
            perm = output_order(shape, [strides[i] for i in ops])  # type: ignore[misc]
            if not epilogue:
                perm = [p for p in perm if p in kept and shape[p] != 1]
            if perm != sorted(perm):
                return False
        kshape, kstr = coalesce([shape[d] for d in kept], [[s[d] for d in kept] for s in strides])
        spec = self._numpy_order(shape, strides)  # type: ignore[arg-type]
        chunk = 0  # the kernel's pairwise chunk length: 0 for the whole run
        if spec is False:
            return False
        if spec is None:  # max/min/any/all/integer sums: the order does not change the result
            rshape, rstr = coalesce([shape[d] for d in red], [[s[d] for d in red] for s in strides])
        else:
            # Walk the reduced dims in NumPy's order: the outer ones one element or run at a
            # time (the row loop), the innermost pairwise group as the kernel's inner run, or,
            # when NumPy's inner loop runs over a kept dim, a size-1 inner run (each element
            # added in turn, as NumPy does).
            groups, pairwise = spec
            order = [d for g in groups for d in g]
            if (self.kernel.outputs or self.has_arg) and order != sorted(order):
                return False  # epilogue rows and arg positions are in C order
            outer = [d for g in (groups[:-1] if pairwise else groups) for d in g]
            rshape, rstr = coalesce([shape[d] for d in outer],
                                    [[s[d] for d in outer] for s in strides])
            if pairwise:
                run = list(groups[-1])
                ish, ist = coalesce([shape[d] for d in run], [[s[d] for d in run] for s in strides])
                if len(ish) != 1:  # some operand cannot walk NumPy's run as one stride
                    return False
                if ish[0] > bufsize():
                    # NumPy <= 2.2 sums the run in buffer-sized chunks (`pairwise_split`).
                    split = pairwise_split()
                    if split == "unknown":
                        return False
                    if split == "chunks":
                        chunk = bufsize()
            else:
                ish, ist = [1], [[0] for _ in strides]
            rshape = rshape + ish
            rstr = [a + b for a, b in zip(rstr, ist)]
        if not kshape:
            kshape, kstr = [1], [[0] for _ in strides]
        if not rshape:
            rshape, rstr = [1], [[0] for _ in strides]
        out_shape = tuple(shape[d] for d in kept)
        keep_shape = tuple(1 if d in red else n for d, n in enumerate(shape))
        values = [*self._par(prod(shape)), len(kshape), len(rshape), *kshape, *rshape]
        for ks, rs in zip(kstr, rstr):
            values.extend(ks)
            values.extend(rs)
        values.append(chunk)
        return (self._block(values) if prod(out_shape) else None), shape, out_shape, keep_shape

    def __call__(self, inputs: Any, shape: tuple[int, ...] | None = None,
                 threads: int | None = None) -> tuple[list[Any], int] | None:
        """``shape``: the concrete domain, required when the kernel's sizes are symbolic;
        ``threads``: override the thread count (calibration times each candidate)."""
        found = self._arrays_and_plan(inputs, shape)
        if found is None:
            return None
        arrays, (block, shape, out_shape, keep_shape) = found
        red_outs = [np.empty(out_shape, dt) for dt, _, _ in self.red_out]
        epi_outs = [np.empty(shape, dt) for dt, _ in self.epi_out]
        flags = 0
        if block is not None:
            flags = self._run(block, arrays, red_outs + epi_outs, threads)
        results = []
        for out, (_, keepdims, meta) in zip(red_outs, self.red_out):
            results.append(_finish(out.reshape(keep_shape) if keepdims else out, meta))
        results.extend(_finish(o, meta) for o, (_, meta) in zip(epi_outs, self.epi_out))
        return results, flags
