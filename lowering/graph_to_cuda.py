"""convert-graph-to-cuda: one CUDA kernel per group, built from the group's linalg kernel.

A group is first lowered by convert-graph-to-linalg (`lower_group`), so every op's scalar
code, index maps and the anchors' and reductions' loop structure come from there. Each
`linalg.generic` of that kernel is then mapped onto threads, by the kernel's shape:

- elementwise (every generic parallel): one thread per element, grid-stride over the elements
      %i = block_id * block_dim + thread_id;  scf.for %i ... step grid_dim * block_dim { body at %i }
- rows (generics reduce a trailing block of dims: reduce_*, softmax, layer_norm): a block per
  row; parallel generics stride the row's elements over the threads, a reduction accumulates
  per thread, then across the warp (`cuda.shuffle_down`) and across warps (shared memory);
  row statistics live in shared memory; `cuda.barrier` between generics;
- matmul (a contraction (batch..., m, k, n)): 16x16 threads per output tile of 64, 32 or 16
  (`matmul_outputs_per_thread`), each thread 4x4, 2x2 or 1 outputs, A and B staged through
  shared-memory tiles; the fill and the epilogue run at each of the thread's outputs.

    func.func @fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) attributes {cuda.kernel} {
      %tid = cuda.thread_id x
      ...
      scf.for %i = %first to %c32 step %stride {
        %row = affine.apply affine_map<(d0) -> (d0 floordiv 8)>(%i)
        ...
        memref.store %r, %out[%row, %col] : memref<4x8xf32>
      }
      func.return
    }
    func.func @launch_fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) {
      cuda.launch @fused_add_relu_0 grid [1, 1, 1] block [256, 1, 1] (%a, %b, %out) : ...
      func.return
    }

What cannot be mapped raises `Unsupported` with the reason (e.g. convolutions, reductions
over leading axes, temporaries that are not row statistics, math NVPTX has no instruction for).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AffineMapAttr,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    i32,
)
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from graphopt.dialects import cuda, graph
from graphopt.dialects.attributes import is_float
from graphopt.lowering.linalg.abi import KERNEL_ATTR as LINALG_KERNEL_ATTR
from graphopt.lowering.convert_graph_to_linalg import generalized, kernel_sources, lower_group, replace_module_contents
from graphopt.lowering.linalg.reduction import CONTRACT
from graphopt.lowering.linalg.schedule import SCHEDULES
from graphopt.lowering.linalg.abi import Unsupported

THREADS_PER_BLOCK = 256
"""Block size of elementwise kernels, and the most threads a row kernel uses."""
MAX_BLOCKS = 1 << 16
"""Elementwise kernels launch at most this many blocks; the grid-stride loop covers the rest."""
WARP_SIZE = 32
TILE = 16
"""Matmul blocks are TILE x TILE threads; K is staged TILE at a time."""
MATMUL_OUTPUTS_PER_THREAD = (4, 2)
"""Register tiles a matmul thread may compute (r x r outputs: tiles of 64 and 32), largest first; else 1."""
MIN_MATMUL_BLOCKS = 2 * 132
"""A larger matmul tile only when its grid still has two blocks per SM of an H100 (132 SMs)."""

GPU_MATH: dict[type[Operation], bool] = {
    mathd.ExpOp: True,
    mathd.LogOp: True,
    mathd.TanhOp: True,
    mathd.ErfOp: True,
    mathd.SqrtOp: False,
    mathd.RsqrtOp: False,
    mathd.AbsFOp: False,
    mathd.AbsIOp: False,
    mathd.FloorOp: False,
    mathd.CeilOp: False,
}
"""Math ops NVPTX compiles without libdevice -> whether only on f32 (expanded inline by convert-math-to-llvm)."""


COMBINED_REDUCTIONS: dict[type[Operation], type[graph.ReductionOp]] = {
    arith.AddfOp: graph.ReduceSumOp,
    arith.AddiOp: graph.ReduceSumOp,
    arith.MaximumfOp: graph.ReduceMaxOp,
    arith.MaxSIOp: graph.ReduceMaxOp,
    arith.MinimumfOp: graph.ReduceMinOp,
    arith.MinSIOp: graph.ReduceMinOp,
}
"""Combining op of a reduction -> the graph reduction it computes (whose `IDENTITY` starts it)."""


@dataclass
class CudaKernel:
    """A kernel function and the launch configuration that covers its work."""

    function: func.FuncOp
    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def name(self) -> str:
        return self.function.sym_name.data

    def launcher(self) -> func.FuncOp:
        """`func.func @launch_<name>(args) { cuda.launch @<name> grid [...] block [...] (args) }`."""
        types = list(self.function.function_type.inputs.data)
        block = Block(arg_types=types)
        block.add_ops([cuda.LaunchOp(self.name, self.grid, self.block, block.args), func.ReturnOp()])
        return func.FuncOp(f"launch_{self.name}", (types, []), Region(block))


# ----------------------------------------------------------------------------------------
# Building device code
# ----------------------------------------------------------------------------------------


class DeviceCode:
    """Inserts ops at one point: index arithmetic, CUDA indices, loops and branches."""

    def __init__(self, point: InsertPoint):
        self.builder = Builder(point)

    def emit(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0] if op.results else None

    def index(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def constant(self, value: float | int, element: Attribute) -> SSAValue:
        attr = FloatAttr(float(value), element) if is_float(element) else IntegerAttr(int(value), element)
        return self.emit(arith.ConstantOp(attr))

    def apply(self, expr: AffineExpr, operands: Sequence[SSAValue]) -> SSAValue:
        return self.emit(affine.ApplyOp(list(operands), AffineMapAttr(AffineMap(len(operands), 0, (expr,)))))

    def affine_map(self, map_: AffineMap, dims: Sequence[SSAValue]) -> list[SSAValue]:
        return [self.apply(expr, dims) for expr in map_.results]

    def delinearize(self, linear: SSAValue, shape: Sequence[int]) -> list[SSAValue]:
        """Row-major indices of the element at position `linear` of an array of `shape`."""
        position = AffineExpr.dimension(0)
        strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
        indices = []
        for axis, (stride, size) in enumerate(zip(strides, shape)):
            expr = position // stride if stride != 1 else position
            indices.append(self.apply(expr % size if axis else expr, [linear]))
        return indices

    def cuda_index(self, op_class: type[cuda.DimensionOp], dimension: str = "x") -> SSAValue:
        return self.emit(op_class(dimension))

    def less_than(self, a: SSAValue, b: SSAValue | int) -> SSAValue:
        return self.emit(arith.CmpiOp(a, b if isinstance(b, SSAValue) else self.index(b), "ult"))

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.AndIOp(a, b))

    def loop(self, lower: SSAValue, upper: SSAValue, step: SSAValue, inits: Sequence[SSAValue],
             body: Callable[[DeviceCode, SSAValue, list[SSAValue]], Sequence[SSAValue]]) -> list[SSAValue]:
        """scf.for from `lower` to `upper` by `step`; `body(code, i, carried)` returns the next carried values."""
        block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        inner = DeviceCode(InsertPoint.at_end(block))
        inner.emit(scf.YieldOp(*body(inner, block.args[0], list(block.args[1:]))))
        loop = scf.ForOp(lower, upper, step, list(inits), Region(block))
        self.builder.insert(loop)
        return list(loop.results)

    def when(self, condition: SSAValue, body: Callable[[DeviceCode], None]) -> None:
        """scf.if without results."""
        block = Block()
        inner = DeviceCode(InsertPoint.at_end(block))
        body(inner)
        inner.emit(scf.YieldOp())
        self.emit(scf.IfOp(condition, [], Region(block)))

    def clamped_load(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        """The element at `indices`, each clamped into the buffer (for reads that a select may drop)."""
        clamped = [self.emit(arith.MinUIOp(i, self.index(size - 1))) for i, size in zip(indices, buffer.type.get_shape())]
        return self.emit(memref.LoadOp.get(buffer, clamped))


# ----------------------------------------------------------------------------------------
# Generics at given loop indices
# ----------------------------------------------------------------------------------------


def _iterators(generic: GenericOp) -> list[str]:
    return [str(t.data.value) for t in generic.iterator_types.data]


def _maps(generic: GenericOp) -> list[AffineMap]:
    return [m.data for m in generic.indexing_maps.data]


def _operands(generic: GenericOp) -> list[SSAValue]:
    return [*generic.inputs, *generic.outputs]


def _output_args(generic: GenericOp) -> list[BlockArgument]:
    return list(generic.body.block.args[len(generic.inputs) :])


def _uses_dim(map_: AffineMap, position: int) -> bool:
    def uses(expr: AffineExpr) -> bool:
        if isinstance(expr, AffineDimExpr):
            return expr.position == position
        return hasattr(expr, "lhs") and (uses(expr.lhs) or uses(expr.rhs))

    return any(uses(e) for e in map_.results)


class GenericMapper:
    """Emits the scalar body of the kernel's generics at loop indices chosen by a thread mapping.

    `row_buffers` are row statistics moved to shared memory: one element per block, read and
    written at index 0 whatever the row.
    """

    def __init__(self, row_buffers: set[SSAValue] = frozenset()):
        self.row_buffers = row_buffers

    def indices(self, code: DeviceCode, buffer: SSAValue, map_: AffineMap, dims: Sequence[SSAValue]) -> list[SSAValue]:
        if buffer in self.row_buffers:
            return [code.index(0) for _ in map_.results]
        return code.affine_map(map_, dims)

    def load(self, code: DeviceCode, buffer: SSAValue, map_: AffineMap, dims: Sequence[SSAValue]) -> SSAValue:
        if not isinstance(buffer.type, MemRefType):  # a scalar operand: a generalized linalg.fill's value
            return buffer
        return code.emit(memref.LoadOp.get(buffer, self.indices(code, buffer, map_, dims)))

    def store(self, code: DeviceCode, value: SSAValue, buffer: SSAValue, map_: AffineMap, dims: Sequence[SSAValue]) -> None:
        code.emit(memref.StoreOp.get(value, buffer, self.indices(code, buffer, map_, dims)))

    def body(self, code: DeviceCode, generic: GenericOp, dims: Sequence[SSAValue],
             given: dict[SSAValue, SSAValue] | None = None) -> list[SSAValue]:
        """The yielded values of `generic` at loop indices `dims`; block arguments in `given` are not loaded."""
        values = dict(given or {})
        block = generic.body.block
        for arg, buffer, map_ in zip(block.args, _operands(generic), _maps(generic)):
            if arg not in values and arg.uses:
                values[arg] = self.load(code, buffer, map_, dims)
        for op in block.ops:
            if isinstance(op, LinalgYieldOp):
                return [values.get(v, v) for v in op.operands]
            if isinstance(op, IndexOp):
                values[op.result] = dims[op.dim.value.data]
            else:
                code.emit(op.clone(value_mapper=values))
        raise AssertionError("a linalg.generic body ends in linalg.yield")

    def store_results(self, code: DeviceCode, generic: GenericOp, dims: Sequence[SSAValue]) -> None:
        """Compute `generic` at `dims` and store its results."""
        results = self.body(code, generic, dims)
        for value, buffer, map_ in zip(results, generic.outputs, _maps(generic)[len(generic.inputs) :]):
            self.store(code, value, buffer, map_, dims)


def _global_thread(code: DeviceCode) -> tuple[SSAValue, SSAValue]:
    """This thread's index in the grid and the number of threads in the grid (x only)."""
    block_dim = code.cuda_index(cuda.BlockDimOp)
    first = code.emit(arith.AddiOp(code.emit(arith.MuliOp(code.cuda_index(cuda.BlockIdOp), block_dim)),
                                   code.cuda_index(cuda.ThreadIdOp)))
    return first, code.emit(arith.MuliOp(code.cuda_index(cuda.GridDimOp), block_dim))


# ----------------------------------------------------------------------------------------
# Thread mappings
# ----------------------------------------------------------------------------------------


def _map_elementwise(function: func.FuncOp, generics: list[GenericOp]) -> CudaKernel:
    """Each generic as a grid-stride loop over its elements."""
    mapper = GenericMapper()
    most = 1
    for generic in generics:
        bounds = generic.get_static_loop_ranges()
        most = max(most, math.prod(bounds))
        code = DeviceCode(InsertPoint.before(generic))
        first, stride = _global_thread(code)

        def element(inner: DeviceCode, i: SSAValue, carried, generic=generic, bounds=bounds):
            mapper.store_results(inner, generic, inner.delinearize(i, bounds))
            return []

        code.loop(first, code.index(math.prod(bounds)), stride, [], element)
    blocks = min(-(-most // THREADS_PER_BLOCK), MAX_BLOCKS)
    return CudaKernel(function, (blocks, 1, 1), (THREADS_PER_BLOCK, 1, 1))


@dataclass(frozen=True)
class RowShape:
    """Rows of a row kernel: the leading `kept` dims index rows, the trailing ones a row's elements."""

    bounds: tuple[int, ...]
    kept: int

    @property
    def rows(self) -> tuple[int, ...]:
        return self.bounds[: self.kept]

    @property
    def row_elements(self) -> int:
        return math.prod(self.bounds[self.kept :])

    def threads(self) -> int:
        """A power of two from a warp to THREADS_PER_BLOCK, enough for one element per thread where possible."""
        return max(WARP_SIZE, min(THREADS_PER_BLOCK, 1 << (self.row_elements - 1).bit_length()))


def _row_shape(generics: list[GenericOp]) -> RowShape:
    """The rows of the reductions, which must all reduce the same trailing dims of the same bounds."""
    shapes = set()
    for generic in generics:
        iterators = _iterators(generic)
        if "reduction" in iterators:
            kept = iterators.index("reduction")
            if any(kind != "reduction" for kind in iterators[kept:]):
                raise Unsupported("a reduction over leading or interleaved axes (convolution, pooling, reduce over leading axes); only trailing axes map to rows")
            shapes.add(RowShape(tuple(generic.get_static_loop_ranges()), kept))
    if len(shapes) != 1:
        raise Unsupported("the reductions of the group do not share their rows")
    return shapes.pop()


class RowKernel(GenericMapper):
    """One block per row: barrier-separated generics over the row, reductions across the block."""

    def __init__(self, function: func.FuncOp, generics: list[GenericOp], shape: RowShape, row_buffers: set[SSAValue]):
        super().__init__(row_buffers)
        self.function = function
        self.shape = shape
        self.threads = shape.threads()
        entry = DeviceCode(InsertPoint.at_start(function.body.block))
        self.thread = entry.cuda_index(cuda.ThreadIdOp)
        self.row_dims = entry.delinearize(entry.cuda_index(cuda.BlockIdOp), shape.rows)
        self.partials: dict[Attribute, SSAValue] = {}
        for generic in generics:
            code = DeviceCode(InsertPoint.before(generic))
            self.map_generic(code, generic)
            code.emit(cuda.BarrierOp())

    def kernel(self) -> CudaKernel:
        return CudaKernel(self.function, (math.prod(self.shape.rows), 1, 1), (self.threads, 1, 1))

    def map_generic(self, code: DeviceCode, generic: GenericOp) -> None:
        bounds = tuple(generic.get_static_loop_ranges())
        kept = self.shape.kept
        if bounds[:kept] == self.shape.rows and all(b == 1 for b in bounds[kept:]) and "reduction" not in _iterators(generic):
            # one element per row (a row statistic, or a kept-dims reduction result): thread 0 computes it
            code.when(code.emit(arith.CmpiOp(self.thread, code.index(0), "eq")),
                      lambda inner: self.store_results(inner, generic, self.row_dims + [inner.index(0)] * (len(bounds) - kept)))
        elif bounds == self.shape.bounds and "reduction" not in _iterators(generic):
            self.over_row(code, [], lambda inner, dims, carried: self.store_results(inner, generic, dims) or [])
        elif bounds == self.shape.bounds:
            self.reduce(code, generic)
        else:
            raise Unsupported(f"a loop over {list(bounds)} does not fit rows of {list(self.shape.bounds)}")

    def over_row(self, code: DeviceCode, inits: Sequence[SSAValue], body) -> list[SSAValue]:
        """The row's elements strided over the block's threads; `body(code, dims, carried)`."""
        shape = self.shape

        def element(inner: DeviceCode, i: SSAValue, carried):
            return body(inner, self.row_dims + inner.delinearize(i, shape.bounds[shape.kept :]), carried)

        return code.loop(self.thread, code.index(shape.row_elements), code.index(self.threads), inits, element)

    def reduce(self, code: DeviceCode, generic: GenericOp) -> None:
        """Per-thread partial results, combined across the block; thread 0 folds the total into the output."""
        (out_arg,) = _output_args(generic)
        (result,) = self.body_results(generic)
        combine = result.owner
        reduction = COMBINED_REDUCTIONS.get(type(combine))
        if reduction is None or out_arg not in combine.operands:
            raise Unsupported("the reduction does not combine with add, max or min")
        element = out_arg.type
        if not (isinstance(element, Float32Type) or element == i32):
            raise Unsupported(f"warp shuffles reduce f32 and i32, not {element}")

        def fold(inner: DeviceCode, a: SSAValue, b: SSAValue) -> SSAValue:
            return inner.emit(combine.clone(value_mapper={combine.operands[0]: a, combine.operands[1]: b}))

        start = code.constant(reduction.IDENTITY.of(element), element)
        (partial,) = self.over_row(code, [start], lambda inner, dims, carried: self.body(inner, generic, dims, {out_arg: carried[0]}))
        total = self.block_total(code, partial, fold, start)
        buffer, map_ = generic.outputs[0], _maps(generic)[-1]

        def fold_into_output(inner: DeviceCode):
            dims = self.row_dims + [inner.index(0)] * (len(self.shape.bounds) - self.shape.kept)
            self.store(inner, fold(inner, self.load(inner, buffer, map_, dims), total), buffer, map_, dims)

        code.when(code.emit(arith.CmpiOp(self.thread, code.index(0), "eq")), fold_into_output)

    @staticmethod
    def body_results(generic: GenericOp) -> list[SSAValue]:
        return list(generic.body.block.last_op.operands)

    def block_total(self, code: DeviceCode, partial: SSAValue, fold, identity: SSAValue) -> SSAValue:
        """The fold of every thread's `partial`, valid in thread 0: within each warp by shuffles,
        then the warps' results through shared memory, folded by the first warp."""
        warps = self.threads // WARP_SIZE
        total = self.warp_total(code, partial, fold, WARP_SIZE)
        if warps == 1:
            return total
        element = partial.type
        if element not in self.partials:
            self.partials[element] = DeviceCode(InsertPoint.at_start(self.function.body.block)).emit(
                cuda.SharedAllocOp(element, [warps]))
        partials = self.partials[element]
        lane = code.apply(AffineExpr.dimension(0) % WARP_SIZE, [self.thread])
        warp = code.apply(AffineExpr.dimension(0) // WARP_SIZE, [self.thread])
        code.when(code.emit(arith.CmpiOp(lane, code.index(0), "eq")),
                  lambda inner: inner.emit(memref.StoreOp.get(total, partials, [warp])))
        code.emit(cuda.BarrierOp())
        mine = code.clamped_load(partials, [self.thread])
        mine = code.emit(arith.SelectOp(code.less_than(self.thread, warps), mine, identity))
        return self.warp_total(code, mine, fold, warps)

    @staticmethod
    def warp_total(code: DeviceCode, value: SSAValue, fold, lanes: int) -> SSAValue:
        """Fold of `value` over the first `lanes` lanes of the warp, in lane 0 (a tree of shuffles)."""
        offset = lanes // 2
        while offset:
            value = fold(code, value, code.emit(cuda.ShuffleDownOp(value, code.constant(offset, i32))))
            offset //= 2
        return value


def matmul_outputs_per_thread(blocks_of: Callable[[int], int]) -> int:
    """Outputs per thread along each axis (1, 2 or 4: tiles of 16, 32 or 64): the largest of
    MATMUL_OUTPUTS_PER_THREAD whose grid has MIN_MATMUL_BLOCKS blocks; `blocks_of(edge)` is the
    grid's size with tiles of `edge` x `edge` outputs."""
    return next((r for r in MATMUL_OUTPUTS_PER_THREAD if blocks_of(TILE * r) >= MIN_MATMUL_BLOCKS), 1)


class MatmulKernel(GenericMapper):
    """A block of TILE x TILE threads computes an `edge` x `edge` output tile, edge = TILE * r:
    thread (x, y) owns the r x r outputs (y + TILE i, x + TILE j) of the tile, so adjacent
    threads load and store adjacent columns. Per K step of TILE, the block stages an edge x TILE
    tile of A and a TILE x edge tile of B in shared memory (each thread loads r elements of
    each); each thread then reads r values of A and r of B per k for its r x r accumulators
    (r = 1 reads two per multiply-add, r = 4 one per two). The other generics (fill, epilogue)
    run at each of the thread's outputs."""

    def __init__(self, function: func.FuncOp, generics: list[GenericOp], contraction: GenericOp):
        super().__init__()
        self.function = function
        bounds = tuple(contraction.get_static_loop_ranges())
        self.batch, (self.m, self.k, self.n) = bounds[:-3], bounds[-3:]
        self.out_shape = self.batch + (self.m, self.n)
        self.per_thread = matmul_outputs_per_thread(lambda edge: math.prod(self.grid(edge)))
        self.edge = TILE * self.per_thread
        entry = DeviceCode(InsertPoint.at_start(function.body.block))
        self.tx, self.ty = entry.cuda_index(cuda.ThreadIdOp, "x"), entry.cuda_index(cuda.ThreadIdOp, "y")

        def owned(dimension: str, thread: SSAValue) -> list[SSAValue]:
            """The thread's rows (y) or columns (x): tile start + thread + TILE * i."""
            block_id = entry.cuda_index(cuda.BlockIdOp, dimension)
            d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
            return [entry.apply(d0 * self.edge + d1 + TILE * i, [block_id, thread]) for i in range(self.per_thread)]

        self.rows, self.columns = owned("y", self.ty), owned("x", self.tx)
        self.batch_dims = entry.delinearize(entry.cuda_index(cuda.BlockIdOp, "z"), self.batch)
        self.rows_inside = [entry.less_than(row, self.m) for row in self.rows]
        self.columns_inside = [entry.less_than(column, self.n) for column in self.columns]
        self.inside = [[entry.both(r, c) for c in self.columns_inside] for r in self.rows_inside]
        for generic in generics:
            code = DeviceCode(InsertPoint.before(generic))
            if generic is contraction:
                self.contract(code, generic)
            elif tuple(generic.get_static_loop_ranges()) == self.out_shape and "reduction" not in _iterators(generic):
                for i, j in self.outputs():
                    element = self.batch_dims + [self.rows[i], self.columns[j]]
                    code.when(self.inside[i][j],
                              lambda inner, generic=generic, element=element: self.store_results(inner, generic, element))
            else:
                raise Unsupported("a matmul group may only add elementwise work on the matmul's result")

    def grid(self, edge: int) -> tuple[int, int, int]:
        return (-(-self.n // edge), -(-self.m // edge), math.prod(self.batch))

    def kernel(self) -> CudaKernel:
        return CudaKernel(self.function, self.grid(self.edge), (TILE, TILE, 1))

    def outputs(self) -> list[tuple[int, int]]:
        """(i, j) of the thread's outputs: row i, column j of its r x r."""
        return [(i, j) for i in range(self.per_thread) for j in range(self.per_thread)]

    def contract(self, code: DeviceCode, generic: GenericOp) -> None:
        a, b = generic.inputs
        a_arg, b_arg, out_arg = generic.body.block.args
        a_map, b_map, out_map = _maps(generic)
        a_tile = code.emit(cuda.SharedAllocOp(a.type.get_element_type(), [self.edge, TILE]))
        b_tile = code.emit(cuda.SharedAllocOp(b.type.get_element_type(), [TILE, self.edge]))
        zero = code.index(0)
        out_dims = {(i, j): self.batch_dims + [self.rows[i], zero, self.columns[j]] for (i, j) in self.outputs()}
        starts = [code.clamped_load(generic.outputs[0], code.affine_map(out_map, out_dims[ij])) for ij in self.outputs()]
        in_tile = [code.apply(AffineExpr.dimension(0) + TILE * i, [t]) for t in (self.ty, self.tx)
                   for i in range(self.per_thread)]
        tile_rows, tile_columns = in_tile[: self.per_thread], in_tile[self.per_thread :]

        def stage(inner: DeviceCode, buffer: SSAValue, map_: AffineMap, tile: SSAValue, at: list[SSAValue], dims, inside: SSAValue):
            """tile[at] = buffer at the loop indices `dims`, or 0 outside the matrix (0 * 0 adds nothing)."""
            value = inner.clamped_load(buffer, inner.affine_map(map_, dims))
            kept = inner.emit(arith.SelectOp(inside, value, inner.constant(0, value.type)))
            inner.emit(memref.StoreOp.get(kept, tile, at))

        def k_tile(inner: DeviceCode, k0: SSAValue, carried):
            a_k, b_k = inner.emit(arith.AddiOp(k0, self.tx)), inner.emit(arith.AddiOp(k0, self.ty))
            a_k_inside, b_k_inside = inner.less_than(a_k, self.k), inner.less_than(b_k, self.k)
            for i, row in enumerate(self.rows):
                stage(inner, a, a_map, a_tile, [tile_rows[i], self.tx], self.batch_dims + [row, a_k, zero],
                      inner.both(self.rows_inside[i], a_k_inside))
            for j, column in enumerate(self.columns):
                stage(inner, b, b_map, b_tile, [self.ty, tile_columns[j]], self.batch_dims + [zero, b_k, column],
                      inner.both(b_k_inside, self.columns_inside[j]))
            inner.emit(cuda.BarrierOp())

            for kk in range(TILE):  # unrolled: the shared-memory reads at constant offsets
                a_values = [inner.emit(memref.LoadOp.get(a_tile, [row, inner.index(kk)])) for row in tile_rows]
                b_values = [inner.emit(memref.LoadOp.get(b_tile, [inner.index(kk), column])) for column in tile_columns]
                carried = [self.body(inner, generic, [], {a_arg: a_values[i], b_arg: b_values[j], out_arg: accumulator})[0]
                           for (i, j), accumulator in zip(self.outputs(), carried)]
                for op in (value.owner for value in carried):
                    _contract_multiply_add(op)
            inner.emit(cuda.BarrierOp())
            return carried

        totals = code.loop(code.index(0), code.index(self.k), code.index(TILE), starts, k_tile)
        for (i, j), total in zip(self.outputs(), totals):
            code.when(self.inside[i][j],
                      lambda inner, total=total, dims=out_dims[i, j]: self.store(inner, total, generic.outputs[0], out_map, dims))


def _contract_multiply_add(add: Operation) -> None:
    """Let `add = a + b * c` of floats become one FMA (fast-math `contract`, as the CPU's conv does)."""
    if isinstance(add, arith.AddfOp):
        for op in (add, *(v.owner for v in add.operands if isinstance(v.owner, arith.MulfOp))):
            op.properties["fastmath"] = CONTRACT


def _contraction(generic: GenericOp) -> bool:
    """Whether `generic` is out[batch, m, n] += a[batch, m, k] * b[batch, k, n] (maps may broadcast the batch)."""
    iterators = _iterators(generic)
    rank = len(iterators)
    if rank < 3 or iterators[-3:] != ["parallel", "reduction", "parallel"] or "reduction" in iterators[:-3]:
        return False
    if len(generic.inputs) != 2 or any(isinstance(op, (IndexOp, memref.LoadOp)) for op in generic.body.block.ops):
        return False
    a_map, b_map, out_map = _maps(generic)
    m, k, n = rank - 3, rank - 2, rank - 1
    return not (_uses_dim(a_map, n) or _uses_dim(b_map, m) or _uses_dim(out_map, k))


# ----------------------------------------------------------------------------------------
# Groups to kernels
# ----------------------------------------------------------------------------------------


def _check_math(function: func.FuncOp) -> None:
    for op in function.walk():
        if op.dialect_name() != "math":
            continue
        only_f32 = GPU_MATH.get(type(op))
        if only_f32 is None or (only_f32 and not isinstance(op.results[0].type, Float32Type)):
            raise Unsupported(f"{op.name} on {op.results[0].type} needs libdevice, which is not linked")


def lower_group_to_cuda(op: Operation, name: str | None = None) -> CudaKernel:
    """The CUDA kernel of a `graph.fused` or single graph op; raises Unsupported with the reason."""
    if isinstance(op, graph.FusedOp) and op.mode_name == "fallback":
        raise Unsupported("a fallback group is not compiled as one kernel")
    members = list(op.body.block.ops) if isinstance(op, graph.FusedOp) else [op]
    if any(isinstance(member, (graph.Conv2dOp, graph.Pool2dOp)) for member in members):
        raise Unsupported("convolution and pooling are not lowered to CUDA yet")
    function = generalized(lower_group(op, name, SCHEDULES["plain"]))
    _check_math(function)
    del function.attributes[LINALG_KERNEL_ATTR]
    function.attributes[cuda.KERNEL_ATTR] = UnitAttr()
    body = list(function.body.block.ops)
    generics = [o for o in body if isinstance(o, GenericOp)]
    temporaries = [o for o in body if isinstance(o, memref.AllocOp)]
    contractions = [g for g in generics if _contraction(g)]
    if contractions:
        if temporaries or len(contractions) > 1:
            raise Unsupported("a contraction with temporaries (convolution, pooling) is not supported")
        kernel = MatmulKernel(function, generics, contractions[0]).kernel()
    elif any("reduction" in _iterators(g) for g in generics):
        shape = _row_shape(generics)
        if any(tuple(alloc.memref.type.get_shape()) != shape.rows for alloc in temporaries):
            raise Unsupported("the group needs a temporary that is not a row statistic")
        kernel = RowKernel(function, generics, shape, {alloc.memref for alloc in temporaries}).kernel()
        for alloc in temporaries:
            shared = cuda.SharedAllocOp(alloc.memref.type.get_element_type(), [1] * shape.kept)
            Builder(InsertPoint.before(alloc)).insert(shared)
            alloc.memref.replace_all_uses_with(shared.memref)
    elif temporaries:
        raise Unsupported("the group needs a temporary buffer (a gather of computed data)")
    else:
        kernel = _map_elementwise(function, generics)
    for old in [*(o for o in body if isinstance(o, memref.DeallocOp)), *generics, *temporaries]:
        old.detach()
        old.erase(safe_erase=False)
    return kernel


def supports(op: Operation) -> str | None:
    """None when `lower_group_to_cuda(op)` makes a kernel, else the reason it cannot."""
    try:
        lower_group_to_cuda(op)
    except Unsupported as e:
        return str(e)
    return None


@dataclass(frozen=True)
class ConvertGraphToCudaPass(ModulePass):
    """Replace the module by the CUDA kernels (and their `launch_` host functions) of `@entry`'s
    compile-mode groups and single graph ops, in order; with `backend` (given by the target's
    pipeline, `pipelines.CUDA`), groups that partitioning placed on another backend are left out.

        func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
          %0 = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
          func.return %0 : tensor<4x8xf32>
        }

    becomes

        func.func @softmax_0(%x: memref<4x8xf32>, %out: memref<4x8xf32>) attributes {cuda.kernel} {...}
        func.func @launch_softmax_0(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
          cuda.launch @softmax_0 grid [4, 1, 1] block [32, 1, 1] (%x, %out) : memref<4x8xf32>, memref<4x8xf32>
          func.return
        }
    """

    name = "convert-graph-to-cuda"

    entry: str = "main"
    backend: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = SymbolTable.lookup_symbol(op, self.entry)
        if not isinstance(main, func.FuncOp):
            raise PassFailedException(f"{self.name}: no function @{self.entry}")
        functions = []
        for node, name in kernel_sources(main, self.backend):
            try:
                kernel = lower_group_to_cuda(node, name)
            except Unsupported as e:
                raise PassFailedException(f"{self.name}: {name}: {e}") from None
            functions += [kernel.function, kernel.launcher()]
        replace_module_contents(op, functions)
