"""The fusion report: what the C backend did with one graph, in words and C.

In: a `fusion.FusionPlan`, the C source of each kernel, and per-kernel facts (size threshold,
whether the kernel is used at all). Out: a `FusionReport` whose ``str()`` is a readable summary;
`compile_graph` stores it in ``gm.meta["fusion_report"]`` and logs it on the
``dynamo.kernels`` logger (topic ``kernels``) at INFO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codegen_c import kernel_source
from .fusion import FusionPlan

__all__ = ["FusionReport", "KernelInfo", "build_report"]


@dataclass
class KernelInfo:
    """One kernel: its name, kind, the fx nodes it stores / computes, and its C source."""

    name: str
    kind: str
    shape: tuple[int, ...]
    outputs: list[str]
    members: list[str]
    inputs: list[str]
    source: str
    compiled: bool
    note: str = ""


@dataclass
class FusionReport:
    """Kernels, NumPy calls (with the reason each was not lowered), fusion stoppers, counts."""

    kernels: list[KernelInfo] = field(default_factory=list)
    numpy_calls: dict[str, str] = field(default_factory=dict)
    materialized: dict[str, str] = field(default_factory=dict)
    splits: dict[str, str] = field(default_factory=dict)
    temporaries_removed: int = 0
    build_note: str = ""

    def __str__(self) -> str:
        lines = [f"fusion report: {len(self.kernels)} kernel(s), "
                 f"{len(self.numpy_calls)} NumPy call(s), "
                 f"{self.temporaries_removed} temporaries removed"]
        if self.build_note:
            lines.append(f"  build: {self.build_note}")
        for k in self.kernels:
            state = "" if k.compiled else "  [NumPy path: " + (k.note or "not compiled") + "]"
            lines.append(f"  {k.name} ({k.kind} over {list(k.shape)}): "
                         f"stores {', '.join(k.outputs)}; computes {', '.join(k.members)}; "
                         f"reads {', '.join(k.inputs) or '-'}{state}")
        for name, why in self.numpy_calls.items():
            lines.append(f"  NumPy call {name}: {why}")
        for name, why in self.materialized.items():
            lines.append(f"  stored {name}: {why}")
        for name, why in self.splits.items():
            lines.append(f"  new kernel at {name}: {why}")
        for k in self.kernels:
            if k.compiled:
                lines.append(f"--- C source of {k.name} ---")
                lines.append(k.source.rstrip())
        return "\n".join(lines)


def build_report(plan: FusionPlan, compiled: dict[str, bool], notes: dict[str, str],
                 build_note: str = "") -> FusionReport:
    """Summarise ``plan``; ``compiled[name]`` says whether kernel ``name`` runs as C."""
    rep = FusionReport(build_note=build_note)
    for k in plan.kernels:
        rep.kernels.append(KernelInfo(
            name=k.name, kind=k.kind, shape=tuple(k.shape),
            outputs=[n.name for n in k.out_nodes], members=[n.name for n in k.members],
            inputs=[od.node.name for od in k.operands], source=kernel_source(k),
            compiled=compiled.get(k.name, False), note=notes.get(k.name, ""),
        ))
    rep.numpy_calls = {n.name: why for n, why in plan.not_lowered.items()}
    rep.materialized = {n.name: why for n, why in plan.materialized_why.items()}
    rep.splits = {n.name: why for n, why in plan.split_why.items()}
    rep.temporaries_removed = len({
        n for k in plan.kernels if compiled.get(k.name) for n in k.members
        if n not in k.out_nodes
    })
    return rep
