"""Rules for products: np.dot, np.inner, np.outer, np.vdot, np.tensordot and np.einsum.

(np.matmul, np.vecdot, np.matvec and np.vecmat are generalized ufuncs: see `elementwise`.)
dtype and scalar-vs-array come from the stand-in run; shapes and the matching of contracted
dimensions (which shrunk stand-ins cannot check) are computed here.
"""

from __future__ import annotations

from math import prod

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import Call, Result, RuleError, broadcast, normalize_axes, register, shape_of

__all__: list[str] = []


def _match(name: str, a: int, b: int, sa: tuple, sb: tuple) -> None:
    if a != b:
        raise RuleError(f"{name}: shapes {sa} and {sb} not aligned ({a} != {b})")


@register(np.dot)
def _dot_rule(call: Call) -> Result:
    b = call.bind().arguments
    if b["out"] is not None:
        raise RuleError("np.dot(out=) needs a C-contiguous out array of the exact dtype; the "
                        "rules do not know the layout of out")
    res = call.run()
    sa, sb = shape_of(b["a"]), shape_of(b["b"])
    if not sa or not sb:
        shape = sb if not sa else sa
    elif len(sb) == 1:
        _match("np.dot", sa[-1], sb[0], sa, sb)
        shape = sa[:-1]
    else:
        _match("np.dot", sa[-1], sb[-2], sa, sb)
        shape = sa[:-1] + sb[:-2] + sb[-1:]
    return call.result(res, shape)


@register(np.inner)
def _inner_rule(call: Call) -> Result:
    res = call.run()
    sa, sb = (shape_of(x) for x in call.args[:2])
    if not sa or not sb:
        shape = sb if not sa else sa
    else:
        _match("np.inner", sa[-1], sb[-1], sa, sb)
        shape = sa[:-1] + sb[:-1]
    return call.result(res, shape)


@register(np.outer)
def _outer_rule(call: Call) -> Result:
    b = call.bind().arguments
    res = call.run()
    shape = (prod(shape_of(b["a"])), prod(shape_of(b["b"])))
    out = b["out"]
    if out is not None and (not isinstance(out, ArrayMeta) or out.shape != shape):
        raise RuleError(f"np.outer: out= must be a traced array of shape {shape}")
    return call.result(res, shape)


@register(np.vdot)
def _vdot_rule(call: Call) -> Result:
    res = call.run()
    sa, sb = (shape_of(x) for x in call.args[:2])
    _match("np.vdot", prod(sa), prod(sb), sa, sb)
    return call.result(res, ())


@register(np.tensordot)
def _tensordot_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    sa, sb = shape_of(b["a"]), shape_of(b["b"])
    axes = b["axes"]
    if isinstance(axes, int):
        if axes < 0:
            raise RuleError("np.tensordot: negative axes count is not supported by the rules")
        ax_a, ax_b = list(range(len(sa) - axes, len(sa))), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    if len(ax_a) != len(ax_b):
        raise RuleError("np.tensordot: axes lists of different lengths")
    na = [normalize_axes(x, len(sa))[0] for x in ax_a]
    nb = [normalize_axes(x, len(sb))[0] for x in ax_b]
    for i, j in zip(na, nb):
        _match("np.tensordot", sa[i], sb[j], sa, sb)
    shape = tuple(d for i, d in enumerate(sa) if i not in na) + \
        tuple(d for i, d in enumerate(sb) if i not in nb)
    return call.result(res, shape)


@register(np.einsum)
def _einsum_rule(call: Call) -> Result:
    if not call.args or not isinstance(call.args[0], str):
        raise RuleError("np.einsum: only the subscripts-string form is supported by the rules")
    # NumPy validates the subscripts, operand count and dimension counts. With optimize=,
    # length-1 dimensions keep NumPy from using tensordot (which returns 0-d arrays, not
    # scalars), so the stand-ins keep lengths up to 2.
    res = call.run("shrink2")
    subs = call.args[0].replace(" ", "")
    shapes = [shape_of(x) for x in call.args[1:]]
    lhs, arrow, rhs = subs.partition("->")
    sizes: dict[str, int] = {}
    ellipses = []
    for term, shape in zip(lhs.split(","), shapes):
        pre, dots, post = term.partition("...")
        n_ell = len(shape) - len(pre) - len(post) if dots else 0
        dims = list(zip(pre, shape)) + list(zip(post, shape[len(shape) - len(post):]))
        if dots:
            ellipses.append(shape[len(pre): len(pre) + n_ell])
        own: dict[str, int] = {}
        for label, d in dims:
            if own.setdefault(label, d) != d:
                raise RuleError(f"np.einsum: label {label!r} has sizes {own[label]} and {d}")
            known = sizes.get(label, 1)
            if known == 1:
                sizes[label] = d
            elif d not in (1, known):
                raise RuleError(f"np.einsum: label {label!r} has sizes {known} and {d}")
    ell = broadcast(*ellipses, what="np.einsum '...' dimensions") if ellipses else ()
    if not arrow:
        counts = {c: lhs.count(c) for c in set(lhs) if c.isalpha()}
        rhs = ("..." if ellipses else "") + "".join(sorted(c for c, n in counts.items()
                                                           if n == 1))
    pre, dots, post = rhs.partition("...")
    shape = tuple(sizes[c] for c in pre) + (ell if dots else ()) + tuple(sizes[c] for c in post)
    if not shape and call.kwargs.get("optimize") and len(shapes) > 2:
        raise RuleError("np.einsum(optimize=...) with a 0-d result: whether it is a scalar or a "
                        "0-d array depends on the contraction path chosen for the real sizes")
    out = call.kwargs.get("out")
    if out is not None and (not isinstance(out, ArrayMeta) or out.shape != shape):
        raise RuleError(f"np.einsum: out= must be a traced array of shape {shape}")
    return call.result(res, shape)
