"""Every NumPy ufunc in every calling form NumPy accepts, compiled vs plain NumPy.

In: the `np.ufunc` instances of the ``numpy`` namespace (found at run time, never listed by hand,
so a ufunc NumPy adds is tested the day it appears). Out: one generated program per (ufunc,
operand provenance), run by `test_differential.check_program` on the "eager" and C backends and
compared with plain NumPy: values bit for bit, dtypes, shapes, strides, which results are views
of which arguments, every argument's contents after the call, exceptions and warnings.

A program calls the ufunc in each form: plain; outputs positional (``np.negative(y, y)``), as
``out=``, as ``out=(o,)``; ``where=`` with ``out=``; ``dtype=``; ``casting="unsafe"`` into an
output of another dtype; ``order="F"``; the output aliasing an input (positionally and by
keyword); and for binary ufuncs ``reduce`` (also with a positional ``out``), ``accumulate``
(positional ``out``), ``outer`` and ``at``. Calls with outputs mostly discard their result, as
in-place code does (``np.logical_not(m, m)``): only the outputs show what they did. Operands (inputs and outputs) are graph inputs,
strided views passed in, values made in the graph, or views of values made in the graph.
Before a program is written, each form is tried with NumPy on the real arguments: a form NumPy
rejects for this ufunc (``np.ldexp.reduce``) is left out, so one refusal does not hide the rest.

`test_forms_are_captured` checks that the forms really reach graphs (without it, a translator
that broke the graph on every call would pass the differential test by running NumPy).
"""

from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import dataclass
from math import prod

import numpy as np
import pytest

import dynamo
from fuzz.program_gen import ArgSpec, Program, _base_shape, make_args
from fuzz.test_differential import check_program, load_function

#: Every ufunc of the ``numpy`` namespace once (``np.abs is np.absolute``), by a name it has there.
UFUNCS: dict[str, np.ufunc] = {}
for _name, _value in sorted(vars(np).items()):
    if isinstance(_value, np.ufunc) and _value not in UFUNCS.values():
        UFUNCS[_name] = _value

#: Input type characters in the order a loop is preferred: the everyday dtypes first.
_PREFERRED = "dlqfi?BHIbhLQeDFgG"
#: Values per dtype kind: inside every ufunc's domain where possible (no zero divisors, no
#: negative logarithms), distinct, not symmetric (a wrong operand order shows).
_VALUES = {"f": (0.25, 0.5, 0.75, 0.125, 0.875, 0.625),
           "c": (0.5 + 0.25j, 0.25 - 0.5j, 0.75 + 0.125j),
           "i": (1, 2, 3, 5, 4, 1), "u": (1, 2, 3, 5, 4, 1), "b": (True, False, True, True)}
N = 6  # elements of every 1-d operand; reshaped to (2, 3) for order="F"


def loop_types(uf: np.ufunc) -> tuple[list[str], list[str]] | None:
    """(input chars, output chars) of the loop the tests use: the most everyday dtype."""
    loops = [t.split("->") for t in uf.types]
    usable = [(i, o) for i, o in loops if not set(i + o) & set("OMmSUVT")]
    if not usable:
        return None
    usable.sort(key=lambda io: _PREFERRED.index(io[0][0]) if io[0][0] in _PREFERRED else 99)
    ins, outs = usable[0]
    return list(ins), list(outs)


@dataclass(frozen=True)
class Provenance:
    """Where an operand comes from: ``layout`` is how its argument is passed (an ArgSpec
    layout), ``expr`` how the function makes the operand from it (``{a}``: the argument)."""

    name: str
    layout: str
    expr: str


PROVENANCES = {
    "input": Provenance("input", "C", "{a}"),
    "input_view": Provenance("input_view", "slice", "{a}"),      # a strided view passed in
    "made": Provenance("made", "C", "{a}.copy()"),
    # made in the graph from a twice-as-long argument, then viewed: see `Builder.arg`
    "made_view": Provenance("made_view", "C", "{a}.copy()[::2]"),
}
class Builder:
    """The source and arguments of one program, built form by form."""

    def __init__(self, name: str, uf: np.ufunc, prov: Provenance) -> None:
        self.name, self.uf, self.prov = name, uf, prov
        self.specs: list[ArgSpec] = []
        self.params: list[str] = []

    def arg(self, dtype: str, shape: tuple = (N,)) -> str:
        """A new argument of `dtype`; returns the operand's expression in the function."""
        i = len(self.specs)
        kind = np.dtype(dtype).kind
        values = _VALUES["f" if kind in "fe" else kind]
        values = values[i % len(values):] + values[:i % len(values)]
        prov = self.prov
        if prov.name == "made_view":
            shape = (2 * shape[0], *shape[1:])
        # (an argument passed as a view fills its base, which is larger)
        size = prod(_base_shape(shape, prov.layout))
        values = tuple(values[j % len(values)] for j in range(size))
        self.specs.append(ArgSpec("array", dtype=dtype, shape=shape, values=values,
                                  layout=prov.layout))
        self.params.append(f"a{i}")
        return prov.expr.format(a=f"a{i}")

    def source(self, forms: list[tuple[str, list[str]]]) -> str:
        body = []
        for _, lines in forms:
            body += lines
        results = [r for _, lines in forms for r in _assigned(lines)]
        body.append(f"return ({', '.join(results)},)")
        text = "".join(f"    {line}\n" for line in body)
        return f"import numpy as np\n\n\ndef f({', '.join(self.params)}):\n{text}"


def _assigned(lines: list[str]) -> list[str]:
    """The names the statements bind (``x = ...``), in order: the program returns them all."""
    out = []
    for line in lines:
        head = line.split(" = ", 1)[0] if " = " in line else ""
        out += [n.strip() for n in head.split(",") if n.strip().isidentifier()]
    return out


#: The calling forms: (name, statements, outputs, which ufuncs). Statements are templates over
#: ``{f}`` (the ufunc), ``{x}`` (its inputs), ``{x0}``/``{x1}``/``{xl}`` (first, second, last
#: input), ``{xF}`` (the inputs reshaped to 2-d), ``{o}``/``{o0}`` (its outputs). `outputs` is
#: "loop" (the loop's output dtypes), "other" (another dtype: a cast) or "" (none).
FORMS = [
    ("plain", ["r_plain = {f}({x})"], "", "all"),
    ("positional out", ["{f}({x}, {o})"], "loop", "all"),
    ("positional out, result kept", ["r_posr = {f}({x}, {o})"], "loop", "all"),
    ("out=", ["r_kw = {f}({x}, out={o0})"], "loop", "one output"),
    ("out=(o,)", ["{f}({x}, out=({o},))"], "loop", "all"),
    ("where=", ["m_where = {mask}", "{f}({x}, out=({o},), where=m_where)"], "loop", "all"),
    ("dtype=", ["r_dtype = {f}({x}, dtype=np.{dtype})"], "", "all"),
    ("casting=", ["{f}({x}, out=({o},), casting='unsafe')"], "other", "all"),
    ("order=", ["r_order = {f}({xF}, order='F')"], "", "all"),
    ("alias positional", ["r_alias = {f}({x}, {x0})"], "", "in place"),
    ("alias out=", ["r_aliaskw = {f}({x}, out={xl})"], "", "in place"),
    ("reduce", ["r_red = {f}.reduce({x0})"], "", "binary"),
    ("reduce positional out", ["s_redout = {o0}[:1].reshape(())",
                               "{f}.reduce({x0}, 0, None, s_redout)"], "loop", "binary"),
    ("accumulate positional out", ["{f}.accumulate({x0}, 0, None, {o0})"], "loop", "binary"),
    ("outer", ["r_outer = {f}.outer({x})"], "", "binary"),
    ("at", ["r_at = {f}.at({x0}, [0, 2, 2], {x1}[:3])"], "", "binary"),
]


def _applies(which: str, uf: np.ufunc, ins: list[str], outs: list[str]) -> bool:
    return {"all": True, "one output": uf.nout == 1,
            "in place": uf.nout == 1 and np.dtype(outs[0]) == np.dtype(ins[0]),
            "binary": uf.nin == 2 and uf.nout == 1}[which]


def forms_of(b: Builder, ins: list[str], outs: list[str]) -> list[tuple[str, list[str]]]:
    """Every calling form as (name, statements); operands come from `b` (its provenance)."""
    forms = []
    for tag, templates, outputs, which in FORMS:
        if not _applies(which, b.uf, ins, outs):
            continue
        short = "".join(w[0] for w in tag.split())
        xs, lines = [], []
        for j, t in enumerate(ins):
            xs.append(f"x{j}_{short}")
            lines.append(f"x{j}_{short} = {b.arg(np.dtype(t).name)}")
        dtypes = {"loop": outs, "": [], "other": [
            "complex64" if np.dtype(t).kind == "c" else "float32" if t != "f" else "float64"
            for t in outs]}[outputs]
        os_ = []
        for j, t in enumerate(dtypes):
            os_.append(f"o{j}_{short}")
            lines.append(f"o{j}_{short} = {b.arg(np.dtype(t).name)}")
        fields = dict(f=f"np.{b.name}", x=", ".join(xs), x0=xs[0], x1=xs[-1], xl=xs[-1],
                      xF=", ".join(f"{v}.reshape(2, 3)" for v in xs), o=", ".join(os_),
                      o0=(os_ or [""])[0], dtype=np.dtype(outs[0]).name,
                      mask=b.arg("bool") if "{mask}" in "".join(templates) else "")
        forms.append((tag, lines + [t.format(**fields) for t in templates]))
    return forms


def _filled(dtype: np.dtype, shape: tuple) -> ArgSpec:
    values = _VALUES["f" if dtype.kind in "fe" else dtype.kind]
    return ArgSpec("array", dtype=dtype.name, shape=shape,
                   values=tuple(values[j % len(values)] for j in range(prod(shape))))


def _gufunc_shapes(uf: np.ufunc) -> list[tuple] | None:
    """Input shapes for a generalized ufunc: every core dimension 3, one loop dimension 2."""
    ins = uf.signature.split("->")[0]
    shapes = []
    for core in ins.replace(" ", "")[1:-1].split("),("):
        dims = [d for d in core.split(",") if d]
        shapes.append((2, *(3 for _ in dims)))
    return shapes


def build_program(name: str, uf: np.ufunc, prov: Provenance) -> tuple[Program, list[str]]:
    """The program of (`uf`, `prov`) with the forms NumPy accepts; and their names."""
    types = loop_types(uf)
    assert types is not None
    ins, outs = types
    kept: list[tuple[str, list[str]]] = []
    b = Builder(name, uf, prov)
    for form in forms_of(b, ins, outs):
        if _numpy_accepts(b, kept + [form]):
            kept.append(form)
    # the arguments of dropped forms stay in the signature (unused), so specs line up
    return Program(b.source(kept), tuple(b.specs)), [tag for tag, _ in kept]


def _numpy_accepts(b: Builder, forms: list) -> bool:
    """Whether plain NumPy runs these forms on fresh arguments without raising."""
    namespace: dict = {}
    exec(b.source(forms), namespace)  # noqa: S102  (our own generated text)
    args, _ = make_args(tuple(b.specs))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            namespace["f"](*args)
        except Exception:  # noqa: BLE001 - NumPy refuses this form for this ufunc
            return False
    return True


#: The C backend runs the provenances whose operands differ most for a kernel (strided inputs
#: passed in; values made in the graph); the eager backend runs all four.
C_PROVENANCES = ("input_view", "made")
NO_GCC = shutil.which(os.environ.get("CC") or "gcc") is None


def _cases() -> list:
    cases = []
    for name, uf in UFUNCS.items():
        if uf.signature is not None or loop_types(uf) is None:
            continue  # (generalized ufuncs: below)
        for prov in PROVENANCES:
            cases.append(pytest.param("eager", name, prov, id=f"eager-{name}-{prov}"))
        for prov in C_PROVENANCES:
            cases.append(pytest.param("c", name, prov, id=f"c-{name}-{prov}", marks=[
                pytest.mark.skipif(NO_GCC, reason="the C backend needs a C compiler")]))
    return cases


@pytest.mark.parametrize("backend,name,prov", _cases())
def test_ufunc_calling_forms(backend: str, name: str, prov: str, program_dir) -> None:
    prog, _ = build_program(name, UFUNCS[name], PROVENANCES[prov])
    check_program(prog, backend, str(program_dir), variant=0, known=False)


@pytest.mark.parametrize("name", [n for n, uf in UFUNCS.items() if uf.signature is not None])
@pytest.mark.parametrize("backend", ["eager", pytest.param("c", marks=pytest.mark.skipif(
    NO_GCC, reason="the C backend needs a C compiler"))])
def test_gufunc_calling_forms(backend: str, name: str, program_dir) -> None:
    """Generalized ufuncs (matmul, vecdot, matvec, ...): plain, positional out, out=."""
    uf = UFUNCS[name]
    types = loop_types(uf)
    if types is None:
        pytest.skip(f"{name} has no numeric loop")
    ins, outs = types
    shapes = _gufunc_shapes(uf)
    expected = uf(*[np.ones(s, np.dtype(t)) for s, t in zip(shapes, ins)])
    specs = [_filled(np.dtype(t), s) for s, t in zip(shapes, ins)]
    n = len(specs)
    specs += [_filled(expected.dtype, expected.shape) for _ in range(2)]
    xs = [f"a{i}" for i in range(n)]
    made = ", ".join(["y", *xs[1:]])  # the first operand made in the graph
    src = (f"import numpy as np\n\n\ndef f({', '.join(xs)}, o1, o2):\n"
           f"    y = a0.copy()\n"
           f"    r1 = np.{name}({', '.join(xs)})\n"
           f"    np.{name}({', '.join(xs)}, o1)\n"
           f"    r3 = np.{name}({made}, out=o2)\n"
           f"    return r1, r3, o1, o2, y\n")
    check_program(Program(src, tuple(specs)), backend, str(program_dir), known=False)


def test_forms_are_captured(program_dir) -> None:
    """The forms really reach graphs: for every unary and binary ufunc, the call in each form
    is a node of a captured graph (eager backend, operands made in the graph). Forms the rules do
    not capture (`NOT_CAPTURED`) are the exceptions, each with its reason."""
    missing = []
    for name, uf in UFUNCS.items():
        if uf.signature is not None or loop_types(uf) is None:
            continue
        prog, tags = build_program(name, uf, PROVENANCES["made"])
        dynamo.reset()
        fn = load_function(prog.source, str(program_dir))
        args, _ = make_args(prog.args)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            graphs = []
            dynamo.compile(fn, backend=lambda gm, ex: (graphs.append(gm), gm.forward)[1])(*args)
        calls = sum(1 for gm in graphs for node in gm.graph.nodes
                    if node.target is uf or (getattr(node.target, "__self__", None) is uf
                                             and node.target.__name__ not in NOT_CAPTURED))
        wanted = [t for t in tags if t not in NOT_CAPTURED]
        if calls < len(wanted):
            missing.append(f"{name}: {calls} of {len(wanted)} forms captured ({tags})")
    dynamo.reset()
    assert not missing, "\n".join(missing)


#: Calling forms that break the graph on purpose (the frame runs them in NumPy), with why.
NOT_CAPTURED = {
    "at": "ufunc.at mutates its first operand at data-dependent indices: not captured",
}
