"""The depthwise convolution ukernel: f32 conv2d groups with one input channel per group,
compiled on the cpu backend (one thread, and row chunks over two), against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from graphopt.dialects.shapes import conv2d
from hypothesis import given, settings
from hypothesis import strategies as st
import graphopt
from graphopt.lowering import depthwise_conv, direct_conv, ukernels
from graphopt.lowering.llvm_text import VECTOR
from test_compile_anchors import array
from test_conv_pool_kernels import check_group, group_module, in_lane, split_small_kernels, with_specials  # noqa: F401 (fixtures)
from test_graph_to_linalg import sample, tensor
from test_packed_gemm import call_ukernel
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.dialects.func import FuncOp

from graphopt.dialects import graph
from graphopt.lowering.convert_graph_to_linalg import lower_group

EPILOGUES = {
    "bias": "    %y = graph.add %c, %a2 : ({out}, {bias}) -> {out}\n",
    "bias_relu6": (
        "    %s = graph.add %c, %a2 : ({out}, {bias}) -> {out}\n"
        "    %y = graph.clip %s {{min = 0.0 : f64, max = 6.0 : f64}} : {out}\n"
    ),
    "bias_silu": (
        "    %s = graph.add %c, %a2 : ({out}, {bias}) -> {out}\n"
        "    %g = graph.sigmoid %s : {out}\n"
        "    %y = graph.mul %s, %g : ({out}, {out}) -> {out}\n"
    ),
}


def depthwise_group(x, w, strides, dilations, padding, epilogue):
    """@main(x, w, bias) = one group: conv2d with groups = x's channels, then the epilogue."""
    out = conv2d(x, w, strides, dilations, padding, x[1])
    bias = (out[1], 1, 1)
    attributes = (
        f"strides = {array(strides)}, dilations = {array(dilations)}, padding = {array(padding)}, groups = {x[1]} : i64"
    )
    body = f"    %c = graph.conv2d %a0, %a1 {{{attributes}}} : ({tensor(x)}, {tensor(w)}) -> {tensor(out)}\n"
    body += EPILOGUES[epilogue].format(out=tensor(out), bias=tensor(bias))
    return group_module([x, w, bias], body, out), bias


def ukernel_calls(module) -> list[str]:
    """The ukernels the group's kernel calls."""
    main = next(op for op in module.ops if isinstance(op, FuncOp))
    group = next(op for op in main.body.block.ops if isinstance(op, graph.FusedOp))
    return [op.callee.string_value() for op in lower_group(group, "k").walk() if isinstance(op, func.CallOp)]


DEPTHWISE = [
    # x, w (out channels = multiplier x channels), strides, dilations, padding
    ((3, 4, 9, 11), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # rows shorter than a vector, odd batch
    ((2, 3, 10, 37), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),  # channel multiplier 2, stride 2
    ((1, 2, 13, 70), (2, 1, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # vectors inside the row: a loop
    ((1, 2, 12, 80), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),  # the same at stride 2, multiplier 2
    ((2, 3, 8, 21), (3, 1, 5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),  # 5x5
    ((2, 3, 15, 29), (3, 1, 5, 5), (2, 2), (1, 1), (2, 2, 2, 2)),  # 5x5/2: blocks of 3 rows, then 2 left
    ((1, 2, 14, 9), (4, 1, 5, 3), (2, 2), (2, 1), (1, 0, 3, 2)),  # 5 rows dilated, uneven padding
    ((1, 2, 11, 35), (2, 1, 3, 3), (2, 1), (2, 2), (0, 3, 2, 1)),  # asymmetric padding, dilation 2
    ((2, 2, 7, 7), (2, 1, 3, 3), (1, 2), (1, 1), (0, 0, 0, 0)),  # no padding
    ((1, 3, 9, 40), (3, 1, 1, 3), (3, 2), (1, 1), (0, 1, 0, 1)),  # 1x3, row stride 3
    ((1, 2, 5, 6), (2, 1, 3, 3), (1, 1), (1, 1), (4, 4, 4, 4)),  # windows wholly in the padding
]


@pytest.mark.parametrize("x, w, strides, dilations, padding", DEPTHWISE)
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_depthwise_matches_interpreter(x, w, strides, dilations, padding, epilogue):
    """x starts with NaN, inf, -inf and signed zeros; the bias is finite, so that no output plane
    is NaN or inf throughout (a special bias would hide its plane's sums)."""
    module, bias = depthwise_group(x, w, strides, dilations, padding, epilogue)
    (name,) = ukernel_calls(module)
    assert name.startswith(f"{depthwise_conv.PREFIX}_")
    check_group(module, [sample(x), sample(w, seed=1, specials=False), sample(bias, seed=2, specials=False)])


def test_depthwise_inf_weight_times_padding_is_nan():
    """As in the interpreter's zero-padded windows, 0 x inf is NaN: on padded rows and columns alike."""
    x, w = (1, 2, 6, 20), (2, 1, 3, 3)
    module, bias = depthwise_group(x, w, (1, 1), (1, 1), (1, 1, 1, 1), "bias")
    weights = sample(w, seed=1, specials=False)
    weights[0, 0, 0, 0] = np.inf  # top-left tap: row 0 and column 0 of the output read padding
    check_group(module, [sample(x, specials=False), weights, sample(bias, seed=2)])


def test_column_stride_three_takes_the_direct_ukernel():
    x, w = (1, 2, 9, 20), (2, 1, 3, 3)
    module, bias = depthwise_group(x, w, (1, 3), (1, 1), (1, 1, 1, 1), "bias")
    (name,) = ukernel_calls(module)
    assert name.startswith(f"{direct_conv.PREFIX}_")
    check_group(module, [sample(x), sample(w, seed=1, specials=False), sample(bias, seed=2)])


def test_chunk_name_keeps_the_attributes():
    """A row chunk (fewer images) calls the ukernel with the same strides, dilations and padding."""
    types = [MemRefType(f32, shape) for shape in ((4, 8, 9, 9), (16, 1, 3, 3), (4, 16, 5, 5))]
    name = depthwise_conv.name(types, (2, 2), (1, 1), (1, 0, 1, 0))
    chunk = [MemRefType(f32, (1, *t.get_shape()[1:])) if i != 1 else t for i, t in enumerate(types)]
    assert depthwise_conv.chunk_name(name, chunk) == "graphopt_sconv_depthwise_s2x2_d1x1_p1x0_1x8x9x9_16x1x3x3_1x16x5x5"


def test_row_blocks(monkeypatch):
    """Stride 1 runs blocks of 4 output rows (the last block the 3 rows left of 7), a function
    for each pattern of the input rows they read inside x; stride 2 runs single rows, or blocks
    of 3 with windows of 5 rows or more (28 = 9 x 3 + 1). Without AVX-512 each has a twin of
    full loads for the planes between x's first and last (`_full`)."""
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: True)

    def functions(x, w, strides, padding, out):
        types = [MemRefType(f32, shape) for shape in (x, w, out)]
        name = depthwise_conv.name(types, strides, (1, 1), padding)
        ir = depthwise_conv.ukernel_ir(name, types)
        return {line.split("@")[1].split("(")[0].removeprefix(name) for line in ir.splitlines() if line.startswith("define")}

    assert functions((1, 8, 7, 7), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 8, 7, 7)) == {"", ".rows4_011111", ".rows3_11110"}
    assert functions((1, 8, 56, 56), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 8, 56, 56)) == {
        "", ".rows4_011111", ".rows4_111111", ".rows4_111110"
    }
    assert functions((1, 8, 56, 56), (8, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 8, 28, 28)) == {"", ".rows1_011", ".rows1_111"}
    assert functions((1, 8, 56, 56), (8, 1, 5, 5), (2, 2), (2, 2, 2, 2), (1, 8, 28, 28)) == {
        "", ".rows3_001111111", ".rows3_111111111", ".rows1_11110"
    }
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: False)
    assert functions((1, 8, 7, 7), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 8, 7, 7)) == {
        "", ".rows4_011111", ".rows3_11110", ".rows4_011111_full", ".rows3_11110_full"
    }
    assert functions((1, 2, 7, 7), (2, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 2, 7, 7)) == {"", ".rows4_011111", ".rows3_11110"}
    assert functions((4, 8, 3, 5), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (4, 8, 3, 5)) == {"", ".rows3_01110"}


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("x, w, strides, dilations, padding", DEPTHWISE)
def test_either_load_form_matches_interpreter(monkeypatch, masked, x, w, strides, dilations, padding):
    """Taps past x's rows as masked loads (hosts with AVX-512), or on the planes between x's
    first and last as full loads whose lanes outside the row are selected away (without), on
    any host; NaN and inf all over x, so that lanes read from neighbouring rows and planes would
    show."""
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: masked)
    module, bias = depthwise_group(x, w, strides, dilations, padding, "bias")
    arrays = [with_specials(x, 0), sample(w, seed=1, specials=False)]
    (expected,) = graphopt.interpret(module, *arrays, np.zeros(bias, np.float32))
    out = np.full(expected.shape, np.nan, np.float32)
    name = depthwise_conv.name([MemRefType(f32, a.shape) for a in (*arrays, out)], strides, dilations, padding)
    call_ukernel(name, [*arrays, out])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, equal_nan=True)
    full = any(line.startswith("define") and "_full(" in line for line in ukernels.ukernel_ir(
        name, [MemRefType(f32, a.shape) for a in (*arrays, out)]).splitlines())
    assert full == (not masked and x[0] * x[1] > 2 and x[2] * x[3] >= 16)


COLUMN_STRIDE_2 = [case for case in DEPTHWISE if case[2][1] == 2]


def test_in_lane_order_is_one_shuffle_per_register():
    """A tap's lane j (`_in_lane_taps`) reads float 2 x IN_LANE_ORDER[j] (+ 1) of the 32 loaded:
    from the two registers of its own 8 lanes, in its own 128-bit half; and the order undoes itself."""
    order = depthwise_conv.IN_LANE_ORDER
    assert sorted(order) == list(range(VECTOR)) and [order[lane] for lane in order] == list(range(VECTOR))
    for lane, column in enumerate(order):
        for source in (2 * column, 2 * column + 1):
            assert source // 16 == lane // 8 and source % 8 // 4 == lane % 8 // 4


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("x, w, strides, dilations, padding", COLUMN_STRIDE_2)
def test_stride_2_taps_match_interpreter(in_lane, monkeypatch, masked, x, w, strides, dilations, padding):
    """Either form of stride-2 taps, with either form of loads past x's rows, on x with NaN and inf all over."""
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: masked)
    module, bias = depthwise_group(x, w, strides, dilations, padding, "bias")
    arrays = [with_specials(x, 0), sample(w, seed=1, specials=False)]
    (expected,) = graphopt.interpret(module, *arrays, np.zeros(bias, np.float32))
    out = np.full(expected.shape, np.nan, np.float32)
    types = [MemRefType(f32, a.shape) for a in (*arrays, out)]
    name = depthwise_conv.name(types, strides, dilations, padding)
    call_ukernel(name, [*arrays, out])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, equal_nan=True)
    ir = ukernels.ukernel_ir(name, types)
    assert (", <16 x i32> <i32 0, i32 1, i32 4, i32 5, i32 2," in ir) == in_lane


@pytest.mark.parametrize("epilogue", ["bias_relu6", "bias_silu"])
def test_stride_2_epilogues_match_interpreter(in_lane, epilogue):
    """The epilogues on the stored lanes, in column order: a tile's (relu6) and a plane's (SiLU),
    on finite x (NaN and inf: `test_stride_2_taps_match_interpreter`)."""
    x, w, strides, dilations, padding = ((2, 3, 12, 40), (3, 1, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1))
    module, bias = depthwise_group(x, w, strides, dilations, padding, epilogue)
    check_group(module, [sample(x, specials=False), sample(w, seed=1, specials=False), sample(bias, seed=2, specials=False)])


@st.composite
def depthwise_convs(draw):
    """x, w, strides, dilations and padding of a depthwise conv2d (column stride 1 or 2)."""
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, 3)) for _ in range(4))
    sizes = []
    for k, s, d, before, after in zip(kernel, strides, dilations, padding[:2], padding[2:]):
        out, extra = draw(st.integers(1, 40)), draw(st.integers(0, s - 1))
        sizes.append(max(1, (out - 1) * s + (k - 1) * d + 1 - before - after + extra))
    channels = draw(st.integers(1, 4))
    w = (channels * draw(st.integers(1, 3)), 1, *kernel)
    return (draw(st.integers(1, 3)), channels, *sizes), w, strides, dilations, padding


@settings(max_examples=12, deadline=None)
@given(conv=depthwise_convs())
def test_any_depthwise_conv_matches_interpreter(conv):
    x, w, strides, dilations, padding = conv
    module, bias = depthwise_group(x, w, strides, dilations, padding, "bias")
    (name,) = ukernel_calls(module)
    assert name.startswith(f"{depthwise_conv.PREFIX}_")
    check_group(module, [sample(x), sample(w, seed=1, specials=False), sample(bias, seed=2)])
