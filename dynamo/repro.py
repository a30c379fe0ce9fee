"""Accuracy checking, repro files and the minifier (``dynamo.config.check_accuracy``).

In: a graph about to go to a backend (`OutputGraph.compile`) while ``check_accuracy`` is on.
Out: the backend's callable wrapped so that every call also runs the graph eagerly (NumPy, on
copies of the inputs) and compares results and in-place changes of the inputs; on a mismatch,
or when the backend raises (at compile time or in a call), a *repro directory* is written and a
warning names it:

    <repro_dir>/<function>_<n>/
        repro.py     the graph as Python, the backend call and the comparison: ``python repro.py``
                     exits 1 while the problem is there
        graph.pkl    the graph (`fx.serialize`) and its attributes
        inputs.pkl   the inputs of the failing call
        backend.pkl  the backend: a registered name, or the callable (pickled by reference)

``python -m dynamo minify <dir>`` (`minify`) shrinks it: first to one operation whose result
differs when compiled alone (inputs computed eagerly), else to the shortest prefix of the graph
that still differs; the result is written as ``<dir>/minified`` with the same layout.
A call that differs returns the backend's result (what the program gets without checking); a
call where only the backend raised returns the eager result, so the program goes on.
"""

from __future__ import annotations

import copy
import itertools
import pickle
import re
import warnings
from pathlib import Path
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from fx import GraphModule
from fx.graph import Graph
from fx.interpreter import Interpreter
from fx.node import map_arg
from fx.passes.shape_prop import propagate_shapes
from fx.serialize import Ref, graph_from_data, graph_to_data

from . import config
from .backends import backend_spec, lookup_backend
from .diagnostics import diagnose

__all__ = ["AccuracyWarning", "checked", "write_repro", "load_repro", "run_repro", "minify",
           "compare"]

_serial = itertools.count()


class AccuracyWarning(RuntimeWarning):
    """A compiled graph gave another result than the same graph run eagerly (or its backend
    raised); the warning names the repro directory."""


# Comparing ------------------------------------------------------------------------------------


def compare(expected: Any, actual: Any, where: str = "result") -> str | None:
    """What differs between an eager and a compiled result (None: nothing). Arrays: type,
    dtype, shape, and values (floats within 4 ULP of their dtype, NaN where NaN; others
    exact)."""
    if isinstance(expected, (tuple, list)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            return f"{where}: {type(expected).__name__} of {len(expected)} vs {actual!r:.80}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = compare(e, a, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, (np.ndarray, np.generic)):
        if type(actual) is not type(expected):
            return f"{where}: type {type(expected).__name__} vs {type(actual).__name__}"
        e, a = np.asarray(expected), np.asarray(actual)
        if e.dtype != a.dtype or e.shape != a.shape:
            return f"{where}: {e.dtype}{list(e.shape)} vs {a.dtype}{list(a.shape)}"
        if e.dtype.kind in "fc":
            tol = 4 * np.finfo(e.dtype).eps
            same = np.isclose(a, e, rtol=tol, atol=0, equal_nan=True)
        else:
            same = a == e
        if not np.all(same):
            bad = np.argwhere(~np.asarray(same))
            index = tuple(int(i) for i in bad[0]) if bad.size else ()
            return (f"{where}: {int((~np.asarray(same)).sum())} of {e.size} values differ, first "
                    f"at {index}: eager {e[index]!r}, compiled {a[index]!r}")
        return None
    if isinstance(expected, Iterator) and type(actual) is type(expected):
        return None  # (a loop node's rest to iterate: not consumed here, Python iterates it)
    if expected is actual or expected == actual:
        return None
    return f"{where}: eager {expected!r:.80}, compiled {actual!r:.80}"


def _copies(args: tuple) -> tuple:
    return tuple(a.copy(order="K") if isinstance(a, np.ndarray) else copy.deepcopy(a)
                 for a in args)


# Checking every call --------------------------------------------------------------------------


def checked(records: list, attrs: dict, compiled: Callable, backend: Any, where: str) -> Callable:
    """`compiled` wrapped to compare each call with the eager graph (see the module doc)."""
    reference = GraphModule(graph_from_data(records), attrs)

    def run(*args: Any) -> Any:
        eager_args = _copies(args)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected, eager_error = reference.forward(*eager_args), None
        except Exception as exc:  # noqa: BLE001 - compared with what the backend does
            expected, eager_error = None, exc
        inputs = _copies(args)  # (saved before the compiled call may change them in place)
        try:
            got = compiled(*args)
        except Exception as exc:
            if eager_error is None or type(exc) is not type(eager_error):
                path = write_repro(records, attrs, inputs, backend,
                                   f"the backend raised {type(exc).__name__}: {exc}", where)
                _warn(f"{where}: the compiled graph raised {type(exc).__name__}: {exc}; the "
                      f"eager graph {'did not' if eager_error is None else 'raised otherwise'}. "
                      f"Repro: {path}")
                if eager_error is None:
                    return expected
            raise
        problem = (f"eager raised {type(eager_error).__name__}: {eager_error}"
                   if eager_error is not None else compare(expected, got))
        problem = problem or compare(eager_args, args, "input changed in place")
        if problem:
            path = write_repro(records, attrs, inputs, backend, problem, where)
            _warn(f"{where}: the compiled graph differs from the eager one ({problem}). "
                  f"Repro: {path}")
        return got

    run.__wrapped__ = compiled  # type: ignore[attr-defined]
    return run


def backend_failed(records: list, attrs: dict, example_inputs: list, backend: Any, where: str,
                   exc: BaseException) -> None:
    """The backend raised while compiling: write a repro with the example inputs."""
    path = write_repro(records, attrs, tuple(example_inputs), backend,
                       f"compiling raised {type(exc).__name__}: {exc}", where)
    _warn(f"{where}: the backend raised {type(exc).__name__} while compiling. Repro: {path}")


def _warn(message: str) -> None:
    diagnose("graph_code", f"npdynamo: {message}", AccuracyWarning)


# Repro directories ----------------------------------------------------------------------------


_SCRIPT = '''"""npdynamo repro: {problem}

Graph of {where}, backend {backend_label}. Run ``python repro.py`` (exit status 1 while the
problem is there); ``python -m dynamo minify {dirname}`` shrinks it.

The graph, as Python:

{code}
"""

import sys
from pathlib import Path

from dynamo.repro import run_repro

if __name__ == "__main__":
    problem = run_repro(Path(__file__).resolve().parent)
    print(problem or "no difference between the eager and the compiled graph")
    sys.exit(1 if problem else 0)
'''


def write_repro(records: list, attrs: dict, inputs: tuple, backend: Any, problem: str,
                where: str, directory: Path | None = None) -> Path:
    """Write a repro directory (see the module doc); returns its path."""
    if directory is None:
        stem = re.sub(r"\W+", "_", where.split(" ")[0]).strip("_") or "graph"
        root = Path(config.repro_dir).resolve()
        directory = root / f"{stem}_{next(_serial)}"
        while directory.exists():
            directory = root / f"{stem}_{next(_serial)}"
    directory.mkdir(parents=True, exist_ok=True)

    spec = backend_spec(backend)
    (directory / "graph.pkl").write_bytes(pickle.dumps({"nodes": records, "attrs": attrs}))
    (directory / "inputs.pkl").write_bytes(pickle.dumps(tuple(inputs)))
    try:
        (directory / "backend.pkl").write_bytes(pickle.dumps(spec))
    except Exception:  # noqa: BLE001 - a backend that cannot be pickled: named only
        (directory / "backend.pkl").write_bytes(pickle.dumps("eager"))
        problem += f" (the backend {spec!r} could not be saved: the repro runs 'eager')"
    code = GraphModule(graph_from_data(records), attrs).code
    label = spec if isinstance(spec, str) else getattr(spec, "__qualname__", repr(spec))
    (directory / "repro.py").write_text(_SCRIPT.format(
        problem=problem.replace('"""', "'''"), where=where, backend_label=repr(label),
        dirname=directory, code="\n".join("    " + line for line in code.splitlines())))
    return directory


def load_repro(directory: Path) -> tuple[list, dict, tuple, Any]:
    directory = Path(directory)
    if directory.is_file():
        directory = directory.parent
    saved = pickle.loads((directory / "graph.pkl").read_bytes())
    inputs = pickle.loads((directory / "inputs.pkl").read_bytes())
    try:
        backend = pickle.loads((directory / "backend.pkl").read_bytes())
    except (AttributeError, ImportError) as exc:
        raise RuntimeError(
            f"the repro's backend cannot be loaded here ({exc}): a backend defined in the "
            "running script (__main__) must be importable from a module, or registered with "
            "dynamo.register_backend in one, to rerun the repro in another process") from None
    return saved["nodes"], saved["attrs"], inputs, backend


def _module(records: list, attrs: dict, inputs: tuple) -> GraphModule:
    graph = graph_from_data(records)
    if any("val" not in n.meta for n in graph.nodes if n.op != "output"):
        propagate_shapes(graph, list(inputs))
    return GraphModule(graph, attrs)


def _check(records: list, attrs: dict, inputs: tuple, backend: Any) -> str | None:
    """Compile the graph with the backend and compare one call with the eager graph."""

    eager_args, args = _copies(inputs), _copies(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected, eager_error = _module(records, attrs, inputs).forward(*eager_args), None
        except Exception as exc:  # noqa: BLE001
            expected, eager_error = None, exc
        try:
            fn = lookup_backend(backend)(_module(records, attrs, inputs), list(_copies(inputs)))
            got = fn(*args)
        except Exception as exc:  # noqa: BLE001
            if eager_error is not None and type(exc) is type(eager_error):
                return None
            return f"the backend raised {type(exc).__name__}: {exc}"
    if eager_error is not None:
        return f"eager raised {type(eager_error).__name__}: {eager_error}"
    return compare(expected, got) or compare(eager_args, args, "input changed in place")


def run_repro(directory: Path) -> str | None:
    """The problem a repro directory still shows, or None."""
    return _check(*load_repro(directory))


# The minifier ---------------------------------------------------------------------------------


def minify(directory: Path) -> Path | None:
    """Shrink a repro (see the module doc); the path of the minified repro, or None when the
    repro no longer shows a problem."""
    records, attrs, inputs, backend = load_repro(directory)
    directory = Path(directory)
    directory = directory.parent if directory.is_file() else directory
    problem = _check(records, attrs, inputs, backend)
    if problem is None:
        return None
    graph = graph_from_data(records)
    calls = [n for n in graph.nodes if n.op in ("call_function", "call_method")]
    env = _eager_values(graph, attrs, inputs)
    # 1. One operation alone, its inputs computed eagerly.
    for node in calls:
        small, small_inputs = _single(node, env, attrs)
        found = _check(small, attrs, small_inputs, backend)
        if found:
            return write_repro(small, attrs, small_inputs, backend, found,
                               f"{node.name} (minified)", directory / "minified")
    # 2. The shortest prefix of the graph that still differs.
    for k in range(1, len(calls) + 1):
        prefix = _prefix(records, {n.name for n in calls[:k]}, calls[k - 1].name)
        found = _check(prefix, attrs, inputs, backend)
        if found:
            return write_repro(prefix, attrs, inputs, backend, found,
                               f"first {k} operations (minified)", directory / "minified")
    return write_repro(records, attrs, inputs, backend, problem, "the whole graph",
                       directory / "minified")


def _eager_values(graph: Graph, attrs: dict, inputs: tuple) -> dict[str, Any]:
    env: dict[str, Any] = {}

    class Recorder(Interpreter):
        def run_node(self, n):  # noqa: ANN001, ANN202
            value = super().run_node(n)
            env[n.name] = value
            return value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Recorder(GraphModule(graph, attrs)).run(*_copies(inputs))
    return env


def _single(node: Any, env: dict[str, Any], attrs: dict) -> tuple[list, tuple]:
    """A graph of `node` alone: its input nodes become placeholders holding their eager
    values."""

    graph = Graph()
    made: dict[Any, Any] = {}
    inputs = []
    for n in node.all_input_nodes:
        if n.op == "get_attr":
            made[n] = graph.get_attr(n.target)
        else:
            made[n] = graph.placeholder(n.name)
            inputs.append(env[n.name])
    copy_ = graph.create_node(node.op, node.target, map_arg(node.args, made.__getitem__),
                              map_arg(node.kwargs, made.__getitem__), name=node.name)
    graph.output(copy_)
    records = graph_to_data(graph)
    for record in records:
        record["meta"].pop("val", None)  # (recomputed from the inputs)
    return records, _copies(tuple(inputs))


def _prefix(records: list, keep: set[str], last: str) -> list:
    """The records up to `last`, returning it (unused nodes left out)."""

    out = []
    for record in records:
        if record["op"] == "output":
            break
        if record["op"] in ("call_function", "call_method") and record["name"] not in keep:
            continue
        out.append(record)
    out.append({"name": "output", "op": "output", "target": "output", "args": (Ref(last),),
                "kwargs": {}, "meta": {}})
    graph = graph_from_data(out)
    graph.eliminate_dead_code()
    return graph_to_data(graph)
