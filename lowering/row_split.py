"""Row splitting: run a kernel on slices of its leading dimension, one slice per thread.

A kernel whose loop nests (`linalg.generic`s) all iterate d0 in parallel, and index every
buffer that depends on d0 by d0 * S + e in its first dimension (S a constant, 1 for plain
d0; e a loop dim other than d0 ranging over at most S, or nothing), computes each block of S
rows of that buffer from that block alone. Its rows are counted in units: `rows` is the gcd
of the generics' d0 extents, and a buffer of R rows has R / `rows` rows per unit (so a
blocked matmul, d0 over blocks of MB rows, and its epilogue, d0 over rows, split by blocks).
The same kernel compiled for `rows` units then computes any `rows` consecutive units: the
caller offsets the sliced arguments' pointers by `begin * row_bytes` and passes the others
(read-only, broadcast along d0) unchanged; the kernel's own temporaries (`memref.alloc`)
shrink to the slice.

    func.func @k(%x: memref<6x4xf32>, %w: memref<4xf32>, %out: memref<6x4xf32>)  ->  3 rows:
    func.func @k_rows3(%x: memref<3x4xf32>, %w: memref<4xf32>, %out: memref<3x4xf32>)

Row-local softmax/layer_norm (per-row statistics in a row-sized temporary), matmul looping
(m, k, n) or blocked (mb, nb, kb, mi, ki, ni), ukernel calls (`ukernels.py`: rows of their
first and last arguments, all of the middle one; a chunk calls the ukernel for its rows) and
elementwise kernels split; reductions over d0, gathers and reads at computed indices
(`memref.load`, `linalg.index` of d0) do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr

from graphopt.lowering import ukernels


CHUNK_ALIGNMENT = 16
"""A chunk's arguments start `begin * row_bytes` past the caller's and must keep the alignment
its kernel was compiled to assume (the cpu backend's 16 bytes): chunks start at multiples of
`RowSplit.granule` units."""


@dataclass(frozen=True)
class RowSplit:
    """How to run a kernel by rows: its count of row units and each argument's unit size."""

    rows: int
    row_bytes: tuple[int, ...]
    """Bytes between consecutive row units of each argument; 0 for arguments not sliced."""
    granule: int
    """Chunks start at multiples of this many units: the fewest that span a multiple of
    CHUNK_ALIGNMENT bytes in every argument (rows of 268 bytes: 4)."""
    sliced_temporaries: frozenset[SSAValue]


def row_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel` can run by rows, or None when it cannot."""
    block = kernel.body.block
    args = list(block.args)
    generics = [op for op in block.ops if isinstance(op, GenericOp)]
    calls = [op for op in block.ops if isinstance(op, func.CallOp)]
    if not (generics or calls) or any(
        not isinstance(op, (GenericOp, func.CallOp, arith.ConstantOp, memref.AllocOp, memref.DeallocOp, func.ReturnOp))
        for op in block.ops
    ):
        return None
    sliced: set[SSAValue] = set()
    whole: set[SSAValue] = set()
    extents: set[int] = set()
    for call in calls:  # a ukernel (`ukernels.py`): rows out from rows in, the middle argument whole
        rows_in, data, rows_out = call.arguments
        extents.add(rows_out.type.get_shape()[0])
        sliced.update((rows_in, rows_out))
        whole.add(data)
    for generic in generics:
        if generic.iterator_types.data[0].data.value != "parallel" or not _reads_rows_only(generic):
            return None
        ranges = generic.get_static_loop_ranges()
        extents.add(ranges[0])
        operands = [*generic.inputs, *generic.outputs]
        for operand, map_attr in zip(operands, generic.indexing_maps.data, strict=True):
            results = map_attr.data.results
            uses_d0 = [i for i, expr in enumerate(results) if 0 in expr.used_dims()]
            if uses_d0 == [0] and operand.type.get_shape()[0] == ranges[0] * _rows_per_step(results[0], ranges):
                sliced.add(operand)
            elif uses_d0:
                return None
            else:
                whole.add(operand)
    outputs = [o for g in generics for o in g.outputs] + [c.arguments[-1] for c in calls]
    written_args = {o for o in outputs if o in args}
    if sliced & whole or written_args - sliced or 0 in extents:  # no rows: nothing to split
        return None
    units = math.gcd(*extents)
    row_bytes = tuple(
        a.type.element_type.compile_time_size * _count(a.type.get_shape()) // units if a in sliced else 0 for a in args
    )
    granule = math.lcm(*(CHUNK_ALIGNMENT // math.gcd(b, CHUNK_ALIGNMENT) for b in row_bytes))
    return RowSplit(units, row_bytes, granule, frozenset(v for v in sliced if v not in args))


def _rows_per_step(index: AffineExpr, ranges: tuple[int, ...]) -> int:
    """S when `index` is d0 (S = 1) or d0 * S + e with e a loop dim ranging over at most S; else 0."""
    if index == AffineDimExpr(0):
        return 1
    if not (isinstance(index, AffineBinaryOpExpr) and index.kind == AffineBinaryOpKind.Add):
        return 0
    for step, offset in ((index.lhs, index.rhs), (index.rhs, index.lhs)):
        if (
            isinstance(step, AffineBinaryOpExpr)
            and step.kind == AffineBinaryOpKind.Mul
            and step.lhs == AffineDimExpr(0)
            and isinstance(step.rhs, AffineConstantExpr)
            and isinstance(offset, AffineDimExpr)
            and offset.position != 0
            and ranges[offset.position] <= step.rhs.value
        ):
            return step.rhs.value
    return 0


def row_chunk_kernel(kernel: func.FuncOp, split: RowSplit, rows: int, name: str) -> func.FuncOp:
    """`kernel` over `rows` rows of its sliced arguments and temporaries, named `name`."""
    old_args = list(kernel.body.block.args)
    arg_types = [_rows_of(a.type, rows, split) if split.row_bytes[i] else a.type for i, a in enumerate(old_args)]
    block = Block(arg_types=arg_types)
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    for op in kernel.body.block.ops:
        if isinstance(op, memref.AllocOp) and op.memref in split.sliced_temporaries:
            chunk_type = _rows_of(op.memref.type, rows, split)
            new_op = memref.AllocOp.get(chunk_type.element_type, shape=chunk_type.get_shape())
            mapping[op.memref] = new_op.memref
        elif isinstance(op, func.CallOp):
            new_op = ukernels.chunk_call(op, [mapping.get(v, v) for v in op.arguments])
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


def _rows_of(type_: MemRefType, rows: int, split: RowSplit) -> MemRefType:
    """`type_` cut to `rows` of the split's row units."""
    shape = type_.get_shape()
    return MemRefType(type_.element_type, [rows * shape[0] // split.rows, *shape[1:]])


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
