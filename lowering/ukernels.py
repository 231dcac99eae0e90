"""Ukernels: functions the JIT generates as LLVM IR for the shapes they are called with.

A kernel calls a ukernel like any function, destination-passing (it writes its last
argument), on (rows in, data read whole, rows out): the first and last arguments' leading dim
counts rows (a row chunk of the kernel calls the ukernel on its rows), the middle one is read
whole. A convolution ukernel with a tile epilogue (`tile_epilogue.py`) takes the epilogue's
operands between the data and out (`operands`): per-output-channel values, which a row chunk
reads whole, and a residual of out's shape, whose rows it slices as out's. The lowering
declares each callee `func.func private` with `graph.ukernel`; the JIT links in the IR that
the callee's kind writes from its name and argument types:

    func.call @graphopt_sgemm_packed_128x768x3072(%a, %b_panels, %out) : (...) -> ()
    func.func private @graphopt_sgemm_packed_128x768x3072(...) attributes {graph.ukernel}

Kinds, by the prefix of their names: the packed GEMM (`packed_gemm.py`; its row-major-b
variant runs convolutions, called as they are), the batched packed GEMM on panels packed at
run time (`batched_gemm.py`), the direct convolution (`direct_conv.py`), the convolution with
output channels on the lanes (`conv_lanes.py`), Winograd's F(2x2, 3x3) (`conv_winograd.py`),
the depthwise convolution (`depthwise_conv.py`), the pools (`pooling.py`) and the sums over
planes (`row_sums.py`), the last two called on (x, out) alone.

A convolution of one image has one row; it runs by blocks of output channels instead
(`channel_units`, `row_split.channel_split`): a chunk calls the ukernel for its channels,

    func.call @graphopt_sconv_direct_r8_d1x1_1x8x1x1x90_8x8x3x3_1x8x7x6(%phases, %w_chunk, %out_chunk)

with all of a one-group conv's input (phases) and the chunk's groups of a grouped one, and the
chunk's channels of the epilogue's per-channel values and residual.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, UnitAttr
from xdsl.ir import SSAValue

from graphopt.lowering import batched_gemm, conv_lanes, conv_winograd, depthwise_conv, direct_conv, packed_gemm, pooling, row_sums
from graphopt.lowering.llvm_text import host_has_avx512
from graphopt.lowering.output_rows import chunk_name as output_rows_chunk_name

UKERNEL_ATTR = "graph.ukernel"
"""Marks a declaration (`func.func private`) whose body the JIT generates (`ukernel_ir`)."""

_KINDS = {
    packed_gemm.PREFIX: packed_gemm,
    packed_gemm.ROW_MAJOR_PREFIX: packed_gemm,
    batched_gemm.PREFIX: batched_gemm,
    direct_conv.PREFIX: direct_conv,
    conv_lanes.PREFIX: conv_lanes,
    conv_winograd.PREFIX: conv_winograd,
    depthwise_conv.PREFIX: depthwise_conv,
    pooling.PREFIX: pooling,
    row_sums.PREFIX: row_sums,
}


def call(name: str, operands: Sequence[SSAValue]) -> func.CallOp:
    return func.CallOp(name, operands, [])


def chunk_call(
    ukernel_call: func.CallOp,
    operands: Sequence[SSAValue],
    columns: int | None = None,
    output_rows: tuple[int, int] | None = None,
) -> func.CallOp:
    """`ukernel_call` on `operands` of other sizes (a row chunk's), calling the ukernel for them;
    with `columns`, the conv GEMM's call for a chunk of its columns (`position_units`), on
    operands whole in type; with `output_rows` (first, end), a conv's call for those output
    rows (`conv_output_rows`), on operands whole."""
    name = ukernel_call.callee.string_value()
    if columns is not None:
        return call(packed_gemm.columns_chunk_name(name, columns), operands)
    if output_rows is not None:
        return call(output_rows_chunk_name(name, *output_rows), operands)
    return call(_kind(name).chunk_name(name, [v.type for v in operands]), operands)


class CallOperands(NamedTuple):
    """A ukernel call's operands by the part they play."""

    first: SSAValue
    """a, x or x's stride phases."""
    data: SSAValue | None
    """b's panels or the conv's weights (None for a pool or a sum over planes)."""
    per_channel: tuple[SSAValue, ...]
    """The operands of one slice per output channel (along their leading dim) other than the
    data: `conv_winograd`'s w, then the tile epilogue's operands of one value per output channel."""
    like_out: tuple[SSAValue, ...]
    """The tile epilogue's residual, if it reads one, then out: buffers of out's shape."""
    scratch: tuple[SSAValue, ...] = ()
    """Temporaries that the ukernel writes and reads itself, whole in each chunk: `conv_winograd`'s scratch buffer."""


def operands(ukernel_call: func.CallOp) -> CallOperands:
    """`ukernel_call`'s operands by part. The epilogue's residual is its operand of out's type
    (a per-channel value of out's shape is a residual to `linalg/epilogue.py` too)."""
    first, *middle, out = ukernel_call.arguments
    data, epilogue = (middle[0], middle[1:]) if middle else (None, [])
    w, scratch = ([epilogue[0]], (epilogue[1],)) if _kind(ukernel_call.callee.string_value()) is conv_winograd else ([], ())
    epilogue = epilogue[len(w) + len(scratch) :]
    residual = tuple(v for v in epilogue if v.type == out.type)
    return CallOperands(first, data, (*w, *(v for v in epilogue if v not in residual)), (*residual, out), scratch)


def writes_over_residual(ukernel_call: func.CallOp) -> bool:
    """Whether `ukernel_call` reads a residual (its tile epilogue's operand of out's type) and
    stays correct with out that residual's buffer: its kind says so for its name and types
    (`conv_lanes`, `conv_winograd`, the conv GEMM: `writes_over_residual`); the other kinds are
    not asked (the direct and depthwise convs: not measured)."""
    name = ukernel_call.callee.string_value()
    kind = _kind(name)
    return (
        kind in (conv_lanes, conv_winograd, packed_gemm)
        and len(operands(ukernel_call).like_out) == 2
        and kind.writes_over_residual(name, [v.type for v in ukernel_call.arguments])
    )


def sliced_by_rows(ukernel_call: func.CallOp) -> set[SSAValue]:
    """The operands a row chunk of `ukernel_call` slices by rows of out: out, the epilogue's
    residual and the first operand (a's rows, x's images), but not a batched GEMM's a whose
    batch dims broadcast (read whole), and also a batched GEMM's panels (one run per batch
    matrix); the other operands are read whole."""
    parts = operands(ukernel_call)
    sliced = {*parts.like_out, parts.first}
    if _kind(ukernel_call.callee.string_value()) is batched_gemm:
        sliced.add(parts.data)
        first, batch = parts.first.type.get_shape(), parts.data.type.get_shape()[:-1]  # the panels': out's batch dims
        if len(first) != len(batch) + 2 or first[0] != batch[0]:
            sliced.discard(parts.first)
    return sliced - strided_by_rows(ukernel_call).keys()


def strided_by_rows(ukernel_call: func.CallOp) -> dict[SSAValue, int]:
    """The operands that are strided views (a batched GEMM's a or out, `batched_gemm.view_name`),
    each with the floats between its rows: a row chunk passes them whole in type, from its
    first row."""
    name = ukernel_call.callee.string_value()
    if _kind(name) is not batched_gemm:
        return {}
    a, _, out = ukernel_call.arguments
    steps = batched_gemm.strided_by_rows(name)
    return {value: step for value, step in zip((a, out), steps) if step is not None}


def rows(ukernel_call: func.CallOp) -> int:
    """The rows of `ukernel_call` that row chunks split: out's leading dim; for the packed GEMM,
    out's first dim of more than one element before its columns (a [1, 56, 56, 96] times b:
    56 rows, each of 56 x 96); for a batched GEMM, the panels' (out's batch dims, also where out
    is a view)."""
    name = ukernel_call.callee.string_value()
    if _kind(name) is batched_gemm:
        return ukernel_call.arguments[1].type.get_shape()[0]
    shape = ukernel_call.arguments[-1].type.get_shape()
    if name.startswith(f"{packed_gemm.PREFIX}_"):
        return next((extent for extent in shape[:-1] if extent > 1), 1)
    return shape[0]


POSITION_SPLIT_CHANNELS = 16
"""Output channels up to which the conv GEMM on one image splits by output positions rather
than by output channels (`position_units`); 0: never."""
POSITION_SPLIT_PANELS = 8
"""Panels of columns (`packed_gemm.PANEL` each) from which it does."""
POSITION_SPLIT_ANY_CHANNELS = host_has_avx512()
"""Whether the conv GEMM on one image of at least POSITION_SPLIT_ANY_CHANNELS_DEPTH input channels
splits by output positions whatever its output channels (from POSITION_SPLIT_PANELS panels up
to POSITION_SPLIT_MAX_POSITIONS positions); not without AVX-512, where 24 and 32 channels gained
nothing (`position_units`). Measured on 2026-11-28 (Emerald Rapids, AVX-512: panels of 64
positions; conv + bias + relu alone, 2 threads, interleaved in one process), positions /
channels time at 56x56: 64->256 0.92x and 0.96x, 256->64 0.87x, 144->24 0.66x, 128->32 0.75x,
96->24 0.91x, 24->144 0.97x, 32->128 0.98x; 16->64 at 55 1.09-1.10x and 16->96 at 112 1.04x (so
from 24 input channels); at 28x28 (12.25 panels: chunks of 7 and 6) 128->512 1.11x, 512->128
1.09x alone. It first applied from 55x55 positions: whole models at 2 threads, that rule
against none (two runs of 15 s): ResNet-50 0.981 and 0.962, MobileNet-v2-ish 0.965 and 0.962,
DenseNet-121 0.970, EfficientNet-ish 0.977, SqueezeNet 1.012 and 1.005, Inception-v2 1.001.
Inside the models the 28x28s gain too, as the lanes convs' rows do
(`LANES_ROW_SPLIT_X_OVER_W`: a chunk of positions reads the part of x its thread wrote): from
28x28 against from 55x55, DenseNet-121 0.961 and 0.970, Inception-v2 0.975 and 0.975,
MobileNet-v2-ish 0.978 and 0.973, RegNet-ish 0.948, ResNet-50 0.987 and 1.019, ResNet-18-ish
0.995, EfficientNet-ish 1.001; and from 8 panels (27x27 too) against 55x55, SqueezeNet 0.966,
EfficientNet-ish 0.973, ShuffleNet 0.984, ConvNeXt-ish 0.986, Inception-v1 1.010."""
POSITION_SPLIT_ANY_CHANNELS_DEPTH = 24
"""Input channels from which POSITION_SPLIT_ANY_CHANNELS applies."""
POSITION_SPLIT_MAX_POSITIONS = 56 * 56
"""Output positions up to which it does: MobileNet-v2's 32->16 at 112x112 ran 0.89x alone by
positions, but the whole model 1.06-1.07x slower at 2 threads with both cores free (1.00-1.01x
with one taken); not explained."""


def position_units(ukernel_call: func.CallOp) -> int | None:
    """The output positions (columns of b and out) by which the conv GEMM's call on one image of
    one group splits, or None where it splits by output channels (`channel_units`): convs of at
    most POSITION_SPLIT_CHANNELS output channels (of any count from POSITION_SPLIT_ANY_CHANNELS_DEPTH
    input channels where POSITION_SPLIT_ANY_CHANNELS), from POSITION_SPLIT_PANELS panels of positions
    to POSITION_SPLIT_MAX_POSITIONS (SqueezeNet's squeeze 1x1s at 55x55, Inception-v1's 192->16 at 27).

    A chunk of output channels reads all of b (x: k x n floats, 1.5 MB for 128->16 at 55x55) for
    a few rows of out, in register tiles of `packed_gemm.ROWS` rows (8 channels a chunk: tiles
    of 6 and 2), each float of x used for 8 FMAs; a chunk of positions reads half of x and all
    of w (16 x 128 floats), each float of x used for 16. x, the residual and out are passed from
    the chunk's first column (`row_split.position_split`). Measured on 2026-11-28 (2-core EPYC
    znver1, AVX2, conv + bias + relu alone, 2 threads, both splits compiled in one process and
    interleaved with ONNX Runtime, load 2-3), positions / channels time: 16 output channels
    0.84-0.88x (128->16 at 55, 460 against 547 us), 0.85x (64->16 at 55), 0.81x (96->16 at 55),
    0.89x (32->16 at 112), 0.82x (128->12 at 55); 24 and 32 channels gain nothing (144->24 at
    56 1.01x, 96->24 0.96x, 192->32 at 28 0.97x, 128->32 at 27 1.03-1.05x, 256->32 at 27
    1.00-1.08x): 16 rows a chunk already use each float of x 16 times.
    """
    name = ukernel_call.callee.string_value()
    if not packed_gemm.is_row_major(name):
        return None
    parts = operands(ukernel_call)
    inputs, weights, out = (v.type.get_shape() for v in (parts.first, parts.data, parts.like_out[-1]))
    positions = math.prod(out[2:])
    one_group = inputs[1] == weights[1] and math.prod(inputs[2:]) == positions  # b is x itself: a 1x1 of stride 1
    any_channels = POSITION_SPLIT_ANY_CHANNELS and inputs[1] >= POSITION_SPLIT_ANY_CHANNELS_DEPTH
    few_channels = out[1] <= POSITION_SPLIT_CHANNELS or any_channels
    enough_positions = POSITION_SPLIT_PANELS * packed_gemm.PANEL <= positions <= POSITION_SPLIT_MAX_POSITIONS
    return positions if inputs[0] == 1 and one_group and few_channels and enough_positions else None


ROW_SPLIT_POSITIONS_PER_CHANNEL = 16
"""Output positions per output channel from which the conv GEMM on one image's im2col copy
splits by whole output rows (`output_row_units`); 0: never."""


def output_row_units(ukernel_call: func.CallOp) -> int | None:
    """The output rows by which the conv GEMM's call on an im2col copy of one image of one group
    (b [1, C, KH, KW, OH, OW]) splits, or None where it splits by output channels: convs of at
    least ROW_SPLIT_POSITIONS_PER_CHANNEL output positions per output channel (SqueezeNet's stem,
    3->64 3x3/2 at 224: 12321 positions).

    A chunk of output channels copies all of the im2col buffer (k x n floats: 27 x 12321 for
    the stem) and reads its share of w; a chunk of rows copies the im2col columns of its rows
    only (`row_split.position_split`) and reads all of w (o x k floats). The copy weighs in
    where each of its columns feeds few FMAs (o of them) and the GEMM is short. Measured on
    2026-11-28 (2-core EPYC znver1, AVX2, 2 threads, both splits compiled in one process and
    interleaved with ONNX Runtime, load 2-4): the stem + bias + relu (192 positions a channel)
    rows / channels 0.85-0.92x (0.88 -> 0.75 ms with a core free, ORT 0.96); ResNet-50's
    256->512 1x1/2 at 56 (784 positions, 1.5 a channel) 0.99-1.05x: it keeps channels.
    """
    name = ukernel_call.callee.string_value()
    if not packed_gemm.is_row_major(name):
        return None
    parts = operands(ukernel_call)
    b, weights, out = (v.type.get_shape() for v in (parts.first, parts.data, parts.like_out[-1]))
    im2col_of_one_group = len(b) == 6 and b[1] == weights[1]
    many_positions = math.prod(out[2:]) >= ROW_SPLIT_POSITIONS_PER_CHANNEL * out[1] > 0
    return out[2] if b[0] == 1 and im2col_of_one_group and many_positions and out[2] > 1 else None


WINOGRAD_ROW_SPLIT_POSITIONS_PER_CHANNEL = 16
"""Output positions per output channel from which `conv_winograd` on one image splits by output
rows (pairs of them: tile rows) rather than by output channels (`conv_output_rows`); 0: never.
A chunk of output channels transforms all of x (V: 16 C floats a tile) and reads its share of
U (16 C floats an output channel); a chunk of rows transforms its tiles of x and reads all of
U. Measured on 2026-11-28 (Emerald Rapids, AVX-512, conv + bias + relu alone, 2 threads,
interleaved in one process), rows / channels time: 64->64 at 56 (49 positions a channel) 0.83x,
64->192 at 56 (16) 0.95x, 64->96 at 28 (8) 1.00x, 128->128 at 28 (6) 1.04x, 256->256 and
512->512 at 14 (0.8, 0.4) 1.19x and 1.18x. Whole models at 2 threads, the rule against none:
VGG-19 0.934 (its 64 channels at 224, 128 at 112), ResNet-18-ish 0.969, ResNet-50 0.997,
Inception-v2 0.994. Not measured without AVX-512 (the Zen 1 host is gone); the reason, x
transformed once per chunk, holds there too."""
LANES_ROW_SPLIT_CHANNEL_TILES = 1
"""Register tiles of output channels (`conv_lanes.BLOCKS` blocks of 16 each) up to which the
lanes conv on one image splits by output rows rather than by output channels; 0: never."""
DIRECT_ROW_SPLIT = True
"""Whether the direct conv of one group on one image splits by output rows (whole row tiles:
`direct_conv.tile_rows`) rather than by output channels. A chunk of channels pads all of x into
stride phases of its own and reads its share of w, a chunk of rows pads and reads its rows of x
and all of w. With AVX-512 the direct ukernel's one-group convs in the light zoo and the built
models are stems (3 input channels, a few KB of w) that conv_lanes and the conv GEMM do not
take. Measured on 2026-11-29 (Emerald Rapids, 2 threads, each step in plan order in the model,
both plans in one process, 30 passes, two pairs), rows / channels: ShuffleNet-v2's 3->24 3x3/2 at
224, split 16 + 8 by `direct_conv.OUT_CHANNELS`, 0.902 and 0.932 (151 -> 137 us); the zoo
ShuffleNet's 1.014 and 0.988; ZFNet's 3->96 7x7/2 at 224 0.989 and 0.998."""
LANES_ROW_SPLIT_X_OVER_W = 0.5
"""The lanes conv on one image of more tiles of output channels splits by output rows where its x
(the phases) holds more than this many times the floats of its packed w; 0: never. A chunk of
output channels reads all of x and its share of w, a chunk of rows its share of x and all of w,
so rows read less where x is the larger; inside a model they also read the rows of x that their
own thread wrote in the step before, from its own L2, which tips the balance below 1. Measured
on 2026-11-28 (Emerald Rapids, AVX-512, whole models at 2 threads, each compiled both ways in one
process, interleaved with ORT, 15 s; runs vary by ±2%): at 1 against none, DenseNet-121 0.893,
MobileNet-v2-ish 0.935, EfficientNet-ish 0.962, Inception-v2 0.974, Inception-v1 0.980,
RegNet-ish 0.982, ResNet-50 0.966-0.985, ResNet-18-ish 0.988-0.992, SqueezeNet 0.988, ConvNeXt-ish
0.980-1.022, VGG-19 1.000-1.066, AlexNet 1.007; at 0.5 against 1 (ResNet-50's 1024->256 1x1s at
14 and 512->1024 1x1/2 at 28 take rows), ResNet-50 0.970, RegNet-ish 0.960, SqueezeNet 0.972,
Inception-v1 and -v2 0.984, MobileNet-v2-ish 1.018; at 0.25 against 0.5, ResNet-50 1.077 (its
256->256 3x3/2 at 28 too), RegNet-ish 0.960, the others 0.98-0.99. Alone, the convs moved at 1
ran the same either way (ResNet-50's stem and 128->128 3x3/2 at 56, VGG-19's 3->64 at 224:
0.98-1.01x). Not measured without AVX-512."""


def conv_output_rows(ukernel_call: func.CallOp) -> tuple[int, int] | None:
    """(output rows, the rows a chunk starts at a multiple of) by which a conv ukernel's call on
    one image splits, or None where it splits by output channels (`channel_units`):
    `conv_winograd` from WINOGRAD_ROW_SPLIT_POSITIONS_PER_CHANNEL output positions per output
    channel and 4 output rows, by tile rows (2 output rows); the lanes conv of at most
    LANES_ROW_SPLIT_CHANNEL_TILES register tiles of output channels, or whose x outweighs
    LANES_ROW_SPLIT_X_OVER_W times its w, and two super-tiles of rows or more
    (`conv_lanes.super_tile_rows`); the direct conv of one group (`DIRECT_ROW_SPLIT`) with two
    row tiles or more, by row tiles (`direct_conv.tile_rows`).

    The lanes conv's chunk of output channels computes whole register tiles of them
    (`conv_lanes.BLOCKS` blocks of 16: 32 channels on AVX-512), so a conv of one tile (DenseNet's
    128->32 3x3s) ran on one thread; smaller tiles of channels, 16 a chunk, ran no faster at 2
    threads than one chunk (one weight load and P broadcasts for P FMAs: bound by loads). A chunk of output rows
    keeps the tile, reads all of w and its rows of x, which it pads into its own phases
    (`row_split.output_row_split`). Measured on 2026-11-28 (Emerald Rapids, AVX-512, 2
    threads, interleaved with ORT in one process): 128->32 3x3 at 56 2.72 -> 1.51-1.71 ms (ORT
    0.86-1.19), DenseNet-121 1.19x faster whole. Alone, convs of two tiles or more gained
    nothing by rows (128->128 3x3/2 at 56 0.97x, 64->128 3x3/2 1.05x, 192->320 at 7 1.51x); inside
    models those whose x outweighs half of w do, and the others keep channels.
    """
    kind = _kind(ukernel_call.callee.string_value())
    if kind not in (conv_winograd, conv_lanes, direct_conv):
        return None
    parts = operands(ukernel_call)
    batch, out_channels, out_h, out_w = parts.like_out[-1].type.get_shape()
    if kind is direct_conv:
        granule, one_group = direct_conv.tile_rows(out_w), parts.first.type.get_shape()[1] == parts.data.type.get_shape()[1]
        return (out_h, granule) if DIRECT_ROW_SPLIT and batch == 1 and one_group and out_h >= 2 * granule else None
    if kind is conv_winograd:
        many_positions = out_h * out_w >= WINOGRAD_ROW_SPLIT_POSITIONS_PER_CHANNEL * out_channels > 0
        return (out_h, 2) if batch == 1 and many_positions and out_h >= 4 else None
    weights = parts.data.type.get_shape()
    granule = conv_lanes.super_tile_rows(out_w, weights[3])
    one_tile = out_channels <= LANES_ROW_SPLIT_CHANNEL_TILES * conv_lanes.BLOCKS * weights[-1]
    x_larger = 0 < LANES_ROW_SPLIT_X_OVER_W * math.prod(weights) < math.prod(parts.first.type.get_shape())
    return (out_h, granule) if batch == 1 and (one_tile or x_larger) and out_h >= 2 * granule else None


def conv_input_read(ukernel_call: func.CallOp, first: int, end: int) -> tuple[int, int, int] | None:
    """(axis, begin, end): the part of a conv ukernel call's first operand, a temporary, that
    its output rows first to end - 1 (`conv_output_rows`) read: rows of Winograd's padded x
    (`conv_winograd.rows_read`), elements of the lanes and direct convs' phase rows
    (`conv_lanes.phases_read`, `direct_conv.phases_read`); all of it elsewhere (None)."""
    name = ukernel_call.callee.string_value()
    types = [v.type for v in ukernel_call.arguments]
    kind, rank = _kind(name), len(types[0].get_shape())
    if kind is conv_winograd:
        return 2, *conv_winograd.rows_read(types[0].get_shape(), first, end)
    if kind is conv_lanes and rank == 5:
        return 4, *conv_lanes.phases_read(name, types, first, end)
    if kind is direct_conv and rank == 5:
        return 4, *direct_conv.phases_read(name, types, first, end)
    return None


class ChannelUnits(NamedTuple):
    """How a ukernel call splits by output channels (`channel_units`)."""

    units: int
    granule: int
    """Chunks start at multiples of this many units."""
    first_sliced: bool
    """Whether the first operand (x) splits with them."""
    data_units: int
    """The units the data operand (weights, b's panels) holds: more than `units` where its
    last block is padded (1000 channels in 63 blocks of 16); the last chunk takes the rest."""


def channel_units(ukernel_call: func.CallOp) -> ChannelUnits | None:
    """How a convolution or pooling ukernel's call on one image, or a GEMM's on one row, splits
    by output channels (columns); None for other calls.

    A pool or a sum over planes splits by channels, each reading its own channel of x.

    A grouped conv (depthwise ones too, and grouped ones run as the GEMM) splits by groups: a
    unit is a group's output channels, its weights and its input channels (of x, of its phases
    or of its im2col copy). A conv of one group splits by
    output channels, chunks starting at multiples of the ukernel's register tile
    (`direct_conv.OUT_CHANNELS`; a conv run as the GEMM, whose rows are the output channels,
    anywhere: 16 channels run as 8 + 8, not as 12 + 4 in tiles of `packed_gemm.ROWS`), and
    reads all of its input in each chunk; `conv_lanes` at multiples of its tile of blocks of
    16 output channels (`conv_lanes.BLOCKS`), its packed weights' blocks; `conv_winograd` at
    multiples of `conv_winograd.CHUNK_CHANNELS` (U, w, the per-channel values and out sliced;
    each chunk transforms all of x in its own scratch buffer).

    The packed GEMM on one row of a (a dense layer at batch 1) splits the same way by out's
    columns, chunks starting at multiples of `packed_gemm.PANEL`: a chunk's columns are its
    panels of b, and it reads all of a.
    """
    name = ukernel_call.callee.string_value()
    gemm = packed_gemm.is_row_major(name)
    parts = operands(ukernel_call)
    inputs, out = parts.first.type.get_shape(), parts.like_out[-1].type.get_shape()
    if name.startswith(f"{packed_gemm.PREFIX}_"):
        columns, depth = out[-1], inputs[-1]
        padded_columns = packed_gemm.packed_size(depth, columns) // depth  # b's last panel padded
        return ChannelUnits(columns, packed_gemm.PANEL, False, padded_columns) if rows(ukernel_call) == 1 else None
    if not gemm and _kind(name) not in (direct_conv, depthwise_conv, conv_lanes, conv_winograd, pooling, row_sums):
        return None
    if inputs[0] != 1:
        return None
    if _kind(name) in (pooling, row_sums):
        return ChannelUnits(out[1], 1, True, out[1]) if len(out) > 1 else None
    weights = parts.data.type.get_shape()
    if _kind(name) is conv_lanes:
        lanes = weights[-1]  # output channels per block
        return ChannelUnits(out[1], conv_lanes.BLOCKS * lanes, False, weights[0] * lanes)
    if _kind(name) is conv_winograd:
        return ChannelUnits(out[1], conv_winograd.CHUNK_CHANNELS, False, out[1])
    groups = inputs[1] // weights[1]
    if gemm and groups == 1:
        return ChannelUnits(out[1], 1, False, out[1])
    if groups > 1:
        return ChannelUnits(groups, 1, True, groups)
    return ChannelUnits(out[1], direct_conv.OUT_CHANNELS, False, out[1])


def declarations(kernels: Sequence[func.FuncOp]) -> list[func.FuncOp]:
    """The declaration of each ukernel that `kernels` call (kernels call nothing else), once."""
    calls = {op.callee.string_value(): op for kernel in kernels for op in kernel.walk() if isinstance(op, func.CallOp)}
    declared = []
    for name, ukernel_call in calls.items():
        declaration = func.FuncOp.external(name, [v.type for v in ukernel_call.arguments], [])
        declaration.attributes[UKERNEL_ATTR] = UnitAttr()
        declared.append(declaration)
    return declared


def ukernel_ir(name: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining the ukernel `name` on arguments of these memref types."""
    return _kind(name).ukernel_ir(name, types)


def _kind(name: str):
    return next(kind for prefix, kind in _KINDS.items() if name.startswith(f"{prefix}_"))
