"""Policy of the compile callback: never crash, never change the program (issue 8).

Comes in: user functions compiled through the public API (`dynamo.compile`), the settings in
`dynamo.config`, and the skip rules. Goes out: assertions, with plain Python / NumPy as the
oracle, that dead code still raises and warns, that errors of the user's own code reach the user
unchanged, that settings are validated where they are set, that a failing backend does not
poison other backends, that ``fullgraph=True`` refuses generators, that the skip rules are
configuration, and that compiling leaves no reference cycles behind.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import sysconfig
import textwrap
import traceback
import types
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import config, trace_rules
from support.oracle import CountingBackend


BACKENDS = ["eager", "c"]
N = 20_000  # above the C backend's min_size: its kernels really run


def _fresh(source: str, name: str = "f", filename: str | None = None, glb: dict | None = None):
    """A function with a code object of its own (dies with the function: no shared constants)."""
    _fresh.count = getattr(_fresh, "count", 0) + 1
    filename = filename or f"{__file__[:-3]}_generated_{_fresh.count}.py"
    module = compile(textwrap.dedent(source), filename, "exec")
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    if glb is None:
        glb = {"np": np, "__builtins__": __builtins__}
    return types.FunctionType(code, glb)


# 1. Dead code that raises or warns is kept ------------------------------------------------------


def dead_integer_power(x):
    y = x ** x  # noqa: F841  (unused on purpose: it raises for negative integers)
    return x + 1


def dead_log(x):
    np.log(x)
    return x * 2


def dead_division(x):
    x / 0.0
    return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_integer_power_still_raises(backend):
    x = np.arange(-N // 2, N // 2)
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        dead_integer_power(x)
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        dynamo.compile(dead_integer_power, backend=backend)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_log_still_raises_under_the_callers_errstate(backend):
    x = np.linspace(-1.0, 1.0, N)
    compiled = dynamo.compile(dead_log, backend=backend)
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid value encountered in log"):
            compiled(x)
    with np.errstate(all="ignore"):  # the same compiled version, now silent as in NumPy
        np.testing.assert_array_equal(compiled(x), x * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_division_by_zero_still_warns(backend):
    x = np.linspace(-1.0, 1.0, N)
    compiled = dynamo.compile(dead_division, backend=backend)
    for _ in range(2):  # first call (compiles) and a cached call
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(all="warn"):
                np.testing.assert_array_equal(compiled(x), x - 1)
        assert [str(w.message) for w in caught] == ["divide by zero encountered in divide"]


def test_dead_views_and_integer_arithmetic_are_still_removed():
    backend = CountingBackend()

    def f(x):
        v = x.reshape(2, -1)  # noqa: F841
        w = x[1:3] * 2 + x[0]  # noqa: F841  (int64 arrays: wraps silently, cannot warn)
        return np.sin(x)

    dynamo.compile(f, backend=backend)(np.arange(8))
    nodes = backend.graphs[0].graph.nodes
    ops = [n.target for n in nodes if n.op in ("call_function", "call_method")]
    assert ops == [np.sin]


# 2. Errors of the user's own code reach the user ------------------------------------------------

USER_ERRORS = {
    "invert_float": "def f(x):\n    a = ~0.5\n    return x\n",
    "str_plus_int": "def f(x):\n    a = 'a' + 1\n    return x\n",
    "len_of_int": "def f(x):\n    a = len(3)\n    return x\n",
    "bad_format_spec": "def f(x):\n    a = f'{0.5:d}'\n    return x\n",
    "index_error": "def f(x):\n    a = [1, 2][5]\n    return x\n",
    "key_error": "def f(x):\n    a = {'a': 1}['b']\n    return x\n",
    "unhashable_key": "def f(x):\n    a = {[1]: 2}\n    return x\n",
    "call_an_int": "def f(x):\n    a = 3\n    return a()\n",
    "iterate_an_int": "def f(x):\n    for i in 3:\n        pass\n    return x\n",
    "missing_numpy_attr": "def f(x):\n    return np.no_such_function(x)\n",
    "attribute_of_constant": "def f(x):\n    return (3).no_such_attribute\n",
    "name_error": "def f(x):\n    return undefined_name + x\n",
    "unpack_mismatch": "def f(x):\n    a, b = (1, 2, 3)\n    return x\n",
    "failing_assert": "def f(x):\n    assert x.ndim == 2, 'need a matrix'\n    return x\n",
    "raise_statement": "def f(x):\n    raise ValueError('bad input')\n",
    "len_of_0d": "def f(x):\n    return len(x.sum())\n",
    "isinstance_bad_class": "def f(x):\n    return isinstance(x, 3)\n",
}


def _outcome(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return type(exc), str(exc), (tb.filename, tb.lineno, tb.line)
    return None


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("case", sorted(USER_ERRORS))
def test_user_errors_propagate_unchanged(case, fullgraph):
    fn = _fresh(USER_ERRORS[case])
    expected = _outcome(fn, np.ones(3))
    assert expected is not None
    with config.patch(suppress_errors=False), warnings.catch_warnings():
        warnings.simplefilter("error")  # no "internal error" warning either
        actual = _outcome(dynamo.compile(fn, fullgraph=fullgraph), np.ones(3))
    assert actual == expected  # type, message, and the user's file:line as the last frame


def test_user_error_is_recorded_as_the_reason():
    fn = _fresh(USER_ERRORS["invert_float"])
    with config.patch(suppress_errors=False):
        out = dynamo.explain(fn)
        with pytest.raises(TypeError, match="bad operand type for unary ~"):
            out(np.ones(3))


def test_constant_computation_that_warns_is_left_to_numpy():
    def f(x):
        return x + np.float64(1.0) / np.float64(0.0)

    x = np.ones(3)
    for _ in range(2):  # the warning is NumPy's, on every call: not baked in at trace time
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(dynamo.compile(f)(x), x + np.inf)
        assert [str(w.message) for w in caught] == ["divide by zero encountered in scalar divide"]


# 3. Settings are validated where they are set ---------------------------------------------------


@pytest.mark.parametrize("name, value, error, words", [
    ("cache_size_limit", "8", TypeError, "an int >= 1"),
    ("cache_size_limit", -1, ValueError, "an int >= 1"),
    ("cache_size_limit", 0, ValueError, "an int >= 1"),
    ("cache_size_limit", True, TypeError, "an int >= 1"),
    ("cache_size_limit", 2.5, TypeError, "an int >= 1"),
    ("max_instructions", None, TypeError, "an int >= 1"),
    ("suppress_errors", 0, TypeError, "True or False"),
    ("suppress_errors", "no", TypeError, "True or False"),
    ("skip_dirs", "/tmp", TypeError, "tuple of directory paths"),
    ("include_dirs", (3,), TypeError, "directory paths"),
    ("skip_files", "<*>", TypeError, "tuple of fnmatch patterns"),
])
def test_config_rejects_bad_values_where_they_are_set(name, value, error, words):
    before = getattr(config, name)
    with pytest.raises(error, match=rf"dynamo\.config\.{name}: .*{words}"):
        setattr(config, name, value)
    with pytest.raises(error, match=rf"dynamo\.config\.{name}: .*{words}"):
        with config.patch(**{name: value}):
            pass
    assert getattr(config, name) == before


def test_config_accepts_good_values_and_patch_restores_them():
    with config.patch(cache_size_limit=np.int64(3), suppress_errors=False,
                      include_dirs=["relative/dir"]):
        assert config.cache_size_limit == 3 and type(config.cache_size_limit) is int
        assert config.suppress_errors is False
        assert config.include_dirs == (os.path.abspath("relative/dir"),)
    assert config.cache_size_limit == 8 and config.suppress_errors is True


def test_config_patch_validates_everything_before_changing_anything():
    with pytest.raises(ValueError):
        with config.patch(suppress_errors=False, cache_size_limit=-1):
            pass
    assert config.suppress_errors is True


def test_config_unknown_option_is_an_error_with_a_suggestion():
    with pytest.raises(AttributeError, match=r"no option 'cache_size_limt'; did you mean "
                       r"'cache_size_limit'\?.*known options: cache_size_limit"):
        config.cache_size_limt = 3
    with pytest.raises(AttributeError, match="did you mean 'suppress_errors'"):
        with config.patch(supress_errors=False):
            pass
    assert not hasattr(config, "cache_size_limt")


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMO_")}
    environ.update(env, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=120)


@pytest.mark.parametrize("var, value, words", [
    ("DYNAMO_CACHE_SIZE_LIMIT", "abc", "an int >= 1"),
    ("DYNAMO_CACHE_SIZE_LIMIT", "-2", "an int >= 1"),
    ("DYNAMO_SUPPRESS_ERRORS", "maybe", "0/1, true/false"),
])
def test_bad_environment_variable_fails_import_naming_it(var, value, words):
    done = _run_python("import dynamo", **{var: value})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ValueError: environment variable {var}={value!r} is invalid")
    assert words in last and f"unset {var}" in last


def test_environment_variables_set_the_defaults():
    done = _run_python("import dynamo; c = dynamo.config; "
                       "print(c.cache_size_limit, c.suppress_errors, c.max_instructions)",
                       DYNAMO_CACHE_SIZE_LIMIT=" 3", DYNAMO_SUPPRESS_ERRORS="off",
                       DYNAMO_MAX_INSTRUCTIONS="50")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "False", "50"]


# 4. A failing backend does not poison other backends --------------------------------------------


def test_backend_failure_is_remembered_per_backend():
    calls = []

    def broken(gm, example_inputs):
        calls.append(gm)
        raise RuntimeError("boom")

    def f(x):
        return np.exp(x) + 1

    x = np.ones(4)
    with config.patch(emit_warnings=True), pytest.warns(RuntimeWarning, match="boom"):
        np.testing.assert_array_equal(dynamo.compile(f, backend=broken)(x), f(x))
    good = CountingBackend()
    np.testing.assert_array_equal(dynamo.compile(f, backend=good)(x), f(x))
    assert good.count == 1
    with config.patch(emit_warnings=True), warnings.catch_warnings():
        warnings.simplefilter("error")  # remembered: no second attempt, no second warning
        np.testing.assert_array_equal(dynamo.compile(f, backend=broken)(x), f(x))
        np.testing.assert_array_equal(dynamo.compile(f, backend=good)(x), f(x))
    assert len(calls) == 1 and good.count == 1
    dynamo.reset()  # forgets the failure: the broken backend is tried again
    with config.patch(emit_warnings=True), pytest.warns(RuntimeWarning, match="boom"):
        dynamo.compile(f, backend=broken)(x)
    assert len(calls) == 2


# 5. fullgraph=True refuses generators and coroutines --------------------------------------------


def gen(x):
    yield np.sin(x)


async def coro(x):
    return np.sin(x)


async def agen(x):
    yield np.sin(x)


@pytest.mark.parametrize("fn, kind", [(gen, "a generator"), (coro, "a coroutine"),
                                      (agen, "an async generator")])
def test_fullgraph_refuses_generators_and_coroutines_at_wrap_time(fn, kind):
    with pytest.raises(dynamo.FullGraphError, match=rf"{fn.__name__} .* is {kind} function"):
        dynamo.compile(fn, fullgraph=True)
    with pytest.raises(dynamo.FullGraphError, match=kind):
        dynamo.compile(fullgraph=True)(fn)
    import functools

    with pytest.raises(dynamo.FullGraphError, match=kind):
        dynamo.compile(functools.partial(fn, 1.0), fullgraph=True)
    with pytest.raises(dynamo.FullGraphError, match=kind):
        dynamo.optimize("eager", fullgraph=True)(fn)
    dynamo.compile(fn)  # without fullgraph: wrapped, runs uncompiled as documented


def test_generators_still_run_without_fullgraph():
    assert [float(v) for v in dynamo.compile(gen)(0.0)] == [0.0]


_UNCAPTURABLE = """
def f(x):
    out.append(1)
    return eval("np.sin(x) + 1")   # (reads its locals by name: the frame is never split)
"""


@pytest.mark.parametrize("fullgraph_first", [False, True])
def test_fullgraph_raises_for_code_a_compile_without_fullgraph_could_not_capture(
        fullgraph_first):
    """A compile without fullgraph marks a frame it cannot capture at all SKIP (the hook then
    never asks Python about it); fullgraph=True must still raise for it, whichever wrapper was
    made or called first, and the plain compile keeps running it unmodified."""
    out = []
    f = _fresh(_UNCAPTURABLE, glb={"np": np, "out": out, "__builtins__": __builtins__})
    x = np.ones(3)
    strict = dynamo.compile(f, fullgraph=True) if fullgraph_first else None
    loose = dynamo.compile(f)
    np.testing.assert_array_equal(loose(x), np.sin(x) + 1)
    strict = strict or dynamo.compile(f, fullgraph=True)
    for _ in range(2):
        with pytest.raises(dynamo.FullGraphError, match="could not be captured as one graph"):
            strict(x)
        np.testing.assert_array_equal(loose(x), np.sin(x) + 1)
    assert out == [1] * 3  # a fullgraph call raises before the function runs
    assert dynamo.cache_entries(f) == []


_UNCAPTURABLE_EVAL = """
def f(x):
    return eval("np.sin(x) + 1")   # reads its locals by name: never split, never captured
"""


@pytest.mark.parametrize("order", ["loose_first", "strict_scope_made_first"])
def test_fullgraph_with_block_raises_for_code_an_earlier_compile_marked_skip(order):
    f = _fresh(_UNCAPTURABLE_EVAL, filename=__file__)
    x = np.ones(3)
    strict = dynamo.optimize("eager", fullgraph=True) if order != "loose_first" else None
    with dynamo.optimize("eager"):
        np.testing.assert_array_equal(f(x), np.sin(x) + 1)  # not capturable: runs plainly
    strict = strict or dynamo.optimize("eager", fullgraph=True)
    for _ in range(2):
        with pytest.raises(dynamo.FullGraphError, match="could not be captured as one graph"):
            with strict:
                f(x)
        with dynamo.optimize("eager"):  # the loose scope still runs it unmodified
            np.testing.assert_array_equal(f(x), np.sin(x) + 1)


# 6. Skip rules are configuration -----------------------------------------------------------------


def _function_in(directory, name="f"):
    return _fresh(f"def {name}(x):\n    return np.sin(x) * 2\n", name=name,
                  filename=os.path.join(str(directory), "mod.py"))


def test_skip_dirs_and_include_dirs_decide(tmp_path):
    x = np.ones(3)
    inner = tmp_path / "inner"
    backend = CountingBackend()
    with config.patch(skip_dirs=config.skip_dirs + (str(tmp_path),)):
        dynamo.compile(_function_in(tmp_path), backend=backend)(x)
        assert backend.count == 0  # skipped
        with config.patch(include_dirs=config.include_dirs + (str(inner),)):
            dynamo.compile(_function_in(inner), backend=backend)(x)
            assert backend.count == 1  # the more specific include wins
    dynamo.compile(_function_in(tmp_path), backend=backend)(x)
    assert backend.count == 2  # a fresh code object, the default rules: captured


def test_skip_files_and_include_files_patterns():
    x = np.ones(3)
    backend = CountingBackend()
    dynamo.compile(_fresh("def f(x):\n    return x * 2\n", filename="<generated>"),
                   backend=backend)(x)
    assert backend.count == 0  # generated code is skipped by default
    with config.patch(include_files=config.include_files + ("<generated>",)):
        dynamo.compile(_fresh("def f(x):\n    return x * 2\n", filename="<generated>"),
                       backend=backend)(x)
    assert backend.count == 1
    with config.patch(skip_files=config.skip_files + ("*/skip_me_*.py",)):
        dynamo.compile(_fresh("def f(x):\n    return x * 2\n", filename="/tmp/skip_me_1.py"),
                       backend=backend)(x)
    assert backend.count == 1


def test_cpython_test_package_can_be_captured_by_configuration():
    test_dir = os.path.join(sysconfig.get_paths()["stdlib"], "test")
    fn = _function_in(test_dir)
    assert "dynamo.config.skip_dirs" in trace_rules.skip_reason(fn.__code__)
    backend = CountingBackend()
    with config.patch(include_dirs=config.include_dirs + (test_dir,)):
        assert trace_rules.skip_reason(fn.__code__) is None
        dynamo.compile(fn, backend=backend)(np.ones(3))
    assert backend.count == 1
    assert trace_rules.skip_reason(os.path.join.__code__) is not None  # rest of the stdlib
    assert trace_rules.skip_reason(np.lib.format.read_magic.__code__) is not None  # NumPy


# 7. No reference cycles left behind --------------------------------------------------------------

CYCLE_CASES = {
    "captured": ("eager", "def f(x):\n    y = np.sin(x) * 2\n    return y + x.sum()\n"),
    "c_kernels": ("c", "def f(x):\n    y = np.exp(x) * 2 - x\n    return np.tanh(y) + y.sum()\n"),
    "not_captured": ("eager", "def f(x):\n    print(end='')\n    return x + 1\n"),
    "user_error": ("eager", "def f(x):\n    a = ~0.5\n    return x\n"),
    "recompiled": ("eager", "def f(x):\n    return np.cos(x) - 1\n"),
}


def _compile_and_drop(scope, source: str) -> None:
    fn = _fresh(source)
    compiled = scope(fn)
    for n in (N, N + 1):
        try:
            compiled(np.ones(n))
        except TypeError:
            pass


@pytest.mark.parametrize("case", sorted(CYCLE_CASES))
def test_compiling_leaves_no_reference_cycles(case):
    """Exactly: with the collector off, compile and call a fresh function (twice: two versions),
    drop it (its code object, cache entries, graphs and guards die), and count what
    `gc.collect()` finds: nothing, because everything was freed by reference counting. One
    capture scope (`dynamo.optimize`) made during the warm-up is reused, so what is measured is
    compiling, not creating scopes."""
    backend, source = CYCLE_CASES[case]
    scope = dynamo.optimize(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compile_and_drop(scope, source)  # warm-up: imports, lazily built tables
        gc.collect()
        gc.disable()
        try:
            _compile_and_drop(scope, source)
            found = gc.collect()
        finally:
            gc.enable()
    assert found == 0
