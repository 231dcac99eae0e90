"""Where a compiled module spends its time: one row per step, as `Executable.profile` measures it.

    report = exe.profile(x, repeat=20)     # every step timed alone, in plan order, 20 times
    print(report)                          # the table below
    report.top(5)                          # the five slowest steps, slowest first

    step                     backend  ops                 median  share   MFLOP  GFLOP/s     MB   GB/s
    fused_conv2d_add_relu_0  cpu      conv2d+add+relu   412.3 us  61.0%  231.21    560.8   3.41    8.3
    ...
    12 steps: 676.0 us in all; a whole call 650.2 us (medians of 20)

A step's FLOPs and bytes are what compile counted for its group (`Step.flops`, `Step.bytes_moved`;
graphopt/backends/costs.py): 2*M*N*K for a matmul, 2 * output elements * input channels per
group * kh * kw for a conv2d, output elements * kh * kw for a pool, about one per element (ten
for a transcendental) for the rest; bytes are the step's inputs, outputs and the constants inside
its group (weights), each moved once.
GFLOP/s is the rate to read for a step bound by compute (a matmul or conv at large channel
counts), GB/s for one bound by memory (elementwise, pooling, a depthwise conv).
"""

from __future__ import annotations

from dataclasses import dataclass

OPS_SHOWN = 40
"""Characters of a step's op kinds the table shows."""


@dataclass(frozen=True)
class StepProfile:
    """One step's row: what it computes, where, and its median time."""

    name: str
    backend: str
    ops: tuple[str, ...]
    """The kinds of graph ops the step computes (without `graph.`), each once, in order."""
    seconds: float
    """Median time of the step alone."""
    share: float
    """Of the sum of all steps' medians."""
    flops: int
    bytes_moved: int

    @property
    def gflops_per_second(self) -> float:
        return self.flops / self.seconds / 1e9

    @property
    def gbytes_per_second(self) -> float:
        return self.bytes_moved / self.seconds / 1e9


@dataclass(frozen=True)
class Profile:
    """Every step's row, in plan order, and the median of whole calls; printing gives the table."""

    steps: tuple[StepProfile, ...]
    call_seconds: float
    repeat: int

    @property
    def total_seconds(self) -> float:
        """The sum of the steps' medians."""
        return sum(step.seconds for step in self.steps)

    def top(self, count: int) -> list[StepProfile]:
        """The `count` slowest steps, slowest first."""
        return sorted(self.steps, key=lambda step: step.seconds, reverse=True)[:count]

    def table(self, steps: list[StepProfile] | None = None) -> str:
        """The rows of `steps` (default: all, in plan order) under a header, then the totals."""
        header = ("step", "backend", "ops", "median", "share", "MFLOP", "GFLOP/s", "MB", "GB/s")
        rows = [header] + [_cells(step) for step in (self.steps if steps is None else steps)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
                 for row in rows]
        lines.append(f"{len(self.steps)} steps: {_microseconds(self.total_seconds)} in all; "
                     f"a whole call {_microseconds(self.call_seconds)} (medians of {self.repeat})")
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.table()


def _cells(step: StepProfile) -> tuple[str, ...]:
    ops = "+".join(step.ops)
    if len(ops) > OPS_SHOWN:
        ops = ops[: OPS_SHOWN - 3] + "..."
    return (step.name, step.backend, ops, _microseconds(step.seconds), f"{step.share:.1%}",
            f"{step.flops / 1e6:.2f}", f"{step.gflops_per_second:.1f}",
            f"{step.bytes_moved / 1e6:.2f}", f"{step.gbytes_per_second:.1f}")


def _microseconds(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"
