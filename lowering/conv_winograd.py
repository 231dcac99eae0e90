"""The Winograd F(2x2, 3x3) convolution ukernel: an f32 3x3 conv2d of stride 1 in 2x2 output tiles.

Each 2x2 output tile of a channel is A^T [sum over c of (G w[o, c] G^T) * (B^T d[c] B)] A, with
d[c] the 4x4 input tile at (2 i, 2 j) of the zero-padded x, 16 multiplies per input channel
instead of 36 (Lavin and Gray's F(2x2, 3x3); G, B^T and A^T below). The cpu lowering copies x
zero-padded (`padding`: rows and columns past the tiles' for the vectors that read past a row)
and passes U = G w G^T packed at compile time, o-major ([O, 16, C], `pack`: a chunk of output
channels is a slice), w itself, and a scratch buffer it allocates (`scratch_shape`):

    func.call @graphopt_sconv_wino_eaddAP0.maxS0C00000000_1x64x59x59_64x16x64_64x64x3x3_16x128x129_64x1x1_1x64x56x56(
        %x_padded, %u, %w, %scratch, %bias, %out)

The scratch buffer [16, C + O, R] holds V [16, C, R] and M [16, O, R] of a band of tile rows
(`band_rows`: the most whose scratch fits in 1 MB where U is small, as above, 2 MB where U is
of middle size and the image needs several bands of 4 MB, else 4 MB; 4 of
the 28 tile rows above, 7 times). Per image and band, three stages (R: the band's tiles + SLACK or a few more, `scratch_row`):

1. input transform: for each input channel and tile row, vectors of 16 tiles: each of the
   tile's 4 input rows is loaded as 32 floats at column 2j and at 2j + 2 and split into even and
   odd lanes (d[r][0..3]); V[xi, c, t] = (B^T d B)[xi], 16 plain stores (a row's last vector
   writes tiles of the next row, which that row rewrites; the band's last, the floats of slack);
   then 16 zeros past the band's tiles, which the GEMMs' last vector reads (uninitialized, they
   held whatever the allocator left: denormal floats among them made Intel's FMAs take
   microcode assists, Inception-v2 ran 3x slower);
2. 16 GEMMs M[xi] (O x tiles) = U[:, xi, :] (O x C) @ V[xi] (C x tiles), in register tiles of 6
   output channels x 16 tiles (x 64 with AVX-512: `TILE_VECTORS`), c innermost, in blocks of
   tiles whose V fits in half of L2 (`V_BLOCK_BYTES`); where U is large, each step of c
   prefetches a line of the next register tile's U (`PREFETCH_U_BYTES`);
3. output transform: for each output channel and tile row, vectors of 16 tiles: Y = A^T M A,
   Y[a][0] and Y[a][1] interleaved into 32 consecutive columns of output row a, the tile
   epilogue (`tile_epilogue.py`) and the store (the row's last columns as a shorter vector).

A call for output rows first to end - 1 alone (first even; a chunk of a conv split by output
rows, `row_split.output_row_split`) has a name ending in `_oh<first>to<end>`
(`output_rows.chunk_name`) and the same operands: its bands start at tile row first / 2.

Odd output sizes: the tiles are ceil(OH / 2) x ceil(OW / 2), the last ones reading a row or
column of zeros past the conv's padding (`padding`); of the last tile row of an odd OH stage 3
writes the first output row only, and of the last tile column of an odd OW the store's lanes
cut the second column.

Non-finite x: the transforms add and subtract a tile's 16 values, so one inf gives NaN across
its tile where the interpreter gives inf, and a NaN reaches outputs whose window does not hold it.
Stage 1 sums every float it loads; where that sum is not finite (x holds an inf or a NaN, or,
never in practice, the sum overflows) the band's output rows run as a plain direct 3x3 conv
instead (vectors of 16 output columns, `_direct`), which matches the interpreter. w is finite
(the schedule's rule checks it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering import output_rows, packed_gemm, tile_epilogue
from graphopt.lowering.llvm_text import (
    VECTOR,
    VECTOR_TYPE,
    LLVMText,
    broadcast,
    fma,
    load,
    prefetch_next_tile_row,
    store,
    store_first,
)

PREFIX = "graphopt_sconv_wino"
PREFETCH_U_BYTES = 1 << 20
"""Calls of one band an image whose U holds more bytes than this prefetch, in each step of c of a
GEMM's register tile, a line of the next register tile's U into L2 (`_Ukernel._next_u`): column c
of its row c mod ROWS (`llvm_text.prefetch_next_tile_row`, as the conv GEMM prefetches its next
row tile's weights), so that the next U arrives at the rate the tile reads its own. A register tile reads ROWS rows of
C floats, 16 C floats apart, each once per band: short streams, cold in a model, that the
hardware prefetchers pick up late. Measured on 2026-11-29 (Emerald Rapids, AVX-512; each step in
the model's plan order, both plans in one process, 30 passes, the median of the per-pass
ratios, two pairs): ResNet-50's 256->256 at 14 (U 4 MB) 0.85 and 0.84 at 2 threads, 0.85 and
0.87 at 1 (the whole plan 0.98); Inception-v2's 192->192 and 256->192 at 14 (2.3 and 3 MB)
0.78-0.80 at 2 threads, its Winograd steps 0.93 at 1 thread (the plan 0.97). Those prefetched
line (c x L) // C of the next tile's L lines; with the conv GEMM's rule (above), measured again:
256->256 at 14 0.845 and 0.846 at 2 threads, 0.883 and 0.889 at 1; Inception-v2's 0.79-0.81. Every U
prefetching: the 64->64 at 56 (U 256 KB, in L2) 1.01-1.02, 128->128 at 28 (1 MB) 0.99-1.01.
Several bands read U again for each band: VGG-19's 256->256 at 56 and 512->512 at 28 ran
1.02-1.05x slower prefetching, so they do not."""
ROWS = packed_gemm.ROWS
"""Output channels per register tile of the GEMMs (stage 2), the packed GEMM's."""
TILE_VECTORS = packed_gemm.PANEL // VECTOR
"""Vectors of 16 tiles per register tile of the GEMMs, the packed GEMM's panel: with AVX-512 6 x
64 accumulators (24 of its 32 registers), else 6 x 16 (12 of AVX2's 16)."""
V_BLOCK_BYTES = 256 * 1024
"""Bytes of V[xi] (C x tiles) that one block of the GEMMs reads for every register tile of
output channels (half of Zen 1's 512 KB L2)."""
CHUNK_CHANNELS = 16
"""Output channels at multiples of which a chunk of a split call starts (`ukernels.channel_units`)."""
SLACK = VECTOR
"""Floats past a band's tiles in each row of the scratch buffer: a tile row's last vector writes up to 15 past them."""
SCRATCH_BYTES = 4 << 20
"""Bytes of the scratch buffer (V and M of a band of tile rows, `band_rows`) at most, unless one
tile row needs more, where U is larger than SMALL_U_BYTES (and than MEDIUM_U_BYTES, or the
image's scratch fits here)."""
SMALL_U_BYTES = 256 << 10
SMALL_U_SCRATCH_BYTES = 1 << 20
"""Bytes of the scratch buffer at most where U holds SMALL_U_BYTES or fewer: V, M and U then
stay in L2 (2 MB on Emerald Rapids) through the three stages, and each band reads U again from
L2. Where U is larger, each band reads it again from L3 or memory, and fewer, larger bands win.
Measured on 2026-11-29 (Emerald Rapids, AVX-512; interleaved; in a model, each step timed in
plan order with both plans in one process, two runs each):
- ResNet-50's 64->64 3x3s at 56 (U 256 KB; 7 bands of 4 tile rows, 0.9 MB, rather than 18 + 10
  rows, 4 MB): 0.771 and 0.776 at 1 thread, 0.730 and 0.736 at 2; ResNet-18-ish's 0.776 and
  0.770, 0.748 and 0.729 (its steps' sum 0.95 and 0.93); SqueezeNet's 32->128 at 27 (U 256 KB)
  0.90-0.94;
- a 1 MB budget for every U: ResNet-50's 128->128 at 28 (U 1 MB, 4 bands rather than 1) 1.12
  and 1.10 at 1 thread (0.91 at 2), its 256->256 at 14 (U 4 MB) 1.22-1.23 and 1.17-1.18;
- alone (1 thread; 512 KB, 1, 2 and 4 MB): 64->64 at 56 0.82, 0.79, 0.98, 1; 64->64 at 112 0.86,
  0.78, 0.90, 1; 128->128 at 56 (U 1 MB) 1.02, 0.91, 0.94, 1 (alone U stays in cache: the model's
  1.12 above is the rule's ground); 256->256 at 14 1.58, 1.20, 1.00, 1."""
MEDIUM_U_BYTES = 1 << 20
MEDIUM_U_SCRATCH_BYTES = 2 << 20
"""Bytes of the scratch buffer at most where U holds MEDIUM_U_BYTES or fewer (more than
SMALL_U_BYTES) and the image's scratch is larger than SCRATCH_BYTES, so that it runs in several
bands anyway: bands the size of L2, rather than fewer that spill it. An image whose scratch fits
SCRATCH_BYTES keeps one band, reading U once.
Measured on 2026-11-29 (twenty-first session; as above; 2 MB for every U of 1 MB or fewer,
against 4 MB):
- Inception-v2's 64->192 at 56 (U 768 KB, 448 KB a tile row: 7 bands of 4 rows rather than 4 of
  8) 0.816 and 0.798 at 1 thread, 0.813 and 0.807 at 2 (its Winograd steps' sum 0.981 and 0.969,
  0.975 and 0.969); Inception-v1's 64->192 at 55 0.820 and 0.823; VGG-19's 64->128 at 112 (U
  512 KB) 0.884 and 0.882, 128->128 at 112 (U 1 MB) 0.974 and 0.956;
- where the image fits one band of 4 MB: Inception-v1's 96->128 at 27 (U 768 KB, 2.8 MB; 2 bands
  rather than 1) 1.036 and 1.111, 128->192 at 27 1.013 and 1.024; ResNet-50's 128->128 at 28
  (3.2 MB) 0.988 and 0.996: so those keep one band;
- 2 MB for every U: VGG-19's 256->256 at 56 (U 4 MB) 1.15 and 1.11, 512->512 at 28 (U 16 MB)
  1.26 and 1.21, 128->256 at 56 (U 2 MB) 1.07 and 1.03 at 1 thread; alone, 64->192 at 56 with 512
  KB, 1, 2 and 4 MB: 1.00, 0.94, 0.84, 1."""

G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
"""The weight transform: U = G w G^T (4x4 per output and input channel)."""
B_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
"""The input transform: V = B^T d B."""
A_T = ((1, 1, 1, 0), (0, 1, -1, -1))
"""The output transform: Y = A^T M A."""

EVEN = "<" + ", ".join(f"i32 {2 * k}" for k in range(VECTOR)) + ">"
ODD = "<" + ", ".join(f"i32 {2 * k + 1}" for k in range(VECTOR)) + ">"
LOW_PAIRS = "<" + ", ".join(f"i32 {k // 2 + VECTOR * (k % 2)}" for k in range(VECTOR)) + ">"
HIGH_PAIRS = "<" + ", ".join(f"i32 {VECTOR // 2 + k // 2 + VECTOR * (k % 2)}" for k in range(VECTOR)) + ">"


def applies(x_type: Attribute, w_type: Attribute, out_type: Attribute, strides, dilations, groups: int) -> bool:
    """Whether a conv2d of these types and attributes can run as the ukernel: f32, one group, a
    3x3 window of stride 1 and dilation 1."""
    return (
        groups == 1
        and tuple(w_type.get_shape()[2:]) == (3, 3)
        and tuple(strides) == (1, 1)
        and tuple(dilations) == (1, 1)
        and all(t.get_element_type() == f32 for t in (x_type, w_type, out_type))
    )


def padding(x_shape: Sequence[int], conv_padding: Sequence[int]) -> tuple[int, int, int, int]:
    """The padding (top, left, bottom, right) of x's copy: the conv's, one more column on the
    right and, for an odd number of output rows, one more row below (the last tiles' 4th input
    column and row), and rows below enough for the 32 + 2 floats that a tile row's last vector
    loads from its last input row's (up to 29 past that row)."""
    top, left, bottom, right = conv_padding
    width = x_shape[3] + left + right + 1
    odd_rows = (x_shape[2] + top + bottom - 2) % 2
    return top, left, bottom + odd_rows + -(-2 * VECTOR // width), right + 1


def packed_shape(w_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of w [O, C, 3, 3] transformed (`pack`): [O, 16, C]."""
    out_channels, channels, _, _ = w_shape
    return (out_channels, 16, channels)


def pack(w: np.ndarray) -> np.ndarray:
    """U[o, xi, c] = (G w[o, c] G^T)[xi // 4, xi % 4], computed in f64."""
    u = np.einsum("ik,ockl,jl->oijc", G, w.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(packed_shape(w.shape)).astype(w.dtype))


def u_bytes(channels: int, out_channels: int) -> int:
    """Bytes of U for a conv of these channels (`packed_shape`)."""
    return 4 * math.prod(packed_shape((out_channels, channels, 3, 3)))


def band_rows(channels: int, out_shape: Sequence[int]) -> int:
    """Tile rows per band: the most whose scratch (V and M, 64 (C + O) bytes a tile) fits in
    SMALL_U_SCRATCH_BYTES where U (64 C O bytes) holds SMALL_U_BYTES or fewer, in
    MEDIUM_U_SCRATCH_BYTES where U holds MEDIUM_U_BYTES or fewer and the image's scratch is
    larger than SCRATCH_BYTES, else in SCRATCH_BYTES; at least one."""
    _, out_channels, out_h, out_w = out_shape
    tile_bytes = 16 * 4 * (channels + out_channels)
    transformed = u_bytes(channels, out_channels)
    row_bytes, rows = tile_bytes * tiles_across(out_w), tiles_across(out_h)
    if transformed <= SMALL_U_BYTES:
        budget = SMALL_U_SCRATCH_BYTES
    elif transformed <= MEDIUM_U_BYTES and rows * row_bytes > SCRATCH_BYTES:
        budget = MEDIUM_U_SCRATCH_BYTES
    else:
        budget = SCRATCH_BYTES
    return max(1, min(rows, budget // row_bytes))


def rows_read(x_shape: Sequence[int], first: int, end: int) -> tuple[int, int]:
    """(begin, end) of the rows of the padded x that the call computing output rows first to
    end - 1 (first even) reads: its tile rows' 4 input rows each, 2 apart, and the rows that a
    tile row's last vectors load past their row into (up to 29 floats, `padding`); the direct
    conv of a band reads within them."""
    height, width = x_shape[2:]
    return first, min(height, first + 2 * tiles_across(end - first) + 2 + -(-2 * VECTOR // width))


def tiles_across(size: int) -> int:
    """Tiles across `size` output rows or columns: the last one half-empty when `size` is odd."""
    return -(-size // 2)


def scratch_shape(channels: int, out_shape: Sequence[int]) -> tuple[int, int, int]:
    """The shape of the scratch buffer [16, C + O, R] for `channels` input channels: V [16, C, R]
    then M [16, O, R] of a band's tiles (`band_rows`), R = `scratch_row`."""
    _, out_channels, _, out_w = out_shape
    band_tiles = band_rows(channels, out_shape) * tiles_across(out_w)
    return (16, channels + out_channels, scratch_row(band_tiles, channels + out_channels))


def scratch_row(tiles: int, channels: int) -> int:
    """Floats per row of a scratch buffer [16, channels, R] of `tiles` tiles: at least tiles +
    SLACK, and of those up to 15 more the one that puts the 16 rows (xi) of one channel on the
    most L1 sets (4 KB apart, 64-byte lines): stage 1 stores and stage 3 loads all 16 at once."""

    def sets(row: int) -> int:
        return len({xi * channels * row // 16 % 64 for xi in range(16)})

    return max(range(tiles + SLACK, tiles + SLACK + VECTOR), key=sets)


def name(types: Sequence[MemRefType], epilogue: Sequence[tile_epilogue.Step] = ()) -> str:
    """The ukernel's name for a call on memrefs (x padded, U, w, scratch, epilogue operands..., out),
    applying `epilogue` before each store."""
    shapes = "_".join("x".join(map(str, t.get_shape())) for t in types)
    steps = f"_e{tile_epilogue.token(epilogue)}" if epilogue else ""
    return f"{PREFIX}{steps}_{shapes}"


def epilogue_of(name_: str) -> tuple[tile_epilogue.Step, ...]:
    """The epilogue steps in a ukernel's name (`name`)."""
    match = re.match(rf"{PREFIX}(?:_e([a-zA-Z0-9.]+))?_\d", name_)
    return tile_epilogue.parse(match[1]) if match[1] else ()


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk of its images or output channels)."""
    return name(types, epilogue_of(name_))


def writes_over_residual(name_: str, types: Sequence[MemRefType]) -> bool:
    """Whether the ukernel stays correct with out the buffer of its epilogue's residual: yes,
    stage 3 (or the direct conv of a band) reads each residual vector, then stores out's there,
    and nothing else writes out."""
    return True


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr x, ptr u, ptr w, ptr scratch, <the tile epilogue's operands>, ptr out)`."""
    return _Ukernel(name_, types).text()


class _Ukernel(LLVMText):
    def __init__(self, name_: str, types: Sequence[MemRefType]):
        super().__init__()
        self.name = name_
        self.epilogue = epilogue_of(name_)
        x, _, _, scratch = (t.get_shape() for t in types[:4])
        self.batch, self.channels, self.height, self.width = x
        _, self.out_channels, self.out_h, self.out_w = types[-1].get_shape()
        _, scratch_channels, self.row = scratch
        self.transform_stride = scratch_channels * self.row
        """Floats between consecutive xi of V and of M (rows of `row` floats)."""
        self.m_offset = self.channels * self.row
        """M's offset in the scratch buffer (after V)."""
        self.tile_cols = tiles_across(self.out_w)
        self.band = band_rows(self.channels, (1, scratch_channels - self.channels, self.out_h, self.out_w))
        self.vectors = -(-self.tile_cols // VECTOR)
        """Vectors of 16 tiles per tile row."""
        self.gemm_tiles: set[tuple[int, int]] = set()
        """The (output channels, vectors of tiles) of the register tiles that stage 2 calls."""
        self.first_row, self.end_row = output_rows.row_range(self.name, self.out_h)  # first even: a tile row's
        large_u = u_bytes(self.channels, self.out_channels) > PREFETCH_U_BYTES
        one_band = self.end_row - self.first_row <= 2 * self.band
        self.prefetches_u = large_u and one_band and self.out_channels >= ROWS
        """Whether the GEMMs' register tiles prefetch the next tile's U (`PREFETCH_U_BYTES`)."""

    def text(self) -> str:
        if self.prefetches_u:
            self.emit(tile_epilogue.PREFETCH_DECLARATION)
        self._main()
        for rows, vectors in sorted(self.gemm_tiles):
            self._gemm_tile(rows, vectors)
        return self.ir()

    def _main(self) -> None:
        epilogue = tile_epilogue.parameters_and_out(self.epilogue)
        self.define(f"define void @{self.name}(ptr noalias %x, ptr noalias %u, ptr noalias %w, ptr noalias %s{epilogue}) {{")

        first, end = self.first_row, self.end_row

        def image(n: str) -> None:
            x_n = self.pointer("%x", self.value(f"mul i64 {n}, {self.channels * self.height * self.width}"))
            out_n = self.value(f"mul i64 {n}, {self.out_channels * self.out_h * self.out_w}")
            full, rest = divmod(end - first, 2 * self.band)
            self.loop(
                full,
                lambda b: self._band(x_n, out_n, self.value(f"add i64 {self.value(f'mul i64 {b}, {self.band}')}, {first // 2}"), 2 * self.band),
            )
            if rest:
                self._band(x_n, out_n, str(first // 2 + full * self.band), rest)

        self.loop(self.batch, image)
        self.end()

    def _band(self, x_n: str, out_n: str, first: str, out_rows: int) -> None:
        """The tile rows of `out_rows` output rows (the image's last ones when odd) from tile row
        `first` (a value) of the image at `x_n`, out from `out_n` floats past %out: stage 1, then
        the direct conv of those output rows where x holds a non-finite value, else stages 2 and 3."""
        rows = tiles_across(out_rows)
        x_band = self.pointer(x_n, self.value(f"mul i64 {first}, {2 * self.width}"))
        out_band = self.value(f"add i64 {out_n}, {self.value(f'mul i64 {first}, {2 * self.out_w}')}")
        total = self._input_transform(x_band, rows)
        zero = self.value(f"fmul {VECTOR_TYPE} {total}, zeroinitializer")
        lanes = self.value(f"fcmp uno {VECTOR_TYPE} {zero}, {zero}")
        any_nan = self.value(f"icmp ne i16 {self.value(f'bitcast <16 x i1> {lanes} to i16')}, 0")

        def winograd() -> None:
            self._gemms(rows * self.tile_cols)
            self._output_transform(out_band, out_rows)

        self.branch(any_nan, lambda: self._direct(x_band, out_band, out_rows), winograd)

    # --- stage 1: V = B^T d B ---

    def _input_transform(self, x_band: str, rows: int) -> str:
        """Stage 1 for `rows` tile rows whose first input row is at `x_band`; returns the sum of
        the floats it loaded (a vector)."""
        plane = self.height * self.width

        def channel(c: str, total: str) -> list[str]:
            x_c = self.pointer(x_band, self.value(f"mul i64 {c}, {plane}"))
            v_c = self.pointer("%s", self.value(f"mul i64 {c}, {self.row}"))

            def tile_row(i: str, total: str) -> list[str]:
                x_i = self.pointer(x_c, self.value(f"mul i64 {i}, {2 * self.width}"))
                v_i = self.pointer(v_c, self.value(f"mul i64 {i}, {self.tile_cols}"))
                for vector in range(self.vectors):
                    total = self._input_tiles(self.pointer(x_i, 2 * VECTOR * vector), self.pointer(v_i, VECTOR * vector), total)
                return [total]

            (total,) = self.loop(rows, tile_row, [(VECTOR_TYPE, total)])
            for xi in range(16):  # the GEMMs' last vector of tiles reads up to 15 past them
                self.emit(store("zeroinitializer", self.pointer(v_c, rows * self.tile_cols + xi * self.transform_stride)))
            return [total]

        (total,) = self.loop(self.channels, channel, [(VECTOR_TYPE, "zeroinitializer")])
        return total

    def _input_tiles(self, x_at: str, v_at: str, total: str) -> str:
        """V of the 16 tiles whose first input row starts at `x_at`, stored from `v_at`; returns
        `total` plus the floats loaded."""
        rows = []
        for r in range(4):
            loaded = []
            for offset in (0, VECTOR, 2, VECTOR + 2):
                value = self.fresh()
                self.emit(load(value, self.pointer(x_at, r * self.width + offset)))
                loaded.append(value)
            first, second, third, fourth = loaded
            d = [
                self.value(f"shufflevector {VECTOR_TYPE} {a}, {VECTOR_TYPE} {b}, <16 x i32> {lanes}")
                for a, b, lanes in ((first, second, EVEN), (first, second, ODD), (third, fourth, EVEN), (third, fourth, ODD))
            ]
            rows.append(self._transform(B_T, d))
            row_sum = self.value(f"fadd {VECTOR_TYPE} {self.value(f'fadd {VECTOR_TYPE} {first}, {second}')}, {fourth}")
            total = self.value(f"fadd {VECTOR_TYPE} {total}, {row_sum}")
        for k1, transformed in enumerate(self._transform(B_T, rows)):
            for k2, value in enumerate(transformed):
                self.emit(store(value, self.pointer(v_at, (4 * k1 + k2) * self.transform_stride)))
        return total

    def _transform(self, matrix: Sequence[Sequence[int]], values: Sequence) -> list:
        """matrix @ values, values vectors (or lists of vectors: elementwise), by adds and subtracts."""
        results = []
        for coefficients in matrix:
            result = None
            terms = sorted(zip(coefficients, values), key=lambda term: -term[0])  # a plus first: no negation
            for coefficient, value in terms:
                if coefficient:
                    result = value if result is None and coefficient == 1 else self._combine(result, value, coefficient)
            results.append(result)
        return results

    def _combine(self, result, value, coefficient: int):
        if isinstance(value, list):
            return [self._combine(None if result is None else r, v, coefficient) for r, v in zip(result or [None] * len(value), value)]
        if result is None:
            return self.value(f"fneg {VECTOR_TYPE} {value}")
        return self.value(f"{'fadd' if coefficient == 1 else 'fsub'} {VECTOR_TYPE} {result}, {value}")

    # --- stage 2: M[xi] = U[:, xi, :] @ V[xi] ---

    def _gemms(self, tiles: int) -> None:
        """Stage 2 for a band of `tiles` tiles."""
        panels = -(-tiles // VECTOR)
        block = min(panels, max(TILE_VECTORS, V_BLOCK_BYTES // (self.channels * VECTOR * 4) // TILE_VECTORS * TILE_VECTORS))
        full_blocks, rest = divmod(panels, block)

        def transform_element(xi: str) -> None:
            u_xi = self.pointer("%u", self.value(f"mul i64 {xi}, {self.channels}"))
            v_xi = self.pointer("%s", self.value(f"mul i64 {xi}, {self.transform_stride}"))
            m_xi = self.pointer(v_xi, self.m_offset)

            def tiles_of(first_panel: str, count: int) -> None:
                def channel_tile(o: str, rows: int) -> None:
                    u_o = self.pointer(u_xi, self.value(f"mul i64 {o}, {16 * self.channels}"))
                    m_o = self.pointer(m_xi, self.value(f"mul i64 {o}, {self.row}"))
                    u_ahead = self._next_u(xi, o, rows) if self.prefetches_u else None

                    def register_tile(p: str, vectors: int) -> None:
                        t = self.value(f"mul i64 {self.value(f'add i64 {first_panel}, {p}')}, {VECTOR}")
                        arguments = f"ptr {u_o}, ptr {self.pointer(v_xi, t)}, ptr {self.pointer(m_o, t)}"
                        if u_ahead:
                            arguments += f", i64 {u_ahead}"
                        self.emit(f"  call void @{self.name}.tile{rows}x{vectors}({arguments})")
                        self.gemm_tiles.add((rows, vectors))

                    wide, rest_vectors = divmod(count, TILE_VECTORS)
                    self.loop(wide, lambda p: register_tile(self.value(f"mul i64 {p}, {TILE_VECTORS}"), TILE_VECTORS))
                    if rest_vectors:
                        register_tile(str(wide * TILE_VECTORS), rest_vectors)

                full = self.out_channels // ROWS
                self.loop(full, lambda o: channel_tile(self.value(f"mul i64 {o}, {ROWS}"), ROWS))
                if self.out_channels % ROWS:
                    channel_tile(str(full * ROWS), self.out_channels % ROWS)

            self.loop(full_blocks, lambda b: tiles_of(self.value(f"mul i64 {b}, {block}"), block))
            if rest:
                tiles_of(str(full_blocks * block), rest)

        self.loop(16, transform_element)

    def _next_u(self, xi: str, o: str, rows: int) -> str:
        """How far past the U of the register tile of output channels at `o` (`rows` of them)
        the next tile's lies (floats): the next ROWS channels of transform element `xi` where they
        are whole, else the first of the next element, else (after the last element's last tile)
        the last element's first."""
        channel_tile = self.value(f"mul i64 {o}, {16 * self.channels}")
        whole = self.value(f"icmp sle i64 {self.value(f'add i64 {o}, {rows}')}, {self.out_channels - ROWS}")
        next_element = self.value(f"icmp ult i64 {xi}, 15")
        first = self.value(f"select i1 {next_element}, i64 {self.channels}, i64 0")
        back = self.value(f"sub i64 {first}, {channel_tile}")
        return self.value(f"select i1 {whole}, i64 {rows * 16 * self.channels}, i64 {back}")

    def _gemm_tile(self, rows: int, vectors: int) -> None:
        """`@name.tile<rows>x<vectors>(u, v, m)`: m[r R + t] = sum over c of u[r 16 C + c] * v[c R + t]
        for r < rows and t < 16 vectors; where it prefetches U, a fourth parameter, how far past u
        the next register tile's U lies (`_next_u`, `llvm_text.prefetch_next_tile_row`)."""
        u_ahead = ", i64 %u.ahead" if self.prefetches_u else ""
        self.define(f"define internal void @{self.name}.tile{rows}x{vectors}(ptr noalias %u, ptr noalias %v, ptr noalias %m{u_ahead}) {{")

        def channel(c: str, *sums: str) -> list[str]:
            if self.prefetches_u:
                self.lines += prefetch_next_tile_row("u", c, ROWS, 16 * self.channels, 2)
            v_c = self.pointer("%v", self.value(f"mul i64 {c}, {self.row}"))
            tiles = [self.fresh() for _ in range(vectors)]
            for k, value in enumerate(tiles):
                self.emit(load(value, self.pointer(v_c, VECTOR * k)))
            following = []
            for r in range(rows):
                weight = self.value(f"load float, ptr {self.pointer('%u', self.value(f'add i64 {c}, {r * 16 * self.channels}'))}, align 4")
                weights = self.fresh()
                self.lines += broadcast(weights, weight)
                for k, value in enumerate(tiles):
                    following.append(self.fresh())
                    self.emit(fma(following[-1], weights, value, sums[r * vectors + k]))
            return following

        sums = self.loop(self.channels, channel, [(VECTOR_TYPE, "zeroinitializer")] * (rows * vectors))
        for i, total in enumerate(sums):
            r, k = divmod(i, vectors)
            self.emit(store(total, self.pointer("%m", r * self.row + VECTOR * k)))
        self.end()

    # --- stage 3: Y = A^T M A, the epilogue, out ---

    def _output_transform(self, out_band: str, out_rows: int) -> None:
        """Stage 3 for the tile rows of `out_rows` output rows (of an odd number, the last tile
        row's first output row only), out from `out_band` floats past %out."""

        def channel(o: str) -> None:
            m_o = self.pointer("%s", self.value(f"add i64 {self.value(f'mul i64 {o}, {self.row}')}, {self.m_offset}"))
            out_o = self.value(f"add i64 {out_band}, {self.value(f'mul i64 {o}, {self.out_h * self.out_w}')}")

            def tile_row(i: str, tile_out_rows: int) -> None:
                m_i = self.pointer(m_o, self.value(f"mul i64 {i}, {self.tile_cols}"))
                out_i = self.value(f"add i64 {out_o}, {self.value(f'mul i64 {i}, {2 * self.out_w}')}")
                epilogue = tile_epilogue.TileEpilogue(self, self.epilogue)
                for vector in range(self.vectors):
                    m = []
                    for xi in range(16):
                        value = self.fresh()
                        self.emit(load(value, self.pointer(m_i, xi * self.transform_stride + VECTOR * vector)))
                        m.append(value)
                    rows = [self._transform(A_T, m[4 * k1 : 4 * k1 + 4]) for k1 in range(4)]
                    for a, (y0, y1) in enumerate(self._transform(A_T[:tile_out_rows], rows)):
                        for half, pairs in enumerate((LOW_PAIRS, HIGH_PAIRS)):
                            column = 2 * VECTOR * vector + VECTOR * half
                            lanes = min(VECTOR, self.out_w - column)
                            if lanes <= 0:
                                continue
                            y = self.value(f"shufflevector {VECTOR_TYPE} {y0}, {VECTOR_TYPE} {y1}, <16 x i32> {pairs}")
                            self._store(epilogue, y, o, self.value(f"add i64 {out_i}, {a * self.out_w + column}"), lanes)

            self.loop(out_rows // 2, lambda i: tile_row(i, 2))
            if out_rows % 2:
                tile_row(str(out_rows // 2), 1)

        self.loop(self.out_channels, channel)

    def _store(self, epilogue: tile_epilogue.TileEpilogue, vector: str, channel: str, offset: str, lanes: int) -> None:
        """The epilogue of `vector` (output channel `channel`), stored `offset` floats past %out:
        its first `lanes` lanes, as a vector of that many floats when not all (`store_first`)."""
        result = epilogue.apply(vector, channel, offset, lanes, plain=lanes < VECTOR)
        pointer = self.pointer("%out", offset)
        if lanes < VECTOR:
            self.lines += store_first(result, pointer, lanes)
        else:
            self.emit(store(result, pointer))

    # --- the direct conv, for bands whose x holds a non-finite value ---

    def _direct(self, x_band: str, out_band: str, out_rows: int) -> None:
        """`out_rows` output rows from `out_band` floats past %out: the 3x3 conv of the padded x
        from `x_band`, in vectors of 16 output columns, and the epilogue."""
        plane = self.height * self.width
        vectors = -(-self.out_w // VECTOR)

        def channel(o: str) -> None:
            w_o = self.pointer("%w", self.value(f"mul i64 {o}, {self.channels * 9}"))
            out_o = self.value(f"add i64 {out_band}, {self.value(f'mul i64 {o}, {self.out_h * self.out_w}')}")

            def row(oh: str) -> None:
                x_row = self.pointer(x_band, self.value(f"mul i64 {oh}, {self.width}"))
                out_row = self.value(f"add i64 {out_o}, {self.value(f'mul i64 {oh}, {self.out_w}')}")
                epilogue = tile_epilogue.TileEpilogue(self, self.epilogue)
                for first in range(0, vectors, 4):
                    group = range(first, min(vectors, first + 4))

                    def input_channel(c: str, *sums: str) -> list[str]:
                        x_c = self.pointer(x_row, self.value(f"mul i64 {c}, {plane}"))
                        w_c = self.pointer(w_o, self.value(f"mul i64 {c}, 9"))
                        sums = list(sums)
                        for tap in range(9):
                            weight = self.value(f"load float, ptr {self.pointer(w_c, tap)}, align 4")
                            weights = self.fresh()
                            self.lines += broadcast(weights, weight)
                            for k, vector in enumerate(group):
                                pixels = self.fresh()
                                self.emit(load(pixels, self.pointer(x_c, tap // 3 * self.width + tap % 3 + VECTOR * vector)))
                                total = self.fresh()
                                self.emit(fma(total, pixels, weights, sums[k]))
                                sums[k] = total
                        return sums

                    sums = self.loop(self.channels, input_channel, [(VECTOR_TYPE, "zeroinitializer")] * len(group))
                    for total, vector in zip(sums, group):
                        lanes = min(VECTOR, self.out_w - VECTOR * vector)
                        self._store(epilogue, total, o, self.value(f"add i64 {out_row}, {VECTOR * vector}"), lanes)

            self.loop(out_rows, row)

        self.loop(self.out_channels, channel)
