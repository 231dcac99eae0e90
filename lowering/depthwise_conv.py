"""The depthwise convolution ukernel: an f32 conv2d with one input channel per group, read
straight from x (no padded copy), vectorized over output columns.

The cpu lowering calls a ukernel generated for the shapes, with the strides, dilations and
top/left padding in its name (bottom/right padding follow from the shapes):

    func.call @graphopt_sconv_depthwise_s2x2_d1x1_p1x1_1x96x112x112_96x1x3x3_1x96x56x56(%x, %w, %out)
        : (memref<1x96x112x112xf32>, memref<96x1x3x3xf32>, memref<1x96x56x56xf32>) -> ()

Output channel o reads input channel o / M (M = out channels / in channels, the channel
multiplier; a conv of one input channel and groups 1 is one too). For each image and output
channel the ukernel runs blocks of ROWS output rows, each a call of a block function made for
the input rows of the block that lie inside x (the blocks at the top and bottom padding have
their own). A block function broadcasts the KH x KW weights once, then computes its rows in
vectors of 16 output columns: one accumulator per row, and for each input row the block reads
and each kw, one load of the tap's columns that feeds an FMA into every row that reads it. A
tap's 16 columns are one load of x at stride 1; at stride 2 each input row's 32 + columns
are loaded once, split into even and odd columns by two shuffles, and each tap is one of
those shifted by whole lanes (one more shuffle); without AVX-512, where those shuffles cross
128-bit lanes, each even offset's 32 columns are loaded and split by in-lane shuffles
(`_in_lane_taps`), in a lane order the stores undo. The padding costs no copy: a load that reaches past x's row is masked (the lanes
outside read 0; without AVX-512, on the planes between x's first and last, a full load and a
select: `loads_under_masks`), and an input row outside x multiplies zeros, so that 0 x inf weights give NaN
as in the interpreter's zero-padded windows. The vectors whose taps all lie inside the row run
as a loop, the others are written out; the last vector of a row is stored under a mask.
Since 2026-11-25 a ukernel may apply a tile epilogue (`tile_epilogue.py`) before each store,
as the direct convolution does: `_e<token>` after the padding in the name, its operands
between w and out. An epilogue with a sigmoid (SiLU; `PLANE_STEPS`) runs instead over each
output channel's plane once its rows are stored, as flat vectors of 16 (`_plane_epilogue`),
on planes that fill their last vector well enough (`takes_epilogue`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering import tile_epilogue
from graphopt.lowering.llvm_text import (
    VECTOR, VECTOR_TYPE, LLVMText, broadcast, fma, host_has_avx512, lane_mask, load, store,
)

PREFIX = "graphopt_sconv_depthwise"
ROWS = {1: 4}
"""Output rows computed together, by row stride (1 for the others): each input row they share
is loaded once. Picked by measurement on MobileNet-v2's shapes (one thread, interleaved): at
stride 1, 4 rows ran 1.1-1.5x faster than 1 (8: within 10% of 4); at stride 2, 2 or 3 rows
ran 0.95-1.11x the speed of 1. A 'flat' variant of the small stride-1 planes (vectors of 16
consecutive outputs across rows, 4 vectors for a 7x7 plane instead of 7 of 7 lanes) ran
1.08x slower than blocks of 4 rows on 960x7x7 and 1.4x slower on 14x14."""
TALL_STRIDE_2_ROWS = 3
"""Output rows computed together at row stride 2 for windows of 5 or more rows (ROWS keeps 1
for shorter ones), where consecutive output rows share kernel_h - 2 input rows. Measured
2026-11-25 (conv + bias + SiLU, one thread, interleaved, 1 / 2 / 3 rows): EfficientNet's 5x5/2
at 144x56 98 / 83 / 79 us, 240x28 41 / 35 / 33, 672x14 44 / 39 / 34; 3x3/2 (96x112 + SiLU:
122 / 114 / 129, 144x56 + relu 27.3 / 28.0 / 29.7) keeps 1 row."""
COLUMN_STRIDES = (1, 2)
"""Column strides the ukernel reads with (one load, or two loads and a shuffle, per tap)."""
PLANE_STEPS = frozenset({"sigmoid"})
"""Epilogue steps whose cost is their arithmetic (an exp): an epilogue with one runs over each
output channel's plane after its blocks (`WindowUkernel._plane_epilogue`), as flat vectors, since
a row's last vector is mostly padding on 7- to 28-wide rows. On the block functions' vectors,
conv + bias + SiLU ran 0.56-0.81x the loop nest's speed with main's exp, 0.75-1.0x with the
tile's (144x56x56 and 960x7x7, one thread)."""
PLANE_WASTE = 0.1
"""The most idle lanes, as a share of a plane's floats, for which the ukernel takes an epilogue
with PLANE_STEPS (`takes_epilogue`): the plane pass ran 1.09-1.19x the loop nest's speed on
planes of 196 floats and more (13 vectors, 4 lanes of the last used), 0.80x on 7x7 planes (49:
four vectors for 3 and one lane)."""


def loads_under_masks() -> bool:
    """Whether the taps that reach past x's row are masked loads on every plane (with AVX-512),
    or, on the planes of x between its first and last, full loads whose lanes outside the row
    are then selected away (without it). AVX2's masked load (vmaskmovps) ran the 3x3 convs on
    14x14 and 7x7 planes, where every tap is one, 1.6-1.9x slower than the full loads on
    2026-11-27 (AMD EPYC znver1; docs/cpu-codegen.md)."""
    return host_has_avx512()


def in_lane_stride_2() -> bool:
    """Whether stride-2 taps come from AVX2's in-lane shuffles (`WindowUkernel._in_lane_taps`),
    in a lane order the stores undo, or from the even and odd halves of each input row
    (`_row_taps`), without AVX-512 shuffles across 128-bit lanes: on 2026-11-28 (AMD EPYC
    znver1) the in-lane taps ran the 3x3/2 and 5x5/2 convs of MobileNet-v2, EfficientNet and
    ShuffleNet 1.07-1.48x faster (docs/cpu-codegen.md)."""
    return not host_has_avx512()


IN_LANE_ORDER = [8 * (lane // 8) + (0, 1, 4, 5, 2, 3, 6, 7)[lane % 8] for lane in range(VECTOR)]
"""The output column in each lane of a tap from `_in_lane_taps`: per 8 lanes (one AVX2
register), the 4 even floats of each 128-bit lane of two registers side by side; the
permutation is its own inverse."""


def applies(x_type: Attribute, w_type: Attribute, out_type: Attribute, groups: int, strides: Sequence[int]) -> bool:
    """Whether a conv2d of these types runs as the ukernel: f32, one input channel per group,
    a column stride of 1 or 2."""
    return (
        all(t.get_element_type() == f32 for t in (x_type, w_type, out_type))
        and groups == x_type.get_shape()[1]
        and strides[1] in COLUMN_STRIDES
    )


def takes_epilogue(epilogue: Sequence[tile_epilogue.Step], out_shape: Sequence[int]) -> bool:
    """Whether the ukernel applies `epilogue` to an output of this shape (NCHW): any, but one
    with PLANE_STEPS only on planes whose last vector's idle lanes are at most PLANE_WASTE of
    the plane's floats."""
    plane = out_shape[2] * out_shape[3]
    idle = -plane % VECTOR
    return not any(op in PLANE_STEPS for op, _ in epilogue) or idle <= PLANE_WASTE * plane


def name(
    types: Sequence[MemRefType],
    strides: Sequence[int],
    dilations: Sequence[int],
    padding: Sequence[int],
    epilogue: Sequence[tile_epilogue.Step] = (),
) -> str:
    """The ukernel's name for a call on memrefs (x, w, epilogue operands..., out) with these
    conv2d attributes, applying `epilogue` before each store."""
    (sh, sw), (dh, dw), (top, left) = strides, dilations, padding[:2]
    shapes = "_".join("x".join(map(str, t.get_shape())) for t in types)
    steps = f"_e{tile_epilogue.token(epilogue)}" if epilogue else ""
    return f"{PREFIX}_s{sh}x{sw}_d{dh}x{dw}_p{top}x{left}{steps}_{shapes}"


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk of its images)."""
    return name(types, *_parameters(name_))


def _parameters(name_: str) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[tile_epilogue.Step, ...]]:
    match = re.match(rf"{PREFIX}_s(\d+)x(\d+)_d(\d+)x(\d+)_p(\d+)x(\d+)(?:_e([a-zA-Z0-9.]+))?_", name_)
    numbers = [int(group) for group in match.groups()[:6]]
    epilogue = tile_epilogue.parse(match[7]) if match[7] else ()
    return (numbers[0], numbers[1]), (numbers[2], numbers[3]), (numbers[4], numbers[5]), epilogue


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr x, ptr w, <the tile epilogue's operands>, ptr out)` for these memref types."""
    strides, dilations, padding, epilogue = _parameters(name_)
    x, w, out = (types[0].get_shape(), types[1].get_shape(), types[-1].get_shape())
    return WindowUkernel(name_, x, w[2:], out, strides, dilations, padding, epilogue).text()


class WindowUkernel(LLVMText):
    """The depthwise ukernel's code over the windows of x (see the module docstring), and the
    hooks by which the pooling ukernel (`pooling.py`) reuses it: what a block's vector
    computes from its input rows' taps (`_vector`), the lanes a load leaves outside x (`FILL`)
    and the data each block is passed (`_main_parameters`, `_block_parameters`,
    `_block_arguments`, `_start_block`)."""

    FILL = "zeroinitializer"
    """The value of the lanes of a tap outside x's row."""
    IN_LANE_TAPS = True
    """Whether stride-2 taps may come in lane order IN_LANE_ORDER (`in_lane_stride_2`), which
    `_vector` undoes before its stores (`_in_column_order`)."""

    def __init__(
        self, name_: str, x: Sequence[int], window: Sequence[int], out: Sequence[int], strides: Sequence[int],
        dilations: Sequence[int], padding: Sequence[int], epilogue: Sequence[tile_epilogue.Step],
    ):
        super().__init__()
        self.name = name_
        (self.sh, self.sw), (self.dh, self.dw), (self.top, self.left) = strides, dilations, padding[:2]
        self.epilogue = epilogue
        self.batch, self.channels, self.height, self.width = x
        self.kernel_h, self.kernel_w = window
        _, self.out_channels, self.out_h, self.out_w = out
        self.multiplier = self.out_channels // self.channels
        self.vectors = -(-self.out_w // VECTOR)
        self.on_planes = any(op in PLANE_STEPS for op, _ in self.epilogue)
        """Whether the epilogue runs over each channel's stored plane (`_plane_epilogue`), not on
        the block functions' vectors."""
        self.block_epilogue = () if self.on_planes else self.epilogue
        self.blocks: set[tuple[int, tuple[bool, ...], bool]] = set()
        self.masked = True
        """Whether the block being written loads the lanes outside x's row under a mask (`_load`)."""
        self.in_lane = self.IN_LANE_TAPS and self.sw == 2 and in_lane_stride_2()
        """Whether the taps are `_in_lane_taps`, in lane order IN_LANE_ORDER."""
        planes = self.batch * self.channels
        self.full_loads = not loads_under_masks() and self.height * self.width >= VECTOR and planes > 2
        """Whether the planes between x's first and last run blocks of full loads: a load that
        reaches past a row of one of them (at most VECTOR - 1 floats, since each load has a
        lane inside the row) stays in x when a plane holds at least VECTOR floats."""

    def text(self) -> str:
        self._main()
        for rows, inside, masked in sorted(self.blocks):
            self._block(rows, inside, masked)
        return self.ir()

    def _weights(self) -> dict[tuple[int, int], str]:
        """The channel's weights at %w, each broadcast to a vector, by tap (kh, kw)."""
        weights = {}
        for tap in range(self.kernel_h * self.kernel_w):
            scalar = self.value(f"load float, ptr {self.pointer('%w', tap)}, align 4")
            weights[divmod(tap, self.kernel_w)] = f"%w.{tap}"
            self.lines += broadcast(f"%w.{tap}", scalar)
        return weights

    # --- a block of output rows, for the input rows it reads that lie inside x (`inside`) ---

    def _block_name(self, rows: int, inside: tuple[bool, ...], masked: bool) -> str:
        full = "" if masked else "_full"
        return f"@{self.name}.rows{rows}_{''.join(str(int(flag)) for flag in inside)}{full}"

    def _block(self, rows: int, inside: tuple[bool, ...], masked: bool) -> None:
        """`void block(ptr x, ptr w, ptr out)` for `rows` output rows: x points at the first input
        row the block reads (maybe outside x), w at the channel's weights, out at the first output
        row; `masked`: loads past x's row under a mask, or full loads (`_load`)."""
        self.masked = masked
        self.define(
            f"define internal void {self._block_name(rows, inside, masked)}(ptr %x{self._block_parameters()}, ptr %out) {{"
        )
        self._start_block()
        full = [v for v in range(self.vectors) if self._inside(v)]
        first, last = (full[0], full[-1] + 1) if full else (self.vectors, self.vectors)
        for v in range(first):
            self._vector(v, v, rows, inside)

        def full_vector(i: str) -> None:
            self._vector(self.value(f"add i64 {i}, {first}"), first, rows, inside)

        self.loop(last - first, full_vector)
        for v in range(last, self.vectors):
            self._vector(v, v, rows, inside)
        self.end()

    def _block_parameters(self) -> str:
        """The parameters of a block function between x and out: the channel's weights, the tile epilogue's."""
        return f", ptr %w{tile_epilogue.parameters(self.block_epilogue)}"

    def _start_block(self) -> None:
        """The block function's code before its vectors: the tile epilogue's and the weights."""
        self.tile_epilogue = tile_epilogue.TileEpilogue(self, self.block_epilogue)
        self.weights = self._weights()

    def _inside(self, v: int) -> bool:
        """Whether every tap of output vector v reads 16 x sw columns inside x's row, and all 16 are stored."""
        start = v * VECTOR * self.sw - self.left
        end = start + (self.kernel_w - 1) * self.dw + VECTOR * self.sw
        return start >= 0 and end <= self.width and (v + 1) * VECTOR <= self.out_w

    def _vector(self, v: int | str, like: int, rows: int, inside: tuple[bool, ...]) -> None:
        """out[r, 16 v : 16 v + 16] for the block's rows r; `v` an index value (in the loop over
        full vectors) or a number, `like` a vector whose masks it shares. Each input row's taps
        are loaded once, for every output row that reads them."""
        x = self.pointer("%x", v if v == 0 else self.value(f"mul i64 {v}, {VECTOR * self.sw}"))
        sums = ["zeroinitializer"] * rows
        for i, row_inside in enumerate(inside):
            readers = [(r, (i - r * self.sh) // self.dh) for r in range(rows) if self._reads(r, i)]
            if not readers:
                continue
            taps = self._row_taps(x, like, i) if row_inside else ["zeroinitializer"] * self.kernel_w
            for kw, pixels in enumerate(taps):
                for r, kh in readers:
                    total = self.fresh()
                    self.emit(fma(total, self.weights[kh, kw], pixels, sums[r]))
                    sums[r] = total
        for r, total in enumerate(sums):
            offset, lanes = self._out_offset(v, like, r)
            total = self._in_column_order(total)
            self.emit(store(self.tile_epilogue.apply(total, 0, offset, lanes), self.pointer("%out", offset), lanes))

    def _in_column_order(self, vector: str) -> str:
        """`vector`, computed from taps in this ukernel's lane order, with its lanes in column order."""
        return self._shuffle(vector, vector, IN_LANE_ORDER) if self.in_lane else vector

    def _out_offset(self, v: int | str, like: int, r: int) -> tuple[int | str, int]:
        """Where block row r's vector v starts in %out, and how many of its lanes are stored."""
        column = v if v == 0 else self.value(f"mul i64 {v}, {VECTOR}")
        offset = column if r == 0 else self.value(f"add i64 {column}, {r * self.out_w}")
        return offset, min(VECTOR, self.out_w - like * VECTOR)

    def _reads(self, r: int, i: int) -> bool:
        """Whether output row r of a block reads its input row i (as some window row kh)."""
        kh, rest = divmod(i - r * self.sh, self.dh)
        return rest == 0 and 0 <= kh < self.kernel_h

    def _row_taps(self, x: str, like: int, i: int) -> list[str]:
        """Each tap kw's 16 columns (every sw-th) of input row i for the vector at `x`, whose
        masks are vector `like`'s. At stride 1, one load per tap. At stride 2, the row's columns
        are loaded once in pieces of 16 and split into even and odd columns; a tap is one of
        those, shifted by whole lanes. At larger strides (pools only), the pieces are joined
        into one wide vector, from which each tap picks its lanes."""
        start = like * VECTOR * self.sw - self.left
        offsets = [kw * self.dw for kw in range(self.kernel_w)]
        row = i * self.width - self.left
        if self.in_lane:
            return self._in_lane_taps(x, start, row, offsets)
        if self.sw == 1:
            return [
                self._load(self.pointer(x, row + offset), [0 <= start + offset + lane < self.width for lane in range(VECTOR)])
                for offset in offsets
            ]
        needed = (VECTOR - 1) * self.sw + offsets[-1] + 1  # floats of the row the taps read
        pieces = []
        for piece in range(-(-needed // VECTOR)):
            lanes = [
                piece * VECTOR + lane < needed and 0 <= start + piece * VECTOR + lane < self.width
                for lane in range(VECTOR)
            ]
            pieces.append(self._load(self.pointer(x, row + piece * VECTOR), lanes))
        if self.sw > 2:
            return self._pick_taps(pieces, offsets)
        pieces += [self.FILL] * (len(pieces) % 2)
        halves = {
            parity: [
                self._shuffle(pieces[k], pieces[k + 1], [2 * lane + parity for lane in range(VECTOR)])
                for k in range(0, len(pieces), 2)
            ]
            for parity in (0, 1)
        }
        taps = []
        for offset in offsets:
            shift, (first, *rest) = offset // 2, halves[offset % 2]
            second = rest[0] if rest else self.FILL
            taps.append(first if shift == 0 else self._shuffle(first, second, [shift + lane for lane in range(VECTOR)]))
        return taps

    def _in_lane_taps(self, x: str, start: int, row: int, offsets: list[int]) -> list[str]:
        """Stride-2 taps in the lane order IN_LANE_ORDER (`in_lane`): 32 floats of the row
        from each even offset, two loads, of which one in-lane shuffle per register keeps the
        even floats (the tap at that offset) or the odd ones (the tap one column further)."""
        loaded: dict[int, list[str]] = {}
        taps = []
        for offset in offsets:
            base, parity = offset - offset % 2, offset % 2
            if base not in loaded:
                loaded[base] = [
                    self._load(
                        self.pointer(x, row + base + piece * VECTOR),
                        [0 <= start + base + piece * VECTOR + lane < self.width for lane in range(VECTOR)],
                    )
                    for piece in (0, 1)
                ]
            taps.append(self._shuffle(*loaded[base], [2 * column + parity for column in IN_LANE_ORDER]))
        return taps

    def _pick_taps(self, pieces: list[str], offsets: list[int]) -> list[str]:
        """Each tap's lanes (every sw-th float from its offset) picked from `pieces` joined into
        one vector (of a power of two pieces, FILL after them)."""
        pieces = pieces + [self.FILL] * ((1 << (len(pieces) - 1).bit_length()) - len(pieces))
        width = VECTOR
        while len(pieces) > 1:
            joined_type = f"<{width} x float>"
            lanes = ", ".join(f"i32 {lane}" for lane in range(2 * width))
            pieces = [
                self.value(f"shufflevector {joined_type} {a}, {joined_type} {b}, <{2 * width} x i32> <{lanes}>")
                for a, b in zip(pieces[::2], pieces[1::2])
            ]
            width *= 2
        wide = f"<{width} x float>"
        return [
            self.value(
                f"shufflevector {wide} {pieces[0]}, {wide} poison, <16 x i32> "
                f"<{', '.join(f'i32 {lane * self.sw + offset}' for lane in range(VECTOR))}>"
            )
            for offset in offsets
        ]

    def _load(self, pointer: str, lanes: list[bool]) -> str:
        """The floats at `pointer` in `lanes` (FILL in the others; no load when none): a masked
        load, or in a block of full loads (`masked` False) a load of all lanes and a select."""
        if not any(lanes):
            return self.FILL
        if self.masked or all(lanes):
            loaded = self.fresh()
            self.emit(load(loaded, pointer, lanes, self.FILL))
            return loaded
        whole = self.fresh()
        self.emit(load(whole, pointer))
        return self.value(f"select <16 x i1> {lane_mask(lanes)}, {VECTOR_TYPE} {whole}, {VECTOR_TYPE} {self.FILL}")

    def _shuffle(self, first: str, second: str, lanes: list[int]) -> str:
        """The vector of lanes `lanes` of first and second concatenated (32 lanes)."""
        indices = ", ".join(f"i32 {lane}" for lane in lanes)
        return self.value(f"shufflevector {VECTOR_TYPE} {first}, {VECTOR_TYPE} {second}, <16 x i32> <{indices}>")

    # --- the ukernel: loops over images, output channels and blocks of rows ---

    def _main(self) -> None:
        self.define(f"define void @{self.name}(ptr noalias %x{self._main_parameters()}, ptr noalias %out) {{")

        def image(n: str) -> None:
            n_x = self.value(f"mul i64 {n}, {self.channels}")
            n_out = self.value(f"mul i64 {n}, {self.out_channels}")
            self.loop(self.out_channels, lambda o: self._channel(n_x, n_out, o))

        self.loop(self.batch, image)
        self.end()

    def _channel(self, n_x: str, n_out: str, o: str) -> None:
        """Output channel o of the image whose first input and output channels are n_x and n_out:
        blocks of full loads (`full_loads`) unless it reads x's first or last plane."""
        plane = self.value(f"add i64 {n_x}, {self.value(f'udiv i64 {o}, {self.multiplier}')}")
        x_c = self.pointer("%x", self.value(f"mul i64 {plane}, {self.height * self.width}"))
        out_c = self.value(f"add i64 {n_out}, {o}")
        out_o = self.pointer("%out", self.value(f"mul i64 {out_c}, {self.out_h * self.out_w}"))
        if self.full_loads:
            last = self.batch * self.channels - 1
            inner = self.value(f"and i1 {self.value(f'icmp ne i64 {plane}, 0')}, {self.value(f'icmp ne i64 {plane}, {last}')}")
            self.branch(
                inner, lambda: self._blocks(x_c, out_o, o, masked=False), lambda: self._blocks(x_c, out_o, o, masked=True)
            )
        else:
            self._blocks(x_c, out_o, o, masked=True)
        if self.on_planes:
            self._plane_epilogue(o, out_c)

    def _blocks(self, x_c: str, out_o: str, o: str, masked: bool) -> None:
        """The calls of output channel o's blocks, on its input plane x_c and output plane out_o."""
        for first, count, rows, inside in self._block_runs():
            self.blocks.add((rows, inside, masked))

            def block(i: str, first: int = first, rows: int = rows, inside: tuple[bool, ...] = inside) -> None:
                oh = self.value(f"add i64 {self.value(f'mul i64 {i}, {rows}')}, {first}")
                x_row = self.value(f"mul i64 {oh}, {self.sh * self.width}")
                x_at = self.pointer(x_c, self.value(f"sub i64 {x_row}, {self.top * self.width}"))
                out_at = self.pointer(out_o, self.value(f"mul i64 {oh}, {self.out_w}"))
                data = self._block_arguments(o, out_at)
                self.emit(f"  call void {self._block_name(rows, inside, masked)}(ptr {x_at}{data}, ptr {out_at})")

            self.loop(count, block)

    def _main_parameters(self) -> str:
        """The ukernel's parameters between x and out: w, the tile epilogue's."""
        return f", ptr noalias %w{tile_epilogue.parameters(self.epilogue, 'noalias ')}"

    def _block_arguments(self, o: str, out_at: str) -> str:
        """The arguments for `_block_parameters` of output channel o's block whose out pointer is `out_at`."""
        w_o = self.pointer("%w", self.value(f"mul i64 {o}, {self.kernel_h * self.kernel_w}"))
        return f", ptr {w_o}{tile_epilogue.arguments(self, self.block_epilogue, o, out_at)}"

    def _plane_epilogue(self, o: str, out_c: str) -> None:
        """The epilogue on output channel o's plane (out_c: its index among out's planes), which
        the blocks stored as is and which is still in L1: flat vectors of 16 of its OH * OW
        floats, the last under a mask, so that short rows leave no lanes idle."""
        plane = self.out_h * self.out_w
        start = self.value(f"mul i64 {out_c}, {plane}")
        epilogue = tile_epilogue.TileEpilogue(self, self.epilogue)

        def vector(offset: str, lanes: int) -> None:
            pointer, loaded = self.pointer("%out", offset), self.fresh()
            self.emit(load(loaded, pointer, lanes))
            self.emit(store(epilogue.apply(loaded, o, offset, lanes), pointer, lanes))

        def full_vector(i: str) -> None:
            vector(self.value(f"add i64 {start}, {self.value(f'mul i64 {i}, {VECTOR}')}"), VECTOR)

        self.loop(plane // VECTOR, full_vector)
        if plane % VECTOR:
            vector(self.value(f"add i64 {start}, {plane // VECTOR * VECTOR}"), plane % VECTOR)

    def _block_rows(self) -> int:
        """Output rows per block: ROWS[sh], TALL_STRIDE_2_ROWS for windows of 5 or more rows at stride 2."""
        return TALL_STRIDE_2_ROWS if self.sh == 2 and self.kernel_h >= 5 else ROWS.get(self.sh, 1)

    def _block_runs(self) -> list[tuple[int, int, int, tuple[bool, ...]]]:
        """(first output row, blocks, rows per block, input rows inside x) for each run of
        consecutive blocks of `_block_rows` output rows (the last block: the rows left) alike."""
        runs: list[tuple[int, int, int, tuple[bool, ...]]] = []
        block = self._block_rows()
        for first in range(0, self.out_h, block):
            rows = min(block, self.out_h - first)
            reach = (rows - 1) * self.sh + (self.kernel_h - 1) * self.dh + 1
            inside = tuple(0 <= first * self.sh - self.top + i < self.height for i in range(reach))
            if runs and runs[-1][2:] == (rows, inside):
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, rows, inside)
            else:
                runs.append((first, 1, rows, inside))
        return runs
