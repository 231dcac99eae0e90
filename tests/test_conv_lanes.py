"""The conv ukernel with output channels on the lanes (`conv_lanes`): f32 conv2d groups compiled on the cpu
backend, against the interpreter; its packing of w and the cpu schedule's rule for it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv_channel_split import compiled_calls
from test_conv_epilogues import TAILS, conv_module, epilogue_of, inputs
from test_direct_conv import check_compiled, conv_layer
from test_graph_to_linalg import sample
from test_packed_gemm import kernels
from xdsl.dialects import func

from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.lowering import conv_lanes, tile_epilogue, ukernels
from graphopt.lowering.linalg import schedule
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.lowering.llvm_text import host_has_avx512
from graphopt.lowering.pipelines import CPU
from graphopt.runtime import jit

RULE = CpuSchedule.lanes_conv
"""The cpu schedule's own choice (the fixture widens it)."""


@pytest.fixture(autouse=True)
def lanes_whenever_it_applies(monkeypatch):
    """These are the ukernel's tests: it takes every conv it can run (`conv_lanes.applies`),
    also the 1x1s and the output channels that are not a multiple of 16 that the schedule gives
    to the GEMM or the direct ukernel, and the 3x3s that it gives to `conv_winograd`."""
    monkeypatch.setattr(CpuSchedule, "winograd_conv", lambda self, op: False)
    monkeypatch.setattr(
        CpuSchedule,
        "lanes_conv",
        lambda self, op: conv_lanes.applies(op.x.type, op.w.type, op.result.type, op.get("groups")),
    )


TILES = {"avx512_tile": conv_lanes.AVX512_TILE, "avx2_tile": conv_lanes.AVX2_TILE}
TILE_NAMES = (
    "BLOCKS", "POSITIONS", "FEWEST_POSITIONS", "MAX_UNROLLED_TILES", "ROW_REGISTERS", "MAX_ROW_TAP_TILES",
    "MAX_WIDE_WINDOW_TILES",
)
"""The module constants a register tile sets, in its order (`conv_lanes.register_tile`)."""


@pytest.fixture(params=TILES.values(), ids=TILES.keys())
def tile(request, monkeypatch):
    """The ukernel built with each register tile, whatever this CPU's (`register_tile`); the
    kernel caches, keyed by the CPU and not by the tile, are off."""
    for attribute, value in zip(TILE_NAMES, request.param, strict=True):
        monkeypatch.setattr(conv_lanes, attribute, value)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    return request.param


def lanes_calls(module) -> list[func.CallOp]:
    """The calls of the lanes ukernel after fuse and convert-graph-to-linalg."""
    calls = [op for kernel in kernels(module) for op in kernel.walk() if isinstance(op, func.CallOp)]
    return [op for op in calls if op.callee.string_value().startswith(f"{conv_lanes.PREFIX}_")]


@pytest.mark.parametrize("kernel_w", [1, 3, 7])
def test_tiles_fit_the_rows(tile, kernel_w):
    """The AVX2 tile's 3x3s take tiles of 4 (a row of taps per step) in the odd rows of two or
    more of them and where 4 divides the row, its 1x1s the most positions; its 7x7s (one tap per
    step) tiles of 6 wherever a super-tile of at most 56 tiles holds them (not rows of 224); rows of
    17 fit no tile. The AVX-512 tile: the same sizes for every window."""
    widths = (224, 112, 56, 28, 14, 7, 1, 13, 27, 50, 55, 17)
    fitting = {
        (conv_lanes.AVX512_TILE, 1): [14, 14, 14, 14, 14, 14, 14, 13, 12, 10, 11, None],
        (conv_lanes.AVX512_TILE, 3): [14, 14, 14, 14, 14, 14, 14, 13, 12, 10, 11, None],
        (conv_lanes.AVX512_TILE, 7): [14, 14, 14, 14, 14, 14, 14, 13, 12, 10, 11, None],
        (conv_lanes.AVX2_TILE, 1): [4, 4, 4, 4, 6, 6, 6, 6, 6, 5, 5, None],
        (conv_lanes.AVX2_TILE, 3): [4, 4, 4, 4, 6, 6, 6, 4, 4, 5, 4, None],
        (conv_lanes.AVX2_TILE, 7): [4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, None],
    }
    assert [conv_lanes.positions(w, kernel_w) for w in widths] == fitting[tile, kernel_w]


def test_a_step_takes_a_row_of_taps_where_the_registers_hold_it(tile):
    """AVX2's tile of 16 channels: the 3 weight, 4 accumulator and a broadcast vectors of a
    row of 3 taps fit its 16 registers of 8 floats, not with 6 positions or 7 taps."""
    windows_and_positions = ((3, 4), (3, 1), (3, 6), (7, 4), (5, 3))
    taps = {conv_lanes.AVX512_TILE: [1, 1, 1, 1, 1], conv_lanes.AVX2_TILE: [3, 3, 1, 1, 1]}
    assert [conv_lanes.taps_per_step(kernel_w, p) for kernel_w, p in windows_and_positions] == taps[tile]


def test_register_tile_by_cpu():
    assert conv_lanes.register_tile(avx512=True) == conv_lanes.AVX512_TILE
    assert conv_lanes.register_tile(avx512=False) == conv_lanes.AVX2_TILE
    assert (conv_lanes.BLOCKS, conv_lanes.POSITIONS) == conv_lanes.register_tile(host_has_avx512())[:2]


def test_pack_puts_16_output_channels_last_and_pads_with_zeros():
    w = sample((19, 3, 2, 5), specials=False)
    packed = conv_lanes.pack(w)
    assert packed.shape == conv_lanes.packed_shape(w.shape) == (2, 3, 2, 5, 16)
    o, c, kh, kw = 17, 2, 1, 3
    assert packed[o // 16, c, kh, kw, o % 16] == w[o, c, kh, kw]
    assert not packed[1, :, :, :, 3:].any()


CONVOLUTIONS = [
    # x, w, strides, dilations, padding
    # ResNet's 3x3 at 14x14 (a tile of 14 positions is one output row), 32 channels: one tile
    ((1, 16, 14, 14), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # rows of 10 (tiles cross rows at 4 places), 19 channels: a partial block of 3
    ((3, 8, 9, 10), (19, 8, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # 40 channels: a tile of 2 blocks, then one of 8 channels; stride 2, odd padding
    ((1, 12, 15, 21), (40, 12, 3, 3), (2, 2), (1, 1), (0, 1, 1, 0)),
    # one input channel (the schedule gives it to the depthwise ukernel)
    ((1, 1, 12, 14), (16, 1, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # a stem: 3 input channels, 7x7 stride 2
    ((1, 3, 23, 23), (16, 3, 7, 7), (2, 2), (1, 1), (3, 3, 3, 3)),
    # dilations, taps in other stride phases, strides (2, 1)
    ((2, 6, 13, 14), (16, 6, 3, 2), (2, 1), (2, 3), (0, 1, 2, 0)),
    # 7 output positions (one partial tile), 1 position, 1x1 window
    ((1, 32, 7, 3), (48, 32, 3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((2, 20, 3, 3), (16, 20, 3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 24, 5, 6), (33, 24, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),  # x read in place
    ((2, 24, 5, 6), (16, 24, 1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),
    # squeeze-and-excite's matrix-vector 1x1s: one position, 37 -> 96 and 96 -> 16 channels
    ((1, 37, 1, 1), (96, 37, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 96, 1, 1), (16, 96, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    # 50 positions of rows of 10: 3 tiles and a rest of 8
    ((1, 9, 5, 10), (16, 9, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # rows of 28: a loop over 2 tiles of 14 in each row; rows of 27: tiles of 12 (`positions`)
    ((2, 4, 4, 28), (32, 4, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((1, 5, 6, 29), (16, 5, 3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),
    # rows of 28 at stride 2 and at dilation 2: the AVX2 tile's steps over a row of 3 taps
    # (`taps_per_step`), whose x values, in two stride phases, are not in the taps' order
    ((1, 5, 7, 56), (16, 5, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 3, 6, 32), (16, 3, 3, 3), (1, 1), (2, 2), (0, 0, 0, 0)),
    # rows of 13 (SqueezeNet's): tiles of 13, or of 4 (AVX2) in super-tiles of 4 rows and a rest of 13
    ((1, 4, 13, 13), (32, 4, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # rows of 55 and 27 (SqueezeNet's): AVX2 tiles of 4 crossing rows, in a super-tile of 4 rows
    # and a rest of 55 (13 tiles and one of 3); one row of 27 (6 tiles and one of 3)
    ((1, 3, 5, 55), (16, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 5, 1, 27), (16, 5, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
]


TILE_AND_THREADS = pytest.mark.parametrize(
    "tile, threads",
    [(TILES["avx512_tile"], 1), (TILES["avx2_tile"], 1), (TILES["avx2_tile"], 2)],
    ids=["avx512_tile-1", "avx2_tile-1", "avx2_tile-2"],
    indirect=["tile"],
)
"""Both tiles at 1 thread, and the AVX2 tile at 2 (the suite's time); the AVX-512 tile's split
by channel blocks at 2 threads is `test_one_image_splits_by_blocks_of_output_channels`'s."""


@TILE_AND_THREADS
@pytest.mark.parametrize("x_shape, w_shape, strides, dilations, padding", CONVOLUTIONS)
def test_conv_matches_interpreter(x_shape, w_shape, strides, dilations, padding, threads, tile):
    module = conv_layer(x_shape, sample(w_shape, seed=1, specials=False), strides, dilations, padding)
    (call,) = lanes_calls(module)
    assert call.arguments[1].type.get_shape() == conv_lanes.packed_shape(w_shape)
    check_compiled(module, sample(x_shape, specials=False), threads=threads)


@pytest.mark.parametrize("specials_in", ["x", "w"])
def test_nan_inf_and_signed_zeros_match_interpreter(specials_in, tile):
    """NaN, inf and signed zeros reach only the outputs whose window holds them (the padding
    reads zeros of the phases, the packed w's padding channels are never stored)."""
    x_shape, w_shape = (2, 8, 7, 9), (24, 8, 3, 3)
    module = conv_layer(x_shape, sample(w_shape, seed=1, specials=specials_in == "w"), padding=(1, 1, 1, 1))
    assert len(lanes_calls(module)) == 1
    check_compiled(module, sample(x_shape, specials=specials_in == "x"))


@TILE_AND_THREADS
@pytest.mark.parametrize("tail", TAILS)
def test_tails_run_in_the_ukernel_and_match_interpreter(tail, threads, tile):
    """Each tail of test_conv_epilogues.py (bias, batch norm, relu, clip, SiLU, hardswish, the
    residual add) is the ukernel's epilogue, on 19 output channels, NaN and inf in x."""
    module, _ = conv_module(TAILS[tail], x_shape=(3, 5, 9, 11))
    assert len(lanes_calls(module)) == 1 and epilogue_of(module)
    check_compiled(module, *inputs(module), threads=threads)


@pytest.mark.parametrize("tail", ["batch_norm residual relu", "batch_norm silu residual"])
def test_one_image_splits_by_blocks_of_output_channels(monkeypatch, tail, tile):
    """At 2 threads one image runs as two chunks of 32 output channels, each one or two tiles
    (w's packed blocks, the per-channel operands and the residual sliced as out)."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    monkeypatch.setattr("test_conv_epilogues.CHANNELS", 64)
    module, _ = conv_module(TAILS[tail], x_shape=(1, 5, 9, 12))
    (call,) = lanes_calls(module)
    assert call.arguments[1].type.get_shape() == (4, 5, 3, 3, 16)
    steps = check_compiled(module, *inputs(module), threads=2).steps
    assert len(next(step for step in steps if "conv2d" in step.name).kernel.chunks) == 2


def x_reads(tile_text: str) -> list[int]:
    """The offsets of the x values a tile function's step reads, from its first tap's."""
    return sorted(int(o) for o in re.findall(r"%x\.\d+\.at = getelementptr float, ptr %x\.t, i64 (\d+)", tile_text))


def prefetched(tile_text: str) -> list[int]:
    """The offsets of the x values a tile function's step prefetches (in the channel ahead)."""
    return sorted(int(o) for o in re.findall(r"%ahead\.\d+ = getelementptr float, ptr %ahead\.x, i64 (\d+)", tile_text))


def ends_of_runs(reads: list[int]) -> list[int]:
    """The first and the last offset of each run of `reads` (sorted) whose neighbours are less than 16 floats apart."""
    runs = [[reads[0]]]
    for offset in reads[1:]:
        if offset - runs[-1][-1] < 16:
            runs[-1].append(offset)
        else:
            runs.append([offset])
    return sorted({end for run in runs for end in (run[0], run[-1])})


@pytest.mark.parametrize("prefetch, strided", [(True, False), (False, True), (False, False)])
def test_steps_prefetch_the_next_input_channels_x(monkeypatch, prefetch, strided, tile):
    """A stride-2 row of 3 taps over 4 positions reads 5 + 4 x values in two stride phases: a
    prefetch of the first and the last of each (the lines they lie on), one input channel (4
    phases of 16 x 9 + 5 floats) ahead, and in the last of
    the 20 input channels, that channel's own (never past x's end: a prefetch into an unmapped page
    is slow), with PREFETCH (every conv) or PREFETCH_STRIDED (the strided ones); the results are
    the interpreter's either way."""
    monkeypatch.setattr(conv_lanes, "PREFETCH", prefetch)
    monkeypatch.setattr(conv_lanes, "PREFETCH_STRIDED", strided)
    module = conv_layer((1, 20, 32, 16), sample((16, 20, 3, 3), seed=1, specials=False), (2, 2), (1, 1), (1, 1, 1, 1))
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    _, _, sh, sw, length = call.arguments[0].type.get_shape()
    ahead = [line.split()[-1] for line in ukernel.splitlines() if re.match(r"\s*%ahead\.\d+ = getelementptr", line)]
    if not (prefetch or strided):
        assert ahead == []
    else:
        assert f"%ahead.last = icmp uge i64 %u, {19 * 9}" in ukernel
        assert f"%ahead.channel = select i1 %ahead.last, i64 0, i64 {sh * sw * length}" in ukernel
        assert ahead and all(0 <= int(offset) < sh * sw * length for offset in ahead)
        for text in re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S):
            assert prefetched(text) == ends_of_runs(x_reads(text))
    check_compiled(module, sample((1, 20, 32, 16), specials=False))


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("prefetch_1x1", [True, False])
@pytest.mark.parametrize("window", [3, 1])
def test_stride_1_prefetches_with_prefetch_or_as_a_1x1(monkeypatch, prefetch, prefetch_1x1, window, tile):
    """PREFETCH_STRIDED leaves the convs of stride 1 to PREFETCH and, for the 1x1s, PREFETCH_1X1: a
    3x3 of stride 1 prefetches x with PREFETCH alone, a 1x1 with either."""
    monkeypatch.setattr(conv_lanes, "PREFETCH", prefetch)
    monkeypatch.setattr(conv_lanes, "PREFETCH_STRIDED", True)
    monkeypatch.setattr(conv_lanes, "PREFETCH_1X1", prefetch_1x1)
    padding = (window // 2,) * 4
    module = conv_layer((1, 20, 16, 16), sample((16, 20, window, window), seed=1, specials=False), (1, 1), (1, 1), padding)
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    assert ("%ahead.channel = select" in ukernel) == (prefetch or (prefetch_1x1 and window == 1))
    check_compiled(module, sample((1, 20, 16, 16), specials=False))


@pytest.mark.parametrize("most_tiles, out_channels", [(0, 80), (64, 80), (64, 16)])
@pytest.mark.parametrize("threads", [1, 2])
def test_calls_of_few_position_tiles_prefetch_the_next_channels_weights(monkeypatch, most_tiles, out_channels, threads, tile):
    """80 output channels (5 blocks of 16: whole tiles of channels and a last, smaller one) over
    7 x 7 positions: where a tile of channels takes at most PREFETCH_NEXT_WEIGHTS_TILES tiles of
    positions, each tile's step prefetches one line of each block of the next tile's weights into
    L2, the line of step (index x U + u) // K of the call's K tiles, and each call passes the tile
    its index; else no tile does, nor does a call of 16 channels (one tile of channels, no next
    one). The interpreter's results either way, at 1 and 2 threads."""
    monkeypatch.setattr(conv_lanes, "PREFETCH_NEXT_WEIGHTS_TILES", most_tiles)
    w = sample((out_channels, 24, 3, 3), seed=1, specials=False)
    module = conv_layer((1, 24, 7, 7), w, (1, 1), (1, 1), (1, 1, 1, 1))
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    # tiles of 14 (3, then one of 7), or of 6 (7 in a super-tile of 6 rows, then 4 and 3)
    position_tiles = {conv_lanes.AVX512_TILE: 4, conv_lanes.AVX2_TILE: 9}[tile]
    tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
    weight_prefetches = [re.findall(r"prefetch\.p0\(ptr %w\.next\.\d+\.\d+, i32 0, i32 2, i32 1\)", t) for t in tiles]
    if most_tiles == 0 or out_channels <= conv_lanes.BLOCKS * 16:
        assert "%w.next" not in ukernel
    else:
        assert f"%w.next.first = mul i64 %index, {24 * 9}" in ukernel
        assert f"%w.next.line = udiv i64 %w.next.step, {position_tiles}" in ukernel
        taps = [conv_lanes.taps_per_step(3, len(re.findall(r"%acc\.0\.\d+ = phi", t))) for t in tiles]
        blocks = [len(re.findall(r"%acc\.\d+\.0 = phi", t)) for t in tiles]
        assert [len(p) for p in weight_prefetches] == [b * t for b, t in zip(blocks, taps, strict=True)]
    check_compiled(module, sample((1, 24, 7, 7), specials=False), threads=threads)


@pytest.mark.parametrize("channels", [40, 5])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("prefetch, prefetch_1x1", [(True, False), (False, True)])
def test_1x1_steps_prefetch_both_lines_of_x_channels_ahead(monkeypatch, channels, threads, prefetch, prefetch_1x1, tile):
    """A 1x1's step prefetches the x of the input channel PREFETCH_CHANNELS_1X1 on (all but one
    of 5 channels), the first and the last position of its run (a run of 6 at rows of 7 crosses
    lines); in the last channels, their own. 2 images of 5 x 7 (tiles that cross rows, a last
    short tile), 32 output channels, bias, residual and relu in the tile, NaN and inf in x and the
    residual, 1 and 2 threads, with PREFETCH or PREFETCH_1X1: the interpreter's results."""
    monkeypatch.setattr(conv_lanes, "PREFETCH", prefetch)
    monkeypatch.setattr(conv_lanes, "PREFETCH_1X1", prefetch_1x1)
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape, out_shape = (2, channels, 5, 7), (2, 32, 5, 7)
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((32, channels, 1, 1), seed=1, specials=False)))
    biased = g.add(y, g.constant(sample((32, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", out_shape))))
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    ahead = min(conv_lanes.PREFETCH_CHANNELS_1X1, channels - 1)
    assert f"%ahead.last = icmp uge i64 %u, {channels - ahead}" in ukernel
    assert f"%ahead.channel = select i1 %ahead.last, i64 0, i64 {ahead * 35}" in ukernel
    tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
    for text in tiles:
        reads = x_reads(text)
        assert reads == list(range(len(reads))) and prefetched(text) == sorted({0, len(reads) - 1})
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 20, 50]] = [np.nan, np.inf, -np.inf]
    residual = sample(out_shape, seed=2, specials=False)
    residual.reshape(-1)[[3, 100]] = [np.inf, np.nan]
    check_compiled(module, x, residual, threads=threads)


@settings(max_examples=60, deadline=None)
@given(rest=st.integers(1, 300), size=st.integers(1, 14))
def test_positions_after_the_last_super_tile_take_the_fewest_tiles_of_even_sizes(rest, size):
    """`rest_tiles`: as many tiles as tiles of `size` need, each at most `size`, sizes at most one apart."""
    counts = conv_lanes.rest_tiles(rest, size)
    assert sum(counts) == rest and len(counts) == -(-rest // size)
    assert max(counts) <= size and max(counts) - min(counts) <= 1


@pytest.mark.parametrize("threads", [1, 2])
def test_rest_of_7x7_runs_as_tiles_of_4_and_3(monkeypatch, threads, tile):
    """A 1x1 at 7 x 7 outputs: with AVX2_TILE a super-tile of 42 positions in tiles of 6, then 7
    positions as tiles of 4 and 3 (not 6 and 1, whose one-position steps wait on their FMAs'
    latency); with AVX512_TILE tiles of 14 and one of 7. 2 images, 24 output channels (a partial
    block), bias, residual and relu in the last tile, NaN and inf in x and the residual, 1 and 2
    threads: the interpreter's results."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape, out_shape = (2, 20, 7, 7), (2, 24, 7, 7)
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((24, 20, 1, 1), seed=1, specials=False)))
    biased = g.add(y, g.constant(sample((24, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", out_shape))))
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
    sizes = {conv_lanes.AVX2_TILE: {6, 4, 3}, conv_lanes.AVX512_TILE: {14, 7}}
    assert {len(x_reads(text)) for text in tiles} == sizes[tile]
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 48, 60]] = [np.nan, np.inf, -np.inf]
    residual = sample(out_shape, seed=2, specials=False)
    residual.reshape(-1)[[45, 1000]] = [np.inf, np.nan]
    check_compiled(module, x, residual, threads=threads)


def test_rows_whose_super_tile_is_too_long_keep_the_other_ukernels(tile):
    """Rows of 17 outputs: no tile of either range of positions divides them, and every
    super-tile lcm(P, 17) is 17 tiles, over MAX_UNROLLED_TILES."""
    assert lanes_calls(conv_layer((1, 8, 3, 19), sample((16, 8, 3, 3), specials=False))) == []


def taken(x_shape, w_shape, strides=(1, 1), groups=1):
    """Whether the cpu schedule's own rule gives the conv to the lanes ukernel."""
    module = conv_layer(x_shape, sample(w_shape, specials=False), strides, groups=groups)
    (conv,) = (op for op in module.walk() if isinstance(op, graph.Conv2dOp))
    return RULE(CpuSchedule(), conv)


def test_schedule_takes_nearly_full_blocks_of_output_channels_and_small_1x1s(monkeypatch):
    monkeypatch.setattr(schedule, "host_has_avx512", lambda: True)
    assert taken((1, 64, 58, 58), (64, 64, 3, 3))
    assert taken((1, 3, 229, 229), (64, 3, 7, 7), strides=(2, 2))  # without AVX-512 the GEMM (test_conv_gemm)
    assert taken((1, 512, 9, 9), (512, 512, 3, 3))
    assert taken((1, 1024, 14, 14), (256, 1024, 1, 1))  # x read in place
    assert taken((1, 512, 28, 28), (1024, 512, 1, 1), strides=(2, 2))
    assert not taken((1, 64, 56, 56), (256, 64, 1, 1))  # 1x1s at 56, 28 and 7: the GEMM
    assert not taken((1, 2048, 7, 7), (512, 2048, 1, 1))
    assert taken((1, 48, 1, 1), (1152, 48, 1, 1))  # squeeze-and-excite's 1x1s at one position
    assert not taken((1, 48, 2, 2), (1152, 48, 1, 1))
    assert not taken((1, 3, 58, 58), (24, 3, 3, 3))  # 24 output channels: 8 idle lanes
    assert taken((1, 512, 13, 13), (1000, 512, 1, 1))  # SqueezeNet's last conv: 8 of 1008 idle
    assert not taken((1, 32, 10, 10), (32, 16, 3, 3), groups=2)
    assert not taken((1, 1, 28, 28), (16, 1, 3, 3))  # one input channel: the depthwise ukernel


def test_without_avx512_the_schedule_takes_1x1s_up_to_14x14(monkeypatch):
    """There the conv GEMM's tiles of 16 columns leave a tile of one column at 7x7 outputs."""
    monkeypatch.setattr(schedule, "host_has_avx512", lambda: False)
    assert taken((1, 2048, 7, 7), (512, 2048, 1, 1))
    assert taken((1, 1024, 14, 14), (2048, 1024, 1, 1), strides=(2, 2))
    assert taken((1, 48, 2, 2), (1152, 48, 1, 1))
    assert taken((1, 1024, 14, 14), (256, 1024, 1, 1))
    assert not taken((1, 64, 56, 56), (256, 64, 1, 1))  # 1x1s at 56 and 28: the GEMM
    assert not taken((1, 512, 28, 28), (128, 512, 1, 1))
    assert not taken((1, 1024, 7, 7), (24, 1024, 1, 1))  # 8 idle lanes


@pytest.mark.parametrize("x_shape, strides", [((1, 37, 7, 7), (1, 1)), ((1, 37, 13, 13), (2, 2)), ((2, 21, 5, 3), (1, 1))])
@pytest.mark.parametrize("threads", [1, 2])
def test_without_avx512_small_1x1s_with_residual_match_interpreter(monkeypatch, x_shape, strides, threads):
    """The schedule's own rule without AVX-512: 1x1s at 7x7 (stride 1 and 2) and 5x3 outputs,
    32 output channels, bias, residual and relu in the tile, NaN and inf in x and the residual."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", RULE)
    monkeypatch.setattr(schedule, "host_has_avx512", lambda: False)
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((32, x_shape[1], 1, 1), seed=1, specials=False)), strides=strides)
    out_shape = [s.data for s in y.type.shape]
    biased = g.add(y, g.constant(sample((32, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", out_shape))))
    assert len(lanes_calls(module)) == 1 and epilogue_of(module)
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 20, 50]] = [np.nan, np.inf, -np.inf]
    check_compiled(module, x, sample(out_shape, seed=2), threads=threads)


def test_runtime_weights_keep_the_direct_ukernel():
    """w an input (not packed at compile time): the direct ukernel, as before."""
    x_shape, w_shape = (1, 8, 8, 19), (16, 8, 3, 3)
    w = sample(w_shape, seed=1, specials=False)
    module = conv_layer(x_shape, w, padding=(1, 1, 1, 1), w_is_input=True)
    assert lanes_calls(module) == []
    check_compiled(module, sample(x_shape), w)


def test_1x1_of_stride_1_reads_x_in_place():
    x_shape = (2, 32, 7, 9)
    module = conv_layer(x_shape, sample((16, 32, 1, 1), specials=False))
    (call,) = lanes_calls(module)
    assert call.arguments[0].type.get_shape() == x_shape
    check_compiled(module, sample(x_shape), threads=2)


@pytest.mark.parametrize("x_shape, strides, out_shape", [((1, 24, 9, 11), (2, 3), (5, 4)), ((1, 6, 60, 31), (2, 2), (30, 16))])
@pytest.mark.parametrize("threads", [1, 2])
def test_1x1_of_larger_strides_copies_the_one_phase_it_reads(monkeypatch, x_shape, strides, out_shape, threads):
    """A 1x1 of strides (2, 3) or 2 without padding reads x at (i sh, j sw) only: the conv copies
    those positions into the phases of a 1x1 of stride 1 on rows of OW ([N, C, 1, 1, OH * OW],
    `conv._subsampled`), not all sh * sw phases of x. At 2 threads the second conv, whose x
    outweighs its w, splits by output rows, each chunk copying its rows only. NaN and inf in x:
    the interpreter's results."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    module = conv_layer(x_shape, sample((40, x_shape[1], 1, 1), seed=1, specials=False), strides)
    (call,) = lanes_calls(module)
    assert call.arguments[0].type.get_shape() == (1, x_shape[1], 1, 1, out_shape[0] * out_shape[1])
    assert f"_r{out_shape[1]}_" in call.callee.string_value()
    if threads == 1:
        check_compiled(module, sample(x_shape), threads=1)
        return
    _, calls = compiled_calls(monkeypatch, module, sample(x_shape))
    assert any("_oh" in kernel for kernel in calls) == (x_shape[2] == 60)


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_tiles_prefetch_the_next_line_of_their_channels_out_and_residual(monkeypatch, prefetch, threads, tile):
    """A 1x1 to 20 output channels (tiles of 16 and 4; of 32, 20 valid, with AVX512_TILE) at 7 x 9 = 63 positions with a residual:
    each tile prefetches, for each of its channels, the line 16 floats past its first position,
    of out for writing and of the residual for reading; from position 47 on, its own line (ahead
    0), so that no prefetch passes its channel's last position, nor out's or the residual's end.
    None with `tile_epilogue.PREFETCH` off. NaN and inf in x, 1 and 2 threads."""
    monkeypatch.setattr(tile_epilogue, "PREFETCH", prefetch)
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape = (1, 21, 7, 9)
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((20, 21, 1, 1), seed=1, specials=False)))
    biased = g.add(y, g.constant(sample((20, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", (1, 20, 7, 9)))))
    (call,) = lanes_calls(module)
    ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
    tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
    writes = [t.count("i32 1, i32 3, i32 1)") for t in tiles]
    reads = [len(re.findall(r"prefetch\.p0\(ptr %v\d+, i32 0, i32 3, i32 1\)", t)) for t in tiles]
    if not prefetch:
        assert writes == reads == [0] * len(tiles)
    else:
        per_tile = conv_lanes.BLOCKS * 16
        assert set(writes) == {min(per_tile, 20 - first) for first in range(0, 20, per_tile)} and reads == writes
        inside = set(re.findall(r"(%v\d+) = icmp ult i64 %v\d+, 47\n", ukernel))
        aheads = re.findall(r"= select i1 (%v\d+), i64 (\d+), i64 0\n", ukernel)
        assert aheads and {ahead for _, ahead in aheads} == {"16"} and {c for c, _ in aheads} <= inside
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 20, 50]] = [np.nan, np.inf, -np.inf]
    check_compiled(module, x, sample((1, 20, 7, 9), seed=2), threads=threads)


def stored_lanes(tile_text: str) -> tuple[int, int]:
    """A tile function's positions (accumulators per block) and the floats it stores per channel:
    the plain vector's size (`store_first`), else its positions (under a mask)."""
    positions = len(re.findall(r"%acc\.0\.\d+ = phi", tile_text))
    plain = set(re.findall(r"store <(\d+) x float>", tile_text))
    assert len(plain) <= 1 and (not plain or "masked.store" not in tile_text)
    return positions, int(plain.pop()) if plain else positions


@pytest.mark.parametrize(
    ("size", "kernel", "overlapping"),
    [
        # rows of 14: the loop's tiles of 6 and the rest's 6, 6, 6, 5 go on 8 positions or more, not the last 5
        (14, 1, {(6, 8), (5, 8), (5, 5)}),
        # 13 x 13: 2 super-tiles of 78, then 5 (8 stored), 4 and 4 (plain 4: PLAIN_STORE_LANES)
        (13, 1, {(6, 8), (5, 8), (4, 4)}),
        # 7 x 7: the super-tile of 42 (its last tile ends 7 before the row's end), then 4 and 3
        (7, 3, {(6, 8), (4, 4), (3, 3)}),
        # 6 x 6: a tile per row, the last row's in the same loop: all under the mask
        (6, 1, {(6, 6)}),
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_tiles_followed_in_their_rows_store_8_floats_plainly(monkeypatch, size, kernel, overlapping, threads):
    """AVX2_TILE: tiles of 5 and 6 positions that later tiles of the call follow by 8 positions or
    more in their channels' rows read the residual and store 8 floats, plain (the 2-3 past the tile
    rewritten by the later tiles), the rows' last tiles under the mask; with OVERLAP_STORE_LANES 0
    every tile of 5-6 under the mask. 2 images, 40 output channels (a partial block; at 2 threads
    split by blocks of 16), bias, residual and relu in the tile, NaN and inf in x and the residual
    (also past a tile's positions): the interpreter's results."""
    for attribute, value in zip(TILE_NAMES, conv_lanes.AVX2_TILE, strict=True):
        monkeypatch.setattr(conv_lanes, attribute, value)
    monkeypatch.setattr(conv_lanes, "PLAIN_STORE_LANES", 4)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape, out_shape = (2, 12, size, size), (2, 40, size, size)
    g = GraphBuilder()
    pad = kernel // 2
    w = g.constant(sample((40, 12, kernel, kernel), seed=1, specials=False))
    y = g.conv2d(g.input("x", x_shape), w, padding=(pad,) * 4)
    biased = g.add(y, g.constant(sample((40, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", out_shape))))
    (call,) = lanes_calls(module)
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 20, 50]] = [np.nan, np.inf, -np.inf]
    residual = sample(out_shape, seed=2, specials=False)
    residual.reshape(-1)[[6, 7, 100, size * size - 1]] = [np.inf, np.nan, -np.inf, np.nan]
    for lanes, expected in ((8, overlapping), (0, {(p, p) for p, _ in overlapping})):
        monkeypatch.setattr(conv_lanes, "OVERLAP_STORE_LANES", lanes)
        monkeypatch.setattr(jit, "_cache", {})
        ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
        tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
        assert {stored_lanes(text) for text in tiles} == expected
        check_compiled(module, x, residual, threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_wide_windows_take_tiles_of_6_across_rows(monkeypatch, threads):
    """AVX2_TILE, a 7x7/2 stem-like conv (3 input channels, pad 3) with rows of 28: tiles of 6
    in super-tiles of 3 rows (14 tiles, more than MAX_UNROLLED_TILES), tiles that cross rows,
    then the last row as tiles of 6, 6, 6, 5, 5; with MAX_WIDE_WINDOW_TILES at MAX_UNROLLED_TILES,
    tiles of 4 (the rule before). 2 images of 13 x 55, 24 output channels (a partial block), bias
    and relu in the tile, NaN and inf in x, 1 and 2 threads: the interpreter's results."""
    for attribute, value in zip(TILE_NAMES, conv_lanes.AVX2_TILE, strict=True):
        monkeypatch.setattr(conv_lanes, attribute, value)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape = (2, 3, 13, 55)
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((24, 3, 7, 7), seed=1, specials=False)), strides=(2, 2),
                 padding=(3, 3, 3, 3))
    module = g.finish(g.relu(g.add(y, g.constant(sample((24, 1, 1), seed=3, specials=False)))))
    (call,) = lanes_calls(module)
    assert call.arguments[-1].type.get_shape() == (2, 24, 7, 28)
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 300, 2000]] = [np.nan, np.inf, -np.inf]
    for most_tiles, sizes in ((conv_lanes.AVX2_TILE[-1], {6, 5}), (conv_lanes.MAX_UNROLLED_TILES, {4})):
        monkeypatch.setattr(conv_lanes, "MAX_WIDE_WINDOW_TILES", most_tiles)
        monkeypatch.setattr(jit, "_cache", {})
        ukernel = conv_lanes.ukernel_ir(call.callee.string_value(), [a.type for a in call.arguments])
        tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
        assert {stored_lanes(text)[0] for text in tiles} == sizes
        check_compiled(module, x, threads=threads)


@pytest.mark.parametrize(
    "x_shape, strides, chunk_rows",
    [
        # out 9 x 14: AVX-512 tiles of 14 (a row a super-tile): 5 + 4 rows; AVX2 tiles of 6 in super-tiles of 3 rows: 6 + 3
        ((1, 6, 9, 14), (1, 1), {"avx512_tile": ((0, 5), (5, 9)), "avx2_tile": ((0, 6), (6, 9))}),
        # stride 2, out 8 x 14: 4 + 4 rows; AVX2 6 + 2 (the second chunk's rows are the rest's tiles)
        ((1, 5, 15, 27), (2, 2), {"avx512_tile": ((0, 4), (4, 8)), "avx2_tile": ((0, 6), (6, 8))}),
        # out 7 x 7: AVX-512 tiles of 14 cross rows, super-tiles of 2 rows: 4 + 3 rows
        ((1, 6, 7, 7), (1, 1), {"avx512_tile": ((0, 4), (4, 7))}),
    ],
)
def test_one_tile_of_channels_splits_by_output_rows(monkeypatch, x_shape, strides, chunk_rows, tile):
    """At 2 threads a conv of one image and one register tile of output channels (BLOCKS blocks
    of 16; here 8 fewer, a partial block) runs as two chunks of output rows starting at a multiple
    of a super-tile's rows (`conv_lanes.super_tile_rows`): each a function of its own calling the
    ukernel for its rows (`_oh<first>to<end>`) on all of w, its phases of its rows of x, the bias,
    residual and out. Bias, residual and relu in the tile, NaN and inf in x and the residual:
    the interpreter's results. Where the rows are fewer than two super-tiles, one chunk (whole)."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    out_channels = conv_lanes.BLOCKS * 16 - 8
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((out_channels, x_shape[1], 3, 3), seed=1, specials=False)),
                 strides=strides, padding=(1, 1, 1, 1))
    out_shape = tuple(y.type.get_shape())
    biased = g.add(y, g.constant(sample((out_channels, 1, 1), seed=3, specials=False)))
    module = g.finish(g.relu(g.add(biased, g.input("r", out_shape))))
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 40, 77]] = [np.nan, np.inf, -np.inf]
    residual = sample(out_shape, seed=2, specials=False)
    residual.reshape(-1)[[5, 60, out_shape[-1] * out_shape[-2] - 1]] = [np.inf, np.nan, -np.inf]
    _, calls = compiled_calls(monkeypatch, module, x, residual)
    expected = chunk_rows.get(next(name for name, value in TILES.items() if value == tile))
    chunked = sorted(callee for kernel, callee in calls.items() if "_oh" in kernel)
    if expected is None:
        assert not chunked
    else:
        assert [re.search(r"_oh(\d+)to(\d+)$", callee).groups() for callee in chunked] == [tuple(map(str, r)) for r in expected]


@pytest.mark.parametrize("x_shape, by_rows", [((1, 2, 60, 14), True), ((1, 16, 6, 14), False)])
def test_more_tiles_of_channels_split_by_output_rows_where_x_outweighs_w(monkeypatch, tile, x_shape, by_rows):
    """At 2 threads a conv of two register tiles of output channels (the second partial) splits
    by output rows where its phases hold more floats than half its packed w (a chunk of rows
    reads its share of x and all of w, one of channels all of x and its share of w:
    `ukernels.LANES_ROW_SPLIT_X_OVER_W`), else by output channels (`_rows<N>` chunks). Bias and
    relu in the tile, NaN and inf in x: the interpreter's results."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    out_channels = 2 * conv_lanes.BLOCKS * 16 - 8
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample((out_channels, x_shape[1], 3, 3), seed=1, specials=False)),
                 padding=(1, 1, 1, 1))
    module = g.finish(g.relu(g.add(y, g.constant(sample((out_channels, 1, 1), seed=3, specials=False)))))
    (call,) = lanes_calls(module)
    phases, packed_w = (math.prod(a.type.get_shape()) for a in call.arguments[:2])
    assert (phases > ukernels.LANES_ROW_SPLIT_X_OVER_W * packed_w) == by_rows  # the case's premise, either tile
    x = sample(x_shape, specials=False)
    x.reshape(-1)[[0, 40, 77]] = [np.nan, np.inf, -np.inf]
    _, calls = compiled_calls(monkeypatch, module, x)
    row_chunks = sorted(kernel for kernel in calls if "_oh" in kernel)
    channel_chunks = sorted(kernel for kernel in calls if "_rows" in kernel)
    assert (len(row_chunks), len(channel_chunks)) == ((2, 0) if by_rows else (0, 2))


def test_a_chunk_of_rows_stores_no_floats_into_the_next_chunks_rows(monkeypatch):
    """AVX2_TILE (tiles of 6 that store 8 floats plainly where later tiles of the call rewrite the
    2 past them, `OVERLAP_STORE_LANES`), rows of 14 (super-tiles of 3 rows), 16 output channels,
    2 threads: 12 rows in chunks of 6. The first chunk's last tile is followed by the second
    chunk's rows, which that chunk writes at the same time: it stores its 6 floats under the
    mask, as the second chunk's last tile does; their other tiles, 8 plainly. The interpreter's
    results."""
    for attribute, value in zip(TILE_NAMES, conv_lanes.AVX2_TILE, strict=True):
        monkeypatch.setattr(conv_lanes, attribute, value)
    monkeypatch.setattr(conv_lanes, "PLAIN_STORE_LANES", 4)
    monkeypatch.setattr(conv_lanes, "OVERLAP_STORE_LANES", 8)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    x_shape = (1, 4, 12, 14)
    module = conv_layer(x_shape, sample((16, 4, 3, 3), seed=1, specials=False), padding=(1, 1, 1, 1))
    (call,) = lanes_calls(module)
    _, calls = compiled_calls(monkeypatch, module, sample(x_shape, specials=False))
    chunks = sorted(callee for kernel, callee in calls.items() if "_oh" in kernel)
    assert [c.rsplit("_", 1)[1] for c in chunks] == ["oh0to6", "oh6to12"]
    for callee in chunks:
        ukernel = conv_lanes.ukernel_ir(callee, [a.type for a in call.arguments])
        tiles = re.findall(r"define internal void @\S+\.tile\d+\(.*?\n}", ukernel, re.S)
        assert {stored_lanes(text) for text in tiles} == {(6, 8), (6, 6)}
