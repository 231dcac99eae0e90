"""The kernel ABI: a group (`Group`) becomes a function of its inputs, its non-splat constants
(argument attribute `graph.constant`, `CONSTANT_ARG_ATTR`; then the packed w of each conv run as
`conv_lanes`, packed by the lowering, also a `graph.constant`), the packed panels of the constant b
of each matmul run as the packed GEMM (`graph.pack_panels` = b until the pack-weights pass
packs it into a `graph.constant`, `PACK_ARG_ATTR`) and one buffer per result (`KERNEL_ATTR`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph


KERNEL_ATTR = "graph.kernel"
CONSTANT_ARG_ATTR = "graph.constant"
PACK_ARG_ATTR = "graph.pack_panels"


class Unsupported(Exception):
    """The group cannot be lowered to linalg; the message says why."""


@dataclass
class Group:
    """The ops of a kernel: its input values, its ops in order and the values it returns."""

    name: str
    inputs: list[SSAValue]
    ops: list[Operation]
    outputs: list[SSAValue]
    constant_inputs: dict[SSAValue, DenseIntOrFPElementsAttr]
    """The inputs that a graph.constant outside the group defines, with their values."""

    @staticmethod
    def of(op: Operation, name: str | None = None) -> Group:
        constant_inputs = {v: v.owner.value for v in op.operands if isinstance(v.owner, graph.ConstantOp)}
        if isinstance(op, graph.FusedOp):
            block = op.body.block
            return Group(
                name or op.group_name.data,
                list(block.args),
                list(block.ops)[:-1],
                list(block.last_op.operands),
                {arg: constant_inputs[v] for arg, v in zip(block.args, op.operands) if v in constant_inputs},
            )
        if not isinstance(op, graph.GraphOp):
            raise Unsupported(f"'{op.name}' is not a graph op")
        return Group(name or op.name.removeprefix("graph."), list(op.operands), [op], list(op.results), constant_inputs)

    def constant_value(self, value: SSAValue) -> DenseIntOrFPElementsAttr | None:
        """The value of `value` when a graph.constant defines it, inside the group or outside."""
        if isinstance(value.owner, graph.ConstantOp) and value.owner in self.ops:
            return value.owner.value
        return self.constant_inputs.get(value)
