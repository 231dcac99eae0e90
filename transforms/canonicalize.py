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
"""

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.transforms.canonicalize import CanonicalizePass as XdslCanonicalizePass

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, is_splat
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


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """xDSL's canonicalization (its ops' patterns, folding, dead code), then the graph patterns
    above, each applied until nothing changes."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        XdslCanonicalizePass().apply(ctx, op)
        PatternRewriteWalker(GreedyRewritePatternApplier([FoldPadIntoWindowOp(), ExpandWholePower()])).rewrite_module(op)
