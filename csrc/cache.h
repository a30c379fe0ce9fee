/*
 * cache.h -- per-code-object state: the SKIP/RUN_ONLY flag, the hidden flag, the cache of
 * (check_fn, new_code) entries and hit/miss counters.
 *
 * In:  code objects (from the hook and from the module functions in eval_frame.c).
 * Out: an npd_extra per code object, created on demand and released only when the code object
 *      dies (`reset_code` empties it but keeps it), so a pointer the hook got for the code of a
 *      running frame stays valid while that frame runs.
 *
 * Where an npd_extra lives (issue 8): not in co_extra.  CPython 3.11 calls every registered
 * co_extra free function for every slot of a dying code object that has a co_extra array at
 * all, so giving a code object an array is visible to every other co_extra user: their free
 * function is called (with NULL) for code they never annotated, and a free function that is
 * itself Python code (a ctypes thunk, as in CPython's test_code) is called for code that dies
 * after it during interpreter teardown, and crashes.  So every npd_extra lives in the *code
 * table* (cache.c): a hash table keyed by the code object's address whose record holds a weak
 * reference to the code with a C callback that removes the record and frees the npd_extra
 * (entries included) when the code dies.  The callback runs before the dead code's memory is
 * released, so a new code object at a dead one's address never finds the dead one's record.
 * A lookup is one hash probe, no more than reading co_extra was.
 *
 * Entries form a singly linked list, most recently hit first.  Releasing an entry drops
 * Python references, which can run arbitrary code (weakref callbacks, __del__) that might
 * re-enter this module -- even reset the same code.  Every function that drops references
 * therefore detaches what it frees from the state first, and the hook never keeps a pointer to
 * an entry across a call into Python (it holds its own references instead).  Code table
 * operations run no Python code (the weak reference is made before the table is touched), so
 * they are atomic under the GIL.
 */
#ifndef NPDYNAMO_CACHE_H
#define NPDYNAMO_CACHE_H

#include "cpython_compat.h"

enum npd_code_state {
    NPD_DEFAULT = 0,  /* use the cache, compile on a miss */
    NPD_SKIP = 1,     /* always run the original code; never call Python for it */
    NPD_RUN_ONLY = 2, /* use the cache, never compile on a miss */
};

typedef struct npd_entry {
    PyObject *check_fn;     /* guard: check_fn(*arg_slots, f_globals, closure) -> truthy */
    PyObject *new_code;     /* transformed code, run in place of the original */
    PyObject *func;         /* function for new_code, reused while globals/closure match;
                               NULL until first run; only kept when that creates no cycle
                               (see npd_entry_function) */
    void *uncached_globals; /* address only, never dereferenced: last globals found not to
                               be a module dict, so we do not re-check them on every call */
    void *owner;            /* address only, never dereferenced: the callback that compiled
                               this entry.  In compile mode only the entries of the current
                               callback are used (one callback per backend, so a function
                               compiled with two backends keeps a version for each); run-only
                               mode uses every entry.  An address, not a reference, so the
                               cache pins nothing the cycle collector cannot see.  The Python
                               side drops a callback's entries (npd_cache_drop_owner) before
                               the callback dies, so an address is never reused while
                               entries still carry it. */
    struct npd_entry *next;
} npd_entry;

/* How many callbacks per code object can have a failed compile remembered in C. */
#define NPD_FAILED_OWNERS 4

typedef struct {
    int state;            /* enum npd_code_state */
    int hidden;           /* frames of this code are removed from tracebacks that pass through
                             a shadow frame (generated graph code, backend runners) */
    npd_entry *head;      /* most recently hit first */
    Py_ssize_t hits;
    Py_ssize_t misses;
    unsigned long version; /* bumped whenever entries are freed: lets the hook notice that
                              Python code it called may have freed the entry it holds */
    PyObject *ref;        /* our weak reference to the code (a strong reference to the weakref
                             object); its callback frees this state when the code dies */
    void *failed[NPD_FAILED_OWNERS]; /* addresses only, like npd_entry.owner: callbacks whose
                             compile of this code failed; on a miss in compile mode with one of
                             them the frame runs unmodified without calling Python (the
                             callback would answer None).  Dropped with the owner's entries. */
    int nfailed;
} npd_extra;

/* Set up the code table; call once at module init.  Returns -1 with an exception set. */
int npd_cache_init(void);

/* The state of `code`, or NULL if it has none (never raises, never runs Python code). */
npd_extra *npd_extra_get(PyCodeObject *code);

/* The state of `code`, created (in the code table) if missing.  NULL with an exception set on
 * failure.  May run Python code (allocating the weak reference can start the cycle collector). */
npd_extra *npd_extra_get_or_create(PyCodeObject *code);

/* Prepend a new entry (strong references taken; `owner` by address).  -1 with MemoryError. */
int npd_cache_prepend(npd_extra *extra, PyObject *check_fn, PyObject *new_code, void *owner);

/* Move `entry` (which must be in the list) to the front. */
void npd_cache_move_to_front(npd_extra *extra, npd_entry *entry);

/* Drop the entries compiled by `owner` (by address), and its failed-compile mark. */
void npd_cache_drop_owner(npd_extra *extra, void *owner);

/* The same for every code object's state (the owner died). */
void npd_cache_drop_owner_everywhere(void *owner);

/* Remember that `owner`'s compile of this code failed (no-op when NPD_FAILED_OWNERS are). */
void npd_extra_mark_failed(npd_extra *extra, void *owner);

/* Whether `owner`'s compile of this code failed (npd_extra_mark_failed). */
static inline int npd_extra_failed_for(const npd_extra *extra, void *owner) {
    for (int i = 0; i < extra->nfailed; i++) {
        if (extra->failed[i] == owner) {
            return 1;
        }
    }
    return 0;
}

/* Drop all entries, the state flag and the counters (the struct itself stays attached;
 * the hidden flag stays too: it describes the code, not its cache). */
void npd_extra_reset(npd_extra *extra);

/* A function object running entry->new_code with these globals, builtins (the original
 * frame's: not those of the globals' __builtins__ now, which the program may have replaced
 * since the frame started) and closure (closure may be NULL).  Reuses the entry's function
 * while all three are the same objects; keeps a new one in the entry only for module globals
 * and no closure (else it would pin objects the cycle collector cannot free).  New reference,
 * or NULL with an exception set. */
PyObject *npd_entry_function(npd_extra *extra, npd_entry *entry, PyObject *globals,
                             PyObject *builtins, PyObject *closure);

/* [(check_fn, new_code), ...], most recently hit first; only the entries of `owner` unless it
 * is NULL.  New reference. */
PyObject *npd_cache_as_list(npd_extra *extra, void *owner);

#endif /* NPDYNAMO_CACHE_H */
