"""The direct convolution ukernel: an f32 conv2d with its output tile in registers.

The cpu lowering copies x, zero-padded, into stride phases (`_conv_phases` in
linalg/conv.py: phases[n, c, a, b, i * R + j] = padded x[n, c, i * sh + a, j * sw + b]),
so every tap of the window reads a row of output columns contiguously, and calls a ukernel
generated for the shapes, with R and the dilations in its name:

    func.call @graphopt_sconv_direct_r18_d1x1_64x8x1x1x340_16x8x5x5_64x16x14x14(%phases, %w, %out)
        : (memref<64x8x1x1x340xf32>, memref<16x8x5x5xf32>, memref<64x16x14x14xf32>) -> ()

The ukernel computes tiles of OUT_CHANNELS output channels x VECTORS vectors of 16 output
columns (an output row cut into vectors of 16, the last under a mask; short rows give a tile
several rows) in 24 registers (4 x 1 vectors in 8 registers of AVX2 without AVX-512): for each
input channel and each tap (kh, kw) of the window, it loads each distinct vector of x the tile needs once (tiles of several rows share the rows of
x that neighbouring taps read), broadcasts one weight per output channel, and issues one FMA
per accumulator. After the last input channel each accumulator is stored once. Loops
(n, channel tile, row tile, column group). Picked by measurement on the MNIST CNN's 8->16 5x5
conv at batch 64: 8 channels x 3 vectors ran at 93 GFLOP/s against 86 for 6 x 4 and 67 for
the loop nest (`_lower_conv2d`). Since 2026-11-25 every f32 conv that is not depthwise takes it
(the cpu schedule asks `depthwise_conv.applies` first; it takes the convs of one input channel
per group), however shallow its window: on one thread the ukernel ran 2.2-3.6x the loop nest's
speed on 1x1s of 4, 8, 16, 24 and 32 channels, 1.56x on a 3->32 3x3 stem, 1.85-2.35x on grouped
1x1s of 6, 28 and 34 channels per group and 1.31-1.39x on 3x3s of 2 and 4 channels per group.
The loop nest stays for non-f32 convs. A grouped conv (w's C is the channels of a group:
groups = phases' C / w's C) runs each group as a conv of its own: channel tiles stay inside a
group, and read its input channels.

Since 2026-11-25 a ukernel may apply an epilogue (`tile_epilogue.py`) to each output vector
before storing it: the name carries its steps after the dilations (`_e<token>`) and the call
passes its per-channel operands (each [O] values in any shape of O elements) and its residual
(out's shape) between w and out:

    func.call @graphopt_sconv_direct_r18_d1x1_eaddAP0.maxS0C00000000_1x8x1x1x340_16x8x5x5_16_1x16x14x14(
        %phases, %w, %bias, %out) : (memref<1x8x1x1x340xf32>, memref<16x8x5x5xf32>, memref<16xf32>, memref<1x16x14x14xf32>) -> ()

Since 2026-11-29 a call for output rows first to end - 1 alone (a chunk of a one-group conv
split by output rows, `ukernels.DIRECT_ROW_SPLIT`) has a name ending in `_oh<first>to<end>`
(`output_rows.chunk_name`) and the same operands: its row tiles start at row first, which is a
multiple of `tile_rows`, and its phases hold the rows of x those rows read (`phases_read`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering import output_rows, tile_epilogue
from graphopt.lowering.llvm_text import VECTOR, VECTOR_TYPE, LLVMText, broadcast, fma, host_has_avx512, load, store

OUT_CHANNELS = 8 if host_has_avx512() else 4
"""Output channels per register tile."""
VECTORS = 3 if host_has_avx512() else 1
"""Vectors of 16 output columns per register tile: 8 x 3 accumulators of AVX-512's 32 registers;
without AVX-512, 4 x 1 (8 of AVX2's 16 registers of 8 floats: 8 x 3 spilled there, and ran
regnet_y_400mf's group-width-8 3x3s at stride 1 1.5-3.4x slower)."""
PREFIX = "graphopt_sconv_direct"
SLACK = VECTOR
"""Floats the phases buffer needs past its last row: a row's last vector reads up to 15 floats
past the row's last output column."""


def applies(x_type: Attribute, w_type: Attribute, out_type: Attribute) -> bool:
    """Whether a conv2d of these types runs as the ukernel: f32 (the schedule asks
    `depthwise_conv.applies` first)."""
    return all(t.get_element_type() == f32 for t in (x_type, w_type, out_type))


def name(
    types: Sequence[MemRefType],
    row: int,
    dilations: Sequence[int],
    epilogue: Sequence[tile_epilogue.Step] = (),
    prefix: str = PREFIX,
) -> str:
    """The ukernel's name for a call on memrefs (phases, w, epilogue operands..., out) with rows
    of `row` floats, applying `epilogue` before each store (`prefix`: a conv ukernel on the
    phases, this one or `conv_lanes`)."""
    shapes = "_".join("x".join(map(str, t.get_shape())) for t in types)
    steps = f"_e{tile_epilogue.token(epilogue)}" if epilogue else ""
    return f"{prefix}_r{row}_d{dilations[0]}x{dilations[1]}{steps}_{shapes}"


def phase_reach(window: Sequence[int], dilations: Sequence[int], strides: Sequence[int], row: int) -> int:
    """Elements past an output position's own that its window's taps read within their stride
    phases (rows of `row`): (KH - 1) dh / sh rows and (KW - 1) dw / sw elements."""
    (kernel_h, kernel_w), (dh, dw), (sh, sw) = window, dilations, strides
    return (kernel_h - 1) * dh // sh * row + (kernel_w - 1) * dw // sw


def tile_rows(out_w: int) -> int:
    """Output rows per register tile for output rows of `out_w` columns: several where a row
    takes fewer than VECTORS vectors."""
    return max(1, VECTORS // min(-(-out_w // VECTOR), VECTORS))


def phase_span(name_: str, types: Sequence[MemRefType], first: int, end: int, columns: int) -> tuple[int, int]:
    """(begin, end) of the elements of each phase row (axis 4 of the phases, [N, C, sh, sw, L])
    that a ukernel on the phases (this one or `conv_lanes`) reads to compute output rows first to
    end - 1 when it reads `columns` of each: position (oh, ow) reads oh * R + ow plus each tap's
    shift within its phase, at most `phase_reach` on."""
    row, dilations, _ = parameters(name_)
    _, _, sh, sw, length = types[0].get_shape()
    reach = phase_reach(types[1].get_shape()[2:4], dilations, (sh, sw), row)
    return first * row, min(length, (end - 1) * row + columns + reach)


def phases_read(name_: str, types: Sequence[MemRefType], first: int, end: int) -> tuple[int, int]:
    """`phase_span` of this ukernel's call for output rows first to end - 1: its rows of x are
    read in whole vectors of 16 columns."""
    return phase_span(name_, types, first, end, -(-types[-1].get_shape()[3] // VECTOR) * VECTOR)


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk of its images)."""
    return name(types, *parameters(name_))


def parameters(name_: str) -> tuple[int, tuple[int, int], tuple[tile_epilogue.Step, ...]]:
    """The row length, the dilations and the epilogue steps in the name of a ukernel on the phases (`name`)."""
    match = re.match(r"[a-z_]+?_r(\d+)_d(\d+)x(\d+)(?:_e([a-zA-Z0-9.]+))?_", name_)
    return int(match[1]), (int(match[2]), int(match[3])), tile_epilogue.parse(match[4]) if match[4] else ()


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr phases, ptr w, <the tile epilogue's operands>, ptr out)` for these memref types."""
    return _Ukernel(name_, types).text()


class _Ukernel(LLVMText):
    def __init__(self, name_: str, types: Sequence[MemRefType]):
        super().__init__()
        self.name = name_
        self.row, (self.dh, self.dw), self.epilogue = parameters(name_)
        phases, w, out = (types[0].get_shape(), types[1].get_shape(), types[-1].get_shape())
        self.batch, in_channels, self.sh, self.sw, self.length = phases
        self.out_channels, self.channels, self.kernel_h, self.kernel_w = w  # channels of a group
        self.conv_groups = in_channels // self.channels
        _, _, self.out_h, self.out_w = out
        self.first_row, self.end_row = output_rows.row_range(name_, self.out_h)
        self.chunks = -(-self.out_w // VECTOR)  # vectors per output row
        self.group = min(self.chunks, VECTORS)  # vectors per tile of one row
        self.tile_rows = tile_rows(self.out_w)
        self.groups = -(-self.chunks // self.group)  # tiles across an output row
        self.tiles: set[tuple[int, int, int, int]] = set()

    def text(self) -> str:
        self._main()
        for tile in sorted(self.tiles):
            self._tile(*tile)
        return self.ir()

    # --- one register tile: out[ocs channels, rows rows, vectors of 16 columns] ---

    def _tile_name(self, ocs: int, rows: int, vectors: int, lanes: int) -> str:
        return f"@{self.name}.tile{ocs}x{rows}x{vectors}x{lanes}"

    def _tile(self, ocs: int, rows: int, vectors: int, lanes: int) -> None:
        """`lanes`: columns in the tile's last vector (the others are full)."""
        slots = [(r, v) for r in range(rows) for v in range(vectors)]
        window = self.kernel_h * self.kernel_w
        e = self.emit
        parameters = f"ptr %x, ptr %w{tile_epilogue.parameters(self.epilogue)}, ptr %out"
        self.define(f"define internal void {self._tile_name(ocs, rows, vectors, lanes)}({parameters}) {{")
        e("  br label %loop")
        e("loop:")
        e("  %c = phi i64 [0, %entry], [%c.next, %loop]")
        sums = {(o, s): f"%acc.{o}.{s}" for o in range(ocs) for s in range(len(slots))}
        for (o, s), acc in sums.items():
            e(f"  {acc} = phi {VECTOR_TYPE} [zeroinitializer, %entry], [%sum.{o}.{s}.{window - 1}, %loop]")
        e(f"  %x.c.at = mul i64 %c, {self.sh * self.sw * self.length}")
        e("  %x.c = getelementptr float, ptr %x, i64 %x.c.at")
        e(f"  %w.c.at = mul i64 %c, {window}")
        e("  %w.c = getelementptr float, ptr %w, i64 %w.c.at")
        loaded: dict[int, str] = {}
        for tap in range(window):
            kh, kw = divmod(tap, self.kernel_w)
            (a, i), (b, j) = divmod(kh * self.dh, self.sh)[::-1], divmod(kw * self.dw, self.sw)[::-1]
            pixels = []
            for r, v in slots:
                offset = (a * self.sw + b) * self.length + (r + i) * self.row + v * VECTOR + j
                if offset not in loaded:
                    loaded[offset] = f"%x.{len(loaded)}"
                    e(f"  {loaded[offset]}.at = getelementptr float, ptr %x.c, i64 {offset}")
                    e(load(loaded[offset], f"{loaded[offset]}.at"))
                pixels.append(loaded[offset])
            for o in range(ocs):
                weight = f"%w.{tap}.{o}"
                e(f"  {weight}.at = getelementptr float, ptr %w.c, i64 {o * self.channels * window + tap}")
                e(f"  {weight}.scalar = load float, ptr {weight}.at, align 4")
                self.lines += broadcast(weight, f"{weight}.scalar")
                for s, pixel in enumerate(pixels):
                    total = f"%sum.{o}.{s}.{tap}"
                    e(fma(total, weight, pixel, sums[o, s]))
                    sums[o, s] = total
        e("  %c.next = add i64 %c, 1")
        e(f"  %c.done = icmp eq i64 %c.next, {self.channels}")
        e("  br i1 %c.done, label %exit, label %loop")
        e("exit:")
        epilogue = tile_epilogue.TileEpilogue(self, self.epilogue)
        for (o, s), total in sums.items():
            r, v = slots[s]
            offset, valid = o * self.out_h * self.out_w + r * self.out_w + v * VECTOR, lanes if v == vectors - 1 else VECTOR
            result = epilogue.apply(total, o, offset, valid)
            pointer = f"%out.{o}.{s}"
            e(f"  {pointer} = getelementptr float, ptr %out, i64 {offset}")
            e(store(result, pointer, valid))
        self.end()


    # --- the ukernel: loops over images, groups, channel tiles, row tiles and column groups ---

    def _main(self) -> None:
        epilogue = tile_epilogue.parameters(self.epilogue, "noalias ")
        self.define(f"define void @{self.name}(ptr noalias %x, ptr noalias %w{epilogue}, ptr noalias %out) {{")
        window = self.kernel_h * self.kernel_w

        def image(n: str) -> None:
            phase_channel = self.sh * self.sw * self.length
            x_n = self.pointer("%x", self.value(f"mul i64 {n}, {self.conv_groups * self.channels * phase_channel}"))
            out_n = self.pointer("%out", self.value(f"mul i64 {n}, {self.out_channels * self.out_h * self.out_w}"))
            group_out = self.out_channels // self.conv_groups

            def conv_group(g: str) -> None:
                x_g = self.pointer(x_n, self.value(f"mul i64 {g}, {self.channels * phase_channel}"))
                first = self.value(f"mul i64 {g}, {group_out}")

                def tile(o: str, ocs: int) -> None:
                    channel_tile(x_g, self.value(f"add i64 {first}, {o}"), ocs)

                self._tiled(group_out, OUT_CHANNELS, tile)

            def channel_tile(x_g: str, o: str, ocs: int) -> None:
                w_o = self.pointer("%w", self.value(f"mul i64 {o}, {self.channels * window}"))
                out_o = self.pointer(out_n, self.value(f"mul i64 {o}, {self.out_h * self.out_w}"))

                def row_tile(oh: str, rows: int) -> None:
                    x_r = self.pointer(x_g, self.value(f"mul i64 {oh}, {self.row}"))
                    out_r = self.pointer(out_o, self.value(f"mul i64 {oh}, {self.out_w}"))

                    def column_group(g: str, vectors: int, lanes: int) -> None:
                        column = self.value(f"mul i64 {g}, {self.group * VECTOR}")
                        tile = (ocs, rows, vectors, lanes)
                        self.tiles.add(tile)
                        out_tile = self.pointer(out_r, column)
                        epilogue = tile_epilogue.arguments(self, self.epilogue, o, out_tile)
                        arguments = f"ptr {self.pointer(x_r, column)}, ptr {w_o}{epilogue}, ptr {out_tile}"
                        self.emit(f"  call void {self._tile_name(*tile)}({arguments})")

                    self.loop(self.groups - 1, lambda g: column_group(g, self.group, VECTOR))
                    last_vectors = self.chunks - (self.groups - 1) * self.group
                    column_group(str(self.groups - 1), last_vectors, self.out_w - (self.chunks - 1) * VECTOR)

                rows = self.end_row - self.first_row
                self._tiled(rows, self.tile_rows, lambda i, size: row_tile(self.value(f"add i64 {i}, {self.first_row}"), size))

            self.loop(self.conv_groups, conv_group)

        self.loop(self.batch, image)
        self.end()

    def _tiled(self, total: int, step: int, body: Callable[[str, int], None]) -> None:
        """body(start, size) for tiles of `step` covering range(total): a loop, then the rest."""
        self.loop(total // step, lambda i: body(self.value(f"mul i64 {i}, {step}"), step))
        if total % step:
            body(str(total // step * step), total % step)

