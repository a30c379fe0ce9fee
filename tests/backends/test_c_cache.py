"""Tests for dynamo.backends.c.cache: reuse across processes, corruption recovery, unsafe
directories, concurrent builders.

Cross-process behaviour is tested with real subprocesses running `RUNNER` (each builds one kernel,
calls it and prints a JSON report). The compiler is a wrapper script that logs every invocation,
so "the second process did not compile" is observed, not assumed.
"""

from __future__ import annotations

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

from dynamo.backends.c import cache
from dynamo.backends.c.build import FPENV_GUARD, BuildOptions, build_library
from support.diagnostics import diagnostics_as_warnings  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
              pytest.mark.usefixtures("diagnostics_as_warnings")]

REPO = Path(__file__).resolve().parents[2]

RUNNER = r"""
import json, sys, warnings
import numpy as np
from dynamo.backends.c.build import build_library
src = open(sys.argv[1]).read()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lib = build_library(src, "void twice(const double *x, double *out, long n);")
x = np.arange(10.0); out = np.empty_like(x)
lib.lib.twice(lib.ffi.from_buffer("double[]", x), lib.ffi.from_buffer("double[]", out), x.size)
print(json.dumps({"from_cache": lib.from_cache, "ok": bool((out == 2 * x).all()),
                  "path": str(lib.path), "key": lib.key,
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}))
"""

SOURCE = "/* %s */\nvoid twice(const double *x, double *out, long n) {\n" \
         "    for (long i = 0; i < n; i++) out[i] = 2 * x[i];\n}\n"


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict:
    """Environment for the test process and its subprocesses: private cache, counting CC."""
    log = tmp_path / "cc.log"
    cc = tmp_path / "cc-counting"
    cc.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec gcc "$@"\n')
    cc.chmod(0o755)
    values = {"DYNAMO_CACHE_DIR": str(tmp_path / "cache"), "CC": str(cc)}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DYNAMO_CFLAGS", raising=False)
    return dict(os.environ, PYTHONPATH=str(REPO), LOG=str(log), **values)


@pytest.fixture
def source_file(tmp_path) -> Path:
    path = tmp_path / "twice.c"
    path.write_text(SOURCE % uuid.uuid4().hex)
    return path


def compile_count(env: dict) -> int:
    log = Path(env["LOG"])
    return len(log.read_text().splitlines()) if log.exists() else 0


def run(env: dict, source_file: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(source_file)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def entry_of(report: dict) -> Path:
    return Path(report["path"]).parent


def test_second_process_reuses_cached_library_without_compiling(env, source_file):
    first = run(env, source_file)
    assert first == dict(first, from_cache=False, ok=True, warnings=[])
    builds = compile_count(env)
    assert builds >= 1  # the kernel (plus the one-time --version / OpenMP probes)
    second = run(env, source_file)
    assert second == dict(second, from_cache=True, ok=True, warnings=[])
    assert second["path"] == first["path"]
    assert compile_count(env) == builds  # not even `cc --version`


def test_entry_layout_and_metadata(env, source_file):
    report = run(env, source_file)
    entry = entry_of(report)
    assert {p.name for p in entry.iterdir()} == {"kernel.so", "kernel.c", "kernel_ffi.py",
                                                  "meta.json"}
    assert (entry / "kernel.c").read_text() == source_file.read_text() + FPENV_GUARD
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == report["key"] == entry.name
    so = meta["files"]["kernel.so"]
    assert so["size"] == (entry / "kernel.so").stat().st_size
    assert so["sha256"] == cache.file_sha256(entry / "kernel.so")
    root = Path(env["DYNAMO_CACHE_DIR"])
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".")]  # no leftovers


@pytest.mark.parametrize("damage", ["truncate_so", "garbage_so", "delete_meta", "bad_meta"])
def test_corrupt_entry_is_rebuilt_with_a_warning(env, source_file, damage):
    entry = entry_of(run(env, source_file))
    so, meta = entry / "kernel.so", entry / "meta.json"
    if damage == "truncate_so":
        so.write_bytes(so.read_bytes()[:100])
    elif damage == "garbage_so":  # same size, wrong bytes: only the checksum can tell
        so.write_bytes(b"\0" * so.stat().st_size)
    elif damage == "delete_meta":
        meta.unlink()
    else:
        meta.write_text("{not json")
    builds = compile_count(env)
    again = run(env, source_file)
    assert again["key"] == entry.name, again
    assert again["from_cache"] is False and again["ok"], again
    assert any("CorruptCacheEntryWarning" in w and "rebuilding" in w
               for w in again["warnings"]), again
    assert compile_count(env) == builds + 1
    healed = run(env, source_file)
    assert healed["from_cache"] is True and healed["warnings"] == []


def test_valid_checksum_but_unloadable_library_is_rebuilt(env, source_file):
    entry = entry_of(run(env, source_file))
    # A consistent entry whose .so is not a shared object: only dlopen can find out.
    so = entry / "kernel.so"
    so.write_bytes(b"not an ELF file")
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["kernel.so"] = {"size": so.stat().st_size, "sha256": cache.file_sha256(so)}
    (entry / "meta.json").write_text(json.dumps(meta))
    again = run(env, source_file)
    assert again["from_cache"] is False and again["ok"]
    assert any("CorruptCacheEntryWarning" in w for w in again["warnings"])


def test_concurrent_processes_building_the_same_key_both_succeed(env, source_file, tmp_path):
    # A compiler that takes 0.5 s makes both processes miss the cache and compile together.
    slow = tmp_path / "cc-slow"
    slow.write_text(f'#!/bin/sh\necho "$*" >> {env["LOG"]}\nsleep 0.5\nexec gcc "$@"\n')
    slow.chmod(0o755)
    env = dict(env, CC=str(slow))
    procs = [subprocess.Popen([sys.executable, "-c", RUNNER, str(source_file)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert all(r["ok"] and r["warnings"] == [] for r in reports)
    assert reports[0]["path"] == reports[1]["path"]
    entry = entry_of(reports[0])
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]  # one entry, no temps
    assert run(env, source_file)["from_cache"] is True


def _refused(tmp_path, monkeypatch, prepare) -> None:
    bad = tmp_path / "shared-cache"
    bad.mkdir()
    prepare(bad)
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(bad))
    src = SOURCE % uuid.uuid4().hex
    with pytest.warns(cache.CacheDirWarning, match="refusing kernel cache directory"):
        lib = build_library(src, "void twice(const double *x, double *out, long n);")
    assert bad not in lib.path.parents and not any(bad.iterdir())
    x = np.arange(5.0)
    out = np.empty_like(x)
    lib.lib.twice(lib.ffi.from_buffer("double[]", x), lib.ffi.from_buffer("double[]", out), 5)
    assert (out == 2 * x).all()
    mode = stat.S_IMODE(lib.path.parent.parent.parent.parent.stat().st_mode)
    assert mode == 0o700  # the private fallback directory


def test_world_writable_cache_dir_is_refused(tmp_path, monkeypatch):
    _refused(tmp_path, monkeypatch, lambda d: d.chmod(0o777))


def test_group_writable_cache_dir_is_refused(tmp_path, monkeypatch):
    _refused(tmp_path, monkeypatch, lambda d: d.chmod(0o770))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="chown to another user needs root")
def test_cache_dir_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    _refused(tmp_path, monkeypatch, lambda d: (os.chown(d, 65534, 65534), d.chmod(0o700)))


def test_cache_dir_created_private(tmp_path, monkeypatch):
    target = tmp_path / "a" / "b" / "npdynamo"
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(target))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.cache_root() == target
    assert stat.S_IMODE(target.stat().st_mode) == 0o700


def test_default_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("DYNAMO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_cache_dir() == tmp_path / "xdg" / "npdynamo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.default_cache_dir() == Path.home() / ".cache" / "npdynamo"


def test_key_covers_every_component():
    base = {"source": "s", "cdef": "c", "compiler": "gcc", "flags": "-O3", "cpu": "avx2"}
    keys = {cache.make_key(base)} | {cache.make_key(dict(base, **{k: base[k] + "x"}))
                                      for k in base}
    assert len(keys) == len(base) + 1
    assert cache.make_key(dict(base)) == cache.make_key(base)


def test_options_are_part_of_the_key(env, source_file):
    src = source_file.read_text()
    cdef = "void twice(const double *x, double *out, long n);"
    a = build_library(src, cdef, BuildOptions())
    b = build_library(src, cdef, BuildOptions(cflags=("-O2",)))
    assert a.key != b.key and a.path != b.path
