"""Translator features beyond single NumPy calls: inlined comprehensions and generator
expressions, user objects, containers, unpacking, constant control flow, and what stays
uncaptured (with its reason). Uses the eager-vs-compiled oracle `check` from conftest.py."""

import numpy as np
import pytest

import dynamo


def list_comprehension(x):
    return [x * i for i in range(3)]


def dict_comprehension(x):
    return {k: x + k for k in range(2)}


def generator_sum(x):
    return sum(x[i] * i for i in range(x.shape[0]))


def nested_comprehension(x, y):
    return [[a * b for b in (y, y + 1)] for a in (x, x * 2)]


def comprehension_reads_reassigned_local(x):
    scale = 2.0
    scale = scale * 3
    return [x * scale for _ in range(2)]


@pytest.mark.parametrize("fn", [list_comprehension, dict_comprehension, generator_sum,
                                comprehension_reads_reassigned_local], ids=lambda f: f.__name__)
def test_comprehensions_are_inlined_into_one_graph(check, fn):
    check(fn, np.arange(6.0).reshape(3, 2))


def test_nested_comprehensions(check):
    check(nested_comprehension, np.arange(3.0), np.ones(3))


class Layer:
    def __init__(self, w, b, eps=1e-5):
        self.w, self.b, self.eps = w, b, eps

    def forward(self, x):
        return np.maximum(x @ self.w + self.b, self.eps)

    @property
    def scale(self):
        return 2.0

    def scaled(self, x):
        return x * self.scale


class Slotted:
    __slots__ = ("w",)

    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return x * self.w


def test_methods_read_object_attributes_with_guards(check, backend):
    layer = Layer(np.ones((3, 2)), np.zeros(2))
    x = np.arange(6.0).reshape(2, 3)
    check(layer.forward, x)
    cf = dynamo.compile(layer.forward, backend=backend)
    layer.w = np.full((3, 2), 2.0)  # same dtype/shape: no recompile, new value read
    np.testing.assert_array_equal(cf(x), layer.forward(x))
    layer.eps = 7.0  # a Python constant: recompile
    np.testing.assert_array_equal(cf(x), layer.forward(x))
    assert backend.count == 2  # check() compiled once (shared with cf: same code), then eps
    (entry, _) = dynamo.cache_entries(Layer.forward)
    assert "self.w.shape == (3, 2)" in entry.guards and "self.eps == 7.0" in entry.guards


def test_slots_attributes(check):
    check(Slotted(np.float32(3)).apply, np.ones(3, np.float32))


def test_properties_are_not_traced(check):
    # A property runs user code: the graph breaks there, the property runs in plain Python and
    # the multiplication is captured in the resume function, with the same result.
    check(Layer(None, None).scaled, np.ones(2), graphs=1)
    reason = dynamo.explain(Layer(None, None).scaled)(np.ones(2)).break_reasons[0]
    assert "property" in reason


def sequences(x):
    t = (x,) * 2 + (x + 1,)
    items = [x]
    items += [x * 2]
    items *= 2
    first, *middle, last = t
    return t, items, middle, first * last


def test_tuple_and_list_operations(check):
    check(sequences, np.ones(2))


def branches_on_constants(x, mode="sum", axis=None):
    if x.ndim == 1 and axis is None:
        axis = 0
    if mode == "sum":
        out = x.sum(axis=axis)
    elif mode == "max":
        out = x.max(axis=axis)
    else:
        out = x
    for _ in range(2 if x.dtype == np.float64 else 3):
        out = out * 2
    return out


@pytest.mark.parametrize("mode", ["sum", "max", "other"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_branches_and_loops_on_constants_are_followed(check, mode, dtype):
    check(branches_on_constants, np.arange(6, dtype=dtype).reshape(2, 3), mode)
    check(branches_on_constants, np.arange(3, dtype=dtype), mode)


def kwargs_reader(x, **options):
    out = x * options["scale"]
    if "shift" in options:
        out = out + options.get("shift", 0)
    return out, sorted(options.keys())


def test_kwargs_dicts(check):
    check(kwargs_reader, np.ones(3), scale=2)
    check(kwargs_reader, np.ones(3), scale=2, shift=1)


def data_dependent(x):
    if x.sum() > 0:
        return x
    return -x


def test_data_dependent_branch_reports_reason_and_location():
    out = dynamo.explain(data_dependent)(np.ones(2))
    assert out.graph_count == 1  # the condition; the branch taken returns x (no operations)
    (reason,) = out.break_reasons
    assert "data-dependent" in reason and "test_translator.py:" in reason and "if x.sum() > 0" in reason


def lambda_inside(x):
    f = lambda v: v + 1  # noqa: E731
    return f(x)


def test_lambdas_made_in_the_frame_are_inlined(check):
    check(lambda_inside, np.ones(2), graphs=1)
    out = dynamo.explain(lambda_inside)(np.ones(2))
    assert out.graph_count == 1 and out.graph_break_count == 0 and not out.skipped_frames


def ufunc_methods(x):
    return np.add.reduce(x, axis=0), np.multiply.outer(x[0], x[1]), np.maximum.accumulate(x, axis=1)


def test_ufunc_methods(check):
    check(ufunc_methods, np.arange(6.0).reshape(2, 3))


def least_squares_step(a, b):
    x = np.linalg.solve(a.T @ a + 1e-3 * np.eye(a.shape[1]), a.T @ b)
    return x, np.linalg.norm(a @ x - b), np.linalg.det(a.T @ a)


def test_linear_algebra_is_captured(check):
    rng = np.random.default_rng(3)
    check(least_squares_step, rng.standard_normal((6, 3)), rng.standard_normal(6))


def test_singular_matrix_raises_like_numpy_from_the_graph():
    cf = dynamo.compile(lambda a: np.linalg.inv(a) * 2)
    cf(np.eye(2))  # compiled
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        cf(np.zeros((2, 2)))


def normalize(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


def test_graph_code_reads_like_the_source(check):
    check(normalize, np.arange(6.0).reshape(2, 3))
    code = dynamo.cache_entries(normalize)[0].graph_code
    assert "    mean = x.mean(axis=-1, keepdims=True)\n" in code
    assert "    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)\n" in code
    assert "(x - mean) / numpy.sqrt(var + 1e-05)" in code


def reads_item(x):
    return x.sum().item() + 1


def test_methods_that_need_data_say_why():
    (reason,) = dynamo.explain(reads_item)(np.ones(3)).break_reasons
    assert "ndarray.item()" in reason and "depends on the data" in reason
