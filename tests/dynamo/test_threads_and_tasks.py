"""Threads and asyncio tasks that compile and capture at once (issue 8, the C-hook items).

In: two threads compiling the same version of a function (the interleaving forced through a
spy on the compile lock), one capture scope entered by two threads, interleaved asyncio tasks
with and without capture, a task created outside a scope. Out: one cache entry and one compile
per version; each thread and each task keeps its own capture state (contextvars), and no
capture is left on afterwards. Oracle: the same code without npdynamo.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np

import dynamo
from dynamo import _C, convert_frame
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)


def test_two_threads_compiling_one_version_keep_one_entry():
    """The C hook holds the compile lock from before the callback until the new entry is in the
    cache, and the callback re-checks the cache under that lock: a thread that missed the cache
    while another compiled the same version finds it and compiles nothing. The interleaving is
    forced: thread B's cache lookup misses while thread A's backend runs (A holds the lock), and
    A's backend returns only once B has asked the hook's lock (a spy installed with
    `_C.set_compile_lock`), so B's callback runs after A's entry is cached."""
    real_lock = convert_frame.compile_lock
    a_compiling, b_at_the_lock = threading.Event(), threading.Event()
    thread_a = threading.current_thread()

    class SpyLock:
        def acquire(self, *args):
            if threading.current_thread().name == "B":
                b_at_the_lock.set()
            return real_lock.acquire(*args)

        def release(self):
            real_lock.release()

    compiles, waited = [], []

    def backend(gm, example_inputs):
        compiles.append(threading.current_thread().name)
        if threading.current_thread() is thread_a:
            a_compiling.set()
            waited.append(b_at_the_lock.wait(30))
        return gm.forward

    def f(x):
        return np.sqrt(x) * 3

    compiled = dynamo.compile(f, backend=backend)
    x = np.ones(4)
    results = []

    def thread_b():
        if a_compiling.wait(30):
            results.append(compiled(x))

    b = threading.Thread(target=thread_b, name="B")
    previous = _C.set_compile_lock(SpyLock())
    try:
        b.start()
        results.append(compiled(x))
        b.join(60)
    finally:
        _C.set_compile_lock(previous)
    assert previous is real_lock and not b.is_alive()
    assert waited == [True], "thread B never reached the compile lock while A compiled"
    assert len(results) == 2 and all(np.array_equal(r, f(x)) for r in results)
    assert (compiles, len(_C.get_cache_entries(f.__code__))) == ([thread_a.name], 1)
    assert np.array_equal(compiled(x), f(x)) and compiles == [thread_a.name]  # a cache hit


def test_one_optimize_object_entered_by_two_threads():
    context = dynamo.optimize("eager")
    callback = context.callback
    steps = [threading.Event() for _ in range(4)]
    seen = {}

    def first():
        with dynamo.run():  # this thread's state before entering `context`: run-only (False)
            with context:
                steps[0].set()
                steps[1].wait(30)
                seen["first inside"] = _C.get_eval_frame()
            seen["first after"] = _C.get_eval_frame()
            steps[2].set()

    def second():
        steps[0].wait(30)
        with context:
            steps[1].set()
            steps[2].wait(30)  # the first thread has left its block meanwhile
            seen["second inside"] = _C.get_eval_frame()
        seen["second after"] = _C.get_eval_frame()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"first inside": callback, "first after": False,
                    "second inside": callback, "second after": None}
    assert _C.hook_state() == {"installed": False, "active_scopes": 0, "deep_runs": 0}


def test_interleaved_asyncio_tasks_keep_their_own_capture_state():
    context = dynamo.optimize("eager")
    seen = []

    async def captured():
        with context:
            seen.append(("captured", _C.get_eval_frame() is context.callback))
            await asyncio.sleep(0)
            seen.append(("captured", _C.get_eval_frame() is context.callback))
            await asyncio.sleep(0)
        seen.append(("captured after", _C.get_eval_frame() is None))

    async def disabled():
        with dynamo.disable():
            seen.append(("disabled", _C.get_eval_frame() is None))
            await asyncio.sleep(0)
            seen.append(("disabled", _C.get_eval_frame() is None))
        seen.append(("disabled after", _C.get_eval_frame() is None))

    async def main():
        await asyncio.gather(captured(), disabled())

    asyncio.run(main())
    assert all(ok for _, ok in seen) and len(seen) == 6
    assert _C.get_eval_frame() is None
    assert _C.hook_state() == {"installed": False, "active_scopes": 0, "deep_runs": 0}


def test_task_created_outside_a_scope_is_not_captured():
    context = dynamo.optimize("eager")
    seen = []

    async def worker():
        seen.append(_C.get_eval_frame())

    async def main():
        with context:
            pass
        task = asyncio.ensure_future(worker())
        with context:
            await task  # the worker runs now, in its own context
        with context:
            inner = asyncio.ensure_future(worker())
        await inner  # created inside: starts with the scope's callback (contextvars)

    asyncio.run(main())
    assert seen == [None, context.callback]
