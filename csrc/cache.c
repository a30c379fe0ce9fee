/*
 * cache.c -- per-code state in the code table (see cache.h for why not co_extra, the contract
 * and the re-entrancy rules).  Called by the hook and the module functions in eval_frame.c;
 * all under the GIL.
 */
#include "cache.h"

#include <stdint.h>

static void entry_free(npd_entry *e) {
    /* The entry is already unlinked, so code run by these DECREFs cannot reach it. */
    Py_XDECREF(e->check_fn);
    Py_XDECREF(e->new_code);
    Py_XDECREF(e->func);
    PyMem_Free(e);
}

/* Free a detached chain of entries. */
static void chain_free(npd_entry *e) {
    while (e != NULL) {
        npd_entry *next = e->next;
        entry_free(e);
        e = next;
    }
}

/* ===== the code table ===================================================================
 *
 * Open addressing with linear probing, keyed by the code object's address; deletion shifts
 * later records back (no tombstones), so a lookup of a code without a record stops at the
 * first empty slot.  At most half full, so probes stay short.  Never shrinks (a slot is two
 * pointers; the records are what code objects cost, and they die with their code).
 *
 * A record's npd_extra holds a weak reference to its code (a CodeRef: a weakref.ref subclass
 * that remembers the address) whose callback, code_died, removes the record and frees the
 * npd_extra.  Code objects are not tracked by the cycle collector: they die by reference count
 * only, in code_dealloc, which runs PyObject_ClearWeakRefs (and so our callback) before it
 * releases the memory.  So no new code object can be at a dead one's address while the dead
 * one's record exists, and the record cannot outlive its code.  The weak reference is held by
 * the record, so it is never garbage itself (the one case in which CPython skips a callback). */

typedef struct {
    PyCodeObject *key; /* NULL: empty slot */
    npd_extra *extra;
} tab_slot;

static tab_slot *tab = NULL;
static size_t tab_size = 0;   /* a power of two */
static size_t tab_used = 0;
static unsigned tab_shift = 0; /* 64 - log2(tab_size) */

#define TAB_INITIAL_BITS 9

static inline size_t tab_home(PyCodeObject *key) {
    /* Fibonacci hashing: the low bits of an address are alignment, the top bits of the product
     * mix all of them. */
    return (size_t)((((uint64_t)(uintptr_t)key) * UINT64_C(0x9E3779B97F4A7C15)) >> tab_shift);
}

static inline npd_extra *tab_find(PyCodeObject *key) {
    if (tab_used == 0) {
        return NULL;
    }
    size_t mask = tab_size - 1;
    for (size_t i = tab_home(key);; i = (i + 1) & mask) {
        if (tab[i].key == key) {
            return tab[i].extra;
        }
        if (tab[i].key == NULL) {
            return NULL;
        }
    }
}

/* Put a record (key not present) into `slots` of `size` entries, which has a free slot. */
static void tab_place(tab_slot *slots, size_t size, unsigned shift, PyCodeObject *key,
                      npd_extra *extra) {
    size_t mask = size - 1;
    size_t i = (size_t)((((uint64_t)(uintptr_t)key) * UINT64_C(0x9E3779B97F4A7C15)) >> shift);
    while (slots[i].key != NULL) {
        i = (i + 1) & mask;
    }
    slots[i].key = key;
    slots[i].extra = extra;
}

/* Insert a record for a key that has none.  -1 with MemoryError.  Runs no Python code
 * (PyMem_* allocation never starts the cycle collector). */
static int tab_insert(PyCodeObject *key, npd_extra *extra) {
    if ((tab_used + 1) * 2 > tab_size) {
        unsigned bits = tab_size == 0 ? TAB_INITIAL_BITS : 64 - tab_shift + 1;
        size_t size = (size_t)1 << bits;
        tab_slot *slots = PyMem_Calloc(size, sizeof(tab_slot));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < tab_size; i++) {
            if (tab[i].key != NULL) {
                tab_place(slots, size, 64 - bits, tab[i].key, tab[i].extra);
            }
        }
        PyMem_Free(tab);
        tab = slots;
        tab_size = size;
        tab_shift = 64 - bits;
    }
    tab_place(tab, tab_size, tab_shift, key, extra);
    tab_used++;
    return 0;
}

/* Remove the record of `key` if it holds `extra`; returns whether it did. */
static int tab_remove(PyCodeObject *key, npd_extra *extra) {
    if (tab_used == 0) {
        return 0;
    }
    size_t mask = tab_size - 1;
    size_t i = tab_home(key);
    while (tab[i].key != key) {
        if (tab[i].key == NULL) {
            return 0;
        }
        i = (i + 1) & mask;
    }
    if (tab[i].extra != extra) {
        return 0;
    }
    /* Backward-shift deletion: move each later record of the cluster into the hole unless its
     * home lies cyclically in (hole, its slot]. */
    for (size_t j = (i + 1) & mask; tab[j].key != NULL; j = (j + 1) & mask) {
        size_t home = tab_home(tab[j].key);
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            tab[i] = tab[j];
            i = j;
        }
    }
    tab[i].key = NULL;
    tab[i].extra = NULL;
    tab_used--;
    return 1;
}

/* CodeRef: weakref.ref to a code object that remembers the code's address (the referent is
 * gone by the time the callback runs) and the npd_extra its record holds. */
typedef struct {
    PyWeakReference ref;
    PyCodeObject *key;
    npd_extra *extra;
} CodeRef;

static PyTypeObject CodeRefType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C._CodeRef",
    .tp_doc = PyDoc_STR("internal: npdynamo's weak reference to a code object it keeps a "
                        "decision about; the decision is dropped when the code dies"),
    .tp_basicsize = sizeof(CodeRef),
    .tp_flags = Py_TPFLAGS_DEFAULT, /* GC support, new, dealloc: inherited from weakref.ref */
};

static PyObject *code_died_fn = NULL; /* the weakref callback, alive for the process */

/* Release a state that is no longer reachable from the table. */
static void extra_free(npd_extra *extra) {
    npd_entry *chain = extra->head;
    extra->head = NULL;
    PyMem_Free(extra);
    chain_free(chain);
}

/* The CodeRef callback: the code is dying (refcount 0, inside code_dealloc), drop its record
 * and release its state.  Releasing the entries may run Python code (__del__ of objects they
 * held), as any deallocation may; the record is out of the table before that. */
static PyObject *code_died(PyObject *unused, PyObject *ref) {
    if (Py_TYPE(ref) != &CodeRefType) {
        Py_RETURN_NONE;
    }
    CodeRef *cref = (CodeRef *)ref;
    npd_extra *extra = cref->extra;
    if (extra == NULL || extra->ref != ref || !tab_remove(cref->key, extra)) {
        Py_RETURN_NONE; /* not a record's reference (cannot happen) */
    }
    cref->extra = NULL;
    extra->ref = NULL;
    extra_free(extra);
    /* The record's reference, last: PyObject_ClearWeakRefs and the cycle collector do not
     * touch the weakref after the callback returns (or hold a reference of their own). */
    Py_DECREF(ref);
    Py_RETURN_NONE;
}

static PyMethodDef code_died_def = {
    "_code_died", (PyCFunction)code_died, METH_O,
    PyDoc_STR("internal: weakref callback dropping npdynamo's state of a dead code object"),
};

int npd_cache_init(void) {
    if (code_died_fn != NULL) {
        return 0;
    }
    CodeRefType.tp_base = &_PyWeakref_RefType;
    if (PyType_Ready(&CodeRefType) < 0) {
        return -1;
    }
    code_died_fn = PyCFunction_New(&code_died_def, NULL);
    return code_died_fn != NULL ? 0 : -1;
}

npd_extra *npd_extra_get(PyCodeObject *code) {
    return tab_find(code);
}

npd_extra *npd_extra_get_or_create(PyCodeObject *code) {
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL) {
        return extra;
    }
    /* The weak reference first: allocating it may start the cycle collector, whose callbacks
     * and finalizers may change the table (even create this very record). */
    PyObject *args = PyTuple_Pack(2, (PyObject *)code, code_died_fn);
    PyObject *ref = args != NULL ? PyObject_Call((PyObject *)&CodeRefType, args, NULL) : NULL;
    Py_XDECREF(args);
    if (ref == NULL) {
        return NULL;
    }
    /* It can be in no reference cycle (it refers to code_died_fn only), so the cycle collector
     * need not traverse it, and gc.get_objects() does not show npdynamo's bookkeeping. */
    PyObject_GC_UnTrack(ref);
    extra = npd_extra_get(code);
    if (extra != NULL) {
        Py_DECREF(ref);
        return extra;
    }
    extra = PyMem_Calloc(1, sizeof(npd_extra));
    if (extra == NULL) {
        Py_DECREF(ref);
        PyErr_NoMemory();
        return NULL;
    }
    extra->state = NPD_DEFAULT;
    if (tab_insert(code, extra) < 0) {
        PyMem_Free(extra);
        Py_DECREF(ref);
        return NULL;
    }
    extra->ref = ref;
    ((CodeRef *)ref)->key = code;
    ((CodeRef *)ref)->extra = extra;
    return extra;
}

int npd_cache_prepend(npd_extra *extra, PyObject *check_fn, PyObject *new_code, void *owner) {
    npd_entry *e = PyMem_Calloc(1, sizeof(npd_entry));
    if (e == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    e->check_fn = Py_NewRef(check_fn);
    e->new_code = Py_NewRef(new_code);
    e->func = NULL;
    e->owner = owner;
    e->next = extra->head;
    extra->head = e;
    return 0;
}

void npd_cache_move_to_front(npd_extra *extra, npd_entry *entry) {
    /* Find the predecessor now rather than trusting one remembered before a guard ran: other
     * threads (the GIL is released inside Python guards) may have reordered the list. */
    npd_entry *prev = NULL;
    for (npd_entry *e = extra->head; e != NULL && e != entry; e = e->next) {
        prev = e;
    }
    if (prev == NULL || prev->next != entry) {
        return; /* already the head (or, impossibly, not in the list) */
    }
    prev->next = entry->next;
    entry->next = extra->head;
    extra->head = entry;
}

void npd_extra_mark_failed(npd_extra *extra, void *owner) {
    if (!npd_extra_failed_for(extra, owner) && extra->nfailed < NPD_FAILED_OWNERS) {
        extra->failed[extra->nfailed++] = owner;
    }
}

/* Move the entries of `owner` from `extra` to the front of *dropped and forget its failed
 * mark.  Runs no Python code. */
static void detach_owner(npd_extra *extra, void *owner, npd_entry **dropped) {
    for (int i = 0; i < extra->nfailed; i++) {
        if (extra->failed[i] == owner) {
            extra->failed[i] = extra->failed[--extra->nfailed];
            break;
        }
    }
    int any = 0;
    npd_entry **link = &extra->head;
    while (*link != NULL) {
        npd_entry *e = *link;
        if (e->owner == owner) {
            *link = e->next;
            e->next = *dropped;
            *dropped = e;
            any = 1;
        } else {
            link = &e->next;
        }
    }
    if (any) {
        extra->version++;
    }
}

void npd_cache_drop_owner(npd_extra *extra, void *owner) {
    /* Detach every entry of `owner` into a private chain first, then free that chain. */
    npd_entry *dropped = NULL;
    detach_owner(extra, owner, &dropped);
    chain_free(dropped);
}

void npd_cache_drop_owner_everywhere(void *owner) {
    /* Every record's entries are detached before any is freed: freeing runs Python code,
     * which may change the table. */
    npd_entry *dropped = NULL;
    for (size_t i = 0; i < tab_size; i++) {
        if (tab[i].key != NULL) {
            detach_owner(tab[i].extra, owner, &dropped);
        }
    }
    chain_free(dropped);
}

void npd_extra_reset(npd_extra *extra) {
    npd_entry *chain = extra->head;
    extra->head = NULL;
    extra->state = NPD_DEFAULT;
    extra->hits = 0;
    extra->misses = 0;
    extra->nfailed = 0;
    extra->version++;
    chain_free(chain);
}

/* Whether `globals` is the __dict__ of a module in sys.modules, i.e. lives about as long as the
 * interpreter.  Plain dict lookups only: no Python code runs. */
static int is_module_dict(PyObject *globals) {
    PyObject *name = PyDict_GetItemString(globals, "__name__"); /* borrowed, never raises */
    if (name == NULL || !PyUnicode_CheckExact(name)) {
        return 0;
    }
    PyObject *module = PyDict_GetItemWithError(PyImport_GetModuleDict(), name);
    if (module == NULL) {
        PyErr_Clear();
        return 0;
    }
    return PyModule_Check(module) && PyModule_GetDict(module) == globals;
}

/* Which functions may be kept in the entry.  A kept function holds its globals and closure,
 * and the entry lives in the code table, an edge the cycle collector cannot see.  So keeping it is
 * safe only when that pins nothing new: globals of an imported module (alive anyway; its dict
 * is cleared at shutdown, which releases the code and the entry) and no closure.  Keeping a
 * closure would pin the cell contents (e.g. large arrays) of the last call, and with an exec()
 * namespace or a recursive inner function it forms an uncollectable cycle
 * (globals -> function -> code -> code table -> entry -> kept function -> globals). */
PyObject *npd_entry_function(npd_extra *extra, npd_entry *entry, PyObject *globals,
                             PyObject *builtins, PyObject *closure) {
    PyFunctionObject *kept = (PyFunctionObject *)entry->func;
    if (kept != NULL && kept->func_globals == globals && kept->func_closure == closure
        && kept->func_builtins == builtins) {
        return Py_NewRef(entry->func);
    }
    /* PyFunction_New takes name/qualname from the code and builtins from the globals (set to
     * the frame's below); defaults are irrelevant because every argument is passed
     * positionally. */
    unsigned long version = extra->version;
    PyObject *func = PyFunction_New(entry->new_code, globals);
    if (func == NULL) {
        return NULL;
    }
    if (builtins != NULL && ((PyFunctionObject *)func)->func_builtins != builtins) {
        Py_XSETREF(((PyFunctionObject *)func)->func_builtins, Py_NewRef(builtins));
    }
    if (closure != NULL && PyFunction_SetClosure(func, closure) < 0) {
        Py_DECREF(func);
        return NULL;
    }
    if (extra->version != version) {
        return func; /* a GC finalizer run by the allocation reset the cache: `entry` is gone */
    }
    /* uncached_globals remembers (by address only) the last verdict "not a module dict", so
     * the per-call cost for such globals is one pointer compare.  A recycled address can only
     * make us skip caching, never reuse a wrong function. */
    if (closure == NULL && globals != entry->uncached_globals) {
        if (is_module_dict(globals)) {
            /* Swap first, release after: dropping the old function may run arbitrary code. */
            PyObject *old = entry->func;
            entry->func = Py_NewRef(func);
            Py_XDECREF(old);
        } else {
            entry->uncached_globals = globals;
        }
    }
    return func;
}

PyObject *npd_cache_as_list(npd_extra *extra, void *owner) {
    PyObject *list = PyList_New(0);
    if (list == NULL || extra == NULL) {
        return list;
    }
restart:
    for (npd_entry *e = extra->head; e != NULL; e = e->next) {
        if (owner != NULL && e->owner != owner) {
            continue;
        }
        unsigned long version = extra->version;
        /* Allocation may trigger a GC pass whose finalizers could reset this very cache. */
        PyObject *pair = PyTuple_Pack(2, e->check_fn, e->new_code);
        if (pair == NULL || PyList_Append(list, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(pair);
        if (extra->version != version) {
            if (PyList_SetSlice(list, 0, PyList_GET_SIZE(list), NULL) < 0) {
                Py_DECREF(list);
                return NULL;
            }
            goto restart;
        }
    }
    return list;
}
