/*
 * small_call.h -- `_C.SmallKernel`: call one generated C kernel of the C backend on NumPy arrays
 * in a single C call (no cffi, no Python-level layout work), for small domains (issue 11).
 *
 * In:  built by dynamo/backends/c/small.py with the kernel's address (from cffi), its input
 *      dtypes and static output shapes, and the layouts (input shapes + strides -> the kernel's
 *      int64 argument block) that small.py computed with the general runner's planner.
 * Out: `run(inputs)` -> (outputs, FE flags) or None (layout not registered: the caller takes
 *      the general path), and, as a whole compiled graph, `sk(*args)` -> the graph's result.
 * See small_call.c for the per-call steps and docs/c_backend.md ("Small domains").
 */
#ifndef NPDYNAMO_SMALL_CALL_H
#define NPDYNAMO_SMALL_CALL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Add `SmallKernel` to the module (call once at module init).  -1 with an exception set. */
int npd_small_init(PyObject *module);

#endif
