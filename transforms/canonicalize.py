"""`canonicalize`: xDSL's canonicalization patterns, then graphopt's graph patterns.

Graph patterns:
- a graph.pad of H and W only, with value 0, whose one user is a conv2d reading it as `x`,
  folds into the conv's `padding` (ONNX models pad before a conv; every backend then sees one op):

      %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64}
           : (tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
      %y = graph.conv2d %p, %w : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
    becomes
      %y = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>}
           : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>

- the same for a pad of value -inf before a max_pool2d, whose padded positions never win
  (when the folded padding stays smaller than the kernel, as pool padding must).

- a graph.pow by a constant whole exponent from 1 to 4 (splat, not widening x's shape) becomes
  that many factors of x: a pow is a libm call per element that stops the loop around it from
  vectorizing, and GPT-2's GELU and RMSNorm raise to the 3rd and 2nd power:

      %c = graph.constant dense<3.0> : tensor<f32>
      %y = graph.pow %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    becomes
      %y = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %y_1 = graph.mul %y, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

- a graph.batch_norm whose scale, bias, mean and var are constants becomes a multiply and an
  add by per-channel constants a = scale / sqrt(var + epsilon) and bias - mean * a (computed in
  f64, kept only when all are finite): the conv's tile epilogue then costs a multiply and an add
  per element instead of a sqrt and a divide (EfficientNet's 16->96 1x1 at 112 with SiLU, 1 thread:
  462 -> 337 us, the time of the same conv with a bias):

      %y = graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f64}
           : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
           -> tensor<1x8x4x4xf32>
    becomes
      %a = graph.constant dense<...> : tensor<8x1x1xf32>
      %b = graph.constant dense<...> : tensor<8x1x1xf32>
      %m = graph.mul %x, %a : (tensor<1x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<1x8x4x4xf32>
      %y = graph.add %m, %b : (tensor<1x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<1x8x4x4xf32>

- a per-channel affine chain after a conv with constant weights folds into it: a mul by finite
  per-channel constants a of a conv2d (its one user) scales the conv's weights instead, a mul
  by a of an add of per-channel constants b (its one user) becomes the add of b * a after the
  mul, and two adds of per-channel constants become one. The batch_norm above and ONNX's
  scale-and-shift after it then cost the tile epilogue one add (Inception-v2's 7x7 stem, 1
  thread: 980 -> 968 us; EfficientNet's 16->96 1x1 + SiLU 356 -> 343 us):

      %y = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
      %z = graph.mul %y, %a : (tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32>
    becomes
      %z = graph.conv2d %x, %w_times_a : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>

Then, per function, `drop_unit_batch_dim`: a function whose values of rank 3 or more have a
leading dim of 1 (a transformer at batch 1: [1, s, d] and [1, heads, s, s]) computes on them
without it, reshaped on entry and back at the return, when every op touching them is
elementwise (batch_norm aside), a matmul, reshape, broadcast_to, softmax, log_softmax,
layer_norm or a transpose that keeps dim 0 first. Kernels split across threads by their
leading dim (lowering/row_split.py), which was 1 for every step of such a model:

      %y = graph.softmax %x {axis = 2 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    becomes
      %0 = graph.reshape %x : (tensor<1x4x8xf32>) -> tensor<4x8xf32>
      %1 = graph.softmax %0 {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %y = graph.reshape %1 : (tensor<4x8xf32>) -> tensor<1x4x8xf32>
"""

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.canonicalize import CanonicalizePass as XdslCanonicalizePass

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_from_numpy, dense_to_numpy, is_splat
from graphopt.dialects.graph import Category, category_of
from graphopt.dialects.shapes import ShapeError

LARGEST_EXPANDED_EXPONENT = 4
"""graph.pow by a whole constant exponent up to this becomes a product of factors of x."""


def _pads_value(op: graph.Conv2dOp | graph.MaxPool2dOp) -> float:
    """The pad value an op's own padding stands for."""
    return 0.0 if isinstance(op, graph.Conv2dOp) else -math.inf


class FoldPadIntoWindowOp(RewritePattern):
    """graph.pad (H and W only, the op's padding value, one user) -> the conv2d's or
    max_pool2d's `padding`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.Conv2dOp | graph.MaxPool2dOp, rewriter: PatternRewriter):
        pad = op.x.owner
        if not isinstance(pad, graph.PadOp) or not pad.result.has_one_use():
            return
        pads, value = pad.get("pads"), pad.get("value")
        # -0.0 is not the zero a conv pads with (it may change the sign of a zero result).
        same_value = value == _pads_value(op) and math.copysign(1, value) == math.copysign(1, _pads_value(op))
        if any(pads[:2] + pads[4:6]) or not same_value:
            return
        top, left, bottom, right = op.get("padding")
        padding = (top + pads[2], left + pads[3], bottom + pads[6], right + pads[7])
        attributes = {**op.attributes, "padding": DenseArrayBase.from_list(i64, padding)}
        operands = [pad.x, *op.operands[1:]]
        try:
            type(op).infer([operand.type for operand in operands], attributes)
        except ShapeError:
            return
        folded = type(op).create(operands=operands, result_types=[op.result.type], attributes=attributes)
        rewriter.replace(op, folded)
        rewriter.erase(pad)


def _whole_exponent(op: graph.PowOp) -> int | None:
    """The exponent of `op` when it is a splat constant whole number from 1 to
    LARGEST_EXPANDED_EXPONENT that leaves x's type as it is (no broadcast to a larger shape)."""
    constant = op.operands[1].owner
    if not isinstance(constant, graph.ConstantOp) or op.result.type != op.operands[0].type:
        return None
    if not is_splat(constant.value):
        return None
    values = dense_to_numpy(constant.value).reshape(-1)
    if values.size == 0 or not (float(values[0]).is_integer() and 1 <= values[0] <= LARGEST_EXPANDED_EXPONENT):
        return None
    return int(values[0])


class ExpandWholePower(RewritePattern):
    """graph.pow %x, (a splat constant n in 1..4) -> x * x * ... (n factors; x itself for n = 1)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.PowOp, rewriter: PatternRewriter):
        exponent = _whole_exponent(op)
        if exponent is None:
            return
        x, constant = op.operands[0], op.operands[1].owner
        products: list[graph.MulOp] = []
        for _ in range(exponent - 1):
            products.append(graph.MulOp([products[-1].result if products else x, x]))
        rewriter.replace(op, products, [products[-1].result if products else x])
        if not constant.result.uses:
            rewriter.erase(constant)


def _has_unit_batch(value: SSAValue) -> bool:
    """A tensor of rank 3 or more whose leading dim is 1."""
    shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
    return len(shape) >= 3 and shape[0] == 1


def _without_batch(type_: TensorType) -> TensorType:
    return TensorType(type_.get_element_type(), type_.get_shape()[1:])


def _is_dropped_view(op: Operation, of: SSAValue) -> bool:
    """Is op a graph.reshape of `of` to `of`'s type without its leading dim?"""
    return isinstance(op, graph.ReshapeOp) and op.x is of and op.result.type == _without_batch(of.type)


def _attributes_without_batch(op: Operation) -> dict[str, Attribute] | None:
    """op's attributes once its operands and results lose their leading dim, or None if op
    cannot lose it (dim 0 is its axis, it has a layout, or it is not one of the ops named)."""
    attributes = dict(op.attributes)
    if isinstance(op, graph.TransposeOp):
        perm = op.get("perm")
        if perm[0] != 0:
            return None
        attributes["perm"] = DenseArrayBase.from_list(i64, [axis - 1 for axis in perm[1:]])
    elif isinstance(op, (graph.SoftmaxOp, graph.LogSoftmaxOp, graph.LayerNormOp)):
        axis = op.get("axis") % len(op.operands[0].type.get_shape())
        if axis == 0:
            return None
        attributes["axis"] = IntegerAttr(axis - 1, i64)
    elif isinstance(op, graph.BatchNormOp) or not (
        category_of(op) is Category.ELEMENTWISE or isinstance(op, (graph.MatmulOp, graph.ReshapeOp, graph.BroadcastToOp))
    ):
        return None
    return attributes


def _types_hold(op: Operation, operand_types: list[Attribute], attributes, result_types: list[Attribute]) -> bool:
    """Do these operand and result types (and attributes) make a valid `op`?"""
    if isinstance(op, (graph.ReshapeOp, graph.CastOp)):
        same_shape = operand_types[0].get_shape() == result_types[0].get_shape()
        return isinstance(op, graph.ReshapeOp) or same_shape
    if isinstance(op, graph.BroadcastToOp):
        shape = tuple(result_types[0].get_shape())
        try:
            return np.broadcast_shapes(tuple(operand_types[0].get_shape()), shape) == shape
        except ValueError:
            return False
    try:
        return list(type(op).infer(operand_types, attributes)) == result_types
    except ShapeError:
        return False


def drop_unit_batch_dim(function: func.FuncOp) -> None:
    """Compute `function` without the leading unit dim of its values of rank 3 or more, when
    every op touching one can do without it (see the module docstring); else leave it as it is."""
    block = function.body.block
    arguments = [a for a in block.args if _has_unit_batch(a) and not all(_is_dropped_view(u.operation, a) for u in a.uses)]
    dropped: set[SSAValue] = set(arguments)
    plans: list[tuple[Operation, dict[str, Attribute]]] = []
    for op in block.ops:
        results = [r for r in op.results if _has_unit_batch(r)]
        if isinstance(op, graph.ReshapeOp) and results and all(isinstance(u.operation, func.ReturnOp) for u in op.result.uses):
            results = [] if op.x.type == _without_batch(op.result.type) else results
        if isinstance(op, func.ReturnOp) or not (results or any(o in dropped for o in op.operands)):
            continue
        if isinstance(op, graph.ConstantOp):
            plans.append((op, {}))
            dropped.update(results)
            continue
        if not isinstance(op, graph.GraphOp) or op.regions:
            return
        operand_types = [_without_batch(o.type) if o in dropped else o.type for o in op.operands]
        result_types = [_without_batch(r.type) if r in results else r.type for r in op.results]
        attributes = _attributes_without_batch(op)
        if attributes is None or not _types_hold(op, operand_types, attributes, result_types):
            return
        plans.append((op, attributes))
        dropped.update(results)
    if not plans:
        return
    for argument in arguments:
        view = graph.ReshapeOp([argument], result_types=[_without_batch(argument.type)])
        Rewriter.insert_op(view, InsertPoint.at_start(block))
        argument.replace_uses_with_if(view.result, lambda use: use.operation is not view)
    for op, attributes in plans:
        if isinstance(op, graph.ConstantOp):
            value = dense_to_numpy(op.value)
            Rewriter.replace_op(op, graph.ConstantOp(dense_from_numpy(value.reshape(value.shape[1:]))))
            continue
        op.attributes.update(attributes)
        for result in list(op.results):
            if result in dropped:
                Rewriter.replace_value_with_new_type(result, _without_batch(result.type))
    returned = block.last_op
    outputs = []
    for value, expected in zip(returned.operands, function.function_type.outputs.data):
        if value.type != expected:
            restore = graph.ReshapeOp([value], result_types=[expected])
            Rewriter.insert_op(restore, InsertPoint.before(returned))
            value = restore.result
        outputs.append(value)
    returned.operands = outputs


class FoldConstantBatchNorm(RewritePattern):
    """graph.batch_norm with constant parameters -> x * a + b with per-channel constants a, b."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BatchNormOp, rewriter: PatternRewriter):
        owners = [operand.owner for operand in op.operands[1:]]
        if not all(isinstance(owner, graph.ConstantOp) for owner in owners) or len(op.x.type.get_shape()) < 2:
            return
        scale, bias, mean, var = (dense_to_numpy(owner.value).astype(np.float64).reshape(-1) for owner in owners)
        with np.errstate(all="ignore"):
            factor = scale / np.sqrt(var + op.get("epsilon"))
            shift = bias - mean * factor
        if not (np.isfinite(factor).all() and np.isfinite(shift).all()):
            return
        dtype = dense_to_numpy(owners[0].value).dtype
        channel_shape = (-1,) + (1,) * (len(op.x.type.get_shape()) - 2)
        factor_op, shift_op = (
            graph.ConstantOp(dense_from_numpy(values.astype(dtype).reshape(channel_shape)))
            for values in (factor, shift)
        )
        product = graph.MulOp([op.x, factor_op.result])
        result = graph.AddOp([product.result, shift_op.result])
        rewriter.replace(op, [factor_op, shift_op, product, result], [result.result])
        for owner in owners:
            if not owner.result.uses:
                rewriter.erase(owner)


def _channel_constant(value: SSAValue, result: SSAValue) -> np.ndarray | None:
    """The per-channel values (dim 1 of `result`, rank 2 or more) of `value`, a finite constant
    that broadcasts along every other dim of `result` without widening it; None otherwise."""
    owner, shape = value.owner, result.type.get_shape()
    element_type = result.type.get_element_type()
    if not isinstance(owner, graph.ConstantOp) or len(shape) < 2 or value.type.get_element_type() != element_type:
        return None
    values = dense_to_numpy(owner.value)
    aligned = (1,) * (len(shape) - values.ndim) + values.shape
    other_dims = [size for i, size in enumerate(aligned) if i != 1]
    if len(aligned) != len(shape) or any(size != 1 for size in other_dims) or aligned[1] not in (1, shape[1]):
        return None
    channels = np.broadcast_to(values.reshape(-1), (shape[1],))
    return channels if np.isfinite(channels).all() else None


def _channel_operands(op: graph.MulOp | graph.AddOp) -> tuple[SSAValue, np.ndarray] | None:
    """(the other operand, the per-channel values) of a binary op with one per-channel constant
    operand whose result has the other operand's type."""
    for value, constant in ((op.a, op.b), (op.b, op.a)):
        channels = _channel_constant(constant, op.result)
        if channels is not None and value.type == op.result.type:
            return value, channels
    return None


def _channel_constant_op(channels: np.ndarray, result: SSAValue) -> graph.ConstantOp:
    """A constant [C, 1, ...] of `channels` that broadcasts along `result`'s dim 1."""
    rank = len(result.type.get_shape())
    return graph.ConstantOp(dense_from_numpy(channels.reshape((-1,) + (1,) * (rank - 2))))


class FoldChannelAffineIntoConv(RewritePattern):
    """mul(conv2d(x, constant w), a) -> conv2d(x, w * a); mul(add(y, b), a) -> add(mul(y, a), b * a);
    add(add(y, b), c) -> add(y, b + c); a, b, c finite per-channel constants, each inner op's
    result used once."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp | graph.AddOp, rewriter: PatternRewriter):
        operands = _channel_operands(op)
        if operands is None:
            return
        inner, channels = operands
        if not inner.has_one_use():
            return
        owner = inner.owner
        with np.errstate(all="ignore"):
            weights_owner = owner.w.owner if isinstance(owner, graph.Conv2dOp) else None
            if isinstance(op, graph.MulOp) and isinstance(weights_owner, graph.ConstantOp):
                weights = dense_to_numpy(weights_owner.value)
                scaled = (weights * channels.reshape((-1,) + (1,) * (weights.ndim - 1))).astype(weights.dtype)
                if not np.isfinite(scaled[np.isfinite(weights)]).all():
                    return
                weights_op = graph.ConstantOp(dense_from_numpy(scaled))
                conv = type(owner).create(
                    operands=[owner.x, weights_op.result],
                    result_types=[op.result.type],
                    attributes=dict(owner.attributes),
                )
                self._replace(rewriter, op, [weights_op, conv], conv.results[0], owner)
                return
            if not isinstance(owner, graph.AddOp) or (inner_operands := _channel_operands(owner)) is None:
                return
            value, added = inner_operands
            combined = (added * channels if isinstance(op, graph.MulOp) else added + channels).astype(added.dtype)
            if not np.isfinite(combined).all():
                return
        constant = _channel_constant_op(combined, op.result)
        new_ops: list[Operation] = [constant]
        if isinstance(op, graph.MulOp):
            scale = _channel_constant_op(channels, op.result)
            value = graph.MulOp([value, scale.result]).result
            new_ops = [scale, value.owner, constant]
        result = graph.AddOp([value, constant.result])
        self._replace(rewriter, op, [*new_ops, result], result.result, owner)

    @staticmethod
    def _replace(
        rewriter: PatternRewriter, op: Operation, new_ops: list[Operation], result: SSAValue, inner: Operation
    ) -> None:
        """Replaces `op` by `new_ops`, then erases `inner` and the constants no op uses any more."""
        constants = [o.owner for o in (*op.operands, *inner.operands) if isinstance(o.owner, graph.ConstantOp)]
        rewriter.replace(op, new_ops, [result])
        rewriter.erase(inner)
        for constant in dict.fromkeys(constants):
            if not constant.result.uses:
                rewriter.erase(constant)


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """xDSL's canonicalization (its ops' patterns, folding, dead code), then the graph patterns
    above, each applied until nothing changes, then `drop_unit_batch_dim` on each function."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        XdslCanonicalizePass().apply(ctx, op)
        patterns = [FoldPadIntoWindowOp(), ExpandWholePower(), FoldConstantBatchNorm(), FoldChannelAffineIntoConv()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(op)
        for function in list(op.walk()):
            if isinstance(function, func.FuncOp) and function.body.blocks:
                drop_unit_batch_dim(function)
