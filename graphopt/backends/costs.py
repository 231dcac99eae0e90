"""Analytic costs: bytes and flops of a group against rates measured once on this machine.

    seconds = max(bytes moved / bandwidth, flops / rate) + launch overhead

`group_work(group)` counts a group's bytes (its inputs and outputs: intermediates of a fused
group stay in registers; apart from them, the constants inside it) and flops (2*M*N*K for contractions, a few per element otherwise).
`machine()` measures the rates the first time it is asked (about 0.1 s).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from graphopt.dialects import graph
from graphopt.transforms.work import group_work, op_flops, values_bytes

KERNEL_LAUNCH_SECONDS = 3e-6
"""What one more kernel costs beyond its work: the call, and its inputs and outputs read again
from memory instead of registers. The one launch cost of the cost model and the cost search."""


@dataclass(frozen=True)
class MachineRates:
    """Rates of this machine: memory bandwidth, BLAS and vector flop rates, call overheads."""

    bandwidth: float
    """Bytes per second of a large copy (read + write counted)."""
    blas_flops: float
    """Flops per second of NumPy's matmul on a mid-sized problem."""
    vector_flops: float = 16e9
    """Flops per second of a vectorized elementwise loop (one core)."""
    kernel_overhead: float = KERNEL_LAUNCH_SECONDS
    numpy_op_overhead: float = 5e-6

    def kernel_time(self, group: Operation, contraction_rate: float) -> float:
        """A fused kernel: moves its inputs and outputs once; contractions at `contraction_rate`."""
        work = group_work(group)
        compute = work.contraction_flops / contraction_rate + (work.flops - work.contraction_flops) / self.vector_flops
        return max(work.bytes / self.bandwidth, compute) + self.kernel_overhead

    def library_time(self, anchor: Operation, extra_bytes: int = 0) -> float:
        """One library call computing `anchor` at the BLAS rate, plus `extra_bytes` of memory
        passes around it (an im2col copy)."""
        _, contraction = op_flops(anchor)
        moved = values_bytes([*anchor.operands, *anchor.results])
        return max(moved / self.bandwidth, contraction / self.blas_flops) + extra_bytes / self.bandwidth + self.kernel_overhead

    def numpy_time(self, group: Operation) -> float:
        """Op by op in NumPy (vector code at a quarter of the rate of a compiled loop)."""
        return self.op_by_op_time(group, self.numpy_op_overhead, self.vector_flops / 4)

    def op_by_op_time(self, group: Operation, op_overhead: float, vector_rate: float) -> float:
        """Op by op, each op moving its own operands and results; contractions at the BLAS rate,
        other flops at `vector_rate`, plus `op_overhead` per op."""
        total = 0.0
        for op in graph.computed_ops(group):
            flops, contraction = op_flops(op)
            moved = values_bytes((*op.operands, *op.results))
            compute = contraction / self.blas_flops + (flops - contraction) / vector_rate
            total += max(moved / self.bandwidth, compute) + op_overhead
        return total


@functools.cache
def machine() -> MachineRates:
    """Measure this machine's rates once per process."""
    source = np.ones(1 << 22, np.float32)
    target = np.empty_like(source)
    copy = _best_time(lambda: np.copyto(target, source))
    a = np.ones((256, 256), np.float32)
    matmul = _best_time(lambda: a @ a)
    return MachineRates(bandwidth=2 * source.nbytes / copy, blas_flops=2 * 256**3 / matmul)


def _best_time(function, repeat: int = 5) -> float:
    function()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best
