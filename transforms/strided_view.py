"""Strided views: a chain of graph.reshape and graph.transpose that moves no element but is a
view of its first operand's buffer, read or written through strides.

    %r = graph.reshape %q : (tensor<128x256xf32>) -> tensor<128x4x64xf32>
    %t = graph.transpose %r {perm = array<i64: 1, 0, 2>} : (tensor<128x4x64xf32>) -> tensor<4x128x64xf32>

%t is %q's buffer with strides (64, 256, 1): element (h, s, d) at 64 h + 256 s + d (`read_view`).
Attention's head merge, %m = reshape(transpose(%o, [1, 0, 2])) into [128, 256], writes %o
[4, 128, 64] into %m's buffer at the same strides (`written_view`). fuse lets such chains join a
matmul's group (operand a, output view) and the matmul's lowering reads and writes through them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.ir import SSAValue

from graphopt.dialects import graph

Strides = tuple[int, ...]


def contiguous_strides(shape: Sequence[int]) -> Strides:
    """The strides of a row-major buffer of `shape`."""
    return tuple(math.prod(shape[axis + 1 :]) for axis in range(len(shape)))


def reshaped_strides(shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]) -> Strides | None:
    """The strides of a tensor of `shape` at `strides` read row-major as `new_shape` (the same
    element count), or None where it merges dims that do not lie at one stride from each other.
    Dims of one element take stride 0."""
    old = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    new_dims = [axis for axis, size in enumerate(new_shape) if size != 1]
    result = [0] * len(new_shape)
    i = j = 0
    while i < len(old) and j < len(new_dims):
        old_group, new_group = [old[i]], [new_dims[j]]
        old_count, new_count = old[i][0], new_shape[new_dims[j]]
        while old_count != new_count:
            if old_count < new_count:
                i += 1
                old_group.append(old[i])
                old_count *= old[i][0]
            else:
                j += 1
                new_group.append(new_dims[j])
                new_count *= new_shape[new_dims[j]]
        if any(outer[1] != inner[1] * inner[0] for outer, inner in zip(old_group, old_group[1:])):
            return None
        stride = old_group[-1][1]
        for axis in reversed(new_group):
            result[axis] = stride
            stride *= new_shape[axis]
        i, j = i + 1, j + 1
    return tuple(result)


def read_view(value: SSAValue, is_base: Callable[[SSAValue], bool]) -> tuple[SSAValue, Strides] | None:
    """(base, strides) when `value` is a chain of reshapes and transposes of a value `base` for
    which `is_base` holds (the chain's own values do not), viewing base's row-major buffer at
    `strides`; None otherwise."""
    chain = []
    while not is_base(value):
        if not isinstance(value.owner, graph.ReshapeOp | graph.TransposeOp):
            return None
        chain.append(value.owner)
        value = value.owner.operands[0]
    base, strides = value, contiguous_strides(value.type.get_shape())
    for op in reversed(chain):
        if isinstance(op, graph.TransposeOp):
            strides = tuple(strides[axis] for axis in op.get("perm"))
        else:
            strides = reshaped_strides(op.operands[0].type.get_shape(), strides, op.result.type.get_shape())
            if strides is None:
                return None
    return base, strides


def written_view(value: SSAValue, result: SSAValue) -> Strides | None:
    """The strides at which `value` lies in `result`'s row-major buffer when `result` is `value`
    through a chain of reshapes and transposes, each value of it used once; None otherwise."""
    chain = []
    while result is not value:
        if not isinstance(result.owner, graph.ReshapeOp | graph.TransposeOp):
            return None
        chain.append(result.owner)
        result = result.owner.operands[0]
        if not result.has_one_use():
            return None
    strides = contiguous_strides(chain[0].result.type.get_shape()) if chain else contiguous_strides(value.type.get_shape())
    for op in chain:
        shape = op.operands[0].type.get_shape()
        if isinstance(op, graph.TransposeOp):
            inverse = [0] * len(shape)
            for position, axis in enumerate(op.get("perm")):
                inverse[axis] = strides[position]
            strides = tuple(inverse)
        else:
            strides = reshaped_strides(op.result.type.get_shape(), strides, shape)
            if strides is None:
                return None
    return strides
