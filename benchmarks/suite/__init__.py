"""npdynamo's benchmark suite: real NumPy kernels of the kinds scientific users write.

In: nothing (import `benchmarks/` onto sys.path first: ``import suite``). Out: `KERNELS`, every
`Kernel` of the family modules (stencils, linalg, particles, statistics, nn, spectral), and
`select(names)`. Used by `benchmarks/run_suite.py` (ratios to NumPy for eager, C, Numba,
torch.compile) and `tests/benchmarks/test_suite_kernels.py` (results equal NumPy's).
"""

from __future__ import annotations

from suite import linalg, nn, particles, spectral, statistics, stencils
from suite.kernel import Kernel

__all__ = ["KERNELS", "Kernel", "select"]

KERNELS: list[Kernel] = [*stencils.KERNELS, *linalg.KERNELS, *particles.KERNELS,
                         *statistics.KERNELS, *nn.KERNELS, *spectral.KERNELS]
assert len({k.name for k in KERNELS}) == len(KERNELS), "kernel names must be unique"


def select(names: str | None) -> list[Kernel]:
    """The kernels named in a comma-separated list (all for None/""); unknown names raise."""
    if not names:
        return list(KERNELS)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    by_name = {k.name: k for k in KERNELS}
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown kernel(s) {', '.join(unknown)}; choose from: "
                         + ", ".join(by_name))
    return [by_name[n] for n in wanted]
