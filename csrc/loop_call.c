/*
 * loop_call.c -- `_C.LoopCall`: one call of a loop kernel (dynamo/backends/c/c_loop_nest.py)
 * made in C: the arguments checked and marshalled, the kernel run with the GIL released, the
 * results boxed, in one C call instead of ~5 us of Python and cffi work.
 *
 * In:  built once per kernel by c_loop_nest.LoopKernel with the kernel's address (from cffi)
 *      and plans: per input (slot, kind, dtype, ndim, tag free, tag wanted), per local the
 *      kind it comes back as, per way out the kind of its returned value.
 * Out: `run(iterable, values)`:
 *        - NotImplemented: an argument this code does not judge (an array whose dtype object is
 *          not the kernel's own, a NumPy int64 or bool_ scalar, anything unknown, or NumPy's
 *          struct not verified): the caller takes its Python path, which decides;
 *        - None: the kernel cannot start (a value of another type, an int beyond int64, an
 *          iterable that is not a range of int64): the caller runs the loop in Python;
 *        - (k, values, extra), as LoopKernel._run returns, with `extra` for k == 0 the tuple
 *          (start, stop, step) of the rest of the range.
 * Calling the object itself, `call(iterable, *values)`, is the whole call as the graph makes
 * it (`LoopKernel.entry`): while NumPy's error state is its default (the context variable
 * `errvar` holds `errstart`), the result above, with the Python callbacks the constructor took
 * for the rest: `python_call(iterable, values)` where `run` says NotImplemented or the error
 * state is another, `not_run(iterable, values)` where it says None, `deopt(locals, (start,
 * stop, step), values)` after a deoptimisation; no Python frame on the common path.
 * Everything a call needs lives on its C stack: calls from several threads, or from a signal
 * handler between two bytecodes of another, share nothing.
 */
#include "cpython_compat.h"

#include <string.h>

#include <structmember.h>

#include "guards.h"
#include "loop_call.h"

typedef struct {
    char *data;
    long long shape[4];
    long long strides[4];
    int id;
    int writeable;
    long long row; /* 0, or 1 + the index of the row of array `id` it is (a local's value) */
} npd_arr;
typedef union {
    long long i;
    double f;
} npd_val;
typedef int (*loop_fn)(npd_arr *, npd_val *, unsigned char *, unsigned char *, long long *, int,
                       npd_val *);

#define MAX_SLOTS 254
#define MAX_ARRAYS 64
#define NPD_ARRAY_WRITEABLE 0x0400

enum { K_ARRAY = 0, K_INT = 1, K_FLOAT = 2, K_BOOL = 3 };

typedef struct {
    Py_ssize_t slot;
    int kind;
    PyObject *dtype; /* borrowed from `plan` */
    int ndim;
    int free_tag;
    int want_np;
} input;

typedef struct {
    PyObject_HEAD
    loop_fn fn;
    Py_ssize_t nslots, nin, nexits;
    int takes_range;
    unsigned long main_ident;
    input *in;
    int *out_kind;
    int *exit_kind; /* -1: no value */
    PyObject *plan;     /* the constructor's arguments, kept alive */
    PyObject *unbound;
    PyObject *np_types; /* (None, np.int64, np.float64, np.bool_) */
    PyObject *errvar, *errstart;            /* NumPy's error-state ContextVar (or None) */
    PyObject *python_call, *not_run, *deopt; /* the Python paths (see the top) */
    vectorcallfunc vectorcall;
    int python_only; /* (tests) 1: every call takes python_call */
} LoopCall;

static PyObject *str_start, *str_stop, *str_step;

static PyObject *box(LoopCall *self, int kind, int np_tag, npd_val v) {
    PyObject *x = kind == K_FLOAT ? PyFloat_FromDouble(v.f)
                  : kind == K_BOOL ? PyBool_FromLong(v.i != 0)
                                   : PyLong_FromLongLong(v.i);
    if (x == NULL || !np_tag) {
        return x;
    }
    PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(self->np_types, kind), x);
    Py_DECREF(x);
    return r;
}

/* 1: int64 value read; 0: not an int64 */
static int as_i64(PyObject *o, long long *out) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* `run` on the values vals[0:nin]; `*status` is set to the kernel's result k (-1: it did not
 * run: None or NotImplemented returned) */
static PyObject *lc_core(LoopCall *self, PyObject *iterable, PyObject *const *vals, int *status) {
    *status = -1;
    PyTypeObject *ndarray = npd_verified_ndarray_type();
    if (ndarray == NULL) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    npd_arr arrs[MAX_ARRAYS];
    PyObject *arrays[MAX_ARRAYS];
    int narr = 0;
    npd_val v[MAX_SLOTS + 2];
    unsigned char tag[MAX_SLOTS + 2], bound[MAX_SLOTS + 2];
    long long rng[3] = {0, 0, 0};
    Py_ssize_t n = self->nslots;
    memset(v, 0, sizeof(npd_val) * (size_t)(n + 2));
    memset(tag, 0, (size_t)(n + 2));
    memset(bound, 0, (size_t)(n + 2));
    if (self->takes_range) {
        PyObject *it = iterable;
        if (Py_TYPE(it) != &PyRange_Type) {
            Py_RETURN_NONE;
        }
        PyObject *names[3] = {str_start, str_stop, str_step};
        for (int k = 0; k < 3; k++) {
            PyObject *x = PyObject_GetAttr(it, names[k]);
            if (x == NULL) {
                return NULL;
            }
            int ok = as_i64(x, &rng[k]);
            Py_DECREF(x);
            if (!ok) {
                Py_RETURN_NONE;
            }
        }
    }
    for (Py_ssize_t i = 0; i < self->nin; i++) {
        input *in = &self->in[i];
        PyObject *value = vals[i];
        if (in->kind == K_ARRAY) {
            if (Py_TYPE(value) != ndarray) {
                Py_RETURN_NONE;
            }
            npd_array *a = (npd_array *)value;
            if (a->descr != in->dtype) {
                Py_RETURN_NOTIMPLEMENTED; /* (maybe an equal dtype: Python compares) */
            }
            if (a->nd != in->ndim) {
                Py_RETURN_NONE;
            }
            int j = 0;
            while (j < narr && arrays[j] != value) {
                j++;
            }
            if (j == narr) {
                if (narr == MAX_ARRAYS) {
                    Py_RETURN_NOTIMPLEMENTED;
                }
                npd_arr *d = &arrs[narr];
                d->data = a->data;
                for (int k = 0; k < a->nd; k++) {
                    d->shape[k] = a->dimensions[k];
                    d->strides[k] = a->strides[k];
                }
                d->id = narr;
                d->writeable = (a->flags & NPD_ARRAY_WRITEABLE) != 0;
                d->row = 0;
                arrays[narr++] = value;
            }
            v[in->slot].i = j;
            continue;
        }
        int kind, np_tag;
        PyTypeObject *t = Py_TYPE(value);
        if (t == &PyFloat_Type) {
            kind = K_FLOAT, np_tag = 0;
        } else if (t == &PyLong_Type) {
            kind = K_INT, np_tag = 0;
        } else if (t == &PyBool_Type) {
            kind = K_BOOL, np_tag = 0;
        } else if ((PyObject *)t == PyTuple_GET_ITEM(self->np_types, K_FLOAT)) {
            kind = K_FLOAT, np_tag = 1;
        } else {
            Py_RETURN_NOTIMPLEMENTED; /* (np.int64, np.bool_, other types: Python decides) */
        }
        if (kind != in->kind || (!in->free_tag && np_tag != in->want_np)) {
            Py_RETURN_NONE;
        }
        if (kind == K_FLOAT) {
            v[in->slot].f = PyFloat_AsDouble(value);
        } else if (kind == K_BOOL) {
            v[in->slot].i = value == Py_True;
        } else if (!as_i64(value, &v[in->slot].i)) {
            Py_RETURN_NONE;
        }
        tag[in->slot] = (unsigned char)np_tag;
    }
    int main_thread = PyThread_get_thread_ident() == self->main_ident;
    int k;
    Py_BEGIN_ALLOW_THREADS
    k = self->fn(arrs, v, tag, bound, rng, main_thread, v + n);
    Py_END_ALLOW_THREADS
    if (k == -1) {
        Py_RETURN_NONE;
    }
    *status = k;
    PyObject *result = PyTuple_New(n);
    if (result == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *x;
        if (!bound[j]) {
            x = Py_NewRef(self->unbound);
        } else if (self->out_kind[j] == K_ARRAY) {
            /* (an input array, or a row of one: v = id + (1 + row) << 16) */
            long long row = v[j].i >> 16;
            x = row ? PySequence_GetItem(arrays[v[j].i & 0xFFFF], (Py_ssize_t)(row - 1))
                    : Py_NewRef(arrays[v[j].i & 0xFFFF]);
            if (x == NULL) {
                Py_DECREF(result);
                return NULL;
            }
        } else {
            x = box(self, self->out_kind[j], tag[j], v[j]);
            if (x == NULL) {
                Py_DECREF(result);
                return NULL;
            }
        }
        PyTuple_SET_ITEM(result, j, x);
    }
    PyObject *extra;
    if (k == 0) {
        extra = Py_BuildValue("(LLL)", rng[0], rng[1], rng[2]);
    } else if (k <= self->nexits && self->exit_kind[k - 1] >= 0) {
        extra = box(self, self->exit_kind[k - 1], (int)v[n + 1].i, v[n]);
    } else {
        extra = Py_NewRef(Py_None);
    }
    if (extra == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    return Py_BuildValue("(iNN)", k, result, extra);
}

static PyObject *lc_run(LoopCall *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != self->nin) {
        PyErr_SetString(PyExc_TypeError, "LoopCall.run(iterable, values: tuple)");
        return NULL;
    }
    int status;
    return lc_core(self, args[0], &PyTuple_GET_ITEM(args[1], 0), &status);
}

/* call(iterable, *values): the whole call (see the top) */
static PyObject *lc_call(PyObject *callable, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames) {
    LoopCall *self = (LoopCall *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nin + 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(PyExc_TypeError, "a loop kernel takes the iterable and %zd values",
                     self->nin);
        return NULL;
    }
    PyObject *out = NULL, *fallback = self->python_call;
    int status = -1;
    if (self->errvar != Py_None && !self->python_only) {
        PyObject *state = NULL;
        if (PyContextVar_Get(self->errvar, NULL, &state) < 0) {
            return NULL;
        }
        int is_default = state == self->errstart;
        Py_XDECREF(state);
        if (is_default) {
            out = lc_core(self, args[0], args + 1, &status);
            if (out == NULL) {
                return NULL;
            }
            if (out == Py_None) {
                fallback = self->not_run;
            } else if (status == 0) {
                fallback = self->deopt;
            } else if (out != Py_NotImplemented) {
                return out;
            }
        }
    }
    PyObject *values = PyTuple_New(self->nin);
    if (values == NULL) {
        Py_XDECREF(out);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->nin; i++) {
        PyTuple_SET_ITEM(values, i, Py_NewRef(args[i + 1]));
    }
    PyObject *r;
    if (fallback == self->deopt) { /* (0, locals, (start, stop, step)) */
        r = PyObject_CallFunctionObjArgs(fallback, PyTuple_GET_ITEM(out, 1),
                                         PyTuple_GET_ITEM(out, 2), values, NULL);
    } else {
        r = PyObject_CallFunctionObjArgs(fallback, args[0], values, NULL);
    }
    Py_XDECREF(out);
    Py_DECREF(values);
    return r;
}

static void lc_dealloc(LoopCall *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->plan);
    Py_CLEAR(self->unbound);
    Py_CLEAR(self->np_types);
    Py_CLEAR(self->errvar);
    Py_CLEAR(self->errstart);
    Py_CLEAR(self->python_call);
    Py_CLEAR(self->not_run);
    Py_CLEAR(self->deopt);
    PyMem_Free(self->in);
    PyMem_Free(self->out_kind);
    PyMem_Free(self->exit_kind);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int lc_traverse(LoopCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->plan);
    Py_VISIT(self->unbound);
    Py_VISIT(self->np_types);
    Py_VISIT(self->errvar);
    Py_VISIT(self->errstart);
    Py_VISIT(self->python_call);
    Py_VISIT(self->not_run);
    Py_VISIT(self->deopt);
    return 0;
}

static int lc_clear(LoopCall *self) {
    Py_CLEAR(self->plan);
    Py_CLEAR(self->unbound);
    Py_CLEAR(self->np_types);
    Py_CLEAR(self->errvar);
    Py_CLEAR(self->errstart);
    Py_CLEAR(self->python_call);
    Py_CLEAR(self->not_run);
    Py_CLEAR(self->deopt);
    return 0;
}

/* LoopCall(address, nslots, inputs, out_kinds, exit_kinds, takes_range, main_ident, unbound,
 *          np_types, errvar, errstart, python_call, not_run, deopt): inputs a tuple of (slot,
 *          kind, dtype or None, ndim, free_tag, want_np); errvar a ContextVar or None */
static PyObject *lc_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long address;
    Py_ssize_t nslots;
    PyObject *inputs, *outs, *exits, *unbound, *np_types;
    PyObject *errvar, *errstart, *python_call, *not_run, *deopt;
    int takes_range;
    unsigned long main_ident;
    if (!PyArg_ParseTuple(args, "KnO!O!O!pkOO!OOOOO:LoopCall", &address, &nslots, &PyTuple_Type,
                          &inputs, &PyTuple_Type, &outs, &PyTuple_Type, &exits, &takes_range,
                          &main_ident, &unbound, &PyTuple_Type, &np_types, &errvar, &errstart,
                          &python_call, &not_run, &deopt)) {
        return NULL;
    }
    if (address == 0 || nslots < 0 || nslots > MAX_SLOTS || PyTuple_GET_SIZE(outs) != nslots ||
        PyTuple_GET_SIZE(np_types) != 4 || (errvar != Py_None && !PyContextVar_CheckExact(errvar))
        || !PyCallable_Check(python_call) || !PyCallable_Check(not_run) ||
        !PyCallable_Check(deopt)) {
        PyErr_SetString(PyExc_ValueError, "LoopCall: bad address, slot count or plan");
        return NULL;
    }
    LoopCall *self = (LoopCall *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->fn = (loop_fn)(uintptr_t)address;
    self->nslots = nslots;
    self->nin = PyTuple_GET_SIZE(inputs);
    self->nexits = PyTuple_GET_SIZE(exits);
    self->takes_range = takes_range;
    self->main_ident = main_ident;
    self->plan = Py_NewRef(args);
    self->unbound = Py_NewRef(unbound);
    self->np_types = Py_NewRef(np_types);
    self->errvar = Py_NewRef(errvar);
    self->errstart = Py_NewRef(errstart);
    self->python_call = Py_NewRef(python_call);
    self->not_run = Py_NewRef(not_run);
    self->deopt = Py_NewRef(deopt);
    self->vectorcall = lc_call;
    self->in = PyMem_Calloc((size_t)self->nin + 1, sizeof(input));
    self->out_kind = PyMem_Calloc((size_t)nslots + 1, sizeof(int));
    self->exit_kind = PyMem_Calloc((size_t)self->nexits + 1, sizeof(int));
    if (self->in == NULL || self->out_kind == NULL || self->exit_kind == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->nin; i++) {
        input *in = &self->in[i];
        PyObject *dtype;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(inputs, i), "niOipp", &in->slot, &in->kind, &dtype,
                              &in->ndim, &in->free_tag, &in->want_np)) {
            Py_DECREF(self);
            return NULL;
        }
        in->dtype = dtype;
        if (in->slot < 0 || in->slot >= nslots || in->kind < K_ARRAY || in->kind > K_BOOL ||
            in->ndim < 0 || in->ndim > 4) {
            PyErr_SetString(PyExc_ValueError, "LoopCall: bad input plan");
            Py_DECREF(self);
            return NULL;
        }
    }
    for (Py_ssize_t j = 0; j < nslots; j++) {
        self->out_kind[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(outs, j));
    }
    for (Py_ssize_t j = 0; j < self->nexits; j++) {
        self->exit_kind[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(exits, j));
    }
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMethodDef lc_methods[] = {
    {"run", (PyCFunction)(void (*)(void))lc_run, METH_FASTCALL,
     PyDoc_STR("run(iterable, values) -> (k, values, extra), None (cannot start) or "
               "NotImplemented (the Python path decides)")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lc_members[] = {
    {"python_only", T_INT, offsetof(LoopCall, python_only), 0,
     PyDoc_STR("1: every call takes the Python path (python_call): for tests")},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LoopCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.LoopCall",
    .tp_doc = PyDoc_STR("one call of a loop kernel, made in C (csrc/loop_call.c)"),
    .tp_basicsize = sizeof(LoopCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(LoopCall, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = lc_new,
    .tp_dealloc = (destructor)lc_dealloc,
    .tp_traverse = (traverseproc)lc_traverse,
    .tp_clear = (inquiry)lc_clear,
    .tp_methods = lc_methods,
    .tp_members = lc_members,
};

int npd_loop_call_init(PyObject *module) {
    str_start = PyUnicode_InternFromString("start");
    str_stop = PyUnicode_InternFromString("stop");
    str_step = PyUnicode_InternFromString("step");
    if (str_start == NULL || str_stop == NULL || str_step == NULL ||
        PyType_Ready(&LoopCallType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "LoopCall", (PyObject *)&LoopCallType);
}
