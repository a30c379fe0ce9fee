"""Python containers, builtins and string methods around NumPy code: traced into the graph
(no break), with plain Python and NumPy as the oracle.
"""

from __future__ import annotations

import numpy as np

import dynamo
from dynamo import _C


def builtins_mix(xs):
    total = sum(x.sum() for x in xs)
    m = max(len(xs), 2)
    z = list(zip(xs, range(len(xs))))
    s = sorted([3, 1, 2])
    r = list(reversed(s))
    a = any(x.ndim == 2 for x in xs)
    b = all(isinstance(x, np.ndarray) for x in xs)
    return total, m, len(z), s, r, a, b, getattr(xs[0], "shape"), hasattr(xs[0], "T"), \
        getattr(xs[0], "missing", 7), hasattr(xs[0], "missing")


def test_builtins_over_containers_and_generators(check):
    x = np.arange(1.0, 5.0)
    check(builtins_mix, [x, x[None]], graphs=1)


def list_methods(x):
    out = []
    out.append(x + 1)
    out.extend([x * 2, x * 3])
    out.insert(0, x)
    last = out.pop()
    out.reverse()
    copied = out.copy()
    copied.clear()
    return out, last, copied, [1, 2, 2].count(2), [4, 5].index(5)


def test_list_methods(check):
    check(list_methods, np.arange(3.0), graphs=1)


def dict_methods(x, cfg):
    d = {"a": x}
    d.update(b=x * 2)
    d.setdefault("c", x * 3)
    first = d.pop("a")
    d2 = dict(d, e=1)
    keys = [k for k, v in d.items()]
    return first + d.get("b") * cfg.get("scale", 2.0), keys, sorted(d2), d.get("zz", None)


def test_dict_methods(check):
    check(dict_methods, np.arange(3.0), {"scale": 3.0}, graphs=1)


def sets_and_strings(x):
    s = {1, 2, 3}
    t = {k * 2 for k in range(3)}
    names = sorted(s | t)
    key = "layer".upper().replace("L", "l")
    parts = "a,b,c".split(",")
    return x * len(names), key, "-".join(parts), f"{key}:{x.shape}:{x.ndim:03d}", key.startswith("l")


def test_sets_and_string_methods_on_constants(check):
    check(sets_and_strings, np.arange(3.0), graphs=1)


def test_errors_of_container_methods_are_the_users(check):
    def pops_missing(x):
        d = {"a": x}
        return d.pop("b")

    def bad_index(x):
        out = [x]
        out.pop(3)
        return out

    check(pops_missing, np.arange(3.0), graphs=None)  # KeyError: 'b'
    check(bad_index, np.arange(3.0), graphs=None)  # IndexError: pop index out of range


def _len_of_big_list(x, items):
    return np.sin(x) + len(items)


def test_a_very_long_list_is_not_traced_item_by_item():
    """`len(gc.get_objects())` under capture: wrapping 10,000 items (one tracker and one guard
    each) took seconds; past MAX_TRACED_ITEMS the instruction runs in plain Python instead."""
    from dynamo.variables.builder import MAX_TRACED_ITEMS

    x = np.arange(3.0)
    items = list(range(MAX_TRACED_ITEMS * 40))
    compiled = dynamo.compile(_len_of_big_list, backend="eager")
    np.testing.assert_array_equal(compiled(x, items), _len_of_big_list(x, items))
    guards = "".join(check_fn.source for check_fn, _ in _C.get_cache_entries(
        _len_of_big_list.__code__))
    assert f"[{MAX_TRACED_ITEMS}]" not in guards


def membership(x, text, blob, items):
    nan = float("nan")
    found = (
        "ab" in text,            # substring, not an item of the string
        b"[X]" in blob,          # same for bytes (was False: CPython's test_gc found it)
        "zz" not in text,
        nan in [1.0, nan],       # identity before ==
        nan in (nan,),
        2 in items,
        (1, 2) in {(1, 2), (3, 4)},
        3 in range(1, 5),
    )
    return x * 2.0, found


def test_in_follows_the_containers_own_rules(check):
    check(membership, np.ones(2), "xaby", b"line 1 [X]", [1, 2, 3])


def membership_of_an_array_item(x, y):
    items = [x.sum(), 3.0]
    return 2.0 in items, y + 1.0


def test_in_over_a_list_holding_a_traced_value_is_decided_at_run_time(check):
    # (an item that is not a constant may equal the value: not decided while tracing)
    check(membership_of_an_array_item, np.array([1.0, 1.0]), np.ones(2), graphs=None)
    check(membership_of_an_array_item, np.array([0.5, 0.5]), np.ones(2), graphs=None)


def dict_in_order(x, d):
    return x * 2.0, list(d), [v for v in d.values()]


def test_a_dict_argument_s_key_order_is_guarded():
    # (the keys were guarded as a set: a dict with the same keys in another order reused the
    # version that iterates them in the first order; found by the semantics audit)
    compiled = dynamo.compile(dict_in_order)
    for d in ({"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2}):
        got, want = compiled(np.ones(2), d), dict_in_order(np.ones(2), d)
        assert got[1:] == want[1:]
