"""A corpus of small, everyday NumPy programs (what a scientist or ML user writes first).

In: nothing. Out: `PROGRAMS`, a list of `Program` (a plain Python function, one or more argument
cases with realistic inputs, flags). `test_corpus.py` checks every program against plain NumPy on
the eager and C backends; `report.py` prints how much of the corpus npdynamo captures (graphs,
breaks, break reasons). The programs mix graph-breaking features on purpose: prints, data-
dependent branches, asserts, helpers, methods, closures, decorators, recursion, loops, containers,
random generators, try/except, `with np.errstate`, side effects on arguments and globals.

Each program is plain NumPy: it must run without warnings in eager mode (the oracle turns
warnings into errors), and be deterministic (random generators are seeded inside).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# The registry ---------------------------------------------------------------------------------


@dataclass
class Case:
    """One call: positional and keyword arguments and a short id for the test name."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    id: str = ""


@dataclass
class Program:
    name: str
    fn: Callable
    cases: list[Case]
    #: Pinned graph count of the first compiled call (None: not pinned).
    graphs: int | None = None
    #: Warns on purpose: warnings are recorded and compared instead of raised.
    warns: bool = False


PROGRAMS: list[Program] = []


def program(*cases: Any, graphs: int | None = None, warns: bool = False):
    """Register the decorated function with its argument cases (tuples or `Case`)."""

    def register(fn: Callable) -> Callable:
        made = []
        for i, case in enumerate(cases):
            if not isinstance(case, Case):
                case = Case(tuple(case))
            made.append(Case(case.args, case.kwargs, case.id or _case_id(case.args, i)))
        PROGRAMS.append(Program(fn.__name__, fn, made, graphs, warns))
        return fn

    return register


def _case_id(args: tuple, index: int) -> str:
    arrays = [a.make(a.base) if isinstance(a, View) else a for a in args]
    arrays = [a for a in arrays if isinstance(a, np.ndarray)]
    if arrays:
        return f"{index}-{arrays[0].dtype}"
    return str(index)


class View:
    """An argument that is a view (strided, offset, transposed) of a fresh copy of `base`:
    deep copies are contiguous, so the oracle builds the view anew for every call."""

    def __init__(self, base: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> None:
        self.base = base
        self.make = make


def more_cases(name: str, *cases: Any) -> None:
    """Add argument cases to an already registered program (other layouts, keyword arguments),
    after the fact so the inputs of the programs registered before stay the same."""
    prog = next(p for p in PROGRAMS if p.name == name)
    for case in cases:
        if not isinstance(case, Case):
            case = Case(tuple(case))
        index = len(prog.cases)
        prog.cases.append(Case(case.args, case.kwargs, case.id or _case_id(case.args, index)))


# Deterministic inputs --------------------------------------------------------------------------

_rng = np.random.default_rng(20240611)


def normal(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    return _rng.standard_normal(shape).astype(dtype)


def uniform(*shape: int, low: float = 0.0, high: float = 1.0,
            dtype: Any = np.float64) -> np.ndarray:
    return _rng.uniform(low, high, shape).astype(dtype)


def integers(low: int, high: int, *shape: int, dtype: Any = np.int64) -> np.ndarray:
    return _rng.integers(low, high, shape).astype(dtype)


# 1. Normalisation and activations --------------------------------------------------------------


@program((normal(6, 4),), (normal(5, 3, dtype=np.float32),), graphs=1)
def zscore(x):
    mu = x.mean(axis=0, keepdims=True)
    sd = x.std(axis=0, keepdims=True)
    return (x - mu) / (sd + 1e-8)


@program((uniform(10, low=-3, high=5),), (integers(0, 255, 4, 4, dtype=np.uint8),), graphs=1)
def minmax_scale(x):
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo)


@program((normal(4, 5),), (normal(3, 7, dtype=np.float32),), graphs=1)
def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


@program((normal(4, 6),), (normal(2, 9, dtype=np.float32),), graphs=1)
def log_softmax(logits):
    m = np.max(logits, axis=1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True))
    return logits - lse


@program((normal(3, 8), np.ones(8), np.zeros(8)),
         (normal(2, 4, dtype=np.float32), np.full(4, 2.0, np.float32), np.full(4, 0.5, np.float32)),
         graphs=1)
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta


@program((normal(5, 3),), (normal(4, 4, dtype=np.float32),), graphs=1)
def l2_normalize_rows(x):
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def relu(x):
    return np.maximum(x, 0)


def leaky_relu(x, slope=0.01):
    return np.where(x > 0, x, slope * x)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


@program((normal(10),), (normal(3, 3, dtype=np.float32),), graphs=1)
def activations(x):
    return relu(x), leaky_relu(x), leaky_relu(x, slope=0.2), gelu(x)


@program((normal(12) * 30,), (normal(6, dtype=np.float32) * 10,), graphs=1)
def stable_sigmoid(z):
    pos = z >= 0
    ez = np.exp(-np.abs(z))
    return np.where(pos, 1.0 / (1.0 + ez), ez / (1.0 + ez))


@program((normal(6, 3), {"mean": normal(3), "var": uniform(3, low=0.5, high=2), "eps": 1e-5,
                         "gamma": np.ones(3), "beta": np.zeros(3)}), graphs=1)
def batchnorm_inference(x, params):
    xhat = (x - params["mean"]) / np.sqrt(params["var"] + params["eps"])
    return params["gamma"] * xhat + params["beta"]


# 2. Small networks: helpers, methods, classes, dataclasses -------------------------------------


def dense(x, W, b):
    return x @ W + b


@program((normal(4, 3), normal(3, 5), normal(5), normal(5, 2), normal(2)),
         (normal(2, 3, dtype=np.float32), normal(3, 5, dtype=np.float32),
          normal(5, dtype=np.float32), normal(5, 2, dtype=np.float32),
          normal(2, dtype=np.float32)), graphs=1)
def mlp_forward(x, W1, b1, W2, b2):
    h = relu(dense(x, W1, b1))
    return dense(h, W2, b2)


class Linear:
    def __init__(self, W, b):
        self.W = W
        self.b = b

    def __call__(self, x):
        return x @ self.W + self.b

    def n_params(self):
        return self.W.size + self.b.size


@program((Linear(normal(3, 4), normal(4)), normal(5, 3)), graphs=1)
def linear_layer_method(layer, x):
    y = layer(x)
    return y, layer.n_params()


class MLP:
    def __init__(self, sizes, seed=0):
        rng = np.random.default_rng(seed)
        self.layers = [Linear(rng.standard_normal((m, n)) / np.sqrt(m), np.zeros(n))
                       for m, n in zip(sizes[:-1], sizes[1:])]

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = np.tanh(layer(x))
        return self.layers[-1](x)


@program((MLP([4, 8, 8, 2]), normal(3, 4)))
def mlp_class_forward(model, x):
    return model.forward(x)


@dataclass
class TrainConfig:
    lr: float = 0.1
    weight_decay: float = 0.01
    clip: float = 1.0


@program((TrainConfig(), normal(5), normal(5)),
         (TrainConfig(lr=0.5, clip=0.3), normal(4), normal(4)),
         graphs=1)
def sgd_step_dataclass(cfg, w, grad):
    g = np.clip(grad + cfg.weight_decay * w, -cfg.clip, cfg.clip)
    return w - cfg.lr * g


@program((normal(6, 4), normal(4, 4) * 0.5), graphs=1)
def residual_block(x, W):
    act = lambda t: np.tanh(t)  # noqa: E731
    def block(h):
        return act(h @ W)
    return x + block(x)


@program((normal(3, 4), normal(5, 4), normal(5, 2)),
         (normal(2, 8, dtype=np.float32), normal(3, 8, dtype=np.float32),
          normal(3, 3, dtype=np.float32)), graphs=1)
def attention(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    weights = softmax(scores)
    return weights @ v


# 3. Losses and metrics, with progress prints ----------------------------------------------------


@program((normal(8), normal(8)), (normal(3, 3, dtype=np.float32), normal(3, 3, dtype=np.float32)))
def mse_with_print(pred, target):
    loss = np.mean((pred - target) ** 2)
    print(f"mse over {pred.size} values: {loss:.6f}")
    return loss


@program((normal(5, 3), np.array([0, 2, 1, 1, 0])), graphs=1)
def cross_entropy(logits, labels):
    logp = log_softmax(logits)
    return -logp[np.arange(len(labels)), labels].mean()


@program((uniform(10), (uniform(10) > 0.5).astype(np.float64)), graphs=1)
def binary_cross_entropy(p, y, eps=1e-7):
    p = np.clip(p, eps, 1 - eps)
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


@program((normal(10) * 2, normal(10)),
         (normal(6, dtype=np.float32) * 3, normal(6, dtype=np.float32)),
         graphs=1)
def huber_loss(pred, target, delta=1.0):
    r = np.abs(pred - target)
    quad = 0.5 * r ** 2
    lin = delta * (r - 0.5 * delta)
    return np.where(r <= delta, quad, lin).mean()


@program((normal(8), np.where(normal(8) > 0, 1.0, -1.0)), graphs=1)
def hinge_loss(scores, y):
    return np.maximum(0.0, 1.0 - y * scores).sum() / len(scores)


@program((normal(6, 4), integers(0, 4, 6)), graphs=1)
def accuracy(logits, labels):
    pred = np.argmax(logits, axis=1)
    return (pred == labels).mean()


@program((normal(7), normal(7)))
def report_metrics(pred, target):
    err = pred - target
    mae = np.abs(err).mean()
    rmse = np.sqrt((err ** 2).mean())
    print("MAE", round(float(mae), 4), "RMSE", round(float(rmse), 4))
    return {"mae": mae, "rmse": rmse}


# 4. Data-dependent control flow, asserts, early returns ----------------------------------------


@program((normal(5), normal(5) * 1e-6), (normal(5), normal(5)))
def correct_if_large_error(x, err):
    tol = 1e-3
    if np.abs(err).max() > tol:
        return x - err
    return x


@program((normal(4, 3),), (np.array([1.0, np.nan, 2.0]),))
def assert_finite(x):
    assert np.all(np.isfinite(x)), "input has NaN or inf"
    return x * 2 - 1


@program((np.zeros(0),), (normal(5),), (normal(2, 2, dtype=np.float32),))
def early_return_on_empty(x):
    if x.size == 0:
        return 0.0
    return float(np.sum(x ** 2))


@program((normal(6) * 5,), (normal(6) * 0.01,))
def clip_grad_norm(grad, max_norm=1.0):
    norm = np.linalg.norm(grad)
    if norm > max_norm:
        grad = grad * (max_norm / norm)
    return grad, norm


@program((normal(5), np.array([1.0, 0.0, 2.0, 0.0, 4.0])), graphs=1)
def safe_divide(a, b):
    nonzero = b != 0
    return np.where(nonzero, a / np.where(nonzero, b, 1.0), 0.0)


@program((uniform(5, low=0.1, high=2),), (np.array([1.0, -2.0, 3.0]),))
def validate_positive(x):
    if np.any(x <= 0):
        raise ValueError(f"expected positive values, got min {x.min()}")
    return np.log(x)


@program((uniform(6),), (uniform(6, low=-1, high=2),))
def check_probabilities(p):
    if p.min() >= 0 and p.max() <= 1:
        return p / p.sum()
    return np.clip(p, 0, 1)


@program((normal(8),), (np.abs(normal(8)) + 1,))
def sign_dependent_path(x):
    neg = x < 0
    if not neg.any():
        return np.sqrt(x)
    x = x.copy()
    x[neg] = 0
    return np.sqrt(x)


# 5. Statistics ---------------------------------------------------------------------------------


@program((normal(21),), (integers(0, 100, 12),), (normal(15, dtype=np.float32),), graphs=1)
def robust_stats(x):
    med = np.median(x)
    q1, q3 = np.percentile(x, [25, 75])
    return med, q3 - q1


@program((normal(50),), (integers(0, 10, 30),))
def histogram_summary(x):
    counts, edges = np.histogram(x, bins=5)
    centers = (edges[:-1] + edges[1:]) / 2
    return counts, centers, counts.argmax()


@program((normal(20, 3),), (normal(10, 4, dtype=np.float32),))
def covariance_and_correlation(x):
    c = np.cov(x, rowvar=False)
    d = np.sqrt(np.diag(c))
    return c, c / np.outer(d, d)


@program((normal(30),), (normal(4, 5, dtype=np.float32),))
def outlier_fraction(x, k=1.5):
    z = (x - x.mean()) / x.std()
    n_out = np.count_nonzero(np.abs(z) > k)
    return n_out, n_out / x.size


@program((normal(6), uniform(6)), (integers(0, 9, 5), integers(1, 4, 5)), graphs=1)
def weighted_mean(x, w):
    return np.average(x, weights=w), (x * w).sum() / w.sum()


@program((normal(12),), (normal(9, dtype=np.float32),), graphs=1)
def moving_average(x, k=3):
    return np.convolve(x, np.ones(k) / k, mode="valid")


@program((normal(10),), (integers(-5, 5, 8),), graphs=1)
def running_extremes(x):
    return np.maximum.accumulate(x), np.minimum.accumulate(x), np.cumsum(x)


@program((normal(25),), (normal(16, dtype=np.float32),))
def remove_outliers(x):
    z = (x - x.mean()) / x.std()
    kept = x[np.abs(z) < 1.5]
    return kept, kept.mean()


@program((integers(0, 5, 20),), (integers(0, 3, 9, dtype=np.int32),))
def value_counts(labels):
    counts = np.bincount(labels)
    return counts, counts / counts.sum(), int(counts.argmax())


@program((normal(9),), (normal(3, 4, dtype=np.float32),), graphs=1)
def describe(x):
    return {"min": x.min(), "max": x.max(), "mean": x.mean(), "std": x.std(ddof=1),
            "ptp": np.ptp(x)}


# 6. Broadcasting tricks ------------------------------------------------------------------------


@program((normal(4, 3), normal(5, 3)),
         (normal(3, 2, dtype=np.float32), normal(2, 2, dtype=np.float32)),
         graphs=1)
def pairwise_sq_distances(a, b):
    diff = a[:, None, :] - b[None, :, :]
    return (diff ** 2).sum(axis=-1)


@program((normal(4), normal(3)), (integers(0, 5, 3), integers(0, 5, 4)), graphs=1)
def outer_table(a, b):
    return a[:, None] * b[None, :], np.add.outer(a, b)


@program((normal(10, 2), normal(3, 2)),
         (normal(8, 3, dtype=np.float32), normal(2, 3, dtype=np.float32)),
         graphs=1)
def kmeans_assign(points, centroids):
    d = ((points[:, None, :] - centroids[None]) ** 2).sum(-1)
    return d.argmin(axis=1), d.min(axis=1).sum()


@program((normal(12, 2), normal(3, 2)))
def kmeans_step(points, centroids):
    labels = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(1)
    new = centroids.copy()
    for k in range(3):
        members = points[labels == k]
        if len(members) > 0:
            new[k] = members.mean(axis=0)
    return new, labels


@program((normal(5, 2), normal(4, 2)), graphs=1)
def rbf_kernel(a, b, gamma=0.5):
    sq = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T
    return np.exp(-gamma * np.maximum(sq, 0))


@program((integers(0, 255, 4, 5, 3, dtype=np.uint8),), graphs=1)
def image_channel_normalize(img):
    x = img.astype(np.float32) / 255.0
    mean = x.mean(axis=(0, 1))
    std = x.std(axis=(0, 1))
    return (x - mean) / (std + 1e-6)


# 7. Stencils with slicing ----------------------------------------------------------------------


@program((normal(10),), (normal(7, dtype=np.float32),), graphs=1)
def laplacian_1d(u, dx=0.1):
    return (u[:-2] - 2 * u[1:-1] + u[2:]) / dx ** 2


@program((normal(6, 5),), (normal(4, 4, dtype=np.float32),), graphs=1)
def five_point_stencil(g):
    out = np.zeros_like(g)
    out[1:-1, 1:-1] = (g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:]
                       - 4 * g[1:-1, 1:-1])
    return out


@program((np.sin(np.linspace(0, np.pi, 12)),), graphs=1)
def heat_equation_steps(u0, alpha=0.2):
    u = u0.copy()
    for _ in range(3):
        u[1:-1] = u[1:-1] + alpha * (u[:-2] - 2 * u[1:-1] + u[2:])
    return u


@program((np.linspace(0, 1, 11) ** 2,), (np.linspace(0, 2, 5, dtype=np.float32),), graphs=1)
def trapezoid(y, dx=0.1):
    return ((y[1:] + y[:-1]) * dx / 2).sum(), np.diff(y) / dx


@program((normal(8, 8),), graphs=1)
def max_pool_2x2(x):
    h, w = x.shape
    return x.reshape(h // 2, 2, w // 2, 2).max(axis=(1, 3))


# 8. Loops, containers, comprehensions, builtins ------------------------------------------------


@program(([normal(3), normal(4), normal(2, 2)],), graphs=1)
def norms_of_list(arrays):
    total = 0.0
    for a in arrays:
        total = total + np.sqrt((a ** 2).sum())
    return total


@program((normal(2, 3), [normal(3, 4), normal(4, 4), normal(4, 1)]), graphs=1)
def chain_of_weights(x, weights):
    for i, w in enumerate(weights):
        x = x @ w
        if i < len(weights) - 1:
            x = np.maximum(x, 0)
    return x


@program((normal(4, 4),), graphs=1)
def power_iteration_fixed(A):
    A = A @ A.T
    v = np.ones(A.shape[0])
    for _ in range(5):
        v = A @ v
        v = v / np.linalg.norm(v)
    return v, v @ A @ v


@program(([normal(3), normal(3), normal(3)], [normal(3), normal(3), normal(3)]))
def dot_products_zip(xs, ys):
    return [float(np.dot(x, y)) for x, y in zip(xs, ys)]


@program((normal(10),))
def stats_dict_comprehension(x):
    funcs = {"mean": np.mean, "max": np.max, "min": np.min}
    return {name: f(x) for name, f in sorted(funcs.items())}


@program((normal(4, 5),), graphs=1)
def row_sums_listcomp(x):
    sums = [x[i].sum() for i in range(x.shape[0])]
    return np.stack(sums), sum(s for s in sums)


@program(([normal(5), normal(2), normal(3, 3)],), graphs=1)
def sort_arrays_by_size(arrays):
    ordered = sorted(arrays, key=lambda a: a.size)
    return [a.shape for a in ordered], np.concatenate([a.ravel() for a in ordered])


@program((normal(4), normal(5)), (normal(3), normal(3)))
def largest_of_two(a, b):
    return max(a.max(), b.max()), min(a.min(), b.min())


@program((normal(3, 3), normal(3)), (normal(2, 3), normal(4)))
def compatible_shapes(A, x):
    ok = all(s > 0 for s in A.shape) and any(s == x.shape[0] for s in A.shape)
    return (A @ x) if A.shape[1] == x.shape[0] else None, ok


@program((normal(5),), ([1.0, 2.0, 3.0],), ((4, 5),), graphs=None)
def as_float_array(x):
    if isinstance(x, np.ndarray):
        return x.astype(np.float64)
    return np.asarray(x, dtype=np.float64) * 1.0


@program((Linear(normal(2, 2), normal(2)), normal(3, 2)), (MLP([2, 3, 2]), normal(3, 2)),
         graphs=None)
def getattr_dispatch(model, x):
    if hasattr(model, "forward"):
        return model.forward(x)
    fn = getattr(model, "__call__")
    return fn(x)


@program((normal(3, 4),), graphs=1)
def describe_shapes_fstring(x):
    y = x.T @ x
    msg = f"input {x.shape} -> gram {y.shape}, dtype={x.dtype}"
    return y, msg


@program((normal(5),))
def string_methods_on_constants(x):
    name = "Leaky_ReLU"
    key = name.lower().replace("_", "")
    if key.startswith("leaky"):
        return np.where(x > 0, x, 0.1 * x), key.upper()
    return x, key


ACTIVATIONS = {"relu": relu, "tanh": np.tanh, "gelu": gelu}


@program((normal(6), "relu"), (normal(6), "tanh"), (normal(4, dtype=np.float32), "gelu"),
         graphs=1)
def activation_by_name(x, name):
    return ACTIVATIONS[name](x)


@program((normal(4, 3),), graphs=1)
def build_tuple_and_unpack(x):
    parts = tuple(np.split(x, [1, 2], axis=0))
    first, *rest = parts
    return first * 2, len(rest), rest[-1].sum()


@program((normal(8),))
def enumerate_chunks(x):
    out = []
    for i, chunk in enumerate(np.array_split(x, 4)):
        out.append(chunk.sum() * (i + 1))
    return out


# 9. Functions: helpers, recursion, lambdas, closures, decorators, forwarding --------------------


def _center(x):
    return x - x.mean()


def _scale(x):
    return _center(x) / (np.abs(_center(x)).max() + 1e-12)


def _preprocess(x):
    return np.clip(_scale(x), -0.9, 0.9)


@program((normal(7),), (normal(3, 3, dtype=np.float32),), graphs=1)
def helpers_calling_helpers(x):
    return _preprocess(x) * 10


def tree_sum(x):
    if x.shape[0] <= 2:
        return x.sum()
    mid = x.shape[0] // 2
    return tree_sum(x[:mid]) + tree_sum(x[mid:])


@program((normal(8),), (integers(0, 9, 6),), graphs=1)
def recursive_pairwise_sum(x):
    return tree_sum(x)


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


@program((normal(5),), graphs=1)
def taylor_exp(x, terms=6):
    return sum(x ** k / factorial(k) for k in range(terms))


@program((normal(6),), graphs=1)
def lambdas(x):
    square = lambda t: t * t  # noqa: E731
    affine = lambda t, a=2.0, b=1.0: a * t + b  # noqa: E731
    return affine(square(x)), list(map(lambda v: v + 1, [1, 2, 3]))


def make_scaler(scale, shift=0.0):
    def apply(x):
        return x * scale + shift
    return apply


@program((normal(5),), graphs=1)
def closures(x):
    double = make_scaler(2.0)
    standardize = make_scaler(1 / x.shape[0], shift=-1.0)
    return double(x), standardize(x)


def as_float64(fn):
    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        return fn(x.astype(np.float64), *args, **kwargs)
    return wrapper


@as_float64
def _rms(x, axis=None):
    return np.sqrt(np.mean(x ** 2, axis=axis))


@program((normal(4, 3, dtype=np.float32),), (integers(-5, 5, 6, dtype=np.int16),), graphs=1)
def decorated_helper(x):
    return _rms(x), _rms(x.reshape(-1, 1), axis=0)


def _forward_all(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@program((normal(3, 4),), graphs=1)
def args_kwargs_forwarding(x):
    a = _forward_all(np.sum, x, axis=0)
    b = _forward_all(layer_norm, x, np.ones(4), beta=np.zeros(4), eps=1e-3)
    return a, b


def _reduce(x, *, axis=0, keepdims=False, how="mean"):
    op = np.mean if how == "mean" else np.max
    return op(x, axis=axis, keepdims=keepdims)


@program((normal(3, 5),), graphs=1)
def keyword_only_args(x):
    return _reduce(x), _reduce(x, axis=1, keepdims=True), _reduce(x, how="max", axis=None)


@program((normal(4), 2.0), (normal(4), 0.5))
def partial_application(x, p):
    norm_p = functools.partial(np.linalg.norm, ord=p)
    return norm_p(x), norm_p(x * 2)


# 10. Random numbers created inside --------------------------------------------------------------


@program((normal(6),), (normal(2, 3, dtype=np.float32),))
def add_gaussian_noise(x, sigma=0.1):
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, sigma, size=x.shape)
    return x + noise


@program((normal(4, 5),))
def dropout(x, p=0.5):
    rng = np.random.default_rng(42)
    mask = rng.random(x.shape) >= p
    return x * mask / (1 - p)


@program((normal(20),))
def bootstrap_mean(x, n_boot=5):
    rng = np.random.default_rng(7)
    means = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(x), len(x))
        means.append(x[idx].mean())
    return np.array(means).std()


@program((normal(10, 2),))
def shuffle_split(data, frac=0.8):
    rng = np.random.default_rng(3)
    perm = rng.permutation(len(data))
    n_train = int(frac * len(data))
    return data[perm[:n_train]], data[perm[n_train:]]


# 11. Iterative solvers with data-dependent stopping ---------------------------------------------


@program((np.array(2.0),), (np.array(10.0),))
def newton_sqrt(a, tol=1e-12):
    x = a / 2
    while abs(x * x - a) > tol:
        x = x - (x * x - a) / (2 * x)
    return x


@program((np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0])))
def gradient_descent_quadratic(A, b, lr=0.1, tol=1e-8, max_iter=200):
    x = np.zeros_like(b)
    for it in range(max_iter):
        grad = A @ x - b
        if np.linalg.norm(grad) < tol:
            break
        x = x - lr * grad
    return x, it


@program((np.array([1.0, -3.0, 1.0]),))
def bisection_root(coeffs, lo=0.0, hi=1.0, tol=1e-10):
    f = lambda t: np.polyval(coeffs, t)  # noqa: E731
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@program((uniform(3),))
def fixed_point_cosine(x):
    for _ in range(10):
        x = np.cos(x)
    return x


@program((normal(20, 3), normal(20)), (normal(8, 2, dtype=np.float32), normal(8, dtype=np.float32)),
         graphs=1)
def least_squares_normal_eq(X, y):
    Xb = np.hstack([X, np.ones((X.shape[0], 1), dtype=X.dtype)])
    w = np.linalg.solve(Xb.T @ Xb, Xb.T @ y)
    return w, ((Xb @ w - y) ** 2).mean()


@program((np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 2.0])),
         (np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([1.0, 2.0])))
def solve_or_lstsq(A, b):
    try:
        return np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        print("singular matrix, using least squares")
        return np.linalg.lstsq(A, b, rcond=None)[0]


@program((normal(5), np.array([1.0, 0.0, -2.0, 0.0, 3.0])))
def errstate_ratio(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = a / b
    ratio[~np.isfinite(ratio)] = 0.0
    return ratio


@program((uniform(6, low=0.5, high=2),))
def ema_smoothing(x, beta=0.9):
    avg = 0.0
    out = []
    for t, v in enumerate(x):
        avg = beta * avg + (1 - beta) * v
        out.append(avg / (1 - beta ** (t + 1)))
    return np.array(out)


# 12. Side effects: arguments, attributes, globals, nonlocal ------------------------------------


@program((normal(4), []), (normal(2, 2), [0.5]))
def append_to_history(x, history):
    loss = (x ** 2).mean()
    history.append(loss)
    return x * 0.9, len(history)


@program((normal(5), normal(5)), (normal(3, dtype=np.float32), normal(3, dtype=np.float32)),
         graphs=1)
def inplace_update_argument(w, grad, lr=0.1):
    w -= lr * grad
    return (w ** 2).sum()


class Counter:
    def __init__(self):
        self.steps = 0
        self.last_loss = None


@program((Counter(), normal(4)))
def attribute_writes(state, x):
    loss = np.mean(x ** 2)
    state.steps += 1
    state.last_loss = loss
    return loss * state.steps


_LAST = {}


@program((normal(6),))
def global_dict_store(x):
    _LAST["norm"] = np.linalg.norm(x)
    return x / _LAST["norm"]


SCALE = 1.0


@program((normal(3),))
def global_rebinding(x):
    global SCALE
    old = SCALE
    SCALE = float(np.abs(x).max())
    result = x / SCALE
    SCALE = old
    return result


@program((normal(4),), graphs=None)
def nonlocal_counter(x):
    count = 0

    def bump(v):
        nonlocal count
        count += 1
        return v * count

    return bump(x) + bump(x), count


@program((normal(5), {"mean": None}),)
def fill_stats_dict(x, stats):
    stats["mean"] = x.mean()
    stats["std"] = x.std()
    return (x - stats["mean"]) / stats["std"]


# 13. Training loops and everyday scripts -------------------------------------------------------


@program((normal(10, 2), normal(10)), )
def train_linear_regression(X, y, lr=0.1):
    w = np.zeros(X.shape[1])
    for epoch in range(3):
        pred = X @ w
        loss = ((pred - y) ** 2).mean()
        print(f"epoch {epoch}: loss={loss:.4f}")
        w = w - lr * 2 * X.T @ (pred - y) / len(y)
    return w


@program((normal(8, 3), normal(8)), )
def train_until_converged(X, y, lr=0.05, tol=1e-3):
    w = np.zeros(X.shape[1])
    losses = []
    while True:
        r = X @ w - y
        losses.append(float(r @ r / len(y)))
        if len(losses) > 1 and losses[-2] - losses[-1] < tol:
            break
        w -= lr * X.T @ r / len(y)
    return w, len(losses)


@program((normal(10, 3), integers(0, 2, 10).astype(np.float64)))
def logistic_regression_steps(X, y, lr=0.5):
    w = np.zeros(X.shape[1])
    for _ in range(3):
        p = 1 / (1 + np.exp(-(X @ w)))
        w = w + lr * X.T @ (y - p) / len(y)
    return w


@program((integers(0, 4, 6), 4), (integers(0, 3, 5, dtype=np.int32), 3), graphs=1)
def one_hot(labels, n_classes):
    return np.eye(n_classes)[labels]


@program((integers(0, 3, 12), integers(0, 3, 12)),)
def confusion_matrix(y_true, y_pred, k=3):
    cm = np.zeros((k, k), dtype=np.int64)
    for t in range(k):
        for p in range(k):
            cm[t, p] = np.sum((y_true == t) & (y_pred == p))
    return cm


@program((np.array([1.0, -2.0, 0.5]), normal(5)), graphs=1)
def horner(coeffs, x):
    acc = np.zeros_like(x)
    for c in coeffs:
        acc = acc * x + c
    return acc, np.polyval(coeffs, x)


@program((uniform(30, low=90, high=110),))
def returns_and_sharpe(prices):
    r = np.diff(prices) / prices[:-1]
    sharpe = r.mean() / r.std() * np.sqrt(252)
    print(f"sharpe ratio: {sharpe:.3f}")
    return np.log1p(r).sum(), sharpe


@program((normal(3, 3) + 3 * np.eye(3),), graphs=1)
def small_linalg(A):
    return np.linalg.det(A), np.linalg.inv(A) @ A, np.linalg.norm(A, "fro")


@program((normal(10),), (integers(0, 50, 9),), graphs=1)
def top_k(x, k=3):
    idx = np.argsort(x)[-k:][::-1]
    return idx, x[idx], np.sort(x)


@program((normal(3, 2),))
def stack_in_loop(x):
    rows = []
    for i in range(3):
        rows.append(x[i] * (i + 1))
    return np.stack(rows), np.concatenate(rows)


@program((normal(4, 4),), (integers(-3, 3, 3, 3),), graphs=1)
def mask_setitem(x):
    y = x.copy()
    y[y < 0] = 0
    y[np.eye(*y.shape, dtype=bool)] = 1
    return y


@program((normal(6),), (integers(-2, 2, 7),))
def where_one_arg(x):
    (idx,) = np.where(x > 0)
    return idx, x[idx].sum(), np.nonzero(x)[0].size


@program((normal(3, 4),), graphs=1)
def keepdims_reductions(x):
    centered = x - x.mean(axis=1, keepdims=True)
    frac = x / x.sum(axis=0, keepdims=True)
    return centered, frac, np.abs(x).max(axis=(0, 1), keepdims=True)


@program((uniform(40, low=0.5, high=1.5),))
def ema_long_unrolled(x, beta=0.8):
    m = x[0]
    for t in range(1, len(x)):
        m = beta * m + (1 - beta) * x[t]
    return m


@program((normal(5, 3),), graphs=None)
def print_intermediates(x):
    h = x @ x.T
    print("gram diag:", np.round(np.diag(h), 3))
    s = h.sum(axis=1)
    print("row sums shape", s.shape)
    return s / s.max()


@program((normal(6), {"lr": 0.1, "steps": 3, "momentum": 0.9}),
         (normal(6), {"lr": 0.01, "steps": 2, "momentum": 0.0}), graphs=1)
def momentum_sgd_config(w, config):
    v = np.zeros_like(w)
    for _ in range(config["steps"]):
        grad = 2 * w
        v = config["momentum"] * v - config["lr"] * grad
        w = w + v
    return w


@program((normal(4, 6),), graphs=None)
def tuple_results_loop(x):
    results = []
    for axis in (0, 1):
        results.append((x.mean(axis=axis), x.std(axis=axis)))
    means, stds = zip(*results)
    return list(means), list(stds)


@program((normal(5),), (np.array([0.5, 0.5]),))
def assert_shape_and_sum(p):
    assert p.ndim == 1, f"expected a vector, got shape {p.shape}"
    assert abs(p.sum() - 1.0) < 1e-9, "probabilities must sum to 1"
    return -(p * np.log(p)).sum()


@program((normal(6, 2),), graphs=1)
def polar_coordinates(xy):
    r = np.hypot(xy[:, 0], xy[:, 1])
    theta = np.arctan2(xy[:, 1], xy[:, 0])
    return r, np.degrees(theta)


@program((normal(12),), (normal(12, dtype=np.float32),), graphs=1)
def reshape_and_transpose(x):
    m = x.reshape(3, 4)
    return m.T @ m, m.ravel()[::2], np.swapaxes(m[None], 0, 2).shape


@program((integers(0, 100, 10),), (integers(0, 100, 10, dtype=np.int32),), graphs=1)
def integer_arithmetic(x):
    return x // 7, x % 7, (x * 3 + 1) >> 1, np.gcd(x, 12)


# 14. Breaks in the middle of things: live values, inlined frames, views, identities ------------


def _log_shape(name, a):
    print(f"{name}: shape={a.shape} dtype={a.dtype}")
    return a


@program((normal(4, 3),), (normal(2, 5, dtype=np.float32),))
def print_inside_helper(x):
    h = np.tanh(x) * 2
    h = _log_shape("hidden", h)
    return h.sum(axis=0), x.mean()


def _normalize_checked(v, eps=1e-12):
    n = np.linalg.norm(v)
    if n < eps:
        return v
    return v / n


@program((normal(5),), (np.zeros(5),))
def branch_inside_helper(v):
    u = _normalize_checked(v * 3)
    return u, u @ u


@program(([normal(3), normal(3)], {"scale": 2.0}),)
def containers_live_across_break(xs, cfg):
    parts = [a * cfg["scale"] for a in xs]
    table = {"first": parts[0], "n": len(parts)}
    print("built", table["n"], "parts")
    pair = (parts[-1], table["first"])
    return pair[0] + pair[1], table


@program((normal(6),),)
def closure_live_across_break(x):
    offset = x.mean()
    shift = lambda t: t - offset  # noqa: E731
    print("offset computed")
    return shift(x), shift(x[:2])


@program((normal(8),), (integers(0, 9, 6),))
def view_returned_across_break(x):
    evens = x[::2]
    print("n evens", evens.shape[0])
    return evens, x


@program((normal(4),),)
def slice_update_after_break(x):
    y = x.copy()
    print("updating")
    y[:2] += 1
    y[2:] *= -1
    return y


@program((normal(5),), (normal(5) + 10,))
def walrus_and_chained_compare(x):
    if 0 < (m := x.mean()) < 5:
        return x - m
    return x / m


@program((normal(6),), (np.abs(normal(6)),))
def conditional_expression(x):
    y = np.sqrt(x) if (x >= 0).all() else np.sqrt(np.abs(x))
    return y * 2


@program((normal(4), "l2"), (normal(4), "l1"), (normal(4), "max"))
def string_in_list_config(x, kind):
    if kind in ("l1", "manhattan"):
        return np.abs(x).sum()
    if kind in ["l2", "euclid"]:
        return np.sqrt((x * x).sum())
    return np.abs(x).max()


def _check_range(a, lo, hi):
    if a.min() < lo or a.max() > hi:
        raise ValueError(f"values outside [{lo}, {hi}]")
    return a


@program((uniform(5),), (uniform(5, low=-1, high=1),))
def exception_from_helper_after_break(p):
    q = p * 1.0
    print("checking", q.size)
    return _check_range(q, 0.0, 1.0).sum()


@program((normal(3),),)
def star_call_into_breaking_callee(x):
    args = (x, x * 2)
    kwargs = {"sep": ", "}
    def show(*arrays, sep=" "):
        print(sep.join(str(a.shape) for a in arrays))
        return sum(arrays)
    return show(*args, **kwargs)


@program((normal(6),), (normal(6, dtype=np.float32),))
def item_then_python_math(x):
    s = x.sum().item()
    scale = math.exp(-abs(s))
    return x * scale, round(s, 6)


@program((normal(3, 2),),)
def array_repr_in_fstring(x):
    m = x.mean(axis=0)
    msg = f"column means: {np.round(m, 2)}"
    return m, msg


@program((integers(-100, 100, 8, dtype=np.int8),), (integers(0, 200, 8, dtype=np.uint8),), graphs=1)
def small_int_overflow(x):
    return x * 3, x + x, (x // 2).astype(np.int16) * 300


@program((normal(5),),)
def delete_local_then_break(x):
    tmp = x * 2
    y = tmp + 1
    del tmp
    print("deleted tmp")
    return y


@dataclass
class Gaussian:
    mu: np.ndarray
    sigma: float = 1.0

    def logpdf(self, x):
        z = (x - self.mu) / self.sigma
        return -0.5 * z * z - np.log(self.sigma * math.sqrt(2 * math.pi))

    def describe(self):
        print(f"Gaussian(mu shape {self.mu.shape}, sigma={self.sigma})")
        return self.sigma


@program((Gaussian(normal(3), 2.0), normal(3)))
def dataclass_methods_with_print(dist, x):
    lp = dist.logpdf(x)
    s = dist.describe()
    return lp.sum() * s


@program((normal(4, 4),), (normal(3, 3, dtype=np.float32),))
def returns_argument_itself(x):
    if x.shape[0] != x.shape[1]:
        return x
    print("square input")
    return x


@program((normal(6),),)
def nested_helpers_with_kwargs_and_break(x):
    def inner(v, *, power=2, verbose=False):
        r = v ** power
        if verbose:
            print("inner", r.shape)
        return r
    def outer(v, **kw):
        return inner(v, **kw) + 1
    return outer(x), outer(x, power=3, verbose=True)


@program((normal(5),), (np.array([1.0, np.inf, 2.0]),))
def isfinite_guard_then_reduce(x):
    finite = np.isfinite(x)
    if not finite.all():
        print("dropping", int((~finite).sum()), "non-finite values")
        x = x[finite]
    return x.mean(), x.shape


@program((normal(4),),)
def generator_with_print(x):
    def chunks():
        for i in range(2):
            print("chunk", i)
            yield x[i * 2:(i + 1) * 2]
    return [c.sum() for c in chunks()]


@program((normal(3, 3),), graphs=None)
def sum_of_list_of_arrays_builtin(x):
    rows = [x[0], x[1], x[2]]
    return sum(rows), max(len(r) for r in rows), any(r.shape == (3,) for r in rows)


@program((normal(10), 3),)
def global_function_table_and_argmax(x, k):
    order = np.argsort(-x)
    best = [int(i) for i in order[:k]]
    return best, x[best]


@program((normal(5, 3),), (normal(4, 2, dtype=np.float32),), graphs=1)
def standardize_columns_inplace(x):
    x = x.copy()
    x -= x.mean(axis=0)
    x /= x.std(axis=0)
    return x


@program((normal(3, 4),),)
def mixed_python_and_numpy_scalars(x):
    total = 0.0
    for v in x.sum(axis=1):
        total += float(v)
    count = x.shape[0] * x.shape[1]
    return total / count, np.float64(total) / count


# 15. Breaks deep inside expressions and inlined frames -----------------------------------------


def _noisy_square(v):
    print("squaring", v.shape)
    return v * v


@program((normal(4),), (normal(2, 2, dtype=np.float32),))
def break_inside_expression(x):
    return x + 2 * _noisy_square(x - 1) - x.mean()


@program((normal(5),),)
def two_breaking_calls_in_one_expression(x):
    return _noisy_square(x) + _noisy_square(x + 1)


def _level3(v):
    if v.sum() > 0:
        return v * 2
    return -v


def _level2(v, scale):
    w = v * scale
    return _level3(w) + w


def _level1(v):
    base = v + 1
    return _level2(base, scale=0.5) - base


@program((normal(4),), (-np.abs(normal(4)) - 5,))
def data_branch_three_frames_deep(x):
    y = x * 3
    return _level1(y) + y


@program((normal(3),),)
def break_with_keyword_call(x):
    y = x * 2
    z = np.round(y, decimals=int(np.argmax(y)))
    return z, y


def _recursive_print(v, depth):
    if depth == 0:
        print("bottom", v.shape)
        return v
    return _recursive_print(v * 0.5, depth - 1) + depth


@program((normal(3),),)
def recursion_with_print_at_bottom(x):
    return _recursive_print(x, 3)


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        print("calling", fn.__name__)
        out = fn(*args, **kwargs)
        print("done", fn.__name__)
        return out
    return wrapper


@_logged
def _affine(x, a=2.0, b=0.0):
    return a * x + b


@program((normal(4),),)
def decorator_that_prints(x):
    return _affine(x, b=1.0) + _affine(x)


class Standardizer:
    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    @property
    def inv_std(self):
        return 1.0 / self.std

    def __call__(self, x):
        return (x - self.mean) * self.inv_std

    @staticmethod
    def clip(x, k=3.0):
        return np.clip(x, -k, k)

    @classmethod
    def fit(cls, data):
        return cls(data.mean(axis=0), data.std(axis=0))


@program((normal(6, 3),), (normal(4, 2, dtype=np.float32),))
def class_fit_transform(data):
    s = Standardizer.fit(data)
    return s.clip(s(data), k=2.0)


class Base:
    def transform(self, x):
        return x * 2


class Child(Base):
    def transform(self, x):
        return super().transform(x) + 1


@program((Child(), normal(3)),)
def super_method_call(obj, x):
    return obj.transform(x)


@program((normal(5),),)
def lambda_with_break(x):
    show = lambda v: print("value sum sign", np.sign(v.sum())) or v  # noqa: E731
    return show(x * 2) + 1


@program((normal(6),))
def graph_break_marker(x):
    import dynamo

    y = np.cos(x) * 2
    dynamo.graph_break()
    return y + np.sin(x)


@program((normal(4, 2),),)
def comprehension_with_print(x):
    return [print(i) or x[i].sum() for i in range(2)]


@program((normal(5),), (normal(5, dtype=np.float32),))
def many_live_locals_across_break(x):
    a = x + 1
    b = a * 2
    c = np.maximum(a, b)
    d = c.sum()
    n = x.shape[0]
    label = "run"
    print(label, n)
    return a + b + c + d, label * 2, n


# 16. Mutation and aliasing around breaks --------------------------------------------------------


@program((normal(4),), (integers(0, 5, 4),))
def alias_mutation_then_break(x):
    y = x
    y += 1
    print("mutated in place")
    return x * 2, y is x


@program((normal(6),),)
def mutate_view_of_argument_after_break(x):
    head = x[:3]
    print("head sum sign", int(np.sign(head.sum())))
    head *= 10
    return x.sum()


@program((normal(5),), (np.abs(normal(5)),))
def mutate_then_branch(x):
    x[0] = 0.0
    if (x >= 0).all():
        x *= 2
    else:
        x[x < 0] = 0
    return x


@program((normal(3, 3),),)
def out_argument(x):
    buf = np.empty_like(x)
    np.multiply(x, 2, out=buf)
    np.add(buf, 1, out=buf)
    print("buffer ready")
    np.sqrt(np.abs(buf), out=buf)
    return buf


@program(([normal(2), normal(2)],),)
def mutate_arrays_inside_list_argument(arrays):
    for a in arrays:
        a *= 2
    arrays[0][0] = -1.0
    return sum(a.sum() for a in arrays)


@program((normal(4), normal(4)),)
def swap_and_return_inputs(a, b):
    a, b = b, a
    print("swapped")
    return a, b


@program((normal(8),), (np.arange(8.0),))
def sort_in_place_argument(x):
    x.sort()
    return x[-3:], x


# 17. More layouts and keyword arguments for programs above -------------------------------------

_layout_rng = np.random.default_rng(7)


def _arr(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    return _layout_rng.standard_normal(shape).astype(dtype)


more_cases("zscore", Case((_arr(6, 4).T,), id="transposed"),
           Case((View(_arr(10, 4), lambda b: b[::2]),), id="strided-rows"))
more_cases("softmax", Case((_arr(5, 3),), {"axis": 0}, id="axis0-kw"),
           Case((_arr(4, 6, dtype=np.float32).T,), id="transposed-f32"))
more_cases("layer_norm", Case((_arr(3, 8), np.ones(8), np.zeros(8)), {"eps": 1e-3}, id="eps-kw"),
           Case((View(_arr(4, 16), lambda b: b[:, ::2]), _arr(8), _arr(8)), id="strided-cols"))
more_cases("pairwise_sq_distances", Case((_arr(3, 4).T, _arr(3, 2).T), id="views"))
more_cases("five_point_stencil", Case((_arr(5, 6).T,), id="transposed"),
           Case((View(_arr(8, 8), lambda b: b[1:-1, 1:-1]),), id="interior-view"))
more_cases("moving_average", Case((_arr(15),), {"k": 5}, id="k5-kw"))
more_cases("clip_grad_norm", Case((_arr(6) * 5,), {"max_norm": 10.0}, id="max-norm-kw"))
more_cases("keepdims_reductions", Case((_arr(4, 3).T,), id="transposed"),
           Case((_arr(3, 4, dtype=np.float32),), id="float32"))
more_cases("mlp_forward", Case((View(_arr(4, 6), lambda b: b[:, ::2]), _arr(3, 5).T.T, _arr(5),
                                _arr(2, 5).T, _arr(2)), id="views"))
more_cases("attention", Case((_arr(3, 4), _arr(4, 5).T, _arr(5, 2)), id="transposed-k"))
more_cases("laplacian_1d", Case((View(_arr(21), lambda b: b[::2]),), id="strided"),
           Case((_arr(9),), {"dx": 0.5}, id="dx-kw"))
more_cases("activations", Case((np.array([0.0, -0.0, 1e-300, -40.0, 40.0, 5e-324]),),
                               id="special-values"))
more_cases("mse_with_print", Case((_arr(4, 3).T, _arr(3, 4)), id="transposed"))
more_cases("inplace_update_argument", Case((View(_arr(10), lambda b: b[::2]), _arr(5)),
                                           {"lr": 0.5}, id="strided-lr-kw"))
more_cases("mutate_view_of_argument_after_break", Case((_arr(4, 3).T.ravel(),), id="raveled"))
more_cases("standardize_columns_inplace", Case((_arr(3, 5).T,), id="transposed"))
more_cases("zscore", Case((_arr(5, 3, dtype=np.float16),), id="float16"),
           Case((np.zeros((0, 3)),), id="empty"))
more_cases("softmax", Case((_arr(2, 5, dtype=np.float16),), id="float16"),
           Case((np.array(1.5),), {"axis": None}, id="0d"))
more_cases("minmax_scale", Case((np.array([True, False, True]),), id="bool-raises"),
           Case((np.full(4, 3.0),), id="constant-divides-by-zero"))
more_cases("activations", Case((np.arange(-3, 4),), id="int64"))
more_cases("accuracy", Case((np.zeros((0, 4)), np.zeros(0, dtype=np.int64)), id="empty-warns"))
more_cases("outer_table", Case((np.array([1 + 2j, 3j]), np.array([1.0, -1.0, 0.5])), id="complex"))
more_cases("hinge_loss", Case((_arr(6, dtype=np.float32), np.array([1, -1, 1, 1, -1, -1])),
                              id="float32-int-labels"))
more_cases("describe", Case((np.array([7]),), id="single-int-ddof-warns"))
more_cases("laplacian_1d", Case((_arr(2),), id="too-short"))


# 18. Programs that warn on purpose (warnings recorded and compared, not raised) ----------------


@program((np.array([1.0, 0.0, 2.0]),), (np.array([0.0, 0.0], dtype=np.float32),), warns=True)
def log_likelihood_with_zeros(p):
    logp = np.log(p)
    finite = np.where(np.isfinite(logp), logp, -1e9)
    return finite.sum(), logp


@program((np.array([4.0, -1.0, 9.0]),), warns=True)
def sqrt_of_negative_then_nan_to_num(x):
    r = np.sqrt(x)
    print("nan count", int(np.isnan(r).sum()))
    return np.nan_to_num(r)


@program((np.array([1.0, 800.0, -800.0]),), (np.array([10.0, 100.0], dtype=np.float32),),
         warns=True)
def exp_overflow(z):
    e = np.exp(z)
    return e / (1 + e)


@program((np.zeros((0, 3)),), (normal(4, 3),), warns=True)
def mean_of_maybe_empty(x):
    m = x.mean(axis=0)
    if np.isnan(m).any():
        print("empty input")
        return np.zeros(x.shape[1])
    return m


@program((np.array([1.0, 2.0, 0.0]), np.array([0.0, 2.0, 0.0])), warns=True)
def divide_with_default_errstate(a, b):
    r = a / b
    r[~np.isfinite(r)] = -1.0
    return r, (a // b)


@program((integers(0, 10, 6, dtype=np.int32),), warns=True)
def integer_divide_by_zero(x):
    return x // (x - x), x % np.zeros_like(x)


# 19. Unusual top-level signatures and closures across breaks -----------------------------------


@program(Case((normal(3), normal(3)), {"weights": (0.25, 0.75)}, id="two-arrays-kw"),
         Case((normal(2, 2),), {}, id="one-array"))
def weighted_sum_varargs(*arrays, weights=None, **options):
    weights = weights or (1.0,) * len(arrays)
    total = sum(w * a for w, a in zip(weights, arrays))
    print("combined", len(arrays), "arrays", sorted(options))
    return total * 2, len(options)


@program(Case((normal(4),), {"scale": 3.0, "verbose": True}, id="kw-only"),
         Case((normal(4),), {}, id="defaults"))
def keyword_only_top_level(x, *, scale=1.0, verbose=False):
    y = x * scale
    if verbose:
        print("scaled by", scale)
    return y - y.mean()


def _make_program(bias, power):
    table = {"bias": bias}

    def run(x):
        h = x ** power + table["bias"]
        print("running with bias", table["bias"])
        return h.sum(), h
    return run


_closure_program = _make_program(0.5, 2)
_closure_program.__name__ = "closure_top_level_with_break"
program((normal(5),), (normal(3, dtype=np.float32),))(_closure_program)


@program((normal(4),), Case((normal(4),), {"eps": 0.5}, id="eps-kw"))
def default_args_and_cells(x, eps=1e-3, *, axis=0):
    counter = [0]

    def bump():
        counter[0] += 1
        return counter[0]

    a = np.abs(x) + eps
    print("bumped", bump())
    return np.log(a).sum(axis=axis) * bump(), counter


@program((normal(4),), Case((normal(3),), {"name": "val_loss"}, id="name-kw"))
def format_with_locals_after_break(x, name="loss"):
    value = float((x ** 2).mean())
    return "{name}: {value:.4f}".format(**locals())


# 20. More of the everyday NumPy API -------------------------------------------------------------


@program((_arr(8, 3),), (_arr(6, 4, dtype=np.float32),))
def pca_via_svd(X, k=2):
    Xc = X - X.mean(axis=0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    explained = S ** 2 / (S ** 2).sum()
    return Xc @ Vt[:k].T, explained[:k]


@program((_arr(4, 4),))
def symmetric_eigen(A):
    S = (A + A.T) / 2
    w, V = np.linalg.eigh(S)
    return w, np.abs(V[:, -1])


@program((integers(0, 6, 15),), (np.array(["b", "a", "b", "c"]),))
def unique_with_counts(labels):
    values, counts = np.unique(labels, return_counts=True)
    return values, counts, values[np.argmax(counts)]


@program((np.sort(_arr(10)), _arr(4)),)
def searchsorted_and_digitize(edges, x):
    return np.searchsorted(edges, x), np.digitize(x, edges), np.interp(x, edges, np.arange(10.0))


@program((np.linspace(-1, 1, 5), np.linspace(0, 2, 4)))
def meshgrid_evaluate(xs, ys):
    X, Y = np.meshgrid(xs, ys)
    Z = np.exp(-(X ** 2 + Y ** 2))
    return Z, Z.sum(axis=0), np.unravel_index(np.argmax(Z), Z.shape)


@program((_arr(6), np.full(6, -0.5), np.full(6, 0.5)),)
def clip_with_array_bounds(x, lo, hi):
    return np.clip(x, lo, hi), np.clip(x, lo[0], None)


@program((_arr(5), _arr(5)),)
def allclose_branch(a, b):
    if np.allclose(a, a + 1e-12):
        print("close")
    return np.isclose(a, b, atol=0.5), np.allclose(a, b)


@program((_arr(7) * 3,), (_arr(4, dtype=np.float32) * 10,), graphs=1)
def rounding_and_casts(x):
    return np.round(x, 1), np.floor(x).astype(np.int64), np.rint(x), np.trunc(x), x.astype(int)


@program((_arr(6, dtype=np.float32),), graphs=1)
def accumulate_in_float64(x):
    return np.sum(x, dtype=np.float64), np.cumsum(x, dtype=np.float64), x.mean(dtype=np.float64)


@program((_arr(3, 4), _arr(4, 5), _arr(5)),)
def einsum_and_tensordot(A, B, v):
    return np.einsum("ij,jk->ik", A, B), np.einsum("ij,j->i", B, v), np.tensordot(A, B, axes=1)


@program((_arr(20),))
def kde_gaussian(samples, bandwidth=0.5):
    grid = np.linspace(samples.min(), samples.max(), 7)
    z = (grid[:, None] - samples[None, :]) / bandwidth
    dens = np.exp(-0.5 * z ** 2).sum(axis=1) / (len(samples) * bandwidth * np.sqrt(2 * np.pi))
    return grid, dens


@program((np.arange(10.0),),)
def while_with_break_and_continue(x):
    i, total, seen = 0, 0.0, []
    while i < len(x):
        i += 1
        if i % 3 == 0:
            continue
        if total > 20:
            break
        total += x[i - 1]
        seen.append(i)
    return total, seen


@program((3,), (5,))
def legacy_global_random_state(n):
    np.random.seed(123)
    a = np.random.rand(n)
    b = np.random.randn(n)
    return a + b, np.random.randint(0, 10, size=n)


@program((_arr(4, 4, dtype=np.float16), _arr(4, dtype=np.float16)),)
def float16_matvec(A, x):
    return A @ x, (A * x).sum(axis=1), A.astype(np.float32) @ x.astype(np.float32)


@program((integers(1, 50, 12).reshape(3, 4),), graphs=1)
def integer_reductions(counts):
    return counts.sum(axis=0), counts.prod(axis=1), counts.max(), counts.argmin(axis=0), \
        counts.mean(), np.cumprod(counts[0])


@program(((_arr(5) > 0), (_arr(5) > 0.5)), graphs=1)
def boolean_logic(a, b):
    return a & b, a | b, a ^ b, ~a, np.logical_and(a, ~b).sum(), a.any(), b.all()
