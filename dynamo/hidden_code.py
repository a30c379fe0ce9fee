"""npdynamo's own code, hidden from tracebacks through compiled functions.

In: code objects, or the module of a built-in backend. Out: the code (and the code objects
nested in it) marked hidden with the C hook (`_C.set_code_hidden`): when a shadow call raises,
the hook leaves their frames out of the traceback, which then shows the user's code and NumPy's.
Used by `eval_frame` (the generated graph code and what a compiled callable runs through) and by
the C backend (its program's steps, its whole-graph calls), which sits below `eval_frame` and
does not import it. Imports only `_C`.
"""

from __future__ import annotations

import sys
import types

from . import _C

__all__ = ["hide_code", "hide_backend_package"]

#: Modules whose functions `hide_backend_package` has hidden.
_hidden_modules: set[str] = set()


def hide_code(code: types.CodeType) -> None:
    """Hide `code` and the code objects nested in it from tracebacks through shadow frames."""
    _C.set_code_hidden(code, True)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            hide_code(const)


def hide_backend_package(module: str) -> None:
    """Hide every function and method of the loaded modules of the backend package `module`
    belongs to (``dynamo.backends.c`` for ``dynamo.backends.c.small``), once per `module`.
    A built-in backend's runners (dynamo.backends.c: compiled/step/numpy_path/run) are closures
    made per graph."""
    if module in _hidden_modules:
        return
    package = module.rsplit(".", 1)[0] if module.count(".") > 2 else module
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name == package or name.startswith(package + ".")):
            _hidden_modules.add(name)
            for value in list(vars(mod).values()):
                candidates = vars(value).values() if isinstance(value, type) else (value,)
                for item in list(candidates):
                    item = getattr(item, "__func__", item)
                    if isinstance(getattr(item, "__code__", None), types.CodeType) and \
                            getattr(item, "__module__", None) == name:
                        hide_code(item.__code__)
