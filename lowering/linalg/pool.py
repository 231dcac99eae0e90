"""max_pool2d and avg_pool2d: on the CPU the pooling or row-sum ukernel, else the window
unrolled in the loop body (or looped over its rows).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.dialects.attributes import is_float
from graphopt.lowering import pooling, ukernels
from graphopt.lowering.linalg.conv import in_bounds_count, padded_copy, stride_phases
from graphopt.lowering.linalg.indexing import dims_of, shape_of
from graphopt.lowering.linalg.loop_body import LoopBody
from graphopt.lowering.linalg.reduction import COMBINES, divide, plane_sums
from graphopt.lowering.linalg.scalar import element_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import Kernel


POOL_UNROLLED_TAPS = 64
"""Pooling windows of at most this many taps are unrolled whole in the loop body; larger ones
loop over their rows (a bound on the body's size, not a tuned constant)."""

SHORT_POOL_ROW = 16
"""Output rows shorter than this pool over stride phases (`_pool_over_phases`): ShuffleNet's 3x3/2
pools ran 2-3.5x faster so with 14- and 7-wide output rows, and 1.4-1.5x slower with 28- and
56-wide ones (measured), whose rows LLVM vectorizes well enough and which then pay for the copy."""


def _window_max(body: LoopBody, values: list[SSAValue], element: Attribute) -> SSAValue:
    """The max of `values`, NaN if any is NaN: a chain of `select(a > b, a, b)` (one vmaxps
    each on x86, which drops NaNs), then NaN where an unordered compare of a pair finds one. An
    `arith.maximumf` per tap, which LLVM expands into several instructions to propagate NaN,
    ran ShuffleNet's 3x3 max pool at half the speed (measured)."""
    best = functools.reduce(
        lambda a, b: body.emit(arith.SelectOp(body.emit(arith.CmpfOp(a, b, "ogt")), a, b)), values
    )
    unordered = [body.emit(arith.CmpfOp(a, b, "uno")) for a, b in zip(values[::2], values[1::2] + values[-1:])]
    any_nan = functools.reduce(lambda a, b: body.emit(arith.OrIOp(a, b)), unordered)
    return body.emit(arith.SelectOp(any_nan, body.constant(math.nan, element), best))


def lower_pool2d(kernel: Kernel, op: graph.Pool2dOp, out: SSAValue) -> None:
    """Max (padding is -inf) or average (padding is 0) over each window.

    On the CPU, an average whose window is the whole unpadded plane calls the row-sum ukernel
    (`row_sums.py`) and divides in place; an f32 pool with a column stride and window the
    pooling ukernel takes (`pooling.applies`) calls it on x. Otherwise:

    Loops (n, c, oh, ow) with the window unrolled in the body: each output is reduced in
    registers and stored once, and LLVM vectorizes ow (x read at stride sw). A window of more
    than POOL_UNROLLED_TAPS loops (n, c, oh, kh, ow) with its row unrolled, accumulating into
    out (`Kernel.extent` gives kh its bound). A padded x is read from a padded copy (a fill,
    then x copied in). Unpadded, x computed in the group (an elementwise prologue) is computed
    at each tap when windows do not overlap (each element once), else once into a temporary.
    Output rows shorter than SHORT_POOL_ROW pool over stride phases instead (`_pool_over_phases`).
    The average divides by the window size, or with count_include_pad false by the number of
    its positions inside x.
    """
    is_max = isinstance(op, graph.MaxPool2dOp)
    (kernel_h, kernel_w), padding = op.get("kernel"), op.get("padding")
    whole_planes = (kernel_h, kernel_w) == shape_of(op.x)[2:] and not any(padding)
    if not is_max and whole_planes and kernel.schedule.row_sums(op.x, {2, 3}):
        plane_sums(kernel, kernel.materialize(op.x), out)
        divide(kernel, out, kernel_h * kernel_w)
        return
    if kernel.schedule.pool_ukernel(op):
        operands = [kernel.materialize(op.x), out]
        kind = "max" if is_max else "avgpad" if op.get("count_include_pad") else "avg"
        name = pooling.name([v.type for v in operands], kind, *(op.get(key) for key in ("kernel", "strides", "padding")))
        kernel.builder.insert(ukernels.call(name, operands))
        return
    reduction = graph.ReduceMaxOp if is_max else graph.ReduceSumOp
    element = element_of(op.x)
    combine, identity = COMBINES[reduction], reduction.IDENTITY.of(element)

    def fold(body: LoopBody, values: list[SSAValue]) -> SSAValue:
        if is_max and is_float(element):
            return _window_max(body, values, element)
        return functools.reduce(lambda a, b: combine(body, op, a, b), values)

    batch, channels, out_h, out_w = shape_of(op.result)
    sh, sw = op.get("strides")
    top, left, _, _ = padding
    unrolled = kernel_h * kernel_w <= POOL_UNROLLED_TAPS
    if unrolled and out_w < SHORT_POOL_ROW and kernel.schedule.merges_short_rows():
        pooled, row = _pool_over_phases(kernel, op, identity, fold)
        body = kernel.parallel(out)
        n, c, oh, ow = body.dims
        total = body.read(pooled, (n, c, oh * row + ow))
        if is_max:
            body.finish([total])
            return
    else:
        if any(padding):
            x, read = padded_copy(kernel, op.x, padding, identity), LoopBody.read
        else:
            if kernel_h > sh or kernel_w > sw:
                kernel.materialize(op.x)
            x, read = op.x, LoopBody.value
        if unrolled:
            n, c, oh, ow = dims_of(4)
            body = kernel.loop((batch, channels, out_h, out_w), [(out, (n, c, oh, ow))])
            rows, values = [AffineExpr.constant(kh) for kh in range(kernel_h)], []
        else:
            kernel.fill(out, identity)
            n, c, oh, kh, ow = dims_of(5)
            body = kernel.loop((batch, channels, out_h, kernel_h, out_w), [(out, (n, c, oh, ow))], {3})
            body.read(kernel.extent(kernel_h), (kh,))
            rows, values = [kh], [body.output(0)]
        values += [read(body, x, (n, c, oh * sh + kh, ow * sw + kw)) for kh in rows for kw in range(kernel_w)]
        body.finish([fold(body, values)])
        if is_max:
            return
        body = kernel.parallel(out)
        total = body.output(0)
    if op.get("count_include_pad"):
        count = body.constant(kernel_h * kernel_w, element)
    else:
        _, _, height, width = shape_of(op.x)
        _, _, oh, ow = body.dims
        rows = in_bounds_count(body, oh * sh - top, kernel_h, height)
        columns = in_bounds_count(body, ow * sw - left, kernel_w, width)
        cells = body.emit(arith.IndexCastOp(body.emit(arith.MuliOp(rows, columns)), i64))
        count = body.emit(arith.SIToFPOp(cells, element))
    body.finish([body.emit(arith.DivfOp(total, count))])


def _pool_over_phases(
    kernel: Kernel, op: graph.Pool2dOp, identity: float, fold: Callable[[LoopBody, list[SSAValue]], SSAValue]
) -> tuple[SSAValue, int]:
    """The window of each output reduced over x's stride phases (`conv.stride_phases`, padded
    with `identity`) into pooled[n, c, oh * R + ow], and the row length R.

    Loops (n, c, p) over all OH * R positions p at once, so that every tap reads its phase at
    stride 1 and the loop is long (positions with ow >= OW are discarded).
    """
    batch, channels, out_h, _ = shape_of(op.result)
    (kernel_h, kernel_w), (sh, sw) = op.get("kernel"), op.get("strides")
    window = (kernel_h, kernel_w)
    phases, row = stride_phases(kernel, op.x, window, (1, 1), (sh, sw), op.get("padding"), out_h, identity)
    pooled = kernel.temporary((batch, channels, out_h * row), element_of(op.x))
    n, c, p = dims_of(3)
    body = kernel.loop((batch, channels, out_h * row), [(pooled, (n, c, p))])
    values = [
        body.read(phases, (n, c, AffineExpr.constant(kh % sh), AffineExpr.constant(kw % sw), p + kh // sh * row + kw // sw))
        for kh in range(kernel_h)
        for kw in range(kernel_w)
    ]
    body.finish([fold(body, values)])
    return pooled, row
