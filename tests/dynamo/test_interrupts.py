"""A KeyboardInterrupt during a compile reaches the user and leaves nothing behind (issue 8).

Ctrl-C can land anywhere in npdynamo's own work: in the compile lock, the translator, a backend,
a weakref callback of a graph that dies while compiling or in `dynamo.reset()`. Wherever it
lands, the caller gets the KeyboardInterrupt (never "Exception ignored" through
``sys.unraisablehook``), capture is off afterwards, the code is not marked failed or skip, and
the next call compiles. The first tests raise the interrupt at each of these places; the last
one sends real SIGINTs (default handler) to a subprocess that compiles and resets in a loop.
Oracle: plain Python, where every interrupt reaches the program.
"""

from __future__ import annotations

import ast
import gc
import io
import subprocess
import sys
import types
import weakref

import numpy as np
import pytest

import dynamo
from dynamo import _C, convert_frame
from support.hooked import GraphRuns
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)
from support.profiling import python_frames_during


@pytest.fixture
def unraisable(monkeypatch):
    reports = []
    monkeypatch.setattr(sys, "unraisablehook", reports.append)
    return reports


def three_ops(x):
    return np.sin(x) * 2 + 1


def _capture_is_off():
    state = _C.hook_state()
    return (_C.get_eval_frame() is None and state["active_scopes"] == 0
            and not state["installed"] and not convert_frame.compile_lock._is_owned())


def _interrupt_at(where, backend, monkeypatch):
    """Arm one KeyboardInterrupt in the next compile, at `where`."""
    if where == "backend":
        backend.interrupt = True
    elif where == "translator":
        trace_frame = convert_frame.trace_frame
        armed = [True]

        def interrupting(*args, **kwargs):
            if armed.pop() if armed else False:
                raise KeyboardInterrupt
            return trace_frame(*args, **kwargs)
        monkeypatch.setattr(convert_frame, "trace_frame", interrupting)
    elif where == "compile_lock":  # (the hook's acquire, before the callback runs)
        real_lock = convert_frame.compile_lock
        armed = [True]

        class InterruptedLock:
            def acquire(self):
                if armed.pop() if armed else False:
                    raise KeyboardInterrupt
                return real_lock.acquire()

            def release(self):
                real_lock.release()
        _C.set_compile_lock(InterruptedLock())  # (put back by the restore_lock fixture)
    elif where == "weakref_callback":  # (Ctrl-C in a callback of something dying meanwhile)
        backend.doomed = _doomed()


def _doomed():
    """An object whose weakref callback raises KeyboardInterrupt when it dies (what a signal
    handler does when SIGINT arrives while the callback runs)."""

    class Doomed:
        pass

    def interrupt(ref):
        raise KeyboardInterrupt

    doomed = Doomed()
    doomed.ref = weakref.ref(doomed, interrupt)  # (dies with it: the callback still runs)
    return doomed


class BackendKillingDoomed(GraphRuns):
    """Also drops ``doomed`` (it dies inside the compile)."""

    doomed = None

    def __call__(self, gm, example_inputs):
        self.doomed = None
        return super().__call__(gm, example_inputs)


@pytest.fixture
def restore_lock():
    previous = convert_frame.compile_lock
    yield
    _C.set_compile_lock(previous)


WHERE = ["compile_lock", "translator", "backend", "weakref_callback"]


@pytest.mark.parametrize("scope", ["compile", "optimize"])
@pytest.mark.parametrize("where", WHERE)
def test_keyboard_interrupt_while_compiling_reaches_the_caller(where, scope, monkeypatch,
                                                               unraisable, restore_lock):
    backend = BackendKillingDoomed()
    context = dynamo.optimize(backend)
    compiled = dynamo.compile(three_ops, backend=backend)

    def call(x):
        if scope == "compile":
            return compiled(x)
        with context:
            return three_ops(x)

    x = np.linspace(0, 1, 5)
    _interrupt_at(where, backend, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        call(x)
    assert unraisable == []
    assert _capture_is_off()
    code = three_ops.__code__
    assert _C.get_code_state(code) == _C.DEFAULT and _C.get_cache_entries(code) == []
    assert code not in compiled._dynamo_callback.failed
    assert backend.counts == ((1, 0) if where == "weakref_callback" else (0, 0))
    compiles = backend.compiles
    # The next call compiles; the one after runs the cached version.
    for runs in (1, 2):
        assert np.array_equal(call(x), three_ops(x))
        assert backend.counts == (compiles + 1, runs)
    assert len(_C.get_cache_entries(code)) == 1 and unraisable == []
    assert _capture_is_off()


def test_keyboard_interrupt_in_a_weakref_callback_during_reset_reaches_the_caller(unraisable):
    """`dynamo.reset()` frees the compiled graphs, whose weakref callbacks may be where Ctrl-C
    lands: the caller of reset() gets the KeyboardInterrupt, and the reset is complete."""
    doomed = [_doomed()]

    def backend(gm, example_inputs):
        held = doomed.pop()  # (dies with the compiled version, in reset())

        def run(*args):
            return held and gm.forward(*args)
        return run

    compiled = dynamo.compile(three_ops, backend=backend)
    x = np.linspace(0, 1, 5)
    assert np.array_equal(compiled(x), three_ops(x))
    assert len(_C.get_cache_entries(three_ops.__code__)) == 1
    with pytest.raises(KeyboardInterrupt):
        dynamo.reset()
    assert unraisable == []
    assert _C.get_cache_entries(three_ops.__code__) == [] and _capture_is_off()
    dynamo.reset()  # (nothing left to free: no interrupt)


def test_other_unraisable_reports_during_a_compile_still_reach_the_hook(unraisable):
    """Only interrupts are raised: an ordinary exception in a weakref callback that runs while
    compiling is reported, as without npdynamo."""

    class Dying:
        pass

    def failing(ref):
        raise ValueError("from a weakref callback")

    def backend(gm, example_inputs):
        dying = Dying()
        dying.ref = weakref.ref(dying, failing)
        del dying
        return gm.forward

    x = np.ones(3)
    assert np.array_equal(dynamo.compile(three_ops, backend=backend)(x), three_ops(x))
    assert [type(r.exc_value) for r in unraisable] == [ValueError]
    assert len(_C.get_cache_entries(three_ops.__code__)) == 1


# ---- deaths in the program's own code -------------------------------------------------------
# npdynamo's objects (cache entries, graphs and their nodes, generated code, callbacks) also die
# outside the compile and reset(): when the program drops a compiled function, its backend, or
# a cycle holding them. No Python code may run there (fx/weak.py): a Ctrl-C would land in it and
# be reported as unraisable instead of raised (the storm below lost one that way, in a graph's
# WeakKeyDictionary callback). ``sys.setprofile`` sees every Python frame that starts.

def breaks_once(x):
    y = np.sin(x) * 2
    print(end="", file=_SINK)
    return y + 1


_SINK = io.StringIO()


def test_a_dropped_backend_and_what_it_compiled_die_without_running_python():
    class Backend:
        def __call__(self, gm, example_inputs):
            return gm.forward

    backend = Backend()
    compiled = dynamo.compile(breaks_once, backend=backend)
    x = np.linspace(0, 1, 5)
    for _ in range(2):
        assert np.array_equal(compiled(x), breaks_once(x))
    assert _C.get_cache_entries(breaks_once.__code__)
    alive = weakref.ref(backend)
    held = [compiled, backend]
    del compiled, backend
    assert python_frames_during(held.clear) == []
    # the callback died with its backend and took its entries along (C: _C.drop_owner)
    assert alive() is None and _C.get_cache_entries(breaks_once.__code__) == []


def test_a_dropped_compiled_function_in_a_cycle_dies_without_running_python():
    # (a code object of its own, in this file: code compiled from a string is not captured)
    namespace = {"np": np, "_SINK": io.StringIO()}
    namespace["f"] = types.FunctionType(breaks_once.__code__.replace(), namespace)  # (a cycle)
    x = np.linspace(0, 1, 5)
    with dynamo.optimize("eager"):
        for _ in range(2):
            namespace["f"](x)
    code = weakref.ref(namespace["f"].__code__)
    assert _C.get_cache_entries(code())
    held = [namespace]
    del namespace

    def drop():
        held.clear()
        gc.collect()
    assert python_frames_during(drop) == []
    assert code() is None


def test_a_marked_array_dies_without_running_python():
    arr = np.ones(4)
    dynamo.mark_dynamic(arr, 0)
    held = [arr]
    del arr
    assert python_frames_during(held.clear) == []


# ---- real SIGINTs --------------------------------------------------------------------------

#: Compiles and resets in a loop while a thread interrupts it with SIGINT (the default
#: handler: KeyboardInterrupt) and waits for each interrupt to arrive before sending the next;
#: it aims at phases (reset, compile, cached run, dropping a backend) or anywhere, a random
#: delay after the main thread entered them. Prints a summary dict.
STORM = r'''
import io, random, signal, sys, threading, time
import numpy as np
import dynamo
from dynamo import _C

DURATION, SEED = float(sys.argv[1]), int(sys.argv[2])
# Python's own handler (KeyboardInterrupt), installed here: a process started in the background
# by a shell inherits SIGINT ignored, and Python then leaves it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.setswitchinterval(1e-4)  # the storm thread gets the GIL within 0.1 ms: it can aim
reports = []
sys.unraisablehook = lambda u: reports.append(f"{u.exc_type.__name__} in {u.object!r}")
SINK = io.StringIO()


def make(i, n_ops, graph_break):
    lines = [f"def f{i}(x, y):", "    a = x"]
    for k in range(n_ops):
        lines.append(f"    a = np.sin(a) * {1 + k / 1000 + i} + y")
        if graph_break and k == n_ops // 2:
            lines.append("    print(end='', file=SINK)")
    lines.append("    return a")
    namespace = {"np": np, "SINK": SINK}
    exec("\n".join(lines), namespace)
    return namespace[f"f{i}"]


FUNCS = [make(i, 30, graph_break=i % 2 == 1) for i in range(6)]
x, y = np.linspace(0, 1, 16), np.full(16, 0.5)
EXPECTED = [f(x, y) for f in FUNCS]
#: how long the storm waits, once the main thread is in a phase, before it interrupts
PHASES = {"reset": 0.3e-3, "compile": 30e-3, "run": 1e-3, "drop": 0.3e-3, "anywhere": 10e-3}
phase = "anywhere"
sent = received = handled = 0
problems, landed = [], dict.fromkeys(PHASES, 0)
done = False


def interrupted(where):
    # No interrupt is outstanding here: the storm sends the next one only once the main loop
    # acknowledged this one, from inside its try (`acknowledge`).
    global handled
    if _C.get_eval_frame() is not None:
        problems.append(f"capture left on after interrupt {handled}")
    state = _C.hook_state()
    if state["active_scopes"] != 0 or state["installed"]:
        problems.append(f"hook state {state} after interrupt {handled}")
    landed[where] += 1
    handled += 1


def acknowledge():
    # (inside the inner try: an interrupt the storm sends from now on lands where a handler
    # catches it; acknowledging in the handler let one land between it and the next try)
    global received
    received = handled


class Backend:
    def __call__(self, gm, example_inputs):
        return gm.forward


def workload(rnd):
    global phase
    phase = "reset"
    dynamo.reset()
    for i in (rnd % len(FUNCS), (rnd + 1) % len(FUNCS)):
        phase = "compile"
        # (every third round a backend of the program's own, dropped below: its compile
        # callback, cache entries and graphs then die in the program's code)
        backend = Backend() if rnd % 3 == 2 else "eager"
        for call in range(4):
            if rnd % 2:
                r = dynamo.compile(FUNCS[i], backend=backend)(x, y)
            else:
                with dynamo.optimize(backend):
                    r = FUNCS[i](x, y)
            phase = "run"
            if not np.array_equal(r, EXPECTED[i]):
                problems.append(f"wrong result of f{i}, call {call}")
        phase = "drop"
        backend = r = None


def storm():
    global sent, done
    rng = random.Random(SEED)
    main = threading.main_thread().ident
    start = time.monotonic()
    # Past DURATION, on until an interrupt has landed in reset and in compile (the phases the
    # test must cover; on a loaded machine the short reset phase is hit rarely), for up to six
    # times as long: the coverage is not left to how busy the machine is.
    def more():
        now = time.monotonic() - start
        return now < DURATION or (now < 6 * DURATION
                                  and not (landed["reset"] and landed["compile"]))
    while more() and not problems:
        target = rng.choice(list(PHASES))
        t0 = time.monotonic()
        # ("drop" lasts microseconds and comes once a round: wait less for it)
        patience = 0.05 if target == "drop" else 0.5
        while target != "anywhere" and phase != target and time.monotonic() - t0 < patience:
            time.sleep(1e-5)
        time.sleep(rng.uniform(0, PHASES[target]))
        where = phase
        sent += 1
        signal.pthread_kill(main, signal.SIGINT)
        t0 = time.monotonic()
        while received < sent:
            if time.monotonic() - t0 > 5:
                problems.append(f"interrupt {sent} (sent in phase {where}) never reached the "
                                f"program; unraisable: {reports}")
                break
            time.sleep(1e-5)
    done = True


thread = threading.Thread(target=storm, daemon=True)
thread.start()
rounds = 0
while not done:
    try:
        while not done:
            try:
                acknowledge()
                workload(rounds)
                rounds += 1
            except KeyboardInterrupt:
                interrupted(phase)
            phase = "anywhere"
    except KeyboardInterrupt:
        interrupted("anywhere")
thread.join()
acknowledge()
# Afterwards: nothing was marked failed or skip, every function compiles and runs compiled.
after = []
for f, want in zip(FUNCS, EXPECTED):
    compiled = dynamo.compile(f, backend="eager")
    ok = all(np.array_equal(compiled(x, y), want) for _ in range(2))
    after.append((ok, _C.get_code_state(f.__code__), len(_C.get_cache_entries(f.__code__))))
print({"sent": sent, "received": received, "rounds": rounds, "landed": landed,
       "problems": problems, "unraisable": reports, "after": after})
'''


@pytest.mark.xfail(
    sys.version_info >= (3, 13), strict=False,
    reason="OPEN (found 2026-12-07, also on the tree before issue 22's changes): on 3.13 under "
           "load (two CPU-bound processes beside it), 1 run in 3-9 ends with a KeyboardInterrupt "
           "escaping the child's module frame at its inner 'while not done:', inside two (with a "
           "third level added: still) enclosing try blocks; 3.10-3.12 and 3.13 unloaded pass")
def test_sigint_storm_while_compiling_reaches_the_program_every_time():
    proc = subprocess.run([sys.executable, "-c", STORM, "8", "0"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
    summary = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert summary["problems"] == [] and summary["unraisable"] == []
    assert summary["received"] == summary["sent"] >= 50, summary
    assert summary["landed"]["compile"] > 0 and summary["landed"]["reset"] > 0, summary
    assert summary["after"] == [(True, _C.DEFAULT, 1)] * 6


# KeyboardInterrupt at any trace event, and in a guard -------------------------------------------


def sine_times_y_plus_one(x, y):
    return np.sin(x) * y + 1


def test_keyboard_interrupt_at_any_point_leaves_no_capture_behind():
    """Raise KeyboardInterrupt at the n-th trace event of a compiled call and of a `with`
    block, for every n: the interrupt reaches the caller and capture is off afterwards."""
    compiled = dynamo.compile(sine_times_y_plus_one)
    x = np.ones(3)
    compiled(x, x)

    def interrupting(n):
        count = [0]

        def tracer(frame, event, arg):
            # Only at calls and returns, where a signal handler can run too (CPython also
            # skips __exit__ when a *line* event between a with body and its exit raises).
            if event in ("call", "return"):
                count[0] += 1
                if count[0] == n:
                    raise KeyboardInterrupt
            return tracer
        return tracer

    def with_block():
        with dynamo.optimize("eager"):
            sine_times_y_plus_one(x, x)

    gc.collect()
    gc.disable()  # no finalizer may run (and be interrupted) under the tracer
    try:
        _interrupt_each_event(interrupting, (lambda: compiled(x, x), with_block))
    finally:
        gc.enable()


def _interrupt_each_event(interrupting, programs):
    for program in programs:
        for n in range(1, 40):
            sys.settrace(interrupting(n))
            try:
                program()
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
            assert _C.get_eval_frame() is None, n
            assert _C.hook_state()["active_scopes"] == 0, n


def test_keyboard_interrupt_in_a_guard_reaches_the_user(monkeypatch):
    """The guard reads ``___globals['np']``; with a dict subclass as globals that read runs
    user code, here raising KeyboardInterrupt once. It must reach the caller, not be printed as
    "Exception ignored" and treated as a failed guard."""

    class ArmedGlobals(dict):
        armed = False

        def __getitem__(self, key):
            if ArmedGlobals.armed:
                ArmedGlobals.armed = False
                raise KeyboardInterrupt
            return dict.__getitem__(self, key)

    namespace = ArmedGlobals(np=np)
    exec("def f(x):\n    return np.sin(x) * 2\n", namespace)
    f = namespace["f"]
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    compiled = dynamo.compile(f)
    x = np.ones(3)
    assert np.array_equal(compiled(x), np.sin(x) * 2)
    assert len(_C.get_cache_entries(f.__code__)) == 1
    ArmedGlobals.armed = True
    with pytest.raises(KeyboardInterrupt):
        compiled(x)
    assert unraisable == []
    assert np.array_equal(compiled(x), np.sin(x) * 2)
