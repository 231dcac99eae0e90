"""Row splitting: run a kernel on slices of its leading dimension, one slice per thread.

A kernel whose loop nests (`linalg.generic`s) all iterate d0 in parallel over the same N rows,
and index every buffer that depends on d0 by exactly d0 in its first dimension, computes
each row from that row alone. The same kernel compiled for `rows` rows then computes any
`rows` consecutive rows: the caller offsets the sliced arguments' pointers by
`begin * row_bytes` and passes the others (read-only, broadcast along d0) unchanged; the
kernel's own temporaries (`memref.alloc`) shrink to the slice.

    func.func @k(%x: memref<6x4xf32>, %w: memref<4xf32>, %out: memref<6x4xf32>)  ->  3 rows:
    func.func @k_rows3(%x: memref<3x4xf32>, %w: memref<4xf32>, %out: memref<3x4xf32>)

Row-local softmax/layer_norm (per-row statistics in a row-sized temporary), matmul looping
(m, k, n) and elementwise kernels split; reductions over d0, gathers and reads at computed
indices (`memref.load`, `linalg.index` of d0) do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr


@dataclass(frozen=True)
class RowSplit:
    """How to run a kernel by rows: its iteration count along d0 and each argument's row size."""

    rows: int
    row_bytes: tuple[int, ...]
    """Bytes between consecutive rows of each argument; 0 for arguments not sliced."""
    sliced_temporaries: frozenset[SSAValue]


def row_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel` can run by rows, or None when it cannot."""
    block = kernel.body.block
    args = list(block.args)
    generics = [op for op in block.ops if isinstance(op, GenericOp)]
    if not generics or any(not isinstance(op, (GenericOp, memref.AllocOp, memref.DeallocOp, func.ReturnOp)) for op in block.ops):
        return None
    sliced: set[SSAValue] = set()
    whole: set[SSAValue] = set()
    rows: set[int] = set()
    for generic in generics:
        if generic.iterator_types.data[0].data.value != "parallel" or not _reads_rows_only(generic):
            return None
        operands = [*generic.inputs, *generic.outputs]
        for operand, map_attr in zip(operands, generic.indexing_maps.data, strict=True):
            results = map_attr.data.results
            uses_d0 = [i for i, expr in enumerate(results) if 0 in expr.used_dims()]
            if uses_d0 == [0] and results[0] == AffineDimExpr(0):
                sliced.add(operand)
                rows.add(operand.type.get_shape()[0])
            elif uses_d0:
                return None
            else:
                whole.add(operand)
    written_args = {o for g in generics for o in g.outputs if o in args}
    if len(rows) != 1 or sliced & whole or written_args - sliced:
        return None
    row_bytes = tuple(
        a.type.element_type.compile_time_size * _count(a.type.get_shape()[1:]) if a in sliced else 0 for a in args
    )
    return RowSplit(rows.pop(), row_bytes, frozenset(v for v in sliced if v not in args))


def row_chunk_kernel(kernel: func.FuncOp, split: RowSplit, rows: int, name: str) -> func.FuncOp:
    """`kernel` over `rows` rows of its sliced arguments and temporaries, named `name`."""
    old_args = list(kernel.body.block.args)
    arg_types = [_rows_of(a.type, rows) if split.row_bytes[i] else a.type for i, a in enumerate(old_args)]
    block = Block(arg_types=arg_types)
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    for op in kernel.body.block.ops:
        if isinstance(op, memref.AllocOp) and op.memref in split.sliced_temporaries:
            chunk_type = _rows_of(op.memref.type, rows)
            new_op = memref.AllocOp.get(chunk_type.element_type, shape=chunk_type.get_shape())
            mapping[op.memref] = new_op.memref
        else:
            new_op = op.clone(value_mapper=mapping)
        block.add_op(new_op)
    chunk = func.FuncOp(name, (arg_types, []), Region(block))
    chunk.attributes.update(kernel.attributes)
    return chunk


def _reads_rows_only(generic: GenericOp) -> bool:
    """No body reads at computed indices: no memref.load, no linalg.index of d0."""
    for op in generic.body.walk():
        if op.name == "memref.load" or (isinstance(op, IndexOp) and op.dim.value.data == 0):
            return False
    return True


def _rows_of(type_: MemRefType, rows: int) -> MemRefType:
    return MemRefType(type_.element_type, [rows, *type_.get_shape()[1:]])


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
