"""The on-disk cache of built C kernels.

In: a cache key (`make_key` over everything that changes the built object) and, on a miss, a
directory of freshly built files. Out: the path of a validated entry directory. Called only by
`dynamo.backends.c.build`.

Layout (one directory per entry, published atomically)::

    <root>/kernels/<key[:2]>/<key>/kernel.so      the shared object
                                   kernel.c       the C source, kept readable for debugging
                                   kernel_ffi.py  pre-parsed cffi ABI module (cffi out-of-line)
                                   meta.json      key, source hash, sizes, sha256 of each file
                                   verdicts.json  calibration verdicts (`record_verdict`)
    <root>/toolchains/<hash>.json                 compiler --version / OpenMP probe results
    <root>/aliases/<a[:2]>/<a>.json               request key -> full key (load without gcc)
    <root>/loops/<k[:2]>/<k>.json                 records (`read_record`), after two lines (the
    <root>/probes/<k[:2]>/<k>.json                key, the sha256 of the rest): a lowered loop
                                                  nest and its C (`dynamo.loop_nest.stored`);
                                                  the verdict of a probe of NumPy's loops
                                                  (`numpy_loops`)
    <root>/failed/<key>.c                         the source of the last build that failed

Root: ``$DYNAMO_CACHE_DIR``, else ``$XDG_CACHE_HOME/npdynamo``, else ``~/.cache/npdynamo``,
created with mode 0700 (every level below it too). A root, or any directory on the way to an
entry (`checked`), owned by another user or writable by group/others is refused with a
`CacheDirWarning` (anyone who can write there could plant code we would load); this process then
uses a private temporary directory, removed at exit. A plain file where a cache directory
belongs is moved aside (`CorruptCacheEntryWarning`) and the entry rebuilt.

Concurrency: an entry is built in a temporary directory next to its final place and published
with one ``rename`` of the directory. Renaming onto an existing non-empty directory fails, so when
two processes build the same key the first rename wins and the other process uses the winner's
entry. Readers therefore see a complete entry or none. Entries that fail validation (checksum or
size mismatch, missing file, unreadable metadata) are reported with `CorruptCacheEntryWarning`,
moved aside and rebuilt.

Files are written with ``json.dumps`` and no indentation: ``json.dump`` and indented output use
the pure-Python encoder, whose closures are reference cycles, garbage that a user's
``gc.collect()`` would find after every kernel build.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path

from ...diagnostics import diagnose

__all__ = [
    "checked",
    "CacheDirWarning",
    "CorruptCacheEntryWarning",
    "KernelCache",
    "cache_root",
    "default_cache_dir",
    "make_key",
    "file_sha256",
    "ENTRY_FILES",
    "read_verdicts",
    "record_verdict",
]

CACHE_DIR_ENV = "DYNAMO_CACHE_DIR"
# Bump when the entry layout or the meaning of any file in it changes.
CACHE_FORMAT = 1
SO_NAME, SOURCE_NAME, FFI_NAME, META_NAME = "kernel.so", "kernel.c", "kernel_ffi.py", "meta.json"
VERDICTS_NAME = "verdicts.json"
#: Verdicts kept per entry (the oldest go first): one per kernel, layout and thread option.
MAX_VERDICTS = 256
# The files whose checksums meta.json records (the source is covered by the key itself).
ENTRY_FILES = (SO_NAME, FFI_NAME)


class CacheDirWarning(UserWarning):
    """The cache directory is unsafe or unusable; kernels go to a private temporary directory."""


class CorruptCacheEntryWarning(UserWarning):
    """A cache entry failed validation or loading; it is being rebuilt."""


def default_cache_dir() -> Path:
    """Where the cache lives unless ``$DYNAMO_CACHE_DIR`` says otherwise."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "npdynamo"


_NOT_A_DIRECTORY = "it is not a directory"


def _unsafe_reason(path: Path) -> str | None:
    """Why ``path`` must not hold code we load, or None if it is ours and private enough."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return _NOT_A_DIRECTORY
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


_root_lock = threading.Lock()
_roots: dict[str, Path] = {}  # requested dir -> the dir actually used (itself or a private temp)


def _private_tempdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="npdynamo-cache-"))  # mkdtemp creates it 0700
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def cache_root(requested: Path | None = None) -> Path:
    """The directory to use for kernels: ``requested`` (default: `default_cache_dir`) if safe.

    The decision is made once per process per requested directory; a refusal warns once.
    """
    requested = Path(requested) if requested is not None else default_cache_dir()
    memo = str(requested)
    with _root_lock:
        if memo in _roots:
            return _roots[memo]
        try:
            requested.mkdir(mode=0o700, parents=True, exist_ok=True)
            reason = _unsafe_reason(requested)
        except OSError as exc:
            reason = f"it cannot be created or read ({exc.strerror or exc})"
        if reason is None:
            chosen = requested
        else:
            chosen = _private_tempdir()
            diagnose(
                "kernels",
                f"npdynamo: refusing kernel cache directory {requested}: {reason}. Kernels are "
                f"built in the private directory {chosen} for this process only. Fix the "
                f"directory (chown it to yourself, chmod 700) or set {CACHE_DIR_ENV}.",
                CacheDirWarning,
            )
        _roots[memo] = chosen
        return chosen


_private_root: Path | None = None
_warned_dirs: set[str] = set()


def _private_cache_root() -> Path:
    """This process's private cache directory (made on first use, removed at exit)."""
    global _private_root
    with _root_lock:
        if _private_root is None:
            _private_root = _private_tempdir()
        return _private_root


def checked(kcache: "KernelCache", key: str | None = None, alias: str | None = None,
            record: tuple[str, str] | None = None) -> "KernelCache":
    """``kcache``, or a cache in this process's private directory when a directory on the way
    to ``key``'s entry or ``alias``'s record is owned by another user or writable by group or
    others (anyone who can write there could plant code we would load). Warns once per
    directory (`CacheDirWarning`). The root itself was checked by `cache_root`. Paths that
    exist but are not directories are left to `KernelCache.lookup`/`staging_dir`, which move
    them aside."""
    if kcache.root == _private_root:
        return kcache
    paths = [kcache.kernels, kcache.toolchains, kcache.aliases]
    if key is not None:
        entry = kcache.entry_dir(key)
        paths += [entry.parent, entry]
    if alias is not None:
        paths.append(kcache.alias_path(alias).parent)
    if record is not None:  # ((kind, key): `KernelCache.read_record`)
        path = kcache.record_path(*record)
        paths += [path.parent.parent, path.parent]
    for path in paths:
        try:
            reason = _unsafe_reason(path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing, or below a plain file (moved aside when it is used)
        except OSError as exc:
            reason = f"it cannot be read ({exc.strerror or exc})"
        if reason is None or reason == _NOT_A_DIRECTORY:
            continue
        private = _private_cache_root()
        if str(path) not in _warned_dirs:
            _warned_dirs.add(str(path))
            diagnose(
                "kernels",
                f"npdynamo: refusing kernel cache directory {path}: {reason}. Kernels are "
                f"built in the private directory {private} for this process only. Fix the "
                f"directory (chown it to yourself, chmod 700, or remove it) or set "
                f"{CACHE_DIR_ENV}.",
                CacheDirWarning,
            )
        return KernelCache(private)
    return kcache


def _mkdirs(path: Path, base: Path) -> None:
    """Create ``path`` and any missing parents below ``base``, each with mode 0700 (a plain
    ``mkdir(parents=True)`` gives the parents the umask's mode, e.g. group-writable 0775)."""
    missing = []
    p = path
    while p != base and not p.is_dir():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            if not d.is_dir():
                raise


def _reset_roots_for_tests() -> None:
    with _root_lock:
        _roots.clear()


#: the kinds of records (`KernelCache.read_record`): a directory of the root each
RECORD_KINDS = ("loops", "probes")


def make_key(components: dict[str, str]) -> str:
    """sha256 (hex) over a dict of strings: source, cdef, compiler, flags, CPU, versions, ..."""
    parts = dict(components, cache_format=str(CACHE_FORMAT), python=_python_abi())
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _python_abi() -> str:
    impl = sys.implementation
    return f"{impl.name}-{impl.cache_tag}-{getattr(sys, 'abiflags', '')}-{os.uname().machine}"


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


class KernelCache:
    """Entries under one root directory (see the module docstring for the layout)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.kernels = self.root / "kernels"
        self.toolchains = self.root / "toolchains"
        self.failed = self.root / "failed"
        self.aliases = self.root / "aliases"

    def entry_dir(self, key: str) -> Path:
        return self.kernels / key[:2] / key

    # -- reading -------------------------------------------------------------------------------
    def lookup(self, key: str) -> Path | None:
        """The entry directory for ``key`` if it exists and validates, else None.

        An entry that exists but does not validate warns (`CorruptCacheEntryWarning`) and is
        moved aside, so the caller simply rebuilds.
        """
        entry = self.entry_dir(key)
        try:
            st = os.lstat(entry)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            # A plain file (or symlink) where the entry belongs: nothing we wrote. Move it
            # aside, or every build of this key would fail to publish.
            self.discard(entry, _NOT_A_DIRECTORY)
            return None
        problem = self.validate(entry, key)
        if problem is None:
            return entry
        self.discard(entry, problem)
        return None

    def validate(self, entry: Path, key: str) -> str | None:
        """What is wrong with ``entry``, or None if every recorded checksum matches."""
        try:
            meta = json.loads((entry / META_NAME).read_text())
        except (OSError, ValueError) as exc:
            return f"unreadable {META_NAME} ({exc})"
        if not isinstance(meta, dict) or meta.get("key") != key:
            return f"{META_NAME} is for another key"
        for name in ENTRY_FILES:
            record = meta.get("files", {}).get(name, {})
            try:
                size = (entry / name).stat().st_size
                if size != record.get("size"):
                    return f"{name} has {size} bytes, expected {record.get('size')} (truncated?)"
                if file_sha256(entry / name) != record.get("sha256"):
                    return f"{name} checksum mismatch"
            except OSError as exc:
                return f"{name} unreadable ({exc.strerror or exc})"
        return None

    def discard(self, entry: Path, problem: str) -> None:
        """Warn about a bad entry (or a plain file where a cache directory belongs) and move it
        out of the way (another process may be loading it, so it is renamed first: open/mapped
        files stay valid after the directory is removed)."""
        diagnose(
            "kernels",
            f"npdynamo: kernel cache entry {entry} is corrupt ({problem}); moving it aside "
            "and rebuilding it.",
            CorruptCacheEntryWarning,
        )
        trash = entry.with_name(f".trash-{entry.name[:16]}-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.rename(entry, trash)
        except OSError:
            return  # someone else moved or replaced it already
        if os.path.isdir(trash) and not os.path.islink(trash):
            shutil.rmtree(trash, ignore_errors=True)
        else:
            try:
                os.unlink(trash)
            except OSError:
                pass

    # -- writing -------------------------------------------------------------------------------
    def staging_dir(self, key: str) -> Path:
        """A fresh private directory on the same filesystem as the entry, to build into."""
        parent = self.entry_dir(key).parent
        for d in (self.kernels, parent):  # a plain file in the way is moved aside
            if os.path.lexists(d) and not (d.is_dir() and not d.is_symlink()):
                self.discard(d, _NOT_A_DIRECTORY)
        _mkdirs(parent, self.root)
        return Path(tempfile.mkdtemp(dir=parent, prefix=f".tmp-{key[:16]}-"))

    def publish(self, key: str, staging: Path, meta: dict) -> Path:
        """Write meta.json into ``staging`` and rename it to the entry; returns the entry used.

        If another process published the same key first, ours is dropped and theirs is used
        (after validation; a bad one is discarded and ours takes its place).
        """
        files = {name: {"size": (staging / name).stat().st_size,
                        "sha256": file_sha256(staging / name)} for name in ENTRY_FILES}
        meta = dict(meta, key=key, format=CACHE_FORMAT, files=files)
        (staging / META_NAME).write_text(json.dumps(meta, sort_keys=True) + "\n")
        entry = self.entry_dir(key)
        for _attempt in range(3):
            try:
                os.rename(staging, entry)
                return entry
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:  # a plain file appeared where the entry goes
                    self.discard(entry, _NOT_A_DIRECTORY)
                    continue
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
            if self.lookup(entry.name) is not None:  # the other process's entry is good
                shutil.rmtree(staging, ignore_errors=True)
                return entry
        shutil.rmtree(staging, ignore_errors=True)
        raise OSError(f"could not publish kernel cache entry {entry}")

    # -- aliases (lookup without a compiler) ---------------------------------------------------
    def alias_path(self, alias: str) -> Path:
        return self.aliases / alias[:2] / f"{alias}.json"

    def read_alias(self, alias: str) -> dict | None:
        """The record `record_alias` stored for ``alias`` (its full key, ...), or None."""
        try:
            data = json.loads(self.alias_path(alias).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("alias") == alias else None

    def record_alias(self, alias: str, record: dict) -> None:
        """Point ``alias`` at a built entry (atomic; skipped when already up to date)."""
        record = dict(record, alias=alias)
        if self.read_alias(alias) == record:
            return
        path = self.alias_path(alias)
        try:
            _mkdirs(path.parent, self.root)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".alias-", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(record))
            os.replace(tmp, path)
        except OSError:
            pass  # an optimisation only: without it a compiler-less process rebuilds nothing

    def record_path(self, kind: str, key: str) -> Path:
        """Where a record of `kind` (`RECORD_KINDS`) for ``key`` is kept."""
        if kind not in RECORD_KINDS:
            raise ValueError(f"no records of kind {kind!r}")
        return self.root / kind / key[:2] / f"{key}.json"

    def read_record(self, kind: str, key: str) -> str | None:
        """The text `write_record` stored for ``key`` if it is whole (its checksum), or None."""
        try:
            head, digest, payload = self.record_path(kind, key).read_text().split("\n", 2)
        except (OSError, ValueError):
            return None
        if head != key or digest != hashlib.sha256(payload.encode()).hexdigest():
            return None
        return payload

    def write_record(self, kind: str, key: str, payload: str) -> None:
        """Store a record's text (atomic; records are optimisations, so failures pass)."""
        path = self.record_path(kind, key)
        digest = hashlib.sha256(payload.encode()).hexdigest()
        try:
            _mkdirs(path.parent, self.root)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".record-", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{key}\n{digest}\n{payload}")
            os.replace(tmp, path)
        except OSError:
            pass

    def record_failure(self, key: str, source: str) -> Path | None:
        """Keep the source of a failed build where the error message can point to it."""
        try:
            self.failed.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = self.failed / f"{key}.c"
            path.write_text(source)
            return path
        except OSError:
            return None


# -- calibration verdicts -------------------------------------------------------------------------
# Which path (C kernel or NumPy, and how many threads) was faster for a kernel of this entry, as
# measured by the C backend's calibration, so a new process does not measure again. Data only,
# and only a speed hint: not part of the checksummed files; a bad file reads as empty.

_verdicts_lock = threading.Lock()


def _valid_verdict(v: object) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("use_kernel"), bool)
            and type(v.get("threads")) is int and v["threads"] >= 1
            and all(isinstance(v.get(k), float) for k in ("kernel_s", "numpy_s")))


def read_verdicts(entry: Path) -> dict[str, dict]:
    """{verdict key: {"use_kernel", "threads", "kernel_s", "numpy_s"}} stored in ``entry``."""
    try:
        data = json.loads((Path(entry) / VERDICTS_NAME).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return {}
    found = data.get("verdicts")
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and _valid_verdict(v)}


def record_verdict(entry: Path, key: str, verdict: dict) -> None:
    """Add (or replace) one verdict in ``entry`` (atomic replace; errors are ignored: the next
    process measures again)."""
    if not _valid_verdict(verdict):
        raise ValueError(f"not a calibration verdict: {verdict!r}")
    entry = Path(entry)
    with _verdicts_lock:
        verdicts = read_verdicts(entry)
        verdicts.pop(key, None)
        verdicts[key] = verdict
        while len(verdicts) > MAX_VERDICTS:
            del verdicts[next(iter(verdicts))]
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=entry, prefix=".verdicts-", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps({"format": CACHE_FORMAT, "verdicts": verdicts}))
            os.replace(tmp, entry / VERDICTS_NAME)
        except OSError:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
