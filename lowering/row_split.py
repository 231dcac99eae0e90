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
shrink to the slice. An argument read or written at d0 * c elements plus terms without d0
from its start though d0 indexes a later dim (attention's K [seq, heads * head_dim], read by
heads while b is packed; a transpose's x or out) is passed offset by begin * c elements and
keeps its type (strided). Where d0 alone is one of its indices, the chunk writes that index
`d0 floordiv 1` (`_unbounded_rows`): linalg would take d0's bound from that whole dim, and a
sliced buffer indexed by d0 alone must give it instead.

    func.func @k(%x: memref<6x4xf32>, %w: memref<4xf32>, %out: memref<6x4xf32>)  ->  3 rows:
    func.func @k_rows3(%x: memref<3x4xf32>, %w: memref<4xf32>, %out: memref<3x4xf32>)

Where that gives one row or none (d0 iterates once: ConvNeXt's [1, 56, 56, c] tensors, whose
function keeps its batch dim for its convolutions), each loop nest's first loop iterating more
than once takes d0's place, and the buffers are cut along their first dim of more than one element; the
packed GEMM's rows are out's first such dim before its columns (`ukernels.rows`):

    func.func @k(%x: memref<1x12x8xf32>, %out: memref<1x12x8xf32>)  ->  6 rows:
    func.func @k_rows6(%x: memref<1x6x8xf32>, %out: memref<1x6x8xf32>)

Row-local softmax/layer_norm (per-row statistics in a row-sized temporary), matmul looping
(m, k, n) or blocked (mb, nb, kb, mi, ki, ni), ukernel calls (`ukernels.py`: rows of their
first argument, out and a tile epilogue's residual, all of the others; a chunk calls the
ukernel for its rows; a batched GEMM's strided views, `ukernels.strided_by_rows`, are passed
from the chunk's first row, whole in type, and may be written) and elementwise kernels split; reductions over d0, gathers and reads at
computed indices (`memref.load`, `linalg.index` of d0) do not. A loop nest writing only
temporaries that a ukernel call reads whole (b's panels, packed at run time) runs whole in
every chunk.

A convolution of one image, or a dense layer of one row, has one row: `channel_split` runs it
by blocks of its output channels (columns) instead (see there), or `position_split` the conv
GEMM by blocks of its output positions or whole output rows, through the same chunks: a
buffer's rows are those of its leading dimension of more than one element (the dims before it
are 1). Loop dims iterating once, other than the row loop, index as 0.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, MemRefType, i64
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from graphopt.lowering import ukernels
from graphopt.lowering.llvm_text import VECTOR


CHUNK_ALIGNMENT = 16
"""A chunk's arguments start `begin * row_bytes` past the caller's and must keep the alignment
its kernel was compiled to assume (the cpu backend's 16 bytes): chunks start at multiples of
`RowSplit.granule` units."""
POSITION_CHUNK_COLUMNS = VECTOR
"""Output positions (columns of the conv GEMM) a chunk of positions starts at a multiple of
(`position_split`): a vector's, so that chunks are even where a panel's (64 with AVX-512)
would not be. A chunk whose columns end inside a panel runs that panel's columns as a tile of
their vectors (the last under a mask). Measured on 2026-11-29 (Emerald Rapids, 2 threads): 784
positions (28x28) ran as 448 + 336 with panels, as 400 + 384 now; 3136 (56x56) as 1600 + 1536,
as 1568 + 1568 now. Alone (conv + bias + relu, interleaved, two runs) 512->128 at 28 0.88x and
0.94x, 320->64 at 28 0.89x and 0.92x, 256->64 at 56 0.91x and 0.93x, 64->256 at 56 0.98x twice,
128->512 at 28 0.92x and 1.01x. Inside ResNet-50 (each step timed in plan order, both plans
compiled in one process and interleaved, workers awake), three runs: its 28x28 GEMMs 0.93-0.97x
in two and 1.06-1.13x in the first, its steps' sum 0.98-0.99x in the two; whole models at 2
threads within noise (ResNet-50 0.953 and 1.049, Inception-v2 0.986 and 0.996, Inception-v1
1.014 and 1.006, SqueezeNet 0.999 and 1.003, MobileNet-v2-ish 0.991 and 0.996). Without AVX-512
a panel is a vector: unchanged there."""


_SPLITTABLE_OPS = (GenericOp, func.CallOp, arith.ConstantOp, memref.AllocOp, memref.DeallocOp, func.ReturnOp)
"""The ops a kernel that runs by chunks may hold: loop nests, a ukernel call, their scalar
constants (a generalized `linalg.fill`'s value) and temporaries."""


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
    strided_arguments: frozenset[SSAValue] = frozenset()
    """Arguments indexed at d0 * c + (terms without d0) elements along a later dim (attention's K,
    read by heads; a transpose's x or out): a chunk gets them offset by its first row's c
    elements, whole in type."""
    row_loops: tuple[int | None, ...] = ()
    """The row loop dim of each loop nest of the kernel, in order (None: a nest run whole, or a
    split that is not by loops): a chunk writes a strided argument's index that is that dim
    alone as `d floordiv 1` (`_unbounded_rows`), so that linalg takes the loop's bound from the
    sliced buffers, not from the strided argument's whole dim."""
    ragged: bool = False
    """The data operand of a split by channels holds more units than the split (its last block
    padded): the last chunk takes the rest of every sliced argument."""
    columns: int = 0
    """The columns of the conv GEMM's b and out per unit (`position_split`: 1 for positions, an
    output row's for rows): a chunk calls the ukernel for its columns; 0 for other splits."""
    static_rows: bool = False
    """Each chunk is a function of its own that computes its output rows from the arguments
    passed whole (`output_row_split`: row_bytes all 0)."""


def row_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel` can run by rows, or None when it cannot: by d0, or, where that gives one
    row or none, by each loop nest's first loop of more than one iteration (see the module
    docstring)."""
    by_d0 = _split_by_loop(kernel, lambda ranges: 0)
    if by_d0 is not None and by_d0.rows > 1:
        return by_d0
    return _split_by_loop(kernel, _first_long_loop) or by_d0


def _first_long_loop(ranges: Sequence[int]) -> int:
    """The first loop dim iterating more than once (0 when none does)."""
    return next((dim for dim, extent in enumerate(ranges) if extent > 1), 0)


def _split_by_loop(kernel: func.FuncOp, row_loop: Callable[[Sequence[int]], int]) -> RowSplit | None:
    """`row_split` with each loop nest's rows iterated by the loop dim `row_loop(its ranges)`."""
    block = kernel.body.block
    args = list(block.args)
    generics = [op for op in block.ops if isinstance(op, GenericOp)]
    calls = [op for op in block.ops if isinstance(op, func.CallOp)]
    if not (generics or calls) or any(not isinstance(op, _SPLITTABLE_OPS) for op in block.ops):
        return None
    sliced: set[SSAValue] = set()
    whole: set[SSAValue] = set()
    strided: dict[SSAValue, int] = {}
    """Each strided argument's offset, in elements, across a generic's whole d0 range."""
    extents: set[int] = set()
    row_loops: list[int | None] = []
    for call in calls:
        call_sliced = ukernels.sliced_by_rows(call)
        call_strided = ukernels.strided_by_rows(call)
        call_whole = set(call.arguments) - call_sliced - call_strided.keys()
        extents.add(ukernels.rows(call))
        for operand, step in call_strided.items():
            if operand not in args or strided.setdefault(operand, step * ukernels.rows(call)) != step * ukernels.rows(call):
                return None
        sliced |= call_sliced
        whole |= call_whole
    for generic in generics:
        if all(o not in args and o in whole for o in generic.outputs):  # what a call reads whole
            whole.update(generic.inputs, generic.outputs)
            row_loops.append(None)
            continue
        ranges = generic.get_static_loop_ranges()
        row = row_loop(ranges)
        row_loops.append(row)
        if generic.iterator_types.data[row].data.value != "parallel" or not _reads_rows_only(generic, row):
            return None
        extents.add(ranges[row])
        operands = [*generic.inputs, *generic.outputs]
        bounded = unbounded = False
        """Whether a sliced buffer indexes the row loop alone (gives a chunk its bound), and a strided one does."""
        for operand, map_attr in zip(operands, generic.indexing_maps.data, strict=True):
            results = _without_unit_loops(map_attr.data.results, ranges, row)
            uses = [i for i, expr in enumerate(results) if row in expr.used_dims()]
            if not uses:
                whole.add(operand)
                continue
            rows_read = ranges[row] * _rows_per_step(results[uses[0]], ranges, row)
            if len(uses) == 1 and _cuts_rows(operand.type.get_shape(), uses[0], rows_read):
                sliced.add(operand)
                bounded |= results[uses[0]] == AffineDimExpr(row)
            elif operand in args:
                step = _row_step(results, operand.type.get_shape(), row)
                if step is None or strided.setdefault(operand, step * ranges[row]) != step * ranges[row]:
                    return None
                unbounded |= AffineDimExpr(row) in results
            else:
                return None
        if unbounded and not bounded:
            return None  # the chunk's row loop would have no bound (`_unbounded_rows`)
    outputs = [o for g in generics for o in g.outputs] + [c.arguments[-1] for c in calls]
    written_args = {o for o in outputs if o in args}
    if sliced & whole or strided.keys() & (sliced | whole) or written_args - sliced - strided.keys() or 0 in extents:
        return None  # (no rows: nothing to split)
    units = math.gcd(*extents)

    def unit_bytes(a: SSAValue) -> int:
        elements = _count(a.type.get_shape()) if a in sliced else strided.get(a, 0)
        return a.type.element_type.compile_time_size * elements // units

    row_bytes = tuple(unit_bytes(a) for a in args)
    granule = math.lcm(*(CHUNK_ALIGNMENT // math.gcd(b, CHUNK_ALIGNMENT) for b in row_bytes))
    temporaries = frozenset(v for v in sliced if v not in args)
    return RowSplit(units, row_bytes, granule, temporaries, frozenset(strided), tuple(row_loops))


def _without_unit_loops(index: Sequence[AffineExpr], ranges: Sequence[int], row: int) -> tuple[AffineExpr, ...]:
    """`index` with the loop dims iterating once, other than d<row>, set to 0: (d0 * 24 + d1)
    is d1 where d0 iterates once (a matmul's [24, 63] out read by a reshape's nest over [1, 24, 63])."""
    dims = [AffineConstantExpr(0) if extent == 1 and dim != row else AffineDimExpr(dim) for dim, extent in enumerate(ranges)]
    return tuple(expr.replace_dims_and_symbols(dims, []) for expr in index)


def _cuts_rows(shape: Sequence[int], axis: int, rows: int) -> bool:
    """Is `axis` of `shape` `rows` long, with one element in each dim before it (so that a cut
    along it is contiguous)?"""
    return shape[axis] == rows and all(extent == 1 for extent in shape[:axis])


def _row_step(index: Sequence[AffineExpr], shape: Sequence[int], row: int) -> int | None:
    """c when the element at `index` of a row-major buffer of `shape` lies d<row> * c elements
    plus terms without d<row> from its start (d<row> outside every floordiv and mod), else None."""
    strides = [_count(shape[axis + 1 :]) for axis in range(len(shape))]
    steps = [_row_coefficient(expr, row) for expr in index]
    return None if None in steps else sum(step * stride for step, stride in zip(steps, strides))


def _row_coefficient(expr: AffineExpr, row: int) -> int | None:
    """d(expr)/d(d<row>) when `expr` is linear in d<row>, else None."""
    if row not in expr.used_dims():
        return 0
    if expr == AffineDimExpr(row):
        return 1
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        lhs, rhs = _row_coefficient(expr.lhs, row), _row_coefficient(expr.rhs, row)
        return None if lhs is None or rhs is None else lhs + rhs
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mul:
        for factor, constant in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            if isinstance(constant, AffineConstantExpr):
                step = _row_coefficient(factor, row)
                return None if step is None else step * constant.value
    return None


def _rows_per_step(index: AffineExpr, ranges: tuple[int, ...], row: int) -> int:
    """S when `index` is d<row> (S = 1) or d<row> * S + e with e another loop dim ranging over
    at most S; else 0."""
    if index == AffineDimExpr(row):
        return 1
    if not (isinstance(index, AffineBinaryOpExpr) and index.kind == AffineBinaryOpKind.Add):
        return 0
    for step, offset in ((index.lhs, index.rhs), (index.rhs, index.lhs)):
        if (
            isinstance(step, AffineBinaryOpExpr)
            and step.kind == AffineBinaryOpKind.Mul
            and step.lhs == AffineDimExpr(row)
            and isinstance(step.rhs, AffineConstantExpr)
            and isinstance(offset, AffineDimExpr)
            and offset.position != row
            and ranges[offset.position] <= step.rhs.value
        ):
            return step.rhs.value
    return 0


def channel_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel`, a convolution ukernel call on one image and the loop nests around it, can
    run by blocks of the conv's output channels, or None when it cannot.

    Its row units are the call's channel units (`ukernels.channel_units`: output channels,
    groups, or a one-row GEMM's columns). The data operand (weights, b's panels) may hold more
    units than out, its last block padded: its bytes per unit are its own, and the last chunk
    takes the rest of each sliced buffer (`RowSplit.ragged`). Every sliced buffer is cut along
    its leading dimension of more than one element, which the dims before it (of one element)
    make contiguous: w along its output channels, out and the epilogues' buffers along their
    channels. A loop nest that reads or writes a sliced buffer must index that dimension with a
    parallel loop dim `d` alone, and every buffer it indexes by `d` likewise (it computes each
    unit from that unit alone); its other buffers are read whole. A loop nest that only writes
    buffers read whole (the stride-phase copy of x, which each output channel of a one-group
    conv reads all of) runs whole in every chunk.

        func.func @k(%x: memref<1x8x7x6xf32>, %w: memref<16x8x3x3xf32>, %b: memref<16x1x1xf32>, %out: memref<1x16x7x6xf32>)
          ->  8 output channels:
        func.func @k_rows8(%x: memref<1x8x7x6xf32>, %w: memref<8x8x3x3xf32>, %b: memref<8x1x1xf32>, %out: memref<1x8x7x6xf32>)
    """
    block = kernel.body.block
    calls = [op for op in block.ops if isinstance(op, func.CallOp)]
    if len(calls) != 1 or any(not isinstance(op, _SPLITTABLE_OPS) for op in block.ops):
        return None
    channels = ukernels.channel_units(calls[0])
    if channels is None or channels.units < 2:
        return None
    units = channels.units
    sliced, whole = _channel_slices(calls[0], channels.first_sliced)
    out = calls[0].arguments[-1]
    pending = [op for op in block.ops if isinstance(op, GenericOp)]
    while pending:  # from the call outwards: each loop nest placed by a buffer already placed
        for generic in pending:
            placed = _place_channel_loop(generic, sliced, whole)
            if placed is None:
                return None
            if placed:
                pending.remove(generic)
                break
        else:
            return None
    args = list(block.args)
    written = {o for op in block.ops if isinstance(op, GenericOp) for o in op.outputs} | {out}
    if sliced & whole or any(o in args for o in written - sliced):
        return None
    data = ukernels.operands(calls[0]).data
    if any(v.type.get_shape()[_leading_axis(v.type.get_shape())] % units for v in sliced - {data}):
        return None
    if data is not None and _bytes(data.type) % channels.data_units:
        return None

    def unit_bytes(a: SSAValue) -> int:
        return _bytes(a.type) // (channels.data_units if a is data else units) if a in sliced else 0

    row_bytes = tuple(unit_bytes(a) for a in args)
    granule = math.lcm(channels.granule, *(CHUNK_ALIGNMENT // math.gcd(b, CHUNK_ALIGNMENT) for b in row_bytes))
    if data is not None and granule * unit_bytes(data) % _slice_bytes(data.type):
        return None  # chunks would cut the data's blocks
    ragged = channels.data_units != units
    return RowSplit(units, row_bytes, granule, frozenset(v for v in sliced if v not in args), ragged=ragged)


def position_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel`, a call of the conv GEMM on one image, can run by blocks of its output
    positions, or None when it cannot. Two kinds of kernel do:

    - the call and nothing else (a 1x1 of stride 1, whose b is x itself), with few output
      channels (`ukernels.position_units`): the units are positions, columns of x, of the
      residual and of out; chunks start at multiples of POSITION_CHUNK_COLUMNS positions;
    - the call on an im2col copy of x (an argument: the conv does not pad) and the loop nest
      writing it (`_im2col_copy`), with many positions per channel (`ukernels.output_row_units`):
      the units are whole output rows; a chunk copies the im2col columns of its rows only, into
      its own copy (the temporary cut along its output rows), from x's first row it reads.

    A chunk gets x, the residual and out from its first unit, whole in type (strided: their rows
    stay a whole row of positions, or of x, apart), and w and the per-channel values whole; it
    calls the ukernel for its columns (`packed_gemm.columns_chunk_name`). The last chunk takes
    the rest.

        func.func @k(%x: memref<1x128x55x55xf32>, %w: memref<16x128x1x1xf32>, %out: memref<1x16x55x55xf32>)
          ->  1520 positions:
        func.func @k_rows1520(%x: memref<1x128x55x55xf32>, %w: memref<16x128x1x1xf32>, %out: memref<1x16x55x55xf32>)
          calling @graphopt_sgemm_rowmajor_1x128x55x55_16x128x1x1_1x16x55x55_n1520

        func.func @stem(%x: memref<1x3x224x224xf32>, %w: memref<64x3x3x3xf32>, %out: memref<1x64x111x111xf32>)
          ->  56 output rows (x's rows 448 floats apart a unit, out's 111):
        func.func @stem_rows56(%x: memref<1x3x224x224xf32>, %w: memref<64x3x3x3xf32>, %out: memref<1x64x111x111xf32>)
          copying into memref<1x3x3x3x56x111xf32>, calling @graphopt_sgemm_rowmajor_1x3x3x3x111x111_64x3x3x3_1x64x111x111_n6216
    """
    block = kernel.body.block
    ops = [op for op in block.ops if not isinstance(op, (func.ReturnOp, memref.DeallocOp))]
    if not ops or not isinstance(ops[-1], func.CallOp):
        return None
    call, args = ops[-1], list(block.args)
    parts = ukernels.operands(call)
    if len(ops) == 1:
        units, columns, temporaries = ukernels.position_units(call), 1, frozenset()
        steps = {parts.first: 1}  # elements a unit, of each strided argument
    else:
        copy = _im2col_copy(ops[:-1], parts.first)
        units = None if copy is None else ukernels.output_row_units(call)
        columns, temporaries = parts.like_out[-1].type.get_shape()[-1], frozenset({parts.first})
        steps = dict([copy] if copy else [])
    steps.update((v, columns) for v in parts.like_out)
    if units is None or not steps.keys() <= set(args):
        return None
    row_bytes = tuple(a.type.element_type.compile_time_size * steps.get(a, 0) for a in args)
    panels = POSITION_CHUNK_COLUMNS if columns == 1 else 1
    granule = math.lcm(panels, *(CHUNK_ALIGNMENT // math.gcd(b, CHUNK_ALIGNMENT) for b in row_bytes))
    return RowSplit(units, row_bytes, granule, temporaries, frozenset(steps), columns=columns)


def output_row_split(kernel: func.FuncOp) -> RowSplit | None:
    """How `kernel`, a call of the lanes conv or of Winograd's on one image (`ukernels.conv_output_rows`) and
    the loop nests that write its phases (x zero-padded: temporaries only), can run by blocks
    of its output rows, or None when it cannot. Each chunk is a function of its own: it pads
    into its own phases the rows of x that its output rows read (`row_chunk_kernel`) and calls
    the ukernel for its rows (`output_rows.chunk_name`) on the arguments passed whole
    (Winograd's: with a scratch buffer of its own). Chunks start at multiples of the ukernel's
    granule of rows: a super-tile's, a tile row's.

        func.func @k(%x: memref<1x128x56x56xf32>, %w: memref<2x128x3x3x16xf32>, %out: memref<1x32x56x56xf32>)
          ->  28 output rows from row 28:
        func.func @k_oh28to56(%x: memref<1x128x56x56xf32>, %w: memref<2x128x3x3x16xf32>, %out: memref<1x32x56x56xf32>)
          calling @graphopt_sconv_lanes_r58_d1x1_1x128x1x1x3366_2x128x3x3x16_1x32x56x56_oh28to56
    """
    block = kernel.body.block
    ops = [op for op in block.ops if not isinstance(op, (func.ReturnOp, memref.DeallocOp))]
    if not ops or not isinstance(ops[-1], func.CallOp) or any(not isinstance(op, _SPLITTABLE_OPS) for op in ops):
        return None
    units = ukernels.conv_output_rows(ops[-1])
    temporaries = {op.memref for op in ops if isinstance(op, memref.AllocOp)}
    writes_temporaries = all(set(op.outputs) <= temporaries for op in ops if isinstance(op, GenericOp))
    if units is None or not writes_temporaries:
        return None
    rows, granule = units
    return RowSplit(rows, (0,) * len(block.args), granule, frozenset(), static_rows=True)


_IM2COL_ROW = 4
"""The loop dim of the output rows (oh) in the im2col copy's loop nest (n, c, kh, kw, oh, ow)."""


def _im2col_copy(ops: Sequence, b: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, the elements of x between consecutive output rows) when `ops` allocate `b` and copy
    an argument x into it by one loop nest of parallel loops over b's dims (n, c, kh, kw, oh,
    ow), reading x at indices linear in oh (`linalg/conv.py`'s im2col copy of a conv that does
    not pad); else None."""
    if len(ops) != 2 or not isinstance(ops[0], memref.AllocOp) or ops[0].memref != b or not isinstance(ops[1], GenericOp):
        return None
    copy = ops[1]
    if list(copy.outputs) != [b] or len(copy.inputs) != 1:
        return None
    x = copy.inputs[0]
    read, written = (m.data.results for m in copy.indexing_maps.data)
    dims = tuple(AffineDimExpr(d) for d in range(len(b.type.get_shape())))
    parallel = all(t.data.value == "parallel" for t in copy.iterator_types.data)
    if written != dims or not parallel or not _reads_rows_only(copy, _IM2COL_ROW):
        return None
    step = _row_step(read, x.type.get_shape(), _IM2COL_ROW)
    return (x, step) if step else None


def _channel_slices(call: func.CallOp, first_sliced: bool) -> tuple[set[SSAValue], set[SSAValue]]:
    """The operands of a convolution ukernel call (`ukernels.operands`) that a chunk of its
    output channels slices (out, the epilogue's operands, the weights, and the first operand
    when `first_sliced`: a grouped conv's input channels), and those it reads whole."""
    parts = ukernels.operands(call)
    sliced = {*parts.like_out, *parts.per_channel} | {v for v in (parts.data,) if v is not None}
    sliced |= {parts.first} if first_sliced else set()
    return sliced, set(call.arguments) - sliced


def _place_channel_loop(generic: GenericOp, sliced: set[SSAValue], whole: set[SSAValue]) -> bool | None:
    """Add `generic`'s buffers to `sliced` or `whole` (see `channel_split`) and return True when
    one of them is placed already; False when none is yet; None when it cannot run by channels."""
    operands = [*generic.inputs, *generic.outputs]
    maps = [m.data.results for m in generic.indexing_maps.data]
    known = next(((o, r) for o, r in zip(operands, maps) if o in sliced), None)
    if known is None:
        if not any(o in whole for o in generic.outputs):
            return False
        whole.update(operands)
        return True
    operand, results = known
    index = results[_leading_axis(operand.type.get_shape())]
    if not isinstance(index, AffineDimExpr):
        return None
    dim = index.position
    if generic.iterator_types.data[dim].data.value != "parallel" or not _reads_rows_only(generic, dim):
        return None
    extent = generic.get_static_loop_ranges()[dim]
    for operand, results in zip(operands, maps):
        uses = [i for i, expr in enumerate(results) if dim in expr.used_dims()]
        if not uses and operand not in generic.outputs:  # a scalar (a fill's value) included
            whole.add(operand)
            continue
        shape = operand.type.get_shape()
        if uses == [_leading_axis(shape)] and results[uses[0]] == index and shape[uses[0]] == extent:
            sliced.add(operand)
        else:
            return None
    return True


def row_chunk_kernel(
    kernel: func.FuncOp, split: RowSplit, rows: int, name: str, last: bool = False, first: int = 0
) -> func.FuncOp:
    """`kernel` over `rows` rows of its sliced arguments and temporaries, named `name`; `last`:
    the split's last rows, taking the rest of each sliced buffer; `first`: the first of its
    rows, where each chunk is a function of its own (`RowSplit.static_rows`). There the loop
    nests that write the temporary from which the ukernel reads x (padded, or in stride phases)
    write only the part that the chunk's output rows read (`_input_read`, `_restricted`)."""
    old_args = list(kernel.body.block.args)
    arg_types = [
        _rows_of(a.type, rows, split, split.row_bytes[i], last)
        if split.row_bytes[i] and a not in split.strided_arguments
        else a.type
        for i, a in enumerate(old_args)
    ]
    block = Block(arg_types=arg_types)
    mapping: dict[SSAValue, SSAValue] = dict(zip(old_args, block.args))
    read = _input_read(kernel, first, rows) if split.static_rows else None
    extents: list[SSAValue] = []
    row_loops = iter(split.row_loops)
    for op in kernel.body.block.ops:
        row_loop = next(row_loops, None) if isinstance(op, GenericOp) else None
        if read is not None and isinstance(op, GenericOp) and list(op.outputs) == [read[0]]:
            ops, extent = _restricted(op.clone(value_mapper=mapping), *read[1:])
            block.add_ops(ops)
            extents += [extent] if extent is not None else []
            continue
        if isinstance(op, func.ReturnOp):
            block.add_ops(memref.DeallocOp.get(extent) for extent in extents)
        if isinstance(op, memref.AllocOp) and op.memref in split.sliced_temporaries:
            chunk_type = (
                _output_rows_of(op.memref.type, rows)
                if split.columns
                else _rows_of(op.memref.type, rows, split, _bytes(op.memref.type) // split.rows, last)
            )
            new_op = memref.AllocOp.get(chunk_type.element_type, shape=chunk_type.get_shape())
            mapping[op.memref] = new_op.memref
        elif isinstance(op, func.CallOp):
            output_rows = (first, first + rows) if split.static_rows else None
            new_op = ukernels.chunk_call(op, [mapping.get(v, v) for v in op.arguments], rows * split.columns or None, output_rows)
        else:
            new_op = op.clone(value_mapper=mapping)
            if row_loop is not None:
                _unbounded_rows(new_op, row_loop, {mapping[a] for a in split.strided_arguments})
        block.add_op(new_op)
    chunk = func.FuncOp(name, (arg_types, []), Region(block))
    chunk.attributes.update(kernel.attributes)
    return chunk


def _unbounded_rows(generic: GenericOp, row: int, strided: set[SSAValue]) -> None:
    """Write each index of a strided argument that is d<row> alone as `d<row> floordiv 1`: the
    chunk's strided arguments keep their whole type, and linalg infers a loop's bound from
    the dims that a plain loop dim indexes (`LoopBody.operand_index`)."""
    plain, unbounded = AffineDimExpr(row), AffineDimExpr(row) // 1
    maps = list(generic.indexing_maps.data)
    for i, operand in enumerate([*generic.inputs, *generic.outputs]):
        if operand in strided:
            results = tuple(unbounded if e == plain else e for e in maps[i].data.results)
            maps[i] = AffineMapAttr(AffineMap(maps[i].data.num_dims, maps[i].data.num_symbols, results))
    generic.indexing_maps = ArrayAttr(maps)


def _input_read(kernel: func.FuncOp, first: int, rows: int) -> tuple[SSAValue, int, int, int] | None:
    """(the temporary, axis, begin, end) that output rows first to first + rows - 1 of a conv
    split by output rows read of the temporary its ukernel call reads x from
    (`ukernels.conv_input_read`), or None where it reads all of it."""
    call = next(op for op in kernel.body.block.ops if isinstance(op, func.CallOp))
    read = ukernels.conv_input_read(call, first, first + rows)
    x = call.arguments[0]
    if read is None or not isinstance(x.owner, memref.AllocOp):
        return None
    return (x, *read)


def _restricted(generic: GenericOp, axis: int, begin: int, end: int) -> tuple[list[Operation], SSAValue | None]:
    """`generic`, parallel loops writing one buffer, restricted to the iterations of one loop
    that may write its elements begin to end - 1 along `axis` (none where no iteration does),
    and the extent buffer that now bounds that loop (to deallocate), if any. Of the loops that
    index `axis`, where the index is nondecreasing in each of them (no mod), the loop keeping
    the smallest share of its iterations is restricted to [v0, v1): its dim d becomes d + v0
    in every indexing map (`d floordiv 1` for v0 = 0, as `LoopBody.operand_index` writes a dim
    over part of an operand's), and a new extent (`LoopBody.extent`) of v1 - v0 gives d its
    bound: no operand is indexed by d alone, so linalg takes d's bound from the extent, not from
    x's rows (MLIR would take a `memref.subview` of x; graphopt's lowering has none).
    Winograd's copy of x into rows 16 to 34 of its padded buffer (x's rows 15 to 31):

        affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 + 1))> over d2 < 32 (x's rows)
        ->  affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 + 15) + 1), (d3 + 1))> over d2 < 17 (an extent of 17)
    """
    index = generic.indexing_maps.data[-1].data.results[axis]
    ranges = generic.get_static_loop_ranges()
    parallel = all(t.data.value == "parallel" for t in generic.iterator_types.data)
    computed = any(isinstance(op, IndexOp) or op.name == "memref.load" for op in generic.body.walk())
    if len(generic.outputs) != 1 or not parallel or computed or not _nondecreasing(index):
        return [generic], None
    kept = {dim: _iterations_writing(index, dim, ranges, begin, end) for dim in index.used_dims()}
    if not kept:
        return [generic], None
    dim, (first, last) = min(kept.items(), key=lambda item: (item[1][1] - item[1][0]) / ranges[item[0]])
    if (first, last) == (0, ranges[dim]):
        return [generic], None
    if last <= first:
        generic.erase()
        return [], None
    shifted = AffineDimExpr(dim) + first if first else AffineDimExpr(dim) // 1
    dims = [shifted if d == dim else AffineDimExpr(d) for d in range(len(ranges))]
    maps = [m.data.replace_dims_and_symbols(dims, [], len(ranges), 0) for m in generic.indexing_maps.data]
    extent = memref.AllocOp.get(i64, shape=[last - first])
    body = generic.body.clone()
    inputs = len(generic.inputs)
    body.block.insert_arg(i64, inputs)
    maps.insert(inputs, AffineMap(len(ranges), 0, (AffineDimExpr(dim),)))
    restricted = GenericOp(
        [*generic.inputs, extent.memref], generic.outputs, body, [AffineMapAttr(m) for m in maps], generic.iterator_types
    )
    restricted.attributes.update(generic.attributes)
    generic.erase()
    return [extent, restricted], extent.memref


def _nondecreasing(index: AffineExpr) -> bool:
    """Whether `index` never decreases as any of its dims grows: sums, products by constants of
    at least 0 and floor or ceil divisions by positive constants of such terms (no mod)."""
    if isinstance(index, (AffineDimExpr, AffineConstantExpr)):
        return True
    if not isinstance(index, AffineBinaryOpExpr):
        return False
    lhs, rhs, kind = index.lhs, index.rhs, index.kind
    if kind == AffineBinaryOpKind.Add:
        return _nondecreasing(lhs) and _nondecreasing(rhs)
    if kind == AffineBinaryOpKind.Mul and isinstance(lhs, AffineConstantExpr):
        lhs, rhs = rhs, lhs
    constant = rhs.value if isinstance(rhs, AffineConstantExpr) else None
    if kind == AffineBinaryOpKind.Mul:
        return constant is not None and constant >= 0 and _nondecreasing(lhs)
    if kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.CeilDiv):
        return constant is not None and constant > 0 and _nondecreasing(lhs)
    return False


def _iterations_writing(index: AffineExpr, dim: int, ranges: Sequence[int], begin: int, end: int) -> tuple[int, int]:
    """[v0, v1): the values of loop `dim` for which `index` (nondecreasing in every dim) reaches
    [begin, end) for some values of the other loops: from the first whose highest index
    reaches begin to the first whose lowest reaches end."""

    def at(value: int, others_last: bool) -> int:
        dims = [value if d == dim else (extent - 1 if others_last else 0) for d, extent in enumerate(ranges)]
        return index.eval(dims, [])

    values = range(ranges[dim])
    first = bisect.bisect_left(values, begin, key=lambda v: at(v, True))
    last = bisect.bisect_left(values, end, key=lambda v: at(v, False))
    return first, max(first, last)


def _reads_rows_only(generic: GenericOp, dim: int = 0) -> bool:
    """No body reads at computed indices: no memref.load, no linalg.index of loop dim `dim`."""
    for op in generic.body.walk():
        if op.name == "memref.load" or (isinstance(op, IndexOp) and op.dim.value.data == dim):
            return False
    return True


def _rows_of(type_: MemRefType, rows: int, split: RowSplit, unit_bytes: int, last: bool) -> MemRefType:
    """`type_`, of `unit_bytes` bytes per row unit, cut to `rows` units along its leading
    dimension of more than one element (dim 0 for a split by d0); the split's last rows
    (`last`) take the rest of it (more than `rows` units' bytes where the split is ragged)."""
    shape = list(type_.get_shape())
    axis = _leading_axis(shape)
    slice_bytes = _slice_bytes(type_)
    shape[axis] = shape[axis] - (split.rows - rows) * unit_bytes // slice_bytes if last else rows * unit_bytes // slice_bytes
    return MemRefType(type_.element_type, shape)


def _output_rows_of(type_: MemRefType, rows: int) -> MemRefType:
    """An im2col copy's type [N, C, KH, KW, OH, OW] cut to `rows` output rows."""
    shape = list(type_.get_shape())
    shape[_IM2COL_ROW] = rows
    return MemRefType(type_.element_type, shape)


def _slice_bytes(type_: MemRefType) -> int:
    """The bytes of one element of `type_`'s leading dimension of more than one element."""
    shape = type_.get_shape()
    return type_.element_type.compile_time_size * _count(shape[_leading_axis(shape) + 1 :])


def _bytes(type_: MemRefType) -> int:
    return type_.element_type.compile_time_size * _count(type_.get_shape())


def _leading_axis(shape: Sequence[int]) -> int | None:
    """The first dimension of `shape` with more than one element (None: there is none)."""
    return next((i for i, extent in enumerate(shape) if extent > 1), None)


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
