"""OutputGraph: the graph being built for one frame, its inputs, its guards, and the final step
that hands it to the backend and produces the transformed code.

Called by the translator (`symbolic_convert`) for every NumPy call it records; it asks
`fx.op_rules` for the result's dtype and shape, so tracing never touches array data.
"""

from __future__ import annotations

import itertools
import linecache
import os
import operator
import re
import time
import tokenize
from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

import numpy as np

import fx
from fx import op_rules
from fx.op_rules import indexing
from fx.meta import ArrayMeta, meta_of
from fx.control import Opaque
from fx.serialize import graph_to_data
from fx.symbolic import MIN_DYNAMIC_SIZE, ShapeEnv, Sym, expression, is_symbolic

from . import config, dump, repro, trace_rules
from .capture import disable
from .exc import BackendError, Unsupported
from .output_check import OutputCheck
from .dynamic_shapes import dynamic_dims
from .constant_copies import detached
from .guards import Guard
from .source import SizeFactSource, Source
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable, SymIntVariable, UnspecializedScalarVariable
from .variables.containers import DictVariable, TupleVariable, _Sequence
from .variables.named_tuple import NamedTupleVariable
from .variables.ndarray import NDArrayVariable


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
    """``code``: the code object being traced (automatic dynamic shapes remember sizes per code
    object); ``dynamic``: the ``dynamic=`` of `dynamo.compile` (see `dynamo.dynamic_shapes`)."""

    def __init__(self, code_name: str, backend: Callable, code: Any = None,
                 dynamic: bool | None = None) -> None:
        self.code_name = code_name
        self.backend = backend
        self.code = code
        self.dynamic = dynamic
        self.graph = fx.Graph()
        self.guards: list[Guard] = []
        self.wrapped: dict[Source, VariableTracker] = {}
        #: (source, object, tracker) of every list, dict and user object read from the frame:
        #: aliasing between them is guarded (`VariableBuilder.__call__`). The objects are the
        #: frame's own and die with the trace.
        self.mutable_inputs: list[tuple[Source, Any, VariableTracker]] = []
        self.inputs: list[tuple[Source, fx.Node, Any]] = []
        self.shape_env = ShapeEnv()
        self._size_nodes: dict = {}
        self._size_ops: dict = {}
        #: sources of the int arguments that have a ShapeEnv symbol (`int_symbol`)
        self._int_symbols: set = set()

    # Guards and inputs -----------------------------------------------------------------------

    def final_guards(self) -> list[Guard]:
        """The guards, with the shape facts of dynamic shapes: every symbolic size of an
        NDARRAY_MATCH becomes None (any size >= 2) or the value a fact fixed it to, and every
        other fact becomes a SIZE_FACT guard (``x.shape[0] == y.shape[0]``). Plus one
        DISTINCT_OBJECTS guard per type of the lists, dicts and user objects read from the frame
        as different objects (tracked apart, they must not be one object later)."""
        guards = _final_guards(self.guards, self.shape_env)
        by_type: dict[type, list[Source]] = {}
        for source, obj, _ in self.mutable_inputs:
            by_type.setdefault(type(obj), []).append(source)
        for sources in by_type.values():
            if len(sources) > 1:
                guards.append(Guard(sources[0], "DISTINCT_OBJECTS", tuple(sources), len(guards)))
        return guards

    def add_guard(self, guard: Guard) -> None:
        self.guards.append(Guard(guard.source, guard.kind, guard.expected, order=len(self.guards)))

    def add_graph_input(self, source: Source, value: Any) -> NDArrayVariable:
        meta = meta_of(value)
        if meta.is_scalar:
            self.add_guard(Guard(source, "TYPE_MATCH", type(value)))
        else:
            dynamic = dynamic_dims(self.code, source.name(), value, self.dynamic)
            if any(dynamic):
                text = source.guard_expr()
                shape = tuple(self.shape_env.size_symbol(source, d, n, text) if dyn else n
                              for d, (n, dyn) in enumerate(zip(value.shape, dynamic)))
                meta = ArrayMeta(meta.dtype, shape, False)
            self.add_guard(Guard(source, "NDARRAY_MATCH", (value.dtype, meta.shape, False)))
        node = self._placeholder(source, value, meta)
        return NDArrayVariable(node, meta, source=source)

    def add_scalar_input(self, source: Source, value: int | float) -> VariableTracker:
        """A Python int/float argument as a graph input (its type guarded, not its value)."""
        self.add_guard(Guard(source, "TYPE_MATCH", type(value)))
        # (its meta is an equal value: what the shape rules see; only its type matters. Not the
        # program's object, which the graph would keep alive: constant_copies)
        value = detached(value)
        node = self._placeholder(source, value, value)
        node.meta["unspecialized"] = True
        return UnspecializedScalarVariable(node, value, source, self)

    def opaque_input(self, source: Source, value: Any) -> fx.Node:
        """A graph input that only loop nodes read (`fx.control`): not guarded, since the loop
        checks the types it is called with (its meta is `fx.control.Opaque`)."""
        for known, node, _ in self.inputs:
            if known == source:
                return node
        return self._placeholder(source, value, Opaque(f"a {type(value).__name__} only a loop "
                                                       "reads"))

    def int_symbol(self, source: Source, value: int) -> Sym | None:
        """The ShapeEnv symbol for an int argument that is a graph input (an unspecialised
        scalar: its value changed between compiles), for its uses in Python: ``n - 1``,
        ``n % 10 == 0`` and ``if n:`` then record facts about it, not its value, and a result
        made from it is recomputed from the argument after a break. Only for ints >= 2 (None
        otherwise: the caller fixes the value). Guarded as an int >= 2, or as its value once
        a use fixed it (`_final_guards`)."""
        if value < MIN_DYNAMIC_SIZE:
            return None
        known = source in self._int_symbols
        sym = self.shape_env.int_symbol(source, detached(value), source.guard_expr())
        if not known:
            self._int_symbols.add(source)
            self.add_guard(Guard(source, "SYMBOLIC_INT", sym))
        return sym

    def _placeholder(self, source: Source, value: Any, meta: Any) -> fx.Node:
        """A new graph input, after the existing ones (before the first operation)."""
        first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        if first_op is None:
            node = self.graph.placeholder(_placeholder_name(source))
        else:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(_placeholder_name(source))
        node.meta["val"] = meta
        node.meta["source"] = source.name()
        self.inputs.append((source, node, value))
        return node

    def size_node(self, sym: Sym) -> fx.Node:
        """Graph nodes computing a symbolic size at run time from the inputs' shapes
        (``x.shape[0] - 1``), for a size passed to a graph operation (``np.zeros((n, 3))``)."""
        cached = self._size_nodes.get(sym.poly)
        if cached is not None:
            return cached
        node = expression(sym, self._atom_node, self._size_op)
        self._size_nodes[sym.poly] = node
        return node

    def _atom_node(self, k: int) -> fx.Node:
        if k in self.shape_env.data_sizes:
            raise Unsupported("a size that depends on the data (the length of x[mask]) "
                              "cannot be passed to an operation")
        source, dim = self.shape_env.origin_key(k)
        placeholder = next(node for src, node, _ in self.inputs if src == source)
        if dim is None:  # an int argument (`int_symbol`): its own graph input
            return placeholder
        shape = self._size_op(getattr, placeholder, "shape")
        return self._size_op(operator.getitem, shape, dim)

    def _size_op(self, fn: Callable, *args: Any) -> fx.Node:
        key = (fn, args)
        node = self._size_ops.get(key)
        if node is None:
            node = self.graph.call_function(fn, args)
            node.meta["val"] = "size"  # a Python int (a size), not an array
            self._size_ops[key] = node
        return node

    # Recording operations ----------------------------------------------------------------------

    def to_arg(self, vt: VariableTracker, as_meta: bool) -> Any:
        """A VariableTracker as an fx argument (Nodes) or as an op_rules argument (ArrayMeta)."""
        if isinstance(vt, NDArrayVariable):
            return vt.meta if as_meta else vt.node
        if isinstance(vt, UnspecializedScalarVariable) and not vt._fixed:
            if as_meta:
                return vt.value if vt.sym is None else vt.sym
            return vt.node
        if isinstance(vt, SymIntVariable):
            return vt.sym if as_meta or not isinstance(vt.sym, Sym) else self.size_node(vt.sym)
        if isinstance(vt, _Sequence):
            return vt.kind(self.to_arg(item, as_meta) for item in vt.items)
        if isinstance(vt, DictVariable):
            return {k: self.to_arg(v, as_meta) for k, v in vt.items.items()}
        value = vt.as_python_constant()
        if not as_meta and isinstance(value, slice) and is_symbolic(
                (value.start, value.stop, value.step)):
            return slice(*(self.size_node(v) if isinstance(v, Sym) else v
                           for v in (value.start, value.stop, value.step)))
        return value

    def _record(self, tx, op: str, target: Any, args: list, kwargs: dict,
                infer: Callable[[], Any]) -> VariableTracker:
        cast = _complex_warning(op, target, [self.to_arg(a, True) for a in args],
                                {k: self.to_arg(v, True) for k, v in kwargs.items()})
        if cast is not None:
            raise Unsupported(f"{_describe_target(op, target)}: {cast}")
        try:
            val = infer()
        except op_rules.RuleError as exc:
            raise Unsupported(f"{_describe_target(op, target)}: {exc}") from None
        node_args = tuple(self.to_arg(a, False) for a in args)
        node_kwargs = {k: self.to_arg(v, False) for k, v in kwargs.items()}
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        node.meta["val"] = val
        node.meta["stack"] = tx.user_location()
        # (the source position of the frame's instruction being traced: inside an inlined
        # call, the call's; a traceback from the graph shows it, codegen.relocate_graph_error)
        node.meta["frame_position"] = tx.root().position()
        _locate(node, tx)
        return self.wrap_result(node, val)

    def call_function(self, tx, target, args: list[VariableTracker], kwargs: dict[str, VariableTracker]):
        if not _value_free(target):
            _fix_scalars([*args, *kwargs.values()])
        masked = self._masked_indexing(tx, target, args, kwargs)
        if masked is not None:
            return masked
        meta_args = [self.to_arg(a, True) for a in args]
        meta_kwargs = {k: self.to_arg(v, True) for k, v in kwargs.items()}
        return self._record(tx, "call_function", target, args, kwargs,
                            lambda: op_rules.infer_call(target, meta_args, meta_kwargs))

    def _masked_indexing(self, tx, target, args: list, kwargs: dict) -> VariableTracker | None:
        """``x[mask]`` and ``x[mask] = values`` with a traced boolean mask (None: not these).

        The length of ``x[mask]`` (the mask's number of True values) is a data-dependent
        symbol of the trace's ShapeEnv, one per mask node and *mutation epoch* (the number of
        mutating nodes recorded so far: a mutation may change the mask's contents), so
        ``z[m] = z[m] ** 2 + c[m]`` is one graph whose shapes agree without a guard. Anything
        that would need the length itself (a guard, a size argument) breaks the graph.
        ``x[mask] = scalar`` keeps the ordinary setitem rule."""
        if target not in (operator.getitem, operator.setitem) or kwargs or \
                len(args) != (2 if target is operator.getitem else 3):
            return None
        x, mask = args[0], args[1]
        if not (isinstance(x, NDArrayVariable) and isinstance(mask, NDArrayVariable)
                and indexing.traced_mask(mask.meta)):
            return None
        if target is operator.setitem:
            value = args[2]
            if not isinstance(value, NDArrayVariable) or not is_symbolic(value.meta.shape):
                return None  # a scalar or static-shaped value: the ordinary rule decides
        count = self._mask_count(mask)

        def infer() -> Any:
            if target is operator.getitem:
                return indexing.mask_getitem(x.meta, mask.meta, count)
            return indexing.mask_setitem(x.meta, mask.meta, args[2].meta, count)

        return self._record(tx, "call_function", target, args, {}, infer)

    def _mask_count(self, mask: NDArrayVariable) -> Any:
        """The number of True values of `mask` at this point of the trace (see above)."""
        if is_symbolic(mask.meta.shape):
            raise Unsupported("boolean-mask indexing with a mask of symbolic size")
        n = prod(mask.meta.shape)
        if n == 0:
            return 0
        epoch = sum(1 for node in self.graph.nodes
                    if node.op not in ("placeholder", "output") and node.is_impure())
        # (keyed by the node's name, unique in the graph: the env must not hold nodes, whose
        # metas hold its symbols; a rename between two uses only costs a graph break)
        return self.shape_env.data_symbol((mask.node.name, epoch), n)

    def call_method(self, tx, name: str, obj: NDArrayVariable, args, kwargs):
        if name not in _VALUE_FREE_METHODS:
            _fix_scalars([*args, *kwargs.values()])
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
                for key in ("location", "root_location"):
                    if key in node.meta:
                        item.meta[key] = node.meta[key]
                items.append(NDArrayVariable(item, meta))
            named = getattr(val, "kind", tuple)  # (`op_rules.NamedResults`: EighResult, ...)
            return TupleVariable(items) if named is tuple else NamedTupleVariable(items, named)
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
        if config.dump_dir is not None and self.code is not None:
            path = dump.graph_source_path(self.code, gm.meta)
            if path is not None:  # (compiled from that file from now on: debuggers show it)
                gm.source_path = path
                gm.recompile()
        example_inputs = [value for _, _, value in self.inputs]
        # (taken before the backend runs: a backend may rewrite the graph in place)
        snapshot = (graph_to_data(self.graph), dict(gm.attrs)) if config.check_accuracy else None
        where = (f"{self.code_name} ({self.code.co_filename}:{self.code.co_firstlineno})"
                 if self.code is not None else self.code_name)
        t0 = time.perf_counter()
        backend_name = repr(getattr(self.backend, '__name__', self.backend))
        try:
            compiled = self.backend(gm, example_inputs)
        except Exception as exc:
            if snapshot is not None:
                repro.backend_failed(*snapshot, example_inputs, self.backend, where, exc)
            raise BackendError(f"backend {backend_name} failed: "
                               f"{type(exc).__name__}: {exc}") from exc
        if not callable(compiled):
            raise BackendError(f"backend {backend_name} returned {type(compiled).__name__}, "
                               f"expected a callable")
        generated = compiled is gm.forward
        if generated:
            # Shown in the transformed bytecode as LOAD_CONST <function graph_f_0 ...>.
            compiled.__qualname__ = compiled.__name__ = gm_name
        else:
            compiled = _not_traced(compiled)
        if snapshot is not None:
            compiled = repro.checked(*snapshot, compiled, self.backend, where)
        if not generated:  # (npdynamo's generated forward returns the graph's outputs)
            compiled = OutputCheck(compiled, [n.meta.get("val") for n in outputs], single_output,
                                   f"backend {backend_name} (graph {gm_name} of {where})")
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
            guards=list(self.guards),  # (the shape facts are added by `final_guards`)
            compile_seconds=t1 - started,
            backend_seconds=t1 - t0,
        )


def _final_guards(guards: list[Guard], env: ShapeEnv) -> list[Guard]:
    out = []
    for guard in guards:
        if guard.kind == "SYMBOLIC_INT":
            # An int argument kept symbolic: checked as that value if a fact pinned it, else
            # as any int >= 2 (the facts about it follow, as SIZE_FACT guards).
            value = env.fixed_value(guard.expected)
            if value is not None:
                out.append(Guard(guard.source, "CONSTANT_MATCH", (int, value), guard.order))
                continue
            guard = Guard(guard.source, "INT_AT_LEAST", MIN_DYNAMIC_SIZE, guard.order)
        elif guard.kind == "NDARRAY_MATCH" and is_symbolic(guard.expected[1]):
            dtype, shape, contiguous = guard.expected
            # A symbol that a fact pinned to one value is checked as that value; the others
            # as None (any size >= 2).
            shape = tuple(d if not isinstance(d, Sym) else env.fixed_value(d) for d in shape)
            guard = Guard(guard.source, guard.kind, (dtype, shape, contiguous), guard.order)
        out.append(guard)
    order = len(guards)
    for text in env.guard_facts():
        out.append(Guard(SizeFactSource(text), "SIZE_FACT", text, order))
        order += 1
    return out


def _not_traced(fn: Callable) -> Callable:
    """A backend's callable written in user code would be captured like user code when the
    transformed code calls it: run it with capture off (as TorchDynamo does)."""
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None or trace_rules.skip_reason(code, getattr(fn, "__globals__", None)) is not None:
        return fn  # C code, npdynamo's own backends, NumPy: nothing to trace
    return disable(fn)


#: Callables whose result dtype and shape depend only on the *type* of a Python int/float operand
#: (NEP 50), not on its value: an unspecialised scalar argument may stay a graph input there.
#: Anywhere else (a shape, a reshape size, an axis, a count) the rules read its value, so it is
#: fixed first (a guard on the value), or the compiled code would keep one value's shape.
_VALUE_FREE_OPERATORS = frozenset({*op_rules.elementwise.BINARY_OPERATORS,
                                   *op_rules.elementwise.UNARY_OPERATORS,
                                   *op_rules.elementwise.INPLACE_OPERATORS})
_VALUE_FREE = _VALUE_FREE_OPERATORS | {np.where, np.clip, abs, pow, operator.getitem,
                                       operator.setitem, np.polyval, np.interp, np.digitize,
                                       np.searchsorted, np.isin}
_VALUE_FREE_METHODS = frozenset(
    {"clip", "__getitem__", "__setitem__"}
    | {f"__{fn.__name__.rstrip('_')}__" for fn in _VALUE_FREE_OPERATORS}
    | {f"__r{fn.__name__.rstrip('_')}__" for fn in op_rules.elementwise.BINARY_OPERATORS})


def _locate(node: fx.Node, tx) -> None:
    """``node.meta["location"]``: (file, line, module) of the statement that made the node
    (inside an inlined call, the callee's), and ``"root_location"``: the compiled frame's
    statement; the generated code runs at these places (`fx.locations`), so NumPy's warnings
    name the user's file:line."""
    root = tx.root()
    module = root.frame.f_globals.get("__name__")
    if tx.lineno is not None:
        # (an inlined function's own module; a function made in the traced code: the frame's)
        inner_module = getattr(tx, "module_name", None) or (
            module if tx.code.co_filename == root.code.co_filename else None)
        node.meta["location"] = (tx.code.co_filename, tx.lineno, inner_module)
    position = root.position()
    if position is not None and position[0] is not None:
        node.meta["root_location"] = (root.code.co_filename, position[0], module)


def _value_free(target: Any) -> bool:
    if isinstance(target, np.ufunc):  # (not its reduce/accumulate methods: axis=)
        return True
    try:
        return target in _VALUE_FREE
    except TypeError:  # unhashable
        return False


def _fix_scalars(vts: list[VariableTracker]) -> None:
    """Fix (guard the value of) every unspecialised scalar in `vts`, containers included,
    except an int that can be a symbol: the rules see that one as a symbolic size (so
    ``np.zeros(n)`` has the shape ``(n,)`` for every ``n >= 2``)."""
    while vts:
        vt = vts.pop()
        if isinstance(vt, UnspecializedScalarVariable):
            if vt.symbolic() is None:
                vt.as_python_constant()
        elif isinstance(vt, _Sequence):
            vts.extend(vt.items)
        elif isinstance(vt, DictVariable):
            vts.extend(vt.items.values())


def _describe_target(op: str, target: Any) -> str:
    if op == "call_method":
        return f"ndarray.{target}()"
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", repr(target))
    if isinstance(target, np.ufunc) or (module or "").startswith("numpy"):
        return f"numpy.{name}()"
    return f"{module}.{name}()" if module else f"{name}()"


#: Source files read by `source_line`: filename -> ((mtime, size), lines), oldest first.
_source_files: dict[str, tuple[tuple[float, int], list[str]]] = {}
_SOURCE_FILES_KEPT = 64


def source_line(filename: str, lineno: int) -> str:
    """Line `lineno` of `filename`, stripped ('' when unknown), for ``node.meta["stack"]`` and
    the locations in messages. Uses `linecache`'s entry when the program put one there (exec'd
    or interactive source) but never adds one: the program's linecache stays as it left it
    (CPython's test_traceback checks it is still empty after ``linecache.clearcache()``).
    Files read here stay in a small private cache, reread when their size or mtime changes."""

    entry = linecache.cache.get(filename)
    if entry is not None and len(entry) == 4:
        lines = entry[2]
    else:
        try:
            stat = os.stat(filename)
        except (OSError, ValueError):
            return ""
        stamp = (stat.st_mtime, stat.st_size)
        cached = _source_files.get(filename)
        if cached is not None and cached[0] == stamp:
            lines = cached[1]
        else:
            try:
                with tokenize.open(filename) as file:
                    lines = file.readlines()
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                return ""
            try:
                while len(_source_files) >= _SOURCE_FILES_KEPT:
                    _source_files.pop(next(iter(_source_files)), None)
            except RuntimeError:  # another thread changed it meanwhile: trimmed next time
                pass
            _source_files[filename] = (stamp, lines)
    return lines[lineno - 1].strip() if 1 <= lineno <= len(lines) else ""


def _complex_warning(op: str, target: Any, metas: list, kwmetas: dict) -> str | None:
    """Why the call casts complex values to a real dtype (``astype``, ``dtype=``, storing into
    a real array), or None. NumPy warns ComplexWarning for it, from C, attributed to the calling
    frame: the user's line in plain NumPy, the graph's in compiled code (and the rules' stand-in
    run would warn while tracing), so such a call is left to NumPy (a graph break)."""
    found: list[ArrayMeta] = []
    pending: list[Any] = [metas, kwmetas]  # (a loop: a recursive closure would be a cycle)
    while pending:
        value = pending.pop()
        if isinstance(value, ArrayMeta):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
    if not any(m.dtype.kind == "c" for m in found):
        return None
    requested = [kwmetas.get("dtype")]
    if (op == "call_method" and target == "astype") or (
            op == "call_function" and target is getattr(np, "astype", None)):
        requested.append(metas[1] if len(metas) > 1 else None)
    for dtype in requested:
        if dtype is None or isinstance(dtype, ArrayMeta):
            continue
        try:
            kind = np.dtype(dtype).kind
        except (TypeError, ValueError):
            continue
        if kind not in "cO":
            return f"casting complex values to {np.dtype(dtype)} (NumPy warns ComplexWarning)"
    if op == "call_function" and isinstance(target, np.ufunc) and \
            kwmetas.get("where", True) is not True:
        # where= makes NumPy read the output too: a complex output of a real loop is cast
        # to the loop's real dtype first (it warns even though the result is complex)
        outs = op_rules.written_operands(target, metas, kwmetas)
        inputs = metas[:target.nin]
        if any(isinstance(o, ArrayMeta) and o.dtype.kind == "c" for o in outs) and not all(
                isinstance(x, complex) or (isinstance(x, ArrayMeta) and x.dtype.kind == "c")
                for x in inputs):
            return "a complex out= of a real loop with where= (NumPy warns ComplexWarning)"
    if op == "call_function" and target is operator.setitem and len(metas) == 3:
        dest, value = metas[0], metas[2]
        if isinstance(dest, ArrayMeta) and isinstance(value, ArrayMeta) and \
                dest.dtype.kind not in "cO" and value.dtype.kind == "c":
            return "storing complex values into a real array (NumPy warns ComplexWarning)"
    return None
