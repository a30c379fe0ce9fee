/*
 * eval_frame.c -- the PEP 523 hook and the `dynamo._C` module.
 *
 * In:  every Python frame CPython evaluates while at least one capture scope (thread or asyncio
 *      task) with a callback is entered.
 * Out: the frame runs unchanged (CPython's default evaluator), or a cached transformed code
 *      object runs in its place, or the Python callback (dynamo.convert_frame) is asked to
 *      compile it.  Contract: docs/internals.md section 1.  C does mechanism; Python does policy.
 *
 * Design notes (why it looks like this):
 *
 *  - Shadow frame by public API.  To run `new_code` instead of the intercepted frame we build
 *    an ordinary function object for `new_code` (the original globals and closure) and call it
 *    with the bound argument slots as positional arguments.  CPython then allocates, fills,
 *    evaluates, clears and pops the new frame itself.  TorchDynamo instead allocates a frame on
 *    the data stack and copies every local by index, which needs copies of private CPython
 *    allocation routines that change in every version; our way costs one extra vectorcall and
 *    needs none of them.  The intercepted frame itself never runs: before 3.12 the code that
 *    pushed it releases it when we return; on 3.12+ we release it (npd_frame_release).
 *
 *  - The frame layout rule.  Calling a function re-binds only the arguments; the new frame's
 *    prefix (COPY_FREE_VARS, MAKE_CELL) then builds cells and copies free variables from the
 *    closure exactly as the original would have.  That is correct only if `new_code` has the
 *    same argument, cell and free variable layout as the original, every argument positional
 *    (co_argcount == number of argument slots, no varargs/varkeywords flags: the *args tuple and
 *    **kwargs dict are passed as plain values) and keeps the original prefix.  The Python side
 *    guarantees this; we check the cheap parts when an entry is added.
 *
 *  - Re-entrancy.  Guards, the callback and the transformed code are Python and may do
 *    anything: call hooked functions, reset caches, drop the last reference to entries.  While
 *    guards and the callback run, the hook steps aside for this thread (tls_suspended), so the
 *    compiler never compiles itself; capture scopes the callback leaves open are undone.  The
 *    hook never keeps a pointer to a cache entry across a call into Python without checking the
 *    cache's version counter afterwards.
 *
 *  - Never change the program (issue 8).  Frames run plainly while a tracer or profiler is set
 *    (they must see the original code), near the recursion limit (a compiled call would need more
 *    frames) and, with the hook removed, near the end of the C stack (deep mode).  Exceptions
 *    leaving a shadow frame lose the traceback entries of hidden code (graph, backend runners).
 *    KeyboardInterrupt/SystemExit raised in a guard propagate.  Scopes are entered and left in C.
 *    The references a replaced frame (shadow call) or a tail call's arguments hold are handed
 *    to the new frame as soon as it starts (release_on_start), so `del x` frees an object
 *    where plain Python does.  The garbage collector's observers (gc.get_count(),
 *    gc.get_objects(), gc.callbacks) see no compile (gc_quiet.c) and no tail-call machinery
 *    (finish_tail_calls); the compile callback runs in a copy of the user's context.
 */
#include "cache.h"
#include "frame_view.h"
#include "gc_quiet.h"
#include "guards.h"
#include "small_call.h"
#include "loop_call.h"

#include <pthread.h> /* after Python.h, which defines _GNU_SOURCE (pthread_getattr_np) */
#include <stdint.h>

/* ===== capture state: a context variable, a suspension flag, the install count ============
 *
 * The callback lives in a contextvars.ContextVar (`callback_var`), so each thread and each
 * asyncio task has its own: entering optimize() in one task or thread never changes another,
 * and a task created inside a capture scope starts with it (contextvars snapshot semantics).
 * The variable's value is always a `Record` (never None): the callback (NULL = off), the
 * Capture object that pushed it, and for `with` scopes the context token that undoes it, so
 * one Capture object may be entered by many threads/tasks at once, each undoing its own.
 * The hook reads it with PyContextVar_Get, which is a few pointer compares while the thread's
 * context is unchanged (CPython caches the last lookup per variable).
 *
 * `tls_suspended` (> 0 while guards and the compile callback run on this thread) makes the
 * hook step aside, so the compiler never compiles itself, without touching the context.
 *
 * `active_scopes` counts the scopes that are entered with a non-None callback, in any thread
 * or task.  The PEP 523 function is installed exactly while it is > 0 and no frame is running
 * in "deep mode" (see run_deep), so an idle npdynamo costs CPython nothing. */

typedef struct Record {
    PyObject_HEAD
    PyObject *callback;   /* NULL = capture off; Py_False = run-only; else the compile callback */
    PyObject *owner;      /* the Capture that pushed this record (strong) */
    PyObject *token;      /* with-scopes: the ContextVar token that undoes the push; else NULL */
    int counted;          /* this record still holds one unit of active_scopes */
    struct Record *parked_run; /* with-scopes: the run() override it replaced (strong), or NULL */
    unsigned long parked_seq; /* ... and the run() invocation that set it */
} Record;

static PyTypeObject RecordType;

/* The run() fast path.  Capture.run (every call of a compiled function) does not touch the
 * context variable, which would allocate twice per call; it sets this thread-local override,
 * valid only while the thread stays in the context it was set in (a nested event loop or
 * Context.run switches contexts and sees its own variable, without the override).  A `with`
 * scope entered inside run() parks the override in its record and puts it back when it exits
 * (if that run() is still the innermost one: `seq` identifies run() invocations). */
static _Thread_local Record *tls_run = NULL;      /* borrowed; run() holds a reference */
static _Thread_local void *tls_run_ctx = NULL;    /* address only: ts->context at run() */
static _Thread_local unsigned long tls_run_seq = 0;
static unsigned long run_seq_counter = 0;
static PyObject *callback_var = NULL;
static _Thread_local int tls_suspended = 0;


static Py_ssize_t active_scopes = 0;
static int deep_runs = 0;          /* frames running in deep mode (hook removed), all threads */
static int hook_installed = 0;
static _PyFrameEvalFunction previous_eval_func = NULL;

static PyObject *npd_hook(PyThreadState *ts, npd_frame *frame, int throw_flag);

/* Install or remove the hook to match active_scopes and deep_runs. */
static void update_installation(void) {
    int want = active_scopes > 0 && deep_runs == 0;
    if (want && !hook_installed) {
        previous_eval_func = npd_get_eval_frame_func();
        npd_set_eval_frame_func(npd_hook);
        hook_installed = 1;
    } else if (!want && hook_installed) {
        npd_set_eval_frame_func(previous_eval_func);
        previous_eval_func = NULL;
        hook_installed = 0;
    }
}

static void scope_count(int delta) {
    active_scopes += delta;
    if (active_scopes < 0) {
        active_scopes = 0; /* cannot happen with balanced records; never go negative */
    }
    update_installation();
}

static void record_uncount(Record *r) {
    if (r->counted) {
        r->counted = 0;
        scope_count(-1);
    }
}

static Record *record_new(PyObject *callback, PyObject *owner) {
    Record *r = PyObject_GC_New(Record, &RecordType);
    if (r == NULL) {
        return NULL;
    }
    r->callback = Py_XNewRef(callback);
    r->owner = Py_XNewRef(owner);
    r->token = NULL;
    r->counted = 0;
    r->parked_run = NULL;
    r->parked_seq = 0;
    PyObject_GC_Track(r);
    return r;
}

/* A record refers to its token, the token to its context, the context to the record: the
 * cycle is broken when the scope exits; for a scope that never exits (its context died first)
 * the cycle collector frees it and the record gives its unit of active_scopes back. */
static int record_traverse(Record *r, visitproc visit, void *arg) {
    Py_VISIT(r->callback);
    Py_VISIT(r->owner);
    Py_VISIT(r->token);
    Py_VISIT(r->parked_run);
    return 0;
}

static int record_clear(Record *r) {
    record_uncount(r);
    Py_CLEAR(r->callback);
    Py_CLEAR(r->owner);
    Py_CLEAR(r->token);
    Py_CLEAR(r->parked_run);
    return 0;
}

static void record_dealloc(Record *r) {
    PyObject_GC_UnTrack(r);
    record_clear(r);
    PyObject_GC_Del(r);
}

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C._Record",
    .tp_doc = PyDoc_STR("internal: one capture scope's value in the callback context variable"),
    .tp_basicsize = sizeof(Record),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)record_dealloc,
    .tp_traverse = (traverseproc)record_traverse,
    .tp_clear = (inquiry)record_clear,
};

/* The current Record of this context (new reference) or NULL if none (never raises). */
static Record *current_record(void) {
    PyObject *value = NULL;
    if (PyContextVar_Get(callback_var, NULL, &value) < 0) {
        PyErr_Clear(); /* only MemoryError is possible; treat as "capture off" */
        return NULL;
    }
    return (Record *)value;
}

/* The record in effect for this thread: the run() override if it belongs to the current
 * context, else the context variable's.  New reference or NULL. */
static inline Record *effective_record(PyThreadState *ts) {
    Record *r = tls_run;
    if (r != NULL && tls_run_ctx == (void *)ts->context) {
        return (Record *)Py_NewRef((PyObject *)r);
    }
    return current_record();
}

/* This thread's callback, ignoring suspension: new reference, NULL for off. */
static PyObject *current_callback(void) {
    Record *r = effective_record(PyThreadState_Get());
    if (r == NULL) {
        return NULL;
    }
    PyObject *cb = Py_XNewRef(r->callback);
    Py_DECREF(r);
    return cb;
}

/* ===== the hook ======================================================================== */

/* Code kinds we never intercept: their frames are resumed later (generators, coroutines),
 * so replacing the first evaluation would not replace the rest. */
#define NPD_NEVER_FLAGS \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* Argument buffers up to this size live on the C stack (no allocation on the hit path). */
#define NPD_SMALL_ARGS 16

/* Recursion budget (frames left under sys.getrecursionlimit()).  Below RUN_HEADROOM the frame
 * runs exactly as plain Python would (no guard call, no shadow frame, which each cost a frame),
 * so a program that fits under the limit without npdynamo still fits.  Below COMPILE_HEADROOM
 * the compiler (a few hundred frames of Python) is not called for this call; the code is not
 * marked, a later call with more room compiles it. */
#define NPD_RUN_HEADROOM 50
#define NPD_COMPILE_HEADROOM 400

/* C stack.  While the hook is installed CPython 3.11+ cannot inline Python-to-Python calls, so
 * every call nests C frames (ours and the default evaluator's); a recursion that plain Python
 * runs in a flat C stack (sys.setrecursionlimit(100000)) would overflow it.  3.10 nests C
 * frames for every call anyway, and plain 3.10 itself dies near 20,000 levels on 8 MiB.  So
 * the hook checks the real stack first on every frame (the thresholds per version and why:
 * cpython_compat.h): near its end it raises RecursionError rather than run the frame; before
 * that, in "deep mode", it captures nothing: on 3.11+ the hook is removed interpreter-wide
 * until the frame returns, so the calls below it are inlined again (other threads are not
 * intercepted meanwhile: they run plain Python, which is always correct); on 3.10 each frame
 * goes straight to the default evaluator. */

/* C recursion budget (3.12+, see cpython_compat.h; 3.12.1 has 1500 units in all).  Every
 * hooked call charges about two units of it, plain Python's inlined calls none; so deep mode
 * also starts when fewer than this many units are left, leaving the rest for what the frame
 * calls through C, as plain Python would.  (So on 3.12+ a compile needs its room within the
 * budget: functions first met deeper than ~325 levels of captured recursion run uncompiled.) */
#define NPD_C_RECURSION_MARGIN 600

/* This thread's thresholds: below tls_stack_deep deep mode, below tls_stack_hard
 * RecursionError.  UINTPTR_MAX: not measured yet (every address is below: stack_check runs
 * and measures); 0 (both): the stack is unknown, never deep. */
static _Thread_local uintptr_t tls_stack_deep = UINTPTR_MAX;
static _Thread_local uintptr_t tls_stack_hard = 0;
static _Thread_local uintptr_t tls_stack_low = 0;  /* the stack's lowest address, 0 unknown */
static _Thread_local size_t tls_stack_size = 0;

static void stack_init(void) {
    tls_stack_deep = tls_stack_hard = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0) {
            /* the stack grows down towards addr */
            tls_stack_low = (uintptr_t)addr;
            tls_stack_size = size;
            tls_stack_hard = (uintptr_t)addr + npd_stack_hard_margin(size);
            tls_stack_deep = (uintptr_t)addr + npd_stack_deep_margin(size);
        }
        pthread_attr_destroy(&attr);
    }
}

static PyObject *run_deep(PyThreadState *ts, npd_frame *frame, int throw_flag) {
#if NPD_DEEP_REMOVES_HOOK
    deep_runs++;
    update_installation();
    PyObject *result = npd_eval_default(ts, frame, throw_flag);
    deep_runs--;
    update_installation(); /* never raises: only swaps a function pointer */
    return result;
#else
    /* 3.10: the hook stays, so the stack check sees the calls below this frame. */
    return npd_eval_default(ts, frame, throw_flag);
#endif
}

/* The slow part of the stack check (out of line, so the hook's common path stays small and a
 * deep 3.10 frame costs no C stack of ours: every call here and to here is a tail call).
 * `sp` is below tls_stack_deep: measure the stack on a thread's first frame; else raise
 * RecursionError near the end of the stack, or run the frame in deep mode. */
static __attribute__((noinline)) PyObject *
stack_check(PyThreadState *ts, npd_frame *frame, int throw_flag, uintptr_t sp);

static __attribute__((noinline)) PyObject *
npd_hook_capture(PyThreadState *ts, npd_frame *frame, int throw_flag);

static PyObject *stack_check(PyThreadState *ts, npd_frame *frame, int throw_flag, uintptr_t sp) {
    if (tls_stack_deep == UINTPTR_MAX) {
        stack_init();
        if (sp >= tls_stack_deep) {
            return npd_hook_capture(ts, frame, throw_flag);
        }
    }
    if (sp < tls_stack_hard && !throw_flag && npd_frame_refusable(frame)) {
        /* As CPython's own recursion check: the frame never starts.  (A frame being thrown
         * into, and on 3.11+ a generator's, is left to the evaluator.) */
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded (the C stack is nearly exhausted)");
        npd_frame_release(ts, frame);
        return NULL;
    }
    return run_deep(ts, frame, throw_flag);
}

/* Walk the cache: evaluate each entry's guards -- a GuardSet (guards.c) straight on the slots,
 * any other callable as check_fn(*slots, globals, closure or None).  Returns 1 on a hit (with
 * *func_out = new reference to the function to run), 0 on a miss, -1 on an error that must
 * propagate: out of memory, a BaseException that is not an Exception (KeyboardInterrupt,
 * SystemExit) raised in a guard -- those belong to the user -- or a disagreement found by the
 * guard self-check mode.  A Python guard that raises an Exception is reported as unraisable
 * and counts as failed (a GuardSet fails quietly, as its Python text does).  Runs suspended. */
static __attribute__((noinline)) int
cache_lookup(npd_extra *extra, PyObject **slots, Py_ssize_t nargs, PyObject *globals,
             PyObject *builtins, PyObject *closure, PyObject *callback, PyObject **func_out) {
    /* Compile mode uses only the entries this callback compiled; run-only (False) uses all. */
    void *owner = callback == Py_False ? NULL : (void *)callback;
    if (extra->head == NULL) {
        return 0;
    }
    /* Guard sets (guards.c) read the frame's slots directly; any other check_fn is called as
     * check_fn(*slots, globals, closure) through `buf`, filled the first time one is met. */
    PyObject *small[NPD_SMALL_ARGS + 3];
    PyObject **buf = NULL;
    Py_ssize_t total = nargs + 2;

    int found = 0;
    /* Entries are never freed while we hold `e` unless `version` moves.  Prepends and
     * reorders by other threads (the GIL is released inside Python guards) keep `e` and
     * `e->next` valid; at worst a guard is asked twice or skipped (a spurious miss). */
    for (npd_entry *e = extra->head; e != NULL; e = e->next) {
        if (owner != NULL && e->owner != owner) {
            continue;
        }
        unsigned long version = extra->version;
        PyObject *check_fn = Py_NewRef(e->check_fn); /* survives even if the entry dies */
        int ok;
        if (Py_IS_TYPE(check_fn, &npd_GuardSetType)) {
            ok = npd_guardset_check(check_fn, slots, nargs, globals, closure);
            if (ok < 0) { /* only what must reach the user: KeyboardInterrupt & co., a
                             self-check disagreement */
                Py_DECREF(check_fn);
                found = -1;
                break;
            }
        } else {
            if (buf == NULL) {
                buf = small;
                if (total + 1 > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
                    buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
                    if (buf == NULL) {
                        Py_DECREF(check_fn);
                        PyErr_NoMemory();
                        return -1;
                    }
                }
                /* buf[0] is scratch space that PY_VECTORCALL_ARGUMENTS_OFFSET lets the callee
                 * use; the slots are borrowed: the frame owns them until we return. */
                buf[0] = NULL;
                for (Py_ssize_t i = 0; i < nargs; i++) {
                    buf[1 + i] = slots[i];
                }
                buf[1 + nargs] = globals;
                buf[2 + nargs] = closure != NULL ? closure : Py_None;
            }
            PyObject *res = PyObject_Vectorcall(
                check_fn, buf + 1, (size_t)total | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            ok = 0;
            if (res != NULL) {
                ok = res == Py_True ? 1 : PyObject_IsTrue(res);
                Py_DECREF(res);
            }
            if (res == NULL || ok < 0) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    Py_DECREF(check_fn);
                    found = -1; /* KeyboardInterrupt & co. reach the user */
                    break;
                }
                PyErr_WriteUnraisable(check_fn);
                ok = 0;
            }
        }
        Py_DECREF(check_fn);
        if (extra->version != version) {
            break; /* entries were freed (reset_code): `e` may be gone; call it a miss */
        }
        if (ok) {
            npd_cache_move_to_front(extra, e);
            extra->hits++;
            *func_out = npd_entry_function(extra, e, globals, builtins, closure);
            found = *func_out != NULL ? 1 : -1;
            break;
        }
    }
    if (buf != NULL && buf != small) {
        PyMem_Free(buf);
    }
    return found;
}

static int check_new_code(PyCodeObject *code, PyObject *new_code, Py_ssize_t nargs) {
    if (!PyCode_Check(new_code)) {
        PyErr_Format(PyExc_TypeError,
                     "eval-frame callback returned (check_fn, new_code) with new_code of type "
                     "%.100s; expected a code object",
                     Py_TYPE(new_code)->tp_name);
        return -1;
    }
    PyCodeObject *nc = (PyCodeObject *)new_code;
    if (nc == code) {
        /* Running the original code as its own shadow would hit this entry again, forever. */
        PyErr_Format(PyExc_ValueError,
                     "eval-frame callback returned the frame's own code object for %U as "
                     "new_code; return None to run the frame unmodified",
                     npd_code_qualname(code));
        return -1;
    }
    if (nc->co_argcount != nargs || nc->co_kwonlyargcount != 0 ||
        (nc->co_flags & (CO_VARARGS | CO_VARKEYWORDS | NPD_NEVER_FLAGS)) ||
        npd_code_nfreevars(nc) != npd_code_nfreevars(code)) {
        PyErr_Format(PyExc_ValueError,
                     "transformed code for %U must take the %zd argument slots positionally "
                     "(co_argcount=%zd, no kw-only, no *args/**kwargs, not a generator) and "
                     "keep the %d free variables; got co_argcount=%d, co_kwonlyargcount=%d, "
                     "co_flags=0x%x, %d free variables",
                     npd_code_qualname(code), nargs, nargs, npd_code_nfreevars(code),
                     nc->co_argcount, nc->co_kwonlyargcount, nc->co_flags,
                     npd_code_nfreevars(nc));
        return -1;
    }
    return 0;
}


/* The compile lock (dynamo.convert_frame.compile_lock, set by set_compile_lock); NULL = none.
 * The hook holds it from before the callback runs until the new entry is in the cache, so a
 * thread waiting for the lock finds the entry when it gets it and does not compile the same
 * version again (the callback re-checks the cache under the same, reentrant, lock). */
static PyObject *compile_lock = NULL;

/* Undo capture scopes the callback entered and left behind: this context's record must be
 * `expected` again.  Every record passed on the way down is uncounted.  Never raises. */
static void restore_record(Record *expected) {
    Record *cur = current_record();
    if (cur == expected) {
        Py_XDECREF(cur);
        return;
    }
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    Record *r = cur;
    Py_XINCREF(r);
    for (int guard = 0; r != NULL && r != expected && guard < 10000; guard++) {
        record_uncount(r);
        PyObject *older = NULL;
        if (r->token != NULL) {
            older = PyObject_GetAttrString(r->token, "old_value");
            if (older == NULL) {
                PyErr_Clear();
            } else if (Py_TYPE(older) != &RecordType) {
                Py_CLEAR(older);
            }
        }
        Py_DECREF(r);
        r = (Record *)older;
    }
    Py_XDECREF(r);
    Py_XDECREF(cur);
    Record *off = expected == NULL ? record_new(NULL, NULL) : NULL; /* "unset" */
    PyObject *value = expected != NULL ? (PyObject *)expected : (PyObject *)off;
    PyObject *token = value != NULL ? PyContextVar_Set(callback_var, value) : NULL;
    if (token == NULL) {
        PyErr_Clear();
    }
    Py_XDECREF(token);
    Py_XDECREF(off);
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* Cache miss in compile mode: ask the callback, under the compile lock.  Returns 1 with
 * *func_out set (run it), 0 (run the original frame), -1 (exception from the callback, the
 * lock or a bad answer). */
static __attribute__((noinline)) int
compile_frame(PyObject *callback, npd_frame *frame, npd_extra *extra, PyObject **slots,
              Py_ssize_t nargs, PyObject *closure, PyObject **func_out) {
    PyCodeObject *code = npd_frame_code(frame);
    PyObject *lock = Py_XNewRef(compile_lock);
    if (lock != NULL) {
        PyObject *ok = PyObject_CallMethod(lock, "acquire", NULL);
        if (ok == NULL) {
            Py_DECREF(lock);
            return -1; /* e.g. KeyboardInterrupt while waiting: nothing held, nothing done */
        }
        Py_DECREF(ok);
    }
    int found = -1;
    PyObject *result = NULL;
    PyObject *view = npd_frame_view_new(frame, slots, nargs, closure);
    /* The compiler runs in a copy of the user's context: context variables it sets (NumPy's
     * errstate is one) never reach the user's, whose mapping object is not even replaced
     * (gc.get_objects() would show that).  Capture scopes it leaves open are undone inside. */
    PyObject *ctx = view != NULL ? PyContext_CopyCurrent() : NULL;
    if (ctx != NULL && PyContext_Enter(ctx) < 0) {
        Py_CLEAR(ctx);
    }
    if (ctx != NULL) {
        Record *before = current_record();
        result = PyObject_CallOneArg(callback, view);
        restore_record(before);
        Py_XDECREF(before);
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (PyContext_Exit(ctx) < 0) {
            /* The callback left another context entered: cannot happen with `with` and
             * Context.run, which always exit what they enter. */
            PyErr_WriteUnraisable(ctx);
        }
        PyErr_Restore(exc_type, exc_value, exc_tb);
        Py_DECREF(ctx);
    }
    Py_XDECREF(view);
    if (result == NULL) {
        goto done;
    }
    if (result == Py_None) {
        found = 0;
        goto done;
    }
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2 ||
        !PyCallable_Check(PyTuple_GET_ITEM(result, 0))) {
        PyErr_Format(PyExc_TypeError,
                     "eval-frame callback must return None or (check_fn, new_code) with a "
                     "callable check_fn; got %.100s",
                     Py_TYPE(result)->tp_name);
        goto done;
    }
    PyObject *check_fn = PyTuple_GET_ITEM(result, 0);
    PyObject *new_code = PyTuple_GET_ITEM(result, 1);
    if (check_new_code(code, new_code, nargs) < 0) {
        goto done;
    }
    /* Safety net for the contract "new_code is marked SKIP": otherwise the shadow frame would
     * itself be sent to the compiler. */
    npd_extra *new_extra = npd_extra_get_or_create((PyCodeObject *)new_code);
    if (new_extra == NULL || npd_cache_prepend(extra, check_fn, new_code, (void *)callback) < 0) {
        goto done;
    }
    new_extra->state = NPD_SKIP;
    *func_out = npd_entry_function(extra, extra->head, npd_frame_globals(frame),
                                   npd_frame_builtins(frame), closure);
    found = *func_out != NULL ? 1 : -1;
done:
    Py_XDECREF(result);
    if (lock != NULL) {
        /* Release on every path, keeping whatever exception is pending. */
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        PyObject *ok = PyObject_CallMethod(lock, "release", NULL);
        if (ok == NULL) {
            PyErr_WriteUnraisable(lock); /* cannot happen: this thread holds the lock */
        }
        Py_XDECREF(ok);
        PyErr_Restore(exc_type, exc_value, exc_tb);
        Py_DECREF(lock);
    }
    return found;
}

/* Whether frames of `code` are hidden from tracebacks (set_code_hidden). */
static int code_is_hidden(PyCodeObject *code) {
    npd_extra *extra = npd_extra_get(code);
    return extra != NULL && extra->hidden;
}

/* An exception left a shadow frame: unlink the traceback entries of hidden code (generated
 * graph code, backend runner functions), so the traceback shows the user's frames as plain
 * Python would.  The shadow frame's own entry (named and filed like the user's function)
 * stays.  Never raises; keeps the pending exception. */
static void strip_hidden_frames(void) {
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    if (exc_tb != NULL && PyTraceBack_Check(exc_tb)) {
        PyObject **link = &exc_tb;
        int changed = 0;
        while (*link != NULL) {
            PyTracebackObject *tb = (PyTracebackObject *)*link;
            PyCodeObject *tb_code = PyFrame_GetCode(tb->tb_frame);
            int hidden = code_is_hidden(tb_code);
            Py_DECREF(tb_code);
            if (hidden) {
                /* *link owns a reference to tb; move it to tb's successor. */
                *link = Py_XNewRef((PyObject *)tb->tb_next);
                Py_DECREF(tb);
                changed = 1;
            } else {
                link = (PyObject **)&tb->tb_next;
            }
        }
        if (changed && exc_value != NULL && PyExceptionInstance_Check(exc_value)) {
            PyException_SetTraceback(exc_value, exc_tb != NULL ? exc_tb : Py_None);
        }
    }
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* ===== Releasing the caller's references once the replacing frame has started ============
 *
 * Two calls start a frame that takes the place of another: the shadow call (the intercepted
 * frame's argument slots are its arguments; that frame never runs) and a tail call (a
 * TailCall's args tuple).  Plain Python hands the arguments over, so `del x` in the function
 * frees an object nobody else holds; here the slots and the tuple would keep it alive until
 * the call returns.  So before each such call we leave a thread-local marker, and the hook,
 * when it sees the frame of that function start (its arguments now bound: it owns references
 * of its own), drops ours: it clears the intercepted frame's argument references
 * (npd_frame_drop_args; the frame's release later skips the NULL slots, and nothing else reads
 * them: it was never linked into the frame stack, so no frame object, traceback or
 * sys._getframe() reaches it) and sets the tuple's
 * items to None.  Nothing is freed then (the new frame holds every value).  The marker is
 * consumed by the first frame the hook sees after it was set; if that frame is not the
 * expected function's (the frame failed to bind and never started, or the hook was not
 * installed when it did) nothing is released, and the caller clears the marker when the call
 * returns: at most one release per call, never one before the new frame owns its values. */
typedef struct {
    PyObject *func;     /* whose frame's start releases (borrowed; NULL: no marker) */
    PyObject **argv;    /* a tail call's argument references (ours) to drop, or NULL */
    Py_ssize_t nargv;
    npd_frame *frame;   /* an intercepted frame whose argument references to drop, or NULL */
    Py_ssize_t nslots;
} npd_release;

static _Thread_local npd_release tls_release = {NULL, NULL, 0, NULL, 0};

static void release_on_start(npd_frame *frame) {
    npd_release r = tls_release;
    tls_release.func = NULL;
    if (!npd_frame_is_call_of(frame, r.func)) {
        return;
    }
    for (Py_ssize_t i = 0; i < r.nargv; i++) {
        Py_CLEAR(r.argv[i]);
    }
    if (r.frame != NULL) {
        npd_frame_drop_args(r.frame, r.nslots);
    }
}

/* ===== Tail calls of resume functions =================================================== */

/* At a graph break, transformed code ends with `return tail_call(*args, resume_fn)` instead
 * of calling its resume function itself.  The TailCall goes back to `intercept`, which calls
 * the resume function only after the shadow frame is gone: the resume function's frame then
 * takes the place of the user's frame (its f_back is the user's caller, a traceback shows one
 * frame for the function, the stack is as deep as in plain Python).  A TailCall never reaches
 * user code: transformed code only ever runs as a shadow frame started by `intercept`. */
typedef struct {
    PyObject_VAR_HEAD
    PyObject *fn;
    PyObject *args[1]; /* Py_SIZE(self) of them (not a tuple: see finish_tail_calls) */
} TailCall;

static int tailcall_traverse(TailCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++) {
        Py_VISIT(self->args[i]);
    }
    return 0;
}

static int tailcall_clear(TailCall *self) {
    Py_CLEAR(self->fn);
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++) {
        Py_CLEAR(self->args[i]);
    }
    return 0;
}

static void tailcall_dealloc(TailCall *self) {
    PyObject_GC_UnTrack(self);
    tailcall_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tailcall_repr(TailCall *self) {
    if (self->fn == NULL) {
        return PyUnicode_FromString("<npdynamo tail call (cleared)>");
    }
    return PyUnicode_FromFormat("<npdynamo tail call of %R>", self->fn);
}

static PyTypeObject TailCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.TailCall",
    .tp_doc = PyDoc_STR("A resume function call that intercept() makes once the shadow frame "
                        "has returned (internal)."),
    .tp_basicsize = offsetof(TailCall, args),
    .tp_itemsize = sizeof(PyObject *),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)tailcall_traverse,
    .tp_clear = (inquiry)tailcall_clear,
    .tp_dealloc = (destructor)tailcall_dealloc,
    .tp_repr = (reprfunc)tailcall_repr,
};

/* tail_call(*args, fn) -> TailCall for fn(*args) (emitted by dynamo/codegen.py at graph
 * breaks: the function comes last because the arguments are already on the value stack when
 * the transformed code knows which resume function to call). */
static PyObject *tail_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) {
        /* (transformed code that continues in its own frame instead calls ``tail_call()`` to
         * drop the callable it pushed first, NULL slot included: see stay_in_frame) */
        Py_RETURN_NONE;
    }
    TailCall *self = PyObject_GC_NewVar(TailCall, &TailCallType, nargs - 1);
    if (self == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs - 1; i++) {
        self->args[i] = Py_NewRef(args[i]);
    }
    self->fn = Py_NewRef(args[nargs - 1]);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* own_builtins(fn) -> fn, its builtins replaced by those of the frame that calls own_builtins
 * (emitted by dynamo/codegen.py around the MAKE_FUNCTION of a resume, loop-body or with-body
 * function).  MAKE_FUNCTION takes the builtins from the globals' __builtins__ as they are now;
 * the rest of the user's function must run with the builtins its frame started with, as in
 * plain Python, even after the module's __builtins__ was replaced (CPython's test_dynamic). */
static PyObject *own_builtins(PyObject *module, PyObject *fn) {
    if (PyFunction_Check(fn)) {
        PyObject *builtins = PyEval_GetBuiltins(); /* borrowed: the calling frame's */
        PyFunctionObject *func = (PyFunctionObject *)fn;
        if (builtins != NULL && func->func_builtins != builtins) {
            Py_XSETREF(func->func_builtins, Py_NewRef(builtins));
        }
    }
    return Py_NewRef(fn);
}

/* call_owned(fn, *args) -> fn(*args), the caller's references to the arguments handed over
 * to fn's frame (emitted by dynamo/codegen.py for the call of a try/with statement's body
 * function: `del x` in the body must free x where plain Python does, and the caller's value
 * stack would hold x until the call returns).  Only generated code calls it, with a CALL whose
 * arguments are on its value stack: on 3.10-3.13 a METH_FASTCALL function gets those stack
 * slots as `args`, and after the call the CALL drops whatever the slots hold.  So each slot
 * gets None instead, and its reference moves to a C array that the hook drops once fn's frame
 * has started (release_on_start), as for a tail call's arguments. */
static PyObject *call_owned(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call_owned(fn, *args) needs a function");
        return NULL;
    }
    PyObject *fn = args[0];
    Py_ssize_t n = nargs - 1;
    PyObject *small[NPD_SMALL_ARGS] = {NULL};
    PyObject **argv = small;
    if (n > NPD_SMALL_ARGS) {
        argv = PyMem_Malloc((size_t)n * sizeof(PyObject *));
        if (argv == NULL) {
            return PyErr_NoMemory();
        }
    }
    PyObject **slots = (PyObject **)args + 1; /* (the caller's stack: see above) */
    for (Py_ssize_t i = 0; i < n; i++) {
        argv[i] = slots[i];
        slots[i] = Py_NewRef(Py_None);
    }
    if (Py_IS_TYPE(fn, &PyFunction_Type)) {
        tls_release = (npd_release){fn, argv, n, NULL, 0};
    }
    PyObject *result = PyObject_Vectorcall(fn, argv, (size_t)n, NULL);
    tls_release.func = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(argv[i]);
    }
    if (argv != small) {
        PyMem_Free(argv);
    }
    return result;
}

/* Make the tail calls `result` asks for, one after another, until a real result (or an
 * error) comes back.  Steals `result`.  While a resume function runs (user code), nothing of
 * the tail call's machinery is visible to the cycle collector's observers (gc.get_count(),
 * gc.get_objects()): the TailCall (its arguments in the object itself: no tuple) is freed
 * before the call, the arguments passed from a C array; and the resume function object, which
 * its transformed code made for this one call, is untracked and uncounted while it runs
 * (gc_quiet.c). */
static PyObject *finish_tail_calls(PyObject *result) {
    while (result != NULL && Py_IS_TYPE(result, &TailCallType)) {
        TailCall *call = (TailCall *)result;
        Py_ssize_t n = Py_SIZE(call);
        PyObject *small[NPD_SMALL_ARGS];
        PyObject **argv = small;
        if (n > NPD_SMALL_ARGS) {
            argv = PyMem_Malloc((size_t)n * sizeof(PyObject *));
            if (argv == NULL) {
                Py_DECREF(result);
                return PyErr_NoMemory();
            }
        }
        PyObject *fn = Py_NewRef(call->fn);
        for (Py_ssize_t i = 0; i < n; i++) {
            argv[i] = Py_XNewRef(call->args[i]);
        }
        Py_DECREF(result); /* (freed unless someone else holds it) */
        result = NULL;
        int hidden = npd_gc_hide_transient(fn);
        if (Py_IS_TYPE(fn, &PyFunction_Type)) {
            /* A plain function: nothing runs between the call and its frame's start. */
            tls_release = (npd_release){fn, argv, n, NULL, 0};
        }
        result = PyObject_Vectorcall(fn, argv, (size_t)n, NULL);
        tls_release.func = NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(argv[i]);
        }
        if (argv != small) {
            PyMem_Free(argv);
        }
        npd_gc_unhide_transient(fn, hidden);
        Py_DECREF(fn);
        if (result == NULL) {
            strip_hidden_frames();
        }
    }
    return result;
}

/* What intercept() returns when the frame itself should run: the caller default-evaluates it
 * after intercept's C frame is gone (3.10 nests the evaluator's frame below ours). */
static PyObject npd_run_default_marker;
#define NPD_RUN_DEFAULT (&npd_run_default_marker)

static PyObject *intercept_with(PyThreadState *ts, npd_frame *frame, npd_extra *extra,
                                PyObject *callback, PyCodeObject *code, Py_ssize_t nargs,
                                PyObject **slots);

/* A frame that passed the cheap filters: walk the cache, maybe compile, run the result.
 * Every path releases the frame (npd_frame_release) once, or returns NPD_RUN_DEFAULT. */
static PyObject *intercept(PyThreadState *ts, npd_frame *frame, npd_extra *extra,
                           PyObject *callback) {
    PyCodeObject *code = npd_frame_code(frame);
    Py_ssize_t nargs = npd_code_nargslots(code);
    PyObject *argbuf[NPD_SMALL_ARGS];
    PyObject **heap = NULL; /* 3.10: the argument values of a frame with cell arguments */
    PyObject **slots = npd_frame_args(frame, nargs, argbuf, NPD_SMALL_ARGS);
    if (slots == NULL) {
        heap = PyMem_Malloc((size_t)nargs * sizeof(PyObject *));
        if (heap == NULL) {
            return NPD_RUN_DEFAULT; /* (no memory for the copy: run it uncompiled) */
        }
        slots = npd_frame_args(frame, nargs, heap, nargs);
    }
    PyObject *result = intercept_with(ts, frame, extra, callback, code, nargs, slots);
    PyMem_Free(heap);
    return result;
}

/* intercept(), with the frame's argument values in `slots`. */
static PyObject *intercept_with(PyThreadState *ts, npd_frame *frame, npd_extra *extra,
                                PyObject *callback, PyCodeObject *code, Py_ssize_t nargs,
                                PyObject **slots) {
    PyObject *closure = npd_frame_closure(frame);
    if (closure == NULL && PyErr_Occurred()) {
        npd_frame_release(ts, frame);
        return NULL;
    }
    PyObject *func = NULL;
    int found = 0;

    tls_suspended++;
    if (extra != NULL) {
        found = cache_lookup(extra, slots, nargs, npd_frame_globals(frame),
                             npd_frame_builtins(frame), closure, callback,
                             &func);
    }
    if (found == 0) {
        /* (A code this callback failed to compile runs unmodified: known in C, no call.
         * Nor is a gc.callbacks function compiled while the collector calls it: gc_quiet
         * cannot hide a compile inside a collection, which would leave ~100 young objects
         * where plain Python allocates nothing (hypothesis installs such a callback).  It runs
         * unmodified then; nothing is marked, a call outside a collection compiles.  By code,
         * not by "a collection runs": another thread may run while the collector's callback
         * does, and its compiles go on.) */
        int compile = callback != Py_False &&
                      (extra == NULL ||
                       (extra->state != NPD_RUN_ONLY && !npd_extra_failed_for(extra, callback)))
                      && !npd_gc_callback_running(code);
        /* The compile is invisible to the cycle collector's observers (gc_quiet.c): no
         * automatic collection inside it, and what it leaves alive (our record of the code
         * included) is in no generation and not in gc.get_count(). */
        npd_gc_quiet quiet = {0};
        if (compile && npd_recursion_remaining(ts) > NPD_COMPILE_HEADROOM) {
            npd_gc_quiet_begin(&quiet);
        }
        if (compile && extra == NULL) {
            extra = npd_extra_get_or_create(code);
            if (extra == NULL) {
                found = -1;
            }
        }
        if (extra != NULL) {
            extra->misses++;
        }
        if (compile && found == 0 && npd_recursion_remaining(ts) > NPD_COMPILE_HEADROOM) {
            /* Whatever scopes the callback enters and leaves open are undone (restore_record
             * for the context variable, these three for the run() override). */
            Record *run = tls_run;
            void *run_ctx = tls_run_ctx;
            unsigned long run_seq = tls_run_seq;
            found = compile_frame(callback, frame, extra, slots, nargs, closure, &func);
            tls_run = run;
            tls_run_ctx = run_ctx;
            tls_run_seq = run_seq;
        }
        npd_gc_quiet_end(&quiet, found >= 0);
    }
    tls_suspended--;
    Py_XDECREF(closure);

    if (found < 0) {
        npd_frame_release(ts, frame);
        return NULL; /* the exception propagates to the caller of the frame */
    }
    if (found == 0) {
        return NPD_RUN_DEFAULT;
    }
    /* The shadow call.  No PY_VECTORCALL_ARGUMENTS_OFFSET: slots[-1] belongs to the frame.
     * The capture scope stays, so frames called by the transformed code are intercepted; the
     * shadow frame itself is SKIP and goes straight to the default evaluator. */
    if (Py_IS_TYPE(func, &PyFunction_Type)) {
        tls_release = (npd_release){func, NULL, 0, frame, nargs};
    }
    /* A function made for this call (a closure's) is hidden from the collector's observers
     * while it runs, as the resume functions are (finish_tail_calls). */
    int hidden = npd_gc_hide_transient(func);
    PyObject *result = PyObject_Vectorcall(func, slots, (size_t)nargs, NULL);
    tls_release.func = NULL;
    npd_gc_unhide_transient(func, hidden);
    Py_DECREF(func);
    /* The intercepted frame is on top of the data stack again: release it before the tail
     * calls, so a resume function's frame takes its place as in plain Python. */
    npd_frame_release(ts, frame);
    if (result == NULL) {
        strip_hidden_frames();
    }
    return finish_tail_calls(result);
}

/* The PEP 523 function.  Kept small: on 3.10 every Python call in the process runs through
 * it, deep recursions included. */
static PyObject *npd_hook(PyThreadState *ts, npd_frame *frame, int throw_flag) {
    if (tls_release.func != NULL) {
        release_on_start(frame);
    }
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (sp < tls_stack_deep) {
        return stack_check(ts, frame, throw_flag, sp);
    }
    return npd_hook_capture(ts, frame, throw_flag);
}

/* Every frame with enough C stack left. */
static PyObject *npd_hook_capture(PyThreadState *ts, npd_frame *frame, int throw_flag) {
    if (npd_c_recursion_low(ts, NPD_C_RECURSION_MARGIN)) {
        return run_deep(ts, frame, throw_flag);
    }
    if (throw_flag || tls_suspended) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    PyCodeObject *code = npd_frame_code(frame);
    if ((code->co_flags & NPD_NEVER_FLAGS) || !(code->co_flags & CO_OPTIMIZED) ||
        !npd_frame_is_function(frame) || !npd_frame_releasable(frame)) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    /* Debuggers, coverage and profilers see the program as written: while a trace or
     * profile function is set on this thread, or (3.12+) a sys.monitoring tool listens to
     * this code, frames run their original bytecode (no guard, no compile, no cached
     * version), so every line and call event is the plain one. */
    if (npd_thread_is_traced(ts, code) || npd_recursion_remaining(ts) < NPD_RUN_HEADROOM) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL && extra->state == NPD_SKIP) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    Record *record = effective_record(ts);
    if (record == NULL || record->callback == NULL ||
        (record->callback == Py_False && (extra == NULL || extra->head == NULL)) ||
        npd_is_finalizing()) {
        /* Off in this context; or run-only with nothing cached; or modules are being torn
         * down (guards and the compiler would see half-dead state). */
        Py_XDECREF(record);
        return npd_eval_default(ts, frame, throw_flag);
    }
    PyObject *callback = Py_NewRef(record->callback);
    Py_DECREF(record);
    PyObject *result = intercept(ts, frame, extra, callback);
    Py_DECREF(callback);
    if (result == NPD_RUN_DEFAULT) {
        return npd_eval_default(ts, frame, 0); /* throw_flag is 0 here */
    }
    return result;
}

/* ===== Capture: entering and leaving capture scopes ===================================== */

/* A capture scope for one callback: `with capture:` and `capture.run(fn, *args, **kwargs)`.
 * Both are implemented in C so a KeyboardInterrupt cannot land between changing the state and
 * arranging to undo it (a `with` statement calls a C __enter__ without running bytecode in
 * between).  The object itself holds no per-entry state: `with` scopes keep theirs in the
 * context (Record.token), run() in its C stack frame, so one Capture may be used by any
 * number of threads and tasks at once. */
typedef struct {
    PyObject_HEAD
    PyObject *callback;   /* NULL = None (capture off) */
    Record *run_record;   /* the record run() pushes (immutable, shared by all its calls) */
} Capture;

static int capture_init(Capture *self, PyObject *args, PyObject *kwargs) {
    PyObject *cb;
    if (!PyArg_ParseTuple(args, "O:Capture", &cb)) {
        return -1;
    }
    if (cb != Py_None && cb != Py_False && !PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError,
                     "Capture() expects None (off), False (run-only) or a callable "
                     "(compile), got %.100s",
                     Py_TYPE(cb)->tp_name);
        return -1;
    }
    PyObject *callback = cb == Py_None ? NULL : cb;
    /* No owner: only with-records are matched by owner (capture_exit), and an owner here
     * would make every Capture a reference cycle (self->run_record->owner == self). */
    Record *rec = record_new(callback, NULL);
    if (rec == NULL) {
        return -1;
    }
    Py_XSETREF(self->callback, Py_XNewRef(callback));
    Py_XSETREF(self->run_record, rec);
    return 0;
}

/* Capture is a static type: for Python subclasses, subtype_traverse/subtype_dealloc visit
 * and release the heap type themselves. */
static int capture_traverse(Capture *self, visitproc visit, void *arg) {
    Py_VISIT(self->callback);
    Py_VISIT(self->run_record);
    return 0;
}

static int capture_clear(Capture *self) {
    Py_CLEAR(self->callback);
    Py_CLEAR(self->run_record);
    return 0;
}

static void capture_dealloc(Capture *self) {
    PyObject_GC_UnTrack(self);
    capture_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *capture_enter(Capture *self, PyObject *unused) {
    if (self->run_record == NULL) {
        PyErr_SetString(PyExc_TypeError, "Capture.__init__() was not called");
        return NULL;
    }
    PyThreadState *ts = PyThreadState_Get();
    Record *rec = record_new(self->callback, (PyObject *)self);
    if (rec == NULL) {
        return NULL;
    }
    int park = tls_run != NULL && tls_run_ctx == (void *)ts->context;
    rec->token = PyContextVar_Set(callback_var, (PyObject *)rec);
    if (rec->token == NULL) {
        Py_DECREF(rec);
        return NULL;
    }
    if (park) {
        /* Inside a run(): this scope takes over until it exits (see tls_run). */
        rec->parked_run = (Record *)Py_NewRef((PyObject *)tls_run);
        rec->parked_seq = tls_run_seq;
        tls_run = NULL;
    }
    if (rec->callback != NULL) {
        rec->counted = 1;
        scope_count(+1);
    }
    Py_DECREF(rec); /* the context holds it */
    return Py_NewRef((PyObject *)self);
}

static PyObject *capture_exit(Capture *self, PyObject *const *args, Py_ssize_t nargs) {
    /* Find this Capture's innermost with-record in the chain of this context; records above
     * it are scopes entered inside and never exited (a suspended generator): undone too. */
    Record *cur = current_record();
    Record *r = cur;
    Py_XINCREF(r);
    while (r != NULL && !(r->owner == (PyObject *)self && r->token != NULL)) {
        PyObject *older = NULL;
        if (r->token != NULL) {
            older = PyObject_GetAttrString(r->token, "old_value");
            if (older == NULL) {
                Py_DECREF(r);
                Py_XDECREF(cur);
                return NULL;
            }
            if (Py_TYPE(older) != &RecordType) {
                Py_CLEAR(older);
            }
        }
        Py_DECREF(r);
        r = (Record *)older;
    }
    if (r == NULL) {
        /* Not entered in this context (e.g. __exit__ in another task than __enter__):
         * nothing of ours to undo here. */
        Py_XDECREF(cur);
        Py_RETURN_NONE;
    }
    for (Record *u = cur; u != NULL;) {
        record_uncount(u);
        if (u == r || u->token == NULL) {
            break;
        }
        PyObject *older = PyObject_GetAttrString(u->token, "old_value");
        if (older == NULL) {
            PyErr_Clear();
            break;
        }
        Py_DECREF(older); /* still referenced by the token */
        u = Py_TYPE(older) == &RecordType ? (Record *)older : NULL;
    }
    if (PyContextVar_Reset(callback_var, r->token) < 0) {
        /* Used already, or created in another context: set the value it replaced instead. */
        PyErr_Clear();
        PyObject *older = PyObject_GetAttrString(r->token, "old_value");
        if (older == NULL) {
            Py_DECREF(r);
            Py_XDECREF(cur);
            return NULL;
        }
        PyObject *value = Py_TYPE(older) == &RecordType ? older : NULL;
        Record *off = value == NULL ? record_new(NULL, NULL) : NULL;
        PyObject *token = PyContextVar_Set(callback_var, value != NULL ? value : (PyObject *)off);
        Py_XDECREF(off);
        Py_DECREF(older);
        if (token == NULL) {
            Py_DECREF(r);
            Py_XDECREF(cur);
            return NULL;
        }
        Py_DECREF(token);
    }
    if (r->parked_run != NULL) {
        /* Give the run() override back if that run() is still the innermost one. */
        if (tls_run == NULL && tls_run_seq == r->parked_seq) {
            tls_run = r->parked_run; /* borrowed: that run() holds a reference */
        }
        Py_CLEAR(r->parked_run);
    }
    Py_DECREF(r);
    Py_XDECREF(cur);
    Py_RETURN_NONE;
}

/* capture.run(fn, /, *args, **kwargs): call fn with this scope's callback set, restored on
 * every path.  Nested calls with the same callback (a compiled function calling another one
 * compiled with the same backend) change nothing and cost one lookup. */
/* Call fn(*args, **kwnames) inside `self`'s scope (the shared body of Capture.run and of
 * compiled-function wrappers). */
static PyObject *scoped_call(Capture *self, PyObject *fn, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    Record *rec = self->run_record;
    if (rec == NULL) {
        PyErr_SetString(PyExc_TypeError, "Capture.__init__() was not called");
        return NULL;
    }
    PyThreadState *ts = PyThreadState_Get();
    Record *cur = effective_record(ts);
    int same = cur != NULL ? cur->callback == self->callback : self->callback == NULL;
    Py_XDECREF(cur);
    if (same) {
        return PyObject_Vectorcall(fn, args, nargsf, kwnames);
    }
    if (ts->context == NULL) {
        /* Create the thread's context now: if something created it during the call, the
         * override would no longer match it. */
        PyObject *ctx = PyContext_CopyCurrent();
        if (ctx == NULL) {
            return NULL;
        }
        Py_DECREF(ctx);
    }
    Py_INCREF(rec);
    Record *saved_run = tls_run;
    void *saved_ctx = tls_run_ctx;
    unsigned long saved_seq = tls_run_seq;
    tls_run = rec;
    tls_run_ctx = (void *)ts->context;
    tls_run_seq = ++run_seq_counter;
    int counted = self->callback != NULL;
    if (counted) {
        scope_count(+1);
    }
    PyObject *result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    if (counted) {
        scope_count(-1);
    }
    tls_run = saved_run;
    tls_run_ctx = saved_ctx;
    tls_run_seq = saved_seq;
    Py_DECREF(rec);
    return result;
}

static PyObject *capture_run(Capture *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "Capture.run(fn, /, *args, **kwargs) needs fn");
        return NULL;
    }
    return scoped_call(self, args[0], args + 1, (size_t)(nargs - 1), kwnames);
}

/* ===== Wrapped: what Capture.wrap(fn) returns ========================================== */

/* A function running inside a capture scope, implemented in C so a call costs no extra Python
 * frame and no argument packing.  Binds like a function (descriptor), keeps attributes in a
 * __dict__ (functools.update_wrapper copies fn's name, doc, __wrapped__ there). */
typedef struct {
    PyObject_HEAD
    Capture *capture;
    PyObject *fn;
    PyObject *dict;
    vectorcallfunc vectorcall;
    PyObject *weakreflist;
} Wrapped;

static PyObject *wrapped_vectorcall(Wrapped *self, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    return scoped_call(self->capture, self->fn, args, nargsf, kwnames);
}

static int wrapped_traverse(Wrapped *self, visitproc visit, void *arg) {
    Py_VISIT(self->capture);
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    return 0;
}

static int wrapped_clear(Wrapped *self) {
    Py_CLEAR(self->capture);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    return 0;
}

static void wrapped_dealloc(Wrapped *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    wrapped_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *wrapped_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

/* Pickle (and copy) by reference, as functions are: a wrapper stored as a module attribute is
 * found again under its __qualname__ (copied from the function by functools.update_wrapper). */
static PyObject *wrapped_reduce(Wrapped *self, PyObject *unused) {
    return PyObject_GetAttrString((PyObject *)self, "__qualname__");
}

static PyMethodDef wrapped_methods[] = {
    {"__reduce__", (PyCFunction)wrapped_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *wrapped_repr(Wrapped *self) {
    return PyUnicode_FromFormat("<npdynamo wrapper of %R>", self->fn);
}

static PyGetSetDef wrapped_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject WrappedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.Wrapped",
    .tp_doc = NULL, /* instances carry the wrapped function's __doc__ in their __dict__ */
    .tp_basicsize = sizeof(Wrapped),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Wrapped, vectorcall),
    .tp_dictoffset = offsetof(Wrapped, dict),
    .tp_weaklistoffset = offsetof(Wrapped, weakreflist),
    .tp_dealloc = (destructor)wrapped_dealloc,
    .tp_traverse = (traverseproc)wrapped_traverse,
    .tp_clear = (inquiry)wrapped_clear,
    .tp_descr_get = wrapped_descr_get,
    .tp_repr = (reprfunc)wrapped_repr,
    .tp_methods = wrapped_methods,
    .tp_getset = wrapped_getset,
};

static PyObject *capture_wrap(Capture *self, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "Capture.wrap() expects a callable, got %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Wrapped *w = PyObject_GC_New(Wrapped, &WrappedType);
    if (w == NULL) {
        return NULL;
    }
    w->capture = (Capture *)Py_NewRef((PyObject *)self);
    w->fn = Py_NewRef(fn);
    w->dict = NULL;
    w->weakreflist = NULL;
    w->vectorcall = (vectorcallfunc)wrapped_vectorcall;
    PyObject_GC_Track(w);
    return (PyObject *)w;
}

static PyObject *capture_get_callback(Capture *self, void *closure) {
    return Py_NewRef(self->callback != NULL ? self->callback : Py_None);
}

static PyMethodDef capture_methods[] = {
    {"__enter__", (PyCFunction)capture_enter, METH_NOARGS,
     PyDoc_STR("enter the scope in this thread/task's context; returns self")},
    {"__exit__", (PyCFunction)(void (*)(void))capture_exit, METH_FASTCALL,
     PyDoc_STR("leave the scope entered in this context (and any left open inside it)")},
    {"run", (PyCFunction)(void (*)(void))capture_run, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("run(fn, /, *args, **kwargs): call fn inside the scope")},
    {"wrap", (PyCFunction)capture_wrap, METH_O,
     PyDoc_STR("wrap(fn) -> a callable running fn inside the scope (binds like a function)")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef capture_getset[] = {
    {"callback", (getter)capture_get_callback, NULL,
     PyDoc_STR("None (off), False (run-only) or the compile callback"), NULL},
    {NULL},
};

static PyTypeObject CaptureType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.Capture",
    .tp_doc = PyDoc_STR("Capture(callback): a capture scope (None = off, False = run-only, "
                        "callable = compile); `with` or .run(fn, *args, **kwargs)."),
    .tp_basicsize = sizeof(Capture),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)capture_init,
    .tp_dealloc = (destructor)capture_dealloc,
    .tp_traverse = (traverseproc)capture_traverse,
    .tp_clear = (inquiry)capture_clear,
    .tp_methods = capture_methods,
    .tp_getset = capture_getset,
};

/* ===== module functions ================================================================ */

static PyCodeObject *as_code(PyObject *obj, const char *fname) {
    if (!PyCode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s() expects a code object (e.g. f.__code__), got %.100s",
                     fname, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (PyCodeObject *)obj;
}
static PyObject *set_code_state(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "set_code_state(code, state) takes 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyCodeObject *code = as_code(args[0], "set_code_state");
    if (code == NULL) {
        return NULL;
    }
    long state = PyLong_AsLong(args[1]);
    if (state == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (state != NPD_DEFAULT && state != NPD_SKIP && state != NPD_RUN_ONLY) {
        PyErr_Format(PyExc_ValueError,
                     "set_code_state(): state must be DEFAULT (0), SKIP (1) or RUN_ONLY (2), "
                     "got %ld",
                     state);
        return NULL;
    }
    npd_extra *extra = npd_extra_get_or_create(code);
    if (extra == NULL) {
        return NULL;
    }
    extra->state = (int)state;
    Py_RETURN_NONE;
}
static PyObject *get_code_state(PyObject *module, PyObject *obj) {
    PyCodeObject *code = as_code(obj, "get_code_state");
    if (code == NULL) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get(code);
    return PyLong_FromLong(extra != NULL ? extra->state : NPD_DEFAULT);
}
static PyObject *get_cache_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError,
                        "get_cache_entries(code, callback=None) takes 1 or 2 arguments");
        return NULL;
    }
    PyCodeObject *code = as_code(args[0], "get_cache_entries");
    if (code == NULL) {
        return NULL;
    }
    void *owner = nargs == 2 && args[1] != Py_None ? (void *)args[1] : NULL;
    return npd_cache_as_list(npd_extra_get(code), owner);
}
static PyObject *reset_code(PyObject *module, PyObject *obj) {
    PyCodeObject *code = as_code(obj, "reset_code");
    if (code == NULL) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL) {
        npd_extra_reset(extra);
    }
    Py_RETURN_NONE;
}
static PyObject *code_stats(PyObject *module, PyObject *obj) {
    PyCodeObject *code = as_code(obj, "code_stats");
    if (code == NULL) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get(code);
    if (extra == NULL) {
        return Py_BuildValue("(nn)", (Py_ssize_t)0, (Py_ssize_t)0);
    }
    return Py_BuildValue("(nn)", extra->hits, extra->misses);
}


static PyObject *get_eval_frame(PyObject *module, PyObject *unused) {
    if (tls_suspended) {
        Py_RETURN_NONE;
    }
    PyObject *cb = current_callback();
    return cb != NULL ? cb : Py_NewRef(Py_None);
}

static PyObject *hook_state(PyObject *module, PyObject *unused) {
    return Py_BuildValue("{s:O,s:n,s:i}", "installed", hook_installed ? Py_True : Py_False,
                         "active_scopes", active_scopes, "deep_runs", deep_runs);
}

static PyObject *adopt_cells(PyObject *module, PyObject *unused) {
    if (npd_adopt_passed_cells() < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* stay_in_frame() -> bool, called by transformed code at a graph break (dynamo/codegen.py):
 * must the rest of the function run in this frame (an inline copy of the original bytecode)
 * rather than in a resume function's frame?  Yes when the frame is observable: its frame
 * object is referenced from outside (a traceback kept in a local, a frame taken with
 * sys._getframe(), a callee frame's f_back: plain Python would show that object running the
 * rest of the function, its f_lineno moving, its f_locals current), or a tracer, profiler or
 * sys.monitoring tool is now active (a debugger must see the rest of the function run in the
 * same frame, its line events, no new call event).  Never creates the frame object. */
static PyObject *stay_in_frame(PyObject *module, PyObject *unused) {
    PyThreadState *ts = PyThreadState_Get();
    npd_frame *f = npd_current_frame(ts);
    if (f == NULL) {
        Py_RETURN_FALSE;
    }
    if (npd_frame_object_shared(f) || npd_thread_is_traced(ts, npd_frame_code(f))) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyObject *stack_info(PyObject *module, PyObject *unused) {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (tls_stack_deep == UINTPTR_MAX) {
        stack_init();
    }
    if (tls_stack_low == 0) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:i}", "size", (Py_ssize_t)tls_stack_size,
                         "left", (Py_ssize_t)(sp - tls_stack_low),
                         "deep_margin", (Py_ssize_t)(tls_stack_deep - tls_stack_low),
                         "hard_margin", (Py_ssize_t)(tls_stack_hard - tls_stack_low),
                         "c_recursion_left", npd_c_recursion_left(PyThreadState_Get()));
}

static PyObject *set_compile_lock(PyObject *module, PyObject *lock) {
    if (lock != Py_None && (!PyObject_HasAttrString(lock, "acquire") ||
                            !PyObject_HasAttrString(lock, "release"))) {
        PyErr_Format(PyExc_TypeError,
                     "set_compile_lock() expects a lock (with acquire/release) or None, got "
                     "%.100s", Py_TYPE(lock)->tp_name);
        return NULL;
    }
    PyObject *previous = compile_lock != NULL ? compile_lock : Py_NewRef(Py_None);
    compile_lock = lock == Py_None ? NULL : Py_NewRef(lock);
    return previous; /* the reference the slot held */
}

static PyObject *set_code_hidden(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "set_code_hidden(code, hidden) takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyCodeObject *code = as_code(args[0], "set_code_hidden");
    int hidden = code != NULL ? PyObject_IsTrue(args[1]) : -1;
    if (hidden < 0) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get_or_create(code);
    if (extra == NULL) {
        return NULL;
    }
    extra->hidden = hidden;
    Py_RETURN_NONE;
}

static PyObject *get_code_hidden(PyObject *module, PyObject *obj) {
    PyCodeObject *code = as_code(obj, "get_code_hidden");
    if (code == NULL) {
        return NULL;
    }
    return PyBool_FromLong(code_is_hidden(code));
}

static PyObject *drop_entries_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "drop_entries_of(code, callback_id) takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyCodeObject *code = as_code(args[0], "drop_entries_of");
    if (code == NULL) {
        return NULL;
    }
    void *owner = PyLong_AsVoidPtr(args[1]);
    if (owner == NULL && PyErr_Occurred()) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL) {
        npd_cache_drop_owner(extra, owner);
    }
    Py_RETURN_NONE;
}

/* A weakref callback (`functools.partial(drop_owner, id(callback))`, fx/weak.py's on_death):
 * C all the way, so no bytecode -- and so no signal handler -- runs while a callback dies. */
static PyObject *drop_owner(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 && nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "drop_owner(callback_id[, ref]) takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    void *owner = PyLong_AsVoidPtr(args[0]);
    if (owner == NULL && PyErr_Occurred()) {
        return NULL;
    }
    npd_cache_drop_owner_everywhere(owner);
    Py_RETURN_NONE;
}

/* call_ignoring_ref(fn, *args, ref): fn(*args).  A weakref callback made with
 * functools.partial(call_ignoring_ref, fn, *args) (fx/weak.py's on_death) runs no bytecode when
 * fn is C; an Exception fn raises is discarded (a BaseException, e.g. a KeyboardInterrupt
 * from inside fn, is not). */
static PyObject *call_ignoring_ref(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2) {
        PyErr_Format(PyExc_TypeError,
                     "call_ignoring_ref(fn, *args, ref) takes at least 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 2), NULL);
    if (result == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear();
    }
    Py_XDECREF(result);
    Py_RETURN_NONE;
}

static PyObject *set_code_failed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "set_code_failed(code, callback) takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyCodeObject *code = as_code(args[0], "set_code_failed");
    if (code == NULL) {
        return NULL;
    }
    npd_extra *extra = npd_extra_get_or_create(code);
    if (extra == NULL) {
        return NULL;
    }
    npd_extra_mark_failed(extra, (void *)args[1]);
    Py_RETURN_NONE;
}

static PyObject *gc_release(PyObject *module, PyObject *unused) {
    return PyLong_FromSsize_t(npd_gc_quiet_release());
}

static PyObject *gc_hidden(PyObject *module, PyObject *unused) {
    return PyLong_FromSsize_t(npd_gc_quiet_hidden());
}

static PyMethodDef module_methods[] = {
    {"set_code_failed", (PyCFunction)(void (*)(void))set_code_failed, METH_FASTCALL,
     PyDoc_STR("set_code_failed(code, callback): this callback's compile of the code failed: "
               "on a miss with this callback the frame runs unmodified, without calling it "
               "(until reset_code, or drop_entries_of for the callback)")},
    {"gc_release", gc_release, METH_NOARGS,
     PyDoc_STR("gc_release() -> n: give the n objects that compiles left alive (kept in no "
               "garbage-collector generation, gc_quiet.c) back to the oldest generation")},
    {"gc_hidden", gc_hidden, METH_NOARGS,
     PyDoc_STR("gc_hidden() -> how many objects compiles left alive are in no generation "
               "(for tests)")},
    {"get_eval_frame", get_eval_frame, METH_NOARGS,
     PyDoc_STR("get_eval_frame() -> this context's callback (None when off, and inside "
               "guards and the compile callback)")},
    {"hook_state", hook_state, METH_NOARGS,
     PyDoc_STR("hook_state() -> {'installed', 'active_scopes', 'deep_runs'} (for tests)")},
    {"adopt_cells", adopt_cells, METH_NOARGS,
     PyDoc_STR("adopt_cells(): (3.10) in a continuation's prologue, make each cell variable "
               "whose argument is a cell of the original frame that very cell "
               "(cpython_compat.h); does nothing on 3.11+")},
    {"stay_in_frame", stay_in_frame, METH_NOARGS,
     PyDoc_STR("stay_in_frame() -> whether the calling frame is observable (its frame object "
               "is referenced from outside it, or a tracer/profiler is active): at a graph "
               "break, transformed code then continues in its own frame")},
    {"stack_info", stack_info, METH_NOARGS,
     PyDoc_STR("stack_info() -> {'size', 'left', 'deep_margin', 'hard_margin'} in bytes: this "
               "thread's C stack and the hook's thresholds, and 'c_recursion_left' (3.12+, "
               "else -1); None if the stack is unknown (for tests)")},
    {"set_compile_lock", set_compile_lock, METH_O,
     PyDoc_STR("set_compile_lock(lock) -> previous: held by the hook around the compile "
               "callback and the insertion of its entry (None: no lock)")},
    {"set_code_state", (PyCFunction)(void (*)(void))set_code_state, METH_FASTCALL,
     PyDoc_STR("set_code_state(code, state): DEFAULT (0), SKIP (1) or RUN_ONLY (2)")},
    {"get_code_state", get_code_state, METH_O,
     PyDoc_STR("get_code_state(code) -> DEFAULT, SKIP or RUN_ONLY")},
    {"set_code_hidden", (PyCFunction)(void (*)(void))set_code_hidden, METH_FASTCALL,
     PyDoc_STR("set_code_hidden(code, hidden): hide the code's frames from tracebacks that "
               "leave a shadow frame")},
    {"get_code_hidden", get_code_hidden, METH_O,
     PyDoc_STR("get_code_hidden(code) -> bool")},
    {"get_cache_entries", (PyCFunction)(void (*)(void))get_cache_entries, METH_FASTCALL,
     PyDoc_STR("get_cache_entries(code, callback=None) -> [(check_fn, new_code), ...], most "
               "recently hit first; with a callback, only the entries it compiled")},
    {"drop_entries_of", (PyCFunction)(void (*)(void))drop_entries_of, METH_FASTCALL,
     PyDoc_STR("drop_entries_of(code, id(callback)): drop the entries that callback compiled")},
    {"call_ignoring_ref", (PyCFunction)(void (*)(void))call_ignoring_ref, METH_FASTCALL,
     PyDoc_STR("call_ignoring_ref(fn, *args, ref): fn(*args), discarding an Exception it raises "
               "(a weakref callback: functools.partial(call_ignoring_ref, fn, *args))")},
    {"drop_owner", (PyCFunction)(void (*)(void))drop_owner, METH_FASTCALL,
     PyDoc_STR("drop_owner(id(callback)[, ref]): drop the entries that callback compiled, of "
               "every code object, and its failed-compile marks (the callback died; the "
               "second argument, a weakref callback's dead reference, is ignored)")},
    {"reset_code", reset_code, METH_O,
     PyDoc_STR("reset_code(code): drop the code object's cache entries, state and counters")},
    {"tail_call", (PyCFunction)(void (*)(void))tail_call, METH_FASTCALL,
     PyDoc_STR("tail_call(*args, fn) -> a TailCall that the hook makes after the shadow frame "
               "returns (emitted by transformed code at graph breaks)")},
    {"own_builtins", own_builtins, METH_O,
     PyDoc_STR("own_builtins(fn) -> fn with the builtins of the calling frame (generated code: "
               "a continuation keeps its frame's builtins)")},
    {"call_owned", (PyCFunction)(void (*)(void))call_owned, METH_FASTCALL,
     PyDoc_STR("call_owned(fn, *args) -> fn(*args), the references the caller's value stack "
               "holds to args handed over to fn's frame (only for generated code's CALL)")},
    {"code_stats", code_stats, METH_O,
     PyDoc_STR("code_stats(code) -> (hits, misses)")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dynamo._C",
    .m_doc = PyDoc_STR("npdynamo's PEP 523 eval-frame hook: capture scopes in a context "
                       "variable, per-code caches (a table keyed by code object), "
                       "shadow-frame execution (docs/internals.md section 1)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__C(void) {
    if (npd_cache_init() < 0 || PyType_Ready(&npd_FrameViewType) < 0 ||
        PyType_Ready(&RecordType) < 0 || PyType_Ready(&CaptureType) < 0 ||
        PyType_Ready(&WrappedType) < 0 || PyType_Ready(&TailCallType) < 0) {
        return NULL;
    }
    if (callback_var == NULL) {
        callback_var = PyContextVar_New("npdynamo_capture", NULL);
        if (callback_var == NULL) {
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (npd_guards_init(m) < 0 || npd_small_init(m) < 0 || npd_loop_call_init(m) < 0 ||
        npd_gc_quiet_init() < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DEFAULT", NPD_DEFAULT) < 0 ||
        PyModule_AddIntConstant(m, "SKIP", NPD_SKIP) < 0 ||
        PyModule_AddIntConstant(m, "RUN_ONLY", NPD_RUN_ONLY) < 0 ||
        PyModule_AddObjectRef(m, "FrameView", (PyObject *)&npd_FrameViewType) < 0 ||
        PyModule_AddObjectRef(m, "Capture", (PyObject *)&CaptureType) < 0 ||
        PyModule_AddObjectRef(m, "Wrapped", (PyObject *)&WrappedType) < 0 ||
        PyModule_AddObjectRef(m, "TailCall", (PyObject *)&TailCallType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
