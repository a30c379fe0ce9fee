"""Build C source into a loaded shared library: gcc → .so → cffi (ABI mode), with a disk cache.

In: the C source of one or more kernels, the ``cdef`` declaring the functions Python calls, and
`BuildOptions`. Out: a `Library` whose ``lib`` attributes are the C functions. Called by the C
backend's code generator (``dynamo/backends/c``); knows nothing about graphs.

    lib = build_library(c_source, cdef, BuildOptions())
    lib.lib.kernel(lib.ffi.cast("double *", x.ctypes.data), x.size)

How: the compiler turns the source straight into a shared object (one subprocess, no setuptools).
While it runs, cffi parses the cdef and writes an *out-of-line ABI module* (``kernel_ffi.py``: the
declarations pre-parsed into a compact table), so loading from the disk cache later needs neither
the compiler nor cffi's C parser (pycparser alone costs ~70 ms to import) — just ``_cffi_backend``
and ``dlopen``. ``Library.ffi`` is therefore a ``_cffi_backend.FFI``, which has the usual
``cast``/``from_buffer``/``new``/``typeof``/``sizeof`` API.

cffi releases the GIL for the duration of every call into ``lib`` (tested in
tests/backends/test_c_build.py), so a kernel can run while other Python threads proceed; kernels
must therefore be reentrant (no global scratch).

Each library is loaded once per process while it is in use: libraries are kept by cache key
(weakly), so the same key never triggers a second ``dlopen`` while a `Library` for it is alive;
when the last reference to a `Library` goes, it is unloaded (``ffi.dlclose``). Keep the
`Library` (not only a function taken from ``lib``) for as long as you call into it. The
returned object is shared; do not mutate it.

Without a compiler (none on PATH, ``$CC`` gone), a library this request built before is still
loaded from the disk cache: every build records an *alias* (a key over what was asked for:
source, compiler as named, flags as given, CPU, versions) pointing to its full key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fx.weak import WeakValueMap, on_death

from ... import _C
from . import cache as _cache
from . import toolchain as _toolchain
from .toolchain import CompilerNotFound

__all__ = ["BuildOptions", "BuildError", "CompilerNotFound", "Library", "build_library"]

_BUILD_TIMEOUT_S = 600.0
_MAX_STDERR_CHARS = 8000


class BuildError(RuntimeError):
    """The compiler rejected the source (or the result could not be loaded).

    ``stderr`` holds the compiler's messages, ``command`` the command line, ``source_path`` a
    copy of the source the messages refer to.
    """

    def __init__(
        self,
        message: str,
        *,
        command: tuple[str, ...] = (),
        stderr: str = "",
        source_path: Path | None = None,
    ) -> None:
        super().__init__(message)
        self.command = command
        self.stderr = stderr
        self.source_path = source_path


@dataclass(frozen=True)
class BuildOptions:
    """How to build: compiler (None: $CC, else gcc, else cc), extra flags, fast-math, OpenMP."""

    compiler: str | None = None
    cflags: tuple[str, ...] = ()
    fastmath: bool = False
    openmp: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.cflags, str):
            object.__setattr__(self, "cflags", tuple(shlex.split(self.cflags)))
        else:
            object.__setattr__(self, "cflags", tuple(str(f) for f in self.cflags))


@dataclass(frozen=True, eq=False)
class Library:
    """A loaded kernel library. ``from_cache``: loaded from disk without compiling.

    ``build_seconds`` is the wall time of the `build_library` call that first produced it
    (compile + load, or disk-cache load). ``openmp`` says whether it was built with -fopenmp
    (False if not requested or the compiler lacks OpenMP support).
    """

    ffi: Any
    lib: Any
    path: Path
    key: str
    from_cache: bool
    build_seconds: float
    openmp: bool
    compiler: str
    flags: tuple[str, ...]
    source_path: Path = field(default=Path())

    @property
    def entry_dir(self) -> Path:
        """The library's disk-cache entry (see `cache`): where data about its kernels, such as
        calibration verdicts (`cache.record_verdict`), is kept next to them."""
        return self.path.parent


#: Appended to every library's source: ``-ffast-math``/``-Ofast`` (option ``fastmath``, or
#: ``$DYNAMO_CFLAGS``) link gcc's crtfastmath.o, whose constructor switches on flush-to-zero /
#: denormals-are-zero for the thread that loads the library, changing every later NumPy result
#: on subnormals. The first constructor saves the floating-point environment, and `_load`
#: restores it right after ``dlopen`` (constructor order alone cannot put ours after gcc's).
FPENV_GUARD = """
/* npdynamo: loading this library must not change the caller's floating-point environment */
#include <fenv.h>
static fenv_t npdynamo_saved_fenv;
__attribute__((constructor(101))) static void npdynamo_save_fenv(void)
{ fegetenv(&npdynamo_saved_fenv); }
void npdynamo_restore_fenv(void) { fesetenv(&npdynamo_saved_fenv); }
"""
FPENV_CDEF = "\nvoid npdynamo_restore_fenv(void);\n"

#: Libraries loaded in this process, by cache key, while something uses them: a `Library` is
#: unloaded (``dlclose``) when its last user drops it (`_unload_when_dead`), so compiled
#: functions that are garbage collected do not leave their kernels mapped.
_loaded: "WeakValueMap[str, Library]" = WeakValueMap()
_loaded_lock = threading.Lock()
#: One lock per cache key loaded in this process (kept: a small object per kernel built or
#: loaded, and dropping one while another thread waits for it would let two threads load a key).
_key_locks: dict[str, threading.Lock] = {}


def _package_version() -> str:
    pkg = sys.modules.get("dynamo")
    return str(getattr(pkg, "__version__", "dev"))


def _cffi_version() -> str:
    import _cffi_backend  # the C half of cffi: cheap, unlike `import cffi`

    return str(_cffi_backend.__version__)


def _requested_compiler(options: BuildOptions) -> str:
    return options.compiler or os.environ.get("CC", "").strip()


def _text_digest(c_source: str, cdef: str) -> str:
    """sha256 of the source and the cdef, the keys' part for them (hashed once: a key made
    over the text itself cost 0.7 ms per 160 KB loop kernel, twice per load)."""
    return hashlib.sha256(c_source.encode() + b"\0" + cdef.encode()).hexdigest()


def _alias_key(digest: str, options: BuildOptions) -> str:
    """A key computed without the compiler: what was asked for (source and cdef by their
    `_text_digest`, compiler as named, flags as given, CPU, versions). It maps to the full key
    of the last build of that request, so a cached kernel loads when the compiler is gone."""
    return _cache.make_key({
        "alias": "1",
        "text": digest,
        "compiler_request": _requested_compiler(options),
        "cflags": shlex.join(options.cflags),
        "env_cflags": os.environ.get(_toolchain.CFLAGS_ENV, ""),
        "fastmath": str(options.fastmath),
        "openmp": str(options.openmp),
        "cpu": _toolchain.cpu_features(),
        "npdynamo": _package_version(),
        "cffi": _cffi_version(),
    })


def build_library(c_source: str, cdef: str, options: BuildOptions | None = None) -> Library:
    """Compile (or fetch from the disk cache) and load ``c_source``; see the module docstring.

    Raises `CompilerNotFound` if there is no compiler (and no cached build of this request),
    `BuildError` if compilation or loading fails (with the compiler's messages).
    """
    options = options or BuildOptions()
    start = time.perf_counter()
    c_source, cdef = c_source + FPENV_GUARD, cdef + FPENV_CDEF
    kcache = _cache.KernelCache(_cache.cache_root())
    digest = _text_digest(c_source, cdef)
    alias = _alias_key(digest, options)
    try:
        tc = _toolchain.find_toolchain(options.compiler, kcache.toolchains)
    except CompilerNotFound:
        # No compiler: a kernel this request built before is still usable from the cache.
        found = _load_by_alias(kcache, alias, start)
        if found is None:
            raise
        return found
    flags, use_openmp = _toolchain.compile_flags(
        tc, options.cflags, options.fastmath, options.openmp
    )
    key = _cache.make_key({
        "text": digest,
        "compiler": shlex.join(tc.command),
        "compiler_identity": tc.identity,
        "flags": shlex.join(flags + _toolchain.link_flags()),
        "cpu": _toolchain.cpu_features(),
        "npdynamo": _package_version(),
        "cffi": _cffi_version(),
    })
    with _loaded_lock:
        done = _loaded.get(key)
        lock = _key_locks.setdefault(key, threading.Lock())
    if done is not None:
        return done
    with lock:  # one thread per key builds/loads; the others wait and reuse its result
        with _loaded_lock:
            done = _loaded.get(key)
        if done is not None:
            return done
        kcache = _cache.checked(kcache, key, alias)
        from_cache = False
        entry = kcache.lookup(key)
        loaded = None
        if entry is not None:
            try:
                loaded = _load(entry)
                from_cache = True
            except _LoadError as exc:
                kcache.discard(entry, str(exc))
        if loaded is None:
            entry = _compile(kcache, key, c_source, cdef, tc, flags)
            try:
                loaded = _load(entry)
            except _LoadError as exc:
                raise BuildError(
                    f"the compiled kernel library {entry} could not be loaded: {exc}",
                    source_path=entry / _cache.SOURCE_NAME,
                ) from exc
        kcache.record_alias(alias, {"key": key, "compiler": tc.identity, "flags": list(flags),
                                    "openmp": use_openmp})
        return _register(loaded, entry, key, from_cache, start, use_openmp, tc.identity, flags)


def _register(loaded: tuple[Any, Any], entry: Path, key: str, from_cache: bool, start: float,
              openmp: bool, compiler: str, flags: tuple[str, ...]) -> Library:
    ffi, lib = loaded
    library = Library(
        ffi=ffi,
        lib=lib,
        path=entry / _cache.SO_NAME,
        key=key,
        from_cache=from_cache,
        build_seconds=time.perf_counter() - start,
        openmp=openmp,
        compiler=compiler,
        flags=flags,
        source_path=entry / _cache.SOURCE_NAME,
    )
    _unload_when_dead(library, ffi, lib)
    with _loaded_lock:
        _loaded[key] = library
    return library


def _load_by_alias(kcache: _cache.KernelCache, alias: str, start: float) -> Library | None:
    """The library last built for this request (`_alias_key`), loaded without a compiler."""
    record = kcache.read_alias(alias)
    key = record.get("key") if record else None
    if not isinstance(key, str):
        return None
    with _loaded_lock:
        done = _loaded.get(key)
        lock = _key_locks.setdefault(key, threading.Lock())
    if done is not None:
        return done
    with lock:
        with _loaded_lock:
            done = _loaded.get(key)
        if done is not None:
            return done
        kcache = _cache.checked(kcache, key, alias)
        entry = kcache.lookup(key)
        if entry is None:
            return None
        try:
            loaded = _load(entry)
        except _LoadError as exc:
            kcache.discard(entry, str(exc))
            return None
        return _register(loaded, entry, key, True, start, bool(record.get("openmp")),
                         str(record.get("compiler", "")), tuple(record.get("flags", ())))


def _unload_when_dead(library: Library, ffi: Any, lib: Any) -> None:
    """``ffi.dlclose(lib)`` once nothing references `library` any more (no kernel of it can
    run then). The library dies in the user's program, so the callback runs no Python code
    (`fx.weak`): `_C.call_ignoring_ref` calls ``dlclose`` and discards an `Exception` it raises
    (the library then stays mapped). Not at exit: a daemon thread may still be inside a kernel
    while the interpreter shuts down, and the process unmaps everything anyway."""
    on_death(library, functools.partial(_C.call_ignoring_ref, ffi.dlclose, lib))


def _pin_runtime_libraries() -> None:
    """Keep the OpenMP runtime and libmvec loaded for good once a kernel pulled them in.

    libgomp is not marked NODELETE: if the last kernel library using it were unloaded, it would
    be unmapped under its own idle worker threads. ``RTLD_NOLOAD | RTLD_NODELETE`` promotes an
    already-loaded library to "never unload" without loading anything new.
    """
    global _pinned
    if _pinned:
        return
    try:
        # The bare dlopen: ctypes.CDLL would also make a function-pointer class per library,
        # garbage the cyclic collector must free (type objects are cycles).
        from _ctypes import dlopen
    except ImportError:  # pragma: no cover - not POSIX
        import ctypes  # (only where the bare dlopen is missing)

        def dlopen(name: str, mode: int) -> Any:
            return ctypes.CDLL(name, mode=mode)

    mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_NODELETE", 0)
    pinned = True
    for name in ("libgomp.so.1", "libmvec.so.1"):
        try:
            dlopen(name, mode)
        except OSError:
            pinned = False  # not loaded yet (a kernel without OpenMP/libmvec): try again later
    _pinned = pinned and bool(mode)


_pinned = False


class _LoadError(Exception):
    pass


def _load(entry: Path) -> tuple[Any, Any]:
    """Execute the entry's pre-parsed ffi module and dlopen its shared object."""
    ffi_path = entry / _cache.FFI_NAME
    try:
        namespace: dict[str, Any] = {"__name__": f"_npdynamo_ffi_{entry.name[:16]}"}
        exec(compile(ffi_path.read_text(), str(ffi_path), "exec"), namespace)
        ffi = namespace["ffi"]
        lib = ffi.dlopen(str(entry / _cache.SO_NAME))
        lib.npdynamo_restore_fenv()
        _pin_runtime_libraries()
        return ffi, lib
    except Exception as exc:  # noqa: BLE001 - any failure here means "entry unusable"
        raise _LoadError(f"{type(exc).__name__}: {exc}") from exc


def _write_ffi_module(cdef: str, module_name: str, target: Path) -> None:
    import cffi  # only needed when building; its parser is slow to import
    from cffi import recompiler  # (likewise)

    ffi = cffi.FFI()
    ffi.cdef(cdef)
    recompiler.make_py_source(ffi, module_name, str(target))


def _compile(
    kcache: _cache.KernelCache,
    key: str,
    c_source: str,
    cdef: str,
    tc: _toolchain.Toolchain,
    flags: tuple[str, ...],
) -> Path:
    """Build into a staging directory and publish it as the cache entry for ``key``."""
    staging = kcache.staging_dir(key)
    try:
        (staging / _cache.SOURCE_NAME).write_text(c_source)
        # Relative names + cwd=staging: compiler messages read "kernel.c:12:5: error: ...".
        command = (*tc.command, *flags, _cache.SOURCE_NAME, "-o", _cache.SO_NAME,
                   *_toolchain.link_flags())
        try:
            proc = subprocess.Popen(command, cwd=staging, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            raise CompilerNotFound(
                f"C compiler {tc.path!r} could not be started ({exc}). Install gcc or set CC."
            ) from exc
        try:  # parse the cdef while the compiler runs: the two costs overlap
            _write_ffi_module(cdef, f"_npdynamo_{key[:16]}", staging / _cache.FFI_NAME)
            cdef_error = None
        except Exception as exc:  # noqa: BLE001 - cffi raises several types for bad cdefs
            cdef_error = exc
        try:
            out, err = proc.communicate(timeout=_BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err = f"timed out after {_BUILD_TIMEOUT_S:.0f} s\n{err}"
            proc.returncode = proc.returncode or -1
        if proc.returncode != 0:
            saved = kcache.record_failure(key, c_source)
            messages = (err or out or "").strip()
            raise BuildError(
                f"C compilation failed (exit {proc.returncode}) with "
                f"`{shlex.join(command)}`:\n{messages[:_MAX_STDERR_CHARS]}\n"
                f"(source kept at {saved})",
                command=command,
                stderr=messages,
                source_path=saved,
            )
        if cdef_error is not None:
            raise BuildError(
                f"the cdef could not be parsed by cffi: {type(cdef_error).__name__}: "
                f"{cdef_error}",
                stderr=str(cdef_error),
            ) from cdef_error
        meta = {
            "source_sha256": _sha256_text(c_source),
            "source_chars": len(c_source),
            "cdef_sha256": _sha256_text(cdef),
            "command": list(command),
            "compiler": tc.identity,
            "cpu": _toolchain.cpu_features(),
            "created": time.time(),
            "pid": os.getpid(),
        }
        return kcache.publish(key, staging, meta)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
