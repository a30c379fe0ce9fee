"""Compiled functions pickle, and run compiled in other processes (issue 10).

`dynamo.compile`'s wrapper pickles by reference when it is the module attribute of its name
(``@dynamo.compile`` on a module function), and otherwise as "compile this function with these
options" (the function pickled as pickle does it). Compiled versions never travel: a worker
compiles on its first call, and the C backend's workers share the disk cache. Results are
checked against NumPy in the parent.
"""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

import dynamo
from support import pickled_kernels as pk


def test_a_decorated_module_function_pickles_by_reference():
    data = pickle.dumps(pk.decorated)
    assert b"pickled_kernels" in data and len(data) < 120  # a reference, not a function body
    assert pickle.loads(data) is pk.decorated


@pytest.mark.parametrize("options", [
    {}, {"backend": "c", "dynamic": True}, {"backend": "eager", "fullgraph": True},
], ids=["default", "c_dynamic", "fullgraph"])
def test_a_wrapper_pickles_as_compile_with_its_options(options):
    wrapper = dynamo.compile(pk.plain, **options)
    copy = pickle.loads(pickle.dumps(wrapper))
    assert copy is not wrapper and copy._dynamo_orig_fn is pk.plain
    callback = copy._dynamo_callback
    assert callback.fullgraph == options.get("fullgraph", False)
    assert callback.dynamic == options.get("dynamic")
    x = np.linspace(0.0, 1.0, 5)
    np.testing.assert_array_equal(copy(x), pk.plain(x))
    if options.get("backend") == "c":
        from dynamo.backends import lookup_backend
        assert callback.backend is lookup_backend("c")


def test_disable_and_run_wrappers_pickle():
    for make in (dynamo.disable, dynamo.run):
        copy = pickle.loads(pickle.dumps(make(pk.plain)))
        assert copy._dynamo_orig_fn is pk.plain
        assert copy._dynamo_callback is make(pk.plain)._dynamo_callback


def test_a_user_backend_travels_with_the_wrapper():
    wrapper = dynamo.compile(pk.plain, backend=_counting_backend)
    copy = pickle.loads(pickle.dumps(wrapper))
    x = np.ones(3)
    np.testing.assert_array_equal(copy(x), pk.plain(x))


def _counting_backend(gm, example_inputs):
    return gm.forward


@pytest.fixture
def spawn_pool(tmp_path, monkeypatch):
    # spawn: a fresh interpreter per worker (fork would copy the parent's installed hook and
    # caches); a private disk cache shared by both workers
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(tmp_path / "cache"))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        yield pool


def test_compiled_functions_run_in_a_process_pool(spawn_pool):
    xs = [np.linspace(-1.0, 1.0, 50_000) * k for k in range(1, 5)]
    jobs = [(pk.decorated, x) for x in xs] + [(dynamo.compile(pk.plain), x) for x in xs] + \
        [(pk.fused, x) for x in xs]
    results = spawn_pool.starmap(pk.apply, jobs)
    expected = [pk.decorated.__wrapped__(x) for x in xs] + [pk.plain(x) for x in xs] + \
        [pk.fused.__wrapped__(x) for x in xs]
    for (got, compiled), want in zip(results, expected):
        assert compiled
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_dask_map_blocks_on_a_local_cluster():
    distributed = pytest.importorskip("dask.distributed")
    da = pytest.importorskip("dask.array")
    x = np.linspace(0.0, 2.0, 40_000)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        got = da.from_array(x, chunks=10_000).map_blocks(pk.decorated).compute()
    np.testing.assert_array_equal(got, pk.decorated.__wrapped__(x))
