"""Codegen: writes the transformed bytecode of a captured frame with the `bytecode` package.

The transformed code keeps the original's prefix (COPY_FREE_VARS, MAKE_CELL, RESUME), calls the
compiled graph with its inputs reloaded from their sources, rebuilds the return value from the
graph outputs and constants, and returns. It keeps the original's argument, cell and free variable
layout and only appends locals, with every argument made positional, so the C hook can call it
with the frame's argument slots (see docs/internals.md).
"""

from __future__ import annotations

import types

from bytecode import Bytecode, Instr
from bytecode.flags import CompilerFlags

from .exc import Unsupported
from .output_graph import GraphResult
from .variables.base import VariableTracker

__all__ = ["Codegen", "transform_code"]

PREFIX_OPS = ("COPY_FREE_VARS", "MAKE_CELL", "RESUME")
GRAPH_OUT = "___graph_out"


class Codegen:
    def __init__(self, result: GraphResult, lineno: int) -> None:
        self.result = result
        self.lineno = lineno
        self.instructions: list[Instr] = []
        self.output_index = {node: i for i, node in enumerate(result.graph_outputs)}

    def append(self, instr: Instr) -> None:
        instr.lineno = self.lineno
        self.instructions.append(instr)

    def load_graph_value(self, vt: VariableTracker) -> None:
        node = vt.node
        if node in self.output_index:
            self.append(Instr("LOAD_FAST", GRAPH_OUT))
            self.append(Instr("LOAD_CONST", self.output_index[node]))
            self.append(Instr("BINARY_SUBSCR"))
        elif vt.source is not None:
            vt.source.reconstruct(self)
        else:
            raise Unsupported(f"graph value {node.name} is neither an output nor an input")

    def call_graph(self) -> None:
        self.append(Instr("PUSH_NULL"))
        self.append(Instr("LOAD_CONST", self.result.compiled_fn))
        for source in self.result.input_sources:
            source.reconstruct(self)
        n = len(self.result.input_sources)
        self.append(Instr("PRECALL", n))
        self.append(Instr("CALL", n))
        if not self.result.single_output:
            self.append(Instr("STORE_FAST", GRAPH_OUT))


def transform_code(code: types.CodeType, result: GraphResult, return_value: VariableTracker,
                   lineno: int) -> types.CodeType:
    """The transformed code object for `code`: call the graph, return `return_value`."""
    original = Bytecode.from_code(code)
    prefix = [i for i in original if isinstance(i, Instr) and i.name in PREFIX_OPS]
    gen = Codegen(result, lineno)
    gen.call_graph()
    if not result.single_output:
        return_value.reconstruct(gen)
    gen.append(Instr("RETURN_VALUE"))

    nargs = len(argument_names(code))
    bc = original
    bc.clear()
    bc.extend(prefix + gen.instructions)
    bc.argcount = nargs
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS)
    new_code = bc.to_code()
    if new_code.co_varnames[:nargs] != code.co_varnames[:nargs] or new_code.co_freevars != code.co_freevars:
        raise AssertionError("transformed code changed the argument or free variable layout")
    return new_code


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of the argument slots, in the order the C hook passes them."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return code.co_varnames[:n]
