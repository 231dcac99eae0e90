"""conv2d over a stride-phase copy of its padded x, the direct convolution ukernel, the one with output
channels on the lanes, Winograd's F(2x2, 3x3) on a padded copy of x, the depthwise one on x, or
the packed GEMM ukernel with b row-major (x itself, or an im2col copy of it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.lowering import conv_lanes, conv_winograd, depthwise_conv, direct_conv, packed_gemm, tile_epilogue, ukernels
from graphopt.lowering.linalg.indexing import dims_of, shape_of
from graphopt.lowering.linalg.reduction import CONTRACT, REASSOC_CONTRACT
from graphopt.lowering.linalg.scalar import element_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.indexing import Index
    from graphopt.lowering.linalg.loop_body import Kernel, LoopBody


def _copied_into(
    kernel: Kernel, x: SSAValue, buffer: SSAValue, position: Callable[[AffineExpr, AffineExpr, int], Index], columns: int = 1
) -> SSAValue:
    """`buffer` with NCHW `x`[n, c, h, j * columns + k] copied in at (n, c, *position(h, j, k)):
    contiguous reads of x, and no selects. Each iteration copies `columns` neighbouring columns of
    x (k = 0, ..., columns - 1, a constant in `position`); the last W mod `columns` columns take a
    loop of their own."""
    source = kernel.materialize(x)
    batch, channels, height, width = shape_of(x)
    full = width // columns
    for start, count, taken in ((0, full, columns), (full, 1, width % columns)):
        if not count * taken:
            continue
        n, c, h, j = dims_of(4)
        group = j + start if start else j
        outputs = [(buffer, (n, c, *position(h, group, k))) for k in range(taken)]
        body = kernel.loop((batch, channels, height, count), outputs)
        if columns > 1:
            body.read(kernel.extent(count), (j,))  # j's bound: no operand reads x at plain j
        body.finish([body.read(source, (n, c, h, group * columns + k if columns > 1 else group)) for k in range(taken)])
    return buffer


def padded_copy(kernel: Kernel, x: SSAValue, padding: Sequence[int], fill: float) -> SSAValue:
    """A buffer holding NCHW `x` with `padding` (top, left, bottom, right) of `fill` around H and W."""
    top, left, bottom, right = padding
    n, c, h, w = shape_of(x)
    buffer = kernel.temporary((n, c, h + top + bottom, w + left + right), element_of(x))
    kernel.fill(buffer, fill)
    return _copied_into(kernel, x, buffer, lambda h, w, _: (h + top, w + left))


CONV_CHANNEL_BLOCK = 4
"""Output channels that one conv2d loop body computes (when they divide a group's output
channels), picked by measurement: with the window row unrolled, their 4 x KW weights stay in
registers and each load of x feeds 4 FMAs. 3x3, 5x5 and 7x7 convs ran 1.2-2x faster than with
1 or 2 channels, and faster than with 8 (whose weights no longer fit in registers)."""


def lower_conv2d(kernel: Kernel, op: graph.Conv2dOp, out: SSAValue) -> bool:
    """out[n, o, oh, ow] = sum over c, kh, kw of x[n, group(o) * C/groups + c, row, column] * w[o, c, kh, kw].

    `phases` holds x, zero-padded, split by the strides (sh, sw) into phases (a, b), each a
    flat array of rows of R = ceil(padded width / sw) (`_conv_phases`; stride 1: one phase, the
    padded x with its rows flattened), so every tap reads x at stride 1. The conv calls the ukernel
    that the schedule names (`schedule.conv_ukernel`): "winograd" calls `conv_winograd` on a
    zero-padded copy of x (`conv_winograd.padding`), w transformed at compile time
    (`Kernel.packed_w`), w itself and its scratch buffer; "lanes" calls `conv_lanes`, output channels
    on the lanes, on the phases (x itself for a 1x1 of stride 1 without padding) and on w packed at
    compile time (`Kernel.packed_w`); "depthwise" calls the depthwise ukernel on x itself,
    with no copy; "gemm" calls the packed GEMM ukernel with b row-major (`packed_gemm.ROW_MAJOR`),
    one GEMM per image (and group): out[n] as [O, OH * OW] = w as [O, C * KH * KW] @ b[n]
    (`_gemm_b`); "direct" calls the direct convolution ukernel on the phases (with
    `direct_conv.SLACK` floats more), which keeps its output tiles in registers.
    All five apply the group's elementwise tail to the
    output vectors when the schedule takes it as a tile epilogue (then the call writes the
    group's result, and this returns True). Otherwise the
    innermost loop runs over all output rows at once, contiguous in x and in a flat accumulator:

    - acc[n, o, oh * R + ow] += phases[n, c, (kh dh) mod sh, (kw dw) mod sw, oh * R + ow + shift(kh, kw)]
      * w[o, c, kh, kw], looping (n, o / B, c, kh, p) over the OH * R positions p (those with
      ow >= OW are discarded). The body unrolls the window row (kw) and B = CONV_CHANNEL_BLOCK
      output channels, so LLVM keeps their weights in registers and vectorizes p;
    - out[n, o, oh, ow] = acc[n, o, oh * R + ow].
    """
    ukernel = kernel.schedule.conv_ukernel(kernel.group, op)
    if ukernel == "winograd":
        padded = padded_copy(kernel, op.x, conv_winograd.padding(shape_of(op.x), op.get("padding")), 0)
        epilogue, epilogue_operands = kernel.schedule.tile_epilogue(kernel, op) or ((), [])
        scratch = kernel.temporary(conv_winograd.scratch_shape(shape_of(op.x)[1], shape_of(out)), element_of(out))
        operands = [padded, kernel.packed_w[op], kernel.materialize(op.w), scratch, *epilogue_operands, out]
        return _call_ukernel(kernel, conv_winograd.name([v.type for v in operands], epilogue), operands, epilogue)
    if ukernel == "lanes":
        if _reads_x_in_place(op):
            phases, row = kernel.materialize(op.x), shape_of(op.x)[3]
        elif _subsamples_x(op):
            phases, row = _subsampled(kernel, op), shape_of(op.result)[3]
        else:
            phases, row = _conv_phases(kernel, op)
        epilogue, epilogue_operands = kernel.schedule.tile_epilogue(kernel, op) or ((), [])
        operands = [phases, kernel.packed_w[op], *epilogue_operands, out]
        name = conv_lanes.name([v.type for v in operands], row, op.get("dilations"), epilogue)
        return _call_ukernel(kernel, name, operands, epilogue)
    if ukernel == "depthwise":
        epilogue, epilogue_operands = kernel.schedule.tile_epilogue(kernel, op) or ((), [])
        operands = [kernel.materialize(op.x), kernel.materialize(op.w), *epilogue_operands, out]
        attributes = (op.get(key) for key in ("strides", "dilations", "padding"))
        name = depthwise_conv.name([v.type for v in operands], *attributes, epilogue)
        return _call_ukernel(kernel, name, operands, epilogue)
    if ukernel == "gemm":
        epilogue, epilogue_operands = kernel.schedule.tile_epilogue(kernel, op) or ((), [])
        operands = [_gemm_b(kernel, op), kernel.materialize(op.w), *epilogue_operands, out]
        return _call_ukernel(kernel, packed_gemm.row_major_name([v.type for v in operands], epilogue), operands, epilogue)
    if ukernel == "direct":
        phases, row = _conv_phases(kernel, op, direct_conv.SLACK)
        epilogue, epilogue_operands = kernel.schedule.tile_epilogue(kernel, op) or ((), [])
        operands = [phases, kernel.materialize(op.w), *epilogue_operands, out]
        name = direct_conv.name([v.type for v in operands], row, op.get("dilations"), epilogue)
        return _call_ukernel(kernel, name, operands, epilogue)
    batch, channels, out_h, out_w = shape_of(op.result)
    _, group_channels, kernel_h, kernel_w = shape_of(op.w)
    (sh, sw), (dh, dw) = op.get("strides"), op.get("dilations")
    group_size = channels // op.get("groups")
    block = math.gcd(group_size, CONV_CHANNEL_BLOCK)
    phases, row = _conv_phases(kernel, op)
    span = out_h * row
    acc = kernel.temporary((batch, channels // block, block, span), element_of(out))
    kernel.fill(acc, 0)

    n, ob, c, kh, p = dims_of(5)
    outputs = [(acc, (n, ob, AffineExpr.constant(i), p)) for i in range(block)]
    body = kernel.loop((batch, channels // block, group_channels, kernel_h, span), outputs, {2, 3})
    channel = c if group_size == channels else ob * block // group_size * group_channels + c
    sums = []
    for i in range(block):
        total = body.output(i)
        for kw in range(kernel_w):
            a, b, shift = phase_index((kh * dh, AffineExpr.constant(kw * dw)), (0, 0), (sh, sw), row)
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
    return False


def _call_ukernel(kernel: Kernel, name: str, operands: Sequence[SSAValue], epilogue: Sequence[tile_epilogue.Step]) -> bool:
    """Call ukernel `name` on `operands` (out last); whether it applies an epilogue (it wrote the
    group's result). Where the epilogue reads a residual that the ukernel may write out over
    (`ukernels.writes_over_residual`), the kernel may overwrite it (`Kernel.may_overwrite`)."""
    call = kernel.builder.insert(ukernels.call(name, operands))
    if ukernels.writes_over_residual(call):
        residual, out = ukernels.operands(call).like_out
        kernel.may_overwrite(out, residual, call)
    return bool(epilogue)


def _reads_x_in_place(op: graph.Conv2dOp) -> bool:
    """Whether the conv is a 1x1 of stride 1 without padding: x is its own stride phase."""
    _, _, height, width = shape_of(op.x)
    return (*shape_of(op.w)[2:], *op.get("strides"), *shape_of(op.result)[2:]) == (1, 1, 1, 1, height, width)


def _subsamples_x(op: graph.Conv2dOp) -> bool:
    """Whether the conv is a 1x1 of a stride above 1 without padding: it reads one of x's stride
    phases only."""
    return (*shape_of(op.w)[2:], *op.get("padding")) == (1, 1, 0, 0, 0, 0) and tuple(op.get("strides")) != (1, 1)


def _subsampled(kernel: Kernel, op: graph.Conv2dOp) -> SSAValue:
    """The one stride phase that a 1x1 conv of strides (sh, sw) without padding reads, as the
    phases [N, C, 1, 1, OH * OW] of a 1x1 of stride 1 on rows of OW: x[n, c, i * sh, j * sw] at
    i * OW + j. Copying all sh * sw phases (`stride_phases`) read and wrote all of x for a
    quarter of it used. Measured on 2026-11-29 (Emerald Rapids; each step in the model's plan
    order, both plans in one process, interleaved, two runs): ResNet-50's 512->1024 1x1/2 at 28
    0.92-0.94 at 1 thread, 0.84 at 2; ResNet-18-ish's 128->256 1x1/2 at 28 0.88-0.93 and 0.68-0.72."""
    batch, channels, _, _ = shape_of(op.x)
    _, _, out_h, out_w = shape_of(op.result)
    sh, sw = op.get("strides")
    buffer = kernel.temporary((batch, channels, 1, 1, out_h * out_w), element_of(op.x))
    n, c, i, j = dims_of(4)
    zero = AffineExpr.constant(0)
    body = kernel.loop((batch, channels, out_h, out_w), [(buffer, (n, c, zero, zero, i * out_w + j))])
    body.read(kernel.extent(out_h), (i,))
    body.read(kernel.extent(out_w), (j,))
    body.finish([body.read(kernel.materialize(op.x), (n, c, i * sh, j * sw))])
    return buffer


def _gemm_b(kernel: Kernel, op: graph.Conv2dOp) -> SSAValue:
    """The b of each image of a conv run as a GEMM: x itself ([C, H * W] per image) for a 1x1 of
    stride 1 without padding; else an im2col buffer [N, C, KH, KW, OH, OW] ([C * KH * KW, OH * OW]
    per image),

        b[n, c, kh, kw, oh, ow] = padded x[n, c, oh * sh + kh * dh, ow * sw + kw * dw],

    copied from x, or from its zero-padded copy (`padded_copy`) when the conv pads."""
    batch, channels, _, _ = shape_of(op.x)
    _, _, kernel_h, kernel_w = shape_of(op.w)
    _, _, out_h, out_w = shape_of(op.result)
    (sh, sw), (dh, dw), padding = op.get("strides"), op.get("dilations"), op.get("padding")
    if _reads_x_in_place(op):
        return kernel.materialize(op.x)
    source = padded_copy(kernel, op.x, padding, 0) if any(padding) else kernel.materialize(op.x)
    columns = kernel.temporary((batch, channels, kernel_h, kernel_w, out_h, out_w), element_of(op.x))
    body = kernel.parallel(columns)
    n, c, kh, kw, oh, ow = body.dims
    body.finish([body.read(source, (n, c, oh * sh + kh * dh, ow * sw + kw * dw))])
    return columns


def _conv_phases(kernel: Kernel, op: graph.Conv2dOp, slack: int = 0) -> tuple[SSAValue, int]:
    """conv2d's x, zero-padded, in a buffer of its stride phases, and the row length R (`stride_phases`)."""
    window, attributes = shape_of(op.w)[2:], (op.get(key) for key in ("dilations", "strides", "padding"))
    return stride_phases(kernel, op.x, window, *attributes, shape_of(op.result)[2], 0, slack)


def stride_phases(
    kernel: Kernel, x: SSAValue, window: Sequence[int], dilations: Sequence[int], strides: Sequence[int],
    padding: Sequence[int], out_h: int, fill: float, slack: int = 0,
) -> tuple[SSAValue, int]:
    """NCHW `x`, padded with `fill`, in a buffer [N, C, sh, sw, L] of its stride phases, and the row length R.

    phases[n, c, a, b, i * R + j] = padded x[n, c, i * sh + a, j * sw + b] (`fill` outside x): the
    elements around x filled (`_fill_around_x`), then x copied in, sw columns of x an iteration
    (LLVM loads them as vectors and shuffles them apart into the column phases: RegNet's grouped
    3x3 of 48 channels at 112x112, stride 2, on the direct ukernel took 1.59 ms with x copied one
    column at a time, 1.19 ms so). L covers x, the reads of a `window` (with `dilations`) at all
    `out_h` * R output positions and `slack` more elements.
    """
    top, left, _, right = padding
    _, in_channels, height, width = shape_of(x)
    sh, sw = strides
    row = -(-(width + left + right) // sw)
    reach = direct_conv.phase_reach(window, dilations, strides, row)
    length = max(out_h * row + reach, -(-(height + top) // sh) * row) + slack
    shape = (shape_of(x)[0], in_channels, sh, sw, length)

    def position(h: AffineExpr, j: AffineExpr, k: int) -> Index:
        a, _, at = phase_index((h, AffineExpr.constant(0)), (top, 0), (sh, sw), row)
        return (a, AffineExpr.constant((k + left) % sw), at + j + (k + left) // sw)

    buffer = kernel.temporary(shape, element_of(x))
    _fill_around_x(kernel, buffer, (height, width), (top, left), row, fill)
    return _copied_into(kernel, x, buffer, position, sw), row


def _fill_around_x(
    kernel: Kernel, phases: SSAValue, size: Sequence[int], begins: Sequence[int], row: int, fill: float
) -> None:
    """`fill` in the elements of a stride-phase buffer (`stride_phases`) that x, of `size` (H, W)
    at padded position `begins` (top, left), does not land on, and only there (a fill of the whole
    buffer before the copy wrote it twice: the conv above 1.19 -> 1.01 ms). Per phase (a, b), in
    rows of R: the rows before x's first one and x's first columns, from each x row's end to the
    next one's start, and from x's last row's end to L."""
    batch, channels, sh, sw, length = phases.type.get_shape()
    (height, width), (top, left) = size, begins
    for a in range(sh):
        first_row, end_row = max(0, -(-(top - a) // sh)), -(-(top + height - a) // sh)
        for b in range(sw):
            first, end = max(0, -(-(left - b) // sw)), -(-(left + width - b) // sw)
            last = (end_row - 1) * row + end
            runs = [(0, 1, length)] if end_row <= first_row or end <= first else [
                (0, 1, first_row * row + first), (first_row * row + end, end_row - 1 - first_row, row - end + first), (last, 1, length - last),
            ]
            for start, count, span in runs:
                if not count * span:
                    continue
                n, c, r, t = dims_of(4)
                at = (n, c, AffineExpr.constant(a), AffineExpr.constant(b), r * row + t + start)
                body = kernel.loop((batch, channels, count, span), [(phases, at)])
                body.read(kernel.extent(count), (r,))
                body.read(kernel.extent(span), (t,))
                body.finish([body.constant(fill, element_of(phases))])


def phase_index(position: Index, begins: Sequence[int], strides: Sequence[int], row: int) -> Index:
    """(phase a, phase b, flat index) of padded position (row, column) = `position` + `begins`
    in a buffer of stride phases with rows of `row`."""
    (h, w), (sh, sw) = (e + begin for e, begin in zip(position, begins)), strides
    a, i = (AffineExpr.constant(0), h) if sh == 1 else (h % sh, h // sh)
    b, j = (AffineExpr.constant(0), w) if sw == 1 else (w % sw, w // sw)
    return (a, b, i * row + j)


def in_bounds_count(body: LoopBody, start: AffineExpr, size: int, extent: int) -> SSAValue:
    """How many of the positions start, ..., start + size - 1 lie in [0, extent) (an index value)."""
    first = body.emit(arith.MaxSIOp(body.index_value(start), body.index_value(AffineExpr.constant(0))))
    end = body.emit(arith.MinSIOp(body.index_value(start + size), body.index_value(AffineExpr.constant(extent))))
    return body.emit(arith.SubiOp(end, first))
