"""Whole Python loop nests as one kernel: the IR (`ir`), the operator rules (`scalars`) and the
lowering from bytecode (`lower`). The C function is written and built by
`dynamo.backends.c.c_loop_nest`; `dynamo.loop_kernels` puts its call into the transformed code.
"""
