/*
 * frame_view.c -- `_C.FrameView` (see frame_view.h).  Built by the hook in eval_frame.c,
 * read by the Python callback (dynamo.convert_frame).
 *
 * Attributes: f_code, f_func (None on 3.10), f_globals, f_builtins, args (tuple of the
 * argument slots), closure (the function's __closure__ or None), f_locals (dict: argument names -> values,
 * free variable names -> cell contents for non-empty cells).
 *
 * Why f_locals is built by hand: at hook time the frame is incomplete on 3.11+ (MAKE_CELL and
 * COPY_FREE_VARS have not run), so PyFrame_GetLocals-style helpers would see garbage in the
 * cell and free slots.  The hook passes the argument values (npd_frame_args: raw slots, or on
 * 3.10 with cell arguments read from their cells) and the closure tuple (npd_frame_closure).
 */
#include "frame_view.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *f_code;
    PyObject *f_func;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *args;
    PyObject *closure;
    PyObject *f_locals;
} FrameView;

/* Build the f_locals dict described in the file comment. */
static PyObject *build_locals(PyCodeObject *code, PyObject **slots, Py_ssize_t nargs,
                              PyObject *closure) {
    PyObject *locals = PyDict_New();
    if (locals == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (slots[i] != NULL &&
            PyDict_SetItem(locals, npd_code_arg_name(code, i), slots[i]) < 0) {
            goto error;
        }
    }
    /* Free variables are the last co_nfreevars names, in closure-tuple order. */
    Py_ssize_t nfree = npd_code_nfreevars(code);
    if (closure != NULL && PyTuple_GET_SIZE(closure) == nfree) {
        for (Py_ssize_t j = 0; j < nfree; j++) {
            PyObject *cell = PyTuple_GET_ITEM(closure, j);
            PyObject *value = PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
            if (value != NULL &&
                PyDict_SetItem(locals, npd_code_free_name(code, j), value) < 0) {
                goto error;
            }
        }
    }
    return locals;
error:
    Py_DECREF(locals);
    return NULL;
}

PyObject *npd_frame_view_new(npd_frame *frame, PyObject **slots, Py_ssize_t nargs,
                             PyObject *closure) {
    PyCodeObject *code = npd_frame_code(frame);
    PyFunctionObject *func = npd_frame_func(frame);
    FrameView *view = PyObject_GC_New(FrameView, &npd_FrameViewType);
    if (view == NULL) {
        return NULL;
    }
    view->f_code = Py_NewRef((PyObject *)code);
    view->f_func = Py_NewRef(func != NULL ? (PyObject *)func : Py_None);
    view->f_globals = Py_NewRef(npd_frame_globals(frame));
    view->f_builtins = Py_NewRef(npd_frame_builtins(frame));
    view->closure = Py_NewRef(closure != NULL ? closure : Py_None);
    view->args = NULL;
    view->f_locals = NULL;
    PyObject_GC_Track(view);
    view->args = PyTuple_New(nargs);
    if (view->args == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        /* CPython fills every argument slot before evaluation; None guards the impossible. */
        PyTuple_SET_ITEM(view->args, i, Py_NewRef(slots[i] != NULL ? slots[i] : Py_None));
    }
    view->f_locals = build_locals(code, slots, nargs, closure);
    if (view->f_locals == NULL) {
        goto error;
    }
    return (PyObject *)view;
error:
    Py_DECREF(view);
    return NULL;
}

static int frame_view_traverse(FrameView *self, visitproc visit, void *arg) {
    Py_VISIT(self->f_code);
    Py_VISIT(self->f_func);
    Py_VISIT(self->f_globals);
    Py_VISIT(self->f_builtins);
    Py_VISIT(self->args);
    Py_VISIT(self->closure);
    Py_VISIT(self->f_locals);
    return 0;
}

static int frame_view_clear(FrameView *self) {
    Py_CLEAR(self->f_code);
    Py_CLEAR(self->f_func);
    Py_CLEAR(self->f_globals);
    Py_CLEAR(self->f_builtins);
    Py_CLEAR(self->args);
    Py_CLEAR(self->closure);
    Py_CLEAR(self->f_locals);
    return 0;
}

static void frame_view_dealloc(FrameView *self) {
    PyObject_GC_UnTrack(self);
    frame_view_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *frame_view_repr(FrameView *self) {
    if (self->f_code == NULL) {
        return PyUnicode_FromString("<FrameView (cleared)>");
    }
    PyCodeObject *code = (PyCodeObject *)self->f_code;
    return PyUnicode_FromFormat("<FrameView %U at %U:%d>", npd_code_qualname(code),
                                code->co_filename, code->co_firstlineno);
}

#define VIEW_MEMBER(name, doc) \
    {#name, T_OBJECT, offsetof(FrameView, name), READONLY, PyDoc_STR(doc)}

static PyMemberDef frame_view_members[] = {
    VIEW_MEMBER(f_code, "the frame's code object"),
    VIEW_MEMBER(f_func, "the function being called (None on CPython 3.10: frames have none)"),
    VIEW_MEMBER(f_globals, "the frame's globals dict"),
    VIEW_MEMBER(f_builtins, "the frame's builtins dict"),
    VIEW_MEMBER(args, "tuple of the argument slots (positional, kw-only, *args, **kwargs)"),
    VIEW_MEMBER(closure, "the function's __closure__ tuple, or None"),
    VIEW_MEMBER(f_locals, "dict: argument names and non-empty free variables -> values"),
    {NULL},
};

PyTypeObject npd_FrameViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo._C.FrameView",
    .tp_doc = PyDoc_STR("Snapshot of an intercepted frame, passed to the eval-frame callback."),
    .tp_basicsize = sizeof(FrameView),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)frame_view_dealloc,
    .tp_traverse = (traverseproc)frame_view_traverse,
    .tp_clear = (inquiry)frame_view_clear,
    .tp_repr = (reprfunc)frame_view_repr,
    .tp_members = frame_view_members,
};
