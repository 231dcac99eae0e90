"""Convolutions of one image on two threads: chunks of output channels (`row_split.channel_split`),
or of output positions for few-channel 1x1s run as the GEMM, or of whole output rows for convs
run as the GEMM on an im2col copy (`row_split.position_split`),
against the interpreter; batches of several images keep their chunks of images."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_direct_conv import conv_layer, ukernel_convs
from test_graph_to_linalg import sample
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.linalg.ops import GenericOp

import graphopt
from graphopt.backends import cpu
from graphopt.builder import GraphBuilder
from graphopt.lowering import conv_lanes, conv_winograd, direct_conv, output_rows, packed_gemm, row_split, ukernels
from graphopt.lowering.convert_graph_to_linalg import ConvertGraphToLinalgPass
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.lowering.pipelines import CPU, parsed_pipeline
from graphopt.transforms.fuse import FusePass


def conv_block(x_shape, w_shape, strides=(1, 1), padding=(0, 0, 0, 0), groups=1, epilogue="bias"):
    """@main(x[, residual]) = conv2d(x, w) + bias, then relu ("bias_relu"), clip to [0, 6]
    ("bias_relu6") or + residual and relu ("residual_relu"); w and bias constants; the conv
    alone ("none")."""
    g = GraphBuilder()
    x = g.input("x", x_shape)
    w = g.constant(sample(w_shape, seed=1, specials=False))
    y = g.conv2d(x, w, strides=strides, padding=padding, groups=groups)
    if epilogue == "none":
        return g.finish(y)
    y = g.add(y, g.constant(sample((w_shape[0], 1, 1), seed=2, specials=False)))
    if epilogue == "bias_relu":
        y = g.relu(y)
    elif epilogue == "bias_relu6":
        y = g.clip(y, min=0.0, max=6.0)
    elif epilogue == "residual_relu":
        residual = g.input("residual", tuple(y.type.get_shape()))
        y = g.relu(g.add(y, residual))
    return g.finish(y)


def compiled_calls(monkeypatch, module, *arrays):
    """The module compiled at 2 threads, small kernels split too, checked against the
    interpreter; and the ukernel that each kernel and chunk function it JIT-compiled calls."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    jitted = []
    compile_module = cpu.compile_module
    monkeypatch.setattr(cpu, "compile_module", lambda m, **kw: jitted.append(m) or compile_module(m, **kw))
    expected = graphopt.interpret(module, *arrays)
    executable = graphopt.compile(module, backends=("cpu",), threads=2)
    for e, a in zip(expected, executable(*arrays), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)
    calls = {
        op.parent_op().sym_name.data: op.callee.string_value()
        for m in jitted
        for op in m.walk()
        if isinstance(op, func.CallOp)
    }
    return executable, calls


CONVS = [
    # x, w, strides, padding, groups, epilogue
    ((1, 7, 9, 11), (13, 7, 3, 3), (1, 1), (1, 1, 1, 1), 1, "bias_relu"),  # 13 = 8 + 5 channels
    ((1, 5, 12, 10), (21, 5, 3, 3), (2, 2), (1, 0, 1, 2), 1, "residual_relu"),  # 16 + 5, stride 2
    ((1, 9, 6, 7), (30, 9, 1, 1), (1, 1), (0, 0, 0, 0), 1, "bias_relu6"),  # a 1x1: 16 + 14
    ((1, 12, 7, 5), (6, 4, 3, 3), (1, 2), (1, 1, 1, 1), 3, "bias_relu"),  # 3 groups of 2: 2 + 1
    ((1, 20, 8, 9), (10, 4, 3, 3), (2, 1), (0, 1, 2, 0), 5, "residual_relu"),  # 5 groups: 3 + 2
    ((1, 11, 10, 37), (11, 1, 3, 3), (1, 1), (1, 1, 1, 1), 11, "bias_relu6"),  # depthwise: 8 + 3
    ((1, 6, 10, 37), (12, 1, 3, 3), (2, 2), (1, 1, 1, 1), 6, "residual_relu"),  # multiplier 2, stride 2
]


@pytest.mark.parametrize("x_shape, w_shape, strides, padding, groups, epilogue", CONVS)
@pytest.mark.parametrize("batch", [1, 3])
def test_two_threads_match_the_interpreter(monkeypatch, batch, x_shape, w_shape, strides, padding, groups, epilogue):
    """One image: two chunks of output channels, each calling the ukernel for its channels
    (and, with groups, for its groups' input channels); three images: chunks of images. (One-group
    direct convs split by output rows, `ukernels.DIRECT_ROW_SPLIT`: off here.)"""
    monkeypatch.setattr(ukernels, "DIRECT_ROW_SPLIT", False)
    x_shape = (batch, *x_shape[1:])
    module = conv_block(x_shape, w_shape, strides, padding, groups, epilogue)
    arrays = [sample(x_shape, specials=False)]
    if epilogue == "residual_relu":
        main = module.body.block.first_op
        arrays.append(sample(main.function_type.inputs.data[1].get_shape(), seed=4))
    executable, calls = compiled_calls(monkeypatch, module, *arrays)
    (step,) = executable.steps
    chunk_outs = [[int(n) for n in callee.rsplit("_", 1)[1].split("x")] for name, callee in calls.items() if "_rows" in name]
    if batch == 1:  # two chunks of one image and part of the output channels
        assert len(step.kernel.chunks) == 2
        assert all(out[0] == 1 for out in chunk_outs) and sum(out[1] for out in chunk_outs) == w_shape[0]
    else:  # images of all output channels (chunks of 2 and 1 where images keep 16-byte alignment)
        assert all(out[1] == w_shape[0] for out in chunk_outs)
    # the tail in the ukernel's tile, in as many chunks as the conv alone (images of 16-byte multiples)
    assert all("_e" in callee for callee in calls.values())
    plain = conv_block(x_shape, w_shape, strides, padding, groups, "none")
    (plain_step,) = graphopt.compile(plain, backends=("cpu",), threads=2).steps
    assert len(step.kernel.chunks) == len(plain_step.kernel.chunks)


def test_one_group_chunks_start_at_register_tiles_and_read_all_of_x(monkeypatch):
    """Output channels 0-15 and 16-20 (chunks start at multiples of direct_conv.OUT_CHANNELS),
    each chunk copying all of x into its phases and adding its channels' bias in the tile
    (AVX-512's tile of 8 channels, on any host), where one-group direct convs split by channels
    (`ukernels.DIRECT_ROW_SPLIT` off)."""
    monkeypatch.setattr(ukernels, "DIRECT_ROW_SPLIT", False)
    monkeypatch.setattr(direct_conv, "OUT_CHANNELS", 8)
    module = conv_block((1, 5, 12, 10), (21, 5, 3, 3), padding=(1, 1, 1, 1))
    executable, calls = compiled_calls(monkeypatch, module, sample((1, 5, 12, 10), specials=False))
    (step,) = executable.steps
    assert [begin for _, begin in step.kernel.chunks] == [0, 2 * direct_conv.OUT_CHANNELS]
    # padded rows of R = 12 floats; phases of max(12 * 12 + (2 * 12 + 2), 14 * 12) + 16 = 186 floats
    # the bias, in the tile epilogue, sliced by channel as w and out
    ukernel = "graphopt_sconv_direct_r12_d1x1_eaddAP0_1x5x1x1x186_{0}x5x3x3_{0}x1x1_1x{0}x12x10".format
    assert calls == {
        "fused_conv2d_add_0": ukernel(21),
        "fused_conv2d_add_0_rows16": ukernel(16),
        "fused_conv2d_add_0_rows5": ukernel(5),
    }


DIRECT_SPLITS = [
    # x, w, strides, groups, the chunks' first output rows ("channels": by output channels or groups)
    ((1, 3, 224, 224), (24, 3, 3, 3), (2, 2), 1, [0, 56]),  # ShuffleNet's stem: rows of 7 vectors
    ((1, 3, 20, 21), (24, 3, 3, 3), (1, 1), 1, [0, 10]),  # rows of 2 vectors: tiles of 1 row
    ((1, 3, 23, 12), (20, 3, 3, 3), (1, 1), 1, [0, 12]),  # rows of 1 vector: tiles of 3 rows (AVX-512)
    ((1, 3, 1, 12), (24, 3, 3, 3), (1, 1), 1, "channels"),  # one output row: fewer than two row tiles
    ((1, 8, 20, 21), (16, 4, 3, 3), (1, 1), 2, "channels"),  # two groups
]


@pytest.mark.parametrize("x_shape, w_shape, strides, groups, first_rows", DIRECT_SPLITS)
def test_one_group_direct_convs_split_by_output_rows(monkeypatch, x_shape, w_shape, strides, groups, first_rows):
    """`ukernels.DIRECT_ROW_SPLIT`: the direct conv of one group on one image splits by output
    rows, chunks from multiples of its row tiles (`direct_conv.tile_rows`), each calling the
    ukernel for its rows (`_oh<first>to<end>`) with all output channels; with fewer than two row
    tiles, or groups, by output channels (groups). NaN and inf in x's first and last rows, the
    interpreter's results."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: False)
    x = sample(x_shape, specials=False)
    x[0, -1, [0, -1], [1, -2]] = [np.nan, -np.inf]
    module = conv_block(x_shape, w_shape, strides, (1, 1, 1, 1), groups, "bias_relu")
    executable, calls = compiled_calls(monkeypatch, module, x)
    (step,) = executable.steps
    _, _, out_h, out_w = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    chunks = sorted(callee for name, callee in calls.items() if name != step.name)
    assert all(callee.startswith(direct_conv.PREFIX) for callee in calls.values())
    if first_rows == "channels":
        assert len(step.kernel.chunks) == 2 and not any("_oh" in callee for callee in chunks)
        return
    assert [begin for _, begin in step.kernel.chunks] == first_rows
    assert all(begin % direct_conv.tile_rows(out_w) == 0 for begin in first_rows)
    ends = [*first_rows[1:], out_h]
    assert chunks == sorted(output_rows.chunk_name(calls[step.name], *rows) for rows in zip(first_rows, ends))


def test_one_thread_and_small_convs_stay_whole():
    """At one thread, or below split-rows' min-work, the conv of one image is one call."""
    large = conv_block((1, 5, 12, 10), (21, 5, 3, 3), padding=(1, 1, 1, 1))  # 226800 flops
    small = conv_block((1, 5, 6, 5), (21, 5, 3, 3), padding=(1, 1, 1, 1))  # 56700 flops
    steps = [graphopt.compile(m, backends=("cpu",), threads=t).steps for m, t in ((large, 1), (small, 2), (large, 2))]
    assert [len(step.kernel.chunks) for (step,) in steps] == [0, 0, 2]



@settings(max_examples=10, deadline=None)
@given(conv=ukernel_convs(), out_channels=st.integers(9, 21), seed=st.integers(0, 2**16), by_rows=st.booleans())
def test_any_direct_conv_of_one_image_matches_the_interpreter_on_two_threads(conv, out_channels, seed, by_rows):
    """ukernel_convs' convs on one image, those of one group with 9-21 output channels: two
    chunks, by channels the first of 8 or 16 (AVX-512's tile of 8 channels, on any host); by
    output rows (`ukernels.DIRECT_ROW_SPLIT`) from a multiple of the ukernel's row tiles where
    there are two or more, else by channels."""
    x_shape, w_shape, strides, dilations, padding, groups = conv
    x_shape, w_shape = (1, *x_shape[1:]), (out_channels if groups == 1 else w_shape[0], *w_shape[1:])
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(w_shape).astype(np.float32)
    module = conv_layer(x_shape, w, strides, dilations, padding, groups)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CpuSchedule, "conv_gemm", lambda self, op: False)  # 1x1s and narrow outputs too
        patch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)  # 16 output channels too
        patch.setattr(direct_conv, "OUT_CHANNELS", 8)
        patch.setattr(ukernels, "DIRECT_ROW_SPLIT", by_rows)
        executable, calls = compiled_calls(patch, module, rng.standard_normal(x_shape).astype(np.float32))
    (step,) = executable.steps
    _, _, out_h, out_w = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    if groups == 1 and by_rows and out_h >= 2 * direct_conv.tile_rows(out_w):
        begins = [begin for _, begin in step.kernel.chunks]
        assert len(begins) == 2 and begins[1] % direct_conv.tile_rows(out_w) == 0
        assert all("_oh" in callee for name, callee in calls.items() if name != step.name)
    elif groups == 1:
        assert [begin for _, begin in step.kernel.chunks] == [0, 8 if out_channels <= 16 else 16]


@pytest.mark.parametrize("out_channels, begins", [(16, [0, 8]), (32, [0, 16]), (21, [0, 12])])
def test_convs_run_as_the_gemm_split_into_balanced_chunks(monkeypatch, out_channels, begins):
    """A conv run as the GEMM splits its output channels in halves, chunks starting at
    multiples of 4 (outputs of 7 x 9 floats: 16-byte alignment) rather than of the GEMM's
    register tile of 6 rows (16 channels used to run as 12 + 4)."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: True)
    module = conv_block((1, 5, 7, 9), (out_channels, 5, 1, 1), epilogue="bias_relu")
    x = sample((1, 5, 7, 9))  # NaN and inf included
    executable, calls = compiled_calls(monkeypatch, module, x)
    (step,) = executable.steps
    assert [begin for _, begin in step.kernel.chunks] == begins
    assert all(callee.startswith("graphopt_sgemm_rowmajor_") for callee in calls.values())


@pytest.mark.parametrize("out_channels, names", [(40, ["_rows32", "_rows8_last"]), (48, ["_rows32", "_rows16"])])
def test_lanes_convs_split_by_blocks_and_the_last_takes_the_padded_block(monkeypatch, out_channels, names):
    """conv_lanes' weights hold blocks of 16 output channels; 40 channels are 3 blocks, the
    last padded: the first chunk runs 2 blocks (32 channels), the last the rest (a block of 8)."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: True)
    module = conv_block((1, 3, 9, 11), (out_channels, 3, 3, 3), padding=(1, 1, 1, 1), epilogue="bias_relu")
    executable, calls = compiled_calls(monkeypatch, module, sample((1, 3, 9, 11)))
    (step,) = executable.steps
    assert [name.removeprefix(step.name) for name, _ in step.kernel.chunks] == names
    assert all(callee.startswith("graphopt_sconv_lanes_") for callee in calls.values())


@pytest.mark.parametrize("epilogue", ["bias_relu", "residual_relu"])
@pytest.mark.parametrize("height, width", [(55, 55), (13, 13), (7, 7)])
@pytest.mark.parametrize("batch", [1, 2])
def test_few_channel_gemms_split_by_positions(monkeypatch, batch, height, width, epilogue):
    """A 1x1 of 16 output channels run as the GEMM (any count of positions: POSITION_SPLIT_PANELS
    1) splits one image by output positions where they fill a panel: chunks from multiples of
    row_split.POSITION_CHUNK_COLUMNS (a vector), the last taking the rest (55 x 55 = 3025: 1520
    + 1505; 7 x 7 = 49: 32 + 17, its last column a dot product, with 16 columns a panel), each on
    all 16 channels of its columns, NaN and inf in both chunks' columns; two images split by
    images, or not at all."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: True)
    monkeypatch.setattr(ukernels, "POSITION_SPLIT_PANELS", 1)
    x_shape = (batch, 9, height, width)
    module = conv_block(x_shape, (16, 9, 1, 1), epilogue=epilogue)
    x = sample(x_shape)  # NaN and inf in the first positions
    x[:, 1, -1, -3:] = [np.inf, np.nan, -np.inf]  # and in the last
    arrays = [x] + ([sample((batch, 16, height, width), seed=4)] if epilogue == "residual_relu" else [])
    executable, calls = compiled_calls(monkeypatch, module, *arrays)
    (step,) = executable.steps
    positions = height * width
    per_chunk = -(-positions // (2 * row_split.POSITION_CHUNK_COLUMNS)) * row_split.POSITION_CHUNK_COLUMNS
    chunk_calls = [callee for name, callee in calls.items() if "_rows" in name]
    if batch == 2:  # by images where they are 16-byte multiples (7 x 7 x 9 floats are not), whole calls
        assert [begin for _, begin in step.kernel.chunks] == ([] if positions * 9 % 4 else [0, 1])
        assert not any(packed_gemm.COLUMNS_MARK in callee for callee in calls.values())
    elif positions >= packed_gemm.PANEL:  # POSITION_SPLIT_PANELS (1) panel of positions or more
        assert [begin for _, begin in step.kernel.chunks] == [0, per_chunk]
        assert sorted(int(callee.rsplit(packed_gemm.COLUMNS_MARK, 1)[1]) for callee in chunk_calls) == sorted(
            {per_chunk, positions - per_chunk}
        )
    else:  # one panel of 64 columns (AVX-512) holds all 49 positions: by output channels
        assert [begin for _, begin in step.kernel.chunks] == [0, 8]


@pytest.mark.parametrize(
    "w_shape, x_shape, groups, any_channels, second_begin",
    [
        ((16, 128, 1, 1), (1, 128, 55, 55), 1, False, "positions"),  # SqueezeNet's squeeze 1x1 at 55
        ((16, 9, 1, 1), (1, 9, 10, 10), 1, False, 8),  # 100 positions: fewer than POSITION_SPLIT_PANELS panels
        ((24, 128, 1, 1), (1, 128, 55, 55), 1, False, 12),  # 24 output channels: by channels
        ((24, 128, 1, 1), (1, 128, 55, 55), 1, True, "positions"),  # ... but with AVX-512 any count
        ((256, 64, 1, 1), (1, 64, 56, 56), 1, True, "positions"),  # ResNet-50's 64->256 at 56
        ((64, 16, 1, 1), (1, 16, 55, 55), 1, True, 32),  # fewer than POSITION_SPLIT_ANY_CHANNELS_DEPTH inputs
        ((32, 64, 1, 1), (1, 64, 28, 28), 1, True, "positions"),  # at 28 x 28 too
        ((32, 64, 1, 1), (1, 64, 10, 10), 1, True, 16),  # 100 positions: fewer than POSITION_SPLIT_PANELS panels
        ((16, 32, 1, 1), (1, 32, 112, 112), 1, True, 8),  # more than POSITION_SPLIT_MAX_POSITIONS
        ((16, 8, 1, 1), (1, 16, 55, 55), 2, True, 1),  # grouped: by groups
        ((16, 3, 3, 3), (1, 3, 34, 34), 1, False, 16),  # 3x3 (b an im2col copy), 1024 positions: by rows (of 32)
        ((64, 3, 3, 3), (1, 3, 67, 67), 1, False, 36),  # 65 x 65 positions, 66 a channel: by rows (of 65)
        ((64, 3, 3, 3), (1, 3, 33, 33), 1, False, 32),  # 31 x 31 positions, 15 a channel: by channels
    ],
)
def test_the_rule_splits_few_channel_one_by_ones_by_positions(
    monkeypatch, w_shape, x_shape, groups, any_channels, second_begin
):
    """`ukernels.position_units`: 1x1s of at most POSITION_SPLIT_CHANNELS output channels, or of
    any count from POSITION_SPLIT_ANY_CHANNELS_DEPTH input channels (POSITION_SPLIT_ANY_CHANNELS,
    as with AVX-512), of one group, from POSITION_SPLIT_PANELS
    panels of positions to POSITION_SPLIT_MAX_POSITIONS split by positions; convs on an im2col
    copy of at least ROW_SPLIT_POSITIONS_PER_CHANNEL positions per output channel by output rows
    (`ukernels.output_row_units`); the others by channels (or groups). The interpreter's results."""
    monkeypatch.setattr(ukernels, "POSITION_SPLIT_ANY_CHANNELS", any_channels)
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: True)
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    module = conv_block(x_shape, w_shape, groups=groups, epilogue="bias_relu")
    executable, _ = compiled_calls(monkeypatch, module, sample(x_shape))
    (step,) = executable.steps
    if second_begin == "positions":
        positions = x_shape[2] * x_shape[3]
        second_begin = -(-positions // (2 * row_split.POSITION_CHUNK_COLUMNS)) * row_split.POSITION_CHUNK_COLUMNS
    assert [begin for _, begin in step.kernel.chunks] == [0, second_begin]


STEMS = [
    # x, w, strides, padding, (begin of the second chunk, output columns of each chunk) at one image
    ((1, 3, 37, 37), (64, 3, 3, 3), (2, 2), (0, 0, 0, 0), (10, [180, 144])),  # 18 rows of 18: 10 + 8
    ((1, 3, 31, 31), (64, 3, 7, 7), (2, 2), (0, 0, 0, 0), (8, [104, 65])),  # 13 rows of 13: 8 + 5
    ((1, 3, 31, 33), (64, 3, 3, 3), (2, 2), (1, 1, 1, 1), (32, None)),  # pads: by channels
    ((1, 3, 37, 37), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3), (32, None)),
]


@pytest.mark.parametrize("x_shape, w_shape, strides, padding, chunks", STEMS)
@pytest.mark.parametrize("batch", [1, 2])
def test_im2col_gemms_split_by_output_rows(monkeypatch, batch, x_shape, w_shape, strides, padding, chunks):
    """Stems run as the GEMM on an im2col copy, + bias + relu: one image of a conv that does not
    pad splits by whole output rows (chunks from multiples of 2 or 4 rows: 16-byte alignment of
    x's and out's rows), each chunk copying the im2col columns of its rows and calling the GEMM
    for them, all 64 channels; NaN and inf in x's first and last rows (both chunks' columns).
    A conv that pads splits by output channels; two images by images. (The rule at 1 position
    a channel: these stems have 2.6-5; `ukernels.output_row_units` is tested above.)"""
    monkeypatch.setattr(ukernels, "ROW_SPLIT_POSITIONS_PER_CHANNEL", 1)
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: True)
    x_shape = (batch, *x_shape[1:])
    x = sample(x_shape)
    x[:, 2, -1, -3:] = [np.inf, np.nan, -np.inf]
    executable, calls = compiled_calls(monkeypatch, conv_block(x_shape, w_shape, strides, padding, epilogue="bias_relu"), x)
    (step,) = executable.steps
    second_begin, columns = chunks
    chunk_calls = [callee for name, callee in calls.items() if "_rows" in name]
    if batch == 2:
        assert [begin for _, begin in step.kernel.chunks] in ([], [0, 1])
        assert not any(packed_gemm.COLUMNS_MARK in callee for callee in chunk_calls)
        return
    assert [begin for _, begin in step.kernel.chunks] == [0, second_begin]
    if columns is None:
        assert not any(packed_gemm.COLUMNS_MARK in callee for callee in chunk_calls)
    else:
        assert sorted(int(callee.rsplit(packed_gemm.COLUMNS_MARK, 1)[1]) for callee in chunk_calls) == sorted(columns)


def _writes(generic: GenericOp) -> set[tuple[int, ...]]:
    """The elements of its one output that a loop nest writes."""
    written = generic.indexing_maps.data[-1].data
    return {written.eval(point, []) for point in itertools.product(*map(range, generic.get_static_loop_ranges()))}


def _writes_into(kernel: func.FuncOp, buffer) -> set[tuple[int, ...]]:
    generics = [op for op in kernel.body.block.ops if isinstance(op, GenericOp) and list(op.outputs) == [buffer]]
    return set().union(*map(_writes, generics))


OUTPUT_ROW_CHUNKS = [
    # x, w, strides, dilations, padding, ukernel
    ((1, 3, 15, 13), (24, 3, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "lanes"),  # stride 2, odd rows and columns
    ((1, 4, 17, 10), (24, 4, 5, 5), (1, 1), (2, 2), (3, 1, 2, 4), "lanes"),  # 5x5, dilation 2, uneven padding
    ((1, 3, 29, 13), (24, 3, 7, 7), (2, 2), (1, 1), (3, 3, 3, 3), "lanes"),  # a 7x7/2 stem
    ((1, 6, 29, 13), (9, 6, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "winograd"),  # odd output rows: a half tile
    ((1, 5, 30, 9), (9, 5, 3, 3), (1, 1), (1, 1), (0, 1, 2, 1), "winograd"),  # uneven padding
    ((1, 3, 15, 13), (24, 3, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "direct"),  # rows of one vector: tiles of 3 rows (AVX-512)
    ((1, 4, 17, 40), (24, 4, 5, 5), (1, 1), (2, 2), (3, 1, 2, 4), "direct"),  # rows of 3 vectors, the last 2 lanes
    ((1, 3, 29, 45), (20, 3, 7, 7), (2, 2), (1, 1), (3, 3, 3, 3), "direct"),  # a 7x7/2 stem, rows of 2 vectors
]


@pytest.mark.parametrize("x_shape, w_shape, strides, dilations, padding, ukernel", OUTPUT_ROW_CHUNKS)
def test_output_row_chunks_copy_the_rows_of_x_they_read(monkeypatch, x_shape, w_shape, strides, dilations, padding, ukernel):
    """A conv split by output rows (`row_split.output_row_split`): each chunk's loop nests that
    pad x (or copy it into stride phases) write every element of the rows its ukernel call reads
    (`ukernels.conv_input_read`) that the whole kernel's write, and fewer elements than those;
    NaN and inf in x's first, middle and last rows, each chunk's results the interpreter's."""
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: ukernel == "lanes")
    monkeypatch.setattr(CpuSchedule, "winograd_conv", lambda self, op: ukernel == "winograd")
    monkeypatch.setattr(CpuSchedule, "conv_gemm", lambda self, op: False)
    g = GraphBuilder()
    w = g.constant(sample(w_shape, seed=1, specials=False))
    module = g.finish(g.relu(g.conv2d(g.input("x", x_shape), w, strides=strides, dilations=dilations, padding=padding)))
    lowered = module.clone()
    FusePass().apply(Context(), lowered)
    ConvertGraphToLinalgPass().apply(Context(), lowered)
    parsed_pipeline("linalg-generalize-named-ops,split-rows{threads=2 min-work=0}").apply(Context(), lowered)
    functions = {f.sym_name.data: f for f in lowered.ops if isinstance(f, func.FuncOp) and f.body.blocks}
    (kernel,) = (f for f in functions.values() if f.attributes.get("graph.row_chunks"))
    out_h = module.body.block.first_op.function_type.outputs.data[0].get_shape()[2]
    whole_call = next(op for op in kernel.walk() if isinstance(op, func.CallOp))
    prefixes = {"lanes": conv_lanes.PREFIX, "winograd": conv_winograd.PREFIX, "direct": direct_conv.PREFIX}
    assert whole_call.callee.string_value().startswith(prefixes[ukernel])
    whole = _writes_into(kernel, whole_call.arguments[0])
    chunk_names = [pair.data[0].data for pair in kernel.attributes["graph.row_chunks"].data]
    assert len(chunk_names) == 2
    for name in chunk_names:
        call = next(op for op in functions[name].walk() if isinstance(op, func.CallOp))
        first, end = output_rows.row_range(call.callee.string_value(), out_h)
        axis, begin, stop = ukernels.conv_input_read(call, first, end)
        read = {element for element in whole if begin <= element[axis] < stop}
        written = _writes_into(functions[name], call.arguments[0])
        assert read <= written < whole
    x = sample(x_shape, specials=False)
    x[0, 0, [0, x_shape[2] // 2, -1], [1, 2, -1]] = [np.nan, np.inf, -np.inf]
    compiled_calls(monkeypatch, module, x)
