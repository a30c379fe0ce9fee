"""The corpus oracle can fail: a backend that changes a result, a printed line or an argument
mutation is caught (a test that cannot fail is a defect)."""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from programs import oracle


def _wrong_backend(change):
    def backend(gm, example_inputs):
        @dynamo.disable  # the wrapper is test code: it must not be traced itself
        def run(*args):
            out = gm.forward(*args)
            return tuple(map(change, out)) if isinstance(out, tuple) else change(out)
        return run
    return backend


def scale(x):
    return x * 2.0


def test_a_changed_value_is_caught(monkeypatch):
    oracle.check_program(scale, (np.arange(3.0),), {}, "eager")  # passes as is
    monkeypatch.setattr(oracle, "make_backend", lambda name: oracle.CountingBackend(
        _wrong_backend(lambda out: out + 1)))
    with pytest.raises(AssertionError, match="values differ"):
        oracle.check_program(scale, (np.arange(1.0, 4.0),), {}, "eager")


def test_a_one_ulp_difference_is_caught_on_c(monkeypatch):
    monkeypatch.setattr(oracle, "make_backend", lambda name: oracle.CountingBackend(
        _wrong_backend(lambda out: np.nextafter(out, np.inf))))
    with pytest.raises(AssertionError, match="values differ"):
        oracle.check_program(scale, (np.arange(1.0, 4.0),), {}, "c")


def prints(x):
    print("sum", x.shape)
    return x + 1


def test_a_changed_print_is_caught(monkeypatch):
    oracle.check_program(prints, (np.arange(3.0),), {}, "eager")

    def noisy(out):
        print("extra line")
        return out

    monkeypatch.setattr(oracle, "make_backend",
                        lambda name: oracle.CountingBackend(_wrong_backend(noisy)))
    with pytest.raises(AssertionError, match="printed"):
        oracle.check_program(prints, (np.arange(3.0),), {}, "eager")


def appends(x, log):
    log.append(1)
    return x


def test_a_lost_argument_mutation_is_caught():
    oracle.check_program(appends, (np.arange(2.0), []), {}, "eager")
    expected, actual = (np.arange(2.0), [1]), (np.arange(2.0), [])
    with pytest.raises(AssertionError, match="length"):
        oracle.assert_same(expected, actual)


class _State:
    def __init__(self):
        self.steps = 0


def test_object_attributes_are_compared():
    a, b = _State(), _State()
    oracle.assert_same(a, b)
    b.steps = 1
    with pytest.raises(AssertionError, match="steps"):
        oracle.assert_same(a, b)


def logs(x):
    return np.log(x)


def test_a_lost_or_extra_warning_is_caught(monkeypatch):
    import warnings

    args = (np.array([0.0, 1.0]),)
    oracle.check_program(logs, args, {}, "eager", warns=True)

    def silent(out):
        return out

    def extra(out):
        warnings.warn("extra", RuntimeWarning)
        return out

    for change in (silent, extra):
        # `silent` runs the graph under errstate(ignore): the warning of np.log is lost.
        def backend(gm, example_inputs, change=change):
            @dynamo.disable
            def run(*a):
                with np.errstate(all="ignore" if change is silent else "warn"):
                    return change(gm.forward(*a))
            return run

        monkeypatch.setattr(oracle, "make_backend", lambda name: oracle.CountingBackend(backend))
        with pytest.raises(AssertionError, match="warned"):
            oracle.check_program(logs, args, {}, "eager", warns=True)
