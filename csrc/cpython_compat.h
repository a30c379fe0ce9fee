/*
 * cpython_compat.h -- the only place that knows CPython's private frame and thread internals.
 *
 * In:  Python.h plus (with Py_BUILD_CORE defined only around them) CPython's internal frame,
 *      ceval and interpreter headers of the version being compiled against.
 * Out: a few typedefs and inline helpers used by eval_frame.c and frame_view.c, so the rest of
 *      csrc/ is version-free.  Supported: CPython 3.10, 3.11, 3.12 and 3.13 (not the
 *      free-threaded build).  The 3.12 frame clear/pop lives in cpython_compat_frames.c.
 *
 * Facts relied on, per version (Include/internal/pycore_frame.h, Python/ceval.c of each):
 *  - The PEP 523 function receives a `PyFrameObject *` on 3.10 and a `_PyInterpreterFrame *`
 *    (not a PyObject) on 3.11+.
 *  - Who releases the frame when the hook does not call the default evaluator:
 *      3.10  the caller (_PyEval_Vector: Py_DECREF of the heap frame object);
 *      3.11  the caller (_PyEval_Vector: _PyEvalFrameClearAndPop after the eval function);
 *      3.12+ the evaluator: the default one clears and pops the frame when it returns, so a
 *            hook that runs something else instead must do it itself (npd_frame_release),
 *            exactly once, after which the frame must not be touched.
 *  - Frame state at hook time:
 *      3.11+ *incomplete*: the arguments are bound into the first local slots (positional,
 *            keyword-only, then the *args tuple, then the **kwargs dict), the prefix
 *            (COPY_FREE_VARS / MAKE_CELL) has not run; free variables are read from the
 *            function's closure.
 *      3.10  *complete*: cells were made and an argument that is also a cell variable was
 *            moved into its cell (its slot is NULL, co_cell2arg says which); the closure's
 *            cells are in the free slots; there is no function object (npd_frame_func NULL).
 *  - Recursion: 3.10 counts recursion_depth up to the limit, 3.11 counts recursion_remaining
 *    down; 3.12+ also keep a C budget (c_recursion_remaining) that every C-level entry into
 *    the evaluator charges: with a PEP 523 function installed Python-to-Python calls are not
 *    inlined, so each costs C budget (2 units per call, of 3.12.1's 1500).  (Not lent back:
 *    a frame entered from C -- map(f, ...) -- is charged by plain Python too, the hook cannot
 *    tell the two apart, and a budget that stops counting C-level recursion let 3.13 overflow
 *    the C stack where plain Python raises RecursionError.)
 *  - The C stack: 3.10 nests C frames for every Python call (plain 3.10 dies with SIGSEGV
 *    near 20,000 levels on 8 MiB); 3.11+ nest them only for calls from C or, while a PEP 523
 *    function is installed, for every call.
 *  - sys.monitoring (3.12+) tools are not visible in c_tracefunc/c_profilefunc; they are the
 *    interpreter's global monitors plus each code object's local monitors.
 */
#ifndef NPDYNAMO_CPYTHON_COMPAT_H
#define NPDYNAMO_CPYTHON_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h> /* offsetof: Python.h includes it only since 3.11 */

#if PY_VERSION_HEX < 0x030A0000 || PY_VERSION_HEX >= 0x030E0000
#error "npdynamo's dynamo._C supports CPython 3.10 to 3.13 (the frame layout differs elsewhere)"
#endif
#ifdef Py_GIL_DISABLED
#error "npdynamo's dynamo._C does not support the free-threaded (no-GIL) CPython build"
#endif

#if PY_VERSION_HEX >= 0x030B0000
/* pycore headers refuse to compile without Py_BUILD_CORE; define it only for these includes
 * so the rest of the extension sees the ordinary API. */
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030C0000
/* 3.12.1's pycore_interp.h redeclares PyObject_GC_IsFinalized static through this macro
 * (cpython#105268); without it the header does not compile in an extension. */
#undef _PyGC_FINALIZED
#include "internal/pycore_interp.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_ceval.h"
#endif
#undef Py_BUILD_CORE
typedef struct _PyInterpreterFrame npd_frame;
#else
#include <frameobject.h>
typedef PyFrameObject npd_frame;
#endif

/* ---- weak references (guards.c: a guard's weakly held class or object) ---------------------
 * Whether weak reference `ref` refers to `obj` now (0 once its referent died; `obj` is never
 * None).  3.13 deprecates PyWeakref_GetObject (a borrowed referent) for PyWeakref_GetRef. */
static inline int npd_weakref_is(PyObject *ref, PyObject *obj) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target = NULL;
    if (PyWeakref_GetRef(ref, &target) < 0) {
        return -1;
    }
    int same = target != NULL && target == obj;
    Py_XDECREF(target);
    return same;
#else
    PyObject *target = PyWeakref_GetObject(ref);
    return target == NULL ? -1 : (target != Py_None && target == obj);
#endif
}

/* ---- the C stack (eval_frame.c: the stack check, deep mode) --------------------------------
 *
 * The hook compares its own stack address with the thread's real stack (pthread_getattr_np:
 * `size` bytes, growing down) on every frame it sees, before anything else:
 *  - less than npd_stack_hard_margin(size) left: the frame does not run, RecursionError is
 *    raised (CPython 3.10/3.11 would overflow the C stack and die with SIGSEGV a little
 *    further down; the margin leaves room for what a frame does in C between two calls);
 *  - less than npd_stack_deep_margin(size) left: "deep mode", nothing is captured any more
 *    below this frame.  3.11+ remove the hook until the frame returns (NPD_DEEP_REMOVES_HOOK):
 *    CPython then inlines Python-to-Python calls again, so a recursion allowed by
 *    sys.setrecursionlimit runs in a flat C stack as without npdynamo (the hard check then
 *    only matters for tiny thread stacks).  3.10 never inlines: every Python call costs ~420
 *    bytes of C stack, with or without a hook, and a captured one up to about twice that.
 *    There the hook stays installed and passes every deep frame straight to the default
 *    evaluator (a tail call: no C stack of its own), so the hard check still sees every call;
 *    and capture stops early, once 1/NPD_STACK_CAPTURE_PART of the stack is used (1 MiB of 8:
 *    a captured recursion as deep as the default limit fits): the depth plain 3.10 reaches
 *    shrinks by under 10% (8%, 20,100 -> 18,400 levels, when every level is a cache hit
 *    running a shadow frame; tests/test_c_versions.py), and a compile started in the captured
 *    part has the rest of the stack to itself. */
#define NPD_STACK_HARD_MARGIN ((size_t)256 << 10)
static inline size_t npd_stack_hard_margin(size_t size) {
    return size / 8 < NPD_STACK_HARD_MARGIN ? size / 8 : NPD_STACK_HARD_MARGIN;
}
#if PY_VERSION_HEX >= 0x030B0000
#define NPD_DEEP_REMOVES_HOOK 1
#define NPD_STACK_MARGIN ((size_t)1 << 20)
static inline size_t npd_stack_deep_margin(size_t size) {
    return size / 4 < NPD_STACK_MARGIN ? size / 4 : NPD_STACK_MARGIN;
}
#else
#define NPD_DEEP_REMOVES_HOOK 0
#define NPD_STACK_CAPTURE_PART 8
static inline size_t npd_stack_deep_margin(size_t size) {
    return size - size / NPD_STACK_CAPTURE_PART;
}
#endif

/* ---- the PEP 523 slot ------------------------------------------------------------------ */

static inline _PyFrameEvalFunction npd_get_eval_frame_func(void) {
    return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}

static inline void npd_set_eval_frame_func(_PyFrameEvalFunction fn) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), fn);
}

/* CPython's own evaluator: what every frame we do not intercept goes to.  It also releases
 * the frame (3.12+), so after it nothing may call npd_frame_release. */
static inline PyObject *npd_eval_default(PyThreadState *ts, npd_frame *f, int throw_flag) {
    return _PyEval_EvalFrameDefault(ts, f, throw_flag);
}

/* ---- thread and interpreter state ------------------------------------------------------ */

static inline int npd_is_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Whether events of `code` reach a trace or profile function (sys.settrace / sys.setprofile)
 * on this thread or, 3.12+, a sys.monitoring tool (global events, or local events set on
 * this code object): debuggers, coverage, profilers.  They must see the original code. */
static inline int npd_thread_is_traced(PyThreadState *ts, PyCodeObject *code) {
    if (ts->c_tracefunc != NULL || ts->c_profilefunc != NULL) {
        return 1;
    }
#if PY_VERSION_HEX >= 0x030C0000
    const uint8_t *tools = ts->interp->monitors.tools;
    uint8_t any = 0;
    for (int e = 0; e < _PY_MONITORING_UNGROUPED_EVENTS; e++) {
        any |= tools[e];
    }
    if (code->_co_monitoring != NULL) {
        const uint8_t *local = code->_co_monitoring->local_monitors.tools;
        for (int e = 0; e < _PY_MONITORING_LOCAL_EVENTS; e++) { /* 3.13: the array size */
            any |= local[e];
        }
    }
    return any != 0;
#else
    return 0;
#endif
}

/* How many more Python frames fit under the recursion limit.  3.12+: also the C budget at
 * two units per frame entered from C, whichever runs out first. */
static inline int npd_recursion_remaining(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030C0000
    int c = ts->c_recursion_remaining / 2;
    return c < ts->py_recursion_remaining ? c : ts->py_recursion_remaining;
#elif PY_VERSION_HEX >= 0x030B0000
    return ts->recursion_remaining;
#else
    return Py_GetRecursionLimit() - ts->recursion_depth;
#endif
}

/* Whether fewer than `margin` units of the C recursion budget (3.12+) are left: the frame
 * should then run with the hook removed, so the calls below it are inlined again and stop
 * charging it (eval_frame.c's deep mode).  Always 0 before 3.12 (no separate C budget). */
static inline int npd_c_recursion_low(PyThreadState *ts, int margin) {
#if PY_VERSION_HEX >= 0x030C0000
    return ts->c_recursion_remaining < margin;
#else
    (void)ts;
    (void)margin;
    return 0;
#endif
}

/* The C recursion budget left (3.12+), or -1 (no separate budget before 3.12). */
static inline int npd_c_recursion_left(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030C0000
    return ts->c_recursion_remaining;
#else
    (void)ts;
    return -1;
#endif
}

/* The Python frame that called the running C function (borrowed), or NULL. */
static inline npd_frame *npd_current_frame(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
    return ts->cframe->current_frame;
#else
    return ts->frame;
#endif
}

/* Whether frame `f`'s frame object is referenced from outside the running frame: by a
 * traceback, a local, a callee frame's f_back (`sys._getframe()` in a callee whose frame
 * outlived its call), a tracer.  3.11+: the object exists (frame_obj) and the interpreter
 * frame's own reference is not the only one.  3.10: every frame is an object, held once by
 * the call that evaluates it (_PyEval_Vector). */
static inline int npd_frame_object_shared(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030B0000
    return f->frame_obj != NULL && Py_REFCNT(f->frame_obj) > 1;
#else
    return Py_REFCNT(f) > 1;
#endif
}

/* ---- frame fields ---------------------------------------------------------------------- */

static inline PyCodeObject *npd_frame_code(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030D0000
    return (PyCodeObject *)f->f_executable;
#else
    return f->f_code;
#endif
}

/* The function being called, or NULL: frames of module/class bodies, and every frame on 3.10,
 * whose frames carry no function (use npd_frame_is_call_of to recognise a call's frame). */
static inline PyFunctionObject *npd_frame_func(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030C0000
    return (PyFunctionObject *)f->f_funcobj;
#elif PY_VERSION_HEX >= 0x030B0000
    return f->f_func;
#else
    (void)f;
    return NULL;
#endif
}

/* Whether the frame is a function call's (not a module or class body run by exec). */
static inline int npd_frame_is_function(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030B0000
    return npd_frame_func(f) != NULL;
#else
    (void)f;
    return 1; /* 3.10: callers already require CO_OPTIMIZED */
#endif
}

/* Whether `f` is the frame a call of the plain function `func` just started. */
static inline int npd_frame_is_call_of(npd_frame *f, PyObject *func) {
#if PY_VERSION_HEX >= 0x030B0000
    return (PyObject *)npd_frame_func(f) == func;
#else
    PyFunctionObject *fn = (PyFunctionObject *)func;
    return (PyObject *)f->f_code == fn->func_code && f->f_globals == fn->func_globals;
#endif
}

static inline PyObject *npd_frame_globals(npd_frame *f) { return f->f_globals; }
static inline PyObject *npd_frame_builtins(npd_frame *f) { return f->f_builtins; }

/* The `nargs` bound argument values (borrowed, owned by the frame until it is released).
 * 3.11+: the frame's first slots.  3.10: the same unless an argument is also a cell variable:
 * then the slots are copied to `buf` (room for `nbuf`) with the cell contents filled in;
 * NULL if they do not fit (the caller runs the frame unmodified). */
static inline PyObject **npd_frame_args(npd_frame *f, Py_ssize_t nargs, PyObject **buf,
                                        Py_ssize_t nbuf) {
#if PY_VERSION_HEX >= 0x030B0000
    (void)nargs;
    (void)buf;
    (void)nbuf;
    return f->localsplus;
#else
    PyCodeObject *co = f->f_code;
    if (co->co_cell2arg == NULL) {
        return f->f_localsplus;
    }
    if (nargs > nbuf) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        buf[i] = f->f_localsplus[i];
    }
    Py_ssize_t ncells = PyTuple_GET_SIZE(co->co_cellvars);
    for (Py_ssize_t i = 0; i < ncells; i++) {
        Py_ssize_t arg = co->co_cell2arg[i];
        if (arg != CO_CELL_NOT_AN_ARG && arg < nargs) {
            PyObject *cell = f->f_localsplus[co->co_nlocals + i];
            buf[arg] = cell != NULL && PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
        }
    }
    return buf;
#endif
}

/* 3.10: a continuation function (resume, loop or try/with body; dynamo/resume.py) receives the
 * original frame's cells as arguments named like its own cell variables.  3.11+ make each the
 * variable's cell with MAKE_CELL in the continuation's prologue; 3.10 has no MAKE_CELL, and its
 * frame start has already put each such argument into a new cell (co_cell2arg).  Called first
 * thing in the running frame (`_C.adopt_cells()`): each of those slots gets the argument -- the
 * original cell -- instead, so the continuation shares the frame's cells (an emptied one reads
 * as UnboundLocalError, a closure made later sees later writes).  0, or -1 with an exception
 * (no Python frame, or an argument that is not a cell: not a continuation's prologue).
 * 3.11+: nothing to do. */
static inline int npd_adopt_passed_cells(void) {
#if PY_VERSION_HEX < 0x030B0000
    PyFrameObject *f = PyEval_GetFrame();
    if (f == NULL) {
        PyErr_SetString(PyExc_SystemError, "adopt_cells() needs a running Python frame");
        return -1;
    }
    PyCodeObject *co = f->f_code;
    if (co->co_cell2arg == NULL) {
        return 0;
    }
    Py_ssize_t ncells = PyTuple_GET_SIZE(co->co_cellvars);
    for (Py_ssize_t i = 0; i < ncells; i++) {
        if (co->co_cell2arg[i] == CO_CELL_NOT_AN_ARG) {
            continue;
        }
        PyObject **slot = &f->f_localsplus[co->co_nlocals + i];
        PyObject *made = *slot;
        PyObject *passed = made != NULL && PyCell_Check(made) ? PyCell_GET(made) : NULL;
        if (passed == NULL || !PyCell_Check(passed)) {
            PyErr_Format(PyExc_SystemError,
                         "adopt_cells(): the argument %R of %U is not a cell",
                         PyTuple_GET_ITEM(co->co_cellvars, i), co->co_name);
            return -1;
        }
        Py_INCREF(passed);
        *slot = passed;
        Py_DECREF(made);
    }
#endif
    return 0;
}

/* Drop the frame's own references to its `nargs` argument values (the frame that replaces it
 * holds its own).  Only for a frame that will never be evaluated. */
static inline void npd_frame_drop_args(npd_frame *f, Py_ssize_t nargs) {
#if PY_VERSION_HEX >= 0x030B0000
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_CLEAR(f->localsplus[i]);
    }
#else
    PyCodeObject *co = f->f_code;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_CLEAR(f->f_localsplus[i]);
    }
    if (co->co_cell2arg != NULL) {
        /* The cells were made for this frame only (no code ran yet: no closure has them). */
        Py_ssize_t ncells = PyTuple_GET_SIZE(co->co_cellvars);
        for (Py_ssize_t i = 0; i < ncells; i++) {
            PyObject *cell = f->f_localsplus[co->co_nlocals + i];
            if (co->co_cell2arg[i] != CO_CELL_NOT_AN_ARG && cell != NULL && PyCell_Check(cell)) {
                PyObject *old = PyCell_GET(cell);
                PyCell_SET(cell, NULL);
                Py_XDECREF(old);
            }
        }
    }
#endif
}

/* The function's closure tuple: new reference, or NULL without an exception when the code
 * has no free variables; NULL with an exception on failure (3.10 builds the tuple). */
static inline PyObject *npd_frame_closure(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030B0000
    PyFunctionObject *fn = npd_frame_func(f);
    return fn == NULL ? NULL : Py_XNewRef(fn->func_closure);
#else
    PyCodeObject *co = f->f_code;
    Py_ssize_t nfree = PyTuple_GET_SIZE(co->co_freevars);
    if (nfree == 0) {
        return NULL;
    }
    PyObject *tuple = PyTuple_New(nfree);
    if (tuple == NULL) {
        return NULL;
    }
    PyObject **free = f->f_localsplus + co->co_nlocals + PyTuple_GET_SIZE(co->co_cellvars);
    for (Py_ssize_t j = 0; j < nfree; j++) {
        PyTuple_SET_ITEM(tuple, j, Py_NewRef(free[j] != NULL ? free[j] : Py_None));
    }
    return tuple;
#endif
}

/* Whether npd_frame_release can release this frame (3.12+: a thread-owned frame that never
 * ran and has no frame object; always the case for frames the hook sees first, checked
 * because a wrong release corrupts the data stack). */
static inline int npd_frame_releasable(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030C0000
    return f->owner == FRAME_OWNED_BY_THREAD && f->frame_obj == NULL;
#else
    (void)f;
    return 1;
#endif
}

/* Whether the hook may refuse to run this frame (RecursionError, the frame never starts) as
 * CPython's own recursion check at the evaluator's entry does: 3.10 every frame (the caller
 * or the generator releases it, whatever the evaluator returns); 3.11+ a call's frame owned
 * by the thread (a generator's is left to the evaluator), releasable on 3.12+. */
static inline int npd_frame_refusable(npd_frame *f) {
#if PY_VERSION_HEX >= 0x030B0000
    return f->owner == FRAME_OWNED_BY_THREAD && npd_frame_releasable(f);
#else
    (void)f;
    return 1;
#endif
}

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
void npd_frame_release_312(PyThreadState *ts, npd_frame *f); /* cpython_compat_frames.c */
#endif

/* The hook ran something else instead of the frame: release it as the default evaluator would
 * have (3.12+), exactly once, on every such path.  No-op on 3.10/3.11 (the caller does it). */
static inline void npd_frame_release(PyThreadState *ts, npd_frame *f) {
#if PY_VERSION_HEX >= 0x030D0000
    _PyEval_FrameClearAndPop(ts, f);
#elif PY_VERSION_HEX >= 0x030C0000
    npd_frame_release_312(ts, f);
#else
    (void)ts;
    (void)f;
#endif
}

/* ---- code fields ----------------------------------------------------------------------- */

/* Number of local slots CPython fills when binding a call: positional + keyword-only
 * parameters, plus one slot each for *args and **kwargs. */
static inline Py_ssize_t npd_code_nargslots(PyCodeObject *co) {
    return (Py_ssize_t)co->co_argcount + co->co_kwonlyargcount
           + ((co->co_flags & CO_VARARGS) ? 1 : 0) + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* Name of argument slot i (i < npd_code_nargslots), borrowed. */
static inline PyObject *npd_code_arg_name(PyCodeObject *co, Py_ssize_t i) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyTuple_GET_ITEM(co->co_localsplusnames, i);
#else
    return PyTuple_GET_ITEM(co->co_varnames, i);
#endif
}

static inline int npd_code_nfreevars(PyCodeObject *co) {
#if PY_VERSION_HEX >= 0x030B0000
    return co->co_nfreevars;
#else
    return (int)PyTuple_GET_SIZE(co->co_freevars);
#endif
}

/* Name of free variable j (closure-tuple order), borrowed. */
static inline PyObject *npd_code_free_name(PyCodeObject *co, Py_ssize_t j) {
#if PY_VERSION_HEX >= 0x030B0000
    return PyTuple_GET_ITEM(co->co_localsplusnames, co->co_nlocalsplus - co->co_nfreevars + j);
#else
    return PyTuple_GET_ITEM(co->co_freevars, j);
#endif
}

/* The qualified name for messages (3.10 code objects have only co_name), borrowed. */
static inline PyObject *npd_code_qualname(PyCodeObject *co) {
#if PY_VERSION_HEX >= 0x030B0000
    return co->co_qualname;
#else
    return co->co_name;
#endif
}

#endif /* NPDYNAMO_CPYTHON_COMPAT_H */
