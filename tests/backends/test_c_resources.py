"""The C backend's process resources: floating-point environment, cache directories, toolchain,
loaded libraries. Issue 8 ("never crash, never change the program"), C-backend items:

* Loading a kernel built with ``-ffast-math`` does not switch the process to flush-to-zero
  (gcc's crtfastmath.o constructor would; NumPy would then see subnormals as 0).
* A kernel in the disk cache loads without a compiler on PATH.
* Every directory from the cache root to an entry is checked (owner, group/other write bits).
* An entry path that is a plain file is moved aside (with a warning) and rebuilt.
* Kernel libraries are unloaded (``dlclose``) when no compiled function uses them any more.

Every test uses a private cache directory (``DYNAMO_CACHE_DIR`` in a tmp dir).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

from dynamo.backends.c import build, cache, toolchain
from dynamo.backends.c.build import BuildOptions, build_library
from support.diagnostics import diagnostics_as_warnings  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
              pytest.mark.usefixtures("diagnostics_as_warnings")]

REPO = Path(__file__).resolve().parents[2]
TWICE_CDEF = "void twice(const double *x, double *out, long n);"


def twice_source() -> str:
    return (f"/* {uuid.uuid4().hex} */\nvoid twice(const double *x, double *out, long n) {{\n"
            "    for (long i = 0; i < n; i++) out[i] = 2 * x[i];\n}\n")


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(root))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("DYNAMO_CFLAGS", raising=False)
    return root


def run_python(code: str, env: dict, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- floating-point environment ----------------------------------------------------------------

FTZ_RUNNER = r"""
import json, sys
import numpy as np
from dynamo.backends.c.build import BuildOptions, build_library
tiny = np.full(16, np.finfo(np.float32).smallest_subnormal, np.float32)
before = float(np.log(tiny)[0])
lib = build_library(open(sys.argv[1]).read(), "void twice(const double *x, double *out, long n);",
                    BuildOptions(fastmath=True))
after = float(np.log(tiny)[0])
print(json.dumps({"before": before, "after": after, "triple": float((tiny * 3)[0])}))
"""


def test_loading_a_fastmath_kernel_keeps_subnormals(private_cache, tmp_path):
    src = tmp_path / "twice.c"
    src.write_text(twice_source())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _ in range(2):  # compiled, then loaded from the disk cache
        got = run_python(FTZ_RUNNER, env, str(src))
        assert got["after"] == got["before"] != float("-inf")
        assert got["triple"] == 3 * float(np.finfo(np.float32).smallest_subnormal)


# -- cache without a compiler ------------------------------------------------------------------

GRAPH_RUNNER = r"""
import json, sys, warnings
import numpy as np
sys.path.insert(0, sys.argv[1])
from support.c_graphs import build
x = np.linspace(-1.0, 1.0, 1000)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    gm, f = build(lambda a: np.sqrt(a * a + 1.0) * 3.0 + float(sys.argv[2]), [x])
    got = f(x)
print(json.dumps({"ok": bool(np.allclose(got, gm.forward(x), rtol=1e-15)),
                  "calls": sum(r.calls for r in getattr(f, "runners", {}).values()),
                  "note": f.fusion_report.build_note if hasattr(f, "fusion_report") else "",
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}))
"""


def test_cached_kernel_loads_without_a_compiler_on_path(private_cache, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    tests_dir = str(REPO / "tests")
    constant = repr(float(uuid.uuid4().int % 1000))
    warm = run_python(GRAPH_RUNNER, env, tests_dir, constant)
    assert warm["ok"] and warm["calls"] == 1 and warm["note"].startswith("compiled")
    empty = tmp_path / "bin"
    empty.mkdir()
    no_cc = dict(env, PATH=str(empty))
    assert shutil.which("gcc", path=str(empty)) is None
    cold = run_python(GRAPH_RUNNER, no_cc, tests_dir, constant)
    assert cold["warnings"] == [] and cold["ok"] and cold["calls"] == 1
    assert cold["note"].startswith("loaded from disk cache")
    # Something never built still reports the missing compiler (and runs with NumPy).
    other = run_python(GRAPH_RUNNER, no_cc, tests_dir, constant + "1")
    assert other["ok"] and other["calls"] == 0
    assert any("CompilerNotFound" in w and "gcc" in w for w in other["warnings"])


# -- cache directories ---------------------------------------------------------------------------

def _build_and_forget(src: str) -> tuple[str, Path]:
    lib = build_library(src, TWICE_CDEF)
    key, so = lib.key, lib.path
    _call_twice(lib)
    del lib
    gc.collect()
    return key, so.parent


def _call_twice(lib) -> None:
    x = np.arange(10.0)
    out = np.empty_like(x)
    lib.lib.twice(lib.ffi.from_buffer("double[]", x), lib.ffi.from_buffer("double[]", out), 10)
    assert (out == 2 * x).all()


@pytest.mark.parametrize("level", ["kernels", "prefix", "entry"])
def test_group_or_world_writable_directory_below_the_root_is_refused(private_cache, level):
    src = twice_source()
    key, entry = _build_and_forget(src)
    target = {"kernels": entry.parent.parent, "prefix": entry.parent, "entry": entry}[level]
    target.chmod(0o777 if level != "kernels" else 0o770)
    try:
        with pytest.warns(cache.CacheDirWarning, match=f"refusing kernel cache directory "
                                                       f"{target}.*writable by group"):
            lib = build_library(src, TWICE_CDEF)
        assert not lib.from_cache and not lib.path.is_relative_to(private_cache)
        _call_twice(lib)
    finally:
        target.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root (chown)")
def test_directory_below_the_root_owned_by_another_user_is_refused(private_cache):
    src = twice_source()
    key, entry = _build_and_forget(src)
    os.chown(entry.parent, 12345, -1)
    try:
        with pytest.warns(cache.CacheDirWarning, match=f"refusing kernel cache directory "
                                                       f"{entry.parent}: it is owned by uid 12345"):
            lib = build_library(src, TWICE_CDEF)
        assert not lib.from_cache and not lib.path.is_relative_to(private_cache)
    finally:
        os.chown(entry.parent, os.getuid(), -1)


@pytest.mark.parametrize("level", ["entry", "prefix"])
def test_plain_file_in_place_of_a_cache_directory_is_moved_aside(private_cache, level):
    src = twice_source()
    key, entry = _build_and_forget(src)
    target = entry if level == "entry" else entry.parent
    shutil.rmtree(target)
    target.write_text("not a directory")
    with pytest.warns(cache.CorruptCacheEntryWarning, match="not a directory"):
        lib = build_library(src, TWICE_CDEF)
    assert not lib.from_cache and lib.path.parent == entry and entry.is_dir()
    _call_twice(lib)
    del lib
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = build_library(src, TWICE_CDEF)
    assert again.from_cache
    assert not [p for p in entry.parent.parent.rglob(".trash-*")]


# -- unloading -------------------------------------------------------------------------------------

def mapped_kernels(root: Path) -> set[str]:
    """Kernel libraries under ``root`` mapped into this process."""
    with open("/proc/self/maps") as fh:
        return {line.split(None, 5)[-1].strip() for line in fh
                if str(root) in line and line.rstrip().endswith(".so")}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_dropped_functions_unload_their_kernel_libraries(private_cache):
    from support.c_graphs import build as build_graph
    from support.profiling import python_frames_during

    gc.collect()
    assert mapped_kernels(private_cache) == set()
    x = np.linspace(0.0, 1.0, 100)
    # 50 functions over 5 distinct kernels: functions with equal source share one library.
    functions = [build_graph(lambda a, c=i % 5: a * 2.0 + float(c), [x])[1] for i in range(50)]
    for f in functions:
        f(x)
    assert len(mapped_kernels(private_cache)) == 5
    survivors = functions[:5]  # one user of each library
    del functions
    gc.collect()
    assert len(mapped_kernels(private_cache)) == 5
    for i, f in enumerate(survivors):
        np.testing.assert_array_equal(f(x), x * 2.0 + float(i))
    del f

    def drop():
        survivors.clear()
        gc.collect()
    # (and no Python code runs while they die, e.g. where a Ctrl-C could be lost: fx/weak.py)
    assert python_frames_during(drop) == []
    assert mapped_kernels(private_cache) == set()


def test_building_a_kernel_leaves_no_cyclic_garbage(private_cache):
    # (json.dump and indented json.dumps use the pure-Python encoder, whose closures are
    # reference cycles: every kernel build left ~80 objects for the user's gc.collect())
    import dynamo

    x = np.linspace(0.0, 1.0, 50)
    with dynamo.optimize("c"):  # the first build imports cffi and pycparser: not measured
        (lambda a: np.sin(a) * 3.0)(x)
    f = lambda a: np.cos(a) * 7.0 - 1.0  # noqa: E731  (a new kernel: built, not loaded)
    gc.collect()
    old = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with dynamo.optimize("c"):
            got = f(x)
        gc.collect()
        garbage = sorted(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(old)
        gc.garbage.clear()
    assert list((private_cache / "kernels").rglob("meta.json")), "no kernel was built"
    assert garbage == []
    np.testing.assert_allclose(got, np.cos(x) * 7.0 - 1.0)


UNLOAD_RUNNER = r"""
import gc, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from support.c_graphs import build
x = np.random.default_rng(0).standard_normal(300_000)
for i in range(3):
    gm, f = build(lambda a, c=float(i): np.exp(a * 0.5) + c, [x], threads=2,
                  parallel_threshold=1000)
    assert np.allclose(f(x), gm.forward(x)) and sum(r.calls for r in f.runners.values()) == 1
    del gm, f
    gc.collect()
print('{"done": true}')
"""


def test_unloading_parallel_kernels_keeps_the_openmp_runtime(private_cache):
    # libgomp is not NODELETE: unloading the last kernel that pulled it in would unmap it under
    # its idle worker threads (a crash); the build layer pins it.
    env = dict(os.environ, PYTHONPATH=str(REPO))
    assert run_python(UNLOAD_RUNNER, env, str(REPO / "tests")) == {"done": True}


# -- memory -------------------------------------------------------------------------------------

NO_MEMORY_RUNNER = r"""
import json, resource, sys
import numpy as np
import dynamo
from dynamo.backends.c import make_backend

def row_sums_of_exp(x):
    return np.exp(x).sum(axis=-1)

# rows of 100 MB: the kernel's row buffer is as large
x = np.full((2, 12_500_000), 0.5)
f = dynamo.compile(row_sums_of_exp, backend=make_backend(min_size=0, calibrate=False,
                                                         dynamic_min_size=0),
                   dynamic=sys.argv[1] == "dynamic")
first = float(f(x)[0])
with open("/proc/self/status") as fh:
    size = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (size + 50 * 2**20, resource.RLIM_INFINITY))
outcomes = []
for fn in (row_sums_of_exp, f):
    try:
        fn(x)
        outcomes.append("returned")
    except MemoryError:
        outcomes.append("MemoryError")
print(json.dumps({"first": first, "outcomes": outcomes}))
"""


@pytest.mark.parametrize("shapes", ["static", "dynamic"])
def test_a_kernel_that_cannot_allocate_raises_memory_error(private_cache, shapes):
    """A kernel's per-thread row buffer (a reduction over values of NumPy's math loops) is
    malloc'd; when that fails the kernel writes nothing and the call raises MemoryError, as
    plain NumPy does when it cannot allocate, instead of writing through a null pointer (or
    returning its unwritten outputs). Static shapes: the one-call path (csrc/small_call.c);
    dynamic: the general runner (kernel.py)."""
    result = run_python(NO_MEMORY_RUNNER, dict(os.environ, PYTHONPATH=str(REPO)), shapes)
    assert result["first"] == pytest.approx(12_500_000 * np.exp(0.5))
    assert result["outcomes"] == ["MemoryError", "MemoryError"]
