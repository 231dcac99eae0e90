"""convert-graph-to-linalg: one kernel per group, a `func.func` on memrefs in destination-passing style.

A `graph.fused` group (or a single graph op, a group of one) becomes a function whose
arguments are the group's inputs, then its non-splat constants (argument attribute
`graph.constant` holds the value the runtime passes), then one buffer per result:

    func.func @fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                                       affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
          ins(%a, %b : memref<4x8xf32>, memref<8xf32>) outs(%out : memref<4x8xf32>) {
      ^bb0(%x: f32, %y: f32, %o: f32):
        %s = arith.addf %x, %y : f32
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %s, %z : f32
        linalg.yield %r : f32
      }
      func.return
    }

Values are computed where they are used: a `LoopBody` evaluates a group value at an affine
index of its loop dims, so an elementwise chain is one loop body, broadcasting and
injective ops (transpose, broadcast_to, reshape, slice) are index maps, and nothing is
stored between ops. pad and concat select between reads at shifted indices (a read that may
fall outside its buffer loads at the clamped index); gather loads at positions read from its
indices. A group with one anchor or reduction writes that op's result into the output buffer
with a few generics (init, contraction or reduction, finish) and then applies its elementwise
epilogue in place. Loops are ordered so that the innermost one is parallel and contiguous
(matmul (m, k, n); conv2d (n, o / 4, c, kh, p) over the flat output positions p of a padded,
stride-phase copy of x, with the window row and 4 output channels unrolled in the body;
pooling (n, c, oh, ow) with the window unrolled in the body; elementwise loops and epilogues
over NCHW rows shorter than SHORT_LOOP run (h, w) as one loop); accumulations that stay
innermost (row reductions) are marked `reassoc` so LLVM vectorizes them, and a conv's
multiply-adds `contract` so they become FMAs. Row reductions (softmax, log_softmax,
layer_norm) keep row statistics in row-sized buffers. On the CPU, two ops call ukernels
(`ukernels.py`) instead: a matmul whose b is an f32 constant calls the packed GEMM ukernel
(`packed_gemm.py`) on b's panels, packed here and passed as a constant argument after the
others; an f32 conv2d of one group with a deep window calls the direct convolution ukernel
(`direct_conv.py`) on the stride-phase copy of x. What cannot be lowered raises
`Unsupported`; `supports(op)` returns its reason.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import PassFailedException

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_from_numpy, dense_to_numpy, is_bool, is_float
from graphopt.lowering import direct_conv, packed_gemm, ukernels

Index = tuple[AffineExpr, ...]
KERNEL_ATTR = "graph.kernel"
CONSTANT_ARG_ATTR = "graph.constant"


class Unsupported(Exception):
    """The group cannot be lowered to linalg; the message says why."""


# ----------------------------------------------------------------------------------------
# Groups
# ----------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------
# Scalar code: one builder per elementwise op
# ----------------------------------------------------------------------------------------


def _element(value: SSAValue) -> Attribute:
    t = value.type
    return t.get_element_type() if isinstance(t, (TensorType, MemRefType)) else t


def _by_type(float_op: type[Operation], int_op: type[Operation] | None = None):
    """Builder of `float_op(*args)` on floats, `int_op(*args)` on integers."""

    def build(body: LoopBody, op, *args):
        return body.emit((float_op if is_float(args[0].type) else int_op)(*args))

    return build


def _math(op_class: type[Operation]):
    return lambda body, op, x: body.emit(op_class(x))


def _neg(body, op, x):
    if is_float(x.type):
        return body.emit(arith.NegfOp(x))
    return body.emit(arith.SubiOp(body.constant(0, x.type), x))


def _relu(body, op, x):
    return _by_type(arith.MaximumfOp, arith.MaxSIOp)(body, op, x, body.constant(0, x.type))


def _reciprocal(body, x):
    return body.emit(arith.DivfOp(body.constant(1.0, x.type), x))


def _sigmoid(body, op, x):
    one = body.constant(1.0, x.type)
    return _reciprocal(body, body.emit(arith.AddfOp(one, body.emit(mathd.ExpOp(body.emit(arith.NegfOp(x)))))))


def _gelu(body, op, x):
    """0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3))."""
    c = lambda v: body.constant(v, x.type)
    mul = lambda a, b: body.emit(arith.MulfOp(a, b))
    if op.get("approximate") == "tanh":
        cube = mul(mul(x, x), x)
        inner = mul(c(math.sqrt(2 / math.pi)), body.emit(arith.AddfOp(x, mul(c(0.044715), cube))))
        gate = body.emit(mathd.TanhOp(inner))
    else:
        gate = body.emit(mathd.ErfOp(body.emit(arith.DivfOp(x, c(math.sqrt(2))))))
    return mul(mul(c(0.5), x), body.emit(arith.AddfOp(c(1.0), gate)))


def _leaky_relu(body, op, x):
    non_negative = body.emit(arith.CmpfOp(x, body.constant(0.0, x.type), "oge"))
    scaled = body.emit(arith.MulfOp(body.constant(op.get("alpha"), x.type), x))
    return body.emit(arith.SelectOp(non_negative, x, scaled))


def _clip(body, op, x):
    """Clamp to [min, max]; NaN stays NaN, integer tensors clamp to the integers in the range."""
    low, high = op.get("min"), op.get("max")
    if not is_float(x.type):
        limits = np.iinfo(f"int{x.type.width.data}")
        low = None if low is None else math.ceil(max(low, limits.min))
        high = None if high is None else math.floor(min(high, limits.max))
    if low is not None:
        x = _by_type(arith.MaximumfOp, arith.MaxSIOp)(body, op, x, body.constant(low, x.type))
    if high is not None:
        x = _by_type(arith.MinimumfOp, arith.MinSIOp)(body, op, x, body.constant(high, x.type))
    return x


def _cast(body, op, x):
    """NumPy astype: to i1 is `!= 0` (NaN is true), from i1 is unsigned."""
    source, target = x.type, op.result.type.get_element_type()
    if source == target:
        return x
    if is_bool(target):
        if is_float(source):
            return body.emit(arith.CmpfOp(x, body.constant(0.0, source), "une"))
        return body.emit(arith.CmpiOp(x, body.constant(0, source), "ne"))
    if is_float(source) and is_float(target):
        wider = target.bitwidth > source.bitwidth
        return body.emit((arith.ExtFOp if wider else arith.TruncFOp)(x, target))
    if is_float(source):
        return body.emit(arith.FPToSIOp(x, target))
    if is_float(target):
        return body.emit((arith.UIToFPOp if is_bool(source) else arith.SIToFPOp)(x, target))
    if target.width.data > source.width.data:
        return body.emit((arith.ExtUIOp if is_bool(source) else arith.ExtSIOp)(x, target))
    return body.emit(arith.TruncIOp(x, target))


FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""NumPy comparisons on floats: every predicate is false on NaN but `ne`, which is true."""
INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}


def _cmp(body, op, a, b):
    predicate = op.get("predicate")
    if is_float(a.type):
        return body.emit(arith.CmpfOp(a, b, FLOAT_PREDICATES[predicate]))
    return body.emit(arith.CmpiOp(a, b, INT_PREDICATES[predicate]))


def _batch_norm(body, op, x, scale, bias, mean, var):
    """(x - mean) / sqrt(var + epsilon) * scale + bias."""
    std = body.emit(mathd.SqrtOp(body.emit(arith.AddfOp(var, body.constant(op.get("epsilon"), x.type)))))
    normalized = body.emit(arith.DivfOp(body.emit(arith.SubfOp(x, mean)), std))
    return body.emit(arith.AddfOp(body.emit(arith.MulfOp(normalized, scale)), bias))


ScalarBuilder = Callable[..., SSAValue]

SCALAR_BUILDERS: dict[str, ScalarBuilder] = {
    "graph.neg": _neg,
    "graph.abs": _by_type(mathd.AbsFOp, mathd.AbsIOp),
    "graph.relu": _relu,
    "graph.exp": _math(mathd.ExpOp),
    "graph.log": _math(mathd.LogOp),
    "graph.sqrt": _math(mathd.SqrtOp),
    "graph.rsqrt": _math(mathd.RsqrtOp),
    "graph.reciprocal": lambda body, op, x: _reciprocal(body, x),
    "graph.tanh": _math(mathd.TanhOp),
    "graph.sigmoid": _sigmoid,
    "graph.erf": _math(mathd.ErfOp),
    "graph.sin": _math(mathd.SinOp),
    "graph.cos": _math(mathd.CosOp),
    "graph.floor": _math(mathd.FloorOp),
    "graph.ceil": _math(mathd.CeilOp),
    "graph.gelu": _gelu,
    "graph.leaky_relu": _leaky_relu,
    "graph.clip": _clip,
    "graph.cast": _cast,
    "graph.add": _by_type(arith.AddfOp, arith.AddiOp),
    "graph.sub": _by_type(arith.SubfOp, arith.SubiOp),
    "graph.mul": _by_type(arith.MulfOp, arith.MuliOp),
    "graph.div": _by_type(arith.DivfOp),
    "graph.pow": _by_type(mathd.PowFOp),
    "graph.max": _by_type(arith.MaximumfOp, arith.MaxSIOp),
    "graph.min": _by_type(arith.MinimumfOp, arith.MinSIOp),
    "graph.cmp": _cmp,
    "graph.select": lambda body, op, cond, a, b: body.emit(arith.SelectOp(cond, a, b)),
    "graph.batch_norm": _batch_norm,
}
"""Elementwise op name -> builder of its scalar code from its operands' scalars."""


# ----------------------------------------------------------------------------------------
# Indices: where an op reads its operands, given the index of its result element
# ----------------------------------------------------------------------------------------


def broadcast_index(index: Index, shape: Sequence[int], result_shape: Sequence[int]) -> Index:
    """NumPy broadcasting: leading dims dropped, stretched size-1 dims read at 0."""
    offset = len(index) - len(shape)
    return tuple(
        AffineExpr.constant(0) if size == 1 and full != 1 else e
        for size, full, e in zip(shape, result_shape[offset:], index[offset:])
    )


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _transpose_index(op, index: Index) -> Index:
    source = [AffineExpr.constant(0)] * len(index)
    for position, axis in enumerate(op.get("perm")):
        source[axis] = index[position]
    return tuple(source)


def _strides(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


def _reshape_index(op, index: Index) -> Index:
    """Row-major: the linear position of the result element, split over the operand's dims."""
    linear = AffineExpr.constant(0)
    for e, stride in zip(index, _strides(_shape(op.result))):
        linear = linear + e * stride
    shape = _shape(op.x)
    source = []
    for axis, (size, stride) in enumerate(zip(shape, _strides(shape))):
        e = linear if stride == 1 else linear // stride
        source.append(AffineExpr.constant(0) if size == 1 else e if axis == 0 else e % size)
    return tuple(source)


def _slice_index(op, index: Index) -> Index:
    bounds = zip(_shape(op.x), op.get("starts"), op.get("ends"), op.get("steps"))
    starts = [slice(*b).indices(size) for size, *b in bounds]
    return tuple(e * step + start for e, (start, _, step) in zip(index, starts))


INDEX_RULES: dict[str, Callable[[graph.GraphOp, Index], Index]] = {
    "graph.transpose": _transpose_index,
    "graph.broadcast_to": lambda op, index: broadcast_index(index, _shape(op.x), _shape(op.result)),
    "graph.reshape": _reshape_index,
    "graph.slice": _slice_index,
}
"""Injective op name -> index of its operand element that a result element copies."""


def _padded_value(body: LoopBody, x: SSAValue, index: Index, begins: Sequence[int], fill: float) -> SSAValue:
    """`x` shifted by `begins` and surrounded by `fill`: x[index - begins] where that is inside x, else fill."""
    inside = None
    for e, begin, size in zip(index, begins, _shape(x)):
        low, high = body.interval(e)
        checks = [(begin, "sge")] * (low < begin) + [(begin + size, "slt")] * (high >= begin + size)
        for bound, predicate in checks:
            check = body.emit(arith.CmpiOp(body.index_value(e), body.index_constant(bound), predicate))
            inside = check if inside is None else body.emit(arith.AndIOp(inside, check))
    value = body.value(x, tuple(e - begin for e, begin in zip(index, begins)))
    if inside is None:
        return value
    return body.emit(arith.SelectOp(inside, value, body.constant(fill, _element(x))))


def _pad(body: LoopBody, op: graph.PadOp, index: Index) -> SSAValue:
    return _padded_value(body, op.x, index, op.get("pads")[: len(index)], op.get("value"))


def _concat(body: LoopBody, op: graph.ConcatOp, index: Index) -> SSAValue:
    """The input whose span along the axis holds the element, read at the offset within it."""
    axis = op.get("axis") % len(index)
    position = body.index_value(index[axis])
    starts = list(itertools.accumulate((_shape(x)[axis] for x in op.inputs), initial=0))
    result = None
    for x, start, end in reversed(list(zip(op.inputs, starts, starts[1:]))):
        value = body.value(x, index[:axis] + (index[axis] - start,) + index[axis + 1 :])
        if result is None:
            result = value
        else:
            before_end = body.emit(arith.CmpiOp(position, body.index_constant(end), "slt"))
            result = body.emit(arith.SelectOp(before_end, value, result))
    return result


def _gather(body: LoopBody, op: graph.GatherOp, index: Index) -> SSAValue:
    """data at the index whose axis position is read from `indices` (negative wraps, out of range clamps).

    Data computed in the group is computed into a temporary first (its reads are not affine).
    """
    data = body.kernel.materialize(op.data)
    shape = _shape(op.data)
    axis = op.get("axis") % len(shape)
    count = len(_shape(op.indices))
    taken = body.value(op.indices, index[axis : axis + count])
    taken = body.emit(arith.IndexCastOp(taken, IndexType()))
    negative = body.emit(arith.CmpiOp(taken, body.index_constant(0), "slt"))
    from_end = body.emit(arith.AddiOp(taken, body.index_constant(shape[axis])))
    wrapped = body.emit(arith.SelectOp(negative, from_end, taken))
    outer = [body.index_value(e) for e in index[:axis] + index[axis + count :]]
    return body.emit(memref.LoadOp.get(data, outer[:axis] + [body.clamp(wrapped, shape[axis])] + outer[axis:]))


SELECTING_RULES: dict[str, Callable[[LoopBody, graph.GraphOp, Index], SSAValue]] = {
    "graph.pad": _pad,
    "graph.concat": _concat,
    "graph.gather": _gather,
}
"""Injective op name -> builder of its element at an index from elements of its operands."""


def operand_indices(op: graph.GraphOp, index: Index) -> list[Index]:
    """Where an elementwise op reads each operand (batch_norm's parameters: at the channel)."""
    if isinstance(op, graph.BatchNormOp):
        return [index] + [(index[1],)] * 4
    return [broadcast_index(index, _shape(o), _shape(op.results[0])) for o in op.operands]


# ----------------------------------------------------------------------------------------
# Loop bodies and kernels
# ----------------------------------------------------------------------------------------


def _iterators(rank: int, reduced: set[int]) -> list[str]:
    return ["reduction" if i in reduced else "parallel" for i in range(rank)]


INDEX_ARITHMETIC = {
    AffineBinaryOpKind.Add: arith.AddiOp,
    AffineBinaryOpKind.Mul: arith.MuliOp,
    AffineBinaryOpKind.FloorDiv: arith.FloorDivSIOp,
    AffineBinaryOpKind.Mod: arith.RemSIOp,
}
"""Affine operations on index values (operands are never negative, so mod is remsi)."""


def _dims(rank: int) -> Index:
    return tuple(AffineExpr.dimension(i) for i in range(rank))


def _is_splat(array: np.ndarray) -> bool:
    flat = array.reshape(-1)
    return flat.size <= 1 or bool((flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)).all())


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
        self.dims = _dims(len(bounds)) if dims is None else dims
        """The index of the element an iteration computes: its loop dims, or expressions of them
        (`Kernel.elementwise`)."""
        self.inputs: list[tuple[SSAValue, Index]] = []
        self.block = Block(arg_types=[_element(buffer) for buffer, _ in outputs])
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.scalars: dict[tuple[SSAValue, Index], SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    def constant(self, value: float, element: Attribute) -> SSAValue:
        if is_float(element):
            return self.emit(arith.ConstantOp(FloatAttr(float(value), element)))
        return self.emit(arith.ConstantOp(IntegerAttr(int(value), element)))

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
            self.scalars[key] = self.block.insert_arg(_element(buffer), len(self.inputs))
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
        """`expr` computed on the loop's linalg.index values."""
        if isinstance(expr, AffineDimExpr):
            return self.emit(IndexOp(expr.position))
        if isinstance(expr, AffineConstantExpr):
            return self.index_constant(expr.value)
        lhs, rhs = self.index_value(expr.lhs), self.index_value(expr.rhs)
        return self.emit(INDEX_ARITHMETIC[expr.kind](lhs, rhs))

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
        if isinstance(op, graph.ConstantOp):
            return self.constant(dense_to_numpy(op.value).reshape(-1)[0].item(), _element(value))
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


SHORT_LOOP = 64
"""A parallel loop whose innermost dim is shorter than this runs its last two dims as one on the
CPU: LLVM would unroll the short loop whole and vectorize the loop around it with gathers and
scatters (an NCHW add + relu over 16x8x28x28 ran 7x, over 16x64x7x7 9x, faster merged; measured)."""


class Kernel:
    """The function of one group: argument buffers, temporaries, and the generics over them."""

    def __init__(self, group: Group, cpu_schedules: bool = True):
        self.group = group
        self.cpu_schedules = cpu_schedules
        """Whether to use the CPU's loop schedules (blocked matmul; softmax storing its exp terms,
        its row max a `maxnumf`), or plain one-output nests a GPU lowering maps onto threads."""
        packed = packed_matmuls(group) if cpu_schedules else {}
        constants = [
            op.result
            for op in group.ops
            if isinstance(op, graph.ConstantOp)
            and not _is_splat(dense_to_numpy(op.value))
            and any(use.operation not in packed or use.index != 1 for use in op.result.uses)
        ]
        self.weights = list(dict.fromkeys(op.b for op in packed))
        """The constant b of each matmul that runs as the ukernel; packed only by `finish`."""
        weights = self.weights
        arg_types = [MemRefType(_element(v), _shape(v)) for v in group.inputs + constants]
        arg_types += [MemRefType(_element(b), (packed_gemm.packed_size(*_shape(b)),)) for b in weights]
        arg_types += [MemRefType(_element(v), _shape(v)) for v in group.outputs]
        self.block = Block(arg_types=arg_types)
        self.builder = Builder(InsertPoint.at_end(self.block))
        self.constant_args = [c.owner.value for c in constants]
        """The values of the constant arguments, which follow the inputs (the panels' by `finish`)."""
        args = list(self.block.args)
        self.buffers: dict[SSAValue, SSAValue] = dict(zip(group.inputs + constants, args))
        """Group values already held in a buffer, by value."""
        constants_end = len(group.inputs) + len(constants)
        self.panels: dict[SSAValue, SSAValue] = dict(zip(weights, args[constants_end:]))
        """The packed panels (`packed_gemm.pack_panels`) of each constant b of a matmul that runs as the ukernel."""
        self.results = args[constants_end + len(weights) :]
        self.temporaries: list[SSAValue] = []
        self.extents: dict[int, SSAValue] = {}

    def loop(
        self, bounds: Sequence[int], outputs: Sequence[tuple[SSAValue, Index]], reduced: set[int] = frozenset()
    ) -> LoopBody:
        """A loop nest over `bounds` (dims in `reduced` are reduction dims) writing `outputs`."""
        return LoopBody(self, bounds, reduced, outputs)

    def parallel(self, buffer: SSAValue) -> LoopBody:
        """A loop over every element of `buffer`, writing it."""
        shape = buffer.type.get_shape()
        return self.loop(shape, [(buffer, _dims(len(shape)))])

    def elementwise(self, shape: Sequence[int], buffers: Sequence[SSAValue]) -> LoopBody:
        """A parallel loop over `shape`, writing `buffers` (of that shape) at the element `body.dims`.

        On the CPU, when the last dim is shorter than SHORT_LOOP and there are at least three
        (d0, which row splitting slices, stays a loop of its own), the last two dims run as one
        loop dim f: the element's index is (f floordiv W, f mod W), which LLVM folds back into
        contiguous addresses, and `extent` gives f its bound. Not in a group that selects by
        index (pad, concat, gather): their index arithmetic would divide once per element.
        """
        rank = len(shape)
        dims = _dims(rank)
        selects = any(op.name in SELECTING_RULES for op in self.group.ops)
        if not self.cpu_schedules or selects or rank < 3 or shape[-1] >= SHORT_LOOP:
            return self.loop(shape, [(buffer, dims) for buffer in buffers])
        flat = dims[-2]
        index = (*dims[:-2], flat // shape[-1], flat % shape[-1])
        bounds = (*shape[:-2], shape[-2] * shape[-1])
        body = LoopBody(self, bounds, set(), [(buffer, index) for buffer in buffers], index)
        body.read(self.extent(bounds[-1]), (flat,))
        return body

    def extent(self, size: int) -> SSAValue:
        """A buffer of `size` elements, read only to give a loop dim its bound (linalg infers loop
        bounds from operand shapes, as with its pooling ops' window operand); one per size."""
        if size not in self.extents:
            self.extents[size] = self.temporary((size,), i64)
        return self.extents[size]

    def fill(self, buffer: SSAValue, value: float) -> None:
        body = self.elementwise(buffer.type.get_shape(), [buffer])
        body.finish([body.constant(value, _element(buffer))])

    def temporary(self, shape: Sequence[int], element: Attribute) -> SSAValue:
        alloc = memref.AllocOp.get(element, shape=list(shape))
        self.builder.insert(alloc)
        self.temporaries.append(alloc.memref)
        return alloc.memref

    def materialize(self, value: SSAValue) -> SSAValue:
        """A buffer holding group value `value`: its own, or a temporary computed into by a generic now."""
        if value not in self.buffers:
            buffer = self.temporary(_shape(value), _element(value))
            body = self.parallel(buffer)
            body.finish([body.value(value, body.dims)])
            self.buffers[value] = buffer
        return self.buffers[value]

    def finish(self, pack_weights: bool = True) -> func.FuncOp:
        """The kernel function; without `pack_weights`, its panel arguments carry no value (a
        kernel to inspect, not to run: packing a 768x3072 b takes about 10 ms)."""
        if pack_weights:
            self.constant_args += [
                dense_from_numpy(packed_gemm.pack_panels(dense_to_numpy(self.group.constant_value(b))))
                for b in self.weights
            ]
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
        if self.constant_args:
            kernel.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in arg_attrs])
        return kernel


# ----------------------------------------------------------------------------------------
# Anchors and reductions: the op's result computed into the output buffer
# ----------------------------------------------------------------------------------------


REASSOC = arith.FastMathFlagsAttr((arith.FastMathFlag.REASSOC,))
"""On the accumulating float op of a reduction: LLVM may reorder the sum to vectorize it."""
CONTRACT = arith.FastMathFlagsAttr((arith.FastMathFlag.ALLOW_CONTRACT,))
REASSOC_CONTRACT = arith.FastMathFlagsAttr((arith.FastMathFlag.REASSOC, arith.FastMathFlag.ALLOW_CONTRACT))
"""On the product and the sum of a multiply-accumulate: LLVM may fuse them into one FMA."""


def _accumulate(float_op: type[Operation], int_op: type[Operation] | None = None) -> ScalarBuilder:
    """Builder of `acc <op> x`, the float op marked `reassoc`."""

    def build(body: LoopBody, op, acc: SSAValue, x: SSAValue) -> SSAValue:
        return body.emit(float_op(acc, x, REASSOC) if is_float(acc.type) else int_op(acc, x))

    return build


COMBINES: dict[type[graph.ReductionOp], ScalarBuilder] = {
    graph.ReduceSumOp: _accumulate(arith.AddfOp, arith.AddiOp),
    graph.ReduceMeanOp: _accumulate(arith.AddfOp),
    graph.ReduceMaxOp: _accumulate(arith.MaximumfOp, arith.MaxSIOp),
    graph.ReduceMinOp: _accumulate(arith.MinimumfOp, arith.MinSIOp),
}
"""How a reduction folds in one element; it starts from its op's `IDENTITY`."""


def _kept(index: Index, reduced: set[int], keepdims: bool = False) -> Index:
    """The index of a reduction's result: reduced dims dropped (or read at 0 with keepdims)."""
    zero = AffineExpr.constant(0)
    return tuple(zero if i in reduced else e for i, e in enumerate(index) if keepdims or i not in reduced)


def _lower_reduce(kernel: Kernel, op: graph.ReductionOp, out: SSAValue) -> None:
    x = op.x
    shape, element = _shape(x), _element(x)
    reduced = {a % len(shape) for a in op.get("axes")}
    kernel.fill(out, op.IDENTITY.of(element))
    body = kernel.loop(shape, [(out, _kept(_dims(len(shape)), reduced, op.get("keepdims")))], reduced)
    body.finish([COMBINES[type(op)](body, op, body.output(0), body.value(x, body.dims))])
    if isinstance(op, graph.ReduceMeanOp):
        body = kernel.parallel(out)
        count = body.constant(math.prod(shape[a] for a in reduced), element)
        body.finish([body.emit(arith.DivfOp(body.output(0), count))])


def _source(kernel: Kernel, x: SSAValue, out: SSAValue) -> SSAValue:
    """A buffer holding `x`: its own when it is an input, else `out` after computing `x` into it."""
    if x in kernel.buffers:
        return kernel.buffers[x]
    body = kernel.parallel(out)
    body.finish([body.value(x, body.dims)])
    return out


def _row_statistic(
    kernel: Kernel, x: SSAValue, reduced: set[int], combine: type[Operation], identity: float, term,
    terms_into: SSAValue | None = None,
) -> SSAValue:
    """A buffer over the kept dims of `x`: `identity` combined with `term(body)` over the reduced
    dims; with `terms_into`, each term is also stored there (at its element of `x`)."""
    shape = _shape(x)
    dims = _dims(len(shape))
    row = kernel.temporary([size for i, size in enumerate(shape) if i not in reduced], _element(x))
    kernel.fill(row, identity)
    outputs = [(row, _kept(dims, reduced))] + ([(terms_into, dims)] if terms_into is not None else [])
    body = kernel.loop(shape, outputs, reduced)
    value = term(body)
    body.finish([_accumulate(combine)(body, None, body.output(0), value)] + ([value] if terms_into is not None else []))
    return row


class RowMath:
    """Scalar helpers for the row-normalizing ops (all float)."""

    def __init__(self, body: LoopBody, element: Attribute):
        self.body, self.element = body, element

    def __call__(self, op_class: type[Operation], *args: SSAValue) -> SSAValue:
        return self.body.emit(op_class(*args))

    def constant(self, value: float) -> SSAValue:
        return self.body.constant(value, self.element)


def _lower_softmax(kernel: Kernel, op: graph.AxisNormalizationOp, out: SSAValue) -> None:
    """Row max, row sum of exp(x - max) (softmax also stores each exp in out), then out times
    the row's 1 / sum, which LLVM computes once per row (log_softmax: x - max - log sum).

    The max only shifts exp's argument, so on the CPU it is `maxnumf`, which skips NaN and
    vectorizes to half the instructions of NaN-propagating `maximumf`: a NaN in a row still
    makes its sum, and so the whole row, NaN.
    """
    x, element = op.x, _element(op.x)
    reduced = {op.get("axis") % len(_shape(x))}
    src = _source(kernel, x, out)

    def shifted(body: LoopBody, row_max: SSAValue) -> SSAValue:
        m = RowMath(body, element)
        return m(arith.SubfOp, body.read(src, body.dims), body.read(row_max, _kept(body.dims, reduced)))

    row_max = _row_statistic(
        kernel, x, reduced, arith.MaxnumfOp if kernel.cpu_schedules else arith.MaximumfOp,
        graph.ReduceMaxOp.IDENTITY.of(element),
        lambda body: body.read(src, body.dims),
    )
    is_softmax = isinstance(op, graph.SoftmaxOp)
    store_terms = is_softmax and kernel.cpu_schedules
    row_sum = _row_statistic(
        kernel, x, reduced, arith.AddfOp, graph.ReduceSumOp.IDENTITY.of(element), lambda body: body.emit(mathd.ExpOp(shifted(body, row_max))),
        terms_into=out if store_terms else None,
    )
    body = kernel.parallel(out)
    m = RowMath(body, element)
    total = body.read(row_sum, _kept(body.dims, reduced))
    if store_terms:
        result = m(arith.MulfOp, body.output(0), m(arith.DivfOp, m.constant(1.0), total))
    elif is_softmax:
        result = m(arith.DivfOp, m(mathd.ExpOp, shifted(body, row_max)), total)
    else:
        result = m(arith.SubfOp, shifted(body, row_max), m(mathd.LogOp, total))
    body.finish([result])


def _lower_layer_norm(kernel: Kernel, op: graph.LayerNormOp, out: SSAValue) -> None:
    """Row sum, row sum of squared deviations, then (x - mean) / sqrt(var + epsilon) * scale + bias."""
    x, element = op.x, _element(op.x)
    shape = _shape(x)
    axis = op.get("axis") % len(shape)
    reduced = set(range(axis, len(shape)))
    count = math.prod(shape[axis:])
    src = _source(kernel, x, out)

    def centered(body: LoopBody, row_sum: SSAValue) -> SSAValue:
        m = RowMath(body, element)
        mean = m(arith.DivfOp, body.read(row_sum, _kept(body.dims, reduced)), m.constant(count))
        return m(arith.SubfOp, body.read(src, body.dims), mean)

    def square(body: LoopBody) -> SSAValue:
        deviation = centered(body, row_sum)
        return body.emit(arith.MulfOp(deviation, deviation))

    row_sum = _row_statistic(kernel, x, reduced, arith.AddfOp, 0.0, lambda body: body.read(src, body.dims))
    row_squares = _row_statistic(kernel, x, reduced, arith.AddfOp, 0.0, square)
    body = kernel.parallel(out)
    m = RowMath(body, element)
    variance = m(arith.DivfOp, body.read(row_squares, _kept(body.dims, reduced)), m.constant(count))
    std = m(mathd.SqrtOp, m(arith.AddfOp, variance, m.constant(op.get("epsilon"))))
    normalized = m(arith.DivfOp, centered(body, row_sum), std)
    scaled = m(arith.MulfOp, normalized, body.value(op.scale, body.dims[axis:]))
    body.finish([m(arith.AddfOp, scaled, body.value(op.bias, body.dims[axis:]))])


def _lower_matmul(kernel: Kernel, op: graph.MatmulOp, out: SSAValue) -> None:
    """out[..., m, n] = sum over k of a[..., m, k] * b[..., k, n]; batch dims broadcast.

    A matmul whose b has packed panels (`packed_matmuls`) is one call of the packed GEMM
    ukernel (`packed_gemm`). Otherwise:
    The loops run (batch..., m, k, n): the reduction sits outside the contiguous n loop, so
    the innermost loop is out[m, :] += a[m, k] * b[k, :], which LLVM vectorizes. When every
    dim is a multiple of its block (`_matmul_blocks`), they run blocked
    (batch..., mb, nb, kb, mi, ki, ni): a KB x NB block of b stays in cache while MB rows use it.
    """
    if op.b in kernel.panels:
        operands = [kernel.materialize(op.a), kernel.panels[op.b], out]
        kernel.builder.insert(ukernels.call(packed_gemm.name([v.type for v in operands]), operands))
        return
    out_shape = _shape(op.result)
    rank = len(out_shape)
    m_size, k_size, n_size = out_shape[-2], _shape(op.a)[-1], out_shape[-1]
    kernel.fill(out, 0)
    blocks = _matmul_blocks(m_size, k_size, n_size) if kernel.cpu_schedules else None
    if blocks is None:
        dims = _dims(rank + 1)
        batch, (m, k, n) = dims[: rank - 2], dims[rank - 2 :]
        body = kernel.loop(out_shape[:-1] + (k_size, n_size), [(out, batch + (m, n))], {rank - 1})
    else:
        dims = _dims(rank + 4)
        batch, (mb, nb, kb, mi, ki, ni) = dims[: rank - 2], dims[rank - 2 :]
        (m_block, k_block, n_block), counts = blocks, (m_size // blocks[0], k_size // blocks[1], n_size // blocks[2])
        m, k, n = mb * m_block + mi, kb * k_block + ki, nb * n_block + ni
        bounds = out_shape[:-2] + (counts[0], counts[2], counts[1]) + blocks
        body = kernel.loop(bounds, [(out, batch + (m, n))], {rank, rank + 2})
        for (outer, inner), count, size in zip(((mb, mi), (kb, ki), (nb, ni)), counts, blocks):
            body.read(kernel.temporary((count, size), _element(out)), (outer, inner))
    a_index = broadcast_index(batch, _shape(op.a)[:-2], out_shape[:-2]) + (m, k)
    b_index = broadcast_index(batch, _shape(op.b)[:-2], out_shape[:-2]) + (k, n)
    product = _by_type(arith.MulfOp, arith.MuliOp)(body, op, body.value(op.a, a_index), body.value(op.b, b_index))
    body.finish([_by_type(arith.AddfOp, arith.AddiOp)(body, op, body.output(0), product)])


def packed_matmuls(group: Group) -> dict[graph.MatmulOp, None]:
    """The group's matmuls that run as the packed GEMM ukernel, in order (an ordered set): those
    whose b is a constant (inside the group or a graph.constant outside it) and whose types it takes."""
    return {
        op: None
        for op in group.ops
        if isinstance(op, graph.MatmulOp)
        and group.constant_value(op.b) is not None
        and packed_gemm.packs(op.a.type, op.b.type, op.result.type)
    }


MATMUL_BLOCKS = (32, 128, 256)
"""Block sizes (MB, KB, NB) of a blocked matmul, picked by measurement: a KB x NB block of b
(128 KiB of f32) stays in L2 while MB rows use it, a row segment of out (1 KiB) in L1."""


def _matmul_blocks(m: int, k: int, n: int) -> tuple[int, int, int] | None:
    """MATMUL_BLOCKS when they divide (m, k, n) and b is more than one block, else None.

    Other shapes stay unblocked rather than take blocks that divide them: those could be
    tiny (a prime dim) and would need a block search per shape.
    """
    _, k_block, n_block = MATMUL_BLOCKS
    if any(size % block for size, block in zip((m, k, n), MATMUL_BLOCKS)) or (k <= k_block and n <= n_block):
        return None
    return MATMUL_BLOCKS


def _copied_into(
    kernel: Kernel, x: SSAValue, shape: Sequence[int], fill: float, position: Callable[[AffineExpr, AffineExpr], Index]
) -> SSAValue:
    """A temporary of `shape` filled with `fill`, then NCHW `x`[n, c, h, w] copied in at
    (n, c, *position(h, w)): contiguous reads of x, and no selects."""
    buffer = kernel.temporary(shape, _element(x))
    kernel.fill(buffer, fill)
    source = kernel.materialize(x)
    n, c, h, w = _dims(4)
    body = kernel.loop(_shape(x), [(buffer, (n, c, *position(h, w)))])
    body.finish([body.read(source, body.dims)])
    return buffer


def _padded(kernel: Kernel, x: SSAValue, padding: Sequence[int], fill: float) -> SSAValue:
    """A buffer holding NCHW `x` with `padding` (top, left, bottom, right) of `fill` around H and W."""
    top, left, bottom, right = padding
    n, c, h, w = _shape(x)
    return _copied_into(kernel, x, (n, c, h + top + bottom, w + left + right), fill, lambda h, w: (h + top, w + left))


CONV_CHANNEL_BLOCK = 4
"""Output channels that one conv2d loop body computes (when they divide a group's output
channels), picked by measurement: with the window row unrolled, their 4 x KW weights stay in
registers and each load of x feeds 4 FMAs. 3x3, 5x5 and 7x7 convs ran 1.2-2x faster than with
1 or 2 channels, and faster than with 8 (whose weights no longer fit in registers)."""


def _lower_conv2d(kernel: Kernel, op: graph.Conv2dOp, out: SSAValue) -> None:
    """out[n, o, oh, ow] = sum over c, kh, kw of x[n, group(o) * C/groups + c, row, column] * w[o, c, kh, kw].

    `phases` holds x, zero-padded, split by the strides (sh, sw) into phases (a, b), each a
    flat array of rows of R = ceil(padded width / sw) (`_conv_phases`; stride 1: one phase, the
    padded x with its rows flattened), so every tap reads x at stride 1. On the CPU, an f32
    conv of one group whose window is deep enough (`direct_conv.applies`) calls the direct
    convolution ukernel on the phases (with `direct_conv.SLACK` floats more), which keeps its
    output tiles in registers. Otherwise the innermost loop runs over all output rows at once,
    contiguous in x and in a flat accumulator:

    - acc[n, o, oh * R + ow] += phases[n, c, (kh dh) mod sh, (kw dw) mod sw, oh * R + ow + shift(kh, kw)]
      * w[o, c, kh, kw], looping (n, o / B, c, kh, p) over the OH * R positions p (those with
      ow >= OW are discarded). The body unrolls the window row (kw) and B = CONV_CHANNEL_BLOCK
      output channels, so LLVM keeps their weights in registers and vectorizes p;
    - out[n, o, oh, ow] = acc[n, o, oh * R + ow].
    """
    if kernel.cpu_schedules and direct_conv.applies(op.x.type, op.w.type, op.result.type, op.get("groups")):
        phases, row = _conv_phases(kernel, op, direct_conv.SLACK)
        operands = [phases, kernel.materialize(op.w), out]
        name = direct_conv.name([v.type for v in operands], row, op.get("dilations"))
        kernel.builder.insert(ukernels.call(name, operands))
        return
    batch, channels, out_h, out_w = _shape(op.result)
    _, group_channels, kernel_h, kernel_w = _shape(op.w)
    (sh, sw), (dh, dw) = op.get("strides"), op.get("dilations")
    group_size = channels // op.get("groups")
    block = math.gcd(group_size, CONV_CHANNEL_BLOCK)
    phases, row = _conv_phases(kernel, op)
    span = out_h * row
    acc = kernel.temporary((batch, channels // block, block, span), _element(out))
    kernel.fill(acc, 0)

    n, ob, c, kh, p = _dims(5)
    outputs = [(acc, (n, ob, AffineExpr.constant(i), p)) for i in range(block)]
    body = kernel.loop((batch, channels // block, group_channels, kernel_h, span), outputs, {2, 3})
    channel = c if group_size == channels else ob * block // group_size * group_channels + c
    sums = []
    for i in range(block):
        total = body.output(i)
        for kw in range(kernel_w):
            a, b, shift = _phase_index((kh * dh, AffineExpr.constant(kw * dw)), (0, 0), (sh, sw), row)
            pixel = body.read(phases, (n, channel, a, b, p + shift))
            weight = body.value(op.w, (ob * block + i, c, kh, AffineExpr.constant(kw)))
            product = body.emit(arith.MulfOp(pixel, weight, CONTRACT))
            total = body.emit(arith.AddfOp(total, product, REASSOC_CONTRACT))
        sums.append(total)
    body.finish(sums)

    body = kernel.parallel(out)
    n, o, oh, ow = body.dims
    position = (o, AffineExpr.constant(0)) if block == 1 else (o // block, o % block)
    body.finish([body.read(acc, (n, *position, oh * row + ow))])


def _conv_phases(kernel: Kernel, op: graph.Conv2dOp, slack: int = 0) -> tuple[SSAValue, int]:
    """conv2d's x, zero-padded, in a buffer [N, C, sh, sw, L] of its stride phases, and the row length R.

    phases[n, c, a, b, i * R + j] = padded x[n, c, i * sh + a, j * sw + b] (0 outside x): a
    zero fill, then x copied in. L covers x, the reads of all OH * R output positions and
    `slack` more floats.
    """
    x, (top, left, _, right) = op.x, op.get("padding")
    _, in_channels, height, width = _shape(x)
    _, _, kernel_h, kernel_w = _shape(op.w)
    out_h = _shape(op.result)[2]
    (sh, sw), (dh, dw) = op.get("strides"), op.get("dilations")
    row = -(-(width + left + right) // sw)
    reach = (kernel_h - 1) * dh // sh * row + (kernel_w - 1) * dw // sw
    length = max(out_h * row + reach, -(-(height + top) // sh) * row) + slack
    shape = (_shape(x)[0], in_channels, sh, sw, length)
    position = lambda h, w: _phase_index((h, w), (top, left), (sh, sw), row)
    return _copied_into(kernel, x, shape, 0, position), row


def _phase_index(position: Index, begins: Sequence[int], strides: Sequence[int], row: int) -> Index:
    """(phase a, phase b, flat index) of padded position (row, column) = `position` + `begins`
    in a buffer of stride phases with rows of `row`."""
    (h, w), (sh, sw) = (e + begin for e, begin in zip(position, begins)), strides
    a, i = (AffineExpr.constant(0), h) if sh == 1 else (h % sh, h // sh)
    b, j = (AffineExpr.constant(0), w) if sw == 1 else (w % sw, w // sw)
    return (a, b, i * row + j)


def _in_bounds_count(body: LoopBody, start: AffineExpr, size: int, extent: int) -> SSAValue:
    """How many of the positions start, ..., start + size - 1 lie in [0, extent) (an index value)."""
    first = body.emit(arith.MaxSIOp(body.index_value(start), body.index_value(AffineExpr.constant(0))))
    end = body.emit(arith.MinSIOp(body.index_value(start + size), body.index_value(AffineExpr.constant(extent))))
    return body.emit(arith.SubiOp(end, first))


POOL_UNROLLED_TAPS = 64
"""Pooling windows of at most this many taps are unrolled whole in the loop body; larger ones
loop over their rows (a bound on the body's size, not a tuned constant)."""


def _lower_pool2d(kernel: Kernel, op: graph.Pool2dOp, out: SSAValue) -> None:
    """Max (padding is -inf) or average (padding is 0) over each window.

    Loops (n, c, oh, ow) with the window unrolled in the body: each output is reduced in
    registers and stored once, and LLVM vectorizes ow (x read at stride sw). A window of more
    than POOL_UNROLLED_TAPS loops (n, c, oh, kh, ow) with its row unrolled, accumulating into
    out (`Kernel.extent` gives kh its bound). A padded x is read from a padded copy (a fill,
    then x copied in). Unpadded, x computed in the group (an elementwise prologue) is computed
    at each tap when windows do not overlap (each element once), else once into a temporary.
    The average divides by the window size, or with count_include_pad false by the number of
    its positions inside x.
    """
    is_max = isinstance(op, graph.MaxPool2dOp)
    reduction = graph.ReduceMaxOp if is_max else graph.ReduceSumOp
    element = _element(op.x)
    combine, identity = COMBINES[reduction], reduction.IDENTITY.of(element)
    batch, channels, out_h, out_w = _shape(op.result)
    (kernel_h, kernel_w), (sh, sw) = op.get("kernel"), op.get("strides")
    top, left, _, _ = padding = op.get("padding")
    if any(padding):
        x, read = _padded(kernel, op.x, padding, identity), LoopBody.read
    else:
        if kernel_h > sh or kernel_w > sw:
            kernel.materialize(op.x)
        x, read = op.x, LoopBody.value
    if kernel_h * kernel_w <= POOL_UNROLLED_TAPS:
        n, c, oh, ow = _dims(4)
        body = kernel.loop((batch, channels, out_h, out_w), [(out, (n, c, oh, ow))])
        rows, values = [AffineExpr.constant(kh) for kh in range(kernel_h)], []
    else:
        kernel.fill(out, identity)
        n, c, oh, kh, ow = _dims(5)
        body = kernel.loop((batch, channels, out_h, kernel_h, out_w), [(out, (n, c, oh, ow))], {3})
        body.read(kernel.extent(kernel_h), (kh,))
        rows, values = [kh], [body.output(0)]
    values += [read(body, x, (n, c, oh * sh + kh, ow * sw + kw)) for kh in rows for kw in range(kernel_w)]
    body.finish([functools.reduce(lambda a, b: combine(body, op, a, b), values)])
    if is_max:
        return
    body = kernel.parallel(out)
    if op.get("count_include_pad"):
        count = body.constant(kernel_h * kernel_w, element)
    else:
        _, _, height, width = _shape(op.x)
        _, _, oh, ow = body.dims
        rows = _in_bounds_count(body, oh * sh - top, kernel_h, height)
        columns = _in_bounds_count(body, ow * sw - left, kernel_w, width)
        cells = body.emit(arith.IndexCastOp(body.emit(arith.MuliOp(rows, columns)), i64))
        count = body.emit(arith.SIToFPOp(cells, element))
    body.finish([body.emit(arith.DivfOp(body.output(0), count))])


LOWERINGS: dict[str, Callable[[Kernel, graph.GraphOp, SSAValue], None]] = {
    **{reduction.name: _lower_reduce for reduction in COMBINES},
    "graph.softmax": _lower_softmax,
    "graph.log_softmax": _lower_softmax,
    "graph.layer_norm": _lower_layer_norm,
    "graph.matmul": _lower_matmul,
    "graph.conv2d": _lower_conv2d,
    "graph.max_pool2d": _lower_pool2d,
    "graph.avg_pool2d": _lower_pool2d,
}
"""Anchor or reduction op name -> lowering that writes its result into the output buffer."""


# ----------------------------------------------------------------------------------------
# Groups to kernels
# ----------------------------------------------------------------------------------------


def _check_ops(group: Group) -> list[Operation]:
    """The group's anchors and reductions; raises Unsupported for an op no table knows."""
    heavy = []
    for op in group.ops:
        if op.name in LOWERINGS:
            heavy.append(op)
        elif not (
            isinstance(op, graph.ConstantOp)
            or op.name in SCALAR_BUILDERS
            or op.name in INDEX_RULES
            or op.name in SELECTING_RULES
        ):
            raise Unsupported(f"'{op.name}' is not supported by the linalg lowering")
    if len(heavy) > 1:
        raise Unsupported(f"the group has {len(heavy)} anchors or reductions; a kernel holds at most one")
    return heavy


def _lower_elementwise(kernel: Kernel) -> None:
    """One generic per distinct result shape, computing every result of that shape."""
    outputs = kernel.group.outputs
    for shape in dict.fromkeys(_shape(v) for v in outputs):
        positions = [p for p, v in enumerate(outputs) if _shape(v) == shape]
        body = kernel.elementwise(shape, [kernel.results[p] for p in positions])
        body.finish([body.value(outputs[p], body.dims) for p in positions])


def _lower_anchored(kernel: Kernel, heavy: Operation) -> None:
    """The anchor or reduction into the output buffer, then the elementwise epilogue in place."""
    outputs = kernel.group.outputs
    if len(outputs) != 1:
        raise Unsupported(f"a group with '{heavy.name}' must have one result, not {len(outputs)}")
    (result,), (out,) = outputs, kernel.results
    if result.type != heavy.results[0].type:
        raise Unsupported(
            f"the epilogue of '{heavy.name}' changes its result type {heavy.results[0].type} to {result.type}"
        )
    LOWERINGS[heavy.name](kernel, heavy, out)
    if result is not heavy.results[0]:
        kernel.buffers[heavy.results[0]] = out
        body = kernel.elementwise(_shape(result), [out])
        body.finish([body.value(result, body.dims)])


def single_op_kernel_name(op: Operation, index: int) -> str:
    """The kernel name of an op outside any group: `<kind>_<index among such ops>`."""
    return f"{op.name.removeprefix('graph.')}_{index}"


def kernel_sources(main: func.FuncOp, backend: str | None = None) -> list[tuple[Operation, str]]:
    """The ops of `main` that become kernels, in order, with kernel names: its compile-mode
    groups (when `backend` is given, only those placed on it or not placed at all) and the
    graph ops outside any group (named by `single_op_kernel_name`)."""
    sources = []
    singles = 0
    for node in main.body.block.ops:
        if isinstance(node, graph.FusedOp):
            placed_elsewhere = backend is not None and node.backend is not None and node.backend.data != backend
            if node.mode_name == "compile" and not placed_elsewhere:
                sources.append((node, node.group_name.data))
        elif isinstance(node, graph.GraphOp) and not isinstance(node, graph.ConstantOp):
            sources.append((node, single_op_kernel_name(node, singles)))
            singles += 1
    return sources


def replace_module_contents(module: ModuleOp, ops: list[Operation]) -> None:
    """Erase everything in `module` and put `ops` there instead."""
    for old in reversed(list(module.body.block.ops)):
        module.body.block.erase_op(old, safe_erase=False)
    module.body.block.add_ops(ops)


def lower_group(
    op: Operation, name: str | None = None, cpu_schedules: bool = True, pack_weights: bool = True
) -> func.FuncOp:
    """The kernel of a `graph.fused` or of a single graph op (named `name`, default: the group's).

    Without `pack_weights`, the packed GEMM's panel arguments carry no value (`Kernel.finish`):
    enough to tell whether and how the group lowers, not to run it.

    `cpu_schedules=False` keeps plain one-output loop nests (for the CUDA lowering, which
    tiles matmuls and reduces rows itself). Raises Unsupported with the reason when the group cannot be lowered.
    """
    group = Group.of(op, name)
    heavy = _check_ops(group)
    kernel = Kernel(group, cpu_schedules)
    if heavy:
        _lower_anchored(kernel, heavy[0])
    else:
        _lower_elementwise(kernel)
    return kernel.finish(pack_weights)


def supports(op: Operation) -> str | None:
    """None when `lower_group(op)` makes a kernel, else the reason it cannot (packing no weights)."""
    try:
        lower_group(op, pack_weights=False)
    except Unsupported as e:
        return str(e)
    return None


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertGraphToLinalgPass(ModulePass):
    """Replace the module by the kernels of `@entry`'s compile-mode groups and single graph ops, in order.

        func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
          %0 = graph.fused(%x, %b) {name = "fused_add_relu_0", mode = "compile"} : ... {
            ...  graph.add, graph.relu
          }
          %1 = graph.softmax %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
          func.return %1 : tensor<4x8xf32>
        }

    becomes

        func.func @fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {
          linalg.generic ... ins(%a, %b : memref<4x8xf32>, memref<8xf32>) outs(%out : memref<4x8xf32>) {...}
          func.return
        }
        func.func @softmax_0(%x: memref<4x8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {...}

    Top-level graph.constant ops and fallback-mode groups are data and reference code for
    the runtime, not kernels. A group that cannot be lowered fails the pass with the reason.
    """

    name = "convert-graph-to-linalg"

    entry: str = "main"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = SymbolTable.lookup_symbol(op, self.entry)
        if not isinstance(main, func.FuncOp):
            raise PassFailedException(f"convert-graph-to-linalg: no function @{self.entry}")
        kernels = []
        for node, name in kernel_sources(main):
            try:
                kernels.append(lower_group(node, name))
            except Unsupported as e:
                raise PassFailedException(f"convert-graph-to-linalg: {name}: {e}") from None
        replace_module_contents(op, kernels + ukernels.declarations(kernels))
