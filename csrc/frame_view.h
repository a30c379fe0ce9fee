/*
 * frame_view.h -- `_C.FrameView`, the read-only snapshot of an intercepted frame that the hook
 * passes to the Python callback on a cache miss.
 *
 * An intercepted frame (a `_PyInterpreterFrame` on 3.11+) dies when the hook returns, so the view
 * copies what the compiler needs into ordinary object references: it is safe to keep a
 * FrameView after the callback returns.
 */
#ifndef NPDYNAMO_FRAME_VIEW_H
#define NPDYNAMO_FRAME_VIEW_H

#include "cpython_compat.h"

extern PyTypeObject npd_FrameViewType;

/* Snapshot `frame`: `slots` are its `nargs` bound argument values (npd_frame_args), `closure`
 * its closure tuple or NULL (npd_frame_closure).  New reference, or NULL with an exception. */
PyObject *npd_frame_view_new(npd_frame *frame, PyObject **slots, Py_ssize_t nargs,
                             PyObject *closure);

#endif /* NPDYNAMO_FRAME_VIEW_H */
