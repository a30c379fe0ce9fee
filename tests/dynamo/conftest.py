"""Shared fixtures for the end-to-end translator tests (tests/dynamo/).

Comes in: test functions that ask for `backend` (a `support.oracle.CountingBackend`, which keeps
every graph module it was given) or `check` (the eager-vs-compiled oracle). Goes out: assertions
that a user function compiled through the public API (`dynamo.compile(fn, backend=...)`) behaves
exactly like plain NumPy. Every test starts from empty caches (`dynamo.reset()`, autouse).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import dynamo
from support.oracle import CountingBackend
from support.oracle import assert_same as _oracle_assert_same
from support.oracle import views as _views


@pytest.fixture(autouse=True)
def _fresh_caches():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.fixture
def backend() -> CountingBackend:
    return CountingBackend()


# The oracle ------------------------------------------------------------------------------------


def assert_same(expected: Any, actual: Any, where: str = "result") -> None:
    """Same structure, exact types, dtypes, shapes, strides and bit-identical values (also
    -0.0 vs 0.0 and NaN payloads: the eager backend runs the very same NumPy calls, so any
    difference is a translation bug, not rounding); other objects compare with ``==``, so a
    user object must be the very same object (`support.oracle.assert_same`, objects="identity").
    """
    _oracle_assert_same(expected, actual, where, objects="identity")


class View:
    """An argument that is a view (non-contiguous, transposed, offset) of a fresh `base` copy.

    Deep copies make contiguous arrays, so layout-sensitive inputs are built per run instead:
    ``View(np.arange(12.).reshape(3, 4), lambda b: b.T)``. Mutations are compared on the base.
    """

    def __init__(self, base: np.ndarray, make: Callable[[np.ndarray], np.ndarray]) -> None:
        self.base = base
        self.make = make


def _prepare(args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
    """Fresh copies to call with, and what to compare afterwards (views: their bases)."""
    bases = {i: a.base.copy(order="K") for i, a in enumerate(args) if isinstance(a, View)}
    plain_args, call_kwargs = copy.deepcopy(
        (tuple(None if isinstance(a, View) else a for a in args), kwargs))
    call_args = tuple(args[i].make(bases[i]) if i in bases else a for i, a in enumerate(plain_args))
    observed = tuple(bases.get(i, a) for i, a in enumerate(call_args))
    return call_args, call_kwargs, (observed, call_kwargs)


def _run(fn: Callable, args: tuple, kwargs: dict) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # the oracle compares exceptions too
        return "raised", exc


def run_check(backend: CountingBackend, fn: Callable, *args: Any, graphs: int | None = 1,
              compare_values: bool = True, **kwargs: Any) -> Any:
    """Eager `fn` vs `dynamo.compile(fn)` on deep copies of the arguments, called twice.

    Asserts equal results (see `assert_same`), equal view-vs-copy relations to the arguments,
    equal mutations of the arguments, the same exception type and message when eager raises,
    `graphs` graphs captured by the first call and none by the second (a cache hit). Any
    warning (e.g. npdynamo falling back after an internal error) fails the test.
    Returns the eager result.
    """
    eager_args, eager_kwargs, eager_seen = _prepare(args, kwargs)
    with warnings.catch_warnings():  # the same filter as the compiled runs, for symmetry
        warnings.simplefilter("error")
        status, expected = _run(fn, eager_args, eager_kwargs)
    compiled = dynamo.compile(fn, backend=backend)
    before = backend.count
    for attempt in ("first call", "second call (cache hit)"):
        comp_args, comp_kwargs, comp_seen = _prepare(args, kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            comp_status, actual = _run(compiled, comp_args, comp_kwargs)
        if status == "raised":
            assert comp_status == "raised", f"{attempt}: eager raised {expected!r}, compiled returned {actual!r}"
            assert type(actual) is type(expected), f"{attempt}: raised {actual!r}, eager raised {expected!r}"
            assert str(actual) == str(expected), f"{attempt}: message {actual}, eager {expected}"
        else:
            if comp_status == "raised":
                raise AssertionError(f"{attempt}: compiled raised, eager returned {expected!r}") from actual
            if compare_values:
                assert_same(expected, actual, f"{attempt}: result")
            else:  # np.empty & co: only the metadata is defined
                assert type(actual) is type(expected)
                assert actual.dtype == expected.dtype and actual.shape == expected.shape
            assert _views(actual, comp_args) == _views(expected, eager_args), (
                f"{attempt}: view-vs-copy relation to the arguments differs from eager"
            )
        assert_same(eager_seen, comp_seen, f"{attempt}: arguments after the call")
        if graphs is None:  # the caller does not pin the number of graphs
            continue
        if attempt == "first call":
            assert backend.count - before == graphs, (
                f"expected {graphs} captured graph(s), got {backend.count - before}"
            )
            before = backend.count
        else:
            assert backend.count == before, "the second call with equal inputs recompiled"
    return expected


@pytest.fixture
def check(backend: CountingBackend) -> Callable[..., Any]:
    """``check(fn, *args, graphs=1, compare_values=True, **kwargs)`` — see `run_check`."""

    def _check(fn: Callable, *args: Any, graphs: int | None = 1, compare_values: bool = True,
               **kwargs: Any) -> Any:
        return run_check(backend, fn, *args, graphs=graphs, compare_values=compare_values, **kwargs)

    _check.view = View  # type: ignore[attr-defined]
    _check.backend = backend  # type: ignore[attr-defined]
    _check.run_check = run_check  # type: ignore[attr-defined]  # with another backend
    _check.CountingBackend = CountingBackend  # type: ignore[attr-defined]
    _check.assert_same = assert_same  # type: ignore[attr-defined]
    return _check
