/*
 * guards.c -- `_C.GuardSet`, guards evaluated in C (see guards.h for the contract).
 *
 * A GuardSet is a flat array of checks.  Each check has a value path (steps from the frame's
 * inputs to the value it inspects) and one operation.  The program is built and validated
 * once, by dynamo/guards.py, from the same ordered Guard list that produces the readable Python
 * text; guards.py emits one check per Python check (`x.shape == (8,)` is one SHAPE check), so
 * the C program stops, fails and raises exactly where the text would.
 *
 * Fast paths read CPython and NumPy objects directly (exact dicts, tuples, lists, functions,
 * floats, ndarrays); every other value goes through the generic protocol the Python text uses
 * (getattr, getitem, ==, len), so a user object with its own __eq__ or properties sees the
 * same calls.  The ndarray fast path reads the array struct through a mirror of NumPy's
 * PyArrayObject_fields prefix (stable since NumPy 1.7, unchanged in 2.x); guards.py checks the
 * mirror against real arrays once (set_ndarray_layout) and the fast path is off if it does not
 * match, so a NumPy that changed its layout costs speed, never correctness.
 *
 * Values a path fetches are new references released right after the check: a GuardSet keeps
 * no per-call state, so any number of threads (the GIL is released inside user __eq__) and
 * re-entrant calls can evaluate it at once.
 */
#include "guards.h"

#include <math.h>

/* ---- the program ----------------------------------------------------------------------- */

enum step_kind {
    STEP_ARG = 0,     /* argument slot `index` */
    STEP_GLOBALS = 1, /* the globals dict itself */
    STEP_GLOBAL = 2,  /* globals[name] */
    STEP_CLOSURE = 3, /* closure[index].cell_contents */
    STEP_ATTR = 4,    /* getattr(base, name) */
    STEP_ITEM = 5,    /* base[key] */
};

enum check_op {
    OP_TYPE_IS = 0,     /* type(v) is obj */
    OP_IS = 1,          /* v is obj */
    OP_EQ = 2,          /* v == obj */
    OP_NAN = 3,         /* v != v */
    OP_COPYSIGN = 4,    /* copysign(1.0, v) == n (+1 / -1) */
    OP_REPR_EQ = 5,     /* repr(v) == obj (a str) */
    OP_FUNC_CODE = 6,   /* v.__code__ is obj */
    OP_FUNC_GLOBALS = 7,/* v.__globals__ is obj */
    OP_DTYPE = 8,       /* v.dtype is obj or v.dtype == obj */
    OP_SHAPE = 9,       /* v.shape == obj (a tuple of ints) */
    OP_C_CONTIG = 10,   /* v.flags.c_contiguous */
    OP_LEN = 11,        /* len(v) == n */
    OP_KEYS = 12,       /* tuple(v) == obj (a tuple: the keys in order) */
    OP_NOT_IN = 13,     /* obj not in v */
    OP_PYTHON = 14,     /* obj(*slots, globals, closure) is truthy: a guard not lowered to C */
    OP_NDIM = 15,       /* v.ndim == n */
    OP_DIM = 16,        /* v.shape[obj] == n, or v.shape[obj] >= 2 when n == -1 (a dynamic size) */
    OP_SAME_AS = 17,    /* v is the value at path obj (a second path: ``m.f.__self__ is m``) */
    OP_INT_GE = 18,     /* v >= n (an int argument kept symbolic: n is 2) */
    OP_TYPE_IS_WEAK = 19, /* type(v) is obj(), obj a weak reference (false once it died) */
    OP_IS_WEAK = 20,    /* v is obj() and obj() is alive, obj a weak reference */
    OP_NO_ATTR = 21,    /* v has no attribute obj (a str), known without running code */
    OP_COUNT
};

typedef struct {
    int kind;
    Py_ssize_t index; /* STEP_ARG, STEP_CLOSURE */
    PyObject *obj;    /* STEP_GLOBAL / STEP_ATTR: the name; STEP_ITEM: the key */
} step;

typedef struct check {
    int op;
    int nsteps;
    int pure;          /* the path runs no Python code (no attribute or item step) */
    step *steps;
    PyObject *obj;
    PyObject *obj2;    /* a second operand: reserved (no operation uses one yet), kept alive */
    Py_ssize_t n;
    Py_ssize_t ndims;  /* OP_SHAPE: the expected ndim */
    Py_ssize_t *dims;  /* OP_SHAPE: the expected sizes */
    Py_ssize_t guard;  /* index of the Guard this check belongs to */
    struct check *other; /* OP_SAME_AS: the second path (its steps only), else NULL */
} check;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t nslots;
    Py_ssize_t ncheck;
    check *checks;
    PyObject *python_fn;
    PyObject *dict;
    PyObject *weakreflist;
} GuardSet;

/* ---- NumPy's array struct, mirrored ---------------------------------------------------- */

/* (npd_array, the mirror itself, is in guards.h: loop_call.c reads arrays through it too) */

static PyTypeObject *ndarray_type = NULL; /* strong; NULL: fast path off */

PyTypeObject *npd_verified_ndarray_type(void) {
    return ndarray_type;
}
static int self_check = 0;

static inline npd_array *as_exact_array(PyObject *v) {
    return ndarray_type != NULL && Py_TYPE(v) == ndarray_type ? (npd_array *)v : NULL;
}

/* ---- evaluation ------------------------------------------------------------------------ */

typedef struct {
    PyObject *const *slots;
    Py_ssize_t nslots;
    PyObject *globals;
    PyObject *closure; /* NULL: none */
} inputs;

/* The value at the end of `c`'s path: a new reference, or NULL with an exception set
 * (any exception: the caller sorts Exception from the rest). */
static PyObject *fetch(const check *c, const inputs *in) {
    PyObject *v = NULL;
    for (int i = 0; i < c->nsteps; i++) {
        const step *s = &c->steps[i];
        PyObject *next = NULL;
        switch (s->kind) {
        case STEP_ARG:
            next = s->index < in->nslots ? in->slots[s->index] : NULL;
            if (next == NULL) {
                PyErr_SetString(PyExc_UnboundLocalError, "guarded argument slot is empty");
                return NULL;
            }
            Py_INCREF(next);
            break;
        case STEP_GLOBALS:
            next = Py_NewRef(in->globals);
            break;
        case STEP_GLOBAL:
            if (PyDict_CheckExact(in->globals)) {
                next = PyDict_GetItemWithError(in->globals, s->obj);
                if (next == NULL) {
                    if (!PyErr_Occurred()) {
                        PyErr_SetObject(PyExc_KeyError, s->obj);
                    }
                    return NULL;
                }
                Py_INCREF(next);
            } else {
                next = PyObject_GetItem(in->globals, s->obj);
            }
            break;
        case STEP_CLOSURE: {
            PyObject *cl = in->closure;
            if (cl == NULL || !PyTuple_CheckExact(cl) || s->index >= PyTuple_GET_SIZE(cl)) {
                PyErr_SetString(PyExc_TypeError, "closure cell missing");
                return NULL;
            }
            PyObject *cell = PyTuple_GET_ITEM(cl, s->index);
            if (PyCell_Check(cell)) {
                next = PyCell_GET(cell);
                if (next == NULL) {
                    PyErr_SetString(PyExc_ValueError, "Cell is empty");
                    return NULL;
                }
                Py_INCREF(next);
            } else {
                next = PyObject_GetAttrString(cell, "cell_contents");
            }
            break;
        }
        case STEP_ATTR:
            next = PyObject_GetAttr(v, s->obj);
            break;
        case STEP_ITEM:
            if (PyDict_CheckExact(v)) {
                next = PyDict_GetItemWithError(v, s->obj);
                if (next == NULL) {
                    if (!PyErr_Occurred()) {
                        PyErr_SetObject(PyExc_KeyError, s->obj);
                    }
                } else {
                    Py_INCREF(next);
                }
            } else if ((PyTuple_CheckExact(v) || PyList_CheckExact(v)) &&
                       PyLong_CheckExact(s->obj)) {
                Py_ssize_t k = PyLong_AsSsize_t(s->obj);
                Py_ssize_t size = PyTuple_CheckExact(v) ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v);
                if (k == -1 && PyErr_Occurred()) {
                    break;
                }
                if (k < 0) {
                    k += size;
                }
                if (k < 0 || k >= size) {
                    PyErr_SetString(PyExc_IndexError, "index out of range");
                    break;
                }
                next = Py_NewRef(PyTuple_CheckExact(v) ? PyTuple_GET_ITEM(v, k)
                                                       : PyList_GET_ITEM(v, k));
            } else {
                next = PyObject_GetItem(v, s->obj);
            }
            break;
        default:
            PyErr_SetString(PyExc_SystemError, "bad guard step");
            break;
        }
        Py_XDECREF(v);
        if (next == NULL) {
            return NULL;
        }
        v = next;
    }
    return v;
}

/* bool(a OP b) with Python's semantics (no identity shortcut, as `==` in the text). */
static int compare(PyObject *a, PyObject *b, int op) {
    PyObject *r = PyObject_RichCompare(a, b, op);
    if (r == NULL) {
        return -1;
    }
    int ok = r == Py_True ? 1 : r == Py_False ? 0 : PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

static int attr_is(PyObject *v, const char *name, PyObject *expected) {
    PyObject *a = PyObject_GetAttrString(v, name);
    if (a == NULL) {
        return -1;
    }
    int ok = a == expected;
    Py_DECREF(a);
    return ok;
}

static int run_python(PyObject *fn, const inputs *in) {
    PyObject *small[20];
    PyObject **buf = small;
    Py_ssize_t total = in->nslots + 2;
    if (total + 1 > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
        buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    buf[0] = NULL;
    for (Py_ssize_t i = 0; i < in->nslots; i++) {
        buf[1 + i] = in->slots[i] != NULL ? in->slots[i] : Py_None;
    }
    buf[1 + in->nslots] = in->globals;
    buf[2 + in->nslots] = in->closure != NULL ? in->closure : Py_None;
    PyObject *r = PyObject_Vectorcall(fn, buf + 1, (size_t)total | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      NULL);
    if (buf != small) {
        PyMem_Free(buf);
    }
    if (r == NULL) {
        return -1;
    }
    int ok = r == Py_True ? 1 : r == Py_False ? 0 : PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* 1 when `v` has no attribute `name` and that is known without running any code: its type
 * reads attributes the generic way (no __getattribute__ or __getattr__ of its own), neither the
 * type nor a base defines `name` (or it is an empty slot), and the object's own __dict__ (read
 * in place, not made) has no such key. 0 when it has one or only code could tell; -1 with an
 * exception set. What the translator checked before it answered hasattr() False
 * (callables.py _guard_absence). */
static int lacks_attribute(PyObject *v, PyObject *name) {
    PyTypeObject *t = Py_TYPE(v);
    if (t->tp_getattro != PyObject_GenericGetAttr || !PyUnicode_CheckExact(name)) {
        return 0;
    }
    PyObject *in_type = _PyType_Lookup(t, name); /* (borrowed) */
    if (in_type != NULL && !Py_IS_TYPE(in_type, &PyMemberDescr_Type)) {
        return 0; /* (a slot is read in C: empty, it raises AttributeError) */
    }
    /* (the generic lookup with its AttributeError suppressed: none is made, ~10x cheaper) */
    PyObject *found = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    int has = PyObject_GetOptionalAttr(v, name, &found);
#else
    int has = _PyObject_LookupAttr(v, name, &found);
#endif
    Py_XDECREF(found);
    return has < 0 ? -1 : !has;
}

/* One check: 1 true, 0 false, -1 exception set. */
static int run_check(const check *c, const inputs *in) {
    if (c->op == OP_PYTHON) {
        return run_python(c->obj, in);
    }
    PyObject *v = fetch(c, in);
    if (v == NULL) {
        return -1;
    }
    int ok = -1;
    switch (c->op) {
    case OP_TYPE_IS:
        ok = (PyObject *)Py_TYPE(v) == c->obj;
        break;
    case OP_IS:
        ok = v == c->obj;
        break;
    case OP_TYPE_IS_WEAK:
    case OP_IS_WEAK: {
        /* A class, function or object the program may drop: the guard holds it weakly, so it
         * does not keep it alive (guards.py _mortal). */
        ok = npd_weakref_is(c->obj, c->op == OP_TYPE_IS_WEAK ? (PyObject *)Py_TYPE(v) : v);
        break;
    }
    case OP_SAME_AS: {
        PyObject *w = fetch(c->other, in);
        ok = w == NULL ? -1 : v == w;
        Py_XDECREF(w);
        break;
    }
    case OP_EQ:
        ok = compare(v, c->obj, Py_EQ);
        break;
    case OP_NAN:
        if (PyFloat_CheckExact(v)) {
            ok = isnan(PyFloat_AS_DOUBLE(v));
        } else if (c->pure) {
            ok = compare(v, v, Py_NE);
        } else { /* `e != e` evaluates e twice */
            PyObject *w = fetch(c, in);
            ok = w != NULL ? compare(v, w, Py_NE) : -1;
            Py_XDECREF(w);
        }
        break;
    case OP_COPYSIGN: {
        double d = PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            break;
        }
        ok = copysign(1.0, d) == (double)c->n;
        break;
    }
    case OP_REPR_EQ: {
        PyObject *r = PyObject_Repr(v);
        if (r != NULL) {
            ok = compare(r, c->obj, Py_EQ);
            Py_DECREF(r);
        }
        break;
    }
    case OP_FUNC_CODE:
        ok = PyFunction_Check(v) ? ((PyFunctionObject *)v)->func_code == c->obj
                                 : attr_is(v, "__code__", c->obj);
        break;
    case OP_FUNC_GLOBALS:
        ok = PyFunction_Check(v) ? ((PyFunctionObject *)v)->func_globals == c->obj
                                 : attr_is(v, "__globals__", c->obj);
        break;
    case OP_DTYPE: {
        npd_array *a = as_exact_array(v);
        if (a != NULL && a->descr == c->obj) {
            ok = 1;
            break;
        }
        PyObject *d = a != NULL ? Py_NewRef(a->descr) : PyObject_GetAttrString(v, "dtype");
        if (d == NULL) {
            break;
        }
        if (d == c->obj) {
            Py_DECREF(d);
            ok = 1;
            break;
        }
        Py_DECREF(d);
        /* `v.dtype is D or v.dtype == D`: the second half evaluates the path again. */
        PyObject *w = c->pure ? Py_NewRef(v) : fetch(c, in);
        if (w == NULL) {
            break;
        }
        npd_array *b = as_exact_array(w);
        d = b != NULL ? Py_NewRef(b->descr) : PyObject_GetAttrString(w, "dtype");
        Py_DECREF(w);
        if (d != NULL) {
            ok = compare(d, c->obj, Py_EQ);
            Py_DECREF(d);
        }
        break;
    }
    case OP_SHAPE: {
        npd_array *a = as_exact_array(v);
        if (a != NULL) {
            ok = a->nd == c->ndims;
            for (Py_ssize_t i = 0; ok && i < c->ndims; i++) {
                ok = a->dimensions[i] == c->dims[i];
            }
            break;
        }
        PyObject *shape = PyObject_GetAttrString(v, "shape");
        if (shape != NULL) {
            ok = compare(shape, c->obj, Py_EQ);
            Py_DECREF(shape);
        }
        break;
    }
    case OP_NDIM: {
        npd_array *a = as_exact_array(v);
        if (a != NULL) {
            ok = a->nd == c->n;
            break;
        }
        PyObject *nd = PyObject_GetAttrString(v, "ndim");
        PyObject *want = nd != NULL ? PyLong_FromSsize_t(c->n) : NULL;
        if (want != NULL) {
            ok = compare(nd, want, Py_EQ);
        }
        Py_XDECREF(want);
        Py_XDECREF(nd);
        break;
    }
    case OP_DIM: {
        Py_ssize_t i = PyLong_AsSsize_t(c->obj);
        npd_array *a = as_exact_array(v);
        if (a != NULL && i < a->nd) {
            ok = c->n < 0 ? a->dimensions[i] >= 2 : a->dimensions[i] == c->n;
            break;
        }
        /* not an exact ndarray (or an index error to raise): what the text does */
        PyObject *shape = PyObject_GetAttrString(v, "shape");
        PyObject *size = shape != NULL ? PyObject_GetItem(shape, c->obj) : NULL;
        PyObject *want = size != NULL ? PyLong_FromSsize_t(c->n < 0 ? 2 : c->n) : NULL;
        if (want != NULL) {
            ok = compare(size, want, c->n < 0 ? Py_GE : Py_EQ);
        }
        Py_XDECREF(want);
        Py_XDECREF(size);
        Py_XDECREF(shape);
        break;
    }
    case OP_INT_GE: {
        if (PyLong_CheckExact(v)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (x != -1 || overflow != 0 || !PyErr_Occurred()) {
                ok = overflow > 0 || (overflow == 0 && x >= (long long)c->n);
                break;
            }
            PyErr_Clear();
        }
        /* not an exact int: what the text does */
        PyObject *want = PyLong_FromSsize_t(c->n);
        if (want != NULL) {
            ok = compare(v, want, Py_GE);
            Py_DECREF(want);
        }
        break;
    }
    case OP_C_CONTIG: {
        npd_array *a = as_exact_array(v);
        if (a != NULL) {
            ok = (a->flags & NPD_ARRAY_C_CONTIGUOUS) != 0;
            break;
        }
        PyObject *flags = PyObject_GetAttrString(v, "flags");
        PyObject *cc = flags != NULL ? PyObject_GetAttrString(flags, "c_contiguous") : NULL;
        Py_XDECREF(flags);
        if (cc != NULL) {
            ok = PyObject_IsTrue(cc);
            Py_DECREF(cc);
        }
        break;
    }
    case OP_LEN: {
        Py_ssize_t size;
        if (PyTuple_CheckExact(v)) {
            size = PyTuple_GET_SIZE(v);
        } else if (PyList_CheckExact(v)) {
            size = PyList_GET_SIZE(v);
        } else {
            size = PyObject_Size(v);
            if (size < 0) {
                break;
            }
        }
        ok = size == c->n;
        break;
    }
    case OP_KEYS: {
        if (PyDict_CheckExact(v)) {
            /* tuple(v) == obj (a tuple: the keys in their order, which iteration shows):
             * equal sizes and each key the same, in order.  Exact str/int keys compare without
             * running Python code; any other key takes the generic path below, which runs what
             * the text runs. */
            Py_ssize_t n = PyTuple_GET_SIZE(c->obj);
            if (PyDict_GET_SIZE(v) != n) {
                ok = 0;
                break;
            }
            Py_ssize_t pos = 0, i = 0;
            PyObject *key, *value;
            int simple = 1;
            ok = 1;
            while (PyDict_Next(v, &pos, &key, &value) && i < n) {
                PyObject *want = PyTuple_GET_ITEM(c->obj, i++);
                if (key == want) {
                    continue;
                }
                if ((!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key))
                        || Py_TYPE(key) != Py_TYPE(want)) {
                    simple = 0;
                    break;
                }
                int eq = PyObject_RichCompareBool(key, want, Py_EQ);
                if (eq <= 0) {
                    ok = eq;
                    break;
                }
            }
            if (simple) {
                break;
            }
        }
        PyObject *keys = PySequence_Tuple(v);
        if (keys != NULL) {
            ok = compare(keys, c->obj, Py_EQ);
            Py_DECREF(keys);
        } else {
            ok = -1;
        }
        break;
    }
    case OP_NO_ATTR:
        ok = lacks_attribute(v, c->obj);
        break;
    case OP_NOT_IN: {
        int in = PyDict_CheckExact(v) ? PyDict_Contains(v, c->obj) : PySequence_Contains(v, c->obj);
        ok = in < 0 ? -1 : !in;
        break;
    }
    default:
        PyErr_SetString(PyExc_SystemError, "bad guard operation");
        break;
    }
    Py_DECREF(v);
    return ok;
}

/* Run checks in order.  1 all pass; 0 one fails (its index in *failed if given); -1 a
 * BaseException that is not an Exception is pending (an Exception counts as a failure and is
 * cleared, as the text's `except Exception: return False`). */
static int run_program(GuardSet *gs, const inputs *in, Py_ssize_t *failed) {
    for (Py_ssize_t i = 0; i < gs->ncheck; i++) {
        int ok = run_check(&gs->checks[i], in);
        if (ok == 1) {
            continue;
        }
        if (failed != NULL) {
            *failed = i;
        }
        if (ok < 0) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                return -1;
            }
            PyErr_Clear();
        }
        return 0;
    }
    return 1;
}

/* Self-check: evaluate the Python function too; on disagreement raise AssertionError with the
 * message dynamo/guards.py makes (naming the guard). */
static int cross_check(GuardSet *gs, const inputs *in, int c_result) {
    int py = run_python(gs->python_fn, in);
    if (py < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return -1;
        }
        PyErr_Clear();
        py = 0;
    }
    if (py == c_result) {
        return c_result;
    }
    PyObject *describe = gs->dict != NULL ? PyDict_GetItemString(gs->dict, "describe_mismatch")
                                          : NULL;
    PyObject *msg = NULL;
    if (describe != NULL) {
        /* describe_mismatch(guard_set, *slots, globals, closure): the set is passed, not
         * captured, so the describing function makes no reference cycle with it. */
        PyObject *args = PyTuple_New(in->nslots + 3);
        if (args != NULL) {
            PyTuple_SET_ITEM(args, 0, Py_NewRef((PyObject *)gs));
            for (Py_ssize_t i = 0; i < in->nslots; i++) {
                PyTuple_SET_ITEM(args, 1 + i, Py_NewRef(in->slots[i] ? in->slots[i] : Py_None));
            }
            PyTuple_SET_ITEM(args, 1 + in->nslots, Py_NewRef(in->globals));
            PyTuple_SET_ITEM(args, 2 + in->nslots,
                             Py_NewRef(in->closure ? in->closure : Py_None));
            msg = PyObject_CallObject(describe, args);
            Py_DECREF(args);
        }
        if (msg == NULL) {
            PyErr_Clear();
        }
    }
    if (msg != NULL && PyUnicode_Check(msg)) {
        PyErr_Format(PyExc_AssertionError,
                     "npdynamo guard self-check: the C guards say %s, the Python guards say %s; "
                     "%U",
                     c_result ? "pass" : "fail", py ? "pass" : "fail", msg);
    } else {
        PyErr_Format(PyExc_AssertionError,
                     "npdynamo guard self-check: the C guards say %s, the Python guards say %s",
                     c_result ? "pass" : "fail", py ? "pass" : "fail");
    }
    Py_XDECREF(msg);
    return -1;
}

int npd_guardset_check(PyObject *obj, PyObject *const *slots, Py_ssize_t nslots,
                       PyObject *globals, PyObject *closure) {
    GuardSet *gs = (GuardSet *)obj;
    inputs in = {slots, nslots, globals, closure};
    int ok = run_program(gs, &in, NULL);
    if (ok >= 0 && self_check && gs->python_fn != NULL) {
        ok = cross_check(gs, &in, ok);
    }
    return ok;
}

/* ---- the Python face ------------------------------------------------------------------- */

static int split_call(GuardSet *gs, PyObject *const *args, Py_ssize_t nargs, inputs *in) {
    if (nargs != gs->nslots + 2) {
        PyErr_Format(PyExc_TypeError,
                     "guard set takes (%zd argument slots, globals, closure): %zd arguments "
                     "given", gs->nslots, nargs);
        return -1;
    }
    in->slots = args;
    in->nslots = gs->nslots;
    in->globals = args[gs->nslots];
    in->closure = args[gs->nslots + 1] == Py_None ? NULL : args[gs->nslots + 1];
    return 0;
}

static PyObject *guardset_vectorcall(GuardSet *gs, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_SetString(PyExc_TypeError, "guard set takes no keyword arguments");
        return NULL;
    }
    inputs in;
    if (split_call(gs, args, PyVectorcall_NARGS(nargsf), &in) < 0) {
        return NULL;
    }
    int ok = run_program(gs, &in, NULL);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

/* first_failing_check(*slots, globals, closure) -> index of the first failing check, or -1. */
static PyObject *guardset_first_failing(GuardSet *gs, PyObject *const *args, Py_ssize_t nargs) {
    inputs in;
    if (split_call(gs, args, nargs, &in) < 0) {
        return NULL;
    }
    Py_ssize_t failed = -1;
    int ok = run_program(gs, &in, &failed);
    if (ok < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(ok ? -1 : failed);
}

/* check_guard_of(i) -> index of the Guard check i belongs to. */
static PyObject *guardset_guard_of(GuardSet *gs, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (i < 0 || i >= gs->ncheck) {
        PyErr_SetString(PyExc_IndexError, "check index out of range");
        return NULL;
    }
    return PyLong_FromSsize_t(gs->checks[i].guard);
}

static void free_checks(check *checks, Py_ssize_t n) {
    if (checks == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        check *c = &checks[i];
        for (int j = 0; c->steps != NULL && j < c->nsteps; j++) {
            Py_XDECREF(c->steps[j].obj);
        }
        PyMem_Free(c->steps);
        PyMem_Free(c->dims);
        Py_XDECREF(c->obj);
        Py_XDECREF(c->obj2);
        if (c->other != NULL) {
            for (int j = 0; c->other->steps != NULL && j < c->other->nsteps; j++) {
                Py_XDECREF(c->other->steps[j].obj);
            }
            PyMem_Free(c->other->steps);
            PyMem_Free(c->other);
        }
    }
    PyMem_Free(checks);
}

static int parse_path(check *c, PyObject *path) {
    if (!PyTuple_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "guard path must be a tuple of (kind, arg) pairs");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    if (n > 1000) {
        PyErr_SetString(PyExc_ValueError, "guard path too long");
        return -1;
    }
    c->nsteps = (int)n;
    c->pure = 1;
    c->steps = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(step));
    if (c->steps == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *item = PyTuple_GET_ITEM(path, j);
        int kind;
        PyObject *arg;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "iO", &kind, &arg)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "guard step must be (kind, arg)");
            }
            return -1;
        }
        step *s = &c->steps[j];
        s->kind = kind;
        int first = j == 0;
        switch (kind) {
        case STEP_ARG:
        case STEP_CLOSURE:
            s->index = PyLong_AsSsize_t(arg);
            if (s->index < 0 || !first) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "bad argument/closure step");
                }
                return -1;
            }
            break;
        case STEP_GLOBALS:
            if (!first) {
                PyErr_SetString(PyExc_ValueError, "globals step must come first");
                return -1;
            }
            break;
        case STEP_GLOBAL:
        case STEP_ATTR:
            if (!PyUnicode_CheckExact(arg) || first != (kind == STEP_GLOBAL)) {
                PyErr_SetString(PyExc_ValueError, "bad global/attribute step");
                return -1;
            }
            s->obj = Py_NewRef(arg);
            c->pure &= kind == STEP_GLOBAL;
            break;
        case STEP_ITEM:
            if (first) {
                PyErr_SetString(PyExc_ValueError, "item step needs a base");
                return -1;
            }
            s->obj = Py_NewRef(arg);
            c->pure = 0;
            break;
        default:
            PyErr_SetString(PyExc_ValueError, "unknown guard step kind");
            return -1;
        }
    }
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "empty guard path");
        return -1;
    }
    return 0;
}

/* GuardSet(nslots, program, python_fn): program is a list of
 * (op, path, obj, obj2, n, guard_index) tuples (see dynamo/guards.py). */
static PyObject *guardset_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t nslots;
    PyObject *program, *python_fn;
    static char *kwlist[] = {"nslots", "program", "python_fn", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nO!O:GuardSet", kwlist, &nslots,
                                     &PyList_Type, &program, &python_fn)) {
        return NULL;
    }
    if (nslots < 0 || (python_fn != Py_None && !PyCallable_Check(python_fn))) {
        PyErr_SetString(PyExc_ValueError, "GuardSet: nslots must be >= 0 and python_fn callable");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(program);
    check *checks = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(check));
    if (checks == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        check *c = &checks[i];
        PyObject *item = PyList_GET_ITEM(program, i);
        PyObject *path, *obj, *obj2;
        if (!PyTuple_Check(item) ||
            !PyArg_ParseTuple(item, "iOOOnn", &c->op, &path, &obj, &obj2, &c->n,
                              &c->guard)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "GuardSet: each check must be a tuple");
            }
            goto error;
        }
        c->obj = Py_NewRef(obj);
        c->obj2 = Py_NewRef(obj2);
        if (c->op < 0 || c->op >= OP_COUNT) {
            PyErr_Format(PyExc_ValueError, "GuardSet: unknown operation %d", c->op);
            goto error;
        }
        if (c->op == OP_PYTHON) {
            if (!PyCallable_Check(obj)) {
                PyErr_SetString(PyExc_TypeError, "GuardSet: a Python check needs a callable");
                goto error;
            }
            continue;
        }
        if (parse_path(c, path) < 0) {
            goto error;
        }
        int bad = 0;
        switch (c->op) {
        case OP_TYPE_IS:
            bad = !PyType_Check(obj);
            break;
        case OP_TYPE_IS_WEAK:
        case OP_IS_WEAK:
            bad = !PyWeakref_CheckRef(obj);
            break;
        case OP_REPR_EQ:
            bad = !PyUnicode_Check(obj);
            break;
        case OP_KEYS:
            bad = !PyTuple_CheckExact(obj);
            break;
        case OP_COPYSIGN:
            bad = c->n != 1 && c->n != -1;
            break;
        case OP_SHAPE:
            bad = !PyTuple_CheckExact(obj);
            if (bad) {
                break;
            }
            c->ndims = PyTuple_GET_SIZE(obj);
            c->dims = PyMem_Calloc(c->ndims > 0 ? (size_t)c->ndims : 1, sizeof(Py_ssize_t));
            if (c->dims == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            for (Py_ssize_t k = 0; !bad && k < c->ndims; k++) {
                PyObject *d = PyTuple_GET_ITEM(obj, k);
                c->dims[k] = PyLong_CheckExact(d) ? PyLong_AsSsize_t(d) : -1;
                if (c->dims[k] < 0) { /* not an int, overflow or negative: no array has it */
                    PyErr_Clear();
                    bad = 1;
                }
            }
            break;
        case OP_DIM:
            bad = !PyLong_CheckExact(obj) || PyLong_AsSsize_t(obj) < 0 || c->n < -1;
            PyErr_Clear();
            break;
        case OP_SAME_AS:
            c->other = PyMem_Calloc(1, sizeof(check));
            if (c->other == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            if (parse_path(c->other, obj) < 0) {
                goto error;
            }
            break;
        default:
            break;
        }
        if (bad) {
            PyErr_Format(PyExc_TypeError, "GuardSet: bad operand for operation %d", c->op);
            goto error;
        }
    }
    GuardSet *gs = (GuardSet *)type->tp_alloc(type, 0);
    if (gs == NULL) {
        goto error;
    }
    gs->vectorcall = (vectorcallfunc)guardset_vectorcall;
    gs->nslots = nslots;
    gs->ncheck = n;
    gs->checks = checks;
    gs->python_fn = python_fn == Py_None ? NULL : Py_NewRef(python_fn);
    gs->dict = NULL;
    gs->weakreflist = NULL;
    return (PyObject *)gs;
error:
    free_checks(checks, n);
    return NULL;
}

static int guardset_traverse(GuardSet *gs, visitproc visit, void *arg) {
    Py_VISIT(gs->python_fn);
    Py_VISIT(gs->dict);
    for (Py_ssize_t i = 0; i < gs->ncheck; i++) {
        Py_VISIT(gs->checks[i].obj);
        Py_VISIT(gs->checks[i].obj2);
    }
    return 0;
}

static int guardset_clear(GuardSet *gs) {
    /* Only the Python-level parts: the checks stay valid (they hold types, names and
     * constants, which cannot refer back to the set) so a set being collected is still safe
     * to evaluate. */
    Py_CLEAR(gs->python_fn);
    Py_CLEAR(gs->dict);
    return 0;
}

static void guardset_dealloc(GuardSet *gs) {
    PyObject_GC_UnTrack(gs);
    if (gs->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)gs);
    }
    guardset_clear(gs);
    free_checks(gs->checks, gs->ncheck);
    gs->checks = NULL;
    Py_TYPE(gs)->tp_free((PyObject *)gs);
}

static PyObject *guardset_get_python_fn(GuardSet *gs, void *unused) {
    return Py_NewRef(gs->python_fn != NULL ? gs->python_fn : Py_None);
}

static PyObject *guardset_get_ncheck(GuardSet *gs, void *unused) {
    return PyLong_FromSsize_t(gs->ncheck);
}

static PyObject *guardset_get_nslots(GuardSet *gs, void *unused) {
    return PyLong_FromSsize_t(gs->nslots);
}

static PyObject *guardset_repr(GuardSet *gs) {
    return PyUnicode_FromFormat("<npdynamo GuardSet: %zd checks over %zd argument slots>",
                                gs->ncheck, gs->nslots);
}

static PyMethodDef guardset_methods[] = {
    {"first_failing_check", (PyCFunction)(void (*)(void))guardset_first_failing, METH_FASTCALL,
     PyDoc_STR("first_failing_check(*slots, globals, closure) -> index of the first failing "
               "check (C evaluation), or -1 when all pass")},
    {"guard_of_check", (PyCFunction)guardset_guard_of, METH_O,
     PyDoc_STR("guard_of_check(i) -> index (in .guard_objects) of the guard check i tests")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef guardset_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"python_fn", (getter)guardset_get_python_fn, NULL,
     PyDoc_STR("the Python check function with the same meaning (self-check mode, fallback)"),
     NULL},
    {"ncheck", (getter)guardset_get_ncheck, NULL, PyDoc_STR("number of checks"), NULL},
    {"nslots", (getter)guardset_get_nslots, NULL, PyDoc_STR("number of argument slots"), NULL},
    {NULL},
};

PyTypeObject npd_GuardSetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.GuardSet",
    .tp_doc = PyDoc_STR("GuardSet(nslots, program, python_fn): a frame's guards evaluated in C; "
                        "call as check(*arg_slots, globals, closure) -> bool (dynamo/guards.py "
                        "builds it)."),
    .tp_basicsize = sizeof(GuardSet),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = guardset_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GuardSet, vectorcall),
    .tp_dictoffset = offsetof(GuardSet, dict),
    .tp_weaklistoffset = offsetof(GuardSet, weakreflist),
    .tp_dealloc = (destructor)guardset_dealloc,
    .tp_traverse = (traverseproc)guardset_traverse,
    .tp_clear = (inquiry)guardset_clear,
    .tp_repr = (reprfunc)guardset_repr,
    .tp_methods = guardset_methods,
    .tp_getset = guardset_getset,
};

/* ---- module functions ------------------------------------------------------------------ */

/* set_ndarray_layout(ndarray_type, contiguous_2x3_float64, its_transpose) -> bool: turn the
 * ndarray fast path on if the mirrored struct reads these arrays correctly. */
static PyObject *set_ndarray_layout(PyObject *module, PyObject *args) {
    PyObject *type, *a, *t;
    if (!PyArg_ParseTuple(args, "O!OO:set_ndarray_layout", &PyType_Type, &type, &a, &t)) {
        return NULL;
    }
    Py_CLEAR(ndarray_type);
    if (Py_TYPE(a) != (PyTypeObject *)type || Py_TYPE(t) != (PyTypeObject *)type) {
        Py_RETURN_FALSE;
    }
    PyObject *da = PyObject_GetAttrString(a, "dtype");
    PyObject *dt = PyObject_GetAttrString(t, "dtype");
    Py_XDECREF(da);
    Py_XDECREF(dt);
    if (da == NULL || dt == NULL) {
        return NULL;
    }
    npd_array *x = (npd_array *)a, *y = (npd_array *)t;
    int ok = x->nd == 2 && x->dimensions[0] == 2 && x->dimensions[1] == 3 && x->descr == da &&
             (x->flags & NPD_ARRAY_C_CONTIGUOUS) && y->nd == 2 && y->dimensions[0] == 3 &&
             y->dimensions[1] == 2 && y->descr == dt && !(y->flags & NPD_ARRAY_C_CONTIGUOUS);
    if (ok) {
        ndarray_type = (PyTypeObject *)Py_NewRef(type);
    }
    return PyBool_FromLong(ok);
}

static PyObject *set_guard_self_check(PyObject *module, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    PyObject *previous = PyBool_FromLong(self_check);
    self_check = on;
    return previous;
}

static PyObject *lacks_attribute_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "lacks_attribute() takes an object and a name");
        return NULL;
    }
    int ok = lacks_attribute(args[0], args[1]);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

static PyMethodDef guard_functions[] = {
    {"lacks_attribute", (PyCFunction)(void (*)(void))lacks_attribute_py, METH_FASTCALL,
     PyDoc_STR("lacks_attribute(obj, name) -> bool: obj has no attribute name, known without "
               "running code (generic attribute lookup, not in its type's MRO nor in its "
               "__dict__); the NO_ATTRIBUTE guard")},
    {"set_ndarray_layout", set_ndarray_layout, METH_VARARGS,
     PyDoc_STR("set_ndarray_layout(ndarray, a, a.T) -> bool: enable reading arrays directly "
               "in guards after checking the struct layout on a 2x3 array and its transpose")},
    {"set_guard_self_check", set_guard_self_check, METH_O,
     PyDoc_STR("set_guard_self_check(on) -> previous: the hook evaluates C and Python guards "
               "and raises AssertionError when they disagree (dynamo.config.guard_self_check)")},
    {NULL, NULL, 0, NULL},
};

int npd_guards_init(PyObject *module) {
    if (PyType_Ready(&npd_GuardSetType) < 0 ||
        PyModule_AddObjectRef(module, "GuardSet", (PyObject *)&npd_GuardSetType) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, guard_functions);
}
