/*
 * cpython_compat_frames.c -- releasing an intercepted frame on CPython 3.12 (see
 * cpython_compat.h: npd_frame_release).  Empty on every other version.
 *
 * In:  a `_PyInterpreterFrame` the PEP 523 hook received and did not pass to the default
 *      evaluator (it ran a shadow frame instead, or failed before running anything).
 * Out: the frame's references dropped and its data-stack space given back, as CPython 3.12's
 *      default evaluator does when a frame returns.  Called by eval_frame.c through
 *      npd_frame_release, exactly once per such frame.
 *
 * Why here: 3.13 exports _PyEval_FrameClearAndPop, 3.12 exports none of the functions it is
 * made of, so this mirrors CPython 3.12's
 *   Python/ceval.c    _PyEvalFrameClearAndPop (the FRAME_OWNED_BY_THREAD branch),
 *   Python/frame.c    _PyFrame_ClearExceptCode,
 *   Python/pystate.c  _PyThreadState_PopFrame (and Objects/obmalloc.c _PyObject_VirtualFree),
 * narrowed to the only frames it is given: thread-owned, never started, no frame object
 * (npd_frame_releasable is checked before intercepting), and on top of the data stack (every
 * frame pushed after it, the shadow frame's included, has been popped).  Checked against
 * CPython 3.12.1's sources; the #error below makes anyone building for another minor version
 * re-check them (the data-stack chunk layout is private and may change).
 */
#include "cpython_compat.h"

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000

#include <stddef.h>

/* The layout this file reads (3.12's cpython/pystate.h _PyStackChunk, pycore_frame.h). */
_Static_assert(offsetof(_PyStackChunk, data) == 3 * sizeof(void *),
               "CPython 3.12 _PyStackChunk layout changed: re-check cpython_compat_frames.c");
_Static_assert(offsetof(_PyInterpreterFrame, f_code) == 0,
               "CPython 3.12 _PyInterpreterFrame layout changed: re-check this file");

void npd_frame_release_312(PyThreadState *ts, npd_frame *f) {
    /* _PyFrame_ClearExceptCode: frame_obj is NULL (never started); nothing was pushed on the
     * evaluation stack, so stacktop counts exactly the local slots. */
    for (int i = 0; i < f->stacktop; i++) {
        Py_XDECREF(f->localsplus[i]);
    }
    Py_XDECREF(f->f_locals);
    Py_DECREF(f->f_funcobj);
    Py_DECREF(f->f_code);
    /* _PyThreadState_PopFrame: a frame at the start of a chunk frees the chunk (the root
     * chunk never holds a frame at data[0]: push_chunk skips that slot, so `previous` is set;
     * checked anyway). */
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0] && chunk->previous != NULL) {
        _PyStackChunk *previous = chunk->previous;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        ts->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        PyObjectArenaAllocator arena; /* _PyObject_VirtualFree */
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        ts->datastack_top = base;
    }
}

#elif PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000
/* 3.13: _PyEval_FrameClearAndPop is exported; nothing to mirror. */
#elif PY_VERSION_HEX >= 0x030C0000
#error "cpython_compat_frames.c was checked against CPython 3.12 and 3.13 only"
#endif

/* ISO C forbids an empty translation unit. */
typedef int npd_compat_frames_unused;
