"""`LoopBody` (one linalg.generic: evaluates group values at affine indices of its loop dims) and
`Kernel` (the function of one group: argument buffers, temporaries, and the generics over them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xdsl.builder import Builder
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.transforms.lower_affine import affine_expr_ops
from xdsl.rewriter import InsertPoint

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, is_float, is_splat
from graphopt.lowering import packed_gemm
from graphopt.lowering.pack_weights import PACKED_CONV_UKERNELS, READS_UNPACKED_W, packed_conv_weights
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR, KERNEL_ATTR, OVERWRITES_ATTR, PACK_ARG_ATTR, Unsupported
from graphopt.lowering.linalg.indexing import INDEX_RULES, SELECTING_RULES, dims_of, operand_indices, shape_of
from graphopt.lowering.linalg.scalar import SCALAR_BUILDERS, element_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.abi import Group
    from graphopt.lowering.linalg.indexing import Index
    from graphopt.lowering.linalg.schedule import PlainSchedule


def scalar_constant(value: float, element: Attribute) -> arith.ConstantOp:
    """`value` as an `arith.constant` of scalar type `element`."""
    if is_float(element):
        return arith.ConstantOp(FloatAttr(float(value), element))
    return arith.ConstantOp(IntegerAttr(int(value), element))


def _iterators(rank: int, reduced: set[int]) -> list[str]:
    return ["reduction" if i in reduced else "parallel" for i in range(rank)]


class LoopBody:
    """One linalg.generic under construction: group values evaluated at affine indices of its dims.

    Each (buffer, index) read becomes an input operand with that indexing map; a read of an
    output buffer at its own index is the output's block argument (in-place update).
    """

    def __init__(
        self, kernel: Kernel, bounds: Sequence[int], reduced: set[int], outputs: Sequence[tuple[SSAValue, Index]],
        dims: Index | None = None,
    ):
        self.kernel = kernel
        self.bounds = tuple(bounds)
        self.iterators = _iterators(len(bounds), reduced)
        self.outputs = list(outputs)
        self.dims = dims_of(len(bounds)) if dims is None else dims
        """The index of the element an iteration computes: its loop dims, or expressions of them
        (`Kernel.elementwise`)."""
        self.inputs: list[tuple[SSAValue, Index]] = []
        self.block = Block(arg_types=[element_of(buffer) for buffer, _ in outputs])
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.scalars: dict[tuple[SSAValue, Index], SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    def constant(self, value: float, element: Attribute) -> SSAValue:
        return self.emit(scalar_constant(value, element))

    def output(self, position: int) -> SSAValue:
        """The current value of output `position` (the accumulator of a reduction)."""
        return self.block.args[len(self.inputs) + position]

    def read(self, buffer: SSAValue, index: Index) -> SSAValue:
        """The element of `buffer` at `index`.

        An index that may fall outside the buffer (under a pad or concat, whose select then
        drops the element) loads at the index clamped into the buffer.
        """
        for position, (out, out_index) in enumerate(self.outputs):
            if out is buffer:
                if out_index != index:
                    raise Unsupported("an epilogue reads the anchor or reduction result at another element")
                return self.output(position)
        key = (buffer, index)
        if key in self.scalars:
            return self.scalars[key]
        shape = buffer.type.get_shape()
        if not all(self.within(e, size) for e, size in zip(index, shape)):
            clamped = [
                self.index_value(e) if self.within(e, size) else self.clamp(self.index_value(e), size)
                for e, size in zip(index, shape)
            ]
            self.scalars[key] = self.emit(memref.LoadOp.get(buffer, clamped))
        else:
            self.scalars[key] = self.block.insert_arg(element_of(buffer), len(self.inputs))
            self.inputs.append(key)
        return self.scalars[key]

    def interval(self, expr: AffineExpr) -> tuple[int, int]:
        """The least and greatest value of `expr` over the loop's iteration space."""
        if isinstance(expr, AffineDimExpr):
            return 0, self.bounds[expr.position] - 1
        if isinstance(expr, AffineConstantExpr):
            return expr.value, expr.value
        (low, high), (rhs_low, rhs_high) = self.interval(expr.lhs), self.interval(expr.rhs)
        if expr.kind == AffineBinaryOpKind.Add:
            return low + rhs_low, high + rhs_high
        if expr.kind == AffineBinaryOpKind.Mul:
            products = [a * b for a in (low, high) for b in (rhs_low, rhs_high)]
            return min(products), max(products)
        if expr.kind == AffineBinaryOpKind.FloorDiv:
            return low // rhs_low, high // rhs_low
        return (0 if low >= 0 else 1 - rhs_low), rhs_low - 1  # remsi keeps the sign of its lhs

    def within(self, expr: AffineExpr, size: int) -> bool:
        """Whether `expr` always lies in [0, size)."""
        low, high = self.interval(expr)
        return low >= 0 and high < size

    def index_constant(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def clamp(self, index: SSAValue, size: int) -> SSAValue:
        """The index value `index` clamped into [0, size)."""
        below = self.emit(arith.MinSIOp(index, self.index_constant(size - 1)))
        return self.emit(arith.MaxSIOp(below, self.index_constant(0)))

    def index_value(self, expr: AffineExpr) -> SSAValue:
        """`expr` computed on the loop's linalg.index values, by xDSL's `affine_expr_ops`
        (indices are never negative, so its remsi is a mod)."""
        used = expr.used_dims()
        dims = [self.emit(IndexOp(d)) if d in used else None for d in range(max(used, default=-1) + 1)]
        ops, result = affine_expr_ops(expr, dims, [])
        for op in ops:
            self.emit(op)
        return result

    def value(self, value: SSAValue, index: Index) -> SSAValue:
        """Scalar code of group value `value` at `index` (each pair computed once)."""
        key = (value, index)
        if key not in self.scalars:
            self.scalars[key] = self._compute(value, index)
        return self.scalars[key]

    def _compute(self, value: SSAValue, index: Index) -> SSAValue:
        if value in self.kernel.buffers:
            return self.read(self.kernel.buffers[value], index)
        op = value.owner
        if isinstance(op, graph.ConstantOp):  # a splat (one with no elements is never read: 0)
            flat = dense_to_numpy(op.value).reshape(-1)
            return self.constant(flat[0].item() if flat.size else 0, element_of(value))
        if op.name in INDEX_RULES:
            return self.value(op.operands[0], INDEX_RULES[op.name](op, index))
        if op.name in SELECTING_RULES:
            return SELECTING_RULES[op.name](self, op, index)
        if op.name in SCALAR_BUILDERS:
            args = [self.value(o, i) for o, i in zip(op.operands, operand_indices(op, index))]
            return SCALAR_BUILDERS[op.name](self, op, *args)
        raise Unsupported(f"'{op.name}' cannot be computed inside a loop body")

    def operand_index(self, buffer: SSAValue, index: Index) -> Index:
        """`index` as an indexing map of `buffer`. A plain loop dim must span the whole operand
        dim (linalg infers loop bounds from it), so one over part of a dim (a slice, a pooling
        window's first tap, the interior of a padded copy) is written `d floordiv 1`, an
        expression linalg only checks against the dim."""
        partial = lambda e, size: isinstance(e, AffineDimExpr) and self.bounds[e.position] != size
        return tuple(e // 1 if partial(e, size) else e for e, size in zip(index, buffer.type.get_shape()))

    def finish(self, results: Sequence[SSAValue]) -> GenericOp:
        """Yield `results` to the outputs and add the generic to the kernel."""
        self.builder.insert(LinalgYieldOp(*results))
        rank = len(self.iterators)
        maps = [AffineMapAttr(AffineMap(rank, 0, self.operand_index(b, index))) for b, index in self.inputs + self.outputs]
        generic = GenericOp(
            [buffer for buffer, _ in self.inputs],
            [buffer for buffer, _ in self.outputs],
            Region(self.block),
            maps,
            [IteratorTypeAttr(IteratorType(kind)) for kind in self.iterators],
        )
        try:
            generic.get_shapes_to_loops_map()
        except NotImplementedError:
            raise Unsupported("a loop dimension is not the plain index of any operand (its bound is unknown)") from None
        self.kernel.builder.insert(generic)
        return generic


TRANSPOSE_COLUMNS = (16, 8, 4)
"""Consecutive elements of the last dim in a transposing tile (`Kernel.transposing_tile`): the
first of these that divides it. Measured on 2026-11-29 (Emerald Rapids, 1 thread, both compiled
in one process, interleaved): NHWC to NCHW [1, 56, 56, 96] 316 -> 216 us (tiles of 8), with a
per-channel scale and a residual add (ConvNeXt's layer scale) 385 -> 274 us, [1, 28, 28, 192]
205 -> 128 us (tiles of 4); NCHW to NHWC, which the rule leaves alone, ran 1.65x and 1.95x
slower in tiles. ConvNeXt-ish's 43 transpose steps 0.81-0.82 of their time at 1 thread, 0.84
at 2 (each step in the plan, both plans interleaved, two runs)."""
SHORT_LOOP = 64
"""A parallel loop whose innermost dim is shorter than this runs its last two dims as one on the
CPU: LLVM would unroll the short loop whole and vectorize the loop around it with gathers and
scatters (an NCHW add + relu over 16x8x28x28 ran 7x, over 16x64x7x7 9x, faster merged; measured)."""


def _last_two_as_one(dims: Index, shape: Sequence[int]) -> tuple[AffineExpr, AffineExpr]:
    """The index of the last two dims of `shape` when loop dim dims[-2] runs them as one:
    (f floordiv W, f mod W), which LLVM folds back into contiguous addresses."""
    flat = dims[-2]
    return flat // shape[-1], flat % shape[-1]


def _read_from_memory(constant: SSAValue) -> bool:
    """Whether an op reads this constant from a buffer: a conv's weights (its ukernels load w).
    A splat constant is otherwise built in the loop that uses it; as w it would be filled into a
    temporary at every call (ResNet-50's 512x512x3x3 w, 9.4 MB, in the light zoo, whose weights
    are ConstantOfShape fills), so it is passed as a constant argument like any other weight."""
    return any(isinstance(use.operation, graph.Conv2dOp) and use.index == 1 for use in constant.uses)


class Kernel:
    """The function of one group: argument buffers, temporaries, and the generics over them."""

    def __init__(self, group: Group, schedule: PlainSchedule):
        self.group = group
        self.schedule = schedule
        """The loop schedule (`schedule.py`): the CPU's, or plain one-output nests a GPU lowering
        maps onto threads."""
        packed = schedule.packed_matmuls(group)
        packed_convs = schedule.packed_convs(group)
        packed_only = {op for op, ukernel in packed_convs.items() if ukernel not in READS_UNPACKED_W}
        constants = [
            op.result
            for op in group.ops
            if isinstance(op, graph.ConstantOp)
            and (not is_splat(op.value) or _read_from_memory(op.result))
            and any((use.operation not in packed and use.operation not in packed_only) or use.index != 1 for use in op.result.uses)
        ]
        self.weights = list(dict.fromkeys(op.b for op in packed))
        """The constant b of each matmul that runs as the ukernel (packed by pack-weights)."""
        weights = self.weights
        conv_weights = list(dict.fromkeys((op.w, ukernel) for op, ukernel in packed_convs.items()))
        arg_types = [MemRefType(element_of(v), shape_of(v)) for v in group.inputs + constants]
        arg_types += [
            MemRefType(element_of(w), PACKED_CONV_UKERNELS[ukernel].packed_shape(shape_of(w))) for w, ukernel in conv_weights
        ]
        arg_types += [MemRefType(element_of(b), (packed_gemm.packed_size(*shape_of(b)),)) for b in weights]
        arg_types += [MemRefType(element_of(v), shape_of(v)) for v in group.outputs]
        self.block = Block(arg_types=arg_types)
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.constant_args = [c.owner.value for c in constants]
        self.constant_args += [packed_conv_weights(group.constant_value(w), ukernel) for w, ukernel in conv_weights]
        """The values of the constant arguments, which follow the inputs (then the panels): the
        group's constants, then the packed weights of its convs run as `conv_lanes` or `conv_winograd`."""
        args = list(self.block.args)
        self.buffers: dict[SSAValue, SSAValue] = dict(zip(group.inputs + constants, args))
        """Group values already held in a buffer, by value."""
        constants_end = len(group.inputs) + len(constants) + len(conv_weights)
        packed_w = dict(zip(conv_weights, args[len(group.inputs) + len(constants) : constants_end]))
        self.packed_w: dict[graph.Conv2dOp, SSAValue] = {op: packed_w[op.w, ukernel] for op, ukernel in packed_convs.items()}
        """The packed w of each conv whose ukernel takes it (`schedule.packed_convs`: `conv_lanes.pack`, `conv_winograd.pack`)."""
        self.panels: dict[SSAValue, SSAValue] = dict(zip(weights, args[constants_end:]))
        """The packed panels (`packed_gemm.pack_panels`) of each constant b of a matmul that runs as the ukernel."""
        self.results = args[constants_end + len(weights) :]
        self.temporaries: list[SSAValue] = []
        self.extents: dict[int, SSAValue] = {}
        self.overwrites: list[tuple[SSAValue, SSAValue, Operation]] = []
        """(result buffer, input buffer, the one op reading that input) of each result the
        kernel may write over an input (`may_overwrite`)."""

    def loop(
        self, bounds: Sequence[int], outputs: Sequence[tuple[SSAValue, Index]], reduced: set[int] = frozenset()
    ) -> LoopBody:
        """A loop nest over `bounds` (dims in `reduced` are reduction dims) writing `outputs`."""
        return LoopBody(self, bounds, reduced, outputs)

    def reduction(
        self, shape: Sequence[int], reduced: set[int], outputs: Callable[[Index], Sequence[tuple[SSAValue, Index]]]
    ) -> LoopBody:
        """A loop nest over `shape` reducing the dims in `reduced`, writing `outputs(index)`, where
        index (`body.dims`) is the element of `shape` an iteration reads.

        On the CPU, when the last two dims are both reduced (a global average pool), they run
        as one loop dim f, as in `elementwise`. Alone, an inner loop shorter than LLVM's vector
        loop (4 x 16 lanes) runs scalar: over 1x144x56x56 the sum took 116 us, merged 16 us;
        over 1x96x112x112, 171 us and 48 us. Rows of 7x7 (49) stay scalar either way.
        """
        rank = len(shape)
        dims = dims_of(rank)
        merges = self.schedule.merges_short_rows() and {rank - 2, rank - 1} <= reduced
        if not merges:
            return LoopBody(self, shape, reduced, outputs(dims))
        index = dims[:-2] + _last_two_as_one(dims, shape)
        bounds = tuple(shape[:-2]) + (shape[-2] * shape[-1],)
        body = LoopBody(self, bounds, {d for d in reduced if d < rank - 1}, outputs(index), index)
        body.read(self.extent(bounds[-1]), (dims[-2],))
        return body

    def parallel(self, buffer: SSAValue) -> LoopBody:
        """A loop over every element of `buffer`, writing it."""
        shape = buffer.type.get_shape()
        return self.loop(shape, [(buffer, dims_of(len(shape)))])

    def elementwise(
        self, shape: Sequence[int], buffers: Sequence[SSAValue], span: tuple[int, int, int] | None = None
    ) -> LoopBody:
        """A parallel loop over `shape`, writing `buffers` (of that shape) at the element `body.dims`;
        with `span` = (axis, start, stop), only over the elements from start to stop along axis.

        On the CPU, when the last dim is shorter than SHORT_LOOP and a dim before the last two
        iterates more than once, the last two dims run as one loop dim f: the element's index is
        (f floordiv W, f mod W), which LLVM folds back into contiguous addresses, and `extent`
        gives f its bound. The first dim of more than one element, which row splitting slices,
        stays a loop of its own: a LayerNorm's [1, 56, 56] statistics keep their rows. Not in a group that selects by
        index (pad, concat, gather): their index arithmetic would divide once per element; a
        concat whose inputs the loop's spans separate (`_lower_elementwise`) selects nothing.
        A loop that transposes (`transposing_tile`) runs in transposing tiles instead.
        """
        tile = self.transposing_tile(shape) if span is None else None
        if tile is not None:
            return self._transposing(shape, buffers, *tile)
        rank = len(shape)
        dims = dims_of(rank)
        bounds, index = list(shape), list(dims)
        if span is not None:
            axis, start, stop = span
            bounds[axis], index[axis] = stop - start, dims[axis] + start
        merges = self.merges_short_rows(shape, span)
        if merges:
            index[-2:] = _last_two_as_one(dims, shape)
            bounds[-2:] = [shape[-2] * shape[-1]]
        body = LoopBody(self, bounds, set(), [(buffer, tuple(index)) for buffer in buffers], tuple(index))
        if merges:
            body.read(self.extent(bounds[-1]), (dims[-2],))
        if span is not None:
            body.read(self.extent(bounds[span[0]]), (dims[span[0]],))
        return body

    def transposing_tile(self, shape: Sequence[int]) -> tuple[int, int] | None:
        """(axis, columns) where an elementwise loop over `shape` runs in transposing tiles
        (`_transposing`): dim `axis` of `shape`, not its last, indexes the last dim of a buffer
        the loop reads, through the group's transposes, reshapes and elementwise ops (a
        transpose, canonicalized or not), and `columns` (the most of TRANSPOSE_COLUMNS) divides
        the last dim. Not in a group that selects by index (pad, concat, gather)."""
        selects = any(op.name in SELECTING_RULES for op in self.group.ops)
        columns = next((c for c in TRANSPOSE_COLUMNS if shape[-1] % c == 0), None) if shape else None
        if not self.schedule.tiles_transposes() or selects or columns is None:
            return None
        rank = len(shape)
        reads = [(value, dims_of(rank)) for value in self.group.outputs if shape_of(value) == tuple(shape)]
        while reads:
            value, index = reads.pop()
            if value in self.buffers:
                along = {d for d in index[-1].used_dims() if shape[d] > 1} if index and shape_of(value)[-1] > 1 else set()
                if len(along) == 1 and (axis := along.pop()) < rank - 2:
                    return axis, columns
            elif value.owner.name in INDEX_RULES:
                reads.append((value.owner.operands[0], INDEX_RULES[value.owner.name](value.owner, index)))
            elif value.owner.name in SCALAR_BUILDERS:
                reads += zip(value.owner.operands, operand_indices(value.owner, index))
        return None

    def _transposing(self, shape: Sequence[int], buffers: Sequence[SSAValue], axis: int, columns: int) -> LoopBody:
        """A parallel loop over `shape` writing `buffers` (see `elementwise`) whose innermost loops
        take `columns` consecutive elements of the last dim for each element of dim `axis` in
        turn: the loops are the other dims in order, the last dim's blocks of `columns`, `axis`,
        then the columns. The buffer read along `axis` (a transpose's operand) then reads the
        lines of `columns` of its rows from L1 for every element of `axis`, and the loop writes
        `columns` consecutive floats (a vector). NHWC [1, 56, 56, 96] to NCHW, loops (n, h, w
        block, c, w in the block) over (1, 56, 7, 96, 8): out[n, c, h, 8 wb + wi] = x[n, h, 8 wb + wi, c]."""
        rank = len(shape)
        outer = [d for d in range(rank - 1) if d != axis]
        loops = dims_of(len(outer) + 3)
        block, across, column = loops[-3:]
        index = [AffineExpr.constant(0)] * rank
        for loop, d in zip(loops, outer):
            index[d] = loop
        index[axis], index[-1] = across, block * columns + column
        bounds = [shape[d] for d in outer] + [shape[-1] // columns, shape[axis], columns]
        body = LoopBody(self, bounds, set(), [(buffer, tuple(index)) for buffer in buffers], tuple(index))
        body.read(self.extent(bounds[-3]), (block,))
        body.read(self.extent(columns), (column,))
        return body

    def merges_short_rows(self, shape: Sequence[int], span: tuple[int, int, int] | None = None) -> bool:
        """Whether `elementwise` runs the last two dims of `shape` (over `span`) as one loop (see there)."""
        selects = any(op.name in SELECTING_RULES for op in self.group.ops if span is None or op.name != "graph.concat")
        cuts_a_row = span is not None and span[0] >= len(shape) - 2
        short = len(shape) >= 3 and shape[-1] < SHORT_LOOP
        rows_kept = any(extent > 1 for extent in shape[:-2])
        return self.schedule.merges_short_rows() and not selects and not cuts_a_row and short and rows_kept

    def extent(self, size: int) -> SSAValue:
        """A buffer of `size` elements, read only to give a loop dim its bound (linalg infers loop
        bounds from operand shapes, as with its pooling ops' window operand); one per size."""
        if size not in self.extents:
            self.extents[size] = self.temporary((size,), i64)
        return self.extents[size]

    def fill(self, buffer: SSAValue, value: float) -> None:
        """`buffer` set to `value`: a `linalg.fill` (the kernels stage generalizes it, as MLIR's
        `linalg-generalize-named-ops` does, before the CPU and GPU schedules read its loops),
        except where the CPU schedule runs short rows as one loop (`elementwise`), which a
        generalized fill would not: a padded 1x64x58x58 max pool ran 1.33x slower with its
        fills over rows of 58."""
        shape = buffer.type.get_shape()
        if self.merges_short_rows(shape):
            body = self.elementwise(shape, [buffer])
            body.finish([body.constant(value, element_of(buffer))])
            return
        scalar = self.builder.insert(scalar_constant(value, element_of(buffer))).result
        self.builder.insert(FillOp((scalar,), (buffer,), ()))

    def temporary(self, shape: Sequence[int], element: Attribute) -> SSAValue:
        alloc = memref.AllocOp.get(element, shape=list(shape))
        self.builder.insert(alloc)
        self.temporaries.append(alloc.memref)
        return alloc.memref

    def materialize(self, value: SSAValue) -> SSAValue:
        """A buffer holding group value `value`: its own, or a temporary computed into by a generic now."""
        if value not in self.buffers:
            buffer = self.temporary(shape_of(value), element_of(value))
            body = self.parallel(buffer)
            body.finish([body.value(value, body.dims)])
            self.buffers[value] = buffer
        return self.buffers[value]

    def may_overwrite(self, result: SSAValue, input_: SSAValue, reader: Operation) -> None:
        """Let the runtime pass result buffer `result` as input buffer `input_` (`OVERWRITES_ATTR`):
        `reader` reads each element of `input_` before it writes that element of `result`, and
        writes `result` nowhere else. Kept (at `finish`) where `input_` is an input argument that
        `reader` reads once and nothing else reads."""
        if result in self.results and input_ in self.block.args[: len(self.group.inputs)]:
            self.overwrites.append((result, input_, reader))

    def finish(self) -> func.FuncOp:
        """The kernel function. Its panel arguments name the b they pack (`PACK_ARG_ATTR`); the
        pack-weights pass packs them (a 768x3072 b takes about 10 ms: not while placing)."""
        for buffer in self.temporaries:
            self.builder.insert(memref.DeallocOp.get(buffer))
        self.builder.insert(func.ReturnOp())
        arg_types = [a.type for a in self.block.args]
        kernel = func.FuncOp(self.group.name, (arg_types, []), Region(self.block))
        kernel.attributes[KERNEL_ATTR] = UnitAttr()
        n = len(self.group.inputs)
        arg_attrs = [{} for _ in arg_types]
        for position, value in enumerate(self.constant_args):
            arg_attrs[n + position] = {CONSTANT_ARG_ATTR: value}
        for position, b in enumerate(self.weights, start=n + len(self.constant_args)):
            arg_attrs[position] = {PACK_ARG_ATTR: self.group.constant_value(b)}
        if self.constant_args or self.weights:
            kernel.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in arg_attrs])
        overwrites = [
            (result.index, input_.index)
            for result, input_, reader in self.overwrites
            if [use.operation for use in input_.uses] == [reader]
        ]
        if overwrites:
            kernel.attributes[OVERWRITES_ATTR] = DenseArrayBase.from_list(i64, [p for pair in overwrites for p in pair])
        return kernel
