"""A lowered loop nest as plain data, and the key that says when it may be reused.

In: a `LoopNest` and what its lowering read (the code object, the loop's entry, the locals'
types, the objects its globals name). Out: `lowering_key`, a sha256 over a description of all of
it that does not depend on the process (or None when some object has no such description:
then nothing is stored), and `to_data`/`from_data`, the nest as JSON-able data (dicts, lists,
strings, numbers) and back. `dynamo.loop_kernels` keeps the data in the kernel cache directory
(`backends.c.cache.KernelCache.read_record`), so a new process that meets the same loop skips its
lowering and its C text and loads the built kernel at once (the first call from the disk cache).

What lowering depends on is all in the key, so a stored nest is never stale:

* the code: its bytecode, constants (nested codes described the same way), names, file and
  line table (the IR names source lines);
* each object a global of the loop (or of a function it may inline) names: a module by its
  name; a number by its type and value; a Python function by its module, name, code and
  defaults (numbers by value) and whether it is of the frame's module or a closure; any other
  object by the module and name that lead back to it (``numpy.sqrt``, ``builtins.abs``): an
  object not found again that way has no key;
* the locals' types, the entry, the kernel's name; Python, NumPy and the modules that lower
  and write the loop (`_SOURCES`: a file changed, by its size or its time of last change, is
  another key).

The data is read only from the kernel cache directory, whose safety (owner, permissions) is
checked as for the kernels themselves; it is decoded by `from_data` alone (known types only,
no unpickling), and the C made from it is what gets compiled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from .ir import ArrTy, Exit, LoopNest, Stmt, Ty
from .sites import LoopSite

__all__ = ["lowering_key", "to_data", "from_data", "NotStored"]

#: the modules whose text the lowering and the kernel's C depend on (dynamo/...)
_SOURCES = ("loop_nest", "loop_kernels.py", "backends/c/c_loop_source.py",
            "backends/c/c_loop_runtime.py", "backends/c/c_loop_nest.py")
_CLASSES = {cls.__name__: cls for cls in (Ty, ArrTy, Stmt, Exit, LoopSite)}
_FORMAT = "npdynamo lowered loop 2"
_source_hash: list[str] = []


class NotStored(Exception):
    """Something here has no process-independent description: nothing is stored."""


def _sources() -> str:
    """The modules of `_SOURCES` as they are installed: each file's name, size and time of
    last change (a changed file is another key; read once per process)."""
    if not _source_hash:
        root = Path(__file__).resolve().parents[1]
        parts = []
        for name in _SOURCES:
            path = root / name
            for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
                st = file.stat()
                parts.append(f"{file.name}:{st.st_size}:{st.st_mtime_ns}")
        _source_hash.append(hashlib.sha256("\n".join(parts).encode()).hexdigest())
    return _source_hash[0]


def _const(value: Any) -> Any:
    if isinstance(value, types.CodeType):
        return _code(value)
    if type(value) in (tuple, frozenset):
        items = [_const(v) for v in value]
        return [type(value).__name__, sorted(items, key=repr) if type(value) is frozenset
                else items]
    if value is None or value is Ellipsis or type(value) in (bool, int, float, complex, str,
                                                             bytes):
        return [type(value).__name__, repr(value)]
    raise NotStored(f"a constant of type {type(value).__name__}")


def _code(code: types.CodeType) -> list:
    parts = [code.co_code.hex(), [_const(c) for c in code.co_consts], list(code.co_names),
             list(code.co_varnames), list(code.co_freevars), list(code.co_cellvars),
             code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
             code.co_filename, code.co_name, code.co_firstlineno,
             getattr(code, "co_qualname", ""), code.co_linetable.hex(),
             getattr(code, "co_exceptiontable", b"").hex()]
    return parts


def _found_again(obj: Any) -> bool:
    """`obj` is what its module and name lead to (the same object in another process)."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        name = getattr(obj, "__name__", None)
        if not isinstance(module, str) or not isinstance(name, str):
            return False
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return False
    return found is obj


def _static(obj: Any, frame_globals: dict) -> list:
    if isinstance(obj, types.ModuleType):
        return ["module", obj.__name__]
    if type(obj) in (int, float, bool):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, types.FunctionType):
        defaults = [[type(v).__name__, repr(v)] if type(v) in (int, float, bool) else
                    ["object", type(v).__name__] for v in obj.__defaults__ or ()]
        return ["function", obj.__module__, obj.__qualname__, _code(obj.__code__), defaults,
                obj.__globals__ is frame_globals, obj.__closure__ is not None,
                bool(obj.__kwdefaults__)]
    if _found_again(obj):
        return ["object", type(obj).__module__, type(obj).__qualname__, obj.__module__,
                getattr(obj, "__qualname__", getattr(obj, "__name__", ""))]
    raise NotStored(f"{type(obj).__name__} {obj!r:.40}")


def lowering_key(code: types.CodeType, entry: int, local_types: dict, statics: dict,
                 name: str, frame_globals: dict) -> str | None:
    """The key of the nest `lower` makes from these (see the module docstring), or None."""
    try:
        parts = [_FORMAT, _sources(), sys.version, np.__version__, name, entry, _code(code),
                 sorted([n, str(t)] for n, t in local_types.items()),
                 sorted([n, _static(o, frame_globals)] for n, o in statics.items())]
    except NotStored:
        return None
    blob = json.dumps(parts, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _enc(x: Any) -> Any:
    if x is None or type(x) in (bool, int, str):
        return x
    if type(x) is float:
        return {"f": repr(x)}  # (exactly, NaN and infinities too)
    if type(x) is list:
        return [_enc(v) for v in x]
    if type(x) is tuple:
        return {"t": [_enc(v) for v in x]}
    if type(x) is frozenset:
        return {"s": sorted(_enc(v) for v in x)}
    if type(x) is dict:
        return {"d": [[_enc(k), _enc(v)] for k, v in x.items()]}
    if isinstance(x, np.dtype):
        return {"dtype": x.str}
    if isinstance(x, np.ufunc) and _found_again(x):
        return {"ufunc": [x.__module__, x.__name__]}
    if type(x).__name__ in _CLASSES and type(x) is _CLASSES[type(x).__name__]:
        return {"c": type(x).__name__, "v": [_enc(getattr(x, f.name))
                                             for f in dataclasses.fields(x)]}
    raise NotStored(f"a {type(x).__name__} in the loop nest")


_PLAIN = frozenset({str, int, bool, type(None)})


def _decs(items: list) -> list:
    """`_dec` of each item (a string, an int: as they are, with no call: a first call from the
    disk cache decodes thousands)."""
    return [v if type(v) in _PLAIN else _dec(v) for v in items]


def _dec(x: Any) -> Any:
    kind = type(x)
    if kind in _PLAIN:
        return x
    if kind is list:
        return _decs(x)
    if kind is not dict or len(x) not in (1, 2):
        raise ValueError(f"not a stored loop nest: {x!r:.60}")
    if "t" in x:
        return tuple(_decs(x["t"]))
    if "c" in x:
        return _CLASSES[x["c"]](*_decs(x["v"]))
    if "f" in x:
        return float(x["f"])
    if "s" in x:
        return frozenset(_dec(v) for v in x["s"])
    if "d" in x:
        return {_dec(k): _dec(v) for k, v in x["d"]}
    if "dtype" in x:
        return np.dtype(x["dtype"])
    if "ufunc" in x:
        module, fname = x["ufunc"]
        found = getattr(importlib.import_module(module), fname)
        if not isinstance(found, np.ufunc):
            raise ValueError(f"{module}.{fname} is not a ufunc")
        return found
    raise ValueError(f"not a stored loop nest: {x!r:.60}")


def to_data(nest: LoopNest) -> dict:
    """`nest` as JSON-able data (`NotStored` if it holds something else). The objects of
    `globals_used` are left out (names, and the values of defaults, are kept): `from_data`
    takes them from the statics again."""
    used = [[_enc(k), v if type(v) in (int, float, bool) and isinstance(k, tuple)
             and k[0] == "__defaults__" else None] for k, v in nest.globals_used.items()]
    fields = {f.name: _enc(getattr(nest, f.name)) for f in dataclasses.fields(nest)
              if f.name != "globals_used"}
    return {"format": _FORMAT, "fields": fields, "globals_used": [[k, _enc(v)] for k, v in used]}


def from_data(data: dict, statics: dict) -> LoopNest:
    """The nest `to_data` gave (ValueError if `data` is not one)."""
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ValueError("not a stored loop nest")
    fields = {name: _dec(value) for name, value in data["fields"].items()}
    used = {}
    for key, value in data["globals_used"]:
        key, value = _dec(key), _dec(value)
        used[key] = statics[key] if isinstance(key, str) else value
    return LoopNest(**fields, globals_used=used)
