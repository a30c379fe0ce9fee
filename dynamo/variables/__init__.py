"""VariableTrackers: what the translator knows about each value on its simulated stack.

Every value the bytecode touches is represented by one of these. Values that came from the frame
carry a `Source` (and were guarded when wrapped, see `builder.py`); values computed during tracing
are either Python constants, graph values (`NDArrayVariable`, holding an fx Node and its
`ArrayMeta`) or containers of those.

The modules, from the bottom up (each imports only those before it at module level):

    base        VariableTracker, NullVariable
    opaque      objects passed along unread
    constant    Python constants, sizes (SymIntVariable), int/float arguments
    containers  tuples, lists, dicts, iterators, and the list and dict methods
    ndarray     graph values (arrays, NumPy scalars) and iteration over an array's rows
    numpy_facts np.ndim, np.shape, np.size, np.isscalar, np.iterable of what the trace knows
    builtin_rules  the rules of builtins traced (len, type, map, zip, sum, getattr, ...)
    callables   builtins, NumPy functions and methods, modules, user functions, classes, objects
    builder     VariableBuilder (a real value read from a Source -> its tracker, guarded) and
                wrap_constant (a value computed while tracing -> its tracker)
    lazy        LazyVariable: a value wrapped only when something looks at it
    operators   what Python's operators mean on trackers
    functions   functions made and inlined in the traced code, generator expressions
    finalizers  may letting go of a value run code?

One circle is left, and it is the nature of the thing: a tracker's method returns trackers of
other kinds (``x.sum`` of an array is a method tracker; ``s.split()`` of a constant a list
tracker), and `builder` makes trackers of every kind. So `constant`, `ndarray`, `builtin_rules`
and `callables` import `callables`, `builder` and `operators` inside the functions that need
them, each such import marked "upward"; everything else is imported at the top.
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
