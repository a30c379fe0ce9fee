"""The npdynamo demo: ``python benchmarks/demo.py`` (see README).

Compiles real NumPy code and prints what the compiler did: the captured graph, its guards, the
transformed bytecode, a recompile with its reason, a frame that could not be captured with the
reason at its file:line, and timings against plain NumPy (eager backend, and the C backend when
a C compiler is available).
"""

from __future__ import annotations

import timeit
import textwrap
import os
import tempfile
import warnings

import numpy as np

import dynamo


def layer_norm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def softmax_rows(x):
    shifted = x - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def scale(v, factor=2.0):
    return np.tanh(v) * factor


def noisy_step(x):
    y = scale(x)  # a helper: inlined into this graph
    print(f"  (noisy_step prints: the graph breaks here; mean={float(y.mean()):.3f})")
    return y + 1  # ...and capture resumes in a generated resume function


def branchy(x, y):
    if x.sum() > y.sum():  # a branch on array data: one graph per branch
        loss = np.cos(np.cos(x))
    else:
        loss = np.cos(np.cos(y))
    return loss


def smooth(v):
    n = v.shape[0]
    return (v[1:] + v[:-1]) * 0.5 - v.sum() / n


def _all_graphs(fn) -> list:
    """Graphs cached for `fn` and for the resume functions its compiled code calls."""
    graphs, codes, seen = [], [fn.__code__], set()
    while codes:
        code = codes.pop()
        if code in seen:
            continue
        seen.add(code)
        for entry in dynamo.cache_entries(code):
            if entry.graph_code:
                graphs.append(entry.graph_code)
            codes += [c for c in entry.code.co_consts if hasattr(c, "co_code")]
    return graphs


def banner(title: str) -> None:
    print(f"\n{'=' * 78}\n{title}\n{'=' * 78}")


def timed(fns, *args, number: int = 10, rounds: int = 5) -> list[float]:
    """Best time per call of each function, measured in interleaved rounds after a warm-up, so
    no variant is favoured by running later (glibc's malloc starts reusing freed big blocks
    instead of fresh, page-faulting memory after the first frees)."""
    for fn in fns:
        fn(*args)
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(lambda: fn(*args), number=number) / number)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512))
    gamma, beta = rng.standard_normal(512), rng.standard_normal(512)

    banner("1. Capture: dynamo.compile(layer_norm)")
    compiled = dynamo.compile(layer_norm)
    result = compiled(x, gamma, beta)
    assert np.array_equal(result, layer_norm(x, gamma, beta))
    (entry,) = dynamo.cache_entries(layer_norm)
    print("Captured graph (generated Python, each line tagged with the user's file:line):\n")
    print(entry.graph_code)
    print("Guards (when they hold, the cached code runs without re-tracing):\n")
    print(entry.guards)
    print("\nOriginal vs transformed bytecode:\n")
    print(entry.bytecode)

    banner("2. Recompile: a float32 input fails the dtype guard")
    dynamo.set_logs("recompiles")
    compiled(x.astype(np.float32), gamma.astype(np.float32), beta.astype(np.float32))
    dynamo.set_logs()
    print(f"compiled versions of layer_norm now cached: {len(dynamo.cache_entries(layer_norm))}")

    banner("3. Graph breaks: what could not be captured, why, and what was captured around it")
    out = dynamo.explain(noisy_step)(x[:2, :4])
    print(out)
    print("\nA data-dependent branch: the condition is one graph, each branch another.")
    a, b = x[:2, :4], -x[:2, :4]
    compiled_branchy = dynamo.compile(branchy)
    for args in ((a, b), (b, a)):
        assert np.array_equal(compiled_branchy(*args), branchy(*args))
    print(f"graphs for branchy after both branches ran: {len(_all_graphs(branchy))}")

    banner("4. Dynamic shapes: a size that changed becomes symbolic")
    counted = []

    def counting(gm, example_inputs):
        counted.append(gm)
        return gm.forward

    compiled_smooth = dynamo.compile(smooth, backend=counting)
    for n in range(2, 22):
        v = rng.standard_normal(n)
        assert np.array_equal(compiled_smooth(v), smooth(v))
    print(f"smooth called with 20 lengths: {len(counted)} compiled versions")
    print("the symbolic version's graph (the length is read when it runs) and guards:\n")
    print(textwrap.indent(counted[-1].code.strip(), "    "))
    print(textwrap.indent(dynamo.cache_entries(smooth)[0].guards, "    "))

    banner("5. Speed against plain NumPy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backends = ["eager"]
        try:
            dynamo.lookup_backend("c")
            backends.append("c")
        except Exception as exc:  # the C backend needs gcc; the demo still runs without it
            print(f"(C backend unavailable: {exc})")
        big = rng.standard_normal((2048, 1024))
        small = rng.standard_normal((4, 8))
        print(f"{'function':<14}{'input':<14}{'numpy':>12}" + "".join(f"{b:>16}" for b in backends))
        for name, fn, args in (
            ("softmax_rows", softmax_rows, (big,)),
            ("layer_norm", layer_norm, (big, rng.standard_normal(1024), rng.standard_normal(1024))),
            ("softmax_rows", softmax_rows, (small,)),
        ):
            compiled = [dynamo.compile(fn, backend=backend) for backend in backends]
            for cf in compiled:
                np.testing.assert_allclose(cf(*args), fn(*args), rtol=1e-12, atol=1e-12)
            base, *times = timed([fn, *compiled], *args)
            row = f"{name:<14}{str(args[0].shape):<14}{base * 1e6:>10.1f}us"
            for t in times:
                row += f"{t * 1e6:>10.1f}us {base / t:4.2f}x"
            print(row)
    print("\nRatios > 1 are faster than NumPy. See benchmarks/ for the full runners.")

    banner("6. The HTML report of everything above")
    path = dynamo.report(os.path.join(tempfile.gettempdir(), "npdynamo_demo_report.html"))
    print(f"every frame, graph (as a picture and as code), guard, graph break and recompile of "
          f"this demo: open {path}")


if __name__ == "__main__":
    main()
