"""Differential fuzzing of dynamic shapes: one compiled function, many sizes, vs plain NumPy.

In: the random straight-line programs of `program_gen.programs` (issue 7). Each program is
compiled ONCE with ``dynamo.compile(f, backend=..., dynamic=True)`` (every size >= 2 symbolic
from the first compile) and, on a fresh copy of the module, once with the default
``dynamic=None`` (automatic dynamic: a dimension becomes symbolic after its size changed). Each
compiled function is then called, in this order, with the original arguments, with three
*variants* of them and with the original arguments again (the versions compiled for the
variants must not be taken for the first call's sizes). A variant maps every dimension size
d >= 2 that occurs in the arguments consistently to another size >= 2 (d + 1, 2 * d, 2, d - 1,
or a drawn size per d; or keeps every size), keeping 0 and 1, so equal sizes stay equal and
broadcasting patterns stay valid (one variant kind in nine resizes each dimension on its
own, one maps some sizes to 1 or 0; an array sometimes gets another memory layout); Python
scalar arguments get other values of their type (`program_gen.other_scalar`); element values
are cycled over the new sizes. The programs also have statements about sizes
(``programs(sizes=True)``: ``x.shape[0]``, ``len(x)``, slices, reshapes, joins, creation, int
arguments used as sizes).

Out: every call is compared with plain NumPy run on fresh identical arguments, with the
comparison of tests/fuzz/test_differential.py (imported from there: values, dtypes, shapes,
strides, views of arguments, argument mutations, exceptions, warnings). A compiled version whose
shape rules relied on a fact the guards do not check shows up here as a wrong result or a wrong
exception for some size. The C backend runs a smaller number of examples (its symbolic graphs
run through NumPy until it has symbolic kernels).

Known open bugs are listed in `KNOWN_BUGS` (counted, not failed); each has a strict-xfail
regression test in tests/dynamo/test_dynamic_shapes.py. Fixed mismatches found by this
fuzzer are regression tests there too.

Cost (2-core machine, idle, warm kernel cache): ~8 s eager (500 examples, 5,000 compiled calls)
+ ~3 s C (100 examples); a cold kernel cache adds gcc runs, a busy machine several times that.
``DYNAMO_FUZZ_EXAMPLES=N`` runs N eager and N // 5 C examples; ``DYNAMO_FUZZ_RANDOM=1``,
``DYNAMO_FUZZ_COLLECT=file.jsonl`` and ``DYNAMO_FUZZ_TRACE=file`` work as for
test_differential.py.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynamo
from fuzz.program_gen import (LAYOUTS, ArgSpec, Program, arg_sizes, make_args, other_scalar,
                              programs, resized)
from fuzz.test_differential import (COLLECT, C_VARIANTS, TRACE, KnownBug, Mismatch,
                                    RecordingEager, compare, fuzz_settings, load_function,
                                    run_once)

_SCALE = os.environ.get("DYNAMO_FUZZ_EXAMPLES")
#: Eager examples; the C backend runs a fifth of them (at least 10).
EAGER_EXAMPLES = int(_SCALE or 0) or 500
C_EXAMPLES = max(10, EAGER_EXAMPLES // 5)

#: Variants per example (besides the original arguments, called first and last).
VARIANTS = 3

#: Open bugs this fuzzer finds: name -> KnownBug (``matches(program, backend, mismatch_text)``).
#: Each has a strict-xfail repro in tests/dynamo/test_dynamic_shapes.py; remove the entry
#: when its fix lands. (c-where-size-operand: fixed, lowering.py _where_plan refuses an operand
#: that is not an array.)
KNOWN_BUGS: dict[str, KnownBug] = {
}

EAGER = RecordingEager()
STATS: dict[str, dict[str, int]] = {}


# Variants ---------------------------------------------------------------------------------------

#: How a variant maps a size d >= 2 (kind 4: a drawn size per d).
SIZE_MAPS = {
    0: lambda d: d + 1,
    1: lambda d: 2 * d,
    2: lambda d: 2,
    3: lambda d: d - 1 if d > 2 else d + 2,
}


@st.composite
def variants(draw: Any, specs: tuple[ArgSpec, ...]) -> list[tuple[dict, dict, dict, dict]]:
    """`VARIANTS` argument changes (size map, scalar map, per-dimension map, layout map; the
    arguments of `program_gen.resized`) for the arguments `specs`: mostly consistent size maps;
    one kind in nine resizes each dimension on its own (sizes equal by chance may then differ,
    and NumPy may raise: the guards must notice), one maps some sizes to 1 or 0; an array
    argument sometimes gets another memory layout."""
    sizes = arg_sizes(specs)
    scalar_args = [i for i, s in enumerate(specs) if s.kind == "scalar"]
    arrays = [i for i, s in enumerate(specs) if s.kind == "array"]
    out = []
    for _ in range(VARIANTS):
        kind = draw(st.integers(0, 8))
        dims: dict = {}
        if kind in (4, 6):
            mapping = {d: draw(st.integers(2, 9)) for d in sizes}
        elif kind == 5:  # the same sizes (only scalar arguments change)
            mapping = {}
        elif kind == 7:
            mapping = {}
            dims = {(i, k): draw(st.integers(2, 6)) for i, s in enumerate(specs)
                    if s.kind == "array" for k, d in enumerate(s.shape) if d >= 2}
        elif kind == 8:  # some sizes become 1 or 0 (specialised: other versions)
            mapping = {d: draw(st.sampled_from([d, d + 1, 1, 0])) for d in sizes}
        else:
            mapping = {d: SIZE_MAPS[kind](d) for d in sizes}
        scalars = {i: other_scalar(specs[i].value, draw(st.integers(0, 11)))
                   for i in scalar_args if draw(st.integers(0, 3))}
        layouts = {i: draw(st.sampled_from(LAYOUTS)) for i in arrays
                   if draw(st.integers(0, 5)) == 0}
        out.append((mapping, scalars, dims, layouts))
    return out


def _variant_text(prog: Program, mapping: dict, scalars: dict, dims: dict,
                  layouts: dict) -> str:
    sizes = ", ".join(f"{d} -> {n}" for d, n in mapping.items() if d != n) or "none"
    if dims:
        sizes = "each dimension on its own"
    args = resized(prog.args, mapping, scalars, dims, layouts)
    return f"sizes {sizes}\n" + "\n".join(f"#   {n}: {a.describe()}"
                                           for n, a in zip(prog.arg_names, args))


# Running one program -----------------------------------------------------------------------------

def check_program(prog: Program, plan: list[tuple[dict, dict, dict, dict]], backend: str,
                  dynamic: Any, directory: str, variant: int = 0, known: bool = True) -> None:
    """Compile `prog` once (``dynamic=``), call it with the original arguments, each variant of
    `plan` and the original arguments again; raise `Mismatch` on a difference from NumPy that
    no `KNOWN_BUGS` entry explains (``known=False``: on any difference)."""
    be = EAGER if backend == "eager" else list(C_VARIANTS.values())[variant % len(C_VARIANTS)]
    fn = load_function(prog.source, directory)  # a fresh code object: no sizes seen yet
    compiled = dynamo.compile(fn, backend=be, dynamic=dynamic)
    be.compiled.clear()
    calls = [("original arguments", prog)]
    for k, v in enumerate(plan):
        args = resized(prog.args, *v)
        try:
            make_args(args)
        except (ValueError, IndexError):  # a view argument (``x[0]``) that no longer fits
            continue
        calls.append((f"variant {k + 1} ({_variant_text(prog, *v)})", replace(prog, args=args)))
    calls.append(("original arguments again", prog))
    key = f"{backend} dynamic={dynamic}"
    stats = STATS.setdefault(key, {"examples": 0, "calls": 0, "captured": 0, "graphs": 0,
                                   "known": 0})
    stats["examples"] += 1
    done: list[str] = []
    try:
        for what, p in calls:
            if TRACE:
                with open(TRACE, "w") as fh:
                    fh.write(f"# backend {backend} dynamic={dynamic}, {what}\n{prog.describe()}\n")
            expected = run_once(fn, p)
            actual = run_once(compiled, p)
            stats["calls"] += 1
            try:
                compare(expected, actual, p, backend)
            except Mismatch as exc:
                text = f"dynamic={dynamic}, {what.split(' (')[0]}: {exc}"
                for bug in KNOWN_BUGS.values() if known else ():
                    if bug.matches(prog, backend, text):
                        bug.seen += 1
                        stats["known"] += 1
                        return
                history = "".join(f"\n# called before: {d}" for d in done)
                report = (f"backend {backend}, {text}\n--- program ---\n{prog.describe()}"
                          f"\n# this call: {what}{history}")
                if COLLECT and known:
                    with open(COLLECT, "a") as fh:
                        fh.write(json.dumps({"backend": backend, "dynamic": dynamic,
                                             "call": what, "mismatch": str(exc),
                                             "program": prog.describe(),
                                             "before": done}) + "\n")
                    return
                raise Mismatch(report) from None
            done.append(what)
    finally:
        stats["captured"] += bool(be.compiled)
        stats["graphs"] += len(be.compiled)
        dynamo.reset()


# The tests --------------------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_dynamic_differential(backend: str, program_dir) -> None:
    if backend == "c" and shutil.which(os.environ.get("CC") or "gcc") is None:
        pytest.skip("the C backend needs a C compiler")

    @settings(fuzz_settings, max_examples=EAGER_EXAMPLES if backend == "eager" else C_EXAMPLES)
    @given(prog=programs(c_mode=backend != "eager", sizes=True), data=st.data(),
           variant=st.integers(0, 5))
    def fuzz(prog: Program, data: Any, variant: int) -> None:
        plan = data.draw(variants(prog.args), label="variants")
        for dynamic in (True, None):
            check_program(prog, plan, backend, dynamic, str(program_dir), variant)

    fuzz()
    print(f"dynamic fuzz statistics: {STATS}; known bugs seen: "
          f"{ {name: bug.seen for name, bug in KNOWN_BUGS.items()} }")


def test_resized_maps_sizes_consistently() -> None:
    """The variants' recipe: the same map for every argument, 0 and 1 kept, views follow."""
    specs = (ArgSpec("array", shape=(3, 1, 4), values=tuple(range(12))),
             ArgSpec("array", shape=(4,), layout="neg", values=(1, 2, 3, 4)),
             ArgSpec("view", of=0, view="x[0]"), ArgSpec("scalar", value=2),
             ArgSpec("array", shape=(0, 3), layout="T"))
    out = resized(specs, {3: 5, 4: 2}, {3: 7}, layouts={1: "F"})
    args, _ = make_args(out)
    assert [np.shape(a) for a in args] == [(5, 1, 2), (2,), (1, 2), (), (0, 5)]
    assert args[0].ravel().tolist() == list(range(10)) and args[3] == 7
    assert out[1].layout == "F" and out[4].layout == "T"
    args, _ = make_args(resized(specs, {}, None, dims={(0, 0): 6, (1, 0): 3}))
    assert [np.shape(a) for a in args] == [(6, 1, 4), (3,), (1, 4), (), (0, 3)]
    assert arg_sizes(specs) == [3, 4]
