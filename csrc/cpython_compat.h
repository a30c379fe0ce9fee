/*
 * cpython_compat.h -- the only place that knows CPython's private frame internals.
 *
 * In:  Python.h plus (with Py_BUILD_CORE defined only around it) internal/pycore_frame.h.
 * Out: a few typedefs and inline helpers used by eval_frame.c and cache.c, so that supporting
 *      another CPython version means editing this file and nothing else.
 *
 * CPython 3.11 facts relied on (Include/internal/pycore_frame.h, Python/ceval.c):
 *  - A PEP 523 function receives a `_PyInterpreterFrame *` (not a PyObject).  The frame has
 *    been pushed on the thread's data stack by `_PyEvalFramePushAndInit`; its caller
 *    (`_PyEval_Vector` or the generator machinery) clears and pops it after our function
 *    returns, whatever we did.  So we may leave the frame untouched (3.12 changed this).
 *  - At hook time the frame is *incomplete*: the arguments are bound into the first local
 *    slots (positional, keyword-only, then the *args tuple, then the **kwargs dict), but the
 *    prefix instructions COPY_FREE_VARS / MAKE_CELL have not run.  Only the argument slots are
 *    valid; free variables must be read from `f_func->func_closure`.
 *  - `f_func`, `f_code` are strong references held by the frame; `f_globals`, `f_builtins`
 *    are borrowed from `f_func`.
 */
#ifndef NPDYNAMO_CPYTHON_COMPAT_H
#define NPDYNAMO_CPYTHON_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "npdynamo's dynamo._C supports CPython 3.11 only (the frame layout differs elsewhere)"
#endif

/* pycore headers refuse to compile without Py_BUILD_CORE; define it only for this include so
 * the rest of the extension sees the ordinary (limited-to-public) API. */
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

typedef struct _PyInterpreterFrame npd_frame;

/* ---- the PEP 523 slot ------------------------------------------------------------------ */

static inline _PyFrameEvalFunction npd_get_eval_frame_func(void) {
    return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}

static inline void npd_set_eval_frame_func(_PyFrameEvalFunction fn) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), fn);
}

/* CPython's own evaluator: what every frame we do not intercept goes to. */
static inline PyObject *npd_eval_default(PyThreadState *ts, npd_frame *f, int throw_flag) {
    return _PyEval_EvalFrameDefault(ts, f, throw_flag);
}

/* ---- thread state ---------------------------------------------------------------------- */

/* A trace or profile function (sys.settrace / sys.setprofile, debuggers, coverage, profilers)
 * is set on this thread.  3.12 replaced these fields with sys.monitoring. */
static inline int npd_thread_is_traced(PyThreadState *ts) {
    return ts->c_tracefunc != NULL || ts->c_profilefunc != NULL;
}

/* How many more Python frames (or Py_EnterRecursiveCall levels) fit under the recursion
 * limit; 3.11 counts both in one budget. */
static inline int npd_recursion_remaining(PyThreadState *ts) {
    return ts->recursion_remaining;
}

/* ---- frame fields ---------------------------------------------------------------------- */

static inline PyCodeObject *npd_frame_code(npd_frame *f) { return f->f_code; }
static inline PyFunctionObject *npd_frame_func(npd_frame *f) { return f->f_func; }
static inline PyObject *npd_frame_globals(npd_frame *f) { return f->f_globals; }
static inline PyObject *npd_frame_builtins(npd_frame *f) { return f->f_builtins; }
/* The first npd_code_nargslots(code) entries are the bound arguments (see header comment). */
static inline PyObject **npd_frame_localsplus(npd_frame *f) { return f->localsplus; }

/* The function's closure tuple, or NULL. */
static inline PyObject *npd_frame_closure(npd_frame *f) {
    return f->f_func == NULL ? NULL : f->f_func->func_closure;
}

/* ---- code fields ----------------------------------------------------------------------- */

/* Number of local slots CPython fills when binding a call: positional + keyword-only
 * parameters, plus one slot each for *args and **kwargs. */
static inline Py_ssize_t npd_code_nargslots(PyCodeObject *co) {
    return (Py_ssize_t)co->co_argcount + co->co_kwonlyargcount
           + ((co->co_flags & CO_VARARGS) ? 1 : 0) + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

/* Tuple of all local names: arguments and other locals, then cells, then free variables
 * (3.11 stores them in one tuple; a cell that is also an argument appears once). */
static inline PyObject *npd_code_localsplusnames(PyCodeObject *co) {
    return co->co_localsplusnames;
}

static inline int npd_code_nlocalsplus(PyCodeObject *co) { return co->co_nlocalsplus; }
static inline int npd_code_nfreevars(PyCodeObject *co) { return co->co_nfreevars; }

#endif /* NPDYNAMO_CPYTHON_COMPAT_H */
