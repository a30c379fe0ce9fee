"""The C text of a lowered loop nest (`dynamo.loop_nest.ir.LoopNest`): one function, written
after the runtime's `c_loop_runtime.PRELUDE`.

In: a `LoopNest`. Out: `c_source(nest, fname)`, the kernel's function: its locals as C variables
(``L_x``, with ``T_x`` its tag and ``B_x`` whether it is bound where needed), one C statement
per IR statement (a check is a ``goto npd_deopt``, a store is logged, a fast statement tests
and enters a fast copy), the deoptimisation (the undo log replayed) and one block per way out.
A save point writes the locals as the kernel returns them (``v``, ``tag``, ``bound``, and the
outermost loop's iterator in ``rng``) right away, so a deoptimisation returns what is there:
the state saved lives in memory, not in C variables the compiler would have to keep alive
(in registers it needs for the hot loops) through the whole function. Used by
`c_loop_nest.LoopKernel`, which builds and calls it.
"""

from __future__ import annotations

import re

from ...loop_nest.ir import ArrTy, LoopNest

__all__ = ["c_source"]

_CTYPES = {"int": "long long", "float": "double", "bool": "int"}
_FIELD = {"int": "i", "float": "f", "bool": "i"}


def _ctype(ty) -> str:
    return "npd_arr" if isinstance(ty, ArrTy) else _CTYPES[ty.fam]


def c_source(nest: LoopNest, fname: str) -> str:
    """The C function for `nest` (after `PRELUDE`)."""
    names = list(nest.locals)
    out = [f"/* {line} */" for line in ("loop kernel " + nest.name,)]
    # (which ufunc each entry of the table holds: kernels that differ only there are other
    # libraries, each with its own table)
    out += [f"/* ufunc {k}: {getattr(uf, '__module__', None)}.{uf.__name__} {sig} ({how}) */"
            for k, (uf, sig, how) in enumerate(nest.ufuncs)]
    # (how many chunks ran in fast copies, over all calls: `LoopKernel.fast_chunks`)
    out.append("static long long npd_chunks;")
    out.append("long long npd_fast_chunks(void) { return npd_chunks; }")
    out.append(f"int {fname}(npd_arr *arrs, npd_val *v, unsigned char *tag, unsigned char *bound,"
               " long long *rng, int main_thread, npd_val *ret) {")
    decl = []
    for name in names:
        ty = nest.locals[name]
        decl.append(f"{_ctype(ty)} L_{name};")
        decl.append(f"int T_{name} = 0, B_{name} = 0;")
    for t, ctype in nest.temps.items():
        decl.append(f"{ctype} {t};")
    decl.append("int started = 0;")
    decl.append("unsigned polls = 0, saves = 0;")
    decl.append("int caught = 0;")
    decl.append("npd_fpsave flags;")
    decl.append("npd_log undo;")
    decl.append("npd_scratch scratch;")
    sites = [b[1] for st in nest.stmts if st.kind == "fast" for b in st.args[11]]
    decl += [f"double *npd_ub{site};" for site in sites]
    decl.append("int result = 0;")
    # (the call's fast chunks, added to the library's count once at its end: an atomic
    # increment per chunk cost a stencil of short rows a third of its time)
    decl.append("long long chunks = 0;")
    out += ["    " + d for d in decl]
    out.append("    memset(&ret[0], 0, sizeof ret[0]);")
    # (the buffers of an earlier call, kept: `npd_take` in c_loop_runtime)
    out.append("    npd_kept *kept = npd_take();")
    out.append("    if (!kept) kept = &npd_no_kept;")
    out.append("    undo = kept->log; NPD_LOG_CLEAR(undo); scratch = kept->scratch;")
    out += [f"    npd_ub{site} = kept->ub[{site}];" for site in sites]
    for k, name in enumerate(names):
        ty = nest.locals[name]
        if name in nest.inputs:
            if isinstance(ty, ArrTy):
                out.append(f"    L_{name} = arrs[v[{k}].i];")
            else:
                out.append(f"    L_{name} = v[{k}].{_FIELD[ty.fam]};")
            out.append(f"    T_{name} = tag[{k}]; B_{name} = 1;")
        else:
            out.append(f"    memset(&L_{name}, 0, sizeof L_{name}); B_{name} = 0;")
    out += ["    " + line for line in _write(nest)]
    out.append("    npd_fp_enter(&flags);")
    free = _needs_no_keep(nest)
    for s in nest.stmts:
        out.append(_stmt(s, nest, free))
    # ways out
    out.append("npd_deopt:")
    out.append("    npd_undo_all(&undo);")
    out.append("    result = started ? 0 : -1;")
    out.append("    goto npd_done;")
    for k, ex in enumerate(nest.exits, 1):
        out.append(f"npd_exit_{k}:")
        out.append("    if (NPD_FP_BAD()) goto npd_deopt;")
        out += ["    " + line for line in _write(nest)]
        if ex.value is not None and ex.ty is not None:
            out.append(f"    ret[0].{_FIELD[ex.ty.fam]} = {ex.value}; ret[1].i = {ex.value_tag};")
        out.append(f"    result = {k};")
        out.append("    goto npd_done;")
    out.append("npd_done:")
    out.append("    if (chunks) __atomic_fetch_add(&npd_chunks, chunks, __ATOMIC_RELAXED);")
    out.append("    npd_fp_leave(&flags);")
    out.append("    if (caught) npd_release_sigint();")
    out.append("    if (kept != &npd_no_kept) {")
    out.append("        kept->log = undo; kept->scratch = scratch;")
    out += [f"        kept->ub[{site}] = npd_ub{site};" for site in sites]
    out.append("        npd_give(kept);")
    out.append("    } else {")
    out.append("        npd_log_free(&undo); free(scratch.data);")
    out += [f"        free(npd_ub{site});" for site in sites]
    out.append("    }")
    out.append("    return result;")
    out.append("}")
    return "\n".join(out) + "\n"


def _save_iterator(nest: LoopNest) -> str:
    """The outermost loop's iterator at a save point, in the range slots: a range's next,
    stop and step, or an iteration over arrays' next index and array ids (`loop_nest.items`)."""
    if nest.items is None:
        return " rng[0] = S0n; rng[1] = S0stop; rng[2] = S0step;"
    second = "S0a1.id" if nest.items[0] > 1 else "-1"
    return f" rng[0] = S0n; rng[1] = S0a0.id; rng[2] = {second};"


def _write(nest: LoopNest) -> list[str]:
    """The locals as the kernel returns them (at a way out, and at a save point)."""
    lines = []
    for k, name in enumerate(nest.locals):
        ty = nest.locals[name]
        val, t, b = f"L_{name}", f"T_{name}", f"B_{name}"
        if isinstance(ty, ArrTy):
            lines.append(f"v[{k}].i = {val}.id + ({val}.row << 16); bound[{k}] = {b};")
        else:
            tagv = t if name in nest.tagged else ("1" if ty.tag == "np" else "0")
            lines.append(f"v[{k}].{_FIELD[ty.fam]} = {val}; tag[{k}] = {tagv}; bound[{k}] = {b};")
    return lines


_TEMP = re.compile(r"\bt\d+\b")
_KEEP = "npd_keep("


def _needs_no_keep(nest: LoopNest) -> set[str]:
    """The float temporaries whose ``npd_keep`` can go: a branch, a check or a store reads
    them, directly or through other temporaries, so the compiler can neither drop them nor
    (an operation whose IEEE flags are set is never folded when compiling) compute them
    early; without the empty ``asm`` it may keep them in vector registers. A result only a
    local or a stack slot takes keeps it (the next iteration may overwrite it unread)."""
    feeds: dict[str, set[str]] = {}
    used: set[str] = set()
    for s in nest.stmts:
        if s.kind == "assign" and _TEMP.fullmatch(s.args[0]):
            for t in _TEMP.findall(s.args[1]):
                feeds.setdefault(t, set()).add(s.args[0])
        elif s.kind in ("check", "branch"):
            used.update(_TEMP.findall(s.args[0]))
        elif s.kind in ("store", "put"):
            used.update(_TEMP.findall(s.args[1] + " " + s.args[2][1]))
    changed = True
    while changed:
        changed = False
        for t, readers in feeds.items():
            if t not in used and readers & used:
                used.add(t)
                changed = True
    return used


def _stmt(s, nest: LoopNest, free: frozenset | set = frozenset()) -> str:
    a = s.args
    where = f"  /* line {s.line} */" if s.line is not None else ""
    if s.kind == "assign":
        if a[0] in free and a[1].startswith(_KEEP) and _balanced(a[1][len(_KEEP):-1]):
            return f"    {a[0]} = ({a[1][len(_KEEP):-1]});"
        return f"    {a[0]} = {a[1]};"
    if s.kind == "check":
        return f"    if (__builtin_expect(!!({a[0]}), 0)) goto npd_deopt;  /* {a[1]} */"
    if s.kind == "store":
        ctype, value = a[2]
        return f"    NPD_STORE({ctype}, {a[0]}, {a[1]}, {value});{where}"
    if s.kind == "label":
        return f"{a[0]}:;{where}"
    if s.kind == "goto":
        return f"    goto {a[0]};"
    if s.kind == "branch":
        return f"    if ({a[0]}) goto {a[1]}; else goto {a[2]};"
    if s.kind == "header":
        # (a save point every 256 iterations of the outermost loop, or sooner once the undo
        # log holds 4096 stores (it stays in the cache): a deoptimisation puts back up to 256
        # iterations, and Python runs them again; the IEEE flags are tested there)
        return ("    if (!started || ++saves >= 256u || NPD_LOG_FULL(undo)) {\n"
                "        if (NPD_FP_BAD()) goto npd_deopt;\n"
                "        started = 1; saves = 0; NPD_LOG_CLEAR(undo);\n        "
                + "\n        ".join(_write(nest)) + (
                    _save_iterator(nest) if nest.iterates else "") + "\n    }")
    if s.kind == "poll":
        # (every 256th time: Ctrl-C, and the IEEE flags; the SIGINT handler goes in front of
        # Python's the first time, so a short kernel makes no system call)
        return ("    if (++polls >= 256u) {\n"
                "        polls = 0;\n"
                "        if (main_thread && !caught) { npd_catch_sigint(); caught = 1; }\n"
                "        if (npd_interrupted || NPD_FP_BAD()) goto npd_deopt;\n"
                "    }")
    if s.kind == "exit":
        return f"    goto npd_exit_{a[0]};"
    if s.kind == "put":
        ctype, value = a[2]
        return f"    *({ctype} *)({a[0]}.data + {a[1]}) = {value};{where}"
    if s.kind == "fast":
        return _fast(*a)
    if s.kind == "logview":
        return _logview(*a)
    raise AssertionError(s.kind)


def _logview(ptr: str, shape: tuple, strides: tuple) -> str:
    """The old values of a view, one block per row of its last axis (`npd_log_block`)."""
    if not shape:
        return "    if (npd_log_block(&undo, " + ptr + ", 0, 1)) goto npd_deopt;"
    outer = len(shape) - 1
    lines = ["    {"]
    for d in range(outer):
        lines.append(f"    for (long long npd_q{d} = 0; npd_q{d} < {shape[d]}; npd_q{d}++)")
    at = " + ".join([ptr] + [f"npd_q{d} * {strides[d]}" for d in range(outer)])
    lines.append(f"        if (npd_log_block(&undo, {at}, {strides[-1]}, {shape[-1]}))"
                 " goto npd_deopt;")
    lines.append("    }")
    return "\n".join(lines)


def _balanced(expr: str) -> bool:
    depth = 0
    for ch in expr:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _fast(label, n, stop, step, cn, ce, tests, logs, outermost, chunk, light,
          batches) -> str:
    """The ``fast`` statement (`loop_nest.fast`): the next chunk in the fast copy, when the
    tests hold; its stores' old values logged first."""
    def addr(lg) -> str:
        name, dims = lg[0], lg[1:]
        return f"L_{name}.data + " + (" + ".join(
            f"{x} * L_{name}.strides[{k}]" for k, (x, _) in enumerate(dims)) or "0")

    def stride(lg) -> str:
        name, dims = lg[0], lg[1:]
        return " + ".join(f"L_{name}.strides[{k}]" for k, (_, along) in enumerate(dims)
                          if along) or "0"

    lines = [f"    if ({step} == 1 && {n} < {stop}) {{",
             f"        {cn} = {n};",
             f"        {ce} = ((unsigned long long){stop} - (unsigned long long){n} > {chunk}ULL)"
             f" ? {n} + {chunk} : {stop};",
             "        if (" + " && ".join(tests or ("1",)) + ") {"]
    for lg in logs:  # (the old values of what the chunk may write: one block per store)
        count = f"{ce} - {cn}" if any(along for _, along in lg[1:]) else "1"
        lines.append(f"            if (npd_log_block(&undo, {addr(lg)}, {stride(lg)}, {count}))"
                     " goto npd_deopt;")
    for k, site, body, arg in batches:  # (the chunk's ufunc calls: `loop_nest.batches`)
        buf = f"npd_ub{site}"
        lines.append(f"            if (!{buf} && !({buf} = (double *)malloc({chunk} * "
                     "sizeof(double)))) goto npd_deopt;")
        lines.append(f"            for (long long npd_ii = {cn}; npd_ii < {ce}; npd_ii++) {{")
        lines += [f"                {ctype} {dst} = {expr};" for ctype, dst, expr in body]
        lines.append(f"                {buf}[npd_ii - {cn}] = {arg};")
        lines.append("            }")
        lines.append(f"            npd_ufuncn({k}, {buf}, {ce} - {cn});")
    # (the chunk counts as its iterations towards the next save point, and towards the next
    # poll as its iterations, or a 16th of them when they are light: no array statements)
    weight = f"(unsigned)({ce} - {cn})"
    lines.append(f"            polls += {weight + ' / 16u' if light else weight};"
                 + (f" saves += {weight};" if outermost else ""))
    lines.append("            chunks++;")
    lines.append(f"            goto {label};")
    lines.append("        }")
    lines.append("    }")
    return "\n".join(lines)
