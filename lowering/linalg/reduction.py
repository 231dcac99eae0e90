"""Reductions and row-normalizing ops: reduce_*, softmax, log_softmax, layer_norm.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.dialects.attributes import is_float
from graphopt.lowering import row_sums, ukernels
from graphopt.lowering.linalg.indexing import dims_of, shape_of
from graphopt.lowering.linalg.scalar import element_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.indexing import Index
    from graphopt.lowering.linalg.loop_body import Kernel, LoopBody
    from graphopt.lowering.linalg.scalar import ScalarBuilder


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


def lower_reduce(kernel: Kernel, op: graph.ReductionOp, out: SSAValue) -> None:
    """A fill with the identity, then a loop nest folding in each element (`Kernel.reduction`);
    on the CPU, a sum or mean of x over short planes calls the row-sum ukernel (`row_sums.py`)
    instead, when x is a buffer of the group already. The mean then divides by the count."""
    x = op.x
    shape, element = shape_of(x), element_of(x)
    reduced = {a % len(shape) for a in op.get("axes")}
    sums = isinstance(op, (graph.ReduceSumOp, graph.ReduceMeanOp))
    if sums and x in kernel.buffers and kernel.schedule.row_sums(x, reduced):
        plane_sums(kernel, kernel.buffers[x], out)
    else:
        kernel.fill(out, op.IDENTITY.of(element))
        body = kernel.reduction(shape, reduced, lambda index: [(out, _kept(index, reduced, op.get("keepdims")))])
        body.finish([COMBINES[type(op)](body, op, body.output(0), body.value(x, body.dims))])
    if isinstance(op, graph.ReduceMeanOp):
        divide(kernel, out, math.prod(shape[a] for a in reduced))


def plane_sums(kernel: Kernel, x: SSAValue, out: SSAValue) -> None:
    """out = the sums of buffer `x` over its last two dims, by the row-sum ukernel (`row_sums.py`)."""
    kernel.builder.insert(ukernels.call(row_sums.name([x.type, out.type]), [x, out]))


def divide(kernel: Kernel, out: SSAValue, count: int) -> None:
    """out divided by `count` in place."""
    body = kernel.parallel(out)
    body.finish([body.emit(arith.DivfOp(body.output(0), body.constant(count, element_of(out))))])


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
    shape = shape_of(x)
    dims = dims_of(len(shape))
    row = kernel.temporary([size for i, size in enumerate(shape) if i not in reduced], element_of(x))
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


EXP_FLOOR = -87.0
"""Below this, e^x is a subnormal f32 (e^-87.34 is the least normal one), which the CPU computes
and adds slowly: a softmax term of an exponent under it counts as 0 (`_softmax_term`)."""


def _softmax_term(body: LoopBody, element: Attribute, x: SSAValue) -> SSAValue:
    """e^x, or 0 where x < EXP_FLOOR (NaN stays NaN). A term under e^-87 changes the row's sum
    by less than 2e-38 of the max's 1. Masked scores (-10000: half of a causal mask's) made
    every masked term subnormal. Softmax, 1 thread on this 2-core AMD EPYC, before -> after:
    4x128x128 with a causal mask 29.2 -> 18.2 us, without 17.9 -> 18.2 us; 4x197x197 82-85 ->
    55-58 us and 44-45 -> 45-48 us. Raising x to the floor before exp as well (no subnormal
    inside exp either) gave 49-51 us masked but 49-53 us unmasked at 197."""
    m = RowMath(body, element)
    underflows = body.emit(arith.CmpfOp(x, m.constant(EXP_FLOOR), "olt"))
    return body.emit(arith.SelectOp(underflows, m.constant(0.0), m(mathd.ExpOp, x)))


def lower_softmax(kernel: Kernel, op: graph.AxisNormalizationOp, out: SSAValue) -> None:
    """Row max, row sum of exp(x - max) (softmax also stores each exp in out), then out times
    the row's 1 / sum, which LLVM computes once per row (log_softmax: x - max - log sum).

    The max only shifts exp's argument, so on the CPU it is `maxnumf`, which skips NaN and
    vectorizes to half the instructions of NaN-propagating `maximumf`: a NaN in a row still
    makes its sum, and so the whole row, NaN. softmax's terms under e^EXP_FLOOR are 0
    (`_softmax_term`: no subnormal arithmetic).
    """
    x, element = op.x, element_of(op.x)
    reduced = {op.get("axis") % len(shape_of(x))}
    src = _source(kernel, x, out)

    def shifted(body: LoopBody, row_max: SSAValue) -> SSAValue:
        m = RowMath(body, element)
        return m(arith.SubfOp, body.read(src, body.dims), body.read(row_max, _kept(body.dims, reduced)))

    row_max = _row_statistic(
        kernel, x, reduced, kernel.schedule.softmax_row_max(),
        graph.ReduceMaxOp.IDENTITY.of(element),
        lambda body: body.read(src, body.dims),
    )
    is_softmax = isinstance(op, graph.SoftmaxOp)
    store_terms = is_softmax and kernel.schedule.softmax_stores_terms()
    row_sum = _row_statistic(
        kernel, x, reduced, arith.AddfOp, graph.ReduceSumOp.IDENTITY.of(element), lambda body: _softmax_term(body, element, shifted(body, row_max)),
        terms_into=out if store_terms else None,
    )
    body = kernel.parallel(out)
    m = RowMath(body, element)
    total = body.read(row_sum, _kept(body.dims, reduced))
    if store_terms:
        result = m(arith.MulfOp, body.output(0), m(arith.DivfOp, m.constant(1.0), total))
    elif is_softmax:
        result = m(arith.DivfOp, _softmax_term(body, element, shifted(body, row_max)), total)
    else:
        result = m(arith.SubfOp, shifted(body, row_max), m(mathd.LogOp, total))
    body.finish([result])


def lower_layer_norm(kernel: Kernel, op: graph.LayerNormOp, out: SSAValue) -> None:
    """Row sum, row sum of squared deviations, then (x - mean) / sqrt(var + epsilon) * scale + bias."""
    x, element = op.x, element_of(op.x)
    shape = shape_of(x)
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
