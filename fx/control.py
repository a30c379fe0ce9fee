"""Structured control flow in a graph: a loop nest, or an ``if`` statement, as one node.

A `Loop` is the target of a ``call_function`` node that runs a whole loop nest (the translator
makes one where an outermost loop of a frame lowers to a C loop kernel: ``dynamo.loop_kernels``)::

    # File: f.py:12 in forward_substitution, code: for i in range(n):
    # loop nest (a C loop kernel): reads n, L, x, b; writes x; assigns i, s, j, x; body: .text()
    loop = forward_substitution_line12(None, n, L, x, b)

The node owns its body: a statement-level IR (for / while / if / assign / store / deopt, in
``dynamo.loop_nest.ir``) that `Loop.text` prints, and that the loop's `run` callable executes
(a C loop kernel: its C is ``loop.run.source``). It declares what it reads (`reads`: the node's arguments after the
first, one per local the loop reads, in order), what it writes (`writes`: those of them that are
arrays it may store into) and the locals it assigns. So passes see it for what it is: impure
(DCE keeps it, CSE never merges it or an array read across it, constant folding never runs it),
and a barrier for fusion (the C backend calls it as an opaque step of its program, never fuses
through it). Its first argument is the iterable of a ``for`` loop entered at its ``GET_ITER``
(a ``range``), or None when the loop computes its own range.

A `Cond` is the same for an ``if`` statement (``if``/``elif``/``else``) whose condition depends
on the data (an element, a reduction): where the trace would end the graph to let Python take
the branch, the statement runs as one C kernel instead, condition and branch taken, with the
same declarations and the same outcome (its body prints both branches)::

    # File: f.py:7 in clip, code: if a[i] > t:
    # conditional (a C kernel): reads a, i, t; writes a; assigns c; body: clip_line7.text()
    loop = clip_line7(None, a, i, t)

Its value is the loop's outcome ``(status, locals, rest)``, which only the transformed code
reads; `Opaque` stands for it (and for a graph input that only a loop reads, which the graph does
not guard: the loop checks the types it is called with) in ``meta["val"]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Cond", "Loop", "Opaque", "loop_of"]


@dataclass(frozen=True)
class Opaque:
    """``meta["val"]`` of a value the graph passes on without looking at it: a loop node's
    outcome, or an input only loop nodes read (`what` says which)."""

    what: str

    def __str__(self) -> str:
        return f"opaque ({self.what})"

    __repr__ = __str__


class Loop:
    """A loop nest as a graph operation (see the module docstring).

    ``name``: a Python identifier (the node's callable in the generated code); ``run``: called
    with the node's arguments, returns the outcome (its ``entry``, when it has one, is the same
    call made the fastest way: the generated code calls that); ``body``: an object with ``text()`` (the
    statement IR); ``reads``/``writes``/``assigns``: names of locals; ``where``: "file:line"."""

    def __init__(self, name: str, run: Callable[..., Any], body: Any, reads: tuple[str, ...],
                 writes: tuple[str, ...], assigns: tuple[str, ...], where: str,
                 kind: str = "a C loop kernel") -> None:
        if not name.isidentifier():
            raise ValueError(f"a loop's name must be an identifier, got {name!r}")
        unknown = [n for n in writes if n not in reads]
        if unknown:
            raise ValueError(f"a loop writes only arrays it reads; {unknown} are not read")
        self.__name__ = self.__qualname__ = name
        self.run = run
        self.body = body
        self.reads, self.writes, self.assigns = tuple(reads), tuple(writes), tuple(assigns)
        self.where = where
        self.kind = kind

    def __call__(self, iterable: Any, *values: Any) -> Any:
        return self.run(iterable, *values)

    @property
    def entry(self) -> Callable[..., Any]:
        """What the generated code calls under the loop's name."""
        return getattr(self.run, "entry", self.run)

    def __repr__(self) -> str:
        return f"<loop {self.__name__} at {self.where}: {self.kind}>"

    def written_arguments(self, args: tuple) -> list[Any]:
        """The node arguments (of ``args``, the node's) this loop may write into."""
        return [args[1 + self.reads.index(name)] for name in self.writes]

    def text(self) -> str:
        """The body, as its statement IR prints."""
        return self.body.text()

    def comment(self) -> str:
        """The line the generated code shows above the node."""
        writes = ", ".join(self.writes) or "no array"
        return (f"loop nest ({self.kind}): reads {', '.join(self.reads) or 'nothing'}; "
                f"writes {writes}; assigns {', '.join(self.assigns) or 'nothing'}; "
                f"body: {self.__name__}.text()")


class Cond(Loop):
    """An ``if`` statement as a graph operation (see the module docstring): a `Loop` whose body
    runs once, the condition and the branch it takes."""

    def __init__(self, *args: Any, kind: str = "a C kernel", **kwargs: Any) -> None:
        super().__init__(*args, kind=kind, **kwargs)

    def __repr__(self) -> str:
        return f"<conditional {self.__name__} at {self.where}: {self.kind}>"

    def comment(self) -> str:
        return "conditional" + super().comment()[len("loop nest"):]


def loop_of(target: Any) -> Loop | None:
    """`target` if it is a loop nest (or a conditional: `Cond`), else None."""
    return target if isinstance(target, Loop) else None
