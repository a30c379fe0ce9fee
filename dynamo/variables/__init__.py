"""VariableTrackers: what the translator knows about each value on its simulated stack.

Every value the bytecode touches is represented by one of these. Values that came from the frame
carry a `Source` (and were guarded when wrapped, see `builder.py`); values computed during tracing
are either Python constants, graph values (`NDArrayVariable`, holding an fx Node and its
`ArrayMeta`) or containers of those.
"""

from .base import NullVariable, VariableTracker
from .builder import VariableBuilder
from .callables import (
    BuiltinVariable,
    MethodVariable,
    NumpyFunctionVariable,
    PythonModuleVariable,
    UserFunctionVariable,
)
from .constant import ConstantVariable
from .containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from .ndarray import NDArrayVariable

__all__ = [
    "VariableTracker",
    "NullVariable",
    "ConstantVariable",
    "NDArrayVariable",
    "TupleVariable",
    "ListVariable",
    "DictVariable",
    "IteratorVariable",
    "BuiltinVariable",
    "NumpyFunctionVariable",
    "PythonModuleVariable",
    "MethodVariable",
    "UserFunctionVariable",
    "VariableBuilder",
]
