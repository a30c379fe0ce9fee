"""A lowered loop nest (`dynamo.loop_nest.ir.LoopNest`) as one C function, built and called.

In: a `LoopNest`. Out: a `LoopKernel`, called by the transformed code where the loop stood
(`dynamo.loop_kernels` writes that call) with the range the loop iterates and the values of
the locals the loop uses. It returns ``(k, values, extra)``:

* ``k >= 1``: the loop left by its way out k (``nest.exits[k-1]``); `values` are the loop's
  locals afterwards (`instructions.UNBOUND` for one left unbound); `extra` is the returned
  value for a ``return`` inside the loop.
* ``k == 0``: *deoptimised*. Something would not compute in C what Python computes (see
  `loop_nest.scalars`), an index was out of range, or Ctrl-C was pressed: the kernel goes back
  to its last save point, the head of an iteration of the outermost loop (every 256th one):
  every array element written since is put back (an undo log), `values` are the locals as they
  were there, and `extra` is the rest of the loop's range (``range(i, stop, step)``). Plain
  Python then runs the loop from there, so the exception or warning is raised by Python or
  NumPy itself, at the same iteration, after the same partial writes. (Also when the kernel
  cannot start: an argument of another type, a non-default ``np.errstate``, an int beyond
  int64: then nothing ran.)

The C function (its text: `c_loop_source`) keeps each local in a C variable (``L_x``; ``T_x``
its tag, ``B_x`` whether it is bound, where needed), saves them at its save points (in the
buffers it returns them in),
logs the old value of every element it writes (one by one, or as blocks: a fast copy's chunk,
an array statement's target), and while it runs in the main thread chains a SIGINT handler in
front of Python's (from the 256th pass through a loop head on, so a short kernel makes no
system call) that sets a flag the loop heads poll (Python's own handler runs too, so the
KeyboardInterrupt is raised when plain Python continues). The call is made in C
(`_C.LoopCall`, csrc/loop_call.c), which releases the GIL around the kernel; arguments it does
not judge take the Python path here (cffi, which releases it too).
"""

from __future__ import annotations

import dataclasses

import glob
import os
import threading
from typing import Any

import numpy as np

from ... import _C
from ...instructions import UNBOUND
from ...loop_nest import items
from ...loop_nest.ir import SCALAR_TYPES, ArrTy, LoopNest
from ...loop_nest.scalars import Refuse
from .build import BuildOptions, build_library
from .c_loop_runtime import PRELUDE
from .c_loop_source import c_source
from .numpy_loops import reduce_loop, ufunc_loop

__all__ = ["LoopKernel", "PRELUDE"]

CDEF = """
typedef struct { char *data; long long shape[4]; long long strides[4]; int id; int writeable;
                 long long row; } npd_arr;
typedef union { long long i; double f; } npd_val;
"""

#: vectorised loops (the fast copies, `loop_nest.fast`; no jump threading, which makes their
#: loops unrecognisable to the vectoriser; the widest vectors the CPU has: a compiler's own
#: preference for 256 bits halves a short loop's speed on AVX-512), no contraction into fused multiply-adds, no
#: type-based alias analysis (views of one buffer with other dtypes), and no compile-time
#: evaluation of the C library's functions (the compiler's correctly rounded constants may
#: differ from what the library computes at run time, which is what CPython and NumPy get)
_CFLAGS = ("-O2", "-ftree-vectorize", "-fvect-cost-model=dynamic", "-fno-thread-jumps",
           "-mprefer-vector-width=512", "-ffp-contract=off", "-fno-strict-aliasing") + tuple(
    f"-fno-builtin-{name}" for name in ("exp", "log", "sin", "cos", "tan", "atan", "tanh", "sinh",
                                        "cosh", "asin", "acos", "log10", "log2", "expm1",
                                        "log1p", "pow", "fmod"))

_DEFAULT_ERR = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}
_MAIN = threading.main_thread().ident


def _errstate_var_of_numpy() -> tuple:
    """(NumPy 2 keeps ``np.errstate`` in a context variable: while it holds the object it held
    at import, the state is NumPy's default, which a call checks without running Python code;
    otherwise, or on another NumPy, ``np.geterr()``.)"""
    try:
        from numpy._core import _ufunc_config  # (NumPy 2's private module: a fast path only)
        var = _ufunc_config._extobj_contextvar
    except (ImportError, AttributeError):
        return None, None
    if np.geterr() != _DEFAULT_ERR:
        return None, None
    return var, var.get()


_errstate_contextvar, _errstate_start = _errstate_var_of_numpy()
_errstate_var = None if _errstate_contextvar is None else _errstate_contextvar.get
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: (family, tag is NumPy's) -> the type a result is boxed in
_BOX = {(ty.fam, ty.tag == "np"): pytype for pytype, ty in SCALAR_TYPES.items()}


class LoopKernel:
    """A loop nest built into a C function (see the module docstring)."""

    def __init__(self, nest: LoopNest, source: str | None = None) -> None:
        """``source``: the C text `c_source` wrote for this nest before (a stored lowering:
        `dynamo.loop_nest.stored`), or None to write it."""
        self.nest = nest
        self.names = tuple(nest.locals)
        fname = "npd_loop"
        self.source = source if source is not None else PRELUDE + c_source(nest, fname)
        cdef = CDEF + (f"int {fname}(npd_arr *, npd_val *, unsigned char *, unsigned char *, "
                       "long long *, int, npd_val *);\nvoid npd_set_ddot(void *);\n"
                       "void npd_set_ufunc(int, void *, void *);\n"
                       "long long npd_fast_chunks(void);")
        ddot = numpy_ddot() if "npd_ddot(" in self.source else 0
        if ddot is None:
            raise Refuse("a dot product, and NumPy's BLAS (scipy-openblas) was not found")
        self.library = build_library(self.source, cdef, BuildOptions(
            openmp=False, cflags=_CFLAGS))
        self.ffi = self.library.ffi
        self.fn = getattr(self.library.lib, fname)
        if ddot:
            self.library.lib.npd_set_ddot(self.ffi.cast("void *", ddot))
        # (the table is the library's: one library, one ufunc per entry, whichever kernel
        # loaded it; a same-named ufunc of another module is refused, not swapped in)
        slots = _UFUNC_SLOTS.setdefault(self.library.key, {})
        for k, entry in enumerate(nest.ufuncs):
            ufunc, sig, how = entry
            held = slots.setdefault(k, entry)
            if held[0] is not ufunc or held[1:] != entry[1:]:
                raise Refuse(f"numpy.{ufunc.__name__}: its kernel's library holds another "
                             "ufunc of that name")
            if how == "call":
                found = ufunc_loop(ufunc, sig)
            else:  # (a reduction: only where its loop folds a view to NumPy's bits)
                found = reduce_loop(how, sig[0])
            if found is None:
                raise Refuse(f"NumPy's {sig} loop of numpy.{ufunc.__name__} was not found, or "
                             f"{'is not what' if how == 'call' else 'does not fold as'} NumPy "
                             f"{'calls' if how == 'call' else how + 's'}")
            self.library.lib.npd_set_ufunc(k, self.ffi.cast("void *", found[0]),
                                           self.ffi.cast("void *", found[1]))
        self.slots = {name: k for k, name in enumerate(self.names)}
        self.input_slots = tuple(self.slots[n] for n in nest.inputs)
        self.array_inputs = sum(isinstance(nest.locals[n], ArrTy) for n in nest.inputs)
        self._plans()
        self._buffers = threading.local()

    def __reduce__(self) -> tuple:
        """Pickled as its loop nest (a repro of a graph that holds it: `dynamo.repro`), and
        built again where it is loaded (its C text is the same, so from the disk cache when
        there is one). The objects the nest's code names (its guards') are left out."""
        return (LoopKernel, (dataclasses.replace(self.nest, globals_used={}),))

    def fast_chunks(self) -> int:
        """How many chunks of iterations ran in fast copies (`loop_nest.fast`), over all calls
        in every thread, of every kernel with this kernel's C text (they share a library)."""
        return int(self.library.lib.npd_fast_chunks())

    @property
    def entry(self) -> Any:
        """What the graph calls, ``entry(iterable, *values)``: the `_C.LoopCall` itself when
        there is one (the whole call in C, no Python frame: csrc/loop_call.c), else this
        object."""
        return self._entry if self._entry is not None else self

    def __call__(self, iterable: Any, *values: Any) -> tuple:
        return self._call(iterable, values)

    def _call(self, iterable: Any, values: tuple) -> tuple:
        if _errstate_var is not None and _errstate_var() is not _errstate_start:
            if np.geterr() != _DEFAULT_ERR:
                return self._not_run(iterable, values)
        elif _errstate_var is None and np.geterr() != _DEFAULT_ERR:
            return self._not_run(iterable, values)
        if self._c_call is not None:
            done = self._c_call(iterable, values)
            if done is not NotImplemented:
                if done is None:
                    return self._not_run(iterable, values)
                if done[0] == 0:
                    return 0, done[1], self._rest(done[2], values)
                return done
        # (this thread's buffers, taken while in use: a call made meanwhile from a signal
        # handler or a finalizer, between the wrapper's bytecodes, gets buffers of its own)
        local = self._buffers
        buffers = getattr(local, "b", None)
        if buffers is None:
            buffers = self._new_buffers()
        local.b = None
        try:
            done = self._run(buffers, iterable, values)
        finally:
            local.b = buffers
        return self._not_run(iterable, values) if done is None else done

    def _rest(self, rng: tuple, values: tuple) -> Any:
        """After a deoptimisation: what plain Python iterates on from the last save point (the
        rest of a range, or of an iteration over arrays: `loop_nest.items.rest`, whose array
        ids count the array inputs in order, as the call numbers them)."""
        if not self._iterates:
            return None
        if self.nest.items is None:
            return range(*rng)
        arrays: list = []
        for (_, aty, *_), value in zip(self._in_plan, values):
            if aty is not None and not any(a is value for a in arrays):
                arrays.append(value)
        return items.rest(self.nest.items, rng[0], arrays[rng[1]],
                          arrays[rng[2]] if rng[2] >= 0 else None)

    def _not_run(self, iterable: Any, values: tuple) -> tuple:
        """What plain Python does when the kernel cannot start: the whole loop."""
        out = [UNBOUND] * len(self.names)
        for k, value in zip(self.input_slots, values):
            out[k] = value
        if self._takes_range or not self._iterates:
            return 0, tuple(out), iterable
        return -1, tuple(out), None

    def _new_buffers(self) -> tuple:
        ffi, n = self.ffi, len(self.names)
        return (ffi.new("npd_val[]", n + 2), ffi.new("unsigned char[]", n + 2),
                ffi.new("unsigned char[]", n + 2), ffi.new("long long[3]"),
                ffi.new("npd_arr[]", max(self.array_inputs, 1)))

    def _plans(self) -> None:
        """Per input (slot, array type or None, family, whether its tag is free, whose tag it
        must have) and per local how its result comes back: work done once, not per call."""
        nest = self.nest
        self._in_plan = tuple(
            (self.slots[name], ty if isinstance(ty, ArrTy) else None,
             None if isinstance(ty, ArrTy) else ty.fam, name in nest.tagged,
             None if isinstance(ty, ArrTy) else ty.tag)
            for name in nest.inputs for ty in (nest.locals[name],))
        self._out_plan = tuple(
            (j, None if isinstance(ty, ArrTy) else ty.fam)
            for j, ty in enumerate(nest.locals[name] for name in self.names))
        self._takes_range = nest.site.takes_range
        self._iterates = nest.iterates
        # (the same call made in C, csrc/loop_call.c: the Python path below is for what it
        # does not judge itself)
        kinds = {None: 0, "int": 1, "float": 2, "bool": 3}
        self._c_call = self._entry = None
        if hasattr(_C, "LoopCall") and len(self.names) <= 254:
            self._entry = _C.LoopCall(
                int(self.ffi.cast("uintptr_t", self.fn)), len(self.names),
                tuple((k, kinds[fam], aty.dtype if aty else None, aty.ndim if aty else 0,
                       free, want == "np") for k, aty, fam, free, want in self._in_plan),
                tuple(kinds[fam] for _, fam in self._out_plan),
                tuple(kinds[ex.ty.fam] if ex.ty is not None else -1 for ex in nest.exits),
                self._takes_range, _MAIN, UNBOUND, (None, np.int64, np.float64, np.bool_),
                _errstate_contextvar, _errstate_start, self._call, self._not_run,
                self._after_deopt)
            self._c_call = self._entry.run

    def _after_deopt(self, result: tuple, rng: tuple, values: tuple) -> tuple:
        return 0, result, self._rest(rng, values)

    def _run(self, buffers: tuple, iterable: Any, values: tuple) -> tuple | None:
        """One call, or None when it cannot start (see `_not_run`)."""
        n = len(self.names)
        ffi = self.ffi
        v, tag, bound, rng, arrs = buffers
        if self._takes_range:
            if type(iterable) is not range or not (
                    _INT64[0] <= iterable.start <= _INT64[1]
                    and _INT64[0] <= iterable.stop <= _INT64[1]
                    and _INT64[0] <= iterable.step <= _INT64[1]):
                return None
            rng[0], rng[1], rng[2] = iterable.start, iterable.stop, iterable.step
        arrays: list = []
        for (k, aty, fam, free_tag, want_tag), value in zip(self._in_plan, values):
            if aty is not None:
                if type(value) is not np.ndarray or (
                        value.dtype is not aty.dtype and value.dtype != aty.dtype) or (
                        value.ndim != aty.ndim):
                    return None
                for j, a in enumerate(arrays):
                    if a is value:
                        v[k].i = j
                        break
                else:
                    v[k].i = len(arrays)
                    arrays.append(value)
                continue
            found = SCALAR_TYPES.get(type(value))
            if found is None or found.fam != fam or (not free_tag and found.tag != want_tag):
                return None
            if fam == "float":
                v[k].f = value
            else:
                if not _INT64[0] <= value <= _INT64[1]:
                    return None
                v[k].i = int(value)
            tag[k] = found.tag == "np"
        for j, a in enumerate(arrays):
            d = arrs[j]
            flags = a.flags
            # (a contiguous array's address through the buffer protocol: no dict made; not
            # a.ctypes.data, Python-level code that is slow where the caller is captured)
            d.data = ffi.from_buffer(a) if flags.c_contiguous and a.size else ffi.cast(
                "char *", a.__array_interface__["data"][0])
            d.shape[0:a.ndim] = a.shape
            d.strides[0:a.ndim] = a.strides
            d.id = j
            d.writeable = flags.writeable
            d.row = 0
        k = self.fn(arrs, v, tag, bound, rng, 1 if threading.get_ident() == _MAIN else 0, v + n)
        result = []
        for j, fam in self._out_plan:
            if not bound[j]:
                result.append(UNBOUND)
            elif fam is None:  # (an input array, or a row of one: id + (1 + row) << 16)
                row = v[j].i >> 16
                result.append(arrays[v[j].i & 0xFFFF][row - 1] if row else arrays[v[j].i])
            else:
                result.append(_box(fam, tag[j], v[j]))
        if k == -1:
            return None
        if k == 0:
            return 0, tuple(result), self._rest((rng[0], rng[1], rng[2]), values)
        ex = self.nest.exits[k - 1]
        extra = None
        if ex.ty is not None:
            extra = _box(ex.ty.fam, v[n + 1].i, v[n])
        return k, tuple(result), extra


#: library key -> {table entry: the ufunc whose loop it holds}
_UFUNC_SLOTS: dict[str, dict] = {}
_ddot: list = []


def numpy_ddot() -> int | None:
    """The address of ``cblas_ddot`` in the BLAS NumPy's ``DOUBLE_dot`` calls (the wheels'
    scipy-openblas, ILP64), or None when NumPy uses another BLAS."""
    if not _ddot:
        _ddot.append(_find_ddot())
    return _ddot[0]


def _find_ddot() -> int | None:
    import ctypes  # (only to find the one symbol)
    config = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    if config.get("name") != "scipy-openblas" or "USE64BITINT" not in str(
            config.get("openblas configuration", "")):
        return None
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas64_*")):
        try:
            lib = ctypes.CDLL(path)
            return ctypes.cast(lib.scipy_cblas_ddot64_, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    return None


def _box(fam: str, tag: int, val) -> Any:
    box = _BOX[fam, bool(tag)]
    if fam == "float":
        return box(val.f)
    if fam == "bool":
        return box(bool(val.i))
    return box(val.i)
