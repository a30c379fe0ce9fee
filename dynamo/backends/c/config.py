"""Defaults of the C backend; `compile_graph(**options)` overrides them per graph.

Read by `dynamo.backends.c.compile_graph` (through `resolve_options`) once per compiled graph.
Environment variables give the process-wide defaults: ``DYNAMO_NUM_THREADS`` (OpenMP threads),
``CC`` (compiler), ``DYNAMO_CFLAGS`` (extra flags, shell-split).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, fields, replace

__all__ = ["COptions", "defaults", "resolve_options", "UnknownOption"]


class UnknownOption(TypeError):
    """An option name passed to the C backend that it does not know."""


@dataclass(frozen=True)
class COptions:
    """Every knob of the C backend. Frozen: a compiled graph keeps the options it was built with."""

    #: OpenMP threads per kernel. 1 by default: the reference machine has 2 cores and the other
    #: one usually runs the Python side (or another process).
    threads: int = 1
    #: Domain size (elements) from which a kernel runs its OpenMP ``parallel`` loop when
    #: ``threads > 1``. Below it, thread start-up costs more than it saves.
    parallel_threshold: int = 1 << 17
    #: Compile with ``-ffast-math`` (NaN/Inf/signed-zero/FP-warning semantics may differ).
    fastmath: bool = False
    #: Domains smaller than this many elements are not compiled; their nodes run as NumPy
    #: calls. 1: every non-empty domain is compiled, since a kernel over a static shape is
    #: called in one C call (`small_kernels`: ~0.3 us instead of the general runner's ~5-12
    #: us); with `calibrate`, kernels that cannot pay for a program step are then written out
    #: as NumPy (``small.pays_in_program``) and the others keep NumPy where it is faster.
    min_size: int = 1
    #: Call kernels over static shapes through the one-call path (``small.py``,
    #: ``csrc/small_call.c``); a graph that is one kernel over its arguments becomes a single
    #: C call. False: every kernel goes through the general (cffi) runner.
    small_kernels: bool = True
    #: Graphs over symbolic sizes keep the general runner (~5-12 us of fixed Python/cffi
    #: overhead per call): a call whose kernel domain is below this many elements runs NumPy
    #: (and, with `calibrate`, a kernel whose domain at trace time is below it is not used).
    #: Measured on the 2-core reference machine: a 10-op chain wins from ~1k elements but a
    #: 2-op chain only from ~16k; 8192 keeps short chains from losing.
    dynamic_min_size: int = 8192
    #: On its first call, time each kernel against its own NumPy path and keep the faster one
    #: (per kernel, measured on this machine: e.g. a lone float64 ``log`` is slower in libmvec
    #: than in NumPy's AVX-512 loops, while any fused chain wins).
    calibrate: bool = True
    #: Compiler executable (None: the build layer picks ``$CC`` or ``cc``/``gcc``).
    compiler: str | None = None
    #: Extra compiler flags.
    cflags: tuple[str, ...] = ()
    #: Elements per OpenMP work item of a pointwise kernel (a row is cut into such blocks).
    block: int = 16384
    #: Replay the kernel's floating-point exception flags through NumPy's error machinery
    #: (warnings per ``np.errstate``). Kernels never run when a mode is 'raise'/'call'/'print'/'log'.
    fp_errors: bool = True
    #: Call glibc's vector math (libmvec, <= 4 ULP) from vectorised loops.
    vector_math: bool = True
    #: Run constant folding, CSE and DCE on the graph (in place, then ``gm.recompile()``).
    run_passes: bool = True


def _from_env() -> COptions:
    env = os.environ
    return COptions(
        threads=max(1, int(env.get("DYNAMO_NUM_THREADS", "1") or 1)),
        compiler=env.get("CC") or None,
        cflags=tuple(shlex.split(env.get("DYNAMO_CFLAGS", ""))),
    )


#: Process-wide defaults (environment read at import).
defaults: COptions = _from_env()


def resolve_options(**options: object) -> COptions:
    """`defaults` with ``options`` applied; unknown names raise `UnknownOption`."""
    known = {f.name for f in fields(COptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UnknownOption(
            f"unknown C backend option(s) {unknown}; known options: {sorted(known)}"
        )
    if "cflags" in options and isinstance(options["cflags"], str):
        options["cflags"] = tuple(shlex.split(options["cflags"]))
    elif "cflags" in options:
        options["cflags"] = tuple(options["cflags"])  # type: ignore[arg-type]
    return replace(defaults, **options)  # type: ignore[arg-type]
