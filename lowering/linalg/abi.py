"""The kernel ABI: a group (`Group`) becomes a function of its inputs, its non-splat constants
(argument attribute `graph.constant`, `CONSTANT_ARG_ATTR`; then the packed w of each conv run as
`conv_lanes`, packed by the lowering, also a `graph.constant`), the packed panels of the constant b
of each matmul run as the packed GEMM (`graph.pack_panels` = b until the pack-weights pass
packs it into a `graph.constant`, `PACK_ARG_ATTR`) and one buffer per result (`KERNEL_ATTR`).

A kernel that stays correct when a result's buffer is one of its inputs' says so with
`graph.may_overwrite` (`OVERWRITES_ATTR`: pairs of argument positions, the result's then the
input's); the runtime may then pass it one buffer for both, so neither argument is `noalias` in
LLVM. A conv + bias + residual + relu (`linalg/conv.py`; x, w, the bias, the residual, out):

    func.func @fused_conv2d_add_relu_0(%0: memref<1x9x5x7xf32>, %1: memref<13x9x1x1xf32>, %2: memref<13x1x1xf32>,
        %3: memref<1x13x5x7xf32>, %4: memref<1x13x5x7xf32>) attributes {graph.kernel, graph.may_overwrite = array<i64: 4, 3>}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase, DenseIntOrFPElementsAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph


KERNEL_ATTR = "graph.kernel"
CONSTANT_ARG_ATTR = "graph.constant"
PACK_ARG_ATTR = "graph.pack_panels"
OVERWRITES_ATTR = "graph.may_overwrite"


def overwrites(kernel: FuncOp) -> list[tuple[int, int]]:
    """(result argument, input argument) positions of each result the kernel may write over an
    input (`OVERWRITES_ATTR`)."""
    pairs = kernel.attributes.get(OVERWRITES_ATTR)
    values = pairs.get_values() if isinstance(pairs, DenseArrayBase) else ()
    return list(zip(values[::2], values[1::2]))


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
