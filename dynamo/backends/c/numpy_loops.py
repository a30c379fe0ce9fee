"""NumPy's own inner loops, as C function pointers a kernel calls for the math NumPy computes.

In: a ufunc name and a float dtype (an Op that `c_expressions.NUMPY_LOOP` lists). Out: the loop
NumPy itself runs for that dtype - ``functions[i]`` and ``data[i]`` of the ufunc's C object
(``PyUFuncObject`` in numpy/_core/include/numpy/ufuncobject.h), which NumPy fills at import
with its best CPU-dispatched SIMD loop - and the table a kernel library is given once after
loading (`numpy_loop_table`). Called by `lowering` (may this op be lowered?) and by
`compile_graph` (the table for a library).

Why: exp, log, sin, ... have no single right answer in the last bit; NumPy's SIMD loops and
libm/libmvec differ by 1-6 ULP on a large share of inputs. A kernel that calls NumPy's loop on
a block of its values gets NumPy's bits by construction. Index ``i`` is the ufunc's type
signature NumPy's type resolution picks for the dtype (``resolve_dtypes``, then its position
in ``ufunc.types``: the order of the C tables). Each loop is checked once against the ufunc
itself on a probe (special values included); a loop that does not reproduce it (a NumPy whose
C layout or loop registration differs) is never used: the op then stays a NumPy call.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from numpy._core import _multiarray_umath as _umath

from . import cache
from .toolchain import cpu_features

__all__ = ["numpy_loop", "numpy_loop_table", "slot_name", "ufunc_loop", "reduce_loop"]


class _UFuncHead(ctypes.Structure):
    """The leading fields of ``PyUFuncObject`` (unchanged from NumPy 1.x to 2.4)."""

    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p),
                ("nin", ctypes.c_int), ("nout", ctypes.c_int), ("nargs", ctypes.c_int),
                ("identity", ctypes.c_int),
                ("functions", ctypes.POINTER(ctypes.c_void_p)),
                ("data", ctypes.POINTER(ctypes.c_void_p)),
                ("ntypes", ctypes.c_int), ("reserved1", ctypes.c_int),
                ("name", ctypes.c_char_p), ("types", ctypes.c_void_p)]


_LOOP = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ssize_t),
                         ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_void_p)


def slot_name(name: str, dtype: Any) -> str:
    """The C name of a loop's slot in a library's table, e.g. ``exp_f8``."""
    return f"{name}_{np.dtype(dtype).str[1:]}"


def _probe(nin: int, dt: np.dtype) -> list[np.ndarray]:
    # Special values and a spread of magnitudes on every input, crossed with each other
    # (a binary loop sees every pair), then a contiguous stretch longer than a vector.
    fi = np.finfo(dt)
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 1e-3, 700.0,
                     -700.0, 88.5, -103.0, 3.14159, 1e30, fi.tiny, fi.smallest_subnormal,
                     fi.max, -fi.max, 0.75, 1.5, -2.5, 10.0], dtype=dt)
    grid = np.meshgrid(*([vals] * nin), indexing="ij")
    rng = np.random.default_rng(22)
    return [np.concatenate([g.ravel(), (rng.standard_normal(301) * 4).astype(dt)])
            for g in grid]


@lru_cache(maxsize=None)
def numpy_loop(name: str, dtype: Any) -> tuple[int, int] | None:
    """``(function, data)`` addresses of the inner loop NumPy runs for ``np.<name>`` on
    ``dtype`` inputs (all inputs and the output that dtype), or None when it cannot be used
    (no such loop, another result dtype, or the loop does not reproduce the ufunc)."""
    uf, dt = getattr(np, name, None), np.dtype(dtype)
    if not isinstance(uf, np.ufunc) or uf.nout != 1 or object.__basicsize__ != 16:
        return None  # (a free-threaded build's object header has another size)
    try:
        resolved = uf.resolve_dtypes((dt,) * uf.nin + (None,))
    except Exception:  # noqa: BLE001 - NumPy raises several types for unsupported dtypes
        return None
    if any(r != dt for r in resolved):
        return None
    sig = dt.char * uf.nin + "->" + dt.char
    found = ufunc_loop(uf, sig)
    if found is None:
        return None
    fn, data = found
    ins = _probe(uf.nin, dt)
    out = np.empty_like(ins[0])
    arrays = [*ins, out]
    args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    dims = (ctypes.c_ssize_t * 1)(out.size)
    steps = (ctypes.c_ssize_t * len(arrays))(*[dt.itemsize] * len(arrays))
    with np.errstate(all="ignore"):
        _LOOP(fn)(args, dims, steps, data)
        want = uf(*ins)
    if out.tobytes() != want.tobytes():
        logging.getLogger("dynamo.kernels").info(
            "NumPy's %s loop of %s does not reproduce np.%s: it stays a NumPy call", sig, name,
            name)
        return None
    return fn, data or 0


def ufunc_loop(uf: np.ufunc, sig: str) -> tuple[int, int] | None:
    """``(function, data)`` of `uf`'s inner loop for type signature `sig` (``"d->d"``, as in
    ``uf.types``), read from the ufunc's C object and checked against the object's own
    attributes (name, counts, the loop's type numbers), or None. Not probed: callers check
    what they use the loop for (`numpy_loop`, `reduce_loop`)."""
    if object.__basicsize__ != 16 or not isinstance(uf, np.ufunc) or sig not in uf.types:
        return None  # (a free-threaded build's object header has another size)
    head = _UFuncHead.from_address(id(uf))
    if ((head.nin, head.nout, head.nargs, head.ntypes) != (uf.nin, uf.nout, uf.nargs, uf.ntypes)
            or head.name != uf.__name__.encode() or not head.types):
        return None
    i = uf.types.index(sig)
    chars = sig.replace("->", "")
    nums = bytes(np.dtype(c).num for c in chars)
    if ctypes.string_at(head.types + i * uf.nargs, uf.nargs) != nums:
        return None
    fn = head.functions[i] if head.functions else None
    if not fn:
        return None
    return fn, (head.data[i] or 0) if head.data else 0


#: reduction name -> its ufunc (``x.sum()`` is ``np.add.reduce(x)``)
REDUCTIONS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _emulate_reduce(name: str, loop: tuple[int, int], a: np.ndarray) -> np.ndarray:
    """What a loop kernel computes for ``a.<name>()`` of a 1-d view (``npd_reduce`` in
    `c_loop_runtime`): a sum starts at 0 and folds every element in one call of the loop; a
    maximum or minimum starts at the first element and folds the rest."""
    out = np.zeros((), a.dtype)
    first = 0
    if name != "sum":
        out[()] = a[0]
        first = 1
    n = a.shape[0] - first
    if n > 0:
        args = (ctypes.c_void_p * 3)(out.ctypes.data, a.ctypes.data + first * a.strides[0],
                                     out.ctypes.data)
        _LOOP(loop[0])(args, (ctypes.c_ssize_t * 1)(n),
                       (ctypes.c_ssize_t * 3)(0, a.strides[0], 0), loop[1])
    return out


def _reduce_probes(dt: np.dtype) -> list[np.ndarray]:
    rng = np.random.default_rng(23)
    found = []
    for n in (1, 2, 3, 7, 8, 9, 16, 17, 127, 128, 129, 1000, 8191, 8192, 8193, 20011, 50000):
        if dt.kind == "f":
            base = rng.standard_normal(3 * n) * 10.0 ** rng.uniform(-8, 8, 3 * n)
            if n % 2:
                base[rng.integers(0, 3 * n, 2)] = rng.choice([0.0, -0.0, np.nan, np.inf])
        else:
            base = rng.integers(-2 ** 62, 2 ** 62, 3 * n)
        base = base.astype(dt)
        found += [base[:n], base[::3], base[::-2][:n]]
    if dt.kind == "f":
        found += [np.full(k, z, dt) for k in (1, 8, 9, 40) for z in (0.0, -0.0)]
        found += [np.array([0.0, -0.0] * k, dt) for k in (1, 20)]
        found += [np.array([-0.0, 0.0] * k, dt) for k in (1, 20)]
    return found


def _stamp(path: str) -> str:
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _probed(facts: dict[str, str], probe: Callable[[], bool]) -> bool:
    """``probe()``, or its verdict from an earlier process: kept in the kernel cache directory
    (a ``probes`` record, `cache.KernelCache.read_record`) under a key over `facts`, NumPy's
    version and its ufunc module's file (size, time of change), the CPU (NumPy picks its SIMD
    loops by it), the buffer size and this module's file, so another NumPy, CPU or probe
    probes again. The probes take 4-11 ms each, most of a first call from the disk cache."""
    key = cache.make_key(dict(facts, numpy=np.__version__, cpu=cpu_features(),
                              ufuncs=_stamp(_umath.__file__), probes=_stamp(__file__),
                              bufsize=str(np.getbufsize())))
    kcache = cache.checked(cache.KernelCache(cache.cache_root()), record=("probes", key))
    found = kcache.read_record("probes", key)
    if found in ("true", "false"):
        return found == "true"
    verdict = bool(probe())
    kcache.write_record("probes", key, "true" if verdict else "false")
    return verdict


@lru_cache(maxsize=None)
def reduce_loop(name: str, dtype: Any) -> tuple[int, int] | None:
    """``(function, data)`` of the loop of ``np.<ufunc>`` (`REDUCTIONS`) that a loop kernel
    folds a 1-d view of `dtype` with, or None when what the kernel computes with it
    (`_emulate_reduce`) is not ``a.<name>()`` to the bit on every probe: a NumPy that
    reduces in buffer-sized pieces (NumPy 2.2 sums a long vector ``np.getbufsize()``
    elements at a time: a different rounding), or starts a sum elsewhere."""
    uf, dt = REDUCTIONS[name], np.dtype(dtype)
    loop = ufunc_loop(uf, dt.char * 2 + "->" + dt.char)
    if loop is None:
        return None

    def probe() -> bool:
        with np.errstate(all="ignore"):
            return all(_emulate_reduce(name, loop, a).tobytes() == getattr(a, name)().tobytes()
                       for a in _reduce_probes(dt))

    if not _probed({"probe": "reduce", "name": name, "dtype": dt.str}, probe):
        logging.getLogger("dynamo.kernels").info(
            "a loop kernel's %s of %s arrays would not be NumPy's here: not lowered", name, dt)
        return None
    return loop


def numpy_loop_table(ffi: Any, slots: list[tuple[str, np.dtype]]) -> Any:
    """A ``void *[2 * len(slots)]`` of (function, data) pairs in slot order, for a library's
    ``npdynamo_set_numpy_loops``. The caller keeps it alive as long as the library."""
    flat: list[int] = []
    for name, dt in slots:
        loop = numpy_loop(name, dt)
        if loop is None:  # lowering only emits ops whose loop was found
            raise RuntimeError(f"no usable NumPy loop for {name} on {dt}")
        flat += loop
    return ffi.new("void *[]", [ffi.cast("void *", a) for a in flat])
