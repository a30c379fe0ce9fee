/*
 * gc_quiet.c -- keep a compile out of the cycle collector's view (issue 8).
 *
 * In:  eval_frame.c's intercept_with, around a cache miss that may compile (the Python compiler,
 *      run in the middle of the user's program: at a graph break the resume function is
 *      compiled on its first call); finish_tail_calls and the shadow call for the function
 *      objects made per call (npd_gc_hide_transient); dynamo.reset() through _C.gc_release.
 * Out: what the user's program can observe of the garbage collector is what plain Python
 *      shows: (1) no automatic collection starts inside the compile (its gc.callbacks would
 *      run, it would move the user's young objects to an older generation: test_gc's
 *      test_bug1055820c); (2) afterwards the young generation's count and the free lists are
 *      what they were (gc.get_count(): test_get_count); (3) the objects the compile leaves alive
 *      (cache entry, guards, resume functions' code info: ~100 containers) are in no
 *      generation, so gc.get_objects() does not grow (test_get_objects_arguments, test_descr's
 *      test_slots).
 *
 * How (CPython 3.10-3.13 share the layout used here: interp->gc with generations[3], the
 * young generation's list `generation0` and `count`; PyGC_Head's _gc_next/_gc_prev, flags in
 * _gc_prev's two low bits):
 *  - Automatic collection is switched off with PyGC_Disable and back on only if the user had
 *    it on and nobody switched it on meanwhile (a gc.disable() from the user is kept).  On
 *    3.12+ allocation only schedules a collection (an eval-breaker flag; it runs at the next
 *    check, which would be inside the compiler): a collection scheduled before the compile is
 *    unscheduled during it and scheduled again after, so it runs where it would have.
 *  - New objects are appended to the young generation's list.  A marker object (ours, tracked)
 *    is moved to its end before the compile; afterwards everything behind the marker was
 *    tracked during the compile and is still alive: those are moved to a list of our own
 *    (`hidden`), which no collection looks at, like the permanent generation but invisible to
 *    gc.get_freeze_count()/unfreeze.  Objects referenced from a hidden object are treated as
 *    reachable from outside by every collection (exactly as for older generations), so
 *    nothing reachable is ever freed; a hidden object that dies by reference counting unlinks
 *    itself.  What is not freed is cyclic garbage among hidden objects: dynamo.reset() (and a
 *    cap, HIDDEN_CAP) gives all hidden objects back to the oldest generation.
 *  - Not hidden (see "which new objects to hide"): the compile's cyclic garbage (it may pin
 *    the user's objects), dicts something older refers to (a user object's __dict__ made
 *    while the compiler read it), frame objects (a running frame of the user's that the
 *    compiler materialised belongs to the user), generators and coroutines.
 *  - Nothing is hidden and the count is not restored when another thread ran Python code
 *    during the compile (the GIL's switch counter moved: its objects are behind the marker
 *    too), when a collection ran anyway (an explicit gc.collect(): the marker left the young
 *    generation) or when the compile raised (the exception and its traceback are the user's
 *    now).  Then the objects stay young, as before.
 * Known limits: another thread that calls gc.isenabled() while this one compiles sees False,
 * and a gc.disable() it makes during that window is undone (a gc.enable() is kept).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define Py_BUILD_CORE 1
/* objimpl.h defines it for extensions, pycore_gc.h again (and 3.12.1's pycore_interp.h needs
 * it undefined: see cpython_compat.h); this file does not use it */
#undef _PyGC_FINALIZED
#include "internal/pycore_interp.h" /* interp->gc, interp->ceval */
#include "internal/pycore_gc.h"
#if PY_VERSION_HEX < 0x030C0000
#include "internal/pycore_runtime.h" /* _PyRuntime.ceval.gil */
#endif
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#include "internal/pycore_list.h"  /* the free lists' sizes */
#include "internal/pycore_tuple.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_ceval.h" /* eval-breaker bits */
#endif
#undef Py_BUILD_CORE

#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_Check */
#endif
#include "gc_quiet.h"

/* More hidden objects than this (counted as moved, not as alive) go back to the oldest
 * generation at the end of a compile, so cyclic garbage among them cannot grow unbounded. */
#define HIDDEN_CAP 200000

static PyGC_Head hidden = {(uintptr_t)&hidden, (uintptr_t)&hidden};
static Py_ssize_t hidden_moved = 0;
static PyObject *marker = NULL; /* a tracked object of ours; in `hidden` between compiles */
static int busy = 0;
static int marker_young = 0; /* the marker is in the young generation (a compile runs) */

/* ---- list operations (as CPython's gc: flags in the low bits of _gc_prev are kept) ------- */

#define GC_PREV_MASK (((uintptr_t)-1) << 2)

static inline PyGC_Head *gc_next(PyGC_Head *g) { return (PyGC_Head *)g->_gc_next; }
static inline PyGC_Head *gc_prev(PyGC_Head *g) {
    return (PyGC_Head *)(g->_gc_prev & GC_PREV_MASK);
}
static inline void gc_set_prev(PyGC_Head *g, PyGC_Head *p) {
    g->_gc_prev = (g->_gc_prev & ~GC_PREV_MASK) | (uintptr_t)p;
}
static inline void gc_set_next(PyGC_Head *g, PyGC_Head *n) { g->_gc_next = (uintptr_t)n; }

static inline PyGC_Head *as_gc(PyObject *op) { return ((PyGC_Head *)op) - 1; }
static inline PyObject *from_gc(PyGC_Head *g) { return (PyObject *)(g + 1); }

/* Move `node` from the list it is in to the end of `list`. */
static void gc_move(PyGC_Head *node, PyGC_Head *list) {
    PyGC_Head *prev = gc_prev(node), *next = gc_next(node);
    gc_set_next(prev, next);
    gc_set_prev(next, prev);
    PyGC_Head *last = gc_prev(list);
    gc_set_next(last, node);
    gc_set_prev(node, last);
    gc_set_next(node, list);
    gc_set_prev(list, node);
}

/* Append all of `from` to `to`; `from` becomes empty. */
static void gc_merge(PyGC_Head *from, PyGC_Head *to) {
    if (gc_next(from) == from) {
        return;
    }
    PyGC_Head *last = gc_prev(to), *first = gc_next(from), *tail = gc_prev(from);
    gc_set_next(last, first);
    gc_set_prev(first, last);
    gc_set_next(tail, to);
    gc_set_prev(to, tail);
    gc_set_next(from, from);
    gc_set_prev(from, from);
}

/* ---- per-version state ------------------------------------------------------------------ */

static inline struct _gc_runtime_state *gc_state(PyThreadState *ts) {
    return &ts->interp->gc;
}

static inline unsigned long gil_switches(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030C0000
    return ts->interp->ceval.gil->switch_number;
#else
    return _PyRuntime.ceval.gil.switch_number;
#endif
}

/* 3.12+: whether a collection is scheduled (and unschedule it). */
static int take_pending(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030D0000
    if (_Py_eval_breaker_bit_is_set(ts, _PY_GC_SCHEDULED_BIT)) {
        _Py_unset_eval_breaker_bit(ts, _PY_GC_SCHEDULED_BIT);
        return 1;
    }
    return 0;
#elif PY_VERSION_HEX >= 0x030C0000
    /* (eval_breaker stays as it is: the next check finds nothing to do and recomputes it) */
    if (_Py_atomic_load_relaxed(&ts->interp->ceval.gc_scheduled)) {
        _Py_atomic_store_relaxed(&ts->interp->ceval.gc_scheduled, 0);
        return 1;
    }
    return 0;
#else
    return 0; /* 3.10/3.11 collect inside the allocation that crosses the threshold */
#endif
}

static void put_pending(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030D0000
    _Py_set_eval_breaker_bit(ts, _PY_GC_SCHEDULED_BIT);
#elif PY_VERSION_HEX >= 0x030C0000
    _Py_atomic_store_relaxed(&ts->interp->ceval.gc_scheduled, 1);
    _Py_atomic_store_relaxed(&ts->interp->ceval.eval_breaker, 1);
#endif
}

static int is_collecting(struct _gc_runtime_state *gc) {
#if PY_VERSION_HEX >= 0x030D0000
    return _Py_atomic_load_int_relaxed(&gc->collecting);
#else
    return gc->collecting;
#endif
}

/* ---- free lists ---------------------------------------------------------------------------
 *
 * Lists, dicts and small tuples are recycled through per-interpreter free lists, and an object
 * taken from one is not counted in the young generation's count (only a fresh allocation is).
 * A full collection empties the free lists; a compile refills them, so after gc.collect() a
 * `[]` or a 3-tuple the user makes counts in plain Python and not after a compile (test_gc's
 * test_get_count).  So the lists are trimmed back to their length before the compile (the
 * extra objects are freed as a full free list would free them). */
#if PY_VERSION_HEX >= 0x030D0000
#ifdef WITH_FREELISTS
#define FL(interp) (&(interp)->object_state.freelists)
#define LIST_FL(interp) (FL(interp)->lists.items)
#define LIST_NUMFREE(interp) (FL(interp)->lists.numfree)
#define DICT_FL(interp) (FL(interp)->dicts.items)
#define DICT_NUMFREE(interp) (FL(interp)->dicts.numfree)
#define TUPLE_FL(interp) (FL(interp)->tuples.items)
#define TUPLE_NUMFREE(interp) (FL(interp)->tuples.numfree)
#define TUPLE_FIRST 0
#define TUPLE_LISTS PyTuple_NFREELISTS
#endif
#else
#if PyList_MAXFREELIST > 0
#define LIST_FL(interp) ((interp)->list.free_list)
#define LIST_NUMFREE(interp) ((interp)->list.numfree)
#endif
#if PyDict_MAXFREELIST > 0
#define DICT_FL(interp) ((interp)->dict_state.free_list)
#define DICT_NUMFREE(interp) ((interp)->dict_state.numfree)
#endif
#if PY_VERSION_HEX >= 0x030B0000
#if PyTuple_NFREELISTS > 0
#define TUPLE_FL(interp) ((interp)->tuple.free_list)
#define TUPLE_NUMFREE(interp) ((interp)->tuple.numfree)
#define TUPLE_FIRST 0 /* index = size - 1 */
#define TUPLE_LISTS PyTuple_NFREELISTS
#endif
#elif PyTuple_MAXSAVESIZE > 0
#define TUPLE_FL(interp) ((interp)->tuple.free_list)
#define TUPLE_NUMFREE(interp) ((interp)->tuple.numfree)
#define TUPLE_FIRST 1 /* index = size; 0 is the empty tuple */
#define TUPLE_LISTS PyTuple_MAXSAVESIZE
#endif
#endif

#define SAVED_TUPLE_LISTS (NPD_GC_FREELISTS - 2)

static void freelists_save(PyInterpreterState *interp, int *saved) {
    for (int i = 0; i < SAVED_TUPLE_LISTS + 2; i++) {
        saved[i] = -1;
    }
#ifdef LIST_FL
    saved[0] = LIST_NUMFREE(interp);
#endif
#ifdef DICT_FL
    saved[1] = DICT_NUMFREE(interp);
#endif
#ifdef TUPLE_FL
    for (int i = TUPLE_FIRST; i < TUPLE_LISTS && i < SAVED_TUPLE_LISTS; i++) {
        saved[2 + i] = TUPLE_NUMFREE(interp)[i];
    }
#endif
}

static void freelists_trim(PyInterpreterState *interp, const int *saved) {
#ifdef LIST_FL
    while (saved[0] >= 0 && LIST_NUMFREE(interp) > saved[0]) {
        PyObject_GC_Del(LIST_FL(interp)[--LIST_NUMFREE(interp)]);
    }
#endif
#ifdef DICT_FL
    while (saved[1] >= 0 && DICT_NUMFREE(interp) > saved[1]) {
        PyObject_GC_Del(DICT_FL(interp)[--DICT_NUMFREE(interp)]);
    }
#endif
#ifdef TUPLE_FL
    for (int i = TUPLE_FIRST; i < TUPLE_LISTS && i < SAVED_TUPLE_LISTS; i++) {
        while (saved[2 + i] >= 0 && TUPLE_NUMFREE(interp)[i] > saved[2 + i] &&
               TUPLE_FL(interp)[i] != NULL) {
            PyTupleObject *op = TUPLE_FL(interp)[i];
            TUPLE_FL(interp)[i] = (PyTupleObject *)op->ob_item[0];
            TUPLE_NUMFREE(interp)[i]--;
            PyObject_GC_Del(op);
        }
    }
#endif
}

/* Objects that stay where the collector sees them even when the compile created them: a frame
 * object may be a running frame of the user's that the compiler materialised (the user can
 * reach it later, sys._getframe(), and make cycles through it). */
static int user_world(PyObject *op) {
    return PyFrame_Check(op) || PyGen_Check(op) || PyCoro_CheckExact(op) ||
           PyAsyncGen_CheckExact(op);
}

/* ---- which new objects to hide -----------------------------------------------------------
 *
 * Only what the compile keeps alive, and not what belongs to the user's objects:
 *  - Cyclic garbage the compile made (an exception kept with its traceback, whose frames hold
 *    the compiler's locals and through them the user's objects) must stay collectable: hidden,
 *    it would pin whatever it refers to for good (test_gc's test_bug1055820b).  So the new
 *    objects get a small collection of their own, as CPython's collector does it for a
 *    generation: each one's references from outside the new objects are its reference count
 *    minus the references the other new objects hold (tp_traverse); those referred to from
 *    outside, and all they reach, are alive; the rest is garbage, left to the collector.
 *  - A new dict referred to from outside the new objects may belong to a user's object: the
 *    compiler reading obj.__dict__ materialises the instance dict of a 3.11+ object (and a
 *    function's __dict__ is made on first use).  Hidden, it would make a cycle through its
 *    owner (`self.loop = self`) uncollectable.  Such dicts stay visible (a compiler dict that
 *    old npdynamo state refers to stays visible too: harmless, the count is restored anyway).
 *  - Frames, generators, coroutines (user_world). */
typedef struct {
    PyObject **keys;     /* open addressing, NULL = empty */
    Py_ssize_t *refs;    /* references from outside the new objects */
    char *alive;
    PyObject **stack;
    Py_ssize_t top;
    size_t mask;         /* keys == NULL: no table (no memory): hide nothing */
} NewSet;

static inline size_t newset_slot(const NewSet *t, PyObject *op) {
    size_t i = ((uintptr_t)op >> 4) & t->mask;
    while (t->keys[i] != NULL && t->keys[i] != op) {
        i = (i + 1) & t->mask;
    }
    return i;
}

static int newset_visit_decref(PyObject *op, void *arg) {
    NewSet *t = (NewSet *)arg;
    if (op != NULL) {
        size_t i = newset_slot(t, op);
        if (t->keys[i] == op) {
            t->refs[i]--;
        }
    }
    return 0;
}

static int newset_visit_reach(PyObject *op, void *arg) {
    NewSet *t = (NewSet *)arg;
    if (op != NULL) {
        size_t i = newset_slot(t, op);
        if (t->keys[i] == op && !t->alive[i]) {
            t->alive[i] = 1;
            t->stack[t->top++] = op;
        }
    }
    return 0;
}

static void newset_traverse(PyObject *op, visitproc visit, NewSet *t) {
    traverseproc traverse = Py_TYPE(op)->tp_traverse;
    if (traverse != NULL) {
        (void)traverse(op, visit, t);
    }
}

static void newset_free(NewSet *t) {
    PyMem_Free(t->keys);
    PyMem_Free(t->refs);
    PyMem_Free(t->alive);
    PyMem_Free(t->stack);
    t->keys = NULL;
}

/* The objects from `from`'s successor up to `end` (the list head). */
static void newset_build(NewSet *t, PyGC_Head *from, PyGC_Head *end) {
    size_t n = 0, cap = 16;
    for (PyGC_Head *g = gc_next(from); g != end; g = gc_next(g)) {
        n++;
    }
    while (cap < 2 * n) {
        cap <<= 1;
    }
    t->keys = PyMem_Calloc(cap, sizeof(PyObject *));
    t->refs = PyMem_Calloc(cap, sizeof(Py_ssize_t));
    t->alive = PyMem_Calloc(cap, 1);
    t->stack = PyMem_Calloc(n + 1, sizeof(PyObject *));
    t->top = 0;
    t->mask = cap - 1;
    if (t->keys == NULL || t->refs == NULL || t->alive == NULL || t->stack == NULL) {
        newset_free(t);
        return;
    }
    for (PyGC_Head *g = gc_next(from); g != end; g = gc_next(g)) {
        PyObject *op = from_gc(g);
        size_t i = newset_slot(t, op);
        t->keys[i] = op;
        t->refs[i] = Py_REFCNT(op);
    }
    for (PyGC_Head *g = gc_next(from); g != end; g = gc_next(g)) {
        newset_traverse(from_gc(g), newset_visit_decref, t);
    }
    for (size_t i = 0; i <= t->mask; i++) {
        if (t->keys[i] != NULL && t->refs[i] > 0 && !t->alive[i]) {
            t->alive[i] = 1;
            t->stack[t->top++] = t->keys[i];
        }
    }
    while (t->top > 0) {
        newset_traverse(t->stack[--t->top], newset_visit_reach, t);
    }
}

/* A dict that can be in no cycle: CPython's collector untracks it when it meets it (and the
 * dict tracks itself again when it gets a container); the compile may have made one tracked
 * (`obj.attr = []` on a thread-local the user's collection had untracked), so it is untracked
 * again here, as plain Python leaves it. */
static int may_be_tracked(PyObject *op) {
    return PyObject_IS_GC(op) && (!PyTuple_CheckExact(op) || PyObject_GC_IsTracked(op));
}

static int dict_is_atomic(PyObject *dict) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (may_be_tracked(key) || may_be_tracked(value)) {
            return 0;
        }
    }
    return 1;
}

static int newset_hide(const NewSet *t, PyObject *op) {
    if (t->keys == NULL || user_world(op)) {
        return 0;
    }
    size_t i = newset_slot(t, op);
    return t->keys[i] == op && t->alive[i] && !(PyDict_CheckExact(op) && t->refs[i] > 0);
}

/* ---- API --------------------------------------------------------------------------------- */

int npd_gc_quiet_init(void) {
    if (marker != NULL) {
        return 0;
    }
    marker = PyList_New(0); /* lists are tracked from birth */
    if (marker == NULL) {
        return -1;
    }
    gc_move(as_gc(marker), &hidden);
    return 0;
}

void npd_gc_quiet_begin(npd_gc_quiet *q) {
    q->active = 0;
    PyThreadState *ts = PyThreadState_Get();
    struct _gc_runtime_state *gc = gc_state(ts);
    if (busy || marker == NULL || is_collecting(gc)) {
        return; /* (inside a finalizer run by a collection the lists are the collector's) */
    }
    busy = 1;
    q->active = 1;
    q->was_enabled = PyGC_Disable();
    q->count0 = gc->generations[0].count;
    q->pending = take_pending(ts);
    q->switches = gil_switches(ts);
    freelists_save(ts->interp, q->freelists);
    gc_move(as_gc(marker), gc->generation0);
    marker_young = 1;
}

void npd_gc_quiet_end(npd_gc_quiet *q, int hide) {
    if (!q->active) {
        return;
    }
    PyThreadState *ts = PyThreadState_Get();
    struct _gc_runtime_state *gc = gc_state(ts);
    PyGC_Head *young = gc->generation0;
    PyGC_Head *m = as_gc(marker);
    /* Which list is the marker in?  Walk to its head (list heads are the only non-objects). */
    PyGC_Head *g = gc_next(m);
    while (g != young && g != &hidden && g != &gc->generations[1].head &&
           g != &gc->generations[2].head && g != &gc->permanent_generation.head) {
        g = gc_next(g);
    }
    if (hide && g == young && !is_collecting(gc) && gil_switches(ts) == q->switches) {
        NewSet set;
        newset_build(&set, m, young);
        PyGC_Head *next;
        for (g = gc_next(m); g != young; g = next) {
            next = gc_next(g);
            PyObject *op = from_gc(g);
            if (newset_hide(&set, op)) {
                gc_move(g, &hidden);
                hidden_moved++;
            } else if (PyDict_CheckExact(op) && dict_is_atomic(op)) {
                PyObject_GC_UnTrack(op);
            }
        }
        newset_free(&set);
        freelists_trim(ts->interp, q->freelists);
        gc->generations[0].count = q->count0;
    }
    gc_move(m, &hidden);
    marker_young = 0;
    if (hidden_moved > HIDDEN_CAP) {
        npd_gc_quiet_release();
    }
    if (q->pending) {
        put_pending(ts);
    }
    if (q->was_enabled && !PyGC_IsEnabled()) {
        PyGC_Enable();
    }
    busy = 0;
}

Py_ssize_t npd_gc_quiet_release(void) {
    if (marker == NULL) {
        return 0;
    }
    struct _gc_runtime_state *gc = gc_state(PyThreadState_Get());
    if (is_collecting(gc)) {
        return 0;
    }
    PyGC_Head *m = as_gc(marker);
    int marker_hidden = !marker_young;
    if (marker_hidden) {
        gc_move(m, gc->generation0); /* out of the way, back below */
    }
    Py_ssize_t n = npd_gc_quiet_hidden();
    gc_merge(&hidden, &gc->generations[NUM_GENERATIONS - 1].head);
    gc->long_lived_pending += n;
    if (marker_hidden) {
        gc_move(m, &hidden);
    }
    hidden_moved = 0;
    return n;
}

#define HIDE_UNTRACKED 1
#define HIDE_UNCOUNTED 2

int npd_gc_hide_transient(PyObject *fn) {
    if (!Py_IS_TYPE(fn, &PyFunction_Type) || Py_REFCNT(fn) != 1 || !PyObject_GC_IsTracked(fn)) {
        return 0;
    }
    struct _gc_runtime_state *gc = gc_state(PyThreadState_Get());
    if (is_collecting(gc)) {
        return 0;
    }
    PyObject_GC_UnTrack(fn);
    int how = HIDE_UNTRACKED;
    if (gc->generations[0].count > 0) {
        gc->generations[0].count--;
        how |= HIDE_UNCOUNTED;
    }
    return how;
}

void npd_gc_unhide_transient(PyObject *fn, int how) {
    if (how & HIDE_UNCOUNTED) {
        /* It counts again: its death (PyObject_GC_Del) takes it off, now or later. */
        gc_state(PyThreadState_Get())->generations[0].count++;
    }
    /* Tracked again even when it is about to die: func_dealloc unlinks it unconditionally. */
    if ((how & HIDE_UNTRACKED) && !PyObject_GC_IsTracked(fn)) {
        PyObject_GC_Track(fn);
    }
}

Py_ssize_t npd_gc_quiet_hidden(void) {
    Py_ssize_t n = 0;
    PyGC_Head *m = marker != NULL ? as_gc(marker) : NULL;
    for (PyGC_Head *g = gc_next(&hidden); g != &hidden; g = gc_next(g)) {
        n += g != m;
    }
    return n;
}

int npd_gc_callback_running(PyCodeObject *code) {
    struct _gc_runtime_state *gc = gc_state(PyThreadState_Get());
    if (!is_collecting(gc) || gc->callbacks == NULL || !PyList_Check(gc->callbacks)) {
        return 0;
    }
    /* (reads only: no Python code runs, so the list cannot change under the loop) */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(gc->callbacks); i++) {
        PyObject *fn = PyList_GET_ITEM(gc->callbacks, i);
        if (PyMethod_Check(fn)) {
            fn = PyMethod_GET_FUNCTION(fn);
        }
        if (PyFunction_Check(fn) && PyFunction_GET_CODE(fn) == (PyObject *)code) {
            return 1;
        }
    }
    return 0;
}
