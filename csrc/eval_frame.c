/*
 * eval_frame.c -- the PEP 523 hook and the `dynamo._C` module.
 *
 * In:  every Python frame CPython evaluates while at least one thread has a callback set.
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
 *    needs none of them.  The original `_PyInterpreterFrame` is left untouched: on 3.11 the code
 *    that pushed it (_PyEval_Vector) clears and pops it when we return.
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
 *    anything: call hooked functions, reset caches, drop the last reference to entries.  The
 *    thread's callback is switched to None (without changing the installed-hook count) while
 *    guards and the callback run, so the compiler never traces itself; it is restored on every
 *    path.  The hook never keeps a pointer to a cache entry across a call into Python without
 *    checking the cache's version counter afterwards.
 */
#include "cache.h"
#include "frame_view.h"

/* ===== the thread-local callback and the installed-hook count ========================== */

/* This thread's callback, a strong reference; NULL means None.  False = run-only, any other
 * object = compile mode (a callable).  Everything here runs under the GIL. */
static _Thread_local PyObject *tls_callback = NULL;

/* Threads whose callback is non-None (a suspended callback still counts).  The hook is
 * installed exactly while this is > 0, so an idle npdynamo costs CPython nothing. */
static Py_ssize_t active_threads = 0;
static _PyFrameEvalFunction previous_eval_func = NULL;

static PyObject *npd_hook(PyThreadState *ts, npd_frame *frame, int throw_flag);

static void active_increment(void) {
    if (active_threads++ == 0) {
        previous_eval_func = npd_get_eval_frame_func();
        npd_set_eval_frame_func(npd_hook);
    }
}

static void active_decrement(void) {
    if (--active_threads == 0) {
        npd_set_eval_frame_func(previous_eval_func);
        previous_eval_func = NULL;
    }
}

/* Switch this thread's callback to None for the duration of a call into Python; the returned
 * reference stays counted as active.  Pair with callback_resume on every path. */
static inline PyObject *callback_suspend(void) {
    PyObject *saved = tls_callback;
    tls_callback = NULL;
    return saved;
}

/* Put the suspended callback back.  If the Python code we called left another callback
 * behind (set_eval_frame without restoring), it is dropped and uncounted. */
static inline void callback_resume(PyObject *saved) {
    PyObject *current = tls_callback;
    tls_callback = saved;
    if (current != NULL) {
        active_decrement(); /* never reaches 0: `saved` is still counted */
        Py_DECREF(current);
    }
}

/* ===== the hook ======================================================================== */

/* Code kinds we never intercept: their frames are resumed later (generators, coroutines),
 * so replacing the first evaluation would not replace the rest. */
#define NPD_NEVER_FLAGS \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* Argument buffers up to this size live on the C stack (no allocation on the hit path). */
#define NPD_SMALL_ARGS 16

/* Walk the cache: call each guard as check_fn(*slots, globals, closure or None).  Returns 1 on
 * a hit (with *func_out = new reference to the function to run), 0 on a miss, -1 on an error
 * that must propagate (out of memory).  A guard that raises is reported as unraisable and
 * counts as a failed guard.  Runs with the thread's callback suspended. */
static int cache_lookup(npd_extra *extra, PyObject **slots, Py_ssize_t nargs,
                        PyObject *globals, PyObject *closure, PyObject *callback,
                        PyObject **func_out) {
    /* Compile mode uses only the entries this callback compiled; run-only (False) uses all. */
    void *owner = callback == Py_False ? NULL : (void *)callback;
    if (extra->head == NULL) {
        return 0;
    }
    PyObject *small[NPD_SMALL_ARGS + 3];
    PyObject **buf = small;
    Py_ssize_t total = nargs + 2;
    if (total + 1 > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
        buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    /* buf[0] is scratch space that PY_VECTORCALL_ARGUMENTS_OFFSET lets the callee use. */
    buf[0] = NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        buf[1 + i] = slots[i]; /* borrowed: the frame owns them until we return */
    }
    buf[1 + nargs] = globals;
    buf[2 + nargs] = closure != NULL ? closure : Py_None;

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
        PyObject *res = PyObject_Vectorcall(
            check_fn, buf + 1, (size_t)total | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        int ok = 0;
        if (res != NULL) {
            ok = res == Py_True ? 1 : PyObject_IsTrue(res);
            Py_DECREF(res);
        }
        if (res == NULL || ok < 0) {
            PyErr_WriteUnraisable(check_fn);
            ok = 0;
        }
        Py_DECREF(check_fn);
        if (extra->version != version) {
            break; /* entries were freed (reset_code): `e` may be gone; call it a miss */
        }
        if (ok) {
            npd_cache_move_to_front(extra, e);
            extra->hits++;
            *func_out = npd_entry_function(extra, e, globals, closure);
            found = *func_out != NULL ? 1 : -1;
            break;
        }
    }
    if (buf != small) {
        PyMem_Free(buf);
    }
    return found;
}

/* Check the parts of the frame layout rule (see top of file) that are cheap to check. */
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
                     code->co_qualname);
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
                     code->co_qualname, nargs, nargs, npd_code_nfreevars(code),
                     nc->co_argcount, nc->co_kwonlyargcount, nc->co_flags,
                     npd_code_nfreevars(nc));
        return -1;
    }
    return 0;
}

/* Cache miss in compile mode: ask the callback.  Returns 1 with *func_out set (run it),
 * 0 (run the original frame), -1 (exception from the callback or a bad answer). */
static int compile_frame(PyObject *callback, npd_frame *frame, npd_extra *extra,
                         Py_ssize_t nargs, PyObject **func_out) {
    PyCodeObject *code = npd_frame_code(frame);
    PyObject *view = npd_frame_view_new(frame, nargs);
    if (view == NULL) {
        return -1;
    }
    PyObject *result = PyObject_CallOneArg(callback, view);
    Py_DECREF(view);
    if (result == NULL) {
        return -1;
    }
    if (result == Py_None) {
        Py_DECREF(result);
        return 0;
    }
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2 ||
        !PyCallable_Check(PyTuple_GET_ITEM(result, 0))) {
        PyErr_Format(PyExc_TypeError,
                     "eval-frame callback must return None or (check_fn, new_code) with a "
                     "callable check_fn; got %.100s",
                     Py_TYPE(result)->tp_name);
        Py_DECREF(result);
        return -1;
    }
    PyObject *check_fn = PyTuple_GET_ITEM(result, 0);
    PyObject *new_code = PyTuple_GET_ITEM(result, 1);
    if (check_new_code(code, new_code, nargs) < 0) {
        Py_DECREF(result);
        return -1;
    }
    /* Safety net for the contract "new_code is marked SKIP": otherwise the shadow frame would
     * itself be sent to the compiler. */
    npd_extra *new_extra = npd_extra_get_or_create((PyCodeObject *)new_code);
    if (new_extra == NULL || npd_cache_prepend(extra, check_fn, new_code, (void *)callback) < 0) {
        Py_DECREF(result);
        return -1;
    }
    new_extra->state = NPD_SKIP;
    Py_DECREF(result);
    *func_out = npd_entry_function(extra, extra->head, npd_frame_globals(frame),
                                   npd_frame_closure(frame));
    return *func_out != NULL ? 1 : -1;
}

/* A frame that passed the cheap filters: walk the cache, maybe compile, run the result. */
static PyObject *intercept(PyThreadState *ts, npd_frame *frame, npd_extra *extra) {
    PyCodeObject *code = npd_frame_code(frame);
    Py_ssize_t nargs = npd_code_nargslots(code);
    PyObject **slots = npd_frame_localsplus(frame);
    PyObject *func = NULL;
    int found = 0;

    PyObject *callback = callback_suspend();
    if (extra != NULL) {
        found = cache_lookup(extra, slots, nargs, npd_frame_globals(frame),
                             npd_frame_closure(frame), callback, &func);
    }
    if (found == 0) {
        int compile = callback != Py_False && (extra == NULL || extra->state != NPD_RUN_ONLY);
        if (compile && extra == NULL) {
            extra = npd_extra_get_or_create(code);
            if (extra == NULL) {
                found = -1;
            }
        }
        if (extra != NULL) {
            extra->misses++;
        }
        if (compile && found == 0) {
            found = compile_frame(callback, frame, extra, nargs, &func);
        }
    }
    callback_resume(callback);

    if (found < 0) {
        return NULL; /* the exception propagates to the caller of the frame */
    }
    if (found == 0) {
        return npd_eval_default(ts, frame, 0);
    }
    /* The shadow call.  No PY_VECTORCALL_ARGUMENTS_OFFSET: slots[-1] belongs to the frame.
     * The callback stays set, so frames called by the transformed code are intercepted; the
     * shadow frame itself is SKIP and goes straight to the default evaluator. */
    PyObject *result = PyObject_Vectorcall(func, slots, (size_t)nargs, NULL);
    Py_DECREF(func);
    return result;
}

static PyObject *npd_hook(PyThreadState *ts, npd_frame *frame, int throw_flag) {
    PyObject *callback = tls_callback;
    if (callback == NULL || throw_flag) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    PyCodeObject *code = npd_frame_code(frame);
    if ((code->co_flags & NPD_NEVER_FLAGS) || !(code->co_flags & CO_OPTIMIZED) ||
        npd_frame_func(frame) == NULL) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL && extra->state == NPD_SKIP) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    if (callback == Py_False && (extra == NULL || extra->head == NULL)) {
        return npd_eval_default(ts, frame, throw_flag);
    }
    if (_Py_IsFinalizing()) {
        /* Modules are being torn down: guards and the compiler would see half-dead state. */
        return npd_eval_default(ts, frame, throw_flag);
    }
    return intercept(ts, frame, extra);
}

/* ===== module functions ================================================================ */

static PyCodeObject *as_code(PyObject *obj, const char *fname) {
    if (!PyCode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s() expects a code object (e.g. f.__code__), got %.100s",
                     fname, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (PyCodeObject *)obj;
}

static PyObject *set_eval_frame(PyObject *module, PyObject *cb) {
    if (cb != Py_None && cb != Py_False && !PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError,
                     "set_eval_frame() expects None (off), False (run-only) or a callable "
                     "(compile), got %.100s",
                     Py_TYPE(cb)->tp_name);
        return NULL;
    }
    PyObject *previous = tls_callback != NULL ? tls_callback : Py_NewRef(Py_None);
    int was_active = tls_callback != NULL;
    tls_callback = cb == Py_None ? NULL : Py_NewRef(cb);
    int is_active = tls_callback != NULL;
    if (is_active && !was_active) {
        active_increment();
    } else if (was_active && !is_active) {
        active_decrement();
    }
    return previous; /* the reference the slot held */
}

static PyObject *get_eval_frame(PyObject *module, PyObject *unused) {
    return Py_NewRef(tls_callback != NULL ? tls_callback : Py_None);
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
        PyErr_SetString(PyExc_TypeError, "get_cache_entries(code, callback=None) takes 1 or 2 arguments");
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

static PyMethodDef module_methods[] = {
    {"set_eval_frame", set_eval_frame, METH_O,
     PyDoc_STR("set_eval_frame(cb) -> previous\n\nSet this thread's callback: None = off, "
               "False = run-only (use caches, never compile), a callable = compile.")},
    {"get_eval_frame", get_eval_frame, METH_NOARGS,
     PyDoc_STR("get_eval_frame() -> this thread's callback (None inside guards/callback)")},
    {"set_code_state", (PyCFunction)(void (*)(void))set_code_state, METH_FASTCALL,
     PyDoc_STR("set_code_state(code, state): DEFAULT (0), SKIP (1) or RUN_ONLY (2)")},
    {"get_code_state", get_code_state, METH_O,
     PyDoc_STR("get_code_state(code) -> DEFAULT, SKIP or RUN_ONLY")},
    {"get_cache_entries", (PyCFunction)(void (*)(void))get_cache_entries, METH_FASTCALL,
     PyDoc_STR("get_cache_entries(code, callback=None) -> [(check_fn, new_code), ...], most "
               "recently hit first; with a callback, only the entries it compiled")},
    {"reset_code", reset_code, METH_O,
     PyDoc_STR("reset_code(code): drop the code object's cache entries, state and counters")},
    {"code_stats", code_stats, METH_O,
     PyDoc_STR("code_stats(code) -> (hits, misses)")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dynamo._C",
    .m_doc = PyDoc_STR("npdynamo's PEP 523 eval-frame hook: thread-local callback, per-code "
                       "caches in co_extra, shadow-frame execution (docs/internals.md §1)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__C(void) {
    if (npd_cache_init() < 0 || PyType_Ready(&npd_FrameViewType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DEFAULT", NPD_DEFAULT) < 0 ||
        PyModule_AddIntConstant(m, "SKIP", NPD_SKIP) < 0 ||
        PyModule_AddIntConstant(m, "RUN_ONLY", NPD_RUN_ONLY) < 0 ||
        PyModule_AddObjectRef(m, "FrameView", (PyObject *)&npd_FrameViewType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
