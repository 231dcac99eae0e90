"""What a group computes: its flops and the bytes it moves, from the graph ops' shapes.

    work = group_work(group)      # Work(bytes=..., flops=..., contraction_flops=..., ops=...)
    op_flops(matmul)              # (2*M*N*K, 2*M*N*K): all flops, of which contraction flops

The cost model (graphopt/backends/costs.py), the runtime's profile and the lowering's
row-splitting decision (split-rows) read the same counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype

TRANSCENDENTAL = frozenset({"graph.exp", "graph.log", "graph.tanh", "graph.erf", "graph.sigmoid",
                            "graph.gelu", "graph.sin", "graph.cos", "graph.pow", "graph.softmax",
                            "graph.log_softmax"})
"""Ops costing about ten flops per element."""


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


def group_work(group: Operation) -> Work:
    counted = [op_flops(op) for op in graph.computed_ops(group)]
    moved = sum(_nbytes(v) for v in (*group.operands, *group.results))
    constants = values_bytes(op.result for op in group.walk() if isinstance(op, graph.ConstantOp))
    return Work(moved, sum(f for f, _ in counted), sum(c for _, c in counted), len(counted), constants)
