/*
 * loop_call.h -- `_C.LoopCall`: one call of a loop kernel made in C (see loop_call.c).
 */
#ifndef NPDYNAMO_LOOP_CALL_H
#define NPDYNAMO_LOOP_CALL_H

#include "cpython_compat.h"

/* Add `LoopCall` to the module (call once at module init).  -1 with an exception set. */
int npd_loop_call_init(PyObject *module);

#endif
