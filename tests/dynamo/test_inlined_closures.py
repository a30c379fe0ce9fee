"""Functions made while inlining a callee get the callee's module, as in Python.

In: functions that call a function of another module (`support.function_makers`, whose globals
have ``anp`` and ``SCALE``, which this module lacks) that makes a lambda, a nested ``def`` with
defaults, keyword defaults, annotations and closure cells, a comprehension or a generator
expression; the made function is called in the trace, returned, stored into a list or an
attribute, or alive across a graph break. Out: the made function has plain Python's
``__globals__``, ``__builtins__``, ``__module__``, qualified name, defaults, annotations and
cells (shared as Python shares them), and calling it gives plain Python's result. A function
made by an inlined callee used to be made by the compiled frame's MAKE_FUNCTION, with the
frame's globals (NameError: name 'anp' is not defined; found in autograd's test suite), and
read the caller's globals when called inside the trace.
"""

from __future__ import annotations

import sys
import types

import numpy as np

import dynamo
from dynamo import graph_break
from dynamo.debug import cache_entries
from support import function_makers as makers
from support.oracle import assert_same

#: (read only by functions of this module called from `makers.apply`)
ROOT_ONLY = 0.25


def portrait(fn):
    """What Python decides about a function object, in comparable form."""
    assert type(fn) is types.FunctionType
    closure = [cell.cell_contents for cell in fn.__closure__ or ()]
    return {"globals": fn.__globals__ is vars(makers), "builtins": fn.__builtins__ is
            makers.__builtins__ or fn.__builtins__ is vars(makers.__builtins__),
            "module": fn.__module__, "name": fn.__name__, "qualname": fn.__qualname__,
            "defaults": fn.__defaults__, "kwdefaults": fn.__kwdefaults__,
            "annotations": fn.__annotations__, "closure": closure, "doc": fn.__doc__}


def compare(fn, *args, use, graphs=1):
    """`use(fn(*args))` of plain and compiled `fn` (called twice: compile, then cache hit), and
    the number of graphs captured (one: the whole frame, with no graph break; None: any)."""
    expected = use(fn(*args))
    counts = []

    def backend(gm, example_inputs):
        counts.append(gm)
        return gm.forward

    compiled = dynamo.compile(fn, backend=backend, fullgraph=graphs == 1)
    for attempt in ("first call", "second call"):
        assert_same(expected, use(compiled(*args)), attempt)
    if graphs is not None:
        assert len(counts) == graphs
        assert len(cache_entries(fn)) == 1  # (`fn` itself compiled, once, with no fallback)
    return expected


def test_a_returned_lambda_reads_its_own_modules_globals():
    def f(x):
        y = x * 2
        return makers.make_lambda(y, x)

    expected = compare(f, np.ones(2), use=lambda g: (portrait(g), g(np.arange(3.0) + 1j)))
    assert expected[0]["globals"] and expected[0]["module"] == makers.__name__


def test_a_lambda_called_in_the_trace_reads_its_own_modules_globals():
    def f(x):
        return makers.make_lambda(x, x)(x) + 1

    compare(f, np.arange(3.0), use=lambda r: r)


def test_a_nested_def_keeps_defaults_kwdefaults_annotations_and_closure():
    def returned(x):
        return makers.make_nested(np.cos(x))

    compare(returned, np.arange(3.0), use=lambda g: (portrait(g), g(np.ones(3))))

    def called(x):
        return makers.make_nested(np.cos(x), 0.5)(x, kw=2.0)

    compare(called, np.arange(3.0), use=lambda r: r)


def test_functions_made_in_one_call_share_its_cells():
    def f(x):
        return makers.make_pair(), x + 1

    def use(result):
        (get, add), y = result
        shared = get.__closure__[0] is add.__closure__[0]
        return portrait(get), portrait(add), shared, add(y)

    assert compare(f, np.arange(3.0), use=use)[2]


def test_lambdas_made_in_a_comprehension_of_another_module():
    def f(x):
        return makers.make_in_comprehension(), x * 2

    def use(result):
        fns, y = result
        return [portrait(g) for g in fns], [g(y) for g in fns]

    # (3.12+ inlines the comprehension into the function (PEP 709) and gives ``i`` a new cell
    # in the middle of the frame, which is not traced: the call runs in plain Python)
    compare(f, np.arange(3.0), use=use, graphs=1 if sys.version_info < (3, 12) else None)


def test_a_generator_expression_of_another_module_escapes():
    def f(x):
        return makers.make_generator(np.exp(x))

    compare(f, np.arange(3.0), use=lambda gen: (gen.gi_code.co_name, list(gen)))


class Box:
    pass


def test_a_lambda_stored_into_a_list_or_an_attribute():
    def into_list(x):
        out = []
        makers.store_in_list(out, x * 3)
        return out

    compare(into_list, np.arange(3.0), use=lambda out: [(portrait(g), g(np.ones(3))) for g in out])

    def onto_attribute(obj, x):
        makers.store_on_attribute(obj, x + 1)
        return obj

    def use(obj):
        fn = vars(obj).pop("fn")  # (the next call sets it again: no old value to replace)
        return portrait(fn), fn(np.ones(3))

    compare(onto_attribute, Box(), np.arange(3.0), use=use)


def test_a_made_function_alive_across_a_graph_break():
    def f(x):
        g = makers.make_nested(np.sin(x))
        h = makers.make_lambda(x, x)
        graph_break()
        return g(x) + h(x), g, h

    compare(f, np.arange(3.0), use=lambda r: (r[0], portrait(r[1]), portrait(r[2])), graphs=2)


def reads_root_only(v):
    return np.sin(v) + ROOT_ONLY


def test_this_modules_functions_called_by_another_modules_read_their_own_globals():
    def passes_a_function(x):
        return makers.apply(reads_root_only, x)

    def passes_a_lambda(x):
        return makers.apply(lambda v: np.cos(v) * ROOT_ONLY, x)

    compare(passes_a_function, np.arange(3.0), use=lambda r: r)
    compare(passes_a_lambda, np.arange(3.0), use=lambda r: r)
