"""The instructions a loop kernel lowers, one handler each: the `Opcodes` half of the lowering.

In: one bytecode instruction and the interpreter's `values.State` (its stack and locals). Out:
the state after it, the statements it emits (through `scalars` and the emitter methods of
`lower._Lowering`, which this class is mixed into) and, for a jump, the block's edges. What is
not here is refused (`scalars.Refuse`, naming the instruction or the construct).
"""

from __future__ import annotations

import types


from .. import compat
from . import scalars as S
from .ir import CTYPE, DTYPES, ArrTy, Exit, Ty
from .scalars import Refuse, SVal
from . import elementwise, fast, inline
from . import items as item_loops
from .calls import call
from .reductions import REDUCTIONS
from .slices import dot, part, slice_view
from .values import (NULL, AVal, ItemIterV, IterV, MethodV, Null, RangeV, ShapeV, SliceIdx, SliceV,
                     State, Static, TupleV, Unbound, merge_local)

__all__ = ["Opcodes"]

_BINARY_NAMES = {"ADD": "+", "SUBTRACT": "-", "MULTIPLY": "*", "TRUE_DIVIDE": "/",
                 "FLOOR_DIVIDE": "//", "MODULO": "%", "REMAINDER": "%", "POWER": "**",
                 "AND": "&", "OR": "|", "XOR": "^", "LSHIFT": "<<", "RSHIFT": ">>"}
_COMPARES = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GT": ">", "GE": ">="}
_STACK_OPS = frozenset({"POP_TOP", "COPY", "SWAP", "DUP_TOP", "DUP_TOP_TWO", "ROT_TWO",
                        "ROT_THREE", "ROT_FOUR", "NOP"})




class Opcodes:
    """Instruction handlers of `lower._Lowering` (see the module docstring)."""

    def step(self, i: int, inst, state: State):
        """Interpret one instruction; None to fall through, else the block's edges."""
        name = inst.name
        st = state.stack
        if name in _STACK_OPS:
            self.stack_op(inst, st)
            return None
        if name in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            st.append(self.load_local(inst.arg, state))
            return None
        if name == "LOAD_FAST_LOAD_FAST":
            for n in inst.arg:
                st.append(self.load_local(n, state))
            return None
        if name == "STORE_FAST":
            self.store_local(inst.arg, st.pop(), state)
            return None
        if name == "STORE_FAST_LOAD_FAST":
            self.store_local(inst.arg[0], st.pop(), state)
            st.append(self.load_local(inst.arg[1], state))
            return None
        if name == "STORE_FAST_STORE_FAST":
            self.store_local(inst.arg[0], st.pop(), state)
            self.store_local(inst.arg[1], st.pop(), state)
            return None
        if name == "LOAD_CONST":
            if isinstance(inst.arg, tuple) and inst.arg and all(
                    type(x) is str for x in inst.arg):  # (3.10, 3.13: a call's keyword names)
                st.append(Static(inst.arg))
            elif isinstance(inst.arg, tuple):  # (a constant index: ``A[0, -1]``)
                st.append(TupleV(tuple(S.constant(x) for x in inst.arg)))
            elif isinstance(inst.arg, slice):
                if inst.arg.step is not None:
                    raise Refuse("a slice with a step")
                st.append(SliceIdx(*(None if x is None else S.constant(x)
                                     for x in (inst.arg.start, inst.arg.stop))))
            else:
                st.append(S.constant(inst.arg) if inst.arg is not None else Static(None))
            return None
        if name == "LOAD_GLOBAL":
            gname = compat.global_name(inst)
            if gname not in self.statics:
                raise Refuse(f"the global {gname!r} is not a function, module or number")
            obj = self.statics[gname]
            self.used_statics[gname] = obj
            if type(obj) in (int, float, bool):  # (a number: guarded on its value)
                st.append(S.constant(obj))
                return None
            if compat.global_pushes_null(inst) and not compat.NULL_AFTER_CALLABLE:
                st.append(NULL)
            st.append(Static(obj))
            if compat.global_pushes_null(inst) and compat.NULL_AFTER_CALLABLE:
                st.append(NULL)
            return None
        if name in ("LOAD_ATTR", "LOAD_METHOD"):
            self.load_attr(inst, st)
            return None
        if name == "PUSH_NULL":
            st.append(NULL)
            return None
        if name in ("PRECALL", "RESUME", "EXTENDED_ARG", "CACHE"):
            return None
        if name == "KW_NAMES":  # (3.11, 3.12: the names of the next CALL's keywords)
            self.kw_names = inst.arg
            return None
        if name in ("CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_KW", "CALL_FUNCTION_KW"):
            kw, self.kw_names = (self.kw_names if name == "CALL" else ()), ()
            if name in ("CALL_KW", "CALL_FUNCTION_KW"):
                names = st.pop()
                kw = names.obj if isinstance(names, Static) else None
            n = inst.arg
            args = [st.pop() for _ in range(n)][::-1]
            below = [st.pop()] if name.startswith("CALL_FUNCTION") else [st.pop(), st.pop()]
            fns = [v for v in below if isinstance(v, Static)]
            others = [v for v in below if not isinstance(v, (Static, Null))]
            if len(fns) != 1 or others or not isinstance(kw, tuple):
                raise Refuse("a call of something other than a known function")
            if inline.inlinable(self, fns[0].obj):  # (a Python function of this module)
                return inline.enter(self, i, fns[0].obj, args, state, kw)
            if kw:
                raise Refuse(f"a call of {getattr(fns[0].obj, '__qualname__', '?')} with keyword "
                             "arguments")
            st.append(call(self, fns[0].obj, args))
            return None
        if name == "BINARY_OP" or name.startswith(("BINARY_", "INPLACE_")) and (
                name.split("_", 1)[1] in _BINARY_NAMES
                or name.split("_", 1)[1] == "MATRIX_MULTIPLY"):
            if name == "BINARY_OP":
                opname = getattr(inst.arg, "name", str(inst.arg)).replace("INPLACE_", "")
            else:
                opname = name.split("_", 1)[1]
            b, a = st.pop(), st.pop()
            if opname == "MATRIX_MULTIPLY":
                st.append(dot(self, a, b, matmul=True))
                return None
            if opname not in _BINARY_NAMES:
                raise Refuse(f"the operator {opname} is not lowered")
            if any(isinstance(x, AVal) or elementwise.is_elementwise(x) for x in (a, b)):
                op = _BINARY_NAMES[opname]
                inplace = name.startswith("INPLACE") or "INPLACE" in getattr(inst.arg, "name", "")
                if inplace and isinstance(a, (SliceV, AVal)):  # (``v += e``: v's memory now)
                    view = a if isinstance(a, SliceV) else slice_view(self, a, ())
                    elementwise.store_view(self, view, self.whole(b), inplace=op)
                    st.append(a)
                else:
                    st.append(elementwise.combine(self, op, self.whole(a), self.whole(b)))
                return None
            st.append(self.scalar_binary(_BINARY_NAMES[opname], self.scalar(a), self.scalar(b)))
            return None
        if name == "BUILD_SLICE":
            if inst.arg != 2:
                raise Refuse("a slice with a step")
            stop, start = st.pop(), st.pop()
            st.append(SliceIdx(_bound(start), _bound(stop)))
            return None
        if name == "BINARY_SLICE":
            stop, start, container = st.pop(), st.pop(), st.pop()
            st.append(self.subscript(container, SliceIdx(_bound(start), _bound(stop))))
            return None
        if name == "STORE_SLICE":  # (3.12+: ``x[a:b] = v``)
            stop, start, container, value = st.pop(), st.pop(), st.pop(), st.pop()
            self.store_subscript(container, SliceIdx(_bound(start), _bound(stop)), value)
            return None
        if name == "BINARY_SUBSCR":
            index, container = st.pop(), st.pop()
            st.append(self.subscript(container, index))
            return None
        if name == "STORE_SUBSCR":
            index, container, value = st.pop(), st.pop(), st.pop()
            self.store_subscript(container, index, value)
            return None
        if name == "BUILD_TUPLE":
            items = tuple(st[len(st) - inst.arg:])
            del st[len(st) - inst.arg:]
            st.append(TupleV(items))
            return None
        if name == "COMPARE_OP":
            b, a = st.pop(), st.pop()
            cname = getattr(inst.arg, "name", str(inst.arg))
            cast = cname.endswith("_CAST")
            r = S.compare(self, _COMPARES[cname.replace("_CAST", "")], self.scalar(a),
                          self.scalar(b))
            if cast:
                r = SVal(Ty("bool"), r.c)
            st.append(r)
            return None
        if name == "UNARY_NEGATIVE" and (isinstance(st[-1], AVal)
                                         or elementwise.is_elementwise(st[-1])):
            st.append(elementwise.negate(self, self.whole(st.pop())))
            return None
        if name in ("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT"):
            op = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~",
                  "UNARY_NOT": "not"}[name]
            st.append(S.unary(self, op, self.scalar(st.pop())))
            return None
        if name == "TO_BOOL":
            v = self.scalar(st.pop())
            st.append(v if v.ty == Ty("bool") else S.unary(self, "not", S.unary(self, "not", v)))
            return None
        if name == "GET_ITER":
            r = st.pop()
            if not isinstance(r, RangeV):
                st.append(self.iterate_items(i, r))
                return None
            its = []
            for c in (r.start, r.stop, r.step):
                t = self.temp("long long")
                self.assign(t, c)
                its.append(t)
            st.append(IterV(*its))
            return None
        if name == "FOR_ITER":
            if isinstance(st[-1], ItemIterV):
                return item_loops.step(self, i, st.pop(), st, state)
            return self.for_iter(i, st, state)
        if name == "UNPACK_SEQUENCE":
            v = st.pop()
            if not isinstance(v, TupleV) or len(v.items) != inst.arg:
                raise Refuse("unpacking something other than a tuple of its length")
            st.extend(reversed(v.items))
            return None
        if name == "END_FOR":
            raise Refuse("END_FOR reached (unexpected)")
        if "JUMP" in name:
            return self.jump(i, inst, state)
        if name in ("RETURN_VALUE", "RETURN_CONST"):
            v = st.pop() if name == "RETURN_VALUE" else inline.returned_constant(inst.arg)
            if i >> inline.SHIFT:  # (in an inlined call)
                return inline.leave(self, i, v, state)
            self.return_exit(v, state)
            return []
        raise Refuse(f"the bytecode {name} is not lowered")

    def return_exit(self, v, state: State) -> None:
        """A ``return``: a number (or None) is returned by the kernel; anything else (a tuple:
        ``return total, j``) is left to Python, which runs the return statement from its start
        (where the stack was empty, if nothing was stored since)."""
        if isinstance(v, Static) and v.obj is None:
            ex = Exit(None, "None")
        elif isinstance(v, SVal):
            ex = Exit(None, v.c, v.ty, v.tag_c)
        elif self.clean is not None and not self.dirty:
            self.exit(Exit(self.clean), State([], state.locals))
            return
        else:
            raise Refuse(f"a return of a {type(v).__name__} computed across a branch")
        self.exit(ex, State([], state.locals))

    def whole(self, v):
        """An array as the view of all of it (in an array expression); anything else as is."""
        return slice_view(self, v, ()) if isinstance(v, AVal) else v

    def scalar(self, v) -> SVal:
        if not isinstance(v, SVal):
            raise Refuse(f"a {type(v).__name__} where the loop kernel needs a number")
        return v

    # locals
    def load_local(self, name: str, state: State):
        ty, bound = state.locals.get(name, (None, "no"))
        if ty is None and bound == "no":
            raise Unbound(name)  # (on every path here: the block deoptimises, `lower`)
        if ty is None:
            raise Refuse(f"local {name!r} is read where it is unbound (or not a number or an "
                         "array)")
        if bound != "yes":
            self.check(f"!B_{name}", f"local {name!r} is unbound (UnboundLocalError)")
        if isinstance(ty, ArrTy):
            t = self.temp("npd_arr")
            self.assign(t, f"L_{name}")
            if self.fast is not None:
                fast.note_load(self, name, t, ty)
            return AVal(ty, t)
        t = self.temp(CTYPE[ty.fam])
        self.assign(t, f"L_{name}")
        if self.fast is not None:
            fast.note_load(self, name, t, ty)
        if name in self.tagged:
            tt = self.temp("int")
            self.assign(tt, f"T_{name}")
            return SVal(Ty(ty.fam, "rt"), t, tt)
        return SVal(ty, t)

    def store_local(self, name: str, v, state: State) -> None:
        self.dirty = True
        if isinstance(v, AVal):
            ty = v.ty
        elif isinstance(v, SVal):
            ty = v.ty
        else:
            raise Refuse(f"local {name!r} is given a {type(v).__name__}, not a number or array")
        old = state.locals.get(name)
        if old is not None and old[0] is not None:
            merge_local(old, (ty, "yes"))  # (raises when the family changes)
        state.locals[name] = self.stored[name] = (ty, "yes")
        if self.emitting:
            self.assign(f"L_{name}", v.c)
            if name in self.tagged:
                self.assign(f"T_{name}", v.tag_c)
            if name in self.flagged:
                self.assign(f"B_{name}", "1")

    # attributes and calls
    def load_attr(self, inst, st: list) -> None:
        attr = compat.attr_name(inst)
        obj = st.pop()
        method = inst.name == "LOAD_METHOD" or compat.attr_is_method(inst)
        if isinstance(obj, Static) and isinstance(obj.obj, types.ModuleType):
            value = getattr(obj.obj, attr, None)
            if value is None:
                raise Refuse(f"{obj.obj.__name__}.{attr} does not exist")
            if type(value) is float and not method and obj.obj.__name__ in ("math", "numpy"):
                st.append(S.constant(value))  # (np.pi, math.e, math.inf: constants)
                return
            modname = [k for k, v in self.used_statics.items() if v is obj.obj]
            self.used_statics[(modname[0] if modname else obj.obj.__name__, attr)] = value
            if method and not compat.NULL_AFTER_CALLABLE:
                st.append(NULL)
            st.append(Static(value))
            if method and compat.NULL_AFTER_CALLABLE:
                st.append(NULL)
            return
        if method and isinstance(obj, (AVal, SliceV)) and attr in REDUCTIONS:
            st.extend([Static(MethodV(attr, obj)), NULL] if compat.NULL_AFTER_CALLABLE
                      else [NULL, Static(MethodV(attr, obj))])
            return
        if isinstance(obj, AVal) and not method:
            if attr == "shape":
                st.append(ShapeV(obj))
                return
            if attr == "ndim":
                st.append(S.constant(obj.ty.ndim))
                return
            if attr == "size":
                expr = " * ".join(f"{obj.c}.shape[{k}]" for k in range(obj.ty.ndim)) or "1"
                t = self.temp("long long")
                self.assign(t, expr)
                st.append(SVal(Ty("int"), t))
                return
        raise Refuse(f"the attribute .{attr} is not lowered")

    # elements
    def offset(self, arr: AVal, index) -> str:
        items = index.items if isinstance(index, TupleV) else (index,)
        if len(items) != arr.ty.ndim:
            raise Refuse(f"an index of {len(items)} integers into a {arr.ty.ndim}-d array (only "
                         "single elements are lowered)")
        if self.fast is not None:
            proven = fast.offset(self, arr, items)
            if proven is not None:
                return proven
        parts = []
        for k, item in enumerate(items):
            v = self.scalar(item)
            if v.ty.fam != "int":
                raise Refuse("an array index that is not an int")
            t = self.temp("long long")
            dim = f"{arr.c}.shape[{k}]"
            self.assign(t, f"({v.c} < 0 ? {v.c} + {dim} : {v.c})")
            self.check(f"((unsigned long long){t} >= (unsigned long long){dim})",
                       "index out of range (IndexError)")
            parts.append(f"{t} * {arr.c}.strides[{k}]")
        return " + ".join(parts) or "0"

    def subscript(self, container, index):
        if isinstance(container, ShapeV):
            v = self.scalar(index)
            if not v.c.rstrip("L").lstrip("-").isdigit():
                raise Refuse("A.shape[k] with k not a literal")
            k = int(v.c.rstrip("L"))
            k = k + container.arr.ty.ndim if k < 0 else k
            if not 0 <= k < container.arr.ty.ndim:
                raise Refuse("A.shape[k] out of range")
            t = self.temp("long long")
            self.assign(t, f"{container.arr.c}.shape[{k}]")
            return SVal(Ty("int"), t)
        if isinstance(container, TupleV):  # (``math.frexp(x)[1]``)
            k = self.scalar(index)
            if not k.c.rstrip("L").lstrip("-").isdigit():
                raise Refuse("a tuple indexed by something other than a literal")
            n = int(k.c.rstrip("L"))
            if not -len(container.items) <= n < len(container.items):
                raise Refuse("a tuple index out of range")
            return container.items[n]
        if not isinstance(container, AVal):
            raise Refuse(f"indexing a {type(container).__name__}")
        items = index.items if isinstance(index, TupleV) else (index,)
        if any(isinstance(item, SliceIdx) for item in items) or len(items) < container.ty.ndim:
            view = part(self, container, items)  # (a row, or a view)
            self.view_origin[id(view)] = (id(container), id(index))
            return view
        off = self.offset(container, index)
        fam = DTYPES[container.ty.dtype]
        t = self.temp(CTYPE[fam])
        ctype = {"float": "double", "int": "long long", "bool": "unsigned char"}[fam]
        self.assign(t, f"*({ctype} *)({container.c}.data + {off})")
        return SVal(Ty(fam, "np"), t)

    def store_subscript(self, container, index, value) -> None:
        self.dirty = True
        if not isinstance(container, AVal):
            raise Refuse(f"assigning into a {type(container).__name__}")
        items = index.items if isinstance(index, TupleV) else (index,)
        if len(items) < container.ty.ndim or any(isinstance(x, SliceIdx) for x in items):
            if isinstance(value, (SliceV, AVal)) and self.view_origin.get(id(value)) == (
                    id(container), id(index)):
                return  # (``A[idx] op= e``: the view was updated in place; this copies it onto
                # itself)
            elementwise.store_view(self, slice_view(self, container, items), self.whole(value))
            return
        v = self.scalar(value)
        fam = DTYPES[container.ty.dtype]
        off = self.offset(container, index)
        if fam == "bool":
            raise Refuse("writing into a bool array is not lowered")
        if fam == "float":
            x = v.c if v.ty.fam == "float" else f"(double){v.c}"
            self.store_element(container, off, ("double", x))
            return
        if v.ty.fam == "float":
            self.check(f"!({v.c} > -9.2e18 && {v.c} < 9.2e18)",
                       "a NaN, infinity or big float into an int array")
            x = f"(long long){v.c}"
        else:
            x = v.c
        self.store_element(container, off, ("long long", x))

    # control flow
    def for_iter(self, i: int, st: list, state: State):
        if self.fast is not None and i == self.fast.header:
            return fast.for_iter(self, i, st, state)
        it = st.pop()
        if not isinstance(it, IterV):
            raise Refuse("FOR_ITER over something other than a range iterator")
        if self.emitting and i in self.fast_loops:
            fast.mark(self, i, it)
        exhausted = self.instrs.target(i) + compat.loop_exit_skip()
        cond = f"({it.step} > 0 ? {it.n} >= {it.stop} : {it.n} <= {it.stop})"
        done_state = State(list(st), dict(state.locals))
        body_state = State(list(st), dict(state.locals))
        if self.emitting:
            here = inline.label(i)
            self.emit("branch", cond, f"{here}_done", f"{here}_body")
            self.emit("label", f"{here}_done")
        edges = [self.edge(exhausted, done_state)]
        if self.emitting:
            self.emit("label", f"{here}_body")
        item, nxt = self.temp("long long"), self.temp("long long")
        self.assign(item, it.n)
        self.check(f"__builtin_add_overflow({it.n}, {it.step}, &{nxt})", "a range beyond int64")
        body_state.stack.append(IterV(nxt, it.stop, it.step))
        body_state.stack.append(SVal(Ty("int"), item))
        edges.append(self.edge(i + 1, body_state))
        return edges

    def jump(self, i: int, inst, state: State):
        name = inst.name
        target = self.instrs.target(i)
        st = state.stack
        if name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP_BACKWARD_NO_INTERRUPT",
                    "JUMP", "JUMP_NO_INTERRUPT"):
            return [self.edge(target, state)]
        if name in ("JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"):
            v = self.scalar(st[-1])
            on_true = "TRUE" in name
            jump_state = state.copy()
            st.pop()
            fall_state = state
            return self.branch(S.truth(v), (target, jump_state) if on_true else (i + 1, fall_state),
                               (i + 1, fall_state) if on_true else (target, jump_state))
        if "IF_FALSE" in name or "IF_TRUE" in name:
            v = self.scalar(st.pop())
            on_true = "IF_TRUE" in name
            jump_state, fall_state = state.copy(), state
            then, other = ((target, jump_state), (i + 1, fall_state)) if on_true else (
                (i + 1, fall_state), (target, jump_state))
            return self.branch(S.truth(v), then, other)
        raise Refuse(f"the jump {name} is not lowered")

    def branch(self, cond: str, then, other):
        """Two edges: to `then` when `cond` holds, else to `other`."""
        a, b = f"B{len(self.stmts)}a", f"B{len(self.stmts)}b"
        if self.emitting:
            self.emit("branch", cond, a, b)
            self.emit("label", a)
        edges = [self.edge(*then)]
        if self.emitting:
            self.emit("label", b)
        edges.append(self.edge(*other))
        return edges


def _bound(v):
    """A slice bound from the stack: None, or an int value."""
    if isinstance(v, Static) and v.obj is None:
        return None
    return v
