"""Kernel runtime: run one compiled kernel on real arrays, or its NumPy path when that is better.

In: a kernel description (`loop_ir`), the loaded cffi function for it (from `build.py`), the
backend options. Out: `PointwiseRunner` / `ReductionRunner`, callables taking the kernel's input
values (ndarrays / NumPy scalars, in operand order) and returning its output values.
Called by the program `compile_graph` builds (`dynamo/backends/c/__init__.py`).

Per call: broadcast each input's strides over the kernel domain (0 where broadcast, negative
strides kept), drop size-1 dims and merge dims that are contiguous for every operand (so most
calls run one flat loop), pack everything into one int64 block, and call the kernel; cffi
releases the GIL during the call. No input is ever copied.

Floating-point errors: the kernel returns the FE_* flags it raised; they are replayed through a
one-element NumPy operation of the same category, so NumPy's own ``np.errstate`` machinery
decides between ignore and warn. When any mode is 'raise', 'call', 'print' or 'log', the kernel
is not used at all (`numpy_modes_ok` is False) and the NumPy path runs instead, so exceptions
and callbacks happen exactly where NumPy would raise them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .config import COptions
from .loop_ir import PointwiseKernel, ReductionKernel

__all__ = ["PointwiseRunner", "ReductionRunner", "replay_fp_flags", "numpy_modes_ok",
           "broadcast_strides", "coalesce"]

# glibc x86-64 <fenv.h> bit values.
FE_INVALID, FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW = 0x01, 0x04, 0x08, 0x20

_ONE, _ZERO = np.ones(1), np.zeros(1)
_BIG, _TINY, _INF = np.full(1, 1e308), np.full(1, 1e-308), np.full(1, np.inf)
_REPLAY: tuple[tuple[int, Callable[[], Any]], ...] = (
    (FE_DIVBYZERO, lambda: np.divide(_ONE, _ZERO)),
    (FE_OVERFLOW, lambda: np.multiply(_BIG, _BIG)),
    (FE_INVALID, lambda: np.subtract(_INF, _INF)),
    (FE_UNDERFLOW, lambda: np.multiply(_TINY, _TINY)),
)
_QUIET_MODES = frozenset(("ignore", "warn"))


def numpy_modes_ok() -> bool:
    """True when every ``np.geterr()`` mode is 'ignore' or 'warn' (kernels may run)."""
    return all(mode in _QUIET_MODES for mode in np.geterr().values())


def replay_fp_flags(flags: int) -> None:
    """Raise NumPy's warnings for the FE_* bits in ``flags`` as the current errstate says."""
    for bit, op in _REPLAY:
        if flags & bit:
            op()


def broadcast_strides(arr: np.ndarray, shape: tuple[int, ...]) -> list[int] | None:
    """Element strides of ``arr`` broadcast to ``shape`` (None if not expressible)."""
    item = arr.itemsize
    out = [0] * len(shape)
    off = len(shape) - arr.ndim
    for d, (n, s) in enumerate(zip(arr.shape, arr.strides)):
        if n == 1:
            continue
        if s % item:
            return None
        out[off + d] = s // item
    return out


def coalesce(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand."""
    keep = [d for d, n in enumerate(shape) if n != 1]
    new_shape: list[int] = []
    new_strides: list[list[int]] = [[] for _ in strides]
    for d in keep:
        n = shape[d]
        if new_shape and all(ns[-1] == st[d] * n for ns, st in zip(new_strides, strides)):
            new_shape[-1] *= n
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[d]
            continue
        new_shape.append(n)
        for ns, st in zip(new_strides, strides):
            ns.append(st[d])
    return new_shape, new_strides


def _as_array(value: Any, dtype: np.dtype) -> np.ndarray | None:
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype != dtype or not arr.flags.aligned:
        return None
    return arr


def _finish(out: np.ndarray, meta: Any) -> Any:
    # A NumPy ufunc on 0-d inputs (or a full reduction) returns a NumPy scalar, not a 0-d array.
    if getattr(meta, "is_scalar", False):
        return out.reshape(())[()]
    return out


class _Runner:
    def __init__(self, kernel: Any, fn: Callable[[Any], int], ffi: Any, options: COptions):
        self.kernel = kernel
        self.fn = fn
        self.ffi = ffi
        self.options = options
        self.calls = 0

    def _call(self, packed: list[int]) -> None:
        block = np.array(packed, dtype=np.int64)
        flags = self.fn(self.ffi.cast("const int64_t *", block.ctypes.data))
        self.calls += 1
        if flags and self.options.fp_errors:
            replay_fp_flags(flags)

    def _par(self, size: int) -> list[int]:
        threads = self.options.threads
        return [threads, int(threads > 1 and size >= self.options.parallel_threshold)]


class PointwiseRunner(_Runner):
    """Runs a `PointwiseKernel`: ``runner(inputs) -> list of outputs`` or None (use NumPy)."""

    kernel: PointwiseKernel

    def __call__(self, inputs: list[Any]) -> list[Any] | None:
        k = self.kernel
        shape = k.shape
        arrays = []
        strides = []
        for value, od in zip(inputs, k.operands):
            arr = _as_array(value, od.dtype)
            st = None if arr is None else broadcast_strides(arr, shape)
            if st is None:
                return None
            arrays.append(arr)
            strides.append(st)
        outs = [np.empty(shape, v.dtype) for v in k.outputs]
        size = outs[0].size if outs else 0
        if size:
            cshape, cstrides = coalesce(list(shape), strides)
            if not cshape:
                cshape, cstrides = [1], [[0] for _ in strides]
            nd = len(cshape)
            packed = [*self._par(size), self.options.block, nd, *cshape]
            for arr, st in zip(arrays, cstrides):
                packed.append(arr.ctypes.data)
                packed.extend(st)
            for out in outs:
                packed.append(out.ctypes.data)
                packed.extend([0] * nd)
            self._call(packed)
        return [_finish(o, n.meta.get("val")) for o, n in zip(outs, k.out_nodes)]


class ReductionRunner(_Runner):
    """Runs a `ReductionKernel`: ``runner(inputs) -> [result]`` or None (use NumPy)."""

    kernel: ReductionKernel

    def __call__(self, inputs: list[Any]) -> list[Any] | None:
        k = self.kernel
        shape = k.shape
        axes = set(k.axes)
        arrays, strides = [], []
        for value, od in zip(inputs, k.operands):
            arr = _as_array(value, od.dtype)
            st = None if arr is None else broadcast_strides(arr, shape)
            if st is None:
                return None
            arrays.append(arr)
            strides.append(st)
        kept = [d for d in range(len(shape)) if d not in axes]
        red = [d for d in range(len(shape)) if d in axes]
        kshape, kstr = coalesce([shape[d] for d in kept], [[s[d] for d in kept] for s in strides])
        rshape, rstr = coalesce([shape[d] for d in red], [[s[d] for d in red] for s in strides])
        if not kshape:
            kshape, kstr = [1], [[0] for _ in strides]
        if not rshape:
            rshape, rstr = [1], [[0] for _ in strides]
        out_dtype = np.dtype(np.intp) if k.op in ("argmax", "argmin") else k.out_dtype
        out = np.empty([shape[d] for d in kept], out_dtype)
        if out.size:
            packed = [*self._par(out.size * max(1, np.prod(rshape))), len(kshape), len(rshape),
                      *kshape, *rshape]
            for arr, ks, rs in zip(arrays, kstr, rstr):
                packed.append(arr.ctypes.data)
                packed.extend(ks)
                packed.extend(rs)
            packed.append(out.ctypes.data)
            self._call(packed)
        meta = k.out_node.meta.get("val")
        if k.keepdims:
            out = out.reshape([1 if d in axes else n for d, n in enumerate(shape)])
        return [_finish(out, meta)]
