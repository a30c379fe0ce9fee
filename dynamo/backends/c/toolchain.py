"""The C toolchain: which compiler, what it is, what the CPU is, and which flags we pass.

In: the compiler the user asked for (``BuildOptions.compiler``, else ``$CC``, else ``gcc``, else
``cc``) and the requested features (OpenMP, fast-math, extra flags). Out: a `Toolchain` (the
command, its ``--version`` identity, whether it accepts ``-fopenmp``) and the flag list for one
build. Called by `dynamo.backends.c.build`; everything here is cached per process, and the two
facts that need a subprocess (identity, OpenMP support) are also cached on disk next to the kernel
cache, keyed by the compiler executable's stat. That is what lets a new process load a cached
kernel without running the compiler at all (the ≤ 20 ms warm-load target).

Because we compile with ``-march=native``, `cpu_features()` is part of every cache key.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CompilerNotFound",
    "Toolchain",
    "find_toolchain",
    "cpu_features",
    "compile_flags",
    "link_flags",
    "BASE_FLAGS",
]

# -fno-math-errno lets gcc call glibc's vector math (libmvec) without errno bookkeeping; it does
# not change NaN/Inf/signed-zero results, unlike -ffast-math, which is opt-in only.
# -fno-semantic-interposition lets gcc inline/resolve calls between functions of one kernel file.
BASE_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fno-math-errno",
    "-fno-semantic-interposition",
)
OPENMP_FLAG = "-fopenmp"
FASTMATH_FLAG = "-ffast-math"
LINK_FLAGS: tuple[str, ...] = ("-lm",)
CFLAGS_ENV = "DYNAMO_CFLAGS"

# Bump when the meaning of a cached probe changes (so old probe files are ignored).
_PROBE_FORMAT = 1
_PROBE_TIMEOUT_S = 60.0

_OPENMP_PROBE_SOURCE = """\
#include <omp.h>
int npdynamo_probe(void) { int n = 0;
#pragma omp parallel reduction(+:n)
  n += 1;
  return n + omp_get_max_threads(); }
"""


class CompilerNotFound(RuntimeError):
    """No usable C compiler: the C backend cannot build kernels (callers fall back to eager)."""


@dataclass(frozen=True)
class Toolchain:
    """A resolved compiler command and the facts about it that go into cache keys."""

    command: tuple[str, ...]  # argv prefix, e.g. ("/usr/bin/gcc",) or ("/usr/bin/ccache", "gcc")
    identity: str  # first line of `<command> --version`
    openmp: bool  # whether `-fopenmp` compiles and links a small OpenMP program

    @property
    def path(self) -> str:
        return self.command[0]


_lock = threading.Lock()
_toolchains: dict[tuple[tuple[str, ...], str], Toolchain] = {}
_cpu_features: str | None = None


def _requested_command(compiler: str | None) -> tuple[tuple[str, ...], str]:
    """The compiler command words and a phrase saying where the choice came from."""
    if compiler:
        return tuple(shlex.split(compiler)), f"BuildOptions.compiler={compiler!r}"
    env = os.environ.get("CC", "").strip()
    if env:
        return tuple(shlex.split(env)), f"$CC={env!r}"
    for name in ("gcc", "cc"):
        if shutil.which(name):
            return (name,), f"{name!r} on PATH"
    raise CompilerNotFound(
        "No C compiler found: neither 'gcc' nor 'cc' is on PATH and $CC is not set. "
        "Install gcc (e.g. `apt-get install gcc`) or set CC / BuildOptions.compiler to a C "
        "compiler; until then use backend='eager'."
    )


def _resolve(words: tuple[str, ...], origin: str) -> tuple[str, ...]:
    exe = shutil.which(words[0]) if words else None
    if exe is None:
        raise CompilerNotFound(
            f"C compiler {words[0] if words else ''!r} (from {origin}) was not found or is not "
            "executable. Install gcc or point CC / BuildOptions.compiler at a working C "
            "compiler; until then use backend='eager'."
        )
    return (os.path.abspath(exe),) + words[1:]


def _stat_fingerprint(exe: str) -> str:
    st = os.stat(exe)
    return f"{os.path.realpath(exe)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, **kw)


def _probe_identity(command: tuple[str, ...]) -> str:
    try:
        out = _run([*command, "--version"])
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompilerNotFound(
            f"C compiler {command[0]!r} could not be run ({exc}). Install gcc or set CC."
        ) from exc
    lines = (out.stdout or out.stderr).strip().splitlines()
    if out.returncode != 0 or not lines:
        raise CompilerNotFound(
            f"`{shlex.join(command)} --version` failed (exit {out.returncode}): "
            f"{out.stderr.strip()[:500]}. Install gcc or set CC to a working C compiler."
        )
    return lines[0].strip()


def _probe_openmp(command: tuple[str, ...]) -> bool:
    with tempfile.TemporaryDirectory(prefix="npdynamo-omp-") as tmp:
        src = Path(tmp, "probe.c")
        src.write_text(_OPENMP_PROBE_SOURCE)
        argv = [*command, "-fPIC", "-shared", OPENMP_FLAG, str(src), "-o", str(Path(tmp, "p.so"))]
        try:
            return _run(argv).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


def _load_probe(path: Path | None, fingerprint: str) -> dict | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = data.get("format") == _PROBE_FORMAT and data.get("fingerprint") == fingerprint
    return data if ok and isinstance(data.get("identity"), str) else None


def _store_probe(path: Path | None, data: dict) -> None:
    if path is None:
        return
    try:  # atomic: a reader sees the old file or the new one, never half of one
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(data))  # (not json.dump: see cache.py's module docstring)
        os.replace(tmp, path)
    except OSError:
        pass  # the probe cache is an optimisation only


def find_toolchain(compiler: str | None = None, probe_dir: Path | None = None) -> Toolchain:
    """Resolve and describe the compiler; raises `CompilerNotFound` if there is none.

    ``probe_dir`` (a directory inside the kernel cache) keeps the ``--version`` and OpenMP probe
    results across processes, keyed by the compiler executable's path, size, mtime and inode.
    """
    words, origin = _requested_command(compiler)
    command = _resolve(words, origin)
    fingerprint = f"{_stat_fingerprint(command[0])}|{shlex.join(command)}"
    memo_key = (command, fingerprint)
    with _lock:
        cached = _toolchains.get(memo_key)
    if cached is not None:
        return cached
    digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:32]
    probe_path = probe_dir / f"{digest}.json" if probe_dir is not None else None
    data = _load_probe(probe_path, fingerprint)
    if data is None:
        data = {
            "format": _PROBE_FORMAT,
            "fingerprint": fingerprint,
            "identity": _probe_identity(command),
            "openmp": _probe_openmp(command),
        }
        _store_probe(probe_path, data)
    tc = Toolchain(command=command, identity=data["identity"], openmp=bool(data["openmp"]))
    with _lock:
        _toolchains[memo_key] = tc
    return tc


def cpu_features() -> str:
    """A stable description of this CPU (vendor, family/model, ISA flags); cached per process.

    Read from /proc/cpuinfo (cheap, no subprocess); elsewhere falls back to `os.uname()`, which
    is coarser but still separates architectures.
    """
    global _cpu_features
    if _cpu_features is not None:
        return _cpu_features
    wanted = ("vendor_id", "cpu family", "model", "model name", "flags", "features", "cpu part",
              "isa", "CPU implementer", "CPU architecture", "CPU variant")
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if not line.strip():
                    if fields:
                        break  # the first processor block is enough: cores are alike
                    continue
                name, _, value = line.partition(":")
                name = name.strip()
                if name in wanted:
                    value = value.strip()
                    if name.lower() in ("flags", "features"):
                        value = " ".join(sorted(value.split()))
                    fields[name] = value
    except OSError:
        pass
    uname = os.uname()
    fields["machine"] = uname.machine
    if len(fields) == 1:
        fields["sysname"] = f"{uname.sysname} {uname.release}"
    _cpu_features = ";".join(f"{k}={v}" for k, v in sorted(fields.items()))
    return _cpu_features


def compile_flags(
    toolchain: Toolchain, cflags: tuple[str, ...] = (), fastmath: bool = False, openmp: bool = True
) -> tuple[tuple[str, ...], bool]:
    """The flags for one build and whether OpenMP is on (requested and supported).

    Order: base flags, then OpenMP / fast-math, then ``cflags``, then ``$DYNAMO_CFLAGS`` last, so
    a user can override anything from the environment (gcc: the last of conflicting flags wins).
    """
    use_openmp = bool(openmp and toolchain.openmp)
    flags = list(BASE_FLAGS)
    if use_openmp:
        flags.append(OPENMP_FLAG)
    if fastmath:
        flags.append(FASTMATH_FLAG)
    flags.extend(cflags)
    flags.extend(shlex.split(os.environ.get(CFLAGS_ENV, "")))
    return tuple(flags), use_openmp


def link_flags() -> tuple[str, ...]:
    """Flags that must come after the source file on the command line (libraries)."""
    return LINK_FLAGS
