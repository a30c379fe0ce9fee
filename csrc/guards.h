/*
 * guards.h -- `_C.GuardSet`: a compiled frame's guards as a small program evaluated in C.
 *
 * In:  a program built by dynamo/guards.py (build_check_fn) from the ordered Guard list: one
 *      check per Python check of the generated guard text, each with a value path (argument
 *      slot, globals dict, global by name, closure cell, attribute, item) and an operation
 *      (type is, is, ==, dtype, shape, c_contiguous, len, dict keys, not in, or a Python
 *      fallback function for kinds that are not lowered).
 * Out: npd_guardset_check(), called by the hook (eval_frame.c cache_lookup) straight on the
 *      frame's argument slots: no tuple, no dict, no Python frame.  The object is also callable
 *      from Python with the old signature check(*arg_slots, globals, closure) -> bool, and keeps
 *      the Python function it was made from (`python_fn`) for the self-check mode
 *      (dynamo.config.guard_self_check): the hook evaluates both and raises AssertionError,
 *      naming the guard, when they disagree.
 *
 * Semantics equal the Python text exactly: checks run in order and stop at the first false
 * one; every check fetches its value again along its path (as the text re-evaluates the
 * expression); an Exception raised by a fetch or a comparison makes the guard set fail (and
 * is cleared); any other BaseException (KeyboardInterrupt, SystemExit) propagates.
 */
#ifndef NPDYNAMO_GUARDS_H
#define NPDYNAMO_GUARDS_H

#include "cpython_compat.h"

extern PyTypeObject npd_GuardSetType;

/* Prepare the type (call once at module init).  -1 with an exception set. */
int npd_guards_init(PyObject *module);

/* Evaluate `gs` on a frame's argument slots (`nslots` of them), its globals and closure
 * (NULL: none).  1: all guards pass; 0: one fails; -1: an exception to propagate (a
 * BaseException that is not an Exception, or the self-check found a disagreement). */
int npd_guardset_check(PyObject *gs, PyObject *const *slots, Py_ssize_t nslots,
                       PyObject *globals, PyObject *closure);

/* NumPy's array struct, mirrored (stable since NumPy 1.7, unchanged in 2.x); read only
 * through an object whose type is npd_verified_ndarray_type(). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} npd_array;

#define NPD_ARRAY_C_CONTIGUOUS 0x0001

/* np.ndarray once set_ndarray_layout checked the mirror on real arrays, else NULL (borrowed) */
PyTypeObject *npd_verified_ndarray_type(void);

#endif /* NPDYNAMO_GUARDS_H */
