"""A lowered loop is kept in the kernel cache directory (`dynamo.loop_nest.stored`): a new
process that meets the same loop takes its nest and C text from there and lowers nothing (its
first call from the disk cache only loads the kernel). The key holds everything the lowering
read, so a changed function, callee, global number or argument type lowers again; a damaged
record is ignored. Plain Python is the oracle of every result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo import loop_kernels
from dynamo.loop_nest import stored
from dynamo.loop_nest.ir import ArrTy, Ty
from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import sys, numpy as np
sys.path.insert(0, {bench!r})
import dynamo, bench_loops
from dynamo import loop_kernels
if sys.argv[1] == "forbid":  # (the second process must not lower)
    def refuse(*args, **kwargs):
        raise AssertionError("lowered again")
    loop_kernels.lower = refuse
for name in ("cholesky", "forward_substitution", "newton_sqrt"):
    p = {{k.name: k for k in bench_loops.PROGRAMS}}[name]
    args = p.make(p.test if hasattr(p, "test") else p.bench)
    got = dynamo.compile(p.fn, backend="c")(*[a.copy() if isinstance(a, np.ndarray) else a
                                               for a in args])
    want = p.fn(*args)
    assert np.array_equal(got, want), name
    assert loop_kernels.kernels_for(p.fn.__code__), name
print("ok")
"""


def test_a_new_process_takes_the_stored_lowering_and_lowers_nothing(tmp_path):
    code = _RUN.format(bench=str(ROOT / "benchmarks"))
    for mode, seed in (("build", "1"), ("forbid", "2")):
        env = dict(os.environ, PYTHONHASHSEED=seed, DYNAMO_CACHE_DIR=str(tmp_path))
        done = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True,
                              text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-3000:]
    assert list((tmp_path / "loops").glob("*/*.json"))


def helper(x, k=2.0):
    return x * k


def uses_helper(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = helper(a[i])
    return out


def _helper(body):
    """Another ``helper`` of this module: the same name, file and defaults, another body."""
    module = compile(f"def helper(x, k=2.0):\n    return {body}\n", __file__, "exec")
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    return types.FunctionType(code, globals(), "helper", (2.0,))


def _key(fn, statics, types_=None):
    types_ = types_ or {"a": ArrTy(np.dtype(np.float64), 1), "out": ArrTy(np.dtype(np.float64), 1)}
    return stored.lowering_key(fn.__code__, 3, types_, statics, "k", fn.__globals__)


def test_the_key_changes_with_everything_the_lowering_reads():
    base = _key(uses_helper, {"helper": helper, "np": np, "range": range})
    assert base is not None and base == _key(uses_helper, {"helper": helper, "np": np,
                                                           "range": range})
    other = _helper("x + k")
    assert _key(uses_helper, {"helper": other, "np": np, "range": range}) != base  # callee
    other.__code__ = helper.__code__
    other.__defaults__ = (3.0,)
    assert _key(uses_helper, {"helper": other, "np": np, "range": range}) != base  # default
    assert _key(uses_helper, {"helper": helper, "np": np, "range": 7}) != base  # a number
    assert _key(uses_helper, {"helper": helper, "np": np, "range": range},
                {"a": ArrTy(np.dtype(np.int64), 1)}) != base  # a type
    assert _key(helper, {"helper": helper, "np": np, "range": range}) != base  # the code
    # (an object that its module and name do not lead back to has no key: nothing stored)
    assert _key(uses_helper, {"helper": np.vectorize(abs), "np": np}) is None


def test_a_changed_callee_lowers_again_and_keeps_plain_results(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(tmp_path))
    x = np.arange(1.0, 6.0)
    check(uses_helper, x)  # (stored: x * 2.0)
    changed = _helper("x - k")
    monkeypatch.setitem(globals(), "helper", changed)
    dynamo.reset()
    loop_kernels._built.clear()
    check(uses_helper, x)  # (x - 2.0: not the stored lowering of the old body)


def test_a_damaged_record_is_ignored_and_the_loop_lowers_again(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(tmp_path / "c"))
    x = np.arange(1.0, 6.0)
    check(uses_helper, x)
    records = list((tmp_path / "c" / "loops").glob("*/*.json"))
    assert len(records) == 1
    text = records[0].read_text()
    records[0].write_text(text.replace("L_", "M_", 1))  # (its checksum now fails)
    calls = []
    real = loop_kernels.lower
    monkeypatch.setattr(loop_kernels, "lower", lambda *a, **k: calls.append(1) or real(*a, **k))
    dynamo.reset()
    loop_kernels._built.clear()
    check(uses_helper, x)
    assert calls == [1]


@pytest.mark.parametrize("value", [0.1, -0.0, float("inf"), float("nan"), 2**63 - 1, True])
def test_plain_data_round_trips_exactly(value):
    nest_like = (value, [value], {"k": value}, frozenset({"a"}), Ty("float", "np"),
                 np.dtype(np.float64), np.sqrt)
    back = stored._dec(json.loads(json.dumps(stored._enc(nest_like))))
    assert repr(back) == repr(nest_like)
    assert type(back[0]) is type(value) and back[6] is np.sqrt
