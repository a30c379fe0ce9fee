/*
 * gc_quiet.h -- keep a compile out of the cycle collector's view (issue 8).
 *
 * In:  eval_frame.c's compile_frame brackets the compile callback with npd_gc_quiet_begin/end;
 *      dynamo.reset() calls npd_gc_quiet_release (as _C.gc_release).
 * Out: the program sees gc.get_count(), gc.get_objects(), automatic collections and
 *      gc.callbacks as if no compile had happened in the middle of it.  See gc_quiet.c.
 */
#ifndef NPDYNAMO_GC_QUIET_H
#define NPDYNAMO_GC_QUIET_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPD_GC_FREELISTS 26 /* lists, dicts, tuples of 1..24 items */

/* What npd_gc_quiet_begin saved; passed back to npd_gc_quiet_end. */
typedef struct {
    int active;              /* 0: begin did nothing (nested, collecting, not initialised) */
    int was_enabled;         /* automatic collection was on before (gc.isenabled()) */
    int count0;              /* the young generation's count before */
    int pending;             /* 3.12+: a collection was scheduled and not yet run */
    unsigned long switches;  /* the GIL's switch counter before */
    int freelists[NPD_GC_FREELISTS]; /* the free lists' lengths before (gc_quiet.c), or -1 */
} npd_gc_quiet;

/* Create the marker object.  Call once at module init; -1 with an exception set. */
int npd_gc_quiet_init(void);

/* Before the compile: automatic collection off, the young generation's state saved.  Never
 * raises, never runs Python code. */
void npd_gc_quiet_begin(npd_gc_quiet *q);

/* After the compile.  `hide`: the compile succeeded, so the objects it left alive are its own
 * (with an exception propagating to the user they may be the user's: then nothing is moved).
 * Never raises, never runs Python code. */
void npd_gc_quiet_end(npd_gc_quiet *q, int hide);

/* Give every object hidden so far back to the oldest generation, where the collector sees (and
 * frees, if they became cyclic garbage) them again.  Returns how many were moved. */
Py_ssize_t npd_gc_quiet_release(void);

/* A function object made for one call (a resume function, a closure's shadow function) that
 * only the caller holds: untrack it and take it out of the young generation's count while it
 * runs.  Returns how to undo it, for npd_gc_unhide_transient (call that before dropping the
 * caller's reference).  If it survives the call (a traceback's frame holds it), it is tracked
 * again, so the collector sees any cycle through it. */
int npd_gc_hide_transient(PyObject *fn);
void npd_gc_unhide_transient(PyObject *fn, int how);

/* Whether a collection is running and `code` is the code of one of its gc.callbacks (so a
 * frame of it was started by the collector: plain Python allocates nothing around it). */
int npd_gc_callback_running(PyCodeObject *code);

/* Number of objects currently hidden (for tests). */
Py_ssize_t npd_gc_quiet_hidden(void);

#endif
