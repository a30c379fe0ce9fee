"""Tests for dynamo.backends.c.build / toolchain: compile C with gcc, load through cffi, call it.

NumPy is the oracle for kernel results. Every test uses its own cache directory (tmp_path) and a
unique source (a comment with a fresh id), because loaded libraries are kept per process by key.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from dynamo.backends.c import toolchain
from dynamo.backends.c.build import (
    FPENV_GUARD,
    BuildError,
    BuildOptions,
    CompilerNotFound,
    Library,
    build_library,
)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

AXPY_SRC = """\
#include <math.h>
/* %(tag)s */
void axpy(double a, const double *restrict x, const double *restrict y, double *restrict out,
          long n) {
#pragma omp simd
    for (long i = 0; i < n; i++) out[i] = a * x[i] + sqrt(y[i]);
}
float sumf(const float *x, long n) { double s = 0; for (long i = 0; i < n; i++) s += x[i];
    return (float)s; }
"""
AXPY_CDEF = """\
void axpy(double a, const double *x, const double *y, double *out, long n);
float sumf(const float *x, long n);
"""


def unique(src: str) -> str:
    return src % {"tag": uuid.uuid4().hex}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(path))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("DYNAMO_CFLAGS", raising=False)
    return path


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_build_and_call_matches_numpy(cache_dir):
    lib = build_library(unique(AXPY_SRC), AXPY_CDEF, BuildOptions())
    assert isinstance(lib, Library) and not lib.from_cache
    assert lib.path.is_file() and cache_dir in lib.path.parents
    x, y = np.random.rand(1001), np.random.rand(1001)
    out = np.empty_like(x)
    ffi = lib.ffi
    lib.lib.axpy(2.5, ffi.cast("double *", x.ctypes.data), ffi.from_buffer("double[]", y),
                 ffi.cast("double *", out.ctypes.data), x.size)
    np.testing.assert_allclose(out, 2.5 * x + np.sqrt(y), rtol=1e-15)
    f = np.arange(100, dtype=np.float32)
    assert lib.lib.sumf(ffi.from_buffer("float[]", f), f.size) == pytest.approx(f.sum())
    assert lib.build_seconds > 0 and lib.openmp and "-fopenmp" in lib.flags


def test_same_key_in_process_returns_the_same_library():
    src = unique(AXPY_SRC)
    first = build_library(src, AXPY_CDEF, BuildOptions())
    assert build_library(src, AXPY_CDEF, BuildOptions()) is first


def test_threads_building_the_same_key_load_it_once():
    src, results = unique(AXPY_SRC), []
    threads = [threading.Thread(target=lambda: results.append(build_library(src, AXPY_CDEF)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r is results[0] for r in results)


def test_different_flags_give_different_keys():
    src = unique(AXPY_SRC)
    plain = build_library(src, AXPY_CDEF, BuildOptions())
    fast = build_library(src, AXPY_CDEF, BuildOptions(fastmath=True))
    no_omp = build_library(src, AXPY_CDEF, BuildOptions(openmp=False))
    assert len({plain.key, fast.key, no_omp.key}) == 3
    assert "-ffast-math" in fast.flags and "-ffast-math" not in plain.flags
    assert "-fopenmp" not in no_omp.flags and not no_omp.openmp


def test_default_flags_and_env_cflags(monkeypatch):
    monkeypatch.setenv("DYNAMO_CFLAGS", "-DNPD_EXTRA=1 -O2")
    lib = build_library(unique(AXPY_SRC), AXPY_CDEF, BuildOptions(cflags=("-g0",)))
    for flag in toolchain.BASE_FLAGS:
        assert flag in lib.flags
    # user flags come last so they override the defaults (gcc: last one wins)
    assert lib.flags[-3:] == ("-g0", "-DNPD_EXTRA=1", "-O2")


def test_missing_compiler_option_raises_compiler_not_found():
    with pytest.raises(CompilerNotFound, match="nonexistent.*gcc"):
        build_library(unique(AXPY_SRC), AXPY_CDEF, BuildOptions(compiler="/nonexistent/cc"))


def test_missing_cc_env_raises_compiler_not_found(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/gcc-99")
    with pytest.raises(CompilerNotFound, match=r"\$CC"):
        build_library(unique(AXPY_SRC), AXPY_CDEF)


def test_no_compiler_on_path_raises_compiler_not_found(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CompilerNotFound, match="install gcc|Install gcc"):
        build_library(unique(AXPY_SRC), AXPY_CDEF)


def test_compile_error_raises_build_error_with_compiler_message():
    src = unique("/* %(tag)s */\nint broken(int x) { return x +; }\n")
    with pytest.raises(BuildError) as info:
        build_library(src, "int broken(int x);")
    err = info.value
    assert "kernel.c:2" in str(err) and "error" in str(err)
    assert "error" in err.stderr and err.command[0].endswith("gcc")
    assert err.source_path is not None and err.source_path.read_text() == src + FPENV_GUARD


def test_bad_cdef_raises_build_error():
    with pytest.raises(BuildError, match="cdef"):
        build_library(unique(AXPY_SRC), "void axpy(double a, nosuchtype *x);")


def test_compiler_without_openmp_falls_back(tmp_path):
    cc = write_script(tmp_path / "cc-noomp", 'for a in "$@"; do [ "$a" = -fopenmp ] && '
                      '{ echo "cc-noomp: unsupported -fopenmp" >&2; exit 1; }; done\n'
                      'exec gcc "$@"\n')
    lib = build_library(unique(AXPY_SRC), AXPY_CDEF, BuildOptions(compiler=str(cc)))
    assert not lib.openmp and "-fopenmp" not in lib.flags
    x = np.ones(8)
    out = np.empty_like(x)
    lib.lib.axpy(1.0, lib.ffi.from_buffer("double[]", x), lib.ffi.from_buffer("double[]", x),
                 lib.ffi.from_buffer("double[]", out), 8)
    assert (out == 2.0).all()


def test_compiler_identity_is_version_line():
    tc = toolchain.find_toolchain(None)
    assert "gcc" in tc.identity.lower() or "cc" in tc.identity.lower()
    assert "\n" not in tc.identity and os.path.isabs(tc.path)
    assert toolchain.find_toolchain(None) is tc  # cached per process


def test_cpu_features_describe_this_cpu():
    features = toolchain.cpu_features()
    assert f"machine={os.uname().machine}" in features
    assert toolchain.cpu_features() is features
    if os.path.exists("/proc/cpuinfo") and os.uname().machine == "x86_64":
        assert "sse2" in features


def test_calls_release_the_gil():
    # The kernel spins for ~0.3 s; if cffi held the GIL, the Python loop below could not run.
    src = unique("""/* %(tag)s */
#include <time.h>
double spin(double seconds) { struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile double acc = 0; do { acc += 1; clock_gettime(CLOCK_MONOTONIC, &t); }
  while ((t.tv_sec - t0.tv_sec) + 1e-9 * (t.tv_nsec - t0.tv_nsec) < seconds); return acc; }
""")
    lib = build_library(src, "double spin(double seconds);")
    worker = threading.Thread(target=lib.lib.spin, args=(0.3,))
    ticks = 0
    worker.start()
    time.sleep(0.02)
    while worker.is_alive():
        ticks += 1
    worker.join()
    assert ticks > 1000


def test_bandwidth_benchmark_kernels_run():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bandwidth.py"
    spec = importlib.util.spec_from_file_location("npdynamo_bench_bandwidth", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.measure_bandwidth(n=100_000, repeats=2)
    assert result["copy"] > 0.1 and result["triad"] > 0.1  # GB/s; checks values internally


def test_kernels_the_same_but_for_their_name_are_compiled_once(cache_dir):
    # An unrolled loop makes hundreds of kernels with one C body (jacobi_1d: 200 of one): gcc
    # compiles the body once and the others call it.
    import types

    from dynamo.backends.c.codegen_c import module_source

    def kernel(name, body):
        k = types.SimpleNamespace(name=name, kind="pointwise")
        k._source = (f"static int {name}_region(const int64_t *A, char **P) {{ {body} }}\n"
                     f"int {name}(const int64_t *A, char **P) {{ return {name}_region(A, P); }}\n")
        return k

    ks = [kernel("dyn_k0", "return 0;"), kernel("dyn_k1", "return 1;"),
          kernel("dyn_k2", "return 0;"), kernel("dyn_k3", "return 1;")]
    src = module_source(ks, vector_math=False)
    assert src.count("_region(const int64_t") == 2  # two distinct bodies
    assert "int dyn_k2(const int64_t *A, char **P) { return dyn_k0(A, P); }" in src
    assert "int dyn_k3(const int64_t *A, char **P) { return dyn_k1(A, P); }" in src
    lib = build_library(src, "\n".join(f"int {k.name}(const int64_t *A, char **P);" for k in ks))
    assert [getattr(lib.lib, k.name)(lib.ffi.NULL, lib.ffi.NULL) for k in ks] == [0, 1, 0, 1]
