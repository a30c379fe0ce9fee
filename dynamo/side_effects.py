"""Side effects on objects that existed before the frame: recorded while tracing, replayed after
the graph.

In: the translator's mutations of things the frame did not create: attribute writes on user
objects, assignments to globals and to closure cells (``nonlocal``), and changes to lists that
came from outside (append, extend, item assignment). Out: bytecode that applies the final state
after the graph has run (for a list that grew and ends empty, a growth first: list.sort()
detects any store into the list it sorts), in `codegen` (at a return, or before the instruction that runs in plain
Python at a graph break).

While tracing, a later read of the same attribute, global, cell or list sees the new value (the
translator keeps it), so the graph computes with what Python would have. Everything to replay is
loaded first and stored afterwards, so no replayed store changes what another one reads.
Writes the translator cannot replay exactly (an object with its own ``__setattr__``, a property,
a global of another module) raise `Unsupported`: the graph breaks there and the write runs in
plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bytecode import FreeVar

from . import instructions as ins

if TYPE_CHECKING:
    from .variables.base import VariableTracker

__all__ = ["SideEffects"]


@dataclass
class SideEffects:
    #: (object tracker, attribute) -> new value, in order of the first write
    attrs: dict[tuple[int, str], tuple["VariableTracker", str, "VariableTracker"]] = field(default_factory=dict)
    globals: dict[str, "VariableTracker"] = field(default_factory=dict)
    cells: dict[str, "VariableTracker"] = field(default_factory=dict)
    #: lists from outside the frame whose items changed
    lists: dict[int, "VariableTracker"] = field(default_factory=dict)
    #: per list: (length before its first change, largest length before any change)
    list_sizes: dict[int, tuple[int, int]] = field(default_factory=dict)

    def store_attr(self, obj: "VariableTracker", name: str, value: "VariableTracker") -> None:
        self.attrs[(id(obj), name)] = (obj, name, value)

    def pending_attr(self, obj: "VariableTracker", name: str) -> "VariableTracker | None":
        found = self.attrs.get((id(obj), name))
        return found[2] if found is not None else None

    def mutated_list(self, lst: "VariableTracker") -> None:
        """Called before each change of `lst`'s items (so every length it has had is seen)."""
        self.lists[id(lst)] = lst
        first, peak = self.list_sizes.get(id(lst), (len(lst.items), 0))
        self.list_sizes[id(lst)] = (first, max(peak, len(lst.items)))

    def _grew_and_emptied(self, lst: "VariableTracker") -> bool:
        """Whether `lst` gained items while the frame ran but ends empty. list.sort() empties
        the list it sorts and raises ValueError afterwards if anything stored into it (a key
        function or ``__lt__`` that appends and pops again): a replay of the final contents
        alone, ``lst[:] = []``, stores nothing, and the sort would not notice."""
        first, peak = self.list_sizes[id(lst)]
        return not lst.items and peak > first

    def values(self) -> list["VariableTracker"]:
        """Every value the replay needs (their graph values become graph outputs)."""
        found = [value for _, _, value in self.attrs.values()]
        found += list(self.globals.values()) + list(self.cells.values())
        for lst in self.lists.values():
            found += lst.items
        return found

    def __bool__(self) -> bool:
        return bool(self.attrs or self.globals or self.cells or self.lists)

    def codegen(self, gen) -> None:
        """Apply every recorded change (net stack effect: none)."""
        self.load(gen)
        self.store(gen)

    def _changes(self) -> list[tuple]:
        """Every change, in the order it is replayed: attributes in the order of their first
        write (an object's ``__dict__`` order and ``__setattr__`` calls as in Python), then
        globals (a new one's place in the module's dict), cells and lists."""
        out: list[tuple] = [("attr", obj, name, value) for obj, name, value in self.attrs.values()]
        out += [("global", name, value) for name, value in self.globals.items()]
        out += [("cell", name, value) for name, value in self.cells.items()]
        out += [("list", lst) for lst in self.lists.values()]
        return out

    def load(self, gen) -> int:
        """Push the new value of everything that changed (lists: the new item list) and the
        object it changes (attributes, lists), the last change's deepest, so `store` pops them
        in replay order; returns how many values were pushed. Loading them all before storing
        any keeps one store from changing what another reads, and the objects are loaded
        before the caller rebinds the frame's locals: a list or object read from a local that
        the frame then rebound (``L.append(3); L = [...]`` before a graph break) is still the
        one that changed."""
        pushed = 0
        for change in reversed(self._changes()):
            kind = change[0]
            if kind == "list":
                lst = change[1]
                for item in lst.items:
                    gen.reconstruct(item)
                gen.extend(ins.build_list(len(lst.items)))
                lst.source.reconstruct(gen)
                pushed += 2
                if self._grew_and_emptied(lst):  # lst[:] = (None,) first, as it grew
                    gen.extend(ins.load_const((None,)))
                    lst.source.reconstruct(gen)
                    pushed += 2
            elif kind == "attr":
                gen.reconstruct(change[3])
                change[1].source.reconstruct(gen)
                pushed += 2
            else:
                gen.reconstruct(change[-1])
                pushed += 1
        return pushed

    def store(self, gen) -> None:
        """With what `load` pushed on the stack: make the changes, in replay order."""
        for store in self._changes():
            kind = store[0]
            if kind == "attr":
                gen.extend(ins.store_attr(store[2]))
            elif kind == "global":
                gen.extend(ins.store_global(store[1]))
            elif kind == "cell":
                gen.extend(ins.store_deref(FreeVar(store[1])))
            else:  # the same list object gets the new items: lst[:] = [...]
                for _ in range(2 if self._grew_and_emptied(store[1]) else 1):
                    gen.extend(ins.load_const(slice(None)) + ins.store_subscr())
