/*
 * frame_view.h -- `_C.FrameView`, the read-only snapshot of an intercepted frame that the hook
 * passes to the Python callback on a cache miss.
 *
 * A `_PyInterpreterFrame` is not a Python object and dies when the hook returns, so the view
 * copies what the compiler needs into ordinary object references: it is safe to keep a
 * FrameView after the callback returns.
 */
#ifndef NPDYNAMO_FRAME_VIEW_H
#define NPDYNAMO_FRAME_VIEW_H

#include "cpython_compat.h"

extern PyTypeObject npd_FrameViewType;

/* Snapshot `frame`, whose first `nargs` local slots are its bound arguments.
 * New reference, or NULL with an exception set. */
PyObject *npd_frame_view_new(npd_frame *frame, Py_ssize_t nargs);

#endif /* NPDYNAMO_FRAME_VIEW_H */
