"""OutputGraph: the graph being built for one frame, its inputs, its guards, and the final step
that hands it to the backend and produces the transformed code.

Called by the translator (`symbolic_convert`) for every NumPy call it records; it asks
`fx.op_rules` for the result's dtype and shape, so tracing never touches array data.
"""

from __future__ import annotations

import itertools
import operator
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

import fx
from fx import op_rules
from fx.meta import ArrayMeta, meta_of

from .exc import BackendError, Unsupported
from .guards import Guard
from .source import Source
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.containers import DictVariable, TupleVariable, _Sequence
from .variables.ndarray import NDArrayVariable

if TYPE_CHECKING:
    from .symbolic_convert import InstructionTranslator

__all__ = ["OutputGraph", "GraphResult"]

_graph_counter = itertools.count()


@dataclass
class GraphResult:
    """What compiling one frame produced, for the cache and for `explain()`."""

    graph_module: fx.GraphModule
    compiled_fn: Callable
    graph_outputs: list[fx.Node]
    single_output: bool
    input_sources: list[Source]
    guards: list[Guard]
    compile_seconds: float = 0.0
    backend_seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _placeholder_name(source: Source) -> str:
    text = source.name()
    name = re.sub(r"\W+", "_", text).strip("_")
    # L['x'] -> x ; G['W'] -> G_W ; L['pair'][0] -> pair_0
    if name.startswith("L_"):
        name = name[2:]
    return name or "input"


class OutputGraph:
    def __init__(self, code_name: str, backend: Callable) -> None:
        self.code_name = code_name
        self.backend = backend
        self.graph = fx.Graph()
        self.guards: list[Guard] = []
        self.wrapped: dict[Source, VariableTracker] = {}
        self.inputs: list[tuple[Source, fx.Node, Any]] = []

    # Guards and inputs -----------------------------------------------------------------------

    def add_guard(self, guard: Guard) -> None:
        self.guards.append(Guard(guard.source, guard.kind, guard.expected, order=len(self.guards)))

    def add_graph_input(self, source: Source, value: Any) -> NDArrayVariable:
        meta = meta_of(value)
        if meta.is_scalar:
            self.add_guard(Guard(source, "TYPE_MATCH", type(value)))
        else:
            self.add_guard(Guard(source, "NDARRAY_MATCH", (value.dtype, value.shape, False)))
        first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        if first_op is None:
            node = self.graph.placeholder(_placeholder_name(source))
        else:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(_placeholder_name(source))
        node.meta["val"] = meta
        node.meta["source"] = source.name()
        self.inputs.append((source, node, value))
        return NDArrayVariable(node, meta, source=source)

    # Recording operations ----------------------------------------------------------------------

    def to_arg(self, vt: VariableTracker, as_meta: bool) -> Any:
        """A VariableTracker as an fx argument (Nodes) or as an op_rules argument (ArrayMeta)."""
        if isinstance(vt, NDArrayVariable):
            return vt.meta if as_meta else vt.node
        if isinstance(vt, _Sequence):
            return vt.kind(self.to_arg(item, as_meta) for item in vt.items)
        if isinstance(vt, DictVariable):
            return {k: self.to_arg(v, as_meta) for k, v in vt.items.items()}
        return vt.as_python_constant()

    def _record(self, tx: "InstructionTranslator", op: str, target: Any, args: list, kwargs: dict,
                infer: Callable[[], Any]) -> VariableTracker:
        try:
            val = infer()
        except op_rules.RuleError as exc:
            raise Unsupported(f"{_describe_target(op, target)}: {exc}") from None
        node_args = tuple(self.to_arg(a, False) for a in args)
        node_kwargs = {k: self.to_arg(v, False) for k, v in kwargs.items()}
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        node.meta["val"] = val
        node.meta["stack"] = tx.user_location()
        return self.wrap_result(node, val)

    def call_function(self, tx, target, args: list[VariableTracker], kwargs: dict[str, VariableTracker]):
        meta_args = [self.to_arg(a, True) for a in args]
        meta_kwargs = {k: self.to_arg(v, True) for k, v in kwargs.items()}
        return self._record(tx, "call_function", target, args, kwargs,
                            lambda: op_rules.infer_call(target, meta_args, meta_kwargs))

    def call_method(self, tx, name: str, obj: NDArrayVariable, args, kwargs):
        meta_args = [self.to_arg(a, True) for a in args]
        meta_kwargs = {k: self.to_arg(v, True) for k, v in kwargs.items()}
        return self._record(tx, "call_method", name, [obj, *args], kwargs,
                            lambda: op_rules.infer_method(name, obj.meta, meta_args, meta_kwargs))

    def wrap_result(self, node: fx.Node, val: Any) -> VariableTracker:
        if isinstance(val, ArrayMeta):
            return NDArrayVariable(node, val)
        if val is None:
            return ConstantVariable(None)
        if isinstance(val, tuple) and all(isinstance(v, ArrayMeta) for v in val):
            items = []
            for i, meta in enumerate(val):
                item = self.graph.call_function(operator.getitem, (node, i))
                item.meta["val"] = meta
                item.meta["stack"] = node.meta.get("stack")
                items.append(NDArrayVariable(item, meta))
            return TupleVariable(items)
        raise Unsupported(f"result of {node.format_node()} is not an array")

    # Compiling -------------------------------------------------------------------------------

    def compile(self, graph_values: list[NDArrayVariable], started: float,
                single_output: bool = False) -> GraphResult | None:
        """Finish the graph with `graph_values` as outputs and run the backend.

        ``single_output``: the frame returns exactly one graph value, so the graph returns it
        bare (no tuple to build and index on every call). Returns None when the frame did
        nothing worth compiling (no operations in the graph).
        """
        outputs: list[fx.Node] = []
        for vt in graph_values:
            if vt.node.op != "placeholder" and vt.node not in outputs:
                outputs.append(vt.node)
        single_output = single_output and len(outputs) == 1
        self.graph.output(outputs[0] if single_output else tuple(outputs))
        self.graph.eliminate_dead_code()
        for _, node, _ in list(self.inputs):
            if not node.users:
                self.graph.erase_node(node)
                self.inputs = [entry for entry in self.inputs if entry[1] is not node]
        if not any(n.op in ("call_function", "call_method") for n in self.graph.nodes):
            return None
        self.graph.lint()
        name = re.sub(r"\W", "_", self.code_name)
        gm_name = f"graph_{name}_{next(_graph_counter)}"
        gm = fx.GraphModule(self.graph, name=gm_name)
        example_inputs = [value for _, _, value in self.inputs]
        t0 = time.perf_counter()
        try:
            compiled = self.backend(gm, example_inputs)
        except Exception as exc:
            raise BackendError(f"backend {getattr(self.backend, '__name__', self.backend)!r} failed: "
                               f"{type(exc).__name__}: {exc}") from exc
        if not callable(compiled):
            raise BackendError(f"backend returned {type(compiled).__name__}, expected a callable")
        if compiled is gm.forward:
            # Shown in the transformed bytecode as LOAD_CONST <function graph_f_0 ...>.
            compiled.__qualname__ = compiled.__name__ = gm_name
        else:
            compiled = _not_traced(compiled)
        t1 = time.perf_counter()
        for placeholder in self.graph.find_nodes(op="placeholder"):
            if placeholder.meta.get("guard_layout"):
                for i, guard in enumerate(self.guards):
                    if guard.kind == "NDARRAY_MATCH" and guard.source.name() == placeholder.meta["source"]:
                        dtype, shape, _ = guard.expected
                        self.guards[i] = Guard(guard.source, guard.kind, (dtype, shape, True), guard.order)
        return GraphResult(
            graph_module=gm,
            compiled_fn=compiled,
            graph_outputs=outputs,
            single_output=single_output,
            input_sources=[source for source, _, _ in self.inputs],
            guards=list(self.guards),
            compile_seconds=t1 - started,
            backend_seconds=t1 - t0,
        )


def _not_traced(fn: Callable) -> Callable:
    """A backend's callable written in user code would be captured like user code when the
    transformed code calls it: run it with capture off (as TorchDynamo does)."""
    from .convert_frame import skip_reason
    from .eval_frame import disable

    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None or skip_reason(code, getattr(fn, "__globals__", None)) is not None:
        return fn  # C code, npdynamo's own backends, NumPy: nothing to trace
    return disable(fn)


def _describe_target(op: str, target: Any) -> str:
    if op == "call_method":
        return f"ndarray.{target}()"
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", repr(target))
    if isinstance(target, np.ufunc) or (module or "").startswith("numpy"):
        return f"numpy.{name}()"
    return f"{module}.{name}()" if module else f"{name}()"
