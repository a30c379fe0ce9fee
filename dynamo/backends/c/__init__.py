"""The optimizing C backend: fuse a NumPy fx graph into C kernels built by gcc, loaded by cffi.

In: an `fx.GraphModule` whose nodes carry ``meta["val"]`` and the example inputs. Out: a callable
taking the graph's placeholders positionally and returning exactly what ``gm.forward`` returns.
The translator's backend registry calls `compile_graph` (registered as ``"c"``); `make_backend`
binds options::

    fn = compile_graph(gm, example_inputs, threads=2, fastmath=False)

Pipeline: `fusion.plan_fusion` (which asks `lowering` per node) -> `codegen_c` -> ``build.py``
(gcc + disk cache) -> a generated straight-line program (`program.Program`; its source is
``fn.program_code``) of NumPy statements and one call per kernel to that kernel's *step*
(`_kernel_step`: the runner of `kernel.py`, or the kernel's generated NumPy path). Before
fusion, `ufunc.outer` expansion (a broadcast, which fuses: `fx/passes/expand_outer.py`),
constant folding, CSE and DCE run on ``gm.graph`` (in place; ``gm`` is recompiled).
"Compile only what pays": a kernel whose domain is below ``min_size`` elements (1 by default)
is not compiled, nor one too small to pay for a program step (`small.prune`, before gcc runs);
its nodes run as NumPy calls (with no kernel at all the result *is* ``gm.forward``). Static
kernels that run serially are called through one C call (`small.py`: ``_C.SmallKernel``), and
a graph that is one kernel over its arguments *is* that call. With ``calibrate`` each kernel
is timed against its own NumPy path on its first call and the faster one is kept (and, with
``threads > 1``, the faster of that many threads and one: `calibration.calibrate`); the verdict
is stored with the kernel in the disk cache, so a new process reuses it without timing. If
there is no compiler or the build fails, the graph runs eagerly (``gm.forward``) with one
`CBackendWarning`. While an ``np.errstate`` mode raises (or calls, prints, logs, reports
underflow) no kernel runs and the compiled function runs ``gm.forward``: the graph's statements
in program order, so the first failing one raises.
The fusion report goes to ``gm.meta["fusion_report"]`` and the ``dynamo.kernels`` logger (INFO).

Dynamic shapes: a graph whose metas hold symbolic sizes (`fx.symbolic.Sym`) is planned once over
those symbols and its kernels' C does not depend on the sizes, so every size the guards admit
runs the same kernels (no gcc per size). Each call reads the symbols' values from the inputs'
shapes (the placeholders that carry a bare symbol), evaluates each kernel's domain (cached per
tuple of sizes) and passes it to the runner. Planning never compares symbols with ``==``/``<``
(that would record a guard fact after the guards were built, silently lost): it works on a copy
of the trace's `ShapeEnv` that raises instead of recording (`_PlanningEnv`); a question only a
guard could answer makes the graph run with NumPy. A call whose symbolic kernel's domain is below
``dynamic_min_size`` runs that kernel's NumPy path (`small.DynamicGate`).
Options (see `config.COptions`): threads, parallel_threshold, fastmath, min_size,
dynamic_min_size, small_kernels, calibrate, compiler, cflags, block, fp_errors, vector_math,
run_passes.
"""

from __future__ import annotations

import dataclasses
import logging
from math import prod
from typing import Any, Callable, Sequence

import numpy as np

from fx.meta import ArrayMeta
from fx.passes.constant_fold import fold_constants
from fx.passes.cse import eliminate_common_subexpressions
from fx.passes.expand_outer import expand_ufunc_outer
from fx.symbolic import Fact, ShapeEnv, Sym, evaluate, hint, symbol_number

from ...diagnostics import diagnose
from ...hidden_code import hide_code

# The build layer (and the stdlib modules it needs: subprocess, pathlib, json, ...) is imported
# with the backend, not inside the first compile: a disk-cache hit in a new process then costs
# only the graph work plus a dlopen (measured: ~14 ms for a 30-op graph instead of ~35 ms).
from . import build as _build_layer
from . import calibration
from .codegen_c import cdef_for, module_source, numpy_loop_slots
from .config import COptions, resolve_options
from .fusion import FusionPlan, plan_fusion
from .kernel import PointwiseRunner, ReductionRunner, fp_warn_mask
from .loop_ir import Kernel, PointwiseKernel, walk
from .numpy_loops import numpy_loop_table
from .program import Program
from .report import FusionReport, build_report
from .small import attach as _attach_small
from .small import prune as _prune_small

__all__ = ["compile_graph", "make_backend", "COptions", "FusionReport", "CBackendWarning"]

log = logging.getLogger("dynamo.kernels")


class CBackendWarning(RuntimeWarning):
    """The C backend could not build kernels and runs the graph with NumPy instead."""


def _can_raise_fp(k: Kernel) -> bool:
    values = k.outputs if k.kind == "pointwise" else k.values
    if k.kind == "reduction" and any(r.acc_dtype.kind == "f" for r in k.reductions):
        return True
    return any(v.dtype.kind == "f" or getattr(v, "arg_dtype", None) is not None
               and v.arg_dtype.kind == "f" for v in walk(values))


def _strided_vectors(inputs: Sequence[Any], domain: int) -> tuple[int, ...]:
    """Operands a pointwise kernel should read from a contiguous copy: arrays with one
    dimension longer than 1 (a row or column broadcast over the domain), at least 8 times
    smaller than the domain, whose elements are not adjacent (a column of a wider array,
    ``pos[:, 0:1]``). With any such operand the kernel takes its general strided loop for the
    whole domain (nbody's ``x.T - x``: 139 us against 21 us for the same kernel over a copied
    column, NumPy 84 us); the copy costs a few hundred elements. Values are unchanged and a
    single long dimension carries no memory order, so the output layout is NumPy's either way.
    """
    found = []
    for i, a in enumerate(inputs):
        if type(a) is not np.ndarray or a.size * 8 > domain:
            continue
        long = [d for d, n in enumerate(a.shape) if n > 1]
        if len(long) == 1 and a.strides[long[0]] != a.itemsize:
            found.append(i)
    return tuple(found)


def _kernel_step(k: Kernel, runner: Any, numpy_path: Callable[..., Any], calibrate: bool,
                 dynamic: bool = False) -> Callable[..., Any]:
    """The callable the program calls for kernel ``k``: ``step(*args)`` (``step(shape,
    *args)`` with ``dynamic``), ``args`` being the NumPy path's arguments (the kernel's
    operands first); returns the kernel's output value (a tuple for several).

    Runs the C kernel, or ``numpy_path`` (the generated NumPy statements of the kernel's
    members) when the kernel declines the inputs, is slower, or its domain is below
    ``min_size`` for this call (``shape`` None). With ``calibrate``, the first call chooses
    (`calibration.calibrate`, results discarded) and then computes its result with the chosen path,
    exactly as every later call does: a result never depends on how often the function ran.
    The verdict is kept on the runner (``use_kernel``, ``threads``). Kernel outputs are
    discarded in favour of the NumPy path when the kernel raised a floating-point flag whose
    errstate mode is 'warn' (`kernel.fp_warn_mask`), so the warnings are exactly NumPy's.
    """
    n_in = len(k.operands)
    fp = _can_raise_fp(k)
    single = len(k.out_nodes) == 1
    runner.use_kernel = None if calibrate else True
    pack: tuple[int, ...] | None = None if not dynamic and isinstance(k, PointwiseKernel) \
        else ()

    def packed(inputs: tuple) -> tuple:
        # The kernel reads these operands from contiguous copies (`_strided_vectors`).
        nonlocal pack
        if pack is None:
            pack = _strided_vectors(inputs, prod(k.shape))
        if not pack:
            return inputs
        out = list(inputs)
        for i in pack:
            out[i] = np.ascontiguousarray(out[i])
        return tuple(out)

    def run(shape: Any, args: tuple) -> Any:
        warn = fp_warn_mask() if fp else 0
        if warn is None:  # an errstate mode raises/calls: only NumPy raises where NumPy raises
            return numpy_path(*args)
        verdict = runner.use_kernel
        if verdict is False or (dynamic and shape is None):
            return numpy_path(*args)
        inputs = packed(args[:n_in]) if pack != () else args[:n_in]
        got = runner(inputs, shape)
        if got is None:
            return numpy_path(*args)
        if verdict is None:
            first_threads = runner.threads
            # (timed on the operands the kernel reads: the copies, when it takes any)
            runner.use_kernel = verdict = calibration.calibrate(
                runner, inputs + args[n_in:], numpy_path, shape)
            if not verdict:
                return numpy_path(*args)
            if runner.threads != first_threads:  # computed as every later call computes it
                got = runner(inputs, shape)
                if got is None:
                    return numpy_path(*args)
        results, flags = got
        if flags & warn:
            # NumPy would (or libm spuriously did) flag this: let NumPy compute it and warn
            # (category, message naming the ufunc, order) exactly as eager code does.
            return numpy_path(*args)
        return results[0] if single else tuple(results)

    if dynamic:
        def step(shape: Any, *args: Any) -> Any:
            return run(shape, args)
    else:
        def step(*args: Any) -> Any:
            # The common case inline (decided, no flag to replay): one Python call per kernel.
            if runner.use_kernel is True:
                warn = fp_warn_mask() if fp else 0
                if warn is not None:
                    got = runner(packed(args[:n_in]) if pack != () else args[:n_in], None)
                    if got is None or got[1] & warn:  # declined, or NumPy must warn
                        return numpy_path(*args)
                    return got[0][0] if single else tuple(got[0])
            return run(None, args)
    return step


def _build(kernels: list[Kernel], opts: COptions) -> tuple[Any, str]:
    BuildOptions, build_library = _build_layer.BuildOptions, _build_layer.build_library
    src = module_source(kernels, vector_math=opts.vector_math and not opts.fastmath)
    # No FMA contraction: a*b+c must round twice, as NumPy's separate ufuncs do. 512-bit
    # vectors (when the CPU has them) double libmvec throughput (measured: exp/log/tanh 1.5-2x).
    base = ("-mprefer-vector-width=512",) + (() if opts.fastmath else ("-ffp-contract=off",))
    vec = ("-Wl,--no-as-needed", "-lmvec") if opts.vector_math else ()
    cflags = base + vec + tuple(opts.cflags)
    lib = build_library(src, cdef_for(kernels), BuildOptions(
        compiler=opts.compiler, cflags=cflags, fastmath=opts.fastmath, openmp=True))
    slots = numpy_loop_slots(kernels)
    if slots:  # the library copies the table: it need not outlive this call
        lib.lib.npdynamo_set_numpy_loops(numpy_loop_table(lib.ffi, slots))
    return lib, src


def _run_passes(gm: Any) -> None:
    changed = expand_ufunc_outer(gm.graph)  # (a ufunc call fuses; its outer method does not)
    changed += fold_constants(gm.graph) + eliminate_common_subexpressions(gm.graph)
    changed += gm.graph.eliminate_dead_code()
    if changed and hasattr(gm, "recompile"):
        gm.recompile()


class _Undecided(Exception):
    """Planning asked a question about symbolic sizes that only a new guard could answer."""


class _PlanningEnv(ShapeEnv):
    """A copy of a trace's `ShapeEnv` for planning kernels: a question the symbols' bounds do
    not settle raises `_Undecided` instead of recording a fact (the guards are already built:
    a fact recorded now would never be checked, and a plan relying on it could be wrong)."""

    def _record(self, lhs: Any, op: str, rhs: Any) -> None:
        if Fact(lhs, op, rhs) in self.facts:
            return  # the trace relied on it: the guards check it already
        raise _Undecided(f"planning would need a guard: {Sym(lhs, self)} {op} {Sym(rhs, self)}")


def _planning_env(env: ShapeEnv) -> _PlanningEnv:
    """A `_PlanningEnv` with ``env``'s symbols, hints, facts and replacements (copies)."""
    strict = _PlanningEnv(hints=list(env.hints), origins=list(env.origins),
                          facts=list(env.facts), replacements=dict(env.replacements))
    strict._by_origin = dict(env._by_origin)
    strict.data_sizes = dict(env.data_sizes)  # (the lengths of x[mask]: bounds, never facts)
    return strict


def _syms_in(val: Any) -> list[Sym]:
    if isinstance(val, Sym):
        return [val]
    if isinstance(val, ArrayMeta):
        return [d for d in val.shape if isinstance(d, Sym)]
    if isinstance(val, (tuple, list)):
        return [s for v in val for s in _syms_in(v)]
    return []


def _rebind(val: Any, env: ShapeEnv) -> Any:
    """``val`` (a meta) with every Sym moved to ``env`` (the same object when it has none)."""
    if isinstance(val, Sym):
        return Sym(val.poly, env)
    if isinstance(val, ArrayMeta) and any(isinstance(d, Sym) for d in val.shape):
        return dataclasses.replace(val, shape=tuple(Sym(d.poly, env) if isinstance(d, Sym)
                                                    else d for d in val.shape))
    if isinstance(val, (tuple, list)) and _syms_in(val):
        if type(val) not in (tuple, list):  # a named tuple or subclass: not rebuilt here
            raise _Undecided(f"symbolic sizes inside a {type(val).__name__} meta")
        return type(val)(_rebind(v, env) for v in val)
    return val


def _planning_metas(graph: Any) -> dict[Any, Any]:
    """Move the graph's symbolic metas to a `_PlanningEnv` (in place); returns {node: original
    meta} to put back afterwards (empty for a graph with static sizes)."""
    envs = {id(s.env): s.env for n in graph.nodes for s in _syms_in(n.meta.get("val"))}
    if not envs:
        return {}
    if len(envs) > 1:
        raise _Undecided("sizes of several traces in one graph")
    (env,) = envs.values()
    strict = _planning_env(env)
    originals = {}
    for n in graph.nodes:
        val = n.meta.get("val")
        new = _rebind(val, strict)
        if new is not val:
            originals[n] = val
            n.meta["val"] = new
    return originals


def _size_sources(placeholders: list) -> dict[int, tuple[int, int]]:
    """Symbol number -> (argument position, dimension) of an input whose size it is."""
    sources: dict[int, tuple[int, int]] = {}
    for i, p in enumerate(placeholders):
        val = p.meta.get("val")
        if isinstance(val, ArrayMeta) and not val.is_scalar:
            for j, d in enumerate(val.shape):
                k = symbol_number(d)
                if k is not None:
                    sources.setdefault(k, (i, j))
    return sources


def _domain_hint(k: Kernel) -> int:
    """The kernel's domain size at trace time (no guard fact recorded)."""
    return prod(hint(d) for d in k.shape)


#: Per compiled graph with symbolic sizes: domain shapes kept per tuple of sizes before the
#: cache starts over.
_MAX_SIZE_ENTRIES = 256


def compile_graph(gm: Any, example_inputs: Sequence[Any], **options: Any) -> Callable[..., Any]:
    """The C backend: see the module docstring. Options override `config.defaults`."""
    opts = resolve_options(**options)
    if opts.run_passes:
        _run_passes(gm)
    originals: dict[Any, Any] = {}
    try:
        originals = _planning_metas(gm.graph)
        return _compile(gm, opts, bool(originals))
    except _Undecided as exc:
        # Some size decision would need a new guard: NumPy is correct for every size.
        log.info("C backend: graph with symbolic sizes runs with NumPy (%s)", exc)
        return gm.forward
    finally:
        for n, val in originals.items():
            n.meta["val"] = val


def _compile(gm: Any, opts: COptions, dynamic: bool) -> Callable[..., Any]:
    graph = gm.graph
    plan: FusionPlan = plan_fusion(graph, prefix="dyn_k")
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    worth = [k for k in plan.kernels if _domain_hint(k) >= opts.min_size]
    notes = {k.name: f"domain of {_domain_hint(k)} elements < min_size {opts.min_size}"
             for k in plan.kernels if k not in worth}
    sources = _size_sources(placeholders) if dynamic else {}
    dyn_kernels = [k for k in worth if any(isinstance(d, Sym) for d in k.shape)]
    if dyn_kernels:
        hints = {s: hint(placeholders[i].meta["val"].shape[j]) for s, (i, j) in sources.items()}
        for k in list(dyn_kernels):
            try:
                evaluate(k.shape, hints)
            except KeyError:  # a size no input's shape gives: cannot size the kernel per call
                dyn_kernels.remove(k)
                worth.remove(k)
                notes[k.name] = "a symbolic size of its domain is not an input's size"
    # Kernels too small to pay for a program step are dropped before gcc runs (small.prune), so
    # a graph of only such kernels costs no build.
    _prune_small(gm, plan, worth, notes, opts)
    dyn_kernels = [k for k in dyn_kernels if k in worth]
    lib = None
    build_note = ""
    if worth:
        try:
            lib, _ = _build(worth, opts)
            build_note = ("loaded from disk cache" if lib.from_cache else "compiled") + \
                f" in {lib.build_seconds * 1e3:.1f} ms"
        except Exception as exc:  # no compiler / build error: the graph still runs, eagerly
            diagnose("kernels", f"C backend: building kernels failed ({type(exc).__name__}: "
                     f"{exc}); running this graph with NumPy", CBackendWarning)
            report = build_report(plan, {}, notes, build_note=f"failed: {exc}")
            gm.meta["fusion_report"] = report
            log.info("%s", report)
            return gm.forward
    if dyn_kernels:
        build_note += (f"; {len(dyn_kernels)} kernel(s) over symbolic sizes (read per call; "
                       f"NumPy below dynamic_min_size {opts.dynamic_min_size})")
    if not worth:
        # Nothing pays for a kernel: the generated eager forward is the fastest program.
        report = build_report(plan, {}, notes, "nothing compiled")
        gm.meta["fusion_report"] = report
        log.info("%s", report)
        return gm.forward
    runners: dict[str, Any] = {}
    for k in worth:
        cls = PointwiseRunner if k.kind == "pointwise" else ReductionRunner
        runners[k.name] = cls(k, getattr(lib.lib, k.name), lib.ffi, opts)
        # The runner keeps the library loaded: it is unloaded when the last compiled function
        # using it is gone (build.py), never while one of its kernels can still be called.
        runners[k.name].library = lib
    # Issue 11 (small.py): one-call runners for static kernels; a graph that is one kernel
    # over its arguments is returned as that single C call.
    direct = _attach_small(gm, plan, runners, lib, opts, worth, notes, build_note)
    if direct is not None:
        return direct

    report = build_report(plan, {k.name: True for k in worth}, notes, build_note)
    gm.meta["fusion_report"] = report
    log.info("%s", report)
    return _program(gm, plan, worth, runners, dyn_kernels, sources, opts, report)


def _program(gm: Any, plan: FusionPlan, worth: list[Kernel], runners: dict[str, Any],
             dyn_kernels: list[Kernel], sources: dict[int, tuple[int, int]], opts: COptions,
             report: FusionReport) -> Callable[..., Any]:
    """The compiled function: the generated `Program` with a step bound per C kernel."""
    helpers: dict[str, Any] = {"fp_warn_mask": fp_warn_mask, "eager_forward": gm.forward}
    if dyn_kernels:
        helpers["kernel_shapes"] = _shapes_function(dyn_kernels, tuple(sources), opts.min_size)
    program = Program(gm, plan.schedule, {k.name for k in worth},
                      {k.name for k in dyn_kernels}, list(sources.values()), helpers)
    dyn_names = {k.name for k in dyn_kernels}
    for k in worth:
        program.bind(k.name, _kernel_step(k, runners[k.name], program.numpy_paths[k.name],
                                          opts.calibrate, k.name in dyn_names))
    _hide_frames(program.functions())
    compiled = program.fn
    compiled.fusion_report = report  # type: ignore[attr-defined]
    compiled.runners = runners  # type: ignore[attr-defined]
    compiled.program_code = program.code  # type: ignore[attr-defined]
    return compiled


def _shapes_function(dyn_kernels: list[Kernel], symbols: tuple[int, ...],
                     min_size: int) -> Callable[[tuple], dict[str, Any]]:
    """``kernel_shapes(sizes)``: {kernel name: concrete domain shape, or None to run NumPy}
    for the symbols' values ``sizes`` (read by the program from its inputs' shapes)."""
    kernel_shapes = [(k.name, k.shape) for k in dyn_kernels]
    shape_cache: dict[tuple, dict[str, Any]] = {}

    def shapes_for(key: tuple) -> dict[str, Any]:
        shapes = shape_cache.get(key)
        if shapes is None:
            sizes = dict(zip(symbols, key))
            shapes = {}
            for name, sym_shape in kernel_shapes:
                shape = evaluate(sym_shape, sizes)
                # A negative size would mean a fact the guards did not check: run NumPy.
                ok = all(d >= 0 for d in shape) and prod(shape) >= min_size
                shapes[name] = shape if ok else None
            if len(shape_cache) >= _MAX_SIZE_ENTRIES:
                shape_cache.clear()
            shape_cache[key] = shapes
        return shapes

    return shapes_for


def _hide_frames(functions: list[Callable[..., Any]]) -> None:
    """Keep the program's frames out of tracebacks through a compiled function, as the
    generated graph code's are (`dynamo.hidden_code`): the generated functions, and once per
    process the backend functions a program call runs through."""
    global _runtime_hidden
    if not _runtime_hidden:
        runtime = [_kernel_step, calibration.calibrate, calibration.timed,
                   calibration.numpy_quiet]
        for cls in (PointwiseRunner, ReductionRunner):
            runtime += [f for f in vars(cls).values() if callable(f)]
            runtime += [f for f in vars(cls.__mro__[1]).values() if callable(f)]
        for fn in runtime:
            code = getattr(fn, "__code__", None)
            if code is not None:
                hide_code(code)  # (nested functions too: a step's closures)
        _runtime_hidden = True
    for fn in functions:
        hide_code(fn.__code__)


_runtime_hidden = False


def make_backend(**options: Any) -> Callable[[Any, Sequence[Any]], Callable[..., Any]]:
    """A backend callable with ``options`` bound (validated now, not at first compile)."""
    resolve_options(**options)

    def backend(gm: Any, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        return compile_graph(gm, example_inputs, **options)

    backend.__name__ = "c_backend"
    backend.loop_kernels = True  # (dynamo.loop_kernels: loops of the frame may become kernels)
    return backend


compile_graph.loop_kernels = True  # (dynamo.loop_kernels: see make_backend)
