"""Loop kernels (dynamo.loop_kernels): a whole loop nest runs as one C function, exact by
deoptimisation. Plain Python is the oracle: return values (type and bits), the arrays'
final contents, the exception (type, message) and the warnings, on the first (compiling) call
and on a cache hit; and each test checks that a kernel was built for the function
(`loop_kernels.kernels_for`), so a test cannot pass by the loop silently staying in Python.
Run on 3.10-3.13 (CI: the whole suite on 3.11 and 3.13, this file in the 3.10 and 3.12 sets)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo import config, loop_kernels
from dynamo.loop_nest.lower import Refuse, lower
from dynamo.loop_nest.ir import ArrTy, Ty

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_loops  # noqa: E402
from support.loops import check, fresh_kernels  # noqa: E402, F401 (a fixture)



# The loop programs (benchmarks/bench_loops.py's, as timed there) ------------------------------

recurrence, crc32 = bench_loops.recurrence, bench_loops.crc32
forward_substitution, newton_sqrt = bench_loops.forward_substitution, bench_loops.newton_sqrt
points_in_circle, stencil_1d = bench_loops.points_in_circle, bench_loops.stencil_1d


def newton_on_elements(a):
    """(Newton on NumPy float64 elements: the local changes from np.float64 to Python float
    nowhere; ``abs`` and ``/`` of NumPy scalars)"""
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        g = a[i]
        while abs(g * g - a[i]) > 1e-12 * a[i]:
            g = 0.5 * (g + a[i] / g)
        out[i] = g
    return out


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("fn, args", [
    (recurrence, (RNG.random(500),)),
    (crc32, (RNG.integers(0, 255, 300),)),
    (forward_substitution, (np.tril(RNG.random((40, 40))) + np.eye(40), RNG.random(40))),
    (points_in_circle, (RNG.random(1000) * 2 - 1, RNG.random(1000) * 2 - 1)),
    (newton_sqrt, (RNG.random(100) * 1e6 + 1e-3,)),
    (newton_on_elements, (RNG.random(100) + 0.5,)),
    (stencil_1d, (RNG.random(50), 20)),
], ids=lambda x: getattr(x, "__name__", ""))
def test_loop_programs_run_as_kernels_with_plain_results(fn, args):
    check(fn, *args)


def test_one_kernel_serves_every_size_and_value():
    compiled = dynamo.compile(recurrence, backend="c")
    for n in (5, 17, 40, 3, 100, 8, 9, 11, 12, 13):
        x = RNG.random(n)
        assert np.array_equal(compiled(x), recurrence(x))
    assert len(loop_kernels.kernels_for(recurrence.__code__)) == 1


# Deoptimisation: the exception or warning comes from Python or NumPy, at the same iteration ----

def divide_after_write(a, z):
    s = 0.0
    for i in range(a.shape[0]):
        a[i] = a[i] * 2
        s += 1.0 / (a[i] - z)   # a Python float: ZeroDivisionError when a[i] == z
    return s


def test_python_float_division_by_zero_raises_after_the_same_writes():
    check(divide_after_write, np.arange(10.0), 3.0 * 2)   # fails at i = 3, after a[3] = 6


def numpy_divide(a):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s += 1.0 / a[i]   # a NumPy scalar: inf and a RuntimeWarning at a[i] == 0
    return s


def test_numpy_scalar_division_by_zero_warns_as_numpy():
    check(numpy_divide, np.array([1.0, 2.0, 0.0, 4.0]))


def out_of_range(a, n):
    for i in range(n):
        a[i] = i
    return a


def test_index_out_of_range_raises_index_error_after_the_writes():
    check(out_of_range, np.zeros(5), 7)


def negative_indices(a):
    for i in range(1, a.shape[0] + 1):
        a[-i] += i
    return a


def test_negative_indices_wrap():
    check(negative_indices, np.zeros(6))


def big_power(k):
    x = 1
    for i in range(k):
        x = x * 3
    return x


def test_python_int_overflow_gives_the_big_int():
    assert check(big_power, 50) == 3 ** 50


def int64_overflow(a):
    s = a[0]
    for i in range(1, a.shape[0]):
        s = s * a[i]
    return s


def test_numpy_int64_overflow_warns_as_numpy():
    check(int64_overflow, np.full(8, 2 ** 20, dtype=np.int64))


def sqrt_of_negative(a):
    t = 0.0
    for i in range(a.shape[0]):
        t += math.sqrt(a[i])
    return t


def test_math_domain_error_raises_value_error():
    check(sqrt_of_negative, np.array([1.0, 4.0, -1.0, 9.0]))


def test_math_functions_have_cpython_bits():
    def f(a):
        t = 0.0
        for i in range(a.shape[0]):
            t += math.exp(a[i]) - math.log(a[i] + 1.0) + math.sin(a[i]) * math.tanh(a[i])
        return t
    check(f, RNG.random(200) * 3)


def float_floor_division(a, b):
    q = 0.0
    for i in range(a.shape[0]):
        q += a[i] // b[i] + a[i] % b[i]
    return q


def test_float_floor_division_and_modulo_follow_python():
    check(float_floor_division, RNG.standard_normal(100) * 10, RNG.standard_normal(100) + 0.1)


def int_division(a):
    q = 0
    for i in range(a.shape[0]):
        q += int(a[i]) // 3 - int(a[i]) % -7 + (-int(a[i])) // 2
    return q


def test_int_floor_division_and_modulo_follow_python():
    check(int_division, RNG.integers(-1000, 1000, 50))


def test_errstate_other_than_default_runs_the_loop_in_python():
    def f(a):
        s = np.float64(0.0)
        for i in range(a.shape[0]):
            s += 1.0 / a[i]
        return s
    a = np.array([1.0, 0.0])
    compiled = dynamo.compile(f, backend="c")
    compiled(np.ones(2))
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            compiled(a)
    with np.errstate(divide="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert compiled(a) == np.inf


# Control flow and types -----------------------------------------------------------------------

def control(a, n):
    total = 0
    j = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        if a[i] > 0.5 and i > 2 or not i:
            total += 1
        elif a[i] < 0.1:
            break
        while j < i and a[j] < 0.9:
            j += 1
    return total, j


def test_break_continue_and_or_while():
    check(control, RNG.random(30), 30)


def returns_inside(a):
    for i in range(a.shape[0]):
        if a[i] < 0:
            return i
    return -1


def test_return_inside_the_loop():
    check(returns_inside, np.array([1.0, 2.0, -3.0, 4.0]))
    check(returns_inside, np.array([1.0, 2.0]))


def tag_changes(a):
    s = 0.0          # a Python float, then a NumPy float64 after the first iteration
    m = 0
    for i in range(a.shape[0]):
        s += a[i]
        m = max(m, i)
    return s, m


@pytest.mark.parametrize("n", [0, 1, 5])
def test_a_local_that_becomes_a_numpy_scalar_keeps_its_type(n):
    result = check(tag_changes, RNG.random(n))
    assert type(result[0]) is (float if n == 0 else np.float64)


def loop_variable_after(n):
    for i in range(n):
        last = i * 2
    return i, last


def test_a_loop_variable_after_the_loop():
    check(loop_variable_after, 4)
    check(loop_variable_after, 0)  # UnboundLocalError, as in Python


def swap_arrays(u, v, steps):
    for t in range(steps):
        for i in range(u.shape[0]):
            v[i] = u[i] + 1.0
        u, v = v, u
    return u, v


def test_swapped_arrays_come_back_as_the_same_objects():
    u, v = np.zeros(4), np.zeros(4)
    out = dynamo.compile(swap_arrays, backend="c")(u, v, 3)
    assert out[0] is v and out[1] is u
    check(swap_arrays, np.zeros(4), np.zeros(4), 3)


def test_read_only_array_raises_as_numpy():
    a = np.zeros(3)
    a.flags.writeable = False
    check(out_of_range, a, 2)


def count_up(x, n):
    for i in range(n):
        x = x + 1
    return x


def test_a_python_int_argument_beyond_int64_runs_the_loop_in_python():
    compiled = dynamo.compile(count_up, backend="c")
    assert compiled(5, 3) == 8
    assert loop_kernels.kernels_for(count_up.__code__)  # (built for ints)
    for big in (2 ** 70, -2 ** 63 - 1, 2 ** 63 - 2):   # (the last overflows inside the kernel)
        result = compiled(big, 3)
        assert type(result) is int and result == big + 3


def test_other_backends_do_not_use_kernels():
    out = dynamo.explain(recurrence, backend="eager")(RNG.random(10))
    assert not any("C loop kernel" in r for r in out.break_reasons)


def test_config_switch_turns_kernels_off(monkeypatch):
    monkeypatch.setattr(config, "loop_kernels", False)
    check(recurrence, RNG.random(10), kernel=False)


# What does not lower, and says why ----------------------------------------------------------

def test_refusals_name_the_construct():
    def f(a, n):
        for i in range(n):
            a[i] = a[:i].mean()
        return a
    code = f.__code__
    from dynamo.bytecode_analysis import code_info
    entry = next(i for i, inst in enumerate(code_info(code).instructions)
                 if inst.name == "GET_ITER")
    with pytest.raises(Refuse, match="not lowered"):
        lower(code, entry, {"a": ArrTy(np.dtype(np.float64), 1), "n": Ty("int")}, {"range": range})


def test_unlowered_loops_keep_todays_treatment():
    def f(a):
        out = []
        for i in range(a.shape[0]):
            out.append(a[i])
        return out
    check(f, RNG.random(5), kernel=False)


# Ctrl-C --------------------------------------------------------------------------------------

def spin(a, n):
    i = 0
    while i < n:
        a[0] = a[0] + 1.0   # (progress, visible afterwards)
        i += 1
    return i


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_ctrl_c_interrupts_a_running_kernel():
    """SIGINT from another thread while the kernel runs (the GIL released): the kernel stops
    at its next loop head, undoing that iteration, and the KeyboardInterrupt is raised. Without
    the poll the kernel would run all its iterations (~10 s) before Python saw the signal."""
    compiled = dynamo.compile(spin, backend="c")
    a = np.zeros(1)
    assert compiled(a, 10) == 10 and a[0] == 10.0
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().ident
    timer = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT))
    a[0] = 0.0
    n = 3 * 10 ** 9
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            compiled(a, n)
    finally:
        timer.cancel()
    assert 0 < a[0] < n and a[0] == int(a[0])
    # the handler in front of Python's is gone again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# Slices and dot products: NumPy's own BLAS, bit for bit --------------------------------------

def _suite_kernel(name):
    return next(k for k in bench_loops.LOOP_KERNELS if k[0] == name)


@pytest.mark.parametrize("name", ["cholesky", "lu", "trisolv"])
@pytest.mark.parametrize("n", [1, 2, 7, 33])
def test_factorisations_and_solves_are_kernels_with_numpys_bits(name, n):
    _, fn, make = _suite_kernel(name)
    check(fn, *make(n))


def dots(a, b, n):
    s = 0.0
    for i in range(n + 1):
        s += np.dot(a[:i], b[:i]) + a[i:] @ b[i:] + np.dot(a[-i:], b[:i])
    return s


def test_dot_of_slices_with_python_bounds():
    a = np.array([-0.0, 1.5, -2.25, 3.0])
    check(dots, a, np.array([1.0, -0.0, 4.0, 0.5]), 3)
    check(dots, RNG.standard_normal(9), RNG.standard_normal(9), 8)


def mismatched(a, b):
    s = 0.0
    for i in range(3):
        s += np.dot(a[:i + 1], b[:i + 2])
    return s


def test_dot_of_different_lengths_raises_value_error():
    check(mismatched, np.ones(5), np.ones(5))


def test_dot_of_a_column_and_a_row():
    def f(A):
        s = 0.0
        for j in range(A.shape[0]):
            s += A[:j, j] @ A[j, :j]
        return s
    check(f, RNG.standard_normal((6, 6)))


# Array statements: the right side in full first, then the store, as NumPy -------------------

@pytest.mark.parametrize("name", ["jacobi_1d", "jacobi_2d", "seidel_2d", "heat_3d"])
@pytest.mark.parametrize("n", [4, 12, 24])
def test_stencils_are_kernels_with_numpys_bits(name, n):
    _, fn, make = _suite_kernel(name)
    check(fn, *make(n))


def overlapping(u, steps):
    for t in range(steps):
        u[1:-1] = u[:-2] + u[2:]      # the right side reads what the store writes
        u[1:] -= 0.5 * u[:-1]
    return u


def test_a_right_side_that_reads_the_target_sees_it_as_it_was():
    check(overlapping, RNG.random(9), 3)


def overflow_midway(u):
    for t in range(3):
        u[:] = u * 1e200
    return u


def test_an_array_statement_that_overflows_warns_after_the_same_writes():
    check(overflow_midway, np.array([1.0, 1e-300, 3.0]))


def shapes_differ(u, v):
    for t in range(2):
        u[1:] = v[:]
    return u


def test_array_statements_of_different_shapes_raise_as_numpy():
    check(shapes_differ, np.zeros(4), np.ones(4))


def two_loops(a, n):
    out = []
    s = 0.0
    for i in range(n):
        s += a[i]
    for i in range(n):
        out.append(a[i])
    return s, out


def test_explain_says_what_became_of_each_loop():
    out = dynamo.explain(two_loops, backend="c")(np.ones(4), 4)
    text = str(out)
    first = two_loops.__code__.co_firstlineno
    assert f"test_loop_kernels.py:{first + 3}: a C loop kernel (two_loops_line{first + 3})" \
        in text
    assert (f"test_loop_kernels.py:{first + 5}: not a C loop kernel (unrolled, or run in "
            "Python): 'out' is a list, not a number or an array") in text
    assert out.result == (4.0, [1.0] * 4)


def test_the_kernel_prints_as_statements_and_c():
    dynamo.compile(recurrence, backend="c")(RNG.random(5))
    (kernel,) = loop_kernels.kernels_for(recurrence.__code__)
    text = kernel.nest.text()
    assert "local y: ndarray[float64, 1d]" in text and "deopt if" in text and "header" in text
    assert "int npd_loop(" in kernel.source and "NPD_STORE(double" in kernel.source


def bool_logic(a):
    flag = False
    count = 0
    for i in range(a.shape[0]):
        big = a[i] > 0.5
        flag = flag ^ (i % 2 == 0) | (i == 3)
        count += flag + (not big)
    return flag, count, big


def test_python_and_numpy_bools_keep_their_types():
    check(bool_logic, RNG.random(7))


def test_fullgraph_leaves_loops_to_the_graph():
    compiled = dynamo.compile(recurrence, backend="c", fullgraph=True)
    x = RNG.random(6)
    assert np.array_equal(compiled(x), recurrence(x))
    assert not loop_kernels.kernels_for(recurrence.__code__)


def for_else_and_chains(a, lo, hi):
    hits = 0
    for i in range(a.shape[0]):
        if lo < a[i] <= hi:
            hits += 1
        if hits > 3:
            break
    else:
        hits = -hits
    return hits


@pytest.mark.parametrize("hi", [0.3, 0.9])
def test_for_else_and_chained_comparisons(hi):
    check(for_else_and_chains, RNG.random(12), 0.1, hi)


GLOBAL_ARRAY = np.arange(4.0)


def reads_a_global_array(n):
    s = 0.0
    for i in range(n):
        s += GLOBAL_ARRAY[i]
    return s


def test_a_global_array_in_the_loop_is_no_internal_error():
    """(An array global was compared with == against the known functions: an internal error.)"""
    out = dynamo.explain(reads_a_global_array, backend="c")(4)
    assert out.result == reads_a_global_array(4)
    assert not out.skipped_frames
    assert any("not a C loop kernel" in loop and "GLOBAL_ARRAY" in loop for loop in out.loops)


def test_frexp_and_ldexp():
    check(newton_sqrt, np.array([4.0, np.inf, 9.0]))   # (frexp(inf): back to Python)


# Random array statements and dot products (a small generator of its own: the loop fuzzer,
# tests/fuzz/loop_gen.py, writes element loops) ---------------------------------------------

def _bound(rng) -> str:
    return rng.choice(["", "1", "-1", "i", "-i - 1", "i + 1", "2", "n"])


def _array_program(seed: int) -> str:
    rng = __import__("random").Random(seed)
    lines = ["def f(u, v, w, n, c):", "    s = 0.0", "    for i in range(n):"]
    for _ in range(rng.randint(1, 3)):
        a, b, c_, d = (_bound(rng) for _ in range(4))
        op = rng.choice(["+", "-", "*", "/"])
        lhs = rng.choice([f"u[{a}:{b}]", f"w[i % w.shape[0], {a}:{b}]", "u[:]"])
        rhs = rng.choice([f"u[{c_}:{d}] {op} v[{c_}:{d}]", f"c {op} v[{a}:{b}]",
                          f"w[{c_}:{d}, 0] {op} 2.0", f"-v[{a}:{b}]", "c"])
        aug = rng.choice(["=", "+=", "*=", "-="])
        lines.append(f"        {lhs} {aug} {rhs}")
        if rng.random() < 0.5:
            lines.append(f"        s += np.dot(u[{a}:{b}], v[{a}:{b}]) + u[{c_}:{d}] @ v[{c_}:{d}]")
    lines.append("    return s")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(40))
def test_random_array_statements_match_numpy(seed, tmp_path):
    import importlib.util
    source = "import numpy as np\n" + _array_program(seed) + "\n"
    path = tmp_path / f"arrays_{seed}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"arrays_{seed}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(seed)
    scale = [1.0, 1e200, 1e-300][seed % 3]
    u, v = rng.standard_normal(6) * scale, rng.standard_normal(6)
    if seed % 5 == 0:
        v[2] = 0.0
    if seed % 7 == 0:
        u[1] = np.inf
    check(module.f, u, v, rng.standard_normal((3, 6)), 4, 1.5, kernel=None)


def test_a_wrapper_of_the_c_backend_asks_for_kernels_by_its_attribute():
    from dynamo.backends.c import compile_graph

    class Wrapper:
        def __init__(self, forward: bool) -> None:
            if forward:
                self.loop_kernels = compile_graph.loop_kernels

        def __call__(self, gm, example_inputs):
            return compile_graph(gm, example_inputs)

    x = RNG.random(8)
    for forward in (False, True):
        dynamo.reset()
        loop_kernels._built.clear()
        assert np.array_equal(dynamo.compile(recurrence, backend=Wrapper(forward))(x),
                              recurrence(x))
        assert bool(loop_kernels.kernels_for(recurrence.__code__)) == forward


def test_a_call_made_during_a_call_gets_buffers_of_its_own():
    """A signal handler or a finalizer may call the same compiled function between the
    wrapper's bytecodes, after the kernel ran and before its results are read back: the
    results must be the outer call's (the wrapper reuses one set of buffers per thread)."""
    compiled = dynamo.compile(tag_changes, backend="c")
    x, other = RNG.random(7), RNG.random(9) + 10.0
    compiled(x)
    (kernel,) = loop_kernels.kernels_for(tag_changes.__code__)
    fn, nested = kernel.fn, []
    # (the wrapper's Python path: the C one keeps everything on its stack)
    kernel._c_call = None
    kernel.entry.python_only = 1

    def then_reenter(*args):
        status = fn(*args)
        if not nested:
            nested.append(None)
            nested.append(compiled(other))
        return status

    kernel.fn = then_reenter
    try:
        assert compiled(x) == tag_changes(x)
    finally:
        kernel.fn, kernel._c_call, kernel.entry.python_only = fn, kernel.entry.run, 0
    assert nested[1] == tag_changes(other)


def shift_through_views(a, b, n):
    for i in range(n):
        a[i + 1] = b[i] + 1.0    # b may be a itself, or a view of it
    return a


@pytest.mark.parametrize("form", ["same", "shifted", "reversed", "strided"])
def test_aliased_arguments_see_each_others_writes(form):
    def args():
        a = np.arange(8.0)
        b = {"same": a, "shifted": a[1:], "reversed": a[::-1], "strided": a[::2]}[form]
        return a, b
    a, b = args()
    expected = shift_through_views(a, b, 3).copy()
    a, b = args()
    got = dynamo.compile(shift_through_views, backend="c")(a, b, 3)
    assert np.array_equal(got, expected)
    assert loop_kernels.kernels_for(shift_through_views.__code__)


_SOURCE_OF_A_KERNEL = """
import hashlib, sys, numpy as np
sys.path.insert(0, {bench!r})
import dynamo, bench_loops
from dynamo.loop_kernels import kernels_for
fn = bench_loops.forward_substitution
dynamo.compile(fn, backend="c")(np.tril(np.ones((5, 5))) + np.eye(5), np.ones(5))
print(hashlib.sha256(kernels_for(fn.__code__)[0].source.encode()).hexdigest())
"""


def test_a_kernels_c_source_is_the_same_in_every_process(tmp_path):
    """The disk cache is keyed by the C text: a text that depended on the order of a set (string
    hashes change from process to process) made a new process build again half the time."""
    code = _SOURCE_OF_A_KERNEL.format(bench=str(Path(bench_loops.__file__).parent))
    digests = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed, DYNAMO_CACHE_DIR=str(tmp_path))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.split()[-1])
    assert len(digests) == 1, digests


# Numbers read as globals --------------------------------------------------------------------

def test_a_number_global_is_a_constant_guarded_on_its_value():
    """``G``/``N`` of the module: literals in the kernel, guarded (a new value recompiles and
    builds a kernel for it), as a global the translator reads."""
    namespace = {"G": 9.81, "N": 3}
    exec("def fall(v, dt):\n"
         "    for i in range(v.shape[0]):\n"
         "        v[i] += G * dt * N\n"
         "    return v\n", namespace)
    fall = namespace["fall"]
    compiled = dynamo.compile(fall, backend="c")
    assert np.array_equal(compiled(np.zeros(4), 0.5), fall(np.zeros(4), 0.5))
    assert len(loop_kernels.kernels_for(fall.__code__)) == 1
    namespace["G"] = 1.62
    assert np.array_equal(compiled(np.zeros(4), 0.5), np.full(4, 1.62 * 0.5 * 3))
    namespace["N"] = 2 ** 70  # (past int64: not lowered, plain Python's big int)
    assert np.array_equal(compiled(np.zeros(4), 0.5), fall(np.zeros(4), 0.5))
    assert len(loop_kernels.kernels_for(fall.__code__)) == 2


# Values whose type is known at run time only ------------------------------------------------

def last_positive_or_half(a):
    last = 0.0
    for i in range(a.shape[0]):
        last = a[i] if a[i] > 0 else 0.5  # (a NumPy float64 or a Python float on the stack)
    return last


@pytest.mark.parametrize("tail", [1.5, -1.5])
def test_a_stack_value_of_either_type_where_paths_join(tail):
    """The join makes the stack slot's type a run-time one: every edge into it writes its
    tag (an edge with a Python float left it unwritten, so the value came out as a NumPy
    float64, or the other way round)."""
    a = np.array([2.0, -1.0, 3.0, tail])
    check(last_positive_or_half, a)


def return_from_inner_loop(A, B, n, s):
    c1 = 0
    if (1 / n) <= n:  # (the loops inside an if statement: the outer one a loop body function)
        for i in range(min(n, 4)):
            for j in range(0, len(B), 2):
                c1 += math.floor(s)
                if A[i, j - 1] < 0:
                    return c1, s
                s = s + 1.0
    return c1, s


@pytest.mark.parametrize("first", [2.0, -1.0])
def test_a_return_in_a_loop_of_a_loop_body_function_is_not_an_internal_error(first):
    """Regression: the body function's ``return`` pops a stand-in for the outer loop's
    iterator that lies under the inner loop's stack; lowering the inner loop read past its
    stack (an IndexError, an internal error, the frame in plain Python). It is refused now."""
    A = np.array([[first, 3.0, 0.0], [-1.5, -0.5, 0.0]])
    with dynamo.config.patch(suppress_errors=False):
        check(return_from_inner_loop, A, np.arange(5.0), 1, 0.0, kernel=None)
