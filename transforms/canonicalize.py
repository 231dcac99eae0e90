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
"""

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.transforms.canonicalize import CanonicalizePass as XdslCanonicalizePass

from graphopt.dialects import graph
from graphopt.dialects.shapes import ShapeError


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


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """xDSL's canonicalization (its ops' patterns, folding, dead code), then the graph patterns
    above, each applied until nothing changes."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        XdslCanonicalizePass().apply(ctx, op)
        PatternRewriteWalker(FoldPadIntoWindowOp()).rewrite_module(op)
