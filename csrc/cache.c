/*
 * cache.c -- per-code state in co_extra (see cache.h for the contract and the re-entrancy
 * rules).  Called by the hook and the module functions in eval_frame.c; all under the GIL.
 */
#include "cache.h"

/* Index of our slot in every code object's co_extra array; requested once per process. */
static Py_ssize_t extra_index = -1;

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

/* The co_extra free function: CPython calls it from code_dealloc when the code object dies.
 * This is the one place an npd_extra is released.  CPython 3.11 calls every registered free
 * function for every slot of a dying code object that has a co_extra array at all -- also for
 * slots that are empty because only another PEP 523 user (or any _PyCode_SetExtra caller) set
 * its own slot -- so `p` may be NULL. */
static void extra_free(void *p) {
    npd_extra *extra = (npd_extra *)p;
    if (extra == NULL) {
        return;
    }
    npd_entry *chain = extra->head;
    extra->head = NULL;
    PyMem_Free(extra);
    chain_free(chain);
}

int npd_cache_init(void) {
    if (extra_index >= 0) {
        return 0;
    }
    extra_index = _PyEval_RequestCodeExtraIndex(extra_free);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "dynamo._C: no co_extra slot left (too many PEP 523 users loaded)");
        return -1;
    }
    return 0;
}

npd_extra *npd_extra_get(PyCodeObject *code) {
    void *p = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &p) < 0) {
        PyErr_Clear(); /* only fails for a bad index, which init rules out */
        return NULL;
    }
    return (npd_extra *)p;
}

npd_extra *npd_extra_get_or_create(PyCodeObject *code) {
    npd_extra *extra = npd_extra_get(code);
    if (extra != NULL) {
        return extra;
    }
    extra = PyMem_Calloc(1, sizeof(npd_extra));
    if (extra == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    extra->state = NPD_DEFAULT;
    if (_PyCode_SetExtra((PyObject *)code, extra_index, extra) < 0) {
        PyMem_Free(extra);
        return NULL;
    }
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

void npd_cache_drop_owner(npd_extra *extra, void *owner) {
    /* Detach every entry of `owner` into a private chain first, then free that chain. */
    npd_entry *dropped = NULL;
    npd_entry **link = &extra->head;
    while (*link != NULL) {
        npd_entry *e = *link;
        if (e->owner == owner) {
            *link = e->next;
            e->next = dropped;
            dropped = e;
        } else {
            link = &e->next;
        }
    }
    if (dropped != NULL) {
        extra->version++;
        chain_free(dropped);
    }
}

void npd_extra_reset(npd_extra *extra) {
    npd_entry *chain = extra->head;
    extra->head = NULL;
    extra->state = NPD_DEFAULT;
    extra->hits = 0;
    extra->misses = 0;
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
 * and the entry lives in co_extra, an edge the cycle collector cannot see.  So keeping it is
 * safe only when that pins nothing new: globals of an imported module (alive anyway; its dict
 * is cleared at shutdown, which releases the code and the entry) and no closure.  Keeping a
 * closure would pin the cell contents (e.g. large arrays) of the last call, and with an exec()
 * namespace or a recursive inner function it forms an uncollectable cycle
 * (globals -> function -> code -> co_extra -> entry -> kept function -> globals). */
PyObject *npd_entry_function(npd_extra *extra, npd_entry *entry, PyObject *globals,
                             PyObject *closure) {
    PyFunctionObject *kept = (PyFunctionObject *)entry->func;
    if (kept != NULL && kept->func_globals == globals && kept->func_closure == closure) {
        return Py_NewRef(entry->func);
    }
    /* PyFunction_New takes name/qualname from the code and builtins from the globals;
     * defaults are irrelevant because every argument is passed positionally. */
    unsigned long version = extra->version;
    PyObject *func = PyFunction_New(entry->new_code, globals);
    if (func == NULL) {
        return NULL;
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
