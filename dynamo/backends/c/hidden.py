"""Which of the C backend's frames a traceback through a compiled function leaves out.

In: code objects of this package's functions (a program's steps, the generated program) or the
package itself. Out: their frames marked hidden with the C hook (`dynamo._C.set_code_hidden`),
so a traceback through a compiled function shows the user's code and NumPy's only, as for the
generated graph code (which ``dynamo.eval_frame`` hides: the backend does not import that
higher layer, it marks the code itself). Called by `compile_graph`'s program
(``dynamo.backends.c._hide_frames``) and by `small.attach` for a whole-graph call.
"""

from __future__ import annotations

import sys
import types

from ... import _C

__all__ = ["hide_code", "hide_package"]

#: Modules of this package whose functions are hidden already (`hide_package`).
_hidden_modules: set[str] = set()


def hide_code(code: types.CodeType) -> None:
    """Hide `code` and the code objects nested in it (a step's closures)."""
    _C.set_code_hidden(code, True)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            hide_code(const)


def hide_package() -> None:
    """Hide every function and method defined in the loaded modules of this package (once per
    module): a whole-graph call runs through several of them (its callbacks, the runners,
    calibration), made per graph."""
    package = __name__.rpartition(".")[0]
    for name, module in list(sys.modules.items()):
        if module is None or name in _hidden_modules or not (
                name == package or name.startswith(package + ".")):
            continue
        _hidden_modules.add(name)
        for value in list(vars(module).values()):
            for item in list(vars(value).values() if isinstance(value, type) else (value,)):
                item = getattr(item, "__func__", item)
                if isinstance(getattr(item, "__code__", None), types.CodeType) and \
                        getattr(item, "__module__", None) == name:
                    hide_code(item.__code__)
