"""Convolutions run as the packed GEMM ukernel with b row-major (`CpuSchedule.conv_gemm`):
1x1s and convs of narrow outputs, compiled on the cpu backend, against the interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv_channel_split import compiled_calls, conv_block
from test_graph_to_linalg import sample
from test_packed_gemm import kernels
from xdsl.dialects import func

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering import packed_gemm, tile_epilogue
from graphopt.lowering.linalg import schedule
from graphopt.lowering.pipelines import CPU
from graphopt.runtime import jit

GEMM = f"{packed_gemm.ROW_MAJOR_PREFIX}_"

CONVS = [
    # x, w, strides, padding, dilations: the output's OH * OW columns of the GEMM in the comment
    ((1, 10, 1, 1), (7, 10, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1 column, x itself
    ((1, 11, 3, 3), (9, 11, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1 column, 99 deep
    ((1, 5, 1, 7), (8, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 7
    ((1, 11, 7, 7), (13, 11, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 49, 99 deep
    ((1, 17, 5, 10), (19, 17, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 50
    ((1, 300, 14, 14), (20, 300, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 196, k in two blocks
    ((1, 30, 13, 13), (14, 30, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # 49, stride 2, 270 deep
    ((1, 9, 14, 15), (37, 9, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),  # 56, a strided 1x1
    ((1, 7, 7, 7), (5, 7, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),  # 49, dilated
    ((1, 6, 8, 9), (11, 6, 3, 2), (1, 2), (0, 1, 2, 0), (1, 1)),  # 10 x 5, uneven padding
    ((1, 6, 5, 6), (7, 6, 1, 1), (1, 1), (1, 0, 0, 2), (1, 1)),  # 6 x 8, a padded 1x1 (copied)
    ((1, 3, 9, 35), (64, 3, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1)),  # 4 x 17, a stem, 27 deep
]


def gemm_call_ops(module) -> list[func.CallOp]:
    """The calls of the GEMM ukernel in `module`'s kernels."""
    return [
        op
        for kernel in kernels(module)
        for op in kernel.walk()
        if isinstance(op, func.CallOp) and op.callee.string_value().startswith(GEMM)
    ]


def gemm_calls(module) -> list[str]:
    return [call.callee.string_value() for call in gemm_call_ops(module)]


def residual_relu_gemm(monkeypatch, x_shape, w_shape, groups=1):
    """A conv (of `groups` groups) + bias + residual + relu whose conv runs as the conv GEMM, with
    the kernel and JIT caches off; and a function giving its GEMM ukernel's IR under the settings
    at the time of the call."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    module = conv_block(x_shape, w_shape, groups=groups, epilogue="residual_relu")
    (call,) = gemm_call_ops(module)
    name, types = call.callee.string_value(), [a.type for a in call.arguments]
    return module, lambda: packed_gemm.ukernel_ir(name, types)


def conv(x_shape, w_shape, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1), groups=1, dtype="f32"):
    """@main(x) = conv2d(x, w), w a constant."""
    g = GraphBuilder()
    x = g.input("x", x_shape, dtype)
    w = g.constant(sample(w_shape, dtype, seed=1, specials=False))
    return g.finish(g.conv2d(x, w, strides=strides, padding=padding, dilations=dilations, groups=groups))


def check_compiled(monkeypatch, module, *arrays, threads: int):
    """The module compiled at `threads` (small kernels split too) against the interpreter."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    expected = graphopt.interpret(module, *arrays)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    for e, a in zip(expected, executable(*arrays), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)
    return executable


@pytest.mark.parametrize("x_shape, w_shape, strides, padding, dilations", CONVS)
@pytest.mark.parametrize("batch, threads", [(1, 1), (1, 2), (3, 1), (3, 2)])
def test_convs_match_interpreter(monkeypatch, x_shape, w_shape, strides, padding, dilations, batch, threads):
    """NaN, inf and signed zeros at the start of x propagate as in the interpreter and stay out
    of the columns next to them; one GEMM per image; at 2 threads one image runs by chunks of
    output channels, three by chunks of images."""
    x_shape = (batch, *x_shape[1:])
    module = conv(x_shape, w_shape, strides, padding, dilations)
    (name,) = gemm_calls(module)
    out_shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    assert name.endswith("_" + "x".join(map(str, out_shape)))
    check_compiled(monkeypatch, module, sample(x_shape), threads=threads)


def test_schedule_runs_1x1s_and_narrow_outputs_as_the_gemm():
    def runs_gemm(x_shape, w_shape, strides=(1, 1), padding=(1, 1, 1, 1), groups=1, dtype="f32"):
        return bool(gemm_calls(conv(x_shape, w_shape, strides, padding, groups=groups, dtype=dtype)))

    assert runs_gemm((1, 64, 56, 56), (64, 64, 1, 1), padding=(0, 0, 0, 0))  # 1x1: any width
    assert runs_gemm((1, 64, 56, 56), (64, 64, 1, 1), strides=(2, 2), padding=(0, 0, 0, 0))
    assert runs_gemm((1, 8, 8, 8), (4, 8, 3, 3))  # 8 output columns
    assert runs_gemm((1, 8, 15, 15), (4, 8, 3, 3), strides=(2, 2))
    assert not runs_gemm((1, 8, 9, 9), (4, 8, 3, 3))  # 9 columns: the direct ukernel
    assert runs_gemm((1, 3, 224, 224), (64, 3, 3, 3), strides=(2, 2), padding=(0, 0, 0, 0))  # a stem
    assert not runs_gemm((1, 3, 224, 224), (32, 3, 3, 3), strides=(2, 2), padding=(0, 0, 0, 0))
    assert not runs_gemm((1, 4, 224, 224), (64, 4, 3, 3), strides=(2, 2), padding=(0, 0, 0, 0))
    assert runs_gemm((1, 8, 7, 7), (4, 4, 1, 1), padding=(0, 0, 0, 0), groups=2)  # grouped 1x1: a GEMM per group
    assert runs_gemm((1, 8, 7, 7), (4, 4, 1, 1), strides=(2, 2), padding=(0, 0, 0, 0), groups=2)
    assert not runs_gemm((1, 8, 7, 7), (4, 4, 3, 3), groups=2)  # grouped 3x3
    assert not runs_gemm((1, 8, 7, 7), (8, 1, 3, 3), groups=8)  # depthwise
    assert not runs_gemm((1, 8, 7, 7), (4, 8, 1, 1), padding=(0, 0, 0, 0), dtype="f64")


@pytest.mark.parametrize("avx512", [True, False])
def test_stems_of_more_taps_keep_the_conv_ukernels_on_any_cpu(monkeypatch, avx512):
    """Only stems of at most STEM_GEMM_TAPS taps run as the GEMM, with or without AVX-512: the
    7x7 and 11x11 stems take conv_lanes or the direct ukernel (faster than the GEMM on AVX2 too)."""
    def runs_gemm(x_shape, w_shape, strides, padding):
        return bool(gemm_calls(conv(x_shape, w_shape, strides, padding)))

    monkeypatch.setattr(schedule, "host_has_avx512", lambda: avx512)
    assert not runs_gemm((1, 3, 224, 224), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3))  # ResNet-50's, Inception's
    assert not runs_gemm((1, 3, 224, 224), (96, 3, 11, 11), (4, 4), (0, 0, 0, 0))  # AlexNet's
    assert runs_gemm((1, 3, 224, 224), (64, 3, 3, 3), (2, 2), (0, 0, 0, 0))  # SqueezeNet's: 27 taps


@pytest.mark.parametrize(
    "x_shape, w_shape, strides, padding",
    [
        ((2, 3, 37, 29), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3)),  # conv_lanes: 19 x 15 outputs, two images
        ((1, 3, 45, 50), (70, 3, 11, 11), (4, 4), (0, 1, 2, 0)),  # direct: 70 channels, 9 x 11, uneven padding
        ((1, 2, 23, 23), (64, 2, 7, 7), (2, 2), (3, 3, 3, 3)),  # conv_lanes: 12 x 12
    ],
)
@pytest.mark.parametrize("epilogue, threads", [("bias_relu", 1), ("residual_relu", 2)])
def test_stems_match_interpreter(monkeypatch, x_shape, w_shape, strides, padding, epilogue, threads):
    """Stems of many taps (on conv_lanes or the direct ukernel) with their epilogue in the tile,
    NaN, inf and signed zeros in x, at 1 and 2 threads (one image: chunks of output channels;
    two: of images)."""
    module = conv_block(x_shape, w_shape, strides, padding, epilogue=epilogue)
    out_shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    arrays = [sample(x_shape)] + ([sample(out_shape, seed=4)] if epilogue == "residual_relu" else [])
    check_compiled(monkeypatch, module, *arrays, threads=threads)


def test_one_image_splits_by_output_channels_with_its_epilogue(monkeypatch):
    """30 output channels at 2 threads: chunks of 16 and 14 (starting at multiples of 4: the
    16-byte alignment of w's 36-byte channels; the GEMM runs any count of rows), each calling the
    ukernel on all of x and on its channels of w, the bias, the residual and out."""
    x_shape = (1, 9, 6, 7)
    module = conv_block(x_shape, (30, 9, 1, 1), epilogue="residual_relu")
    arrays = (sample(x_shape), sample((1, 30, 6, 7), seed=4))
    executable, calls = compiled_calls(monkeypatch, module, *arrays)
    (step,) = executable.steps
    assert [begin for _, begin in step.kernel.chunks] == [0, 16]
    ukernel = f"{GEMM}eaddAP0.addS0R.maxS1C00000000_1x9x6x7_{{0}}x9x1x1_{{0}}x1x1_1x{{0}}x6x7_1x{{0}}x6x7".format
    assert calls == {
        "fused_conv2d_add_relu_0": ukernel(30),
        "fused_conv2d_add_relu_0_rows16": ukernel(16),
        "fused_conv2d_add_relu_0_rows14": ukernel(14),
    }


GROUPED = [
    # x, w, strides, groups: the GEMM's rows, columns and depth per group in the comment
    ((2, 12, 5, 7), (21, 4, 1, 1), (1, 1), 3),  # 7 rows (6 + 1), 35 columns, 4 deep; two images
    ((1, 34, 9, 9), (26, 17, 1, 1), (1, 1), 2),  # 13 rows, 81 columns (5 x 16 + a dot column)
    ((1, 24, 7, 7), (20, 6, 1, 1), (1, 1), 4),  # 5 rows, 49 columns (a 7x7 output)
    ((1, 8, 13, 11), (12, 2, 1, 1), (2, 2), 4),  # 3 rows, 7 x 6 columns of an im2col copy
    ((1, 600, 3, 5), (14, 300, 1, 1), (1, 1), 2),  # 7 rows, 300 deep: k in two blocks
]


def grouped_block(x_shape, w_shape, strides, groups, tail):
    """@main(x[, residual]) = conv2d(x, w, groups) + bias, relu ("bias_relu"); batch norm,
    relu ("batch_norm_relu"); + bias + residual, relu ("residual_relu"); w and the tail's
    values constants."""
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x_shape), g.constant(sample(w_shape, seed=1, specials=False)), strides=strides, groups=groups)
    channels = w_shape[0]
    if tail == "batch_norm_relu":
        scale, shift, mean = (g.constant(sample((channels,), seed=s, specials=False)) for s in (4, 5, 6))
        var = g.constant(np.abs(sample((channels,), seed=7, specials=False)) + 0.1)
        return g.finish(g.relu(g.batch_norm(y, scale, shift, mean, var, epsilon=1e-5)))
    y = g.add(y, g.constant(sample((channels, 1, 1), seed=2, specials=False)))
    if tail == "residual_relu":
        y = g.add(y, g.input("residual", tuple(y.type.get_shape())))
    return g.finish(g.relu(y))


@pytest.mark.parametrize("x_shape, w_shape, strides, groups", GROUPED)
@pytest.mark.parametrize("tail, threads", [("bias_relu", 1), ("batch_norm_relu", 2), ("residual_relu", 1), ("residual_relu", 2)])
def test_grouped_1x1s_match_interpreter(monkeypatch, x_shape, w_shape, strides, groups, tail, threads):
    """A grouped 1x1 is one GEMM per group, its tail in the tile (per-channel values at the
    group's channels); NaN, inf and signed zeros in the first and the last group's channels stay
    in their own outputs; at 2 threads one image runs by chunks of groups, two by images."""
    module = grouped_block(x_shape, w_shape, strides, groups, tail)
    (name,) = gemm_calls(module)
    assert "_e" in name
    x = sample(x_shape)
    x[:, -1, 1, :4] = [np.nan, np.inf, -np.inf, -0.0]
    out_shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    arrays = [x] + ([sample(out_shape, seed=4)] if tail == "residual_relu" else [])
    check_compiled(monkeypatch, module, *arrays, threads=threads)


@st.composite
def grouped_1x1s(draw):
    """x, w, strides and groups of a grouped 1x1 (2 to 9 input and 1 to 9 output channels per group)."""
    groups, stride = draw(st.integers(2, 4)), draw(st.integers(1, 2))
    x_shape = (draw(st.integers(1, 2)), draw(st.integers(2, 9)) * groups, draw(st.integers(1, 9)), draw(st.integers(1, 12)))
    w_shape = (draw(st.integers(1, 9)) * groups, x_shape[1] // groups, 1, 1)
    return x_shape, w_shape, (stride, stride), groups


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # min_work=0 each time
@given(conv=grouped_1x1s(), threads=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_any_grouped_1x1_matches_interpreter(monkeypatch, conv, threads, seed):
    """Any grouped 1x1 with bias and relu is one GEMM call that computes what the interpreter does."""
    x_shape, w_shape, strides, groups = conv
    module = grouped_block(x_shape, w_shape, strides, groups, "bias_relu")
    assert len(gemm_calls(module)) == 1
    x = np.random.default_rng(seed).standard_normal(x_shape).astype(np.float32)
    check_compiled(monkeypatch, module, x, threads=threads)


def tile_function(ir: str, rows: int, columns: int) -> str:
    """The text of the ukernel's tile function of `rows` x `columns`."""
    return re.search(rf"define internal void @\S+\.tile{rows}x{columns}\(.*?\n}}", ir, re.S)[0]


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_tiles_prefetch_the_next_tiles_out_and_residual_lines(monkeypatch, prefetch, threads):
    """20 output channels on 13 x 11 = 143 columns: row tiles of 6, 6, 6 and 2. Each full tile
    but the last prefetches the next one's lines, 6 rows on: out's for writing, the residual's for
    reading, each vector's first and last float (rows of 143 floats do not start on a line); the
    last full tile and the tile of 2 rows their own (ahead 0), so that no prefetch passes the
    last row. Each k step prefetches b's line of the next panel, none in the last (edge) panel.
    None with `tile_epilogue.PREFETCH`, `packed_gemm.PREFETCH_B` and `PREFETCH_B_ROWS_AHEAD` off.
    NaN and inf in x, 1 and 2 threads."""
    monkeypatch.setattr(tile_epilogue, "PREFETCH", prefetch)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B", prefetch)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_ROWS_AHEAD", 0)
    x_shape = (1, 9, 13, 11)
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, (20, 9, 1, 1))
    ir = ukernel_ir()
    if not prefetch:
        assert "llvm.prefetch" not in ir
    else:
        full_tile = tile_function(ir, 6, packed_gemm.PANEL)
        lines = 6 * packed_gemm.PANEL // 16 * 2
        residual = len(re.findall(r"prefetch\.p0\(ptr %v\d+, i32 0, i32 3, i32 1\)", full_tile))
        assert full_tile.count("i32 1, i32 3, i32 1)") == residual == lines
        has_next = set(re.findall(r"(%v\d+) = icmp ult i64 %i\d+, 2\n", ir))
        aheads = re.findall(r"= select i1 (%v\d+), i64 (\d+), i64 0\n", ir)
        assert aheads and {ahead for _, ahead in aheads} == {str(6 * 143)} and {c for c, _ in aheads} <= has_next
        assert re.findall(r"\.tile2x\d+\((?:\w+ [^,]+, ){5}i64 (\w+),", ir) == ["0"] * 2
        # b: each k step, the next panel's line (16 floats on; 0 in the edge panel of 15 columns)
        assert "%b.next = getelementptr float, ptr %b.ptr.0, i64 %b.ahead" in full_tile
        b_aheads = re.findall(r"\.tile\dx(\d+)\((?:\w+ [^,]+, ){6}i64 (\w+),", ir)
        assert sorted(set(b_aheads)) == [("15", "0"), (str(packed_gemm.PANEL), str(packed_gemm.PANEL))]
    out_shape = (1, 20, 13, 11)
    check_compiled(monkeypatch, module, sample(x_shape), sample(out_shape, seed=4), threads=threads)


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_tiles_of_one_panel_prefetch_the_next_tiles_a(monkeypatch, prefetch, threads):
    """40 output channels on 7 x 7 = 49 columns, one panel or fewer: row tiles of 6 (six) and of
    4, each of a's rows read by one tile only. Each k step of a full tile but the last prefetches
    a line of the next one's a, 6 rows of 24 floats on: its row k mod 6 at column k, so every
    line of its rows twice or more; the last full tile and the tile of 4 rows their own rows
    (ahead 0), so that no prefetch passes a's last row. None with `packed_gemm.PREFETCH_A` off;
    none on 143 columns (the test above). Bias, residual and relu; NaN and inf in x; 1 and 2
    threads (by output channels)."""
    monkeypatch.setattr(packed_gemm, "PREFETCH_A", prefetch)
    x_shape = (1, 24, 7, 7)
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, (40, 24, 1, 1))
    ir = ukernel_ir()
    assert ("%a.row = urem i64 %k, 6" in tile_function(ir, 6, 49)) == prefetch
    assert ("%a.row = urem i64 %k, 4" in tile_function(ir, 4, 49)) == prefetch
    if prefetch:
        assert "%a.next.row = add i64 %a.row.at, %a.ahead" in tile_function(ir, 6, 49)
        aheads = dict(re.findall(r"\.tile(\d)x49\(ptr [^,]+, ptr [^,]+, ptr [^,]+, i64 [^,]+, i1 [^,]+, i64 (%?\w+),", ir))
        assert aheads["4"] == "0"
        assert re.search(rf"{aheads['6']} = select i1 %v\d+, i64 {6 * 24}, i64 0\n", ir)
    assert ("%a.row" in tile_function(residual_relu_gemm(monkeypatch, (1, 24, 9, 9), (40, 24, 1, 1))[1](), 6, packed_gemm.PANEL)) is False
    check_compiled(monkeypatch, module, sample(x_shape), sample((1, 40, 7, 7), seed=4), threads=threads)


@pytest.mark.parametrize("channels", [40, 7, 300])
@pytest.mark.parametrize("threads", [1, 2])
def test_k_steps_prefetch_b_rows_ahead(monkeypatch, channels, threads):
    """A 1x1 of `channels` -> 20 on 13 x 11 = 143 columns: each k step of a tile prefetches the
    first line of each of its vectors PREFETCH_B_ROWS_AHEAD (16) rows of b on, 16 x 143 floats;
    the k block's last 16 steps (all 7 of 7 channels; in 300, the last of each block of 256 and
    of the 44 after) their own row (`%k >= %kc - 16`, signed), so that no prefetch passes b.
    With bias, residual and relu; NaN and inf in x and the residual; 1 and 2 threads (chunks
    of positions, whose b rows stay 143 floats apart). None with PREFETCH_B_ROWS_AHEAD 0."""
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_ROWS_AHEAD", 16)
    x_shape = (1, channels, 13, 11)
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, (20, channels, 1, 1))
    full_tile = tile_function(ukernel_ir(), 6, packed_gemm.PANEL)
    assert "%kc.ahead = sub i64 %kc, 16" in full_tile
    assert "%b.down.last = icmp sge i64 %k, %kc.ahead" in full_tile
    assert f"%b.down = select i1 %b.down.last, i64 0, i64 {16 * 143}" in full_tile
    prefetched = re.findall(r"%b\.down\.(\d+) = getelementptr float, ptr %b\.ptr\.\1, i64 %b\.down", full_tile)
    assert len(prefetched) == packed_gemm.PANEL // 16
    assert full_tile.count("call void @llvm.prefetch.p0(ptr %b.down.") == len(prefetched)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_ROWS_AHEAD", 0)
    assert "%b.down" not in ukernel_ir()
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_ROWS_AHEAD", 16)
    check_compiled(monkeypatch, module, sample(x_shape), sample((1, 20, 13, 11), seed=4), threads=threads)


@pytest.mark.parametrize("far_line", [True, False])
@pytest.mark.parametrize("batch, threads", [(1, 1), (1, 2), (2, 1)])
def test_1x1_prefetching_b_far_line_matches_interpreter(monkeypatch, far_line, batch, threads):
    """A 1x1 of 7 -> 16 channels on 33 x 33 = 1089 columns: b's rows 1089 floats apart, not on
    lines and more than a page apart, so that each k step prefetches the line of the next
    panel's last float (PANEL + 15 floats on), clamped to the row's last float (n - 1) where
    that passes the row: in the last full panels before the edge panel of 1089 % PANEL columns.
    With bias, residual and relu; 1 and 2 images, 1 and 2 threads (one image by chunks of
    positions, whose columns end the clamp); NaN and inf in x and the residual."""
    monkeypatch.setattr(packed_gemm, "PREFETCH_B", True)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_FAR_LINE", far_line)
    x_shape, n = (batch, 7, 33, 33), 33 * 33
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, (16, 7, 1, 1))
    far = re.search(
        rf"(%v\d+) = add i64 (%v\d+), {packed_gemm.PANEL + 15}\n\s*(%v\d+) = icmp ult i64 \1, {n}\n"
        rf"\s*(%v\d+) = select i1 \3, i64 \1, i64 {n - 1}\n\s*(%v\d+) = sub i64 \4, \2\n",
        ukernel_ir(),
    )
    assert bool(far) == far_line
    if far_line:
        assert re.search(rf"\.tile6x{packed_gemm.PANEL}\([^)]*, i64 {far[5]},", ukernel_ir())
    check_compiled(monkeypatch, module, sample(x_shape), sample((batch, 16, 33, 33), seed=4), threads=threads)


@pytest.mark.parametrize("conflict_depth", [64, None])
@pytest.mark.parametrize("threads", [1, 2])
def test_1x1_on_rows_of_b_sharing_l1_sets_matches_interpreter(monkeypatch, conflict_depth, threads):
    """A 1x1 of 150 input channels on an 8 x 8 output (b's rows 4 lines apart: k in blocks of
    CONFLICT_DEPTH, 64 + 64 + 22) with bias, residual and relu in the tile, against the
    interpreter with NaN and inf in x and the residual, 1 and 2 threads (chunks of output
    channels); the ukernel differs from the one of DEPTH-step blocks."""
    monkeypatch.setattr(packed_gemm, "CONFLICT_DEPTH", conflict_depth)
    x_shape = (1, 150, 8, 8)
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, (13, 150, 1, 1))
    ir = ukernel_ir()
    monkeypatch.setattr(packed_gemm, "CONFLICT_DEPTH", None if conflict_depth else 64)
    assert ukernel_ir() != ir
    monkeypatch.setattr(packed_gemm, "CONFLICT_DEPTH", conflict_depth)
    check_compiled(monkeypatch, module, sample(x_shape), sample((1, 13, 8, 8), seed=4), threads=threads)


@pytest.mark.parametrize("row_block", [24, None])
@pytest.mark.parametrize("groups, batch, threads", [(1, 1, 1), (1, 1, 2), (1, 2, 1), (2, 1, 1), (2, 1, 2)])
def test_row_blocks_on_row_major_b_match_interpreter(monkeypatch, row_block, groups, batch, threads):
    """A 1x1 of 7 -> 53 channels at 9 x 11 (b's k block 7 x 99 floats), or of 2 groups of 4 -> 30:
    with ROW_MAJOR_ROW_BLOCK 24, a group's rows in blocks of 24 and the rest (24, 24, 5; 24, 6),
    each pass over the panels from its own output channel (the bias and the residual at the
    block's rows); the ukernel differs from one without blocks, and from one whose b's block
    passes ROW_MAJOR_B_BYTES, which keeps all rows. With bias, residual and relu; NaN and inf in
    x and the residual; 1 and 2 threads (one image by chunks of output channels or of groups),
    1 and 2 images."""
    monkeypatch.setattr(packed_gemm, "ROW_MAJOR_ROW_BLOCK", row_block)
    x_shape, w_shape = ((batch, 7, 9, 11), (53, 7, 1, 1)) if groups == 1 else ((batch, 8, 9, 11), (60, 4, 1, 1))
    module, ukernel_ir = residual_relu_gemm(monkeypatch, x_shape, w_shape, groups)
    ir = ukernel_ir()
    monkeypatch.setattr(packed_gemm, "ROW_MAJOR_ROW_BLOCK", None if row_block else 24)
    assert ukernel_ir() != ir
    monkeypatch.setattr(packed_gemm, "ROW_MAJOR_ROW_BLOCK", 24)
    with monkeypatch.context() as small_l2:
        small_l2.setattr(packed_gemm, "ROW_MAJOR_B_BYTES", x_shape[1] // groups * 99 * 4 - 1)
        assert (ukernel_ir() == ir) == (row_block is None)
    monkeypatch.setattr(packed_gemm, "ROW_MAJOR_ROW_BLOCK", row_block)
    out_shape = (batch, w_shape[0], 9, 11)
    check_compiled(monkeypatch, module, sample(x_shape), sample(out_shape, seed=4), threads=threads)
