/*
 * small_call.c -- `_C.SmallKernel` (see small_call.h): one C call from Python to a C-backend
 * kernel, for domains so small that the general runner's ~5-12 us of Python/cffi work per call
 * would cost more than NumPy (dynamo/backends/c/small.py builds and registers these objects).
 *
 * Per call (`run`, or the whole-graph call):
 *  1. every input must be an exact ndarray whose dtype object is the expected one and whose
 *     ALIGNED flag is set, or a NumPy scalar of the operand's dtype (a 0-d operand); its
 *     (ndim, shape, byte strides) are packed into a signature;
 *  2. the signature must equal one registered with `add_layout` (at most SK_MAX_LAYOUTS; small.py
 *     plans each new layout once with the general runner and registers it when the outputs
 *     are C-contiguous, as NumPy lays them out for it); the layout gives the kernel's block
 *     and, for a whole-graph call whose operands are constant views of its arguments, the
 *     byte offset of each view's start (the signature is then the arguments' layout);
 *  3. the outputs are allocated with numpy.empty(shape, dtype) (exactly what the general
 *     runner allocates), the data pointers go into P and the kernel runs (the GIL released
 *     only for layouts registered as large: for a few elements releasing costs more);
 *  4. a scalar output (a NumPy ufunc or full reduction on 0-d inputs gives a NumPy scalar) is
 *     taken out of its 0-d array with arr[()].
 * Anything unexpected is a miss (None from `run`; the Python `slow` callback for a whole-graph
 * call), never an error: the callers then run the general path, which decides correctly.
 *
 * NumPy arrays are read through the stable ABI layout of PyArrayObject_fields (the struct
 * NumPy's own PyArray_DATA/PyArray_DIMS macros read), so the extension needs no NumPy headers.
 *
 * Floating-point warnings (whole-graph call): the FE_* bits whose np.errstate mode is 'warn'
 * come from dynamo.backends.c.kernel.fp_warn_mask (cached per errstate context-variable
 * object, as kernel.py does); None there (a mode raises/calls/...) or a raised warned flag
 * makes the call run `fallback` (the graph's NumPy code) instead, so warnings and exceptions
 * are NumPy's own.
 */
#include "small_call.h"

#include "guards.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The leading fields of numpy's PyArrayObject_fields (ndarraytypes.h); ABI-stable: the mirror
 * guards.h declares. */
typedef npd_array sk_array;

#define SK_ALIGNED 0x0100 /* NPY_ARRAY_ALIGNED */
/* A kernel returns this bit with its FE flags when it could not allocate a buffer (its
 * outputs are unwritten): DYN_NO_MEMORY in the kernels' C, kernel.NO_MEMORY in Python. */
#define SK_NO_MEMORY (1 << 30)
#define SK_MAX_OPS 64
#define SK_MAX_LAYOUTS 8
#define SK_SIG_MAX 1024

typedef int (*sk_fn)(const int64_t *, char **);

enum { SK_USE_KERNEL = 0, SK_UNDECIDED = 1, SK_USE_NUMPY = 2 };

typedef struct {
    PyObject *sig;     /* bytes: the inputs' packed (ndim, shape, strides) */
    PyObject *block;   /* bytes: the kernel's int64_t argument block */
    PyObject *offsets; /* bytes (int64_t per input, added to its data pointer) or NULL */
    int nogil;
} sk_layout;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *weakreflist;
    sk_fn fn;
    Py_ssize_t n_in, n_out, n_args;
    PyObject *in_dtypes;  /* tuple of np.dtype, one per kernel operand */
    PyObject *in_types;   /* tuple of their scalar types (dtype.type: np.float64, ...) */
    PyObject *out_shapes; /* tuple of shape tuples */
    PyObject *out_dtypes; /* tuple of np.dtype */
    char scalar[SK_MAX_OPS];
    Py_ssize_t arg_index[SK_MAX_OPS]; /* whole-graph call: operand i is args[arg_index[i]] */
    Py_ssize_t res_index[SK_MAX_OPS]; /* whole-graph result: outputs[res_index[j]] */
    Py_ssize_t n_res;                 /* -1: no whole-graph call; 0: one value; >0: tuple */
    int fp_errors;
    PyObject *ndarray, *empty, *mask_fn, *errvar, *keep;
    PyObject *fallback, *slow, *decide;
    PyObject *mask_key;
    long mask_val; /* -1: None (kernels must not run) */
    int state;
    Py_ssize_t n_layouts;
    sk_layout layouts[SK_MAX_LAYOUTS];
    unsigned long long calls;
} SmallKernel;

static PyObject *empty_tuple;

/* Pack the inputs' layouts into sig; 1 ok, 0 not runnable here (wrong type/dtype/alignment). */
static int sk_signature(SmallKernel *self, PyObject *const *ops, int64_t *sig, Py_ssize_t *len,
                        char **P) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < self->n_in; i++) {
        PyObject *o = ops[i];
        if (Py_TYPE(o) == (PyTypeObject *)PyTuple_GET_ITEM(self->in_types, i)) {
            /* A NumPy scalar of the operand's dtype (a 0-d operand): its value follows the
             * object header in every numeric scalar type (arrayscalars.h: PyObject_HEAD then
             * `obval`; np.float64 is a PyFloatObject, whose ob_fval sits there too). */
            if (n + 1 > SK_SIG_MAX) {
                return 0;
            }
            sig[n++] = 0;
            P[i] = (char *)o + sizeof(PyObject);
            continue;
        }
        if (Py_TYPE(o) != (PyTypeObject *)self->ndarray) {
            return 0;
        }
        sk_array *a = (sk_array *)o;
        if (a->descr != PyTuple_GET_ITEM(self->in_dtypes, i) || !(a->flags & SK_ALIGNED)) {
            return 0;
        }
        int nd = a->nd;
        if (n + 1 + 2 * (Py_ssize_t)nd > SK_SIG_MAX) {
            return 0;
        }
        sig[n++] = nd;
        for (int d = 0; d < nd; d++) {
            sig[n++] = a->dimensions[d];
        }
        for (int d = 0; d < nd; d++) {
            sig[n++] = a->strides[d];
        }
        P[i] = a->data;
    }
    *len = n;
    return 1;
}

/* Run the kernel on ops (operand order). 1: outs filled (new references), 0: miss, -1: error. */
static int sk_run_core(SmallKernel *self, PyObject *const *ops, PyObject **outs, int *flags) {
    if (self->empty == NULL) { /* cleared by the garbage collector */
        return 0;
    }
    int64_t sig[SK_SIG_MAX];
    char *P[2 * SK_MAX_OPS];
    Py_ssize_t len = 0;
    if (!sk_signature(self, ops, sig, &len, P)) {
        return 0;
    }
    sk_layout *L = NULL;
    for (Py_ssize_t k = 0; k < self->n_layouts; k++) {
        PyObject *s = self->layouts[k].sig;
        if (PyBytes_GET_SIZE(s) == len * (Py_ssize_t)sizeof(int64_t) &&
            memcmp(PyBytes_AS_STRING(s), sig, len * sizeof(int64_t)) == 0) {
            L = &self->layouts[k];
            break;
        }
    }
    if (L == NULL) {
        return 0;
    }
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        PyObject *argv[2] = {PyTuple_GET_ITEM(self->out_shapes, j),
                             PyTuple_GET_ITEM(self->out_dtypes, j)};
        PyObject *o = PyObject_Vectorcall(self->empty, argv, 2, NULL);
        if (o == NULL || Py_TYPE(o) != (PyTypeObject *)self->ndarray) {
            if (o != NULL) {
                PyErr_SetString(PyExc_TypeError, "SmallKernel: empty() did not return an ndarray");
                Py_DECREF(o);
            }
            for (Py_ssize_t q = 0; q < j; q++) {
                Py_DECREF(outs[q]);
            }
            return -1;
        }
        outs[j] = o;
        P[self->n_in + j] = ((sk_array *)o)->data;
    }
    if (L->offsets != NULL) {
        /* Whole-graph call whose operands are constant views of its arguments
         * (x[1:-1], ...): the view's start is a fixed byte offset for this layout. */
        const int64_t *off = (const int64_t *)PyBytes_AS_STRING(L->offsets);
        for (Py_ssize_t i = 0; i < self->n_in; i++) {
            P[i] += off[i];
        }
    }
    const int64_t *A = (const int64_t *)PyBytes_AS_STRING(L->block);
    int fl;
    if (L->nogil) {
        /* Without the GIL another thread may run: the inputs (borrowed, maybe from a list)
         * are held for the duration of the kernel. */
        for (Py_ssize_t i = 0; i < self->n_in; i++) {
            Py_INCREF(ops[i]);
        }
        Py_BEGIN_ALLOW_THREADS
        fl = self->fn(A, P);
        Py_END_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < self->n_in; i++) {
            Py_DECREF(ops[i]);
        }
    } else {
        fl = self->fn(A, P);
    }
    if (fl & SK_NO_MEMORY) {
        for (Py_ssize_t q = 0; q < self->n_out; q++) {
            Py_DECREF(outs[q]);
        }
        PyErr_SetString(PyExc_MemoryError,
                        "npdynamo's C kernel could not allocate its row buffer");
        return -1;
    }
    self->calls++;
    *flags = self->fp_errors ? fl : 0;
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        if (self->scalar[j]) {
            PyObject *s = PyObject_GetItem(outs[j], empty_tuple);
            if (s == NULL) {
                for (Py_ssize_t q = 0; q < self->n_out; q++) {
                    Py_DECREF(outs[q]);
                }
                return -1;
            }
            Py_SETREF(outs[j], s);
        }
    }
    return 1;
}

/* The FE_* bits whose errstate mode is 'warn' into *mask (-1: a mode forbids kernels). */
static int sk_mask(SmallKernel *self, long *mask) {
    PyObject *cur = NULL;
    if (self->errvar != Py_None) {
        if (PyContextVar_Get(self->errvar, NULL, &cur) < 0) {
            return -1;
        }
        if (cur != NULL && cur == self->mask_key) {
            Py_DECREF(cur);
            *mask = self->mask_val;
            return 0;
        }
    }
    PyObject *r = PyObject_CallNoArgs(self->mask_fn);
    if (r == NULL) {
        Py_XDECREF(cur);
        return -1;
    }
    long v = -1;
    if (r != Py_None) {
        v = PyLong_AsLong(r);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(r);
            Py_XDECREF(cur);
            return -1;
        }
    }
    Py_DECREF(r);
    if (cur != NULL) {
        Py_XSETREF(self->mask_key, cur); /* keeps the key alive: its address cannot be reused */
        self->mask_val = v;
    }
    *mask = v;
    return 0;
}

static PyObject *sk_args_tuple(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(t, i, args[i]);
    }
    return t;
}

/* Call cb(self, args) (slow / decide callbacks in small.py). */
static PyObject *sk_callback(PyObject *cb, PyObject *self, PyObject *const *args, Py_ssize_t n) {
    PyObject *t = sk_args_tuple(self, args, n);
    if (t == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(cb, self, t, NULL);
    Py_DECREF(t);
    return r;
}

static PyObject *sk_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    SmallKernel *self = (SmallKernel *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (self->n_res < 0 || self->fallback == NULL || self->mask_fn == NULL) {
        PyErr_SetString(PyExc_TypeError, "this SmallKernel has no whole-graph call; use run()");
        return NULL;
    }
    if (kwnames != NULL || n != self->n_args || self->state == SK_USE_NUMPY) {
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    long mask;
    if (sk_mask(self, &mask) < 0) {
        return NULL;
    }
    if (mask < 0) {
        return PyObject_Vectorcall(self->fallback, args, n, NULL);
    }
    if (self->state == SK_UNDECIDED) {
        return sk_callback(self->decide, op, args, n);
    }
    PyObject *ops[SK_MAX_OPS];
    PyObject *outs[SK_MAX_OPS];
    for (Py_ssize_t i = 0; i < self->n_in; i++) {
        ops[i] = args[self->arg_index[i]];
    }
    int flags = 0;
    int r = sk_run_core(self, ops, outs, &flags);
    if (r < 0) {
        return NULL;
    }
    if (r == 0) {
        return sk_callback(self->slow, op, args, n);
    }
    if (flags & mask) {
        /* NumPy would warn (or libm flagged spuriously): NumPy computes and warns itself. */
        for (Py_ssize_t j = 0; j < self->n_out; j++) {
            Py_DECREF(outs[j]);
        }
        return PyObject_Vectorcall(self->fallback, args, n, NULL);
    }
    PyObject *res;
    if (self->n_res == 0) {
        res = outs[self->res_index[0]];
        Py_INCREF(res);
    } else {
        res = PyTuple_New(self->n_res);
        if (res != NULL) {
            for (Py_ssize_t j = 0; j < self->n_res; j++) {
                PyObject *v = outs[self->res_index[j]];
                Py_INCREF(v);
                PyTuple_SET_ITEM(res, j, v);
            }
        }
    }
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        Py_DECREF(outs[j]);
    }
    return res;
}

static PyObject *sk_run(SmallKernel *self, PyObject *seq) {
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "run(inputs): inputs must be a list or tuple");
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(seq) != self->n_in) {
        Py_RETURN_NONE;
    }
    PyObject *outs[SK_MAX_OPS];
    int flags = 0;
    int r = sk_run_core(self, PySequence_Fast_ITEMS(seq), outs, &flags);
    if (r < 0) {
        return NULL;
    }
    if (r == 0) {
        Py_RETURN_NONE;
    }
    PyObject *lst = PyList_New(self->n_out);
    if (lst == NULL) {
        for (Py_ssize_t j = 0; j < self->n_out; j++) {
            Py_DECREF(outs[j]);
        }
        return NULL;
    }
    for (Py_ssize_t j = 0; j < self->n_out; j++) {
        PyList_SET_ITEM(lst, j, outs[j]);
    }
    return Py_BuildValue("(Ni)", lst, flags);
}

static PyObject *sk_signature_py(SmallKernel *self, PyObject *seq) {
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "signature(inputs): inputs must be a list or tuple");
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(seq) != self->n_in) {
        Py_RETURN_NONE;
    }
    int64_t sig[SK_SIG_MAX];
    char *P[2 * SK_MAX_OPS];
    Py_ssize_t len = 0;
    if (!sk_signature(self, PySequence_Fast_ITEMS(seq), sig, &len, P)) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)sig, len * (Py_ssize_t)sizeof(int64_t));
}

static PyObject *sk_add_layout(SmallKernel *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) ||
        (nargs == 4 && args[3] != Py_None &&
         (!PyBytes_Check(args[3]) ||
          PyBytes_GET_SIZE(args[3]) != self->n_in * (Py_ssize_t)sizeof(int64_t)))) {
        PyErr_SetString(PyExc_TypeError, "add_layout(signature: bytes, block: bytes, nogil, "
                        "offsets: bytes of one int64 per input or None)");
        return NULL;
    }
    if (self->n_layouts >= SK_MAX_LAYOUTS) {
        Py_RETURN_FALSE;
    }
    int nogil = PyObject_IsTrue(args[2]);
    if (nogil < 0) {
        return NULL;
    }
    sk_layout *L = &self->layouts[self->n_layouts++];
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    L->sig = args[0];
    L->block = args[1];
    L->nogil = nogil;
    L->offsets = NULL;
    if (nargs == 4 && args[3] != Py_None) {
        Py_INCREF(args[3]);
        L->offsets = args[3];
    }
    Py_RETURN_TRUE;
}

static int sk_traverse(SmallKernel *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->fallback);
    Py_VISIT(self->slow);
    Py_VISIT(self->decide);
    Py_VISIT(self->keep);
    Py_VISIT(self->mask_fn);
    Py_VISIT(self->empty);
    return 0;
}

static int sk_clear(SmallKernel *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->decide);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->mask_fn);
    Py_CLEAR(self->empty);
    return 0;
}

static void sk_dealloc(SmallKernel *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    sk_clear(self);
    Py_CLEAR(self->in_dtypes);
    Py_CLEAR(self->in_types);
    Py_CLEAR(self->out_shapes);
    Py_CLEAR(self->out_dtypes);
    Py_CLEAR(self->ndarray);
    Py_CLEAR(self->errvar);
    Py_CLEAR(self->mask_key);
    for (Py_ssize_t k = 0; k < self->n_layouts; k++) {
        Py_CLEAR(self->layouts[k].sig);
        Py_CLEAR(self->layouts[k].block);
        Py_CLEAR(self->layouts[k].offsets);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int sk_index_tuple(PyObject *t, Py_ssize_t *dst, Py_ssize_t bound, const char *what) {
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (v < 0 || v >= bound) {
            PyErr_Format(PyExc_ValueError, "SmallKernel: %s index %zd out of range", what, v);
            return -1;
        }
        dst[i] = v;
    }
    return 0;
}

static PyObject *sk_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fn", "in_dtypes", "out_shapes", "out_dtypes", "out_scalar",
                             "ndarray", "empty", "mask_fn", "errvar", "keep", "fp_errors",
                             "fallback", "slow", "decide", "arg_index", "n_args", "res_index",
                             "res_tuple", NULL};
    PyObject *fn_addr, *in_dtypes, *out_shapes, *out_dtypes, *out_scalar, *ndarray, *empty;
    PyObject *mask_fn, *errvar, *keep;
    int fp_errors = 1, res_tuple = 0;
    PyObject *fallback = Py_None, *slow = Py_None, *decide = Py_None;
    PyObject *arg_index = Py_None, *res_index = Py_None;
    Py_ssize_t n_args = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!OOOOO|pOOOOnOp", kwlist, &fn_addr,
                                     &PyTuple_Type, &in_dtypes, &PyTuple_Type, &out_shapes,
                                     &PyTuple_Type, &out_dtypes, &PyTuple_Type, &out_scalar,
                                     &ndarray, &empty, &mask_fn, &errvar, &keep, &fp_errors,
                                     &fallback, &slow, &decide, &arg_index, &n_args, &res_index,
                                     &res_tuple)) {
        return NULL;
    }
    Py_ssize_t n_in = PyTuple_GET_SIZE(in_dtypes), n_out = PyTuple_GET_SIZE(out_dtypes);
    if (n_in > SK_MAX_OPS || n_out > SK_MAX_OPS || n_out < 1 ||
        PyTuple_GET_SIZE(out_shapes) != n_out || PyTuple_GET_SIZE(out_scalar) != n_out) {
        PyErr_SetString(PyExc_ValueError, "SmallKernel: 1..64 outputs (shapes, dtypes and "
                        "scalar flags of equal length) and at most 64 inputs");
        return NULL;
    }
    if (!PyType_Check(ndarray) || !PyCallable_Check(empty) || !PyCallable_Check(mask_fn) ||
        (errvar != Py_None && !PyContextVar_CheckExact(errvar))) {
        PyErr_SetString(PyExc_TypeError, "SmallKernel: ndarray must be a type, empty and "
                        "mask_fn callables, errvar a ContextVar or None");
        return NULL;
    }
    void *addr = PyLong_AsVoidPtr(fn_addr);
    if (addr == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "SmallKernel: null kernel address");
        }
        return NULL;
    }
    Py_ssize_t n_res = -1;
    Py_ssize_t arg_idx[SK_MAX_OPS], res_idx[SK_MAX_OPS];
    if (res_index != Py_None) {
        if (!PyTuple_Check(res_index) || !PyTuple_Check(arg_index) ||
            PyTuple_GET_SIZE(arg_index) != n_in || PyTuple_GET_SIZE(res_index) < 1 ||
            PyTuple_GET_SIZE(res_index) > SK_MAX_OPS || !PyCallable_Check(fallback) ||
            !PyCallable_Check(slow) || (decide != Py_None && !PyCallable_Check(decide)) ||
            (!res_tuple && PyTuple_GET_SIZE(res_index) != 1)) {
            PyErr_SetString(PyExc_TypeError, "SmallKernel: a whole-graph call needs arg_index "
                            "(one per input), res_index, fallback, slow and decide (or None)");
            return NULL;
        }
        if (sk_index_tuple(arg_index, arg_idx, n_args, "argument") < 0 ||
            sk_index_tuple(res_index, res_idx, n_out, "result") < 0) {
            return NULL;
        }
        n_res = res_tuple ? PyTuple_GET_SIZE(res_index) : 0;
    }
    PyObject *in_types = PyTuple_New(n_in);
    if (in_types == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *t = PyObject_GetAttrString(PyTuple_GET_ITEM(in_dtypes, i), "type");
        if (t == NULL) {
            Py_DECREF(in_types);
            return NULL;
        }
        if (!PyType_Check(t) ||
            ((PyTypeObject *)t)->tp_basicsize <= (Py_ssize_t)sizeof(PyObject)) {
            /* Not a NumPy scalar type with a value after the header (step 1 reads it). */
            PyErr_SetString(PyExc_TypeError, "SmallKernel: in_dtypes must be NumPy dtypes");
            Py_DECREF(t);
            Py_DECREF(in_types);
            return NULL;
        }
        PyTuple_SET_ITEM(in_types, i, t);
    }
    SmallKernel *self = (SmallKernel *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(in_types);
        return NULL;
    }
    self->in_types = in_types;
    self->vectorcall = sk_vectorcall;
    self->fn = (sk_fn)addr;
    self->n_in = n_in;
    self->n_out = n_out;
    self->n_args = n_args;
    self->n_res = n_res;
    if (n_res >= 0) {
        memcpy(self->arg_index, arg_idx, sizeof(Py_ssize_t) * n_in);
        memcpy(self->res_index, res_idx, sizeof(Py_ssize_t) * PyTuple_GET_SIZE(res_index));
    }
    for (Py_ssize_t j = 0; j < n_out; j++) {
        int s = PyObject_IsTrue(PyTuple_GET_ITEM(out_scalar, j));
        if (s < 0) {
            Py_DECREF(self);
            return NULL;
        }
        self->scalar[j] = (char)s;
    }
    self->fp_errors = fp_errors;
    self->mask_val = -1;
    self->state = decide != Py_None ? SK_UNDECIDED : SK_USE_KERNEL;
#define SK_SET(field, value) (Py_INCREF(value), self->field = (value))
    SK_SET(in_dtypes, in_dtypes);
    SK_SET(out_shapes, out_shapes);
    SK_SET(out_dtypes, out_dtypes);
    SK_SET(ndarray, ndarray);
    SK_SET(empty, empty);
    SK_SET(mask_fn, mask_fn);
    SK_SET(errvar, errvar);
    SK_SET(keep, keep);
    SK_SET(fallback, fallback);
    SK_SET(slow, slow);
    SK_SET(decide, decide);
#undef SK_SET
    return (PyObject *)self;
}

static PyObject *sk_get_state(SmallKernel *self, void *closure) {
    return PyLong_FromLong(self->state);
}

static int sk_set_state(SmallKernel *self, PyObject *value, void *closure) {
    long v = value == NULL ? -1 : PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < SK_USE_KERNEL || v > SK_USE_NUMPY) {
        PyErr_SetString(PyExc_ValueError, "state: 0 (kernel), 1 (undecided) or 2 (NumPy)");
        return -1;
    }
    self->state = (int)v;
    return 0;
}

static PyObject *sk_get_calls(SmallKernel *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->calls);
}

static PyObject *sk_get_layouts(SmallKernel *self, void *closure) {
    return PyLong_FromSsize_t(self->n_layouts);
}

static PyMethodDef sk_methods[] = {
    {"run", (PyCFunction)sk_run, METH_O,
     PyDoc_STR("run(inputs) -> (outputs, FE flags), or None when these inputs' layout is not "
               "registered (or an input is not an aligned ndarray of the kernel's dtype)")},
    {"signature", (PyCFunction)sk_signature_py, METH_O,
     PyDoc_STR("signature(inputs) -> the bytes add_layout expects for these inputs, or None")},
    {"add_layout", (PyCFunction)(void (*)(void))sk_add_layout, METH_FASTCALL,
     PyDoc_STR("add_layout(signature, block, nogil, offsets=None) -> False when the table "
               "is full; offsets: int64 bytes added to each input's data pointer")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sk_getset[] = {
    {"state", (getter)sk_get_state, (setter)sk_set_state,
     PyDoc_STR("whole-graph call: 0 run the kernel, 1 undecided (calls decide), 2 run NumPy"),
     NULL},
    {"calls", (getter)sk_get_calls, NULL, PyDoc_STR("kernel launches so far"), NULL},
    {"layouts", (getter)sk_get_layouts, NULL, PyDoc_STR("registered layouts"), NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SmallKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.SmallKernel",
    .tp_doc = PyDoc_STR("One C-backend kernel called in one C call (see csrc/small_call.c). "
                        "Internal to dynamo.backends.c.small: the kernel address and the "
                        "registered blocks are trusted, as cffi's are."),
    .tp_basicsize = sizeof(SmallKernel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = sk_new,
    .tp_dealloc = (destructor)sk_dealloc,
    .tp_traverse = (traverseproc)sk_traverse,
    .tp_clear = (inquiry)sk_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(SmallKernel, vectorcall),
    .tp_dictoffset = offsetof(SmallKernel, dict),
    .tp_weaklistoffset = offsetof(SmallKernel, weakreflist),
    .tp_methods = sk_methods,
    .tp_getset = sk_getset,
};

int npd_small_init(PyObject *module) {
    if (empty_tuple == NULL) {
        empty_tuple = PyTuple_New(0);
        if (empty_tuple == NULL) {
            return -1;
        }
    }
    if (PyType_Ready(&SmallKernelType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "SmallKernel", (PyObject *)&SmallKernelType);
}
