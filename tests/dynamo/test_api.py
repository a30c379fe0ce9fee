"""Public API: compile/optimize/disable/run/reset, backends, errors, explain, logs, debug views."""

import logging
import subprocess
import sys
import textwrap
import warnings

import operator

import numpy as np
import pytest

import dynamo
from dynamo import instructions as ins
from dynamo import _C
from support.oracle import CountingBackend


@pytest.fixture(autouse=True)
def _clean():
    dynamo.reset()
    yield
    dynamo.reset()


def straight_line(x, y):
    a = np.sin(x) * y
    b = a.sum(axis=0) / x.shape[0]
    c = np.maximum(a - b, 0.0) @ np.ones((x.shape[1], 2), dtype=x.dtype)
    return c.astype(np.float32), b


def assert_same(got, expected):
    assert type(got) is type(expected)
    if isinstance(got, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_straight_line_exact_and_compiled_once():
    backend = CountingBackend()
    cf = dynamo.compile(straight_line, backend=backend)
    x = np.random.default_rng(0).standard_normal((5, 3))
    y = np.linspace(0, 1, 3)
    for _ in range(5):
        assert_same(cf(x, y), straight_line(x, y))
    assert len(backend.graphs) == 1
    assert sum(len(backend.ops(i)) for i in range(backend.count)) >= 8
    assert _C.code_stats(straight_line.__code__)[0] >= 4  # cache hits


@pytest.mark.parametrize("change", ["dtype", "ndim", "shape"])
def test_recompile_on_dtype_ndim_shape_change_logs_reason(change, caplog):
    backend = CountingBackend()
    cf = dynamo.compile(lambda x: np.exp(x) + 1, backend=backend)
    x = np.ones((2, 3))
    other = {"dtype": x.astype(np.float32), "ndim": np.ones(6), "shape": np.ones((2, 4))}[change]
    dynamo.set_logs("recompiles")
    logging.getLogger("dynamo").propagate = True
    try:
        with caplog.at_level(logging.INFO, logger="dynamo.recompiles"):
            assert_same(cf(x), np.exp(x) + 1)
            assert_same(cf(other), np.exp(other) + 1)
            assert_same(cf(x), np.exp(x) + 1)  # both versions stay cached
    finally:
        dynamo.set_logs()
    assert len(backend.graphs) == 2
    text = caplog.text
    assert "Recompiling" in text and "guard failed" in text
    assert {"dtype": ".dtype", "ndim": ".shape", "shape": ".shape"}[change] in text


def test_context_manager_captures_unwrapped_functions_and_disable_stops_it():
    backend = CountingBackend()

    def f(x):
        return np.cos(x) * 2

    def g(x):
        return np.tanh(x) - 1

    x = np.arange(4.0)
    with dynamo.optimize(backend):
        assert_same(f(x), np.cos(x) * 2)
        with dynamo.disable():
            assert_same(g(x), np.tanh(x) - 1)
    assert len(backend.graphs) == 1
    assert _C.get_cache_entries(g.__code__) == []
    f(x)  # outside: no capture, no new graph
    assert len(backend.graphs) == 1


def test_disable_as_decorator_inside_compiled_function():
    backend = CountingBackend()

    @dynamo.disable
    def helper(x):
        return np.exp(x)

    def outer(x):
        return helper(x) + 1

    x = np.ones(3)
    assert_same(dynamo.compile(outer, backend=backend)(x), np.exp(x) + 1)
    # outer breaks at the call (helper is disabled: never captured); `+ 1` is the only graph
    assert len(backend.graphs) == 1
    assert [n.target for n in backend.graphs[0].graph.nodes if n.op == "call_function"] == [operator.add]


def test_called_functions_are_inlined_into_the_callers_graph():
    backend = CountingBackend()

    def inner(x):
        return np.sqrt(x) * 3

    def outer(x):
        y = inner(x)
        return inner(y + 1)

    x = np.arange(5.0)
    assert_same(dynamo.compile(outer, backend=backend)(x), outer(x))
    assert len(backend.graphs) == 1  # both calls of inner traced into outer's graph
    sqrt_nodes = [n for n in backend.graphs[0].graph.nodes if n.target is np.sqrt]
    assert len(sqrt_nodes) == 2
    assert _C.get_cache_entries(inner.__code__) == []  # never ran as a frame of its own
    out = dynamo.explain(outer)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0


def test_a_callee_that_cannot_be_inlined_is_compiled_as_its_own_frame():
    backend = CountingBackend()

    def inner(x):
        print(end="")  # not capturable: the call breaks the caller's graph
        return np.sqrt(x) * 3

    def outer(x):
        y = inner(x)
        return inner(y + 1)

    x = np.arange(5.0)
    assert_same(dynamo.compile(outer, backend=backend)(x), outer(x))
    # inner's own frame (its resume function after the print, one version for both calls) and
    # outer's `y + 1` between the two calls
    assert len(backend.graphs) == 2
    out = dynamo.explain(outer)(x)
    assert out.graph_count == 2 and out.graph_break_count >= 2
    assert "print()" in out.break_reasons[0] and __file__ in out.break_reasons[0]


BIAS = np.array([1.0, 2.0, 3.0])
SCALE = 2.5


def uses_globals(x):
    return x * SCALE + BIAS


def test_globals_are_guarded_and_reloaded():
    global SCALE, BIAS
    backend = CountingBackend()
    cf = dynamo.compile(uses_globals, backend=backend)
    x = np.ones(3)
    assert_same(cf(x), x * 2.5 + BIAS)
    saved = BIAS
    try:
        BIAS = np.array([5.0, 5.0, 5.0])  # same dtype/shape: no recompile, new value used
        assert_same(cf(x), x * 2.5 + BIAS)
        assert len(backend.graphs) == 1
        SCALE = 4.0  # Python scalar constant: recompile
        assert_same(cf(x), x * 4.0 + BIAS)
        assert len(backend.graphs) == 2
    finally:
        BIAS, SCALE = saved, 2.5


def test_closures_are_guarded_and_reloaded():
    backend = CountingBackend()

    def make(w, k):
        def f(x):
            return x @ w + k

        return f

    f1 = make(np.eye(2), 1.0)
    f2 = make(np.ones((2, 2)), 1.0)  # same code, same guards on values: shares the entry
    f3 = make(np.eye(2), 2.0)  # different Python constant: new entry
    x = np.arange(4.0).reshape(2, 2)
    for f in (f1, f2, f3):
        assert_same(dynamo.compile(f, backend=backend)(x), f(x))
    assert len(backend.graphs) == 2


def test_generated_code_guards_and_bytecode_can_be_printed():
    cf = dynamo.compile(straight_line)
    x = np.ones((2, 3))
    cf(x, np.ones(3))
    (entry,) = dynamo.cache_entries(straight_line)
    assert "numpy.sin(x)" in entry.graph_code and "def forward" in entry.graph_code
    assert "x.shape == (2, 3)" in entry.guards and "___globals['np'] is" in entry.guards
    assert "ORIGINAL" in entry.bytecode and "TRANSFORMED" in entry.bytecode
    call = ins.call(2)[-1].name  # (this version's spelling of a call: CALL, CALL_FUNCTION)
    assert f"{call} 2" in entry.bytecode.split("TRANSFORMED")[1]
    assert "def ___check_straight_line" in entry.check_fn.source
    assert str(entry)


def test_cache_entry_freed_when_function_deleted():
    import gc
    import weakref

    # A function whose code object only this test holds (a def here would live on in this
    # module's constants); a "<...>" file name would be skipped as generated code.
    src = "def temp(x):\n    return np.exp(x) * 2\n"
    namespace = {"np": np}
    exec(compile(src, "user_temp_module.py", "exec"), namespace)
    temp = namespace.pop("temp")
    dynamo.compile(temp)(np.ones(3))
    (entry,) = _C.get_cache_entries(temp.__code__)
    check_ref = weakref.ref(entry[0])
    graph_ref = weakref.ref(entry[0].graph_module)
    del entry, temp, namespace
    gc.collect()
    assert check_ref() is None and graph_ref() is None


def test_four_threads_get_correct_results():
    import threading

    cf = dynamo.compile(straight_line)
    rng = np.random.default_rng(1)
    inputs = [(rng.standard_normal((4, 3)).astype(dt), rng.standard_normal(3).astype(dt))
              for dt in (np.float64, np.float32, np.float64, np.float32)]
    errors = []

    def work(x, y):
        try:
            for _ in range(200):
                assert_same(cf(x, y), straight_line(x, y))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=args) for args in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(_C.get_cache_entries(straight_line.__code__)) == 2


def test_fullgraph_raises_with_reason_and_location():
    def f(x):
        print("side effect")
        return x + 1

    with pytest.raises(dynamo.FullGraphError, match=r"print\(\).*test_api.py:\d+"):
        dynamo.compile(f, fullgraph=True)(np.ones(2))


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match="known backends: .*eager"):
        dynamo.compile(lambda x: x, backend="nope")


def test_non_callable_raises_type_error():
    with pytest.raises(TypeError, match="expected a function"):
        dynamo.compile(42)
    with pytest.raises(TypeError):
        dynamo.compile(lambda x: x, backend=3.5)


def test_decorator_forms():
    @dynamo.compile
    def f(x):
        return x * 2

    @dynamo.compile(backend="eager", fullgraph=True)
    def g(x):
        return x * 3

    x = np.ones(2)
    assert_same(f(x), x * 2)
    assert_same(g(x), x * 3)
    assert f.__name__ == "f"


def test_register_and_list_backends():
    seen = []

    @dynamo.register_backend("test_recording")
    def recording(gm, example_inputs):
        seen.append([type(a) for a in example_inputs])
        return gm.forward

    try:
        assert "test_recording" in dynamo.list_backends() and "eager" in dynamo.list_backends()
        dynamo.compile(lambda x: x + 1, backend="test_recording")(np.ones(2))
        assert seen == [[np.ndarray]]
        with pytest.raises(ValueError, match="already registered"):
            dynamo.register_backend("test_recording")(recording)
    finally:
        from dynamo.backends import registry

        registry._BACKENDS.pop("test_recording", None)


def test_backend_error_falls_back_with_warning():
    def broken(gm, example_inputs):
        raise RuntimeError("boom")

    cf = dynamo.compile(lambda x: np.exp(x), backend=broken)
    with dynamo.config.patch(emit_warnings=True), pytest.warns(RuntimeWarning, match="boom"):
        assert_same(cf(np.ones(2)), np.exp(np.ones(2)))


def test_internal_errors_raise_when_suppression_is_off():
    def broken(gm, example_inputs):
        raise RuntimeError("boom")

    with dynamo.config.patch(suppress_errors=False):
        with pytest.raises(dynamo.InternalError, match="boom"):
            dynamo.compile(lambda x: np.exp(x), backend=broken)(np.ones(2))


def test_recompile_limit_switches_to_run_only_with_one_warning():
    backend = CountingBackend()

    def f(x):
        return x + 1

    cf = dynamo.compile(f, backend=backend, dynamic=False)  # every length a new version
    with dynamo.config.patch(cache_size_limit=3, emit_warnings=True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(1, 7):
                assert_same(cf(np.ones(n)), np.ones(n) + 1)
            assert_same(cf(np.ones(2)), np.ones(2) + 1)  # cached version still used
    assert len(backend.graphs) == 3
    messages = [str(w.message) for w in caught if "cache_size_limit" in str(w.message)]
    assert len(messages) == 1
    assert "f (" in messages[0] and "test_api.py" in messages[0] and "x.shape ==" in messages[0]
    assert _C.get_code_state(f.__code__) == _C.RUN_ONLY


def test_run_only_mode_never_compiles():
    backend = CountingBackend()

    def f(x):
        return x - 1

    dynamo.compile(f, backend=backend)(np.ones(2))
    runner = dynamo.run(f)
    assert_same(runner(np.ones(2)), np.zeros(2))  # hit
    assert_same(runner(np.ones(3)), np.zeros(3))  # miss: plain Python, no compile
    assert len(backend.graphs) == 1


def test_reset_clears_caches():
    backend = CountingBackend()

    def f(x):
        return x * 5

    cf = dynamo.compile(f, backend=backend)
    cf(np.ones(2))
    dynamo.reset()
    assert _C.get_cache_entries(f.__code__) == []
    cf(np.ones(2))
    assert len(backend.graphs) == 2


def test_explain_reports_graphs_ops_guards_times():
    out = dynamo.explain(straight_line)(np.ones((2, 3)), np.ones(3))
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert len(out.ops_per_graph[0]) >= 8
    assert any("x.shape == (2, 3)" in g for g in out.guards)
    assert out.compile_times[0] > 0
    text = str(out)
    assert "Graph count: 1" in text and "numpy.sin" in text and "Guards:" in text


def test_a_bad_dynamic_argument_is_rejected_clearly():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        dynamo.compile(lambda x: x, dynamic="yes")


def test_set_logs_rejects_unknown_topic():
    with pytest.raises(ValueError, match="known topics"):
        dynamo.set_logs("nonsense")


def test_dynamo_logs_environment_variable_prints_graph_guards_bytecode(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, dynamo
        def f(x):
            return np.exp(x) * 2
        dynamo.compile(f)(np.ones(3))
        dynamo.compile(f)(np.ones(4))
    """))
    env = {"DYNAMO_LOGS": "graph_code,guards,recompiles,bytecode", "PYTHONPATH": ":".join(sys.path)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "[dynamo.graph_code]" in err and "numpy.exp(x)" in err
    assert "[dynamo.guards]" in err and "x.shape == (3,)" in err
    assert "[dynamo.recompiles]" in err and "x.shape == (3,)" in err
    assert "[dynamo.bytecode]" in err and "TRANSFORMED" in err


def test_each_backend_keeps_its_own_versions():
    first, second = CountingBackend(), CountingBackend()

    def f(x):
        return np.exp(x) + 1

    x = np.ones(3)
    dynamo.compile(f, backend=first)(x)
    dynamo.compile(f, backend=second)(x)  # not served by `first`'s version
    dynamo.compile(f, backend=first)(x)  # both cached now
    assert len(first.graphs) == 1 and len(second.graphs) == 1
    assert len(_C.get_cache_entries(f.__code__)) == 2
    assert_same(dynamo.run(f)(x), np.exp(x) + 1)  # run-only: any backend's version
    assert len(first.graphs) == 1 and len(second.graphs) == 1


def test_explain_shows_the_fusion_report_of_the_c_backend():
    def f(x, y):
        return np.sum(np.sqrt(x * x + y * y))

    x = np.random.default_rng(0).standard_normal(100_000)
    out = dynamo.explain(f, backend="c")(x, x)
    assert out.graph_count == 1 and len(out.fusion_reports) == 1
    text = str(out)
    assert "Fusion report, graph 0" in text and "kernel" in text.lower()
    np.testing.assert_allclose(out.result, f(x, x), rtol=1e-12)


def test_the_internal_error_warning_points_at_the_users_call():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("backend bug")

    def f(x):
        return np.sin(x) + 1

    compiled = dynamo.compile(f, backend=broken_backend)
    with dynamo.config.patch(emit_warnings=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_same(compiled(np.ones(3)), np.sin(np.ones(3)) + 1)
    (warning,) = [w for w in caught if "internal error" in str(w.message)]
    assert warning.filename == __file__ and "backend bug" in str(warning.message)


# The wrapper is a C callable: it still behaves like the function it wraps -----------------------


@dynamo.compile
def compiled_at_module_level(x, scale=2.0):
    """Doc of the wrapped function."""
    return np.sin(x) * scale


class _Holder:
    @dynamo.compile
    def method(self, x):
        return np.cos(x) + 1


def test_wrapper_pickles_binds_and_describes_like_the_function():
    import copy
    import inspect
    import pickle

    x = np.ones(3)
    assert pickle.loads(pickle.dumps(compiled_at_module_level)) is compiled_at_module_level
    assert copy.deepcopy(compiled_at_module_level) is compiled_at_module_level
    assert compiled_at_module_level.__name__ == "compiled_at_module_level"
    assert compiled_at_module_level.__doc__ == "Doc of the wrapped function."
    assert str(inspect.signature(compiled_at_module_level)) == "(x, scale=2.0)"
    assert np.array_equal(compiled_at_module_level(x, scale=3.0), np.sin(x) * 3.0)
    assert np.array_equal(_Holder().method(x), np.cos(x) + 1)
    assert np.array_equal(_Holder.method(_Holder(), x), np.cos(x) + 1)
