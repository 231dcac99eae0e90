"""The lanes convolution ukernel: an f32 conv2d with output channels on the vector lanes.

The cpu lowering copies x, zero-padded, into stride phases (as for the direct ukernel:
phases[n, c, a, b, i * R + j] = padded x[n, c, i * sh + a, j * sw + b]) and passes w packed at
compile time into blocks of 16 output channels, [ceil(O / 16), C, KH, KW, 16] (`pack`; zeros
past O). The name carries R and the dilations:

    func.call @graphopt_sconv_lanes_r58_d1x1_1x64x1x1x3366_4x64x3x3x16_1x64x56x56(%phases, %w_packed, %out)
        : (memref<1x64x1x1x3366xf32>, memref<4x64x3x3x16xf32>, memref<1x64x56x56xf32>) -> ()

A register tile is BLOCKS vectors of 16 output channels x P output positions (`positions`), the
positions consecutive in (oh, ow) flattened, so a tile crosses output rows freely and no lane
idles whatever the width or the stride. For each input channel and tap of the window (or row
of taps, where the registers hold its weights: `taps_per_step`) it loads the BLOCKS weight
vectors of each tap once and, for each x value the taps read, broadcasts it and issues one FMA
per block and (tap, position) that reads it. After the last input channel each block is
transposed in registers (shufflevector), so that a vector holds one output channel's
positions, contiguous in NCHW out; the tile epilogue (`tile_epilogue.py`) runs on those vectors
and each is stored under a mask of P lanes (without AVX-512 and for P <= 4, as a vector of P
floats: `PLAIN_STORE_LANES`; for P of 5 to 8 followed in its rows by later tiles, as 8 floats that
those tiles rewrite past P: `OVERLAP_STORE_LANES`). Loops (n, tile of channel blocks, super-tile of positions): a
super-tile is lcm(P, OW) positions, whose tiles are unrolled with their row crossings
known (one output row when P divides OW: a loop over its tiles), and the positions after the
last super-tile are tiles of even sizes unrolled after the loop (`rest_tiles`). Where a tile of
channels takes few tiles of positions, they prefetch the next tile of channels' weights between
them (`PREFETCH_NEXT_WEIGHTS_TILES`).

With an epilogue, the name carries its steps after the dilations (`_e<token>`) and the call
passes its operands between w and out, as for the direct ukernel.

A call for output rows first to end - 1 alone (a chunk of a conv split by output rows,
`row_split.output_row_split`) has a name ending in `_oh<first>to<end>` (`output_rows.chunk_name`) and
the same operands: it computes those rows of every output channel, its super-tiles starting at
row first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering import direct_conv, output_rows, tile_epilogue
from graphopt.lowering.llvm_text import (
    VECTOR,
    VECTOR_TYPE,
    LLVMText,
    broadcast,
    fma,
    host_has_avx512,
    load,
    store,
    store_first,
)

AVX512_TILE = (2, 14, 7, 12, 0, 0, 12)
AVX2_TILE = (1, 6, 4, 13, 8, 55, 56)
"""(BLOCKS, POSITIONS, FEWEST_POSITIONS, MAX_UNROLLED_TILES, ROW_REGISTERS, MAX_ROW_TAP_TILES,
MAX_WIDE_WINDOW_TILES) of a register tile (`register_tile`)."""


def register_tile(avx512: bool) -> tuple[int, int, int, int, int, int, int]:
    """The register tile for a CPU with or without AVX-512 (`llvm_text.host_has_avx512`): with
    AVX-512's 32 registers of 16 floats, 2 x 14 (28 accumulators, 2 weight vectors; 2 x 14 ran
    1-4% faster than 2 x 12, 3 x 8, 4 x 6 and 1 x 28 on ResNet-50's 3x3s and stem, Zen 4);
    without it (AVX2: 16 registers of 8 floats, a vector of 16 is two), 1 x 6 down to 1 x 4
    (12 accumulator registers, 2 of weights, 1 broadcast): on a Zen 1 host 2 x 14 spills, and
    1 x 4-6 ran 1.5-3.5x faster (64->64 3x3 at 56 1.53x, 128 at 28 1.54x, 256 at 14 3.5x,
    512 at 7 1.75x, 64 at 224 1.5x; 2 x 2 as fast as 1 x 4, 1 x 7 spills: 0.7x of 1 x 4), with
    super-tiles of up to 13 tiles so that rows of 13 (SqueezeNet's) fit tiles of 6: 64->256 3x3
    at 13 ran 7.4x, 512->1008 1x1 1.6x faster than the direct ukernel and the GEMM there.
    ROW_REGISTERS: registers of 16 floats that a row of taps may fill (`taps_per_step`): AVX2's
    16 of 8 floats; 0 (one tap per step) with AVX-512, where rows of taps were not measured.
    MAX_ROW_TAP_TILES: tiles of a super-tile written out at most for tiles whose steps take a
    row of taps (`positions`; AVX2's 3x3s in tiles of 4): 55, so that SqueezeNet's rows of 55,
    27 and 13 (super-tiles of 4 rows) take them rather than one-tap tiles of 5 or 6 (Zen 1,
    the whole conv: 16->64 at 55 1.14x, 32->128 at 27 1.06x, 48->192 and 64->256 at 13 1.04x
    and 1.10x faster). Rows of 14 and 7 keep tiles of 6: 14 ran 1.00-1.03x alone but VGG-19 at
    2 threads 1.06x slower (three runs); 7, where most tiles of 4 cross a row, 0.95x at 2 threads.
    MAX_WIDE_WINDOW_TILES: tiles of a super-tile written out at most for windows wider than 1
    whose steps never take a row of taps (`positions`; AVX2's 5x5s, 7x7s, 11x11s): 56, so that
    the 7x7/2 stem's rows of 112 take tiles of 6 (super-tiles of 3 rows) rather than 4, the
    loop's fixed instructions (shift look-up, weight loads, counters) spread over 12 FMAs rather
    than 8; with AVX-512 as MAX_UNROLLED_TILES (no change)."""
    return AVX512_TILE if avx512 else AVX2_TILE


(
    BLOCKS, POSITIONS, FEWEST_POSITIONS, MAX_UNROLLED_TILES, ROW_REGISTERS, MAX_ROW_TAP_TILES, MAX_WIDE_WINDOW_TILES
) = register_tile(host_has_avx512())
"""Vectors of 16 output channels per register tile; output positions per tile, at most and at
least; tiles of a super-tile, and tiles after the last one, written out at most (`positions`);
registers for a row of taps (`taps_per_step`); the most tiles of a super-tile of tiles that
take one; the most of a super-tile for windows too wide for a row of taps: this CPU's
`register_tile`."""
PLAIN_STORE_LANES = 0 if host_has_avx512() else 4
"""Tiles of at most this many positions store them as vectors of P floats (`store_first`: one
`vmovups xmm` for 4) rather than under a mask (`store`): without AVX-512 the masked store is
microcoded (Zen 1: 64->64 3x3 at 56, 128->128 at 28, tiles of 4, 1.04-1.05x faster). Tiles of
6 keep the mask: as `vmovups`, `vextractf128` and `vmovlps`, 512->512 at 7 ran 0.91-0.97x."""
OVERLAP_STORE_LANES = 0 if host_has_avx512() else 8
"""Tiles of more than PLAIN_STORE_LANES and at most this many positions whose channels' rows go
on for this many positions or more (later tiles of the same call write the rest: not a row's last
tile) read the residual and store their vectors as this many floats, plain (`llvm_text.load_first`,
`store_first`: one `vmovups ymm` each), rather than under a mask of P lanes: the lanes past P
store values that the later tile rewrites. 0: always the mask (AVX-512)."""
PREFETCH = not host_has_avx512()
"""Whether each step of a tile's loop prefetches the lines of x that the same step of the next
input channel reads (`_prefetches`): without AVX-512 (Zen 1, AVX2) the stride-2 3x3s' x over all
input channels leaves L1 between tiles, and the hardware prefetchers do not follow the jumps
from channel to channel: 128->128 3x3/2 at 56 1.16-1.17x, 256->256 at 28 1.20-1.22x, 512->512 at
14 1.12x faster (the ukernel alone). The last channel prefetches its own lines: a prefetch past
x's end does not fault, but where the page after x is not mapped it ran 4x slower (MobileNet-v2's
3->32 3x3/2 stem: 3.8 against 0.9 ms, in processes whose heap ended after x). A step prefetches
each line its x values may lie on, the first and the last of each run (`_prefetches`), and a 1x1's
step PREFETCH_CHANNELS_1X1 input channels ahead."""
PREFETCH_STRIDED = True
"""Whether the convs of a stride other than 1 prefetch x as PREFETCH does for every conv, where
PREFETCH is off (AVX-512). On Emerald Rapids (AVX-512, 2 MB of L2; 2026-11-28, conv + bias + relu
alone, 1 thread, interleaved, thread CPU time) 128->128 3x3/2 at 56 took 0.81 of its time, 64->128
3x3/2 at 56 0.94, 256->256 3x3/2 at 28 0.95, 512->512 3x3/2 at 14 1.00, and 64->64 3x3/1 at 56
1.00; the stems (3->64 and 3->96 7x7/2 at 224, 3->32 3x3/2) 0.99-1.00. Whole models (one
process, 8 interleaved rounds with ORT): every conv prefetching, ResNet-50 0.974, EfficientNet-ish
0.970, MobileNet-v2-ish 0.988, DenseNet-121 1.038 (whose convs are of stride 1 but for the stem),
the others 0.99-1.00; the strided ones (this rule), ResNet-50 0.989, ResNet-18-ish 0.996, the
MobileNet- and EfficientNet-ish and DenseNet-121 1.00, SqueezeNet 1.036 (its only strided conv is
the stem: this host's noise)."""
PREFETCH_1X1 = True
"""Whether the 1x1s prefetch x as PREFETCH does for every conv, where PREFETCH is off (AVX-512):
at 2 threads a 1x1 reads x that the other core wrote, whose lines the hardware prefetchers
do not bring ahead across the channels' strides. On Emerald Rapids (AVX-512, 2026-11-29; each
step in the model's plan order, both plans in one process, interleaved, two runs) at 2
threads: ResNet-50's 1024->256 at 14 0.905 and 0.941, 256->1024 0.853 and 0.891, 1024->512
0.747 and 0.818; DenseNet-121's 1x1s at 14 0.64-0.86 (its steps' sum 0.950 and 0.935). At 1
thread 0.95-1.01 (ResNet-50's steps' sum 0.986 and 1.001, DenseNet-121's 0.990 and 0.998)."""
PREFETCH_CHANNELS_1X1 = 16
"""How many input channels ahead a 1x1's step prefetches x (`PREFETCH`): its step (one channel,
1 x 6 positions: 12 FMAs on AVX2) is too short for a line from L2 or L3 to arrive by the next
channel's; 16 steps are about 200 FMAs. Zen 1, the conv + residual alone, with both lines of each
run: 1024->256 and 512->128 at 14x14 1.08-1.16x faster (8 ahead 1.05-1.12x; 16 ahead with the first
line only, or both lines one channel ahead, 0.95-1.03x), 256->1024 1.01-1.02x. Wider windows prefetch
the next channel, KH x KW taps ahead (3x3s two channels ahead measured the same)."""
PREFETCH_NEXT_WEIGHTS_TILES = 16
"""Calls of several tiles of output channels, each taking at most this many tiles of positions,
prefetch the next tile of channels' weights into L2 as they go (`_Ukernel._prefetch_next_weights`): tile k of K, at
step u of its U steps, the lines of step (k * U + u) // K, so that the K tiles bring in the next
weights at an even rate. Without it a tile of channels reads its weights from memory in its first
tile of positions alone, about 128 bytes per 28 FMAs on AVX-512, more than one core's share of
memory bandwidth, and from cache in the others: ResNet-50's 512->512 3x3s at 7 (9.4 MB of
weights, 4 tiles of positions) took 1.3x their time with warm weights inside the model, as did
ONNX Runtime's. Emerald Rapids (AVX-512, 2026-11-29, each step in ResNet-50's plan order, both
plans in one process, 30 passes, the median of the per-pass ratios, two pairs): at 1 thread the
lanes steps' sum 0.918 and 0.904 (the whole plan 0.967 and 0.958): 512->512 3x3 at 7 0.80 and
0.77, 3x3/2 at 14 0.82, 1024->512 1x1/2 at 28 0.94, the 1x1s at 14 0.93-0.95, 256->256 3x3/2 at 28
(14 tiles) 0.97; at 2 threads 0.985 and 0.994 (whole 0.995, 0.996): the 3x3s at 7 0.92, 256->256
3x3/2 1.03, the rest 0.98-1.01; ResNet-18-ish at 2 threads 0.93 (whole 0.972), DenseNet-121 and
VGG-19 1.00. Every call prefetching took the stem and 128->128 3x3/2 at 56 (896 and 56 tiles,
weights that stay in cache) 1.03-1.04x longer at 2 threads; a call of one tile of channels (the
MNIST CNN's 8->16 5x5 at 14) would prefetch its own weights for nothing."""
PREFIX = "graphopt_sconv_lanes"


def applies(x_type: Attribute, w_type: Attribute, out_type: Attribute, groups: int) -> bool:
    """Whether a conv2d of these types can run as the ukernel: f32, one group, and output rows
    that a tile size tiles (`positions`)."""
    return (
        groups == 1
        and positions(out_type.get_shape()[3], w_type.get_shape()[3]) is not None
        and all(t.get_element_type() == f32 for t in (x_type, w_type, out_type))
    )


def positions(out_w: int, kernel_w: int = 1) -> int | None:
    """Output positions per tile for rows of `out_w` and windows `kernel_w` wide, from POSITIONS
    down to FEWEST_POSITIONS; None when no size tiles the row, that is, none divides OW (a loop
    over the tiles of each row) or has a super-tile lcm(P, OW) of at most MAX_UNROLLED_TILES
    tiles (rows of 17).

    First choice, in odd rows that hold two tiles or more: the most positions whose steps take a
    row of taps (`taps_per_step`) and whose super-tile is at most MAX_ROW_TAP_TILES tiles. For
    windows wider than 1 whose steps take one tap at any tile size: the most positions whose
    super-tile is at most MAX_WIDE_WINDOW_TILES tiles. Else the most positions that tile the row.
    AVX512_TILE: rows of 224, 112, 56, 28, 14 and 7: 14; of 13: 13; of 27: 12; of 50: 10; of 55:
    11. AVX2_TILE, 1x1s: rows of 224, 112, 56 and 28: 4; of 14, 7, 13 and 27: 6; of 55 and 50: 5;
    3x3s the same but for the odd rows of 13, 27 and 55: 4; 5x5s and wider: rows of 224: 4; of
    112, 56, 55, 28, 27, 14, 13 and 7: 6."""

    def fits(p: int, most_tiles: int) -> bool:
        return out_w % p == 0 or math.lcm(p, out_w) // p <= most_tiles

    sizes = range(POSITIONS, FEWEST_POSITIONS - 1, -1)
    fitting = [p for p in sizes if fits(p, MAX_UNROLLED_TILES)]
    rows_of_taps = [
        p for p in sizes if taps_per_step(kernel_w, p) > 1 and out_w % 2 and out_w >= 2 * p and fits(p, MAX_ROW_TAP_TILES)
    ]
    wide_window = kernel_w > 1 and taps_per_step(kernel_w, FEWEST_POSITIONS) == 1
    wide = [p for p in sizes if wide_window and fits(p, MAX_WIDE_WINDOW_TILES)]
    return (rows_of_taps + wide + fitting)[0] if fitting else None


def rest_tiles(rest: int, size: int) -> list[int]:
    """Positions of each tile after the last super-tile: `rest` in as few tiles of at most `size` as
    can hold them, of sizes that differ by at most one (13 in tiles of 6: 5, 4, 4, not 6, 6, 1). A
    tile of one or two positions is bound by its FMAs' latency (one or two accumulators per block,
    one FMA each per tap): Zen 1, AVX2 tiles of 6, 7x7 outputs (49 positions: 42, then 4 and 3 rather
    than 6 and 1): 3x3s 192->320, 224->224 and 512->512 1.00-1.05x faster alone; 13x13 and 14x14
    1.00-1.01x."""
    count = -(-rest // size)
    return [rest // count + (k < rest % count) for k in range(count)]


def taps_per_step(kernel_w: int, positions: int) -> int:
    """Taps of the window per step of a tile's loop over (input channel, taps): a row of KW taps
    when its BLOCKS x KW weight vectors, the BLOCKS x P accumulators and one broadcast fit in
    ROW_REGISTERS, else one. A row loads its weights once per step and broadcasts once each x
    value that neighbouring taps share (P + 2 of 3P at stride 1), with no table look-up per tap
    (Zen 1, AVX2, tiles of 4, 3x3: 24 FMAs, 6 weight loads, 6 broadcasts per step; with plain
    stores, 64->64 at 56 and 128->128 at 28 1.12-1.13x faster than one tap with masked stores)."""
    return kernel_w if BLOCKS * (kernel_w + positions) + 1 <= ROW_REGISTERS else 1


def writes_over_residual(name_: str, types: Sequence[MemRefType]) -> bool:
    """Whether the ukernel stays correct with out the buffer of its epilogue's residual: each
    tile reads the residual at its positions, then stores them; not where tiles store past their
    positions (`OVERLAP_STORE_LANES`, without AVX-512), over residual values a later tile reads."""
    return OVERLAP_STORE_LANES <= PLAIN_STORE_LANES


def packed_shape(w_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of w [O, C, KH, KW] packed (`pack`)."""
    out_channels, channels, kernel_h, kernel_w = w_shape
    return (-(-out_channels // VECTOR), channels, kernel_h, kernel_w, VECTOR)


def pack(w: np.ndarray) -> np.ndarray:
    """w [O, C, KH, KW] as the ukernel reads it: [ceil(O / 16), C, KH, KW, 16], zeros past O."""
    blocks, *_ = packed_shape(w.shape)
    padded = np.zeros((blocks * VECTOR, *w.shape[1:]), w.dtype)
    padded[: w.shape[0]] = w
    return np.ascontiguousarray(padded.reshape(blocks, VECTOR, *w.shape[1:]).transpose(0, 2, 3, 4, 1))


def name(
    types: Sequence[MemRefType], row: int, dilations: Sequence[int], epilogue: Sequence[tile_epilogue.Step] = ()
) -> str:
    """The ukernel's name for a call on memrefs (phases, packed w, epilogue operands..., out)
    with rows of `row` floats, applying `epilogue` before each store."""
    return direct_conv.name(types, row, dilations, epilogue, PREFIX)


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk of its output channels)."""
    return name(types, *direct_conv.parameters(name_))


def super_tile_rows(out_w: int, kernel_w: int) -> int:
    """Output rows per super-tile (lcm(P, OW) positions, `positions`): a chunk of output rows
    starting at a multiple of them tiles its rows as the whole call does."""
    return math.lcm(positions(out_w, kernel_w), out_w) // out_w


def phases_read(name_: str, types: Sequence[MemRefType], first: int, end: int) -> tuple[int, int]:
    """`direct_conv.phase_span` of the call computing output rows first to end - 1: it reads each
    row's out_w columns (one float at a time)."""
    return direct_conv.phase_span(name_, types, first, end, types[-1].get_shape()[3])


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr phases, ptr w, <the tile epilogue's operands>, ptr out)` for these memref types."""
    return _Ukernel(name_, types).text()


def _transposed(text: LLVMText, rows: Sequence[str]) -> list[str]:
    """The 16 columns of the 16 x 16 matrix whose rows are the vectors `rows` (fewer: zero
    rows after them): four rounds of shufflevector, each swapping bit d of the row and the
    lane index between pairs of rows that differ in bit d."""
    rows = list(rows) + ["zeroinitializer"] * (VECTOR - len(rows))
    for d in (1, 2, 4, 8):
        swapped = list(rows)
        for low in (r for r in range(VECTOR) if not r & d):
            high = low | d
            low_mask = [j if not j & d else VECTOR + (j ^ d) for j in range(VECTOR)]
            high_mask = [j | d if not j & d else VECTOR + j for j in range(VECTOR)]
            for target, mask in ((low, low_mask), (high, high_mask)):
                lanes = ", ".join(f"i32 {m}" for m in mask)
                swapped[target] = text.value(
                    f"shufflevector {VECTOR_TYPE} {rows[low]}, {VECTOR_TYPE} {rows[high]}, <16 x i32> <{lanes}>"
                )
        rows = swapped
    return rows


class _Ukernel(LLVMText):
    def __init__(self, name_: str, types: Sequence[MemRefType]):
        super().__init__()
        self.name = name_
        self.row, (self.dh, self.dw), self.epilogue = direct_conv.parameters(name_)
        phases, w, out = (types[0].get_shape(), types[1].get_shape(), types[-1].get_shape())
        if len(phases) == 4:  # x itself: a 1x1 of stride 1 without padding
            self.batch, self.channels, height, width = phases
            self.sh, self.sw, self.length = 1, 1, height * width
        else:
            self.batch, self.channels, self.sh, self.sw, self.length = phases
        _, _, self.kernel_h, self.kernel_w, _ = w
        _, self.out_channels, self.out_h, self.out_w = out
        self.positions = self.out_h * self.out_w
        self.first_row, self.end_row = output_rows.row_range(name_, self.out_h)
        """The output rows the call computes (all of them but in a chunk of rows)."""
        self.tiles: dict[tuple[int, int, tuple[int, ...], int], str] = {}
        self.prefetches_x = (
            PREFETCH
            or (PREFETCH_STRIDED and (self.sh, self.sw) != (1, 1))
            or (PREFETCH_1X1 and (self.kernel_h, self.kernel_w) == (1, 1))
        )
        """Whether the tiles' steps prefetch the x of an input channel ahead (`PREFETCH`,
        `PREFETCH_STRIDED`, `PREFETCH_1X1`)."""
        self.size = positions(self.out_w, self.kernel_w)
        self.super_tile = math.lcm(self.size, self.out_w)
        computed = (self.end_row - self.first_row) * self.out_w
        self.full_super_tiles = computed // self.super_tile
        self.last_tiles = rest_tiles(computed - self.full_super_tiles * self.super_tile, self.size)
        """Positions of each tile after the last super-tile (`rest_tiles`)."""
        self.position_tiles = self.full_super_tiles * self.super_tile // self.size + len(self.last_tiles)
        """Tiles of positions per tile of output channels."""
        several_channel_tiles = self.out_channels > BLOCKS * VECTOR
        self.prefetches_w = several_channel_tiles and self.position_tiles <= PREFETCH_NEXT_WEIGHTS_TILES
        """Whether the tiles prefetch the next tile of channels' weights (`PREFETCH_NEXT_WEIGHTS_TILES`)."""

    def text(self) -> str:
        if self.prefetches_x or tile_epilogue.PREFETCH or self.prefetches_w:
            self.emit(tile_epilogue.PREFETCH_DECLARATION)
        shifts = self._shifts()
        self.emit(f"@{self.name}.shifts = internal constant [{len(shifts)} x i64] [{', '.join(f'i64 {s}' for s in shifts)}]")
        self._main()
        for (blocks, channels, offsets, stored), tile_name in list(self.tiles.items()):
            self._tile(tile_name, blocks, channels, offsets, stored)
        return self.ir()

    def _offsets(self, start: int, count: int) -> tuple[int, ...]:
        """Phase offsets of output positions start, ..., start + count - 1 from the first one's."""
        at = [divmod(start + k, self.out_w) for k in range(count)]
        return tuple((i - at[0][0]) * self.row + j - at[0][1] for i, j in at)

    def _shifts(self) -> list[int]:
        """Each tap's offset in the phases of a channel from the output position's own (a table
        the tiles index in their loop over (input channel, tap): taps written out, LLVM shares the
        broadcasts of neighbouring taps and spills the accumulators)."""
        shifts = []
        for kh in range(self.kernel_h):
            for kw in range(self.kernel_w):
                (a, i), (b, j) = divmod(kh * self.dh, self.sh)[::-1], divmod(kw * self.dw, self.sw)[::-1]
                shifts.append((a * self.sw + b) * self.length + i * self.row + j)
        return shifts

    def _step_uses(self, offsets: tuple[int, ...], taps: int) -> list[tuple[int, list[tuple[int, int]]]]:
        """The x values that a step over `taps` taps (of one row of the window) reads, by
        offset from the step's first tap's, each with the (tap, position) pairs that use it."""
        shifts = self._shifts()
        uses: dict[int, list[tuple[int, int]]] = {}
        for tap in range(taps):
            for k, offset in enumerate(offsets):
                uses.setdefault(shifts[tap] - shifts[0] + offset, []).append((tap, k))
        return sorted(uses.items())

    def _prefetches(self, offsets: tuple[int, ...], taps: int) -> list[int]:
        """Offsets from a step's first tap's x of the first and the last x value of each run that
        the step reads (runs split where neighbouring x values are 16 or more floats apart): a
        run of less than 16 floats lies on one or two lines, both prefetched (the first value's
        alone leaves the second line of a run that crosses one to the demand load)."""
        reads = [offset for offset, _ in self._step_uses(offsets, taps)]
        firsts = {offset for previous, offset in zip([None] + reads, reads) if previous is None or offset - previous >= VECTOR}
        lasts = {offset for offset, following in zip(reads, reads[1:] + [None]) if following is None or following - offset >= VECTOR}
        return sorted(firsts | lasts)

    def _prefetch_next_weights(self, blocks: int, taps: int) -> None:
        """A tile's step's prefetch, into L2, of the next tile of channels' weights
        (`PREFETCH_NEXT_WEIGHTS_TILES`): the tile at `%index` of the call's K tiles of positions, at
        step `%u` of U = C x KH x KW, the line of each block and tap of step (index x U + u) // K
        (the same line K steps in a row); the last tile of channels prefetches its own."""
        window = self.kernel_h * self.kernel_w
        block_stride = self.channels * window * VECTOR
        e = self.emit
        e(f"  %w.next.first = mul i64 %index, {self.channels * window}")
        e("  %w.next.step = add i64 %w.next.first, %u")
        e(f"  %w.next.line = udiv i64 %w.next.step, {self.position_tiles}")
        e(f"  %w.next.at = mul i64 %w.next.line, {VECTOR}")
        e("  %w.next.t = getelementptr float, ptr %w.next, i64 %w.next.at")
        for v in range(blocks):
            for tap in range(taps):
                e(f"  %w.next.{v}.{tap} = getelementptr float, ptr %w.next.t, i64 {v * block_stride + tap * VECTOR}")
                e(f"  call void @llvm.prefetch.p0(ptr %w.next.{v}.{tap}, i32 0, i32 2, i32 1)")

    def _tile_name(self, blocks: int, channels: int, offsets: tuple[int, ...], stored: int) -> str:
        key = (blocks, channels, offsets, stored)
        if key not in self.tiles:
            self.tiles[key] = f"@{self.name}.tile{len(self.tiles)}"
        return self.tiles[key]

    def _stored_lanes(self, count: int, latest: int) -> int:
        """Floats stored per channel by a tile of `count` positions whose first is at most
        position `latest` of its channels: OVERLAP_STORE_LANES where the call's rows go on that
        far (`OVERLAP_STORE_LANES`; not into the rows of another chunk, which runs at the same
        time), else `count`."""
        end = self.end_row * self.out_w
        overlaps = PLAIN_STORE_LANES < count <= OVERLAP_STORE_LANES and latest + OVERLAP_STORE_LANES <= end
        return OVERLAP_STORE_LANES if overlaps else count

    # --- one register tile: out[blocks x 16 channels (`channels` valid), positions] ---

    def _tile(self, tile_name: str, blocks: int, channels: int, offsets: tuple[int, ...], stored: int) -> None:
        window = self.kernel_h * self.kernel_w
        block_stride = self.channels * window * VECTOR
        taps = taps_per_step(self.kernel_w, len(offsets))
        e = self.emit
        ahead = ", i64 %ahead" if tile_epilogue.PREFETCH else ""
        parameters = f"ptr %x, ptr %w{tile_epilogue.parameters(self.epilogue)}, ptr %out{ahead}"
        if self.prefetches_w:
            parameters += ", ptr %w.next, i64 %index"
        self.define(f"define internal void {tile_name}({parameters}) {{")
        if tile_epilogue.PREFETCH:
            rows = [channel * self.positions for channel in range(channels)]
            tile_epilogue.prefetch_next_tile(self, self.epilogue, "%out", rows, "%ahead")
        e("  br label %tap")
        e("tap:")
        e("  %u = phi i64 [0, %entry], [%u.next, %tap]")
        e("  %t = phi i64 [0, %entry], [%t.next, %tap]")
        e("  %x.c = phi ptr [%x, %entry], [%x.c.next, %tap]")
        sums = {(v, k): f"%acc.{v}.{k}" for v in range(blocks) for k in range(len(offsets))}
        for (v, k), acc in sums.items():
            e(f"  {acc} = phi {VECTOR_TYPE} [zeroinitializer, %entry], [%sum.{v}.{k}, %tap]")
        e(f"  %shift.at = getelementptr i64, ptr @{self.name}.shifts, i64 %t")
        e("  %shift = load i64, ptr %shift.at, align 8")
        e("  %x.t = getelementptr float, ptr %x.c, i64 %shift")
        e(f"  %w.at = mul i64 %u, {VECTOR}")
        e("  %w.t = getelementptr float, ptr %w, i64 %w.at")
        weights = {}
        for v in range(blocks):
            for tap in range(taps):
                weight = f"%w.{v * taps + tap}"
                e(f"  {weight}.at = getelementptr float, ptr %w.t, i64 {v * block_stride + tap * VECTOR}")
                e(load(weight, f"{weight}.at"))
                weights[v, tap] = weight
        if self.prefetches_w:
            self._prefetch_next_weights(blocks, taps)
        done = [0] * len(offsets)
        if self.prefetches_x:
            # the x of the channel `channels_ahead` on; in the last `channels_ahead` channels, this
            # channel's (in L1): a prefetch past x's end into an unmapped page ran the 3->32 3x3/2 stem 4x slower
            channel = self.sh * self.sw * self.length
            channels_ahead = min(PREFETCH_CHANNELS_1X1, self.channels - 1) if window == 1 else 1
            e(f"  %ahead.last = icmp uge i64 %u, {(self.channels - channels_ahead) * window}")
            e(f"  %ahead.channel = select i1 %ahead.last, i64 0, i64 {channel * channels_ahead}")
            e("  %ahead.x = getelementptr float, ptr %x.t, i64 %ahead.channel")
            for i, offset in enumerate(self._prefetches(offsets, taps)):
                e(f"  %ahead.{i} = getelementptr float, ptr %ahead.x, i64 {offset}")
                e(f"  call void @llvm.prefetch.p0(ptr %ahead.{i}, i32 0, i32 3, i32 1)")
        for i, (offset, uses) in enumerate(self._step_uses(offsets, taps)):
            pixel = f"%x.{i}"
            e(f"  {pixel}.at = getelementptr float, ptr %x.t, i64 {offset}")
            e(f"  {pixel}.scalar = load float, ptr {pixel}.at, align 4")
            self.lines += broadcast(pixel, f"{pixel}.scalar")
            for tap, k in uses:
                done[k] += 1
                for v in range(blocks):
                    total = f"%sum.{v}.{k}" + ("" if done[k] == taps else f".{done[k]}")
                    e(fma(total, weights[v, tap], pixel, sums[v, k]))
                    sums[v, k] = total
        e(f"  %t.step = add i64 %t, {taps}")
        e(f"  %t.wraps = icmp eq i64 %t.step, {window}")
        e("  %t.next = select i1 %t.wraps, i64 0, i64 %t.step")
        e(f"  %x.c.step = getelementptr float, ptr %x.c, i64 {self.sh * self.sw * self.length}")
        e("  %x.c.next = select i1 %t.wraps, ptr %x.c.step, ptr %x.c")
        e(f"  %u.next = add i64 %u, {taps}")
        e(f"  %u.done = icmp eq i64 %u.next, {self.channels * window}")
        e("  br i1 %u.done, label %exit, label %tap")
        e("exit:")
        epilogue = tile_epilogue.TileEpilogue(self, self.epilogue)
        for v in range(blocks):
            columns = _transposed(self, [sums[v, k] for k in range(len(offsets))])
            for lane in range(min(VECTOR, channels - v * VECTOR)):
                channel = v * VECTOR + lane
                offset = channel * self.positions
                overlapping = stored > len(offsets)
                result = epilogue.apply(columns[lane], channel, offset, stored, plain=overlapping)
                pointer = self.pointer("%out", offset)
                if overlapping or stored <= PLAIN_STORE_LANES:
                    self.lines += store_first(result, pointer, stored)
                else:
                    e(store(result, pointer, stored))
        self.end()

    def _ahead(self, at: str) -> str:
        """How far past the tile at position `at` of its channels (floats) the tile prefetches
        its channels' out and residual lines (`tile_epilogue.prefetch_next_tile`): the next
        line, VECTOR floats on, that the next tiles of these channels store; 0 (its own) where
        that passes the channel's last position, so no prefetch leaves out or the residual."""
        if self.positions <= VECTOR:
            return "0"
        inside = self.value(f"icmp ult i64 {at}, {self.positions - VECTOR}")
        return self.value(f"select i1 {inside}, i64 {VECTOR}, i64 0")

    # --- the ukernel: loops over images, tiles of channel blocks and super-tiles of positions ---

    def _main(self) -> None:
        self.define(f"define void @{self.name}(ptr noalias %x, ptr noalias %w{tile_epilogue.parameters_and_out(self.epilogue)}) {{")
        window = self.kernel_h * self.kernel_w
        size, super_tile, full = self.size, self.super_tile, self.full_super_tiles
        first = self.first_row * self.out_w

        def image(n: str) -> None:
            x_n = self.pointer("%x", self.value(f"mul i64 {n}, {self.channels * self.sh * self.sw * self.length}"))
            out_n = self.pointer("%out", self.value(f"mul i64 {n}, {self.out_channels * self.positions}"))

            def channel_tile(first_block: str, blocks: int, channels: int) -> None:
                w_o = self.pointer("%w", self.value(f"mul i64 {first_block}, {self.channels * window * VECTOR}"))
                # the next tile of channels' weights, or the last `blocks` blocks' (the last tile's own)
                last_block = -(-self.out_channels // VECTOR) - blocks
                following = self.value(f"add i64 {first_block}, {blocks}")
                inside = self.value(f"icmp slt i64 {following}, {last_block}")
                next_block = self.value(f"select i1 {inside}, i64 {following}, i64 {last_block}")
                w_next = self.pointer("%w", self.value(f"mul i64 {next_block}, {self.channels * window * VECTOR}"))
                first_channel = self.value(f"mul i64 {first_block}, {VECTOR}")
                out_o = self.pointer(out_n, self.value(f"mul i64 {first_channel}, {self.positions}"))

                def tile(rows: str, start: int | str, count: int, latest: int, index: str) -> None:
                    """The tile of `count` positions from `start` past output row `rows`' first
                    (a value `start`: a column of that row, the tile inside it), at position
                    `latest` of its channels or before, the call's tile `index` of positions."""
                    row, column = divmod(start, self.out_w) if isinstance(start, int) else (0, start)
                    x_row = self.value(f"add i64 {self.value(f'mul i64 {rows}, {self.row}')}, {row * self.row}")
                    at = self.value(f"add i64 {self.value(f'mul i64 {rows}, {self.out_w}')}, {start}")
                    out_tile = self.pointer(out_o, at)
                    arguments = tile_epilogue.arguments(self, self.epilogue, first_channel, out_tile)
                    x_tile = self.pointer(x_n, self.value(f"add i64 {x_row}, {column}"))
                    call_arguments = f"ptr {x_tile}, ptr {w_o}{arguments}, ptr {out_tile}"
                    if tile_epilogue.PREFETCH:
                        call_arguments += f", i64 {self._ahead(at)}"
                    if self.prefetches_w:
                        call_arguments += f", ptr {w_next}, i64 {index}"
                    offsets = self._offsets(start if isinstance(start, int) else 0, count)
                    stored = self._stored_lanes(count, latest)
                    self.emit(f"  call void {self._tile_name(blocks, channels, offsets, stored)}({call_arguments})")

                last_super_tile = first + (full - 1) * super_tile
                tiles_per_super_tile = super_tile // size

                def super_tile_at(s: str) -> None:
                    rows = self.value(f"add i64 {self.value(f'mul i64 {s}, {super_tile // self.out_w}')}, {self.first_row}")
                    first_index = self.value(f"mul i64 {s}, {tiles_per_super_tile}")
                    if super_tile == self.out_w:  # tiles inside the row: one loop

                        def in_row(t: str) -> None:
                            index = self.value(f"add i64 {first_index}, {t}")
                            tile(rows, self.value(f"mul i64 {t}, {size}"), size, last_super_tile + self.out_w - size, index)

                        self.loop(self.out_w // size, in_row)
                    else:
                        for start in range(0, super_tile, size):
                            index = self.value(f"add i64 {first_index}, {start // size}")
                            tile(rows, start, size, last_super_tile + start, index)

                self.loop(full, super_tile_at)
                rows, start = str(self.first_row + full * super_tile // self.out_w), 0
                for i, count in enumerate(self.last_tiles):
                    tile(rows, start, count, first + full * super_tile + start, str(full * tiles_per_super_tile + i))
                    start += count

            tile_channels = BLOCKS * VECTOR
            full_tiles = self.out_channels // tile_channels
            self.loop(full_tiles, lambda t: channel_tile(self.value(f"mul i64 {t}, {BLOCKS}"), BLOCKS, tile_channels))
            rest = self.out_channels - full_tiles * tile_channels
            if rest:
                channel_tile(str(full_tiles * BLOCKS), -(-rest // VECTOR), rest)

        self.loop(self.batch, image)
        self.end()
