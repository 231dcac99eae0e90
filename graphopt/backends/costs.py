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
from graphopt.dialects.attributes import numpy_dtype

TRANSCENDENTAL = frozenset({"graph.exp", "graph.log", "graph.tanh", "graph.erf", "graph.sigmoid",
                            "graph.gelu", "graph.sin", "graph.cos", "graph.pow", "graph.softmax",
                            "graph.log_softmax"})
"""Ops costing about ten flops per element."""


KERNEL_LAUNCH_SECONDS = 3e-6
"""What one more kernel costs beyond its work: the call, and its inputs and outputs read again
from memory instead of registers. The one launch cost of the cost model and the cost search."""


@dataclass(frozen=True)
class Work:
    bytes: int
    """Of the group's inputs and outputs."""
    flops: int
    contraction_flops: int
    ops: int
    constant_bytes: int = 0
    """Of the constants inside the group (weights folded into it), which its kernel reads too."""


def _nbytes(value) -> int:
    return int(np.prod(value.type.get_shape(), dtype=np.int64)) * numpy_dtype(value.type.get_element_type()).itemsize


def values_bytes(values) -> int:
    """Bytes of the tensors `values` (SSA values with static shapes)."""
    return sum(_nbytes(v) for v in values)


def _elements(value) -> int:
    return int(np.prod(value.type.get_shape(), dtype=np.int64))


def op_flops(op: Operation) -> tuple[int, int]:
    """(all flops, of which contraction flops) of one graph op."""
    if isinstance(op, graph.MatmulOp):
        k = op.a.type.get_shape()[-1]
        flops = 2 * _elements(op.result) * k
        return flops, flops
    if isinstance(op, graph.Conv2dOp):
        _, per_group, kh, kw = op.w.type.get_shape()
        flops = 2 * _elements(op.result) * per_group * kh * kw
        return flops, flops
    if isinstance(op, graph.Pool2dOp):
        kh, kw = op.get("kernel")
        return _elements(op.result) * kh * kw, 0
    if not op.results:
        return 0, 0
    per_element = 10 if op.name in TRANSCENDENTAL else 1
    touched = max([_elements(v) for v in (*op.operands, *op.results)], default=0)
    return per_element * touched, 0


def group_ops(group: Operation) -> list[Operation]:
    """The ops a group computes: a graph.fused's body without its yield, or the op itself."""
    return list(group.body.block.ops)[:-1] if isinstance(group, graph.FusedOp) else [group]


def group_work(group: Operation) -> Work:
    ops = group_ops(group)
    counted = [op_flops(op) for op in ops if not isinstance(op, graph.ConstantOp)]
    moved = sum(_nbytes(v) for v in (*group.operands, *group.results))
    constants = values_bytes(op.result for op in ops if isinstance(op, graph.ConstantOp))
    return Work(moved, sum(f for f, _ in counted), sum(c for _, c in counted), len(counted), constants)


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
        for op in group_ops(group):
            flops, contraction = op_flops(op)
            moved = sum(_nbytes(v) for v in (*op.operands, *op.results))
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
