"""The Winograd F(2x2, 3x3) conv ukernel (`conv_winograd`): f32 3x3 convs of stride 1 compiled on the
cpu backend, against the interpreter (its direct fallback for non-finite x too); its weight
transform, and the cpu schedule's rule for it."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_conv_channel_split import compiled_calls, conv_block
from test_graph_to_linalg import sample
from test_packed_gemm import kernels
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, f32

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.lowering import conv_winograd
from graphopt.lowering.linalg.abi import Group
from graphopt.lowering.linalg import schedule
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.runtime import jit

RULE = CpuSchedule.winograd_conv
"""The cpu schedule's own choice (the fixture widens it)."""


@pytest.fixture(autouse=True)
def winograd_whenever_it_applies(monkeypatch):
    """These are the ukernel's tests: it takes every conv it can run (`schedule.winograd_applies`),
    whatever the channels and the CPU."""
    monkeypatch.setattr(
        CpuSchedule,
        "winograd_conv",
        lambda self, op: schedule.winograd_applies(op),
    )


def winograd_call_ops(module) -> list[func.CallOp]:
    """The calls of the Winograd ukernel after fuse and convert-graph-to-linalg."""
    calls = [op for kernel in kernels(module) for op in kernel.walk() if isinstance(op, func.CallOp)]
    return [op for op in calls if op.callee.string_value().startswith(f"{conv_winograd.PREFIX}_")]


def winograd_calls(module) -> list[str]:
    return [op.callee.string_value() for op in winograd_call_ops(module)]


def check(module, *arrays, threads=1):
    """The compiled module against the interpreter: rtol 1e-4 (the transforms' adds round
    differently from the direct sums), and 1e-5 of the largest output absolutely (a sum that
    cancels keeps the rounding of its terms)."""
    (expected,) = graphopt.interpret(module, *arrays)
    (actual,) = graphopt.compile(module, backends=("cpu",), threads=threads)(*arrays)
    finite = np.isfinite(expected)
    scale = np.abs(expected[finite]).max() if finite.any() else 1.0
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * scale, equal_nan=True)
    return expected


CONVOLUTIONS = [
    # x, output channels, padding, tail
    # 37 -> 45 channels (7 tiles of 6 and one of 3 output channels), rows of 7 tiles
    ((1, 37, 14, 14), 45, (1, 1, 1, 1), "bias_relu"),
    ((2, 37, 14, 14), 45, (1, 1, 1, 1), "residual_relu"),
    # one tile per row (OW 2), two images
    ((2, 8, 2, 2), 13, (1, 1, 1, 1), "bias_relu"),
    # rows of 17 tiles (OW 34): a vector of 16 and one of 1; 7 channels (one tile of 7 - 6 = 1 row)
    ((1, 16, 6, 34), 7, (1, 1, 1, 1), "residual_relu"),
    # rows of 28 tiles (OW 56): 16 + 12
    ((1, 32, 8, 56), 32, (1, 1, 1, 1), "bias_relu"),
    # no padding: 10 x 16 -> 8 x 14
    ((1, 9, 10, 16), 12, (0, 0, 0, 0), "none"),
    # uneven padding: 7 x 9 -> 8 x 8
    ((1, 5, 7, 9), 6, (2, 0, 1, 1), "bias"),
    # odd sizes: the last tile row writes one output row, the last tile column's store one column
    ((1, 16, 55, 55), 16, (1, 1, 1, 1), "bias_relu"),  # rows of 28 tiles (16 + 12), the last half-empty
    ((2, 12, 27, 27), 10, (1, 1, 1, 1), "residual_relu"),
    ((1, 9, 13, 14), 8, (1, 1, 1, 1), "bias_relu"),  # odd rows only
    ((1, 9, 14, 13), 8, (1, 1, 1, 1), "residual_relu"),  # odd columns only
    ((2, 20, 7, 7), 24, (1, 1, 1, 1), "residual_relu"),
    ((1, 7, 9, 9), 6, (0, 0, 0, 0), "bias"),  # 7 x 7
    ((1, 5, 3, 3), 4, (1, 1, 1, 1), "bias_relu"),  # 3 x 3: 2 x 2 tiles, 3 of them half or three-quarters empty
    ((2, 4, 3, 5), 5, (0, 0, 0, 0), "residual_relu"),  # 1 x 3
    ((1, 3, 1, 1), 2, (1, 1, 1, 1), "bias"),  # 1 x 1: one tile, one output of four
]


@pytest.mark.parametrize("x_shape, out_channels, padding, tail", CONVOLUTIONS)
def test_matches_interpreter(x_shape, out_channels, padding, tail):
    module = conv_block(x_shape, (out_channels, x_shape[1], 3, 3), padding=padding, epilogue=tail)
    assert len(winograd_calls(module)) == 1
    arrays = [sample(x_shape, specials=False)]
    if tail == "residual_relu":
        out_h, out_w = (x_shape[2 + axis] + padding[axis] + padding[axis + 2] - 2 for axis in (0, 1))
        arrays.append(sample((x_shape[0], out_channels, out_h, out_w), seed=4, specials=False))
    check(module, *arrays)


@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("image", [0, 1])
def test_non_finite_x_runs_the_direct_conv_of_its_image(special, image):
    """An inf in x gives inf in the outputs whose window holds it, not NaN across its tiles (and a NaN
    stays inside those windows): that image runs as the direct conv, the other one as Winograd."""
    x_shape = (2, 6, 6, 10)
    module = conv_block(x_shape, (9, 6, 3, 3), padding=(1, 1, 1, 1), epilogue="bias")
    x = sample(x_shape, specials=False)
    x[image, 2, 3, 4] = special
    x[image, 5, 0, 9] = special  # a corner: its windows reach the padding
    expected = check(module, x)
    assert np.isfinite(expected[1 - image]).all()
    assert (np.isnan(expected[image]) if np.isnan(special) else np.isinf(expected[image])).sum() == 9 * (9 + 4)


@pytest.mark.parametrize("special", [np.inf, np.nan])
def test_non_finite_x_in_the_last_tile_row_of_odd_sizes(special):
    """7 x 9 outputs: the last tile row (one output row) and column (one output column) run as the
    direct conv of their image when x's last row and column hold an inf or a NaN."""
    x_shape = (2, 6, 7, 9)
    module = conv_block(x_shape, (9, 6, 3, 3), padding=(1, 1, 1, 1), epilogue="bias")
    x = sample(x_shape, specials=False)
    x[1, 4, 6, 8] = special
    expected = check(module, x)
    assert np.isfinite(expected[0]).all()
    assert (~np.isfinite(expected[1])).sum() == (~np.isfinite(expected[1, :, 5:, 7:])).sum() == 9 * 4


@pytest.mark.parametrize(
    "out_h, out_w, band_tiles, epilogue, inf_at",
    [
        # 14 output rows in 3 bands of 2 tile rows and one of 1; an inf in the third band's x runs
        # its 4 output rows, and the rows of the band whose 4x4 tiles reach it (the 2 rows before),
        # as the direct conv
        (14, 10, 5, "bias_relu", (1, 9, 3)),
        # 13 x 11 outputs (7 x 6 tiles): 3 bands of 4 output rows and the last of 1 (the last tile
        # row's first output row only: writing its second would write the next channel's first
        # row, written before by the first band); an inf in x's last row runs the last two bands
        # as the direct conv
        (13, 11, 6, "residual_relu", (1, 12, 3)),
    ],
)
def test_bands_of_tile_rows(monkeypatch, out_h, out_w, band_tiles, epilogue, inf_at):
    """A scratch buffer of 2 tile rows (`band_rows`; U of 6 x 9 channels, 3.4 KB, takes
    SMALL_U_SCRATCH_BYTES), without and with an inf in x."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    x_shape = (1, 6, out_h, out_w)
    monkeypatch.setattr(conv_winograd, "SMALL_U_SCRATCH_BYTES", 16 * 4 * (6 + 9) * band_tiles * 2)
    assert conv_winograd.band_rows(6, (1, 9, out_h, out_w)) == 2
    module = conv_block(x_shape, (9, 6, 3, 3), padding=(1, 1, 1, 1), epilogue=epilogue)
    x = sample(x_shape, specials=False)
    residual = [sample((1, 9, out_h, out_w), seed=4, specials=False)] if epilogue.startswith("residual") else []
    check(module, x, *residual)
    x[(0, *inf_at)] = np.inf
    check(module, x, *residual)


@pytest.mark.parametrize("size", [14, 13])
def test_two_threads_split_by_output_channels(monkeypatch, size):
    """45 output channels on two threads: chunks from multiples of CHUNK_CHANNELS, each with
    its channels of U, w, the residual and out, all of x, and a scratch buffer of its own."""
    module = conv_block((1, 37, size, size), (45, 37, 3, 3), padding=(1, 1, 1, 1), epilogue="residual_relu")
    arrays = [sample((1, 37, size, size), specials=False), sample((1, 45, size, size), seed=4, specials=False)]
    executable, calls = compiled_calls(monkeypatch, module, *arrays)
    (step,) = executable.steps
    assert [begin for _, begin in step.kernel.chunks] == [0, 32]
    assert all(callee.startswith(f"{conv_winograd.PREFIX}_") for callee in calls.values())
    assert sorted(callee.split("_1x37x")[1].split("_")[1] for callee in calls.values()) == ["13x16x37", "32x16x37", "45x16x37"]
    x = arrays[0].copy()
    x[0, 3, 5, 5] = np.inf
    check(module, x, arrays[1], threads=2)


@pytest.mark.parametrize("inf_row", [None, 3, 20])
def test_two_threads_split_many_positions_per_channel_by_output_rows(monkeypatch, inf_row):
    """9 output channels of 29 x 13 (377 positions a channel, at least
    WINOGRAD_ROW_SPLIT_POSITIONS_PER_CHANNEL) on two threads: chunks of output rows, 16 and 13
    (from a tile row), each a function of its own calling the ukernel for its rows
    (`_oh<first>to<end>`) on x padded (its rows), U, w, the residual and out, with a scratch buffer
    of its own; bands of 2 tile rows, the second chunk's last one of 1 output row. An inf in x
    runs the bands of the chunk whose tiles reach it as the direct conv: the interpreter's results."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(conv_winograd, "SMALL_U_SCRATCH_BYTES", 16 * 4 * (6 + 9) * 7 * 2)
    assert conv_winograd.band_rows(6, (1, 9, 29, 13)) == 2
    module = conv_block((1, 6, 29, 13), (9, 6, 3, 3), padding=(1, 1, 1, 1), epilogue="residual_relu")
    x, residual = sample((1, 6, 29, 13), specials=False), sample((1, 9, 29, 13), seed=4, specials=False)
    if inf_row is not None:
        x[0, 2, inf_row, 4] = np.inf
    executable, calls = compiled_calls(monkeypatch, module, x, residual)
    (step,) = executable.steps
    assert [begin for _, begin in step.kernel.chunks] == [0, 16]
    chunks = sorted(callee for kernel, callee in calls.items() if "_oh" in kernel)
    assert [callee.rsplit("_", 1)[1] for callee in chunks] == ["oh0to16", "oh16to29"]
    assert all(callee.startswith(f"{conv_winograd.PREFIX}_") for callee in chunks)


@pytest.mark.parametrize(
    "channels, out_channels, size, rows",
    [
        (64, 64, 56, 4),  # U 256 KB: V and M of 4 tile rows (224 KB each) in 1 MB
        (32, 128, 27, 7),  # U 256 KB (SqueezeNet's expand 3x3): 140 KB a tile row
        (64, 192, 56, 4),  # U 768 KB: 448 KB a tile row, 12.3 MB in all: in 2 MB
        (96, 128, 27, 14),  # U 768 KB: 2.8 MB in all, in 4 MB: one band
        (128, 128, 28, 14),  # U 1 MB: 3.1 MB in all, in 4 MB: one band
        (64, 128, 112, 3),  # U 512 KB: 672 KB a tile row, in 2 MB
        (128, 256, 56, 6),  # U 2 MB: 672 KB a tile row, in 4 MB
        (64, 64, 224, 1),  # 896 KB a tile row
        (256, 256, 56, 4),  # U 4 MB: 896 KB a tile row
    ],
)
def test_bands_fit_l2_as_u_allows(channels, out_channels, size, rows):
    """A band's scratch (V and M) fits SMALL_U_SCRATCH_BYTES (1 MB) where U holds SMALL_U_BYTES
    (256 KB) or fewer, so that V, M and U stay in L2 across the three stages; MEDIUM_U_SCRATCH_BYTES
    (2 MB) where U holds MEDIUM_U_BYTES (1 MB) or fewer and the image would take several bands of
    SCRATCH_BYTES (4 MB) anyway; else SCRATCH_BYTES, where more bands would each read U again."""
    assert conv_winograd.band_rows(channels, (1, out_channels, size, size)) == rows


def test_stage_1_writes_zeros_past_a_bands_tiles():
    """The GEMMs' last vector of tiles reads up to 15 floats past a band's tiles in each row of V
    (49 tiles here: 4 vectors of 16 read 64); stage 1 stores a vector of zeros there, one per xi,
    so the GEMMs never multiply what the allocator left in the scratch buffer (denormal floats
    there made Intel's FMAs take microcode assists: Inception-v2 ran 3x slower)."""
    shapes = ((1, 32, 18, 17), (64, 16, 32), (64, 32, 3, 3), (16, 96, 65), (1, 64, 14, 14))
    types = [MemRefType(f32, shape) for shape in shapes]
    ir = conv_winograd.ukernel_ir(conv_winograd.name(types), types)
    assert len(re.findall(r"store <16 x float> zeroinitializer, ptr %v\d+", ir)) == 16


def test_pack_transforms_each_output_and_input_channel():
    w = sample((5, 3, 3, 3), specials=False)
    u = conv_winograd.pack(w)
    assert u.shape == conv_winograd.packed_shape(w.shape) == (5, 16, 3)
    o, c = 4, 2
    np.testing.assert_allclose(u[o, :, c].reshape(4, 4), conv_winograd.G @ w[o, c] @ conv_winograd.G.T, rtol=1e-6)


def conv_group(x_shape, out_channels, strides=(1, 1), window=3, w_value=0.5) -> tuple[Group, graph.Conv2dOp]:
    """A group of one conv whose w, a constant of `w_value`, is inside it."""
    g = GraphBuilder()
    w = g.constant(np.full((out_channels, x_shape[1], window, window), w_value, np.float32))
    y = g.conv2d(g.input("x", x_shape), w, strides=strides, padding=(1, 1, 1, 1) if window == 3 else (0, 0, 0, 0))
    module = g.finish(y)
    op = next(op for op in module.walk() if isinstance(op, graph.Conv2dOp))
    return Group("g", [op.x], [op.w.owner, op], [op.result], {}), op


@pytest.mark.parametrize("minimum", [(16, 16, 1), (32, 64, 14)])
def test_rule_takes_the_3x3s_of_stride_1_with_enough_channels_and_rows(monkeypatch, minimum):
    """At each host's `WINOGRAD_MINIMUM` (AVX2's, AVX-512's): the 3x3s of stride 1 at the least
    input channels, output channels and output rows it names (odd sizes too), none below them."""
    monkeypatch.setattr(CpuSchedule, "winograd_conv", RULE)
    monkeypatch.setattr(schedule, "WINOGRAD_MINIMUM", minimum)
    least_in, least_out, least_rows = minimum
    odd = max(least_rows, 13) | 1
    taken = {
        "at the least channels": ((1, least_in, 56, 56), least_out),
        "odd rows": ((1, least_in, odd, odd), least_out),
        "at the least rows": ((1, 64, least_rows, 20), 64),
    }
    refused = {
        "stride 2": ((1, 64, 56, 56), 64, (2, 2)),
        "1x1": ((1, 64, 56, 56), 64, (1, 1), 1),
        "few input channels": ((1, least_in - 1, 55, 55), 64),
        "few output channels": ((1, 64, 56, 56), least_out - 1),
        "w not finite": ((1, 64, 56, 56), 64, (1, 1), 3, np.inf),
        **({"few rows": ((1, 64, least_rows - 1, 56), 64)} if least_rows > 1 else {}),
    }
    picked = {case: CpuSchedule().conv_ukernel(*conv_group(*shape)) == "winograd" for case, shape in {**taken, **refused}.items()}
    assert picked == {case: case in taken for case in picked}


def winograd_ukernels(module) -> list[str]:
    """The LLVM IR of each Winograd ukernel the module's kernels call."""
    return [conv_winograd.ukernel_ir(op.callee.string_value(), [a.type for a in op.arguments]) for op in winograd_call_ops(module)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("u_bytes, band_tiles", [(0, None), (0, 2), (1 << 40, None)])
def test_one_band_calls_of_large_u_prefetch_the_next_tiles_u(monkeypatch, threads, u_bytes, band_tiles):
    """37 -> 45 channels at 13 x 13 (7 register tiles of 6 output channels and one of 3, the
    next transform element's first tile after each element's last), with U over
    PREFETCH_U_BYTES: each step c of a register tile prefetches column c of the next tile's row
    c mod 6 (rows 16 x 37 floats apart), a call of one band only (bands of 2 tile rows: none); the
    interpreter's results either way, an inf in x too, at 1 and 2 threads (chunks of channels)."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(conv_winograd, "PREFETCH_U_BYTES", u_bytes)
    if band_tiles:
        monkeypatch.setattr(conv_winograd, "SMALL_U_SCRATCH_BYTES", 16 * 4 * (37 + 45) * 7 * band_tiles)
    module = conv_block((1, 37, 13, 13), (45, 37, 3, 3), padding=(1, 1, 1, 1), epilogue="residual_relu")
    (ukernel,) = winograd_ukernels(module)
    prefetches = u_bytes == 0 and band_tiles is None
    assert ("i64 %u.ahead" in ukernel) == prefetches
    if prefetches:
        assert re.search(r"%u\.row = urem i64 %\w+, 6\n\s+%u\.row\.at = mul i64 %u\.row, 592\n", ukernel)
    arrays = [sample((1, 37, 13, 13), specials=False), sample((1, 45, 13, 13), seed=4, specials=False)]
    check(module, *arrays, threads=threads)
    arrays[0][0, 3, 5, 5] = np.inf
    check(module, *arrays, threads=threads)
