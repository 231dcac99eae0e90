"""max_pool2d and avg_pool2d: the window unrolled in the loop body (or looped over its rows).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.dialects.attributes import is_float
from graphopt.lowering.linalg.conv import in_bounds_count, padded_copy
from graphopt.lowering.linalg.indexing import dims_of, shape_of
from graphopt.lowering.linalg.loop_body import LoopBody
from graphopt.lowering.linalg.reduction import COMBINES
from graphopt.lowering.linalg.scalar import element_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import Kernel


POOL_UNROLLED_TAPS = 64
"""Pooling windows of at most this many taps are unrolled whole in the loop body; larger ones
loop over their rows (a bound on the body's size, not a tuned constant)."""


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
    element = element_of(op.x)
    combine, identity = COMBINES[reduction], reduction.IDENTITY.of(element)
    batch, channels, out_h, out_w = shape_of(op.result)
    (kernel_h, kernel_w), (sh, sw) = op.get("kernel"), op.get("strides")
    top, left, _, _ = padding = op.get("padding")
    if any(padding):
        x, read = padded_copy(kernel, op.x, padding, identity), LoopBody.read
    else:
        if kernel_h > sh or kernel_w > sw:
            kernel.materialize(op.x)
        x, read = op.x, LoopBody.value
    if kernel_h * kernel_w <= POOL_UNROLLED_TAPS:
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
    if is_max and is_float(element):
        body.finish([_window_max(body, values, element)])
        return
    body.finish([functools.reduce(lambda a, b: combine(body, op, a, b), values)])
    if is_max:
        return
    body = kernel.parallel(out)
    if op.get("count_include_pad"):
        count = body.constant(kernel_h * kernel_w, element)
    else:
        _, _, height, width = shape_of(op.x)
        _, _, oh, ow = body.dims
        rows = in_bounds_count(body, oh * sh - top, kernel_h, height)
        columns = in_bounds_count(body, ow * sw - left, kernel_w, width)
        cells = body.emit(arith.IndexCastOp(body.emit(arith.MuliOp(rows, columns)), i64))
        count = body.emit(arith.SIToFPOp(cells, element))
    body.finish([body.emit(arith.DivfOp(body.output(0), count))])
