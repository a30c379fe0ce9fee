"""Loop kernels: a whole loop nest of the frame runs as one C function, called once.

In: the translator stopped at the entry of an outermost loop of the frame (a ``for`` loop's
GET_ITER over a ``range``, or a ``while`` loop's header), with the C backend. Out (`plan`): a
`KernelPlan`, whose `add_to_graph` makes the loop the graph's last node (an `fx.control.Loop`
running the kernel) and whose `emit_driver` writes, where the loop stood in the transformed
code, what follows the graph's call; or None with the reason the loop is not lowered (logged;
the loop then keeps its usual treatment: unrolled into the graph, or a body function).

The types of the locals come from what the trace knows (a graph value's dtype and ndim, a
constant's type) or, for an argument the trace never looked at, from its value, without a
guard (it is an input of the graph only the loop node reads): the kernel checks the types of
what it is called with and runs nothing when they differ (it hands the loop to plain Python),
so one compile serves every value and every size. The names the loop's code reads as globals
(``range``, ``math``, ``abs``) are guarded like any global the translator reads; a global the
frame assigns before the loop is not lowered (the kernel would read the old value).

After the graph (see `dynamo.backends.c.c_loop_nest` for what it returns): at way out k, the
locals are stored (an unbound one deleted) and the frame continues after the loop, in a resume
function (captured again) or, when a local that continues may be unbound or the rest only
returns (``return x``), in the plain copy of the rest of the function (`codegen`'s stay
entries); at a ``return`` inside the loop, the value
is returned; after a deoptimisation the locals are stored as the iteration found them and the
loop continues in plain Python in this frame, over the rest of its range.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import types
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from bytecode import Label

from fx.control import Cond, Loop, Opaque
from fx.weak import IdentityMap

from . import compat, config
from . import instructions as ins
from .backends.c.build import BuildError, CompilerNotFound
from .backends.c.c_loop_nest import LoopKernel
from .backends.c.c_loop_runtime import PRELUDE
from .backends.c.cache import KernelCache, cache_root, checked
from .bytecode_analysis import code_info
from .codegen import Codegen, call_resume
from .guards import Guard
from .output_graph import source_line
from .instructions import UNBOUND
from .loop_nest.ir import DTYPES, SCALAR_TYPES, ArrTy, Ty
from .loop_nest import stored
from .loop_nest.lower import Refuse, lower
from .loop_nest.sites import if_at, loop_at, range_statement, region
from .records import note_loop
from .resume import in_loop_body
from .source import AttrSource, GetItemSource, GlobalSource, LocalSource
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable, SymIntVariable, UnspecializedScalarVariable
from .variables.lazy import LazyVariable
from .variables.ndarray import NDArrayVariable

__all__ = ["KernelPlan", "plan", "wants_kernels", "loop_entries", "kernels_for"]

log = logging.getLogger("dynamo.loop_kernels")

KERNEL = "___kernel_result"
_LOCAL_OPS = ("LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "DELETE_FAST", "LOAD_FAST_LOAD_FAST",
              "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_FAST_AND_CLEAR")


def wants_kernels(tx) -> bool:
    """Loop kernels for this frame: the C backend, and the option on."""
    backend = tx.output.backend
    target = getattr(backend, "_ref", None)  # (a weak reference to the user's backend)
    if isinstance(target, weakref.ref):
        backend = target()
    return bool(config.loop_kernels) and getattr(backend, "loop_kernels", False) is True


def loop_entries(info) -> set[int]:
    """The entries of the outermost loops of a code (a ``for`` loop's GET_ITER, a ``while``
    loop's header), outside try/with statements: where a kernel may start."""
    found = set()
    for i, inst in enumerate(info.instructions):
        if info.in_exception_block(i):
            continue
        if inst.name == "GET_ITER":
            loop = info.outermost_loop(i + 1) if info.outermost_loop(i) is None else None
            if loop is not None and loop[0] == i + 1:
                found.add(i)
                start = range_statement(info, i)
                if start is not None:
                    found.add(start)
        elif inst.name != "FOR_ITER":
            loop = info.outermost_loop(i)
            if loop is not None and loop[0] == i:
                found.add(i)
    return found


#: code -> {(entry, the locals' types, the globals' objects): kernel}: a loop lowers the same
#: way for the same types (weak on the code: a function's kernels go with it; by identity: two
#: equal codes of two files are two codes, and a dying code runs no Python: `fx.weak`)
_built: "IdentityMap[types.CodeType, dict]" = IdentityMap()


def kernels_for(code: types.CodeType) -> list:
    """The loop kernels built for `code` so far (`LoopKernel`: ``.nest.text()``, ``.source``)."""
    return list(_built.get(code, {}).values())


def _names(instrs) -> list[str]:
    names: list[str] = []
    for inst in instrs:
        if inst.name in _LOCAL_OPS and not isinstance(inst.arg, (int,)):
            for n in (inst.arg if isinstance(inst.arg, tuple) else (inst.arg,)):
                if isinstance(n, str) and n not in names:
                    if not n.isascii():
                        raise Refuse(f"the local {n!r} is not an ASCII name (a C identifier)")
                    names.append(n)
    return names


def _type_of(tx, name: str) -> Ty | ArrTy | None:
    """The kernel type of local `name` (None: unbound here); `Refuse` for other values."""
    vt = tx.locals.get(name)
    if vt is None:
        if name in tx.argnames and name not in tx.deleted:
            value = tx.frame.f_locals[name]
            return None if value is UNBOUND else _value_type(value, name)
        return None
    if type(vt) is LazyVariable:
        return None if vt.value is UNBOUND else _value_type(vt.value, name)
    if isinstance(vt, ConstantVariable) and vt.value is UNBOUND:
        return None  # (a loop body's local no iteration assigned yet)
    if isinstance(vt, NDArrayVariable):
        meta = vt.meta
        if meta.dtype not in DTYPES:
            raise Refuse(f"{name!r} is an array of {meta.dtype}")
        if meta.is_scalar:
            return Ty(DTYPES[meta.dtype], "np")
        if not 1 <= len(meta.shape) <= 4:
            raise Refuse(f"{name!r} has {len(meta.shape)} dimensions")
        return ArrTy(meta.dtype, len(meta.shape))
    if isinstance(vt, (ConstantVariable, UnspecializedScalarVariable, SymIntVariable)):
        return _value_type(vt.python_type()() if not isinstance(vt, ConstantVariable)
                           else vt.value, name)
    raise Refuse(f"{name!r} is a {vt.describe()}, not a number or an array")


def _value_type(value: Any, name: str) -> Ty | ArrTy:
    if type(value) is np.ndarray:
        if value.dtype not in DTYPES or not 1 <= value.ndim <= 4:
            raise Refuse(f"{name!r} is an array of {value.dtype} with {value.ndim} dimensions")
        return ArrTy(value.dtype, value.ndim)
    ty = SCALAR_TYPES.get(type(value))
    if ty is not None:
        return ty
    raise Refuse(f"{name!r} is a {type(value).__name__}, not a number or an array")


def _statics(tx, names: set[str]) -> dict[str, Any]:
    """The objects the loop's globals name, guarded (`tx.load_global`), with those of the
    functions of this module it may inline (`loop_nest.inline`), theirs, and so on."""
    found: dict[str, Any] = {}
    work, seen = list(names), set()
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in tx.frame.f_globals:
            obj = tx.frame.f_globals[name]
        elif name in tx.frame.f_builtins:
            obj = tx.frame.f_builtins[name]
        else:
            continue
        if not isinstance(obj, types.ModuleType) and not callable(obj) and type(obj) not in (
                int, float, bool):
            continue  # (an array or another object the loop reads as a global: not lowered)
        found[name] = obj
        if isinstance(obj, types.FunctionType) and obj.__globals__ is tx.frame.f_globals:
            work += [compat.global_name(inst) for inst in code_info(obj.__code__).instructions
                     if inst.name == "LOAD_GLOBAL"]
    return found


def _numbers(values: tuple) -> tuple:
    """A function's defaults as a cache key: the numbers an inlined call may take (by value),
    anything else by identity (never its repr: an array default would be printed)."""
    return tuple(repr(v) if type(v) in (int, float, bool) else id(v) for v in values)


def plan(tx, index: int) -> "KernelPlan | None":
    """A kernel for the loop entered at instruction `index`, or None (reason logged)."""
    code = tx.code
    site = loop_at(code, index)
    if site is None and index in tx.conditional_entries:
        site = if_at(code, index)
    if site is None:
        return None
    what = "the if statement" if site.kind == "if" else "the loop"
    instrs = tx.info.instructions
    if site.takes_range and (not tx.stack or getattr(tx.stack[-1], "python_type",
                                                     lambda: None)() is not range
                             or not tx.stack[-1].is_python_constant()):
        return None  # (the loop's graph node takes the range as a constant)
    if not site.takes_range and tx.stack:
        return None
    try:
        inside = [instrs[i] for i in sorted(region(code, site))]
        names = _names(inside)
        types_ = {}
        for name in names:
            ty = _type_of(tx, name)
            if ty is not None:
                types_[name] = ty
        global_names = {compat.global_name(inst) for inst in inside
                        if inst.name == "LOAD_GLOBAL"}
        statics = _statics(tx, global_names)
        pending = sorted(n for n in statics if n in tx.side_effects.globals)
        if pending:  # (the kernel would read the value from before the assignment)
            raise Refuse(f"the global {pending[0]!r} is assigned in this frame before the loop")
        key = (index, tuple(sorted((n, str(t)) for n, t in types_.items())),
               tuple(sorted((n, repr(o) if type(o) in (int, float, bool) else
                             (id(o), id(getattr(o, "__code__", None)),
                              _numbers(getattr(o, "__defaults__", None) or ())))
                            for n, o in statics.items())))
        built = _built.setdefault(code, {})
        kernel = built.get(key)
        if kernel is None:
            kernel = built[key] = _kernel(code, index, types_, statics, tx.frame.f_globals,
                                          f"{code.co_name}_line{instrs[index].lineno}")
    except Refuse as exc:
        log.info("%s at %s:%s is not a kernel: %s", what, code.co_filename,
                 instrs[index].lineno, exc)
        instead = ("an if statement, not a C kernel (a graph break)" if site.kind == "if"
                   else "not a C loop kernel (unrolled, or run in Python)")
        note_loop(code.co_filename, instrs[site.header].lineno, f"{instead}: {exc}")
        return None
    except (BuildError, CompilerNotFound) as exc:
        log.warning("the kernel of %s at %s:%s could not be built: %s", what,
                    code.co_filename, instrs[index].lineno, exc)
        instead = "an if statement, not a C kernel" if site.kind == "if" else "not a C loop kernel"
        note_loop(code.co_filename, instrs[site.header].lineno,
                  f"{instead}: it could not be built ({type(exc).__name__})")
        return None
    note_loop(code.co_filename, instrs[site.header].lineno,
              f"{'an if statement as a C kernel' if site.kind == 'if' else 'a C loop kernel'} "
              f"({kernel.nest.name})")
    for name in kernel.nest.globals_used:
        if isinstance(name, str):
            tx.load_global(name)  # (its guard: the kernel's code depends on what it is)
        elif name[0] == "__defaults__":  # (a default an inlined call takes: its value)
            value = kernel.nest.globals_used[name]
            source = GetItemSource(AttrSource(GlobalSource(name[1]), "__defaults__"), name[2])
            tx.output.add_guard(Guard(source, "CONSTANT_MATCH", (type(value), value)))
    return KernelPlan(kernel, site)


class LoopOutcome(VariableTracker):
    """The value of the loop's graph node, ``(status, locals, rest)``: an output of the graph
    that the transformed code stores in ``___kernel_result`` (`KernelPlan.graph_locals`)."""

    def __init__(self, node) -> None:
        self.node = node

    def reconstruct(self, codegen) -> None:
        codegen.load_graph_value(self)


def _graph_target(kernel: LoopKernel, code: types.CodeType) -> Loop:
    """The graph operation that runs `kernel` (a new one per graph: the kernel holding it back
    would make a reference cycle)."""
    nest = kernel.nest
    writes = tuple(n for n in nest.arrays_written() if n in nest.inputs)
    kind = Cond if nest.site.kind == "if" else Loop
    return kind(nest.name, kernel, nest, nest.inputs, writes, nest.assigned,
                f"{code.co_filename}:{nest.first_line}")


def _kernel(code: types.CodeType, index: int, types_: dict, statics: dict,
            frame_globals: dict, name: str) -> LoopKernel:
    """The loop lowered and built; or, when this very loop was lowered before (in any
    process: `loop_nest.stored`), its nest and C text from the kernel cache directory, with no
    lowering and no C to write (a first call from the disk cache then only loads the kernel)."""
    key = stored.lowering_key(code, index, types_, statics, name, frame_globals)
    kcache = None
    if key is not None:
        kcache = checked(KernelCache(cache_root()), record=("loops", key))
        payload = kcache.read_record("loops", key)
        if payload is not None:
            try:
                payload = json.loads(payload)
                nest = stored.from_data(payload["nest"], statics)
                source = PRELUDE + payload["function"]
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                log.info("the stored lowering %s is not used: %s", key, exc)
            else:
                return LoopKernel(nest, source)
    nest = lower(code, index, types_, statics, name=name, globals_dict=frame_globals)
    kernel = LoopKernel(nest)
    if kcache is not None and kernel.source.startswith(PRELUDE):
        try:  # (the C function only: the runtime before it is the same for every kernel)
            payload = json.dumps({"nest": stored.to_data(nest),
                                  "function": kernel.source[len(PRELUDE):]},
                                 separators=(",", ":"))
        except stored.NotStored as exc:
            log.info("the lowering of %s is not stored: %s", name, exc)
        else:
            kcache.write_record("loops", key, payload)
    return kernel


@dataclass(frozen=True)
class KernelPlan:
    """What the transformed code does where a lowered loop stood (see the module docstring)."""

    kernel: LoopKernel
    site: Any  # (loop_nest.sites.LoopSite)
    #: the frame's locals bound before the loop (set by `compile_frame`)
    bound_before: frozenset[str] = frozenset()
    #: the loop's node, the last of the graph (`add_to_graph`)
    node: Any = None

    def add_to_graph(self, tx, exit) -> "KernelPlan":
        """The loop as the graph's last node (`fx.control.Loop`), whose value, the loop's
        outcome, the transformed code reads (`emit_driver`). Its arguments: the range on the
        stack (a constant) or None, and the locals the loop reads, as the graph has them (a
        graph value, a constant). An argument the trace never looked at becomes an input that
        only the loop reads, with no guard: the kernel checks what it is called with, so one
        compile serves every size and value."""
        out = tx.output
        args: list = [exit.stack[-1].as_python_constant() if self.site.takes_range else None]
        for name in self.kernel.nest.inputs:
            vt = exit.locals.get(name)
            if vt is None or type(vt) is LazyVariable:
                source = LocalSource(name) if vt is None else vt.source
                value = tx.frame.f_locals[name] if vt is None else vt.value
                args.append(out.opaque_input(source, value))
            else:
                args.append(out.to_arg(vt, False))
        node = out.graph.create_node("call_function", _graph_target(self.kernel, tx.code),
                                     tuple(args), name="loop")
        node.meta["val"] = Opaque("the loop's outcome: status, locals, the rest to iterate")
        line = self.kernel.nest.first_line
        node.meta["stack"] = f"{tx.code.co_filename}:{line}  " + source_line(
            tx.code.co_filename, line)
        return dataclasses.replace(self, node=node)

    @property
    def graph_locals(self) -> tuple:
        """(name, graph value) the transformed code stores after the graph (`codegen`)."""
        return ((KERNEL, LoopOutcome(self.node)),)

    @property
    def reason(self) -> str:
        nest = self.kernel.nest
        if self.site.kind == "if":
            return (f"the if statement at line {nest.first_line} runs as one C kernel "
                    f"({nest.name}): its condition depends on data")
        return f"the loop at line {nest.first_line} runs as one C loop kernel ({nest.name})"

    @property
    def index(self) -> int:
        return self.site.entry

    def emit_driver(self, gen: Codegen, code: types.CodeType) -> None:
        nest = self.kernel.nest
        site = self.site
        names = self.kernel.names
        info = code_info(code)
        if site.takes_range:  # (the range, which the graph's loop node took)
            gen.extend(ins.pop_top())
        statuses = list(range(1, len(nest.exits) + 1))
        if site.iterates and not site.takes_range:
            statuses.append(-1)
        # (a loop body function's frame passes `UNBOUND` on as a value: `loops`)
        markers = in_loop_body(code)
        self._store_locals(gen, names, markers)  # (every way on stores them: once, first)
        for k in [*statuses, 0]:
            nxt = Label()
            if k:
                gen.extend(self._part(0) + ins.if_not_equal(k, nxt))
            if k == 0:  # deoptimised: the loop continues in plain Python, in this frame
                if site.iterates:  # (over the rest of its range)
                    gen.extend(self._part(2) + ins.delete_fast(KERNEL))
                    _continue_here(gen, site.get_iter, 1)
                else:
                    gen.extend(ins.delete_fast(KERNEL))
                    _continue_here(gen, site.header, 0)
                break
            if k == -1:  # it did not start: the statement that makes the range, in Python
                gen.extend(ins.delete_fast(KERNEL))
                _continue_here(gen, site.entry, 0)
                gen.label(nxt)
                continue
            ex = nest.exits[k - 1]
            if ex.target is None:
                gen.extend(self._part(2) + ins.delete_fast(KERNEL) + ins.return_value())
            else:
                gen.extend(ins.delete_fast(KERNEL))
                live = info.live_locals(ex.target)
                unsure = [n for n in nest.flagged if n in live]
                if unsure or info.returns_at_once(ex.target):  # (no resume function for
                    _continue_here(gen, ex.target, 0)  # a ``return x`` after the loop)
                else:
                    bound = sorted(n for n in live if n in self.bound_before
                                   or (n in nest.locals and n not in nest.flagged))
                    call_resume(gen, code, ex.target, tuple(bound))
            gen.label(nxt)

    def _part(self, i: int) -> list:
        return ins.load_fast(KERNEL) + ins.load_const(i) + ins.binary_subscr()

    def _store_locals(self, gen: Codegen, names: tuple[str, ...], markers: bool) -> None:
        gen.extend(self._part(1) + ins.unpack_sequence(len(names)))
        for name in names:
            gen.extend(ins.store_fast(name))
        for name in names:
            if name in self.kernel.nest.flagged and not markers:  # (unbound there: deleted)
                unbound, keep = Label(), Label()
                gen.extend(ins.load_fast(name) + ins.if_is(UNBOUND, unbound))
                gen.extend(ins.jump_forward(keep))
                gen.label(unbound)
                gen.extend(ins.delete_fast(name))
                gen.label(keep)


def _continue_here(gen: Codegen, target: int, depth: int) -> None:
    """Continue at instruction `target` of the original, in this frame, uncompiled (with
    `depth` values on the stack)."""
    if target not in gen.stay_entries:
        gen.stay_entries[target] = (Label(), depth > 0)
    gen.extend(ins.jump_forward(gen.stay_entries[target][0]))

