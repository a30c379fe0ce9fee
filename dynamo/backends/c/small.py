"""The one-call kernel path: small domains reach a kernel (issue 11).

In: a compiled graph's fusion plan, its loaded kernel library and the general runners
(`kernel.PointwiseRunner` / `ReductionRunner`, one per kernel, made by `compile_graph`). Out:
`attach` replaces each static-shape kernel's runner by a `SmallRunner` (same interface, ~0.3 us
per call instead of ~5-12 us) and, when the whole graph is one kernel over its arguments (or
constant basic views of them, ``u[1:-1, :-2]``, read only by the kernel), returns a
`dynamo._C.SmallKernel` that *is* the compiled function: one C call from the generated code to
the kernel, with no Python frame in between (views are not made: each is read at a byte offset
from its argument that the registered layout holds). Called by `dynamo.backends.c._compile`
right after it made the runners.

How a call stays cheap (csrc/small_call.c): the inputs' (shape, strides) are compared with
the layouts registered so far; a registered layout already has the kernel's argument block, so
the call only allocates the outputs (``np.empty``, as the general runner does) and calls the
kernel's address. A new layout is planned once here with the general runner's planner
(`_Layouts.register`): the same block, the same output shapes and dtypes, hence the same values bit
for bit. Layouts whose outputs NumPy would not lay out C-contiguously (F-ordered or permuted
inputs) are not registered: they keep running through the general runner.

Floating-point warnings and errstate: exactly the general runner's rules (`kernel.py`): a
kernel whose raised FE_* flags include one in `kernel.fp_warn_mask` gives way to NumPy, and
while a mode raises (or calls, prints, logs) no kernel runs. The whole-graph call checks the
mask in C (cached per errstate context-variable object) and runs ``gm.forward`` instead.

Calibration (``calibrate=True``): on its first call the whole-graph call times its kernel
against ``gm.forward`` with `calibration.calibrate` (its disk-cached verdicts included;
`_WholeGraph.decide`) and keeps the faster one, shown on its runner (``use_kernel``); the
result of that first call is computed afterwards with the chosen path, as `compile_graph` does
for kernels. A `SmallRunner` inside a larger program is calibrated by the program itself
(``_kernel_step``), like any runner. Verdicts are keyed apart from the general runner's
(`SmallRunner.verdict_key`): the one-call path's timings are its own.

Inside a program (the graph is not one kernel), a kernel is a step costing ~1 us whatever it
does; with ``calibrate``, kernels that cannot pay for it (`pays_in_program`: a cost model, e.g.
a few scalar updates in an unrolled Python loop) are taken out of the program's kernels, which
then writes their nodes as NumPy statements.

Graphs with symbolic sizes keep the general runners; their kernels run only for calls whose
domain reaches ``dynamic_min_size`` (`DynamicGate`: below it NumPy is faster than a general
runner call).
"""

from __future__ import annotations

import logging
import operator
import weakref
from math import prod
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.node import Node
from fx.symbolic import hint

from ... import _C
from ...hidden_code import hide_backend_package
from . import calibration
from . import kernel as _kernel
from .config import COptions
from .loop_ir import Kernel, PointwiseKernel, ReductionKernel
from .report import build_report

__all__ = ["NOGIL_SIZE", "DynamicGate", "SmallRunner", "attach", "pays_in_program", "prune"]

#: Domains from this many elements release the GIL during the kernel (as cffi always does);
#: below it, releasing and taking it back costs more than the kernel.
NOGIL_SIZE = 16384
#: Layouts remembered as not registrable (per kernel) before that memory starts over.
_MAX_REFUSED = 64
#: Inputs and outputs a `SmallKernel` takes at most (``SK_MAX_OPS`` in csrc/small_call.c).
_MAX_OPS = 64


def _loaded_address(library: Any, name: str) -> int:
    """The kernel's address in the loaded library (ABI-mode cffi function pointer)."""
    ffi = library.ffi
    return int(ffi.cast("uintptr_t", getattr(library.lib, name)))


def _out_specs(k: Kernel) -> tuple[tuple, tuple, tuple]:
    """(shapes, dtypes, scalar flags) of the kernel's outputs, as the general runner makes
    them for a registrable layout (C-contiguous, static shapes)."""
    shape = tuple(int(d) for d in k.shape)
    if k.kind == "pointwise":
        shapes = tuple(shape for _ in k.outputs)
        dtypes = tuple(np.dtype(v.dtype) for v in k.outputs)
        metas = [n.meta.get("val") for n in k.out_nodes]
    else:
        kept = [n for d, n in enumerate(shape) if d not in k.axes]
        keep = tuple(1 if d in k.axes else n for d, n in enumerate(shape))
        shapes = tuple(keep if r.keepdims else tuple(kept) for r in k.reductions)
        shapes += tuple(shape for _ in k.outputs)
        dtypes = tuple(np.dtype(np.intp) if r.op in ("argmax", "argmin") else
                       np.dtype(r.out_dtype) for r in k.reductions)
        dtypes += tuple(np.dtype(v.dtype) for v in k.outputs)
        metas = [r.node.meta.get("val") for r in k.reductions]
        metas += [n.meta.get("val") for n in k.epilogue_nodes]
    scalar = tuple(bool(getattr(m, "is_scalar", False)) for m in metas)
    return shapes, dtypes, scalar


def _block_if_registrable(base: Any, inputs: list) -> tuple[bytes, bool] | None:
    """The general runner's argument block for these inputs (bytes) and whether the GIL is
    released, when its outputs are exactly `_out_specs` (C-contiguous, no reordering)."""
    found = base._arrays_and_plan(inputs, None)
    if found is None:
        return None
    _, plan = found
    if base.kernel.kind == "pointwise":
        block, perm, fixes, _ = plan
        if perm is not None or fixes is not None:
            return None
    else:
        block = plan[0]
    if block is None:  # an empty result: nothing to call
        return None
    size = prod(int(d) for d in base.kernel.shape)
    return bytes(base.ffi.buffer(block)), size >= NOGIL_SIZE


def _mask_fn(base: Any) -> Any:
    """The errstate callback of a `SmallKernel` over ``base``'s kernel: `kernel.fp_warn_mask`
    or, when the kernel's blocks depend on NumPy's buffer size (``base.bufsize_dependent``),
    a wrapper answering None (run the graph as NumPy) while ``np.setbufsize`` holds another
    size than the one the layouts are registered for (`SmallRunner.bufsize`). The C side asks
    again whenever the errstate object changes, which ``np.setbufsize`` does."""
    if not getattr(base, "bufsize_dependent", False):
        return _kernel.fp_warn_mask
    size = _kernel.bufsize()  # an int only: no reference to ``base`` (no cycle)

    def mask() -> int | None:
        return None if _kernel.bufsize() != size else _kernel.fp_warn_mask()
    return mask


def _small_kernel(base: Any, library: Any, opts: COptions, **whole_graph: Any) -> Any:
    k = base.kernel
    shapes, dtypes, scalar = _out_specs(k)
    return _C.SmallKernel(
        _loaded_address(library, k.name), tuple(np.dtype(od.dtype) for od in k.operands),
        shapes, dtypes, scalar, np.ndarray, np.empty, _mask_fn(base),
        _kernel._errstate_var, library, opts.fp_errors, **whole_graph)


class _Layouts:
    """Registers new layouts with a `SmallKernel` (see the module docstring). ``views``: per
    kernel operand, None (the input itself) or a constant basic index: the whole-graph call
    then receives the *sources* (its arguments) and the operand is ``source[view]``, read at
    a byte offset fixed by the source's layout."""

    def __init__(self, base: Any, views: tuple | None = None):
        self.base = base
        self.views = views if views is not None and any(v is not None for v in views) else None
        self.refused: set[bytes] = set()
        self.registered: set[bytes] = set()

    def operands(self, sources: list) -> list:
        if self.views is None:
            return sources
        return [x if v is None else x[v] for x, v in zip(sources, self.views)]

    def register(self, sk: Any, sources: list) -> bool:
        """Register the layout of ``sources`` with ``sk`` (passed in, not kept: a whole-graph
        call holds this object through its callbacks, and compiled functions must be freed
        by reference counting, without cycles)."""
        sig = sk.signature(sources)
        if sig is None or sig in self.refused:
            return False
        if sig in self.registered:
            return True
        offsets = None
        ops = sources
        if self.views is not None:
            if any(v is not None and type(x) is not np.ndarray
                   for x, v in zip(sources, self.views)):
                return False
            ops = self.operands(sources)
            offsets = np.array([0 if v is None else _address(o) - _address(x)
                                for x, o, v in zip(sources, ops, self.views)], np.int64)
        got = _block_if_registrable(self.base, ops)
        if got is not None and sk.add_layout(
                sig, *got, None if offsets is None else offsets.tobytes()):
            self.registered.add(sig)
            return True
        if len(self.refused) >= _MAX_REFUSED:
            self.refused.clear()
        self.refused.add(sig)
        return False


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _Wrapped:
    """A runner wrapping a general runner ``base``: every attribute it does not set itself
    (``in_dtypes``, ``options``, ``parallel_for``, ...) is ``base``'s, and the thread count is
    ``base``'s too (calibration sets it through the wrapper). The program's calibration
    (``_kernel_step``) keeps its verdict on the wrapper, as on a general runner."""

    def __init__(self, base: Any):
        self.__dict__["base"] = base
        self.use_kernel: bool | None = None
        self.calibration: tuple[float, float] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["base"], name)

    @property
    def threads(self) -> int:
        return self.base.threads

    @threads.setter
    def threads(self, value: int) -> None:
        self.base.threads = value


class SmallRunner(_Wrapped):
    """A kernel runner with the general runner's interface (``runner(inputs, shape,
    threads)`` -> ``(outputs, FE flags)`` or None) that makes one C call per kernel launch;
    layouts it has not registered (and cannot), and calls for another thread count
    (calibration), go to the wrapped general runner ``base``. Only for kernels whose calls run
    serially (`attach`): the registered blocks do not depend on the thread count then.
    Every other attribute (``in_dtypes``, ``options``, ``parallel_for``, ...) is ``base``'s."""

    def __init__(self, base: Any, library: Any, opts: COptions):
        super().__init__(base)
        self.kernel = base.kernel
        self.library = library
        self.sk = _small_kernel(base, library, opts)
        self._layouts = _Layouts(base)
        #: The buffer size the registered blocks are for, when they depend on it (a float sum
        #: on NumPy <= 2.2, a casting reduce); under another size the general runner runs.
        self.bufsize = _kernel.bufsize() if getattr(base, "bufsize_dependent", False) else None
        #: A weak reference to the whole-graph `SmallKernel` calling this kernel, if the graph
        #: is only this kernel (it holds this runner in its ``runners``: no cycle).
        self.whole: Any = None

    @property
    def calls(self) -> int:
        """Kernel launches so far (this path, the whole-graph call and the general one)."""
        sk = None if self.whole is None else self.whole()
        whole = 0 if sk is None else sk.calls
        return self.sk.calls + self.base.calls + whole

    def verdict_key(self, inputs: Any, shape: tuple[int, ...] | None = None) -> str | None:
        """The general runner's calibration key, marked: this path's timings are its own."""
        key = self.base.verdict_key(inputs, shape)
        return None if key is None else key + " one-call"

    def __call__(self, inputs: Any, shape: tuple[int, ...] | None = None,
                 threads: int | None = None) -> Any:
        if (threads is None or threads == self.base.threads) and (
                self.bufsize is None or self.bufsize == _kernel.bufsize()):
            got = self.sk.run(inputs)
            if got is not None:
                return got
            if self._layouts.register(self.sk, inputs):
                got = self.sk.run(inputs)
                if got is not None:
                    return got
        return self.base(inputs, shape, threads)


class DynamicGate(_Wrapped):
    """A general runner over symbolic sizes that declines (None: the NumPy path runs) calls
    whose domain is below ``min_size`` elements; everything else is the wrapped runner's."""

    def __init__(self, base: Any, min_size: int):
        super().__init__(base)
        self.min_size = min_size

    @property
    def calls(self) -> int:
        return self.base.calls

    def __call__(self, inputs: Any, shape: tuple[int, ...] | None = None,
                 threads: int | None = None) -> Any:
        if shape is not None and prod(shape) < self.min_size:
            return None
        return self.base(inputs, shape, threads)


class _WholeGraph:
    """The Python side of a whole-graph `SmallKernel`: the miss path and calibration."""

    def __init__(self, runner: SmallRunner, forward: Any, arg_index: tuple,
                 res_index: tuple, res_tuple: bool):
        self.runner = runner
        self.base = runner.base
        self.forward = forward
        self.arg_index = arg_index
        self.res_index = res_index
        self.res_tuple = res_tuple
        self.layouts: _Layouts | None = None

    def _sources(self, args: tuple) -> list:
        return [args[i] for i in self.arg_index]

    def slow(self, sk: Any, args: tuple) -> Any:
        """A call whose layout is not registered: register it, or use the general runner."""
        layouts = self.layouts
        assert layouts is not None
        sources = self._sources(args)
        if layouts.register(sk, sources):
            return sk(*args)
        mask = _kernel.fp_warn_mask()
        try:
            ops = layouts.operands(sources)
        except Exception:  # noqa: BLE001 - a view NumPy itself would refuse: NumPy raises it
            return self.forward(*args)
        got = self.base(ops, None) if mask is not None else None
        if got is None or got[1] & mask:
            return self.forward(*args)
        outs = got[0]
        if self.res_tuple:
            return tuple(outs[j] for j in self.res_index)
        return outs[self.res_index[0]]

    def decide(self, sk: Any, args: tuple) -> Any:
        """First call: time the kernel against NumPy (results discarded), keep the faster,
        then compute this call's result with it (`calibration.calibrate`: its disk-cached
        verdicts and thread choice)."""
        layouts = self.layouts
        assert layouts is not None
        sources = self._sources(args)
        if not layouts.register(sk, sources):
            return self.slow(sk, args)  # decided on a layout the one-call path runs
        ops = layouts.operands(sources)
        if self.runner(ops) is None:  # first run (as the program's steps do): warms the kernel
            return self.slow(sk, args)
        verdict = calibration.calibrate(self.runner, tuple(ops),
                                        lambda *_: self.forward(*args), None)
        self.runner.use_kernel = bool(verdict)
        sk.state = 0 if verdict else 2
        return sk(*args)


def _basic_index(idx: Any) -> bool:
    """A constant basic index (ints, slices of ints, None, Ellipsis): its result is a view
    whose start and strides follow from the source's layout alone."""
    items = idx if type(idx) is tuple else (idx,)
    for it in items:
        if it is None or it is Ellipsis or type(it) is int:
            continue
        if type(it) is slice and all(v is None or type(v) is int
                                     for v in (it.start, it.stop, it.step)):
            continue
        return False
    return True


def _static_array(node: Any) -> bool:
    meta = node.meta.get("val")
    return (isinstance(meta, ArrayMeta) and not meta.is_scalar
            and all(type(d) is int for d in meta.shape))


def _view_of_argument(n: Any, k: Kernel, where: dict) -> bool:
    """Is NumPy call ``n`` a constant view ``x[...]`` of an argument read only by kernel
    ``k`` (so the whole-graph call can read it in place, without the NumPy call)?"""
    return (n.op == "call_function" and n.target is operator.getitem and not n.kwargs
            and len(n.args) == 2 and n.args[0] in where and _basic_index(n.args[1])
            and not isinstance(n.args[1], Node) and _static_array(n)
            and _static_array(n.args[0]) and all(u in k.members for u in n.users))


def _one_kernel_graph(gm: Any, plan: Any) -> tuple | None:
    """(kernel, arg_index, views, res_index, res_tuple, number of arguments) when the graph is
    one kernel over its arguments (or constant views of them) returning that kernel's
    outputs (a value or a tuple of them); None otherwise. Structure only: usable before the
    build."""
    kernels = [it for it in plan.schedule if isinstance(it, (PointwiseKernel, ReductionKernel))]
    if len(kernels) != 1:
        return None
    k = kernels[0]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    where = {p: i for i, p in enumerate(placeholders)}
    views = {it for it in plan.schedule if it is not k}
    if not all(_view_of_argument(n, k, where) for n in views):
        return None
    operand_nodes = {od.node for od in k.operands}
    if not views <= operand_nodes or any(od.node not in where and od.node not in views
                                         for od in k.operands):
        return None
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    spec = out_node.args[0]
    outs = list(k.out_nodes)
    if isinstance(spec, Node):
        items, res_tuple = [spec], False
    elif type(spec) is tuple and spec and all(isinstance(x, Node) for x in spec):
        items, res_tuple = list(spec), True
    else:
        return None
    if any(x not in outs for x in items):
        return None
    arg_index = tuple(where[od.node] if od.node in where else where[od.node.args[0]]
                      for od in k.operands)
    view_of = tuple(None if od.node in where else od.node.args[1] for od in k.operands)
    res_index = tuple(outs.index(x) for x in items)
    return k, arg_index, view_of, res_index, res_tuple, len(placeholders)


def _one_call(k: Kernel, opts: COptions) -> bool:
    """Will kernel ``k`` get a `SmallRunner` (static sizes, serial calls, within the C limits)?"""
    return (opts.small_kernels and all(type(d) is int for d in k.shape)
            and not (opts.threads > 1 and prod(k.shape) >= opts.parallel_threshold)
            and len(k.operands) <= _MAX_OPS and len(k.out_nodes) <= _MAX_OPS)


def _whole_graph(gm: Any, plan: Any, runners: dict, library: Any, opts: COptions) -> Any:
    """A `SmallKernel` computing the whole graph, or None when the graph is not one kernel
    over its arguments (or constant views of them) returning that kernel's outputs."""
    found = _one_kernel_graph(gm, plan)
    if found is None:
        return None
    k, arg_index, view_of, res_index, res_tuple, n_args = found
    runner = runners.get(k.name)
    if not isinstance(runner, SmallRunner):
        return None
    side = _WholeGraph(runner, gm.forward, arg_index, res_index, res_tuple)
    runner.use_kernel = None if opts.calibrate else True
    sk = _small_kernel(runner.base, library, opts, fallback=gm.forward, slow=side.slow,
                       decide=side.decide if opts.calibrate else None,
                       arg_index=arg_index, n_args=n_args, res_index=res_index,
                       res_tuple=res_tuple)
    side.layouts = _Layouts(runner.base, view_of)
    runner.whole = weakref.ref(sk)
    sk.whole_graph = side
    return sk


def prune(gm: Any, plan: Any, worth: list[Kernel], notes: dict[str, str],
          opts: COptions) -> None:
    """With ``calibrate``, remove from ``worth`` (in place, with a note) the kernels that
    cannot pay for a program step (`pays_in_program`), unless the graph is one kernel called
    in one C call. `attach` applies it after the build; called by `_compile` before
    ``_build`` it also saves the gcc run of a graph whose kernels would all be dropped."""
    if not opts.calibrate:
        return
    found = _one_kernel_graph(gm, plan)
    if found is not None and any(k is found[0] for k in worth) and _one_call(found[0], opts):
        return
    for k in list(worth):
        if not pays_in_program(k, opts):
            worth.remove(k)
            notes[k.name] = ("too small to pay for a program step "
                             "(small.pays_in_program): NumPy statements")


#: Cost model of a small kernel inside a program (seconds; measured on the 2-core reference
#: machine): a program step (errstate mask, verdict, one-call kernel, results) costs
#: ~`_STEP_S` over a 0-d domain, ~`_ARRAY_STEP_S` over an array (its output allocated); the
#: NumPy statements it replaces cost ~`_UFUNC_S` per array operation (~`_SCALAR_S` on NumPy
#: scalars, a 0-d domain) plus ~`_ELEM_S` per element and operation, where the kernel spends
#: ~`_KERNEL_ELEM_S`. (The array figures were refitted at 22:15 on 2026-11-24, a step measured
#: by itself: 1.9 us at 8 and 300 elements, 2.7 us at 1,000, against 1.4 / 1.7 / 2.5 us for
#: ``y - 0.5 * Ap``: with the former 1.2 us / 1 ns the model kept those kernels, and each lost
#: ~0.3 us, conjugate_gradient 0.90x NumPy. The 0-d figures are the former ones: refitted the
#: same way, trisolv's scalar kernels were written out and it fell from 1.0x to 0.8x.)
_STEP_S, _UFUNC_S, _SCALAR_S, _ELEM_S, _KERNEL_ELEM_S = 1.2e-6, 0.6e-6, 0.08e-6, 0.5e-9, 0.35e-9
_ARRAY_STEP_S = 1.8e-6


def pays_in_program(k: Kernel, opts: COptions) -> bool:
    """Can kernel ``k`` beat the NumPy statements it replaces when a program calls it as a
    step? Domains from ``dynamic_min_size`` elements always can (the former rule); below it,
    the cost model above decides (e.g. 3 array ops over 8 elements do, 2 do not; over NumPy
    scalars it takes ~15 ops). Calibration then compares the kernel with its NumPy path, but
    not with the step's own cost: a kernel that cannot pay it is written out as NumPy."""
    if any(type(d) is not int for d in k.shape):
        return prod(hint_size(d) for d in k.shape) >= opts.dynamic_min_size
    n = prod(k.shape)
    if n >= opts.dynamic_min_size:
        return True
    ops = len(k.members)
    if k.shape == ():
        return ops * _SCALAR_S > _STEP_S
    numpy_s = ops * (_UFUNC_S + n * _ELEM_S)
    return numpy_s > _ARRAY_STEP_S + n * ops * _KERNEL_ELEM_S


def hint_size(d: Any) -> int:
    """A size at trace time (an int, or a symbol's hint), without recording a guard fact."""
    if type(d) is int:
        return d
    return int(hint(d))


def attach(gm: Any, plan: Any, runners: dict[str, Any], library: Any, opts: COptions,
           worth: list[Kernel], notes: dict[str, str], build_note: str) -> Any:
    """Swap the static kernels' runners for `SmallRunner` s and the symbolic ones' for
    `DynamicGate` s (in ``runners``, in place). When the graph is one kernel over its
    arguments, return the whole-graph callable (the compiled function, with ``fusion_report``
    and ``runners`` set; the report is stored and logged as `compile_graph` does). Otherwise,
    with ``calibrate``, drop the kernels that cannot pay for a program step
    (`pays_in_program`) from ``worth`` and ``runners`` (in place: the caller's program writes
    them out as NumPy statements) and return ``gm.forward`` when none is left; else None (the
    caller builds its program with the swapped runners)."""
    prune(gm, plan, worth, notes, opts)  # a program writes the dropped kernels as NumPy
    kept = {k.name for k in worth}
    for name in [name for name in runners if name not in kept]:
        del runners[name]
    if not worth:
        report = build_report(plan, {}, notes, build_note + "; no kernel pays: NumPy")
        gm.meta["fusion_report"] = report
        logging.getLogger("dynamo.kernels").info("%s", report)
        return gm.forward
    for name, base in list(runners.items()):
        if getattr(base, "dynamic", False):
            runners[name] = DynamicGate(base, opts.dynamic_min_size)
        elif _one_call(base.kernel, opts):
            runners[name] = SmallRunner(base, library, opts)
    direct = _whole_graph(gm, plan, runners, library, opts) if opts.small_kernels else None
    if direct is not None:
        views = sum(isinstance(it, Node) for it in plan.schedule)
        note = "; the graph is one kernel: one C call per call"
        if views:
            note += f" (its {views} NumPy call(s) are argument views, read in place)"
        report = build_report(plan, {k.name: True for k in worth}, notes, build_note + note)
        gm.meta["fusion_report"] = report
        logging.getLogger("dynamo.kernels").info("%s", report)
        direct.fusion_report, direct.runners = report, runners
        # (this package's frames, slow / decide, out of tracebacks, as the program's)
        hide_backend_package(__name__)
    return direct
