"""Row splitting: run an elementwise kernel on slices of its leading dimension, one per thread.

A kernel that is one all-parallel `linalg.generic` over its arguments computes every row of
its iteration space independently. When every argument that depends on d0 is indexed by
exactly d0 in its first dimension, the same kernel compiled for `rows` rows computes any
`rows` consecutive rows: the caller offsets those arguments' pointers by `begin * row_bytes`
and leaves the others (broadcast along d0) as they are.

    func.func @k(%x: memref<6x4xf32>, %w: memref<4xf32>, %out: memref<6x4xf32>)  ->  row chunk of 3:
    func.func @k_rows3(%x: memref<3x4xf32>, %w: memref<4xf32>, %out: memref<3x4xf32>)
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Region
from xdsl.ir.affine import AffineDimExpr


@dataclass(frozen=True)
class RowSplit:
    """How to run a kernel by rows: its iteration count along d0 and each argument's row size."""

    rows: int
    row_bytes: tuple[int, ...]
    """Bytes between consecutive rows of each argument; 0 for arguments not sliced."""


def row_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel` can run by rows, or None when it cannot (not one parallel generic, ...)."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[0], GenericOp):
        return None
    generic = ops[0]
    if not generic.iterator_types.data or generic.iterator_types.data[0].data.value != "parallel":
        return None
    if any(isinstance(op, IndexOp) or op.name == "memref.load" for op in generic.body.walk()):
        return None
    args = list(kernel.body.block.args)
    operands = [*generic.inputs, *generic.outputs]
    if any(operand not in args for operand in operands):
        return None
    row_bytes = [0] * len(args)
    rows = None
    for operand, map_attr in zip(operands, generic.indexing_maps.data, strict=True):
        results = map_attr.data.results
        uses_d0 = [i for i, expr in enumerate(results) if 0 in expr.used_dims()]
        if not uses_d0:
            continue
        if uses_d0 != [0] or results[0] != AffineDimExpr(0):
            return None
        shape = operand.type.get_shape()
        if rows not in (None, shape[0]):
            return None
        rows = shape[0]
        element_bytes = operand.type.element_type.compile_time_size
        row_bytes[args.index(operand)] = element_bytes * _count(shape[1:])
    if rows is None:
        return None
    return RowSplit(rows, tuple(row_bytes))


def row_chunk_kernel(kernel: func.FuncOp, split: RowSplit, rows: int, name: str) -> func.FuncOp:
    """`kernel` over `rows` rows of its sliced arguments (see `row_split`), named `name`."""
    old_args = list(kernel.body.block.args)
    arg_types = [
        MemRefType(a.type.element_type, [rows, *a.type.get_shape()[1:]]) if split.row_bytes[i] else a.type
        for i, a in enumerate(old_args)
    ]
    block = Block(arg_types=arg_types)
    mapping = dict(zip(old_args, block.args))
    for op in kernel.body.block.ops:
        block.add_op(op.clone(value_mapper=mapping))
    chunk = func.FuncOp(name, (arg_types, []), Region(block))
    chunk.attributes.update(kernel.attributes)
    return chunk


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n

