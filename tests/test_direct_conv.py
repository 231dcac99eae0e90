"""The direct convolution ukernel: deep f32 conv2d groups compiled on the cpu backend, against the interpreter."""

from __future__ import annotations

import contextlib
import ctypes
import re

import numpy as np
import pytest
from graphopt.dialects.shapes import conv2d
from graphopt.lowering import direct_conv
from hypothesis import given, settings
from hypothesis import strategies as st
from test_compile_anchors import array
from test_conv_pool_kernels import group_module
from test_graph_to_linalg import sample, tensor
from test_packed_gemm import kernels
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import i64

import graphopt
from graphopt.backends import cpu
from graphopt.builder import GraphBuilder
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.parsing import make_context
from graphopt.transforms.canonicalize import CanonicalizePass


@pytest.fixture(autouse=True, scope="module")
def direct_ukernel_only():
    """These are the direct ukernel's tests: the convs the cpu schedule runs as the packed GEMM
    (1x1s and narrow outputs, `CpuSchedule.conv_gemm`; test_conv_gemm.py), as `conv_lanes`
    (`CpuSchedule.lanes_conv`; test_conv_lanes.py) or as `conv_winograd` (test_conv_winograd.py)
    take it here too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CpuSchedule, "winograd_conv", lambda self, op: False)
        patch.setattr(CpuSchedule, "conv_gemm", lambda self, op: False)
        patch.setattr(CpuSchedule, "lanes_conv", lambda self, op: False)
        yield


@contextlib.contextmanager
def garbage_allocations():
    """Memory that the process allocates holds garbage (glibc's M_PERTURB) instead of the zeros
    of fresh pages: a stride-phase buffer element that neither its fill nor the copy of x
    writes then shows in the output."""
    libc = ctypes.CDLL(None)
    m_perturb = -6
    libc.mallopt(m_perturb, 0xA5)
    yield
    libc.mallopt(m_perturb, 0)


def conv_layer(
    x_shape,
    w,
    strides=(1, 1),
    dilations=(1, 1),
    padding=(0, 0, 0, 0),
    groups=1,
    w_is_input=False,
):
    """@main(x) = conv2d(x, w) + bias, w and bias constants (w an input when asked)."""
    dtype = str(w.dtype).replace("float", "f")
    g = GraphBuilder()
    x = g.input("x", x_shape, dtype)
    weights = g.input("w", w.shape, dtype) if w_is_input else g.constant(w)
    y = g.conv2d(
        x, weights, strides=strides, dilations=dilations, padding=padding, groups=groups
    )
    bias = g.constant(sample((w.shape[0], 1, 1), dtype, seed=3, specials=False))
    return g.finish(g.add(y, bias))


def direct_calls(module) -> list[func.CallOp]:
    """The calls of the direct conv ukernel after fuse and convert-graph-to-linalg."""
    calls = [
        op
        for kernel in kernels(module)
        for op in kernel.walk()
        if isinstance(op, func.CallOp)
    ]
    return [
        op
        for op in calls
        if op.callee.string_value().startswith(f"{direct_conv.PREFIX}_")
    ]


def check_compiled(module, *arrays, threads=1):
    expected = graphopt.interpret(module, *arrays)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    for e, a in zip(expected, executable(*arrays), strict=True):
        # sums of up to hundreds of products in another order (FMAs)
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)
    return executable


def tiles(call: func.CallOp) -> set[tuple[int, ...]]:
    """The register tiles (output channels, rows, vectors, lanes of the last vector) of the called ukernel."""
    ir = direct_conv.ukernel_ir(
        call.callee.string_value(), [v.type for v in call.arguments]
    )
    return {
        tuple(map(int, t))
        for t in re.findall(
            r"define internal void @[\w.]+\.tile(\d+)x(\d+)x(\d+)x(\d+)\(", ir
        )
    }


@pytest.mark.parametrize(
    "out_width, tile_variants",
    [
        # 7 rows of 5 or 16 columns: tiles of 3 rows and a 1-row rest; 13 channels: 8 and 5
        (5, {(8, 3, 1, 5), (8, 1, 1, 5), (5, 3, 1, 5), (5, 1, 1, 5)}),
        (16, {(8, 3, 1, 16), (8, 1, 1, 16), (5, 3, 1, 16), (5, 1, 1, 16)}),
        (17, {(8, 1, 2, 1), (5, 1, 2, 1)}),
        (32, {(8, 1, 2, 16), (5, 1, 2, 16)}),
        (48, {(8, 1, 3, 16), (5, 1, 3, 16)}),
        # column groups of 3 vectors, then the rest of the row
        (50, {(8, 1, 3, 16), (8, 1, 1, 2), (5, 1, 3, 16), (5, 1, 1, 2)}),
        (64, {(8, 1, 3, 16), (8, 1, 1, 16), (5, 1, 3, 16), (5, 1, 1, 16)}),
        (100, {(8, 1, 3, 16), (8, 1, 1, 4), (5, 1, 3, 16), (5, 1, 1, 4)}),
    ],
)
def test_output_widths_reach_every_tile_variant(out_width, tile_variants, monkeypatch):
    """AVX-512's tile of 8 channels x 3 vectors (on any host: the tile shape changes no result)."""
    monkeypatch.setattr(direct_conv, "OUT_CHANNELS", 8)
    monkeypatch.setattr(direct_conv, "VECTORS", 3)
    x_shape = (3, 8, 9, out_width + 2)
    module = conv_layer(x_shape, sample((13, 8, 3, 3), seed=1, specials=False))
    (call,) = direct_calls(module)
    assert tiles(call) == tile_variants
    check_compiled(module, sample(x_shape, specials=False))


@pytest.mark.parametrize(
    "out_width, tile_variants",
    [
        (5, {(4, 1, 1, 5), (1, 1, 1, 5)}),  # 13 channels: 4, 4, 4 and 1
        (50, {(4, 1, 1, 16), (4, 1, 1, 2), (1, 1, 1, 16), (1, 1, 1, 2)}),
    ],
)
def test_avx2_tile_variants(out_width, tile_variants, monkeypatch):
    """The tile of hosts without AVX-512: 4 channels x 1 vector, one row."""
    monkeypatch.setattr(direct_conv, "OUT_CHANNELS", 4)
    monkeypatch.setattr(direct_conv, "VECTORS", 1)
    x_shape = (2, 8, 5, out_width + 2)
    module = conv_layer(x_shape, sample((13, 8, 3, 3), seed=1))
    (call,) = direct_calls(module)
    assert tiles(call) == tile_variants
    check_compiled(module, sample(x_shape))


CONVOLUTIONS = [
    # x, w, strides, dilations, padding
    # a 1x1 window, deep enough through its 64 channels
    ((1, 64, 7, 5), (3, 64, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    # MNIST's second conv
    ((3, 8, 14, 14), (16, 8, 5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    ((1, 4, 4, 34), (8, 4, 5, 5), (1, 1), (1, 1), (2, 1, 0, 1)),
    ((1, 10, 12, 17), (3, 10, 7, 1), (1, 1), (1, 1), (3, 0, 3, 0)),
    ((2, 16, 11, 33), (8, 16, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((3, 8, 9, 52), (9, 8, 3, 3), (2, 1), (1, 1), (0, 0, 1, 0)),
    ((1, 8, 12, 20), (16, 8, 3, 3), (1, 1), (2, 2), (2, 2, 2, 2)),
    # dilated taps land in other stride phases
    ((2, 12, 13, 14), (5, 12, 3, 2), (2, 2), (2, 3), (0, 1, 2, 0)),
    # strides of 3 and 2 over a 4x4 window
    ((1, 4, 9, 30), (6, 4, 4, 4), (3, 2), (1, 1), (1, 0, 0, 2)),
]


@pytest.mark.parametrize("x_shape, w_shape, strides, dilations, padding", CONVOLUTIONS)
def test_conv_matches_interpreter(x_shape, w_shape, strides, dilations, padding):
    w = sample(w_shape, seed=1, specials=False)
    module = conv_layer(x_shape, w, strides, dilations, padding)
    (call,) = direct_calls(module)
    assert call.arguments[-1].type.get_shape() == conv2d(
        x_shape, w_shape, strides, dilations, padding, 1
    )
    check_compiled(module, sample(x_shape, specials=False))


@pytest.mark.parametrize(
    "x_shape, w_shape, pads, padding, strides",
    [
        ((2, 8, 6, 9), (8, 8, 3, 3), (1, 2, 0, 1), (1, 0, 1, 0), (1, 1)),
        ((1, 7, 9, 41), (4, 7, 3, 5), (2, 0, 0, 3), (0, 2, 1, 2), (1, 2)),
    ],
)
def test_zero_pad_in_the_group_folds_into_padding(
    x_shape, w_shape, pads, padding, strides
):
    """The kernel's only temporary of floats is the phases buffer (the others, of i64, only give
    loops their bounds: `Kernel.extent`): the graph.pad, folded into the conv by canonicalize (as
    compile runs it), is not materialized."""
    top, left, bottom, right = pads
    padded = (*x_shape[:2], x_shape[2] + top + bottom, x_shape[3] + left + right)
    out = conv2d(padded, w_shape, strides, (1, 1), padding, 1)
    body = (
        f"    %p = graph.pad %a0 {{pads = {array((0, 0, top, left, 0, 0, bottom, right))}, value = 0.0 : f64}}"
        f" : ({tensor(x_shape)}) -> {tensor(padded)}\n"
        f"    %y = graph.conv2d %p, %a1 {{padding = {array(padding)}, strides = {array(strides)}}}"
        f" : ({tensor(padded)}, {tensor(w_shape)}) -> {tensor(out)}\n"
    )
    module = group_module([x_shape, w_shape], body, out)
    CanonicalizePass().apply(make_context(), module)
    (kernel,) = (op for op in kernels(module) if not op.is_declaration)
    (call,) = (op for op in kernel.walk() if isinstance(op, func.CallOp))
    (alloc,) = (op for op in kernel.walk() if isinstance(op, memref.AllocOp) and op.memref.type.get_element_type() != i64)
    assert call.callee.string_value().startswith(f"{direct_conv.PREFIX}_")
    assert call.arguments[0] == alloc.memref
    check_compiled(
        module, sample(x_shape, specials=False), sample(w_shape, seed=1, specials=False)
    )


@pytest.mark.parametrize(
    "x_shape, w_shape, strides, groups",
    [
        ((2, 24, 9, 11), (24, 8, 3, 3), (1, 1), 3),  # RegNet's group width 8
        ((1, 16, 10, 21), (32, 8, 3, 3), (2, 2), 2),  # 16 output channels per group: two tiles
        ((3, 12, 7, 5), (6, 4, 4, 4), (1, 2), 3),  # 2 output channels per group
        ((1, 192, 5, 7), (24, 64, 1, 1), (1, 1), 3),  # ShuffleNet's grouped 1x1
    ],
)
def test_grouped_convs_match_interpreter(x_shape, w_shape, strides, groups):
    """Each group reads its own input channels and writes its own output channels."""
    module = conv_layer(
        x_shape, sample(w_shape, seed=1, specials=False), strides, padding=(1, 0, 1, 2), groups=groups
    )
    assert len(direct_calls(module)) == 1
    check_compiled(module, sample(x_shape), threads=2)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "x_shape, w_shape, strides, padding, groups",
    [
        ((1, 16, 13, 11), (16, 8, 3, 3), (2, 2), (1, 1, 1, 1), 2),  # RegNet's stride-2 grouped 3x3, odd W
        ((2, 6, 9, 10), (4, 3, 3, 3), (3, 3), (0, 1, 2, 1), 2),  # stride 3: W mod 3 = 1 column copied alone
        ((1, 8, 15, 7), (8, 8, 5, 5), (2, 2), (2, 2, 2, 2), 1),  # padding 2: two edge columns per phase
        ((1, 4, 8, 12), (4, 4, 3, 3), (2, 1), (1, 0, 0, 2), 1),  # phases by rows only, no left pad
        ((1, 4, 3, 4), (4, 2, 3, 3), (2, 2), (2, 2, 2, 2), 2),  # phases that x's rows or columns miss
    ],
)
def test_stride_phases_match_interpreter(x_shape, w_shape, strides, padding, groups, threads):
    """The stride-phase copy (each iteration copies a stride's worth of x's columns, one to each
    phase) and its fill around x (only the elements x does not land on) give every phase
    element its value: padding reads as zeros although the buffer starts as garbage, with
    NaN and inf in x."""
    module = conv_layer(x_shape, sample(w_shape, seed=1, specials=False), strides, padding=padding, groups=groups)
    assert len(direct_calls(module)) == 1
    with garbage_allocations():
        check_compiled(module, sample(x_shape), threads=threads)


@pytest.mark.parametrize("specials_in", ["x", "w"])
@pytest.mark.parametrize(
    "x_shape, w_shape, padding",
    [
        ((2, 8, 7, 5), (3, 8, 3, 3), (1, 1, 1, 1)),
        ((1, 4, 3, 52), (9, 4, 4, 4), (0, 1, 2, 0)),
    ],
)
def test_nan_inf_and_signed_zeros_match_interpreter(
    x_shape, w_shape, padding, specials_in
):
    """NaN, inf and signed zeros (at the start of x or w) propagate as in the interpreter, and
    stay out of the outputs next to them: tiles of several short rows load them in the lanes of
    other rows, and masked vectors past the row's end."""
    module = conv_layer(
        x_shape, sample(w_shape, seed=1, specials=specials_in == "w"), padding=padding
    )
    assert len(direct_calls(module)) == 1
    check_compiled(module, sample(x_shape, specials=specials_in == "x"))


@st.composite
def ukernel_convs(draw):
    """x, w, strides, dilations, padding and groups of a conv2d of 2 to 12 input channels per group."""
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    groups = draw(st.integers(1, 3))
    channels = draw(st.integers(2, 12)) * groups
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(4))
    sizes = []
    for k, s, d, before, after in zip(
        kernel, strides, dilations, padding[:2], padding[2:]
    ):
        out, extra = draw(st.integers(1, 20)), draw(st.integers(0, s - 1))
        sizes.append(max(1, (out - 1) * s + (k - 1) * d + 1 - before - after + extra))
    w_shape = (draw(st.integers(1, 6)) * groups, channels // groups, *kernel)
    return (
        (draw(st.integers(1, 2)), channels, *sizes),
        w_shape,
        strides,
        dilations,
        padding,
        groups,
    )


@settings(max_examples=10, deadline=None)
@given(conv=ukernel_convs(), seed=st.integers(0, 2**16))
def test_any_ukernel_conv_matches_interpreter(conv, seed):
    x_shape, w_shape, strides, dilations, padding, groups = conv
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(w_shape).astype(np.float32)
    module = conv_layer(x_shape, w, strides, dilations, padding, groups)
    assert len(direct_calls(module)) == 1
    with garbage_allocations():
        check_compiled(module, rng.standard_normal(x_shape).astype(np.float32))


def test_f32_convs_not_depthwise_are_ukernels():
    def calls(x_shape, w_shape, dtype="f32", groups=1):
        return direct_calls(
            conv_layer(x_shape, sample(w_shape, dtype, specials=False), groups=groups)
        )

    assert len(calls((1, 16, 6, 6), (4, 16, 2, 2))) == 1
    assert len(calls((1, 2, 6, 6), (4, 2, 1, 1))) == 1  # 2 channels of a 1x1
    assert calls((1, 1, 28, 28), (8, 1, 5, 5)) == []  # MNIST's first conv: 1 channel, depthwise
    assert len(calls((1, 32, 6, 6), (4, 16, 3, 3), groups=2)) == 1
    assert len(calls((1, 32, 6, 6), (16, 2, 3, 3), groups=16)) == 1  # 2 channels per group
    assert calls((1, 8, 6, 6), (16, 1, 3, 3), groups=8) == []  # depthwise: its own ukernel
    assert calls((1, 16, 6, 6), (4, 16, 3, 3), "f64") == []


def test_row_chunks_call_the_ukernel_for_their_images(monkeypatch):
    """At 2 threads the kernel runs as row chunks of its 5 images (3 and 2), each chunk calling
    the ukernel for its images, with the bias (the tile epilogue's P0) read whole."""
    jitted = []
    compile_module = cpu.compile_module
    monkeypatch.setattr(
        cpu,
        "compile_module",
        lambda module, **kw: jitted.append(module) or compile_module(module, **kw),
    )
    x_shape, w_shape = (5, 16, 12, 12), (8, 16, 3, 3)
    module = conv_layer(
        x_shape, sample(w_shape, seed=1, specials=False), padding=(1, 1, 1, 1)
    )
    (step,) = check_compiled(module, sample(x_shape), threads=2).steps
    assert len(step.kernel.chunks) == 2
    # padded rows of R = 14 floats; phases of max(OH * R + reach, 13 * R) + SLACK =
    # max(12 * 14 + (2 * 14 + 2), 13 * 14) + 16 = 214 floats
    ukernel = (
        "graphopt_sconv_direct_r14_d1x1_eaddAP0_{0}x16x1x1x214_8x16x3x3_8x1x1_{0}x8x12x12".format
    )
    (jitted_module,) = jitted
    calls = {
        op.parent_op().sym_name.data: op.callee.string_value()
        for op in jitted_module.walk()
        if isinstance(op, func.CallOp)
    }
    assert calls == {
        "fused_conv2d_add_0": ukernel(5),
        "fused_conv2d_add_0_rows3": ukernel(3),
        "fused_conv2d_add_0_rows2": ukernel(2),
    }


def test_runtime_weights_match_interpreter():
    x_shape, w_shape = (2, 9, 8, 19), (11, 9, 3, 3)
    w = sample(w_shape, seed=1, specials=False)
    module = conv_layer(
        x_shape, w, strides=(1, 2), padding=(1, 1, 1, 1), w_is_input=True
    )
    assert len(direct_calls(module)) == 1
    check_compiled(module, sample(x_shape), w)
