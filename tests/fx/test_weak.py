"""fx.weak: weak containers and death callbacks that run no Python code when an object dies.

In:  plain objects, code objects and functions held by `IdentityMap`, `IdentitySet`,
     `WeakValueMap` and `on_death`; ``sys.setprofile`` sees every Python frame that starts.
Out: the containers' mapping behaviour (identity, order, deaths, sweeps, no cycles), and that
     no Python frame starts when their keys or `on_death` objects die (what makes a Ctrl-C
     there impossible to lose, see fx/weak.py).
"""

from __future__ import annotations

import functools
import gc
import types
import weakref

import pytest
from support.profiling import python_frames_during

from fx import weak
from fx.weak import IdentityMap, IdentitySet, WeakValueMap, on_death


class Obj:
    """Weakly referenceable; equal to every other Obj (identity must not use ``__eq__``)."""

    def __eq__(self, other):
        return isinstance(other, Obj)

    def __hash__(self):
        return 0


# -- IdentityMap -------------------------------------------------------------------------------

def test_identity_map_finds_keys_by_identity_not_equality():
    a, b = Obj(), Obj()
    m = IdentityMap()
    m[a] = 1
    assert a in m and b not in m and a == b
    m[b] = 2
    assert (m[a], m[b], len(m)) == (1, 2, 2)
    assert m.get(Obj(), "none") == "none"
    with pytest.raises(KeyError):
        m[Obj()]


def test_identity_map_keeps_insertion_order_and_replaces_values_in_place():
    keys = [Obj() for _ in range(5)]
    m = IdentityMap()
    for i, k in enumerate(keys):
        m[k] = i
    m[keys[2]] = "two"
    assert list(m) == keys
    assert m.values() == [0, 1, "two", 3, 4]
    assert m.items()[2] == (keys[2], "two")
    assert m.setdefault(keys[0], "x") == 0 and m.setdefault(k := Obj(), "x") == "x" and k in m


def test_identity_map_drops_a_value_when_its_key_dies():
    class Value:
        pass

    key, value = Obj(), Value()
    alive = weakref.ref(value)
    m = IdentityMap()
    m[key] = value
    del value
    assert alive() is not None
    del key
    assert alive() is None and len(m) == 0 and not m


def test_identity_map_pop_and_del():
    a, b = Obj(), Obj()
    m = IdentityMap()
    m[a] = 1
    m[b] = 2
    assert m.pop(a) == 1 and a not in m
    assert m.pop(a, "gone") == "gone"
    with pytest.raises(KeyError):
        m.pop(a)
    del m[b]
    assert not m
    m[a] = 3  # (again after a pop)
    assert m[a] == 3
    del a
    assert not m


def test_a_new_object_at_a_dead_keys_address_is_not_found():
    m = IdentityMap()
    seen = set()
    for _ in range(200):  # (freed objects' addresses are reused at once by the allocator)
        key = Obj()
        assert key not in m, "a dead key's entry was found for a new object"
        seen.add(id(key))
        m[key] = id(key)
        del key
    assert len(seen) < 200 and len(m) == 0


def test_dead_references_are_swept_as_the_map_grows():
    m = IdentityMap()
    live = [Obj() for _ in range(10)]
    for k in live:
        m[k] = None
    for _ in range(1000):
        m[Obj()] = None  # (each dies at once)
    assert len(m._refs) <= 2 * max(16, len(live)) + 1 and len(m) == 10


def test_identity_map_rejects_objects_without_weak_references():
    m = IdentityMap()
    with pytest.raises(TypeError):
        m[1] = "x"
    assert len(m) == 0 and 1 not in m and m.get(1) is None


def test_identity_map_and_its_callbacks_form_no_cycle():
    gc.collect()
    gc.disable()
    try:
        m = IdentityMap()
        keys = [Obj() for _ in range(3)]
        for k in keys:
            m[k] = [k.__class__]
        alive = weakref.ref(m)
        del m
        assert alive() is None  # freed by reference count, no collection needed
    finally:
        gc.enable()


def test_iterating_while_keys_die_is_safe():
    keys = [Obj() for _ in range(10)]
    m = IdentityMap()
    for k in keys:
        m[k] = None
    out = []
    for k in m:
        out.append(k)
        keys.clear()  # (every other key dies; the iteration holds the ones it yields)
    assert len(out) == 10
    del out, k
    assert len(m) == 0


def test_identity_map_by_code_object_identity():
    # Code objects compare equal by value: two functions made from the same source have equal
    # code, and an entry for one must not be found for the other.
    src = "def f(x):\n    return x + 1\n"
    ns1, ns2 = {}, {}
    exec(compile(src, "<same>", "exec"), ns1)
    exec(compile(src, "<same>", "exec"), ns2)
    c1, c2 = ns1["f"].__code__, ns2["f"].__code__
    assert c1 == c2 and c1 is not c2
    m = IdentityMap()
    m[c1] = "first"
    assert c2 not in m
    del ns1, c1
    gc.collect()  # (a function and its globals form a cycle)
    assert len(m) == 0


def test_identity_set():
    a, b = Obj(), Obj()
    s = IdentitySet()
    s.add(a)
    s.add(a)
    assert a in s and b not in s and len(s) == 1
    s.discard(b)
    s.discard(a)
    assert not s
    s.add(b)
    s.clear()
    assert not s and b not in s


# -- WeakValueMap ------------------------------------------------------------------------------

def test_weak_value_map():
    m = WeakValueMap()
    a, b = Obj(), Obj()
    m["a"] = a
    m["b"] = b
    assert m["a"] is a and m.get("b") is b and "a" in m and len(m) == 2
    del a
    assert "a" not in m and m.get("a", "gone") == "gone" and len(m) == 1
    with pytest.raises(KeyError):
        m["a"]
    m["b"] = c = Obj()  # (replacing: the old object's death does not remove the new one)
    del b
    assert m["b"] is c
    assert m.pop("b") is c and "b" not in m


def test_weak_value_map_sweeps_dead_entries():
    m = WeakValueMap()
    for i in range(1000):
        m[i] = Obj()  # (each dies at once)
    assert len(m._refs) <= 33 and len(m) == 0


# -- on_death ----------------------------------------------------------------------------------

def test_on_death_calls_back_with_the_reference():
    box: dict = {"k": 1}
    o = Obj()
    on_death(o, functools.partial(box.pop, "k"))
    assert box == {"k": 1}
    del o
    assert box == {}


def test_on_death_calls_back_for_cyclic_garbage():
    box: dict = {"k": 1}
    o = Obj()
    o.me = o
    on_death(o, functools.partial(box.pop, "k"))
    del o
    gc.collect()
    assert box == {}


def test_on_death_references_are_swept():
    for _ in range(1000):
        on_death(Obj(), functools.partial(dict().pop, "k"))
    assert weak.sweep_pending() < 200


# -- no Python code runs at deaths -------------------------------------------------------------

def test_no_python_frame_starts_when_keys_die():
    m, s, v = IdentityMap(), IdentitySet(), WeakValueMap()
    box = {"line": 1}
    objs = [Obj() for _ in range(5)]
    cyc = Obj()
    cyc.me = cyc
    code = compile("x = 1", "<died>", "exec")
    for o in objs + [cyc, code]:
        m[o] = "value"
        s.add(o)
    del o
    v["o"] = objs[0]
    fn = types.FunctionType(compile("def g(): pass", "<g>", "exec").co_consts[0], {})
    on_death(fn, functools.partial(box.pop, "line"))
    m[fn] = None

    def die():
        objs.clear()
        del code_holder[:]
        fn_holder.clear()
        gc.collect()

    code_holder, fn_holder = [code], [fn]
    del code, fn, cyc
    assert python_frames_during(die) == []
    assert len(m) == 0 and len(s) == 0 and len(v) == 0 and box == {}


def test_the_standard_librarys_weak_containers_do_run_python_code():
    # (what the test above guards against: if this stopped being true, fx.weak could go)
    d = weakref.WeakKeyDictionary()
    keys = [Obj()]
    d[keys[0]] = 1
    assert python_frames_during(keys.clear) != []
