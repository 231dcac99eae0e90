"""conv2d and pooling groups as the cpu backend compiles them (one thread, and split by rows over
two), against the interpreter: the conv schedule over stride phases with its blocks of output
channels (also with the ukernels turned off) and a zero pad folded into its padding (by
canonicalize, as compile runs it), and pooling with an elementwise prologue."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_compile_anchors import array, pool_op
from test_graph_to_linalg import sample, tensor
from test_packed_gemm import call_ukernel
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.dialects.func import FuncOp

import graphopt
from graphopt.backends import get_backend
from graphopt.dialects import graph
from graphopt.dialects.shapes import conv2d, pool2d
from graphopt.lowering import depthwise_conv, direct_conv, pooling, ukernels
from graphopt.lowering.convert_graph_to_linalg import generalized, lower_group
from graphopt.lowering.pipelines import CPU
from graphopt.lowering.row_split import row_split
from graphopt.lowering.split_rows import chunk_split
from graphopt.runtime import jit
from graphopt.parsing import make_context
from graphopt.transforms.canonicalize import CanonicalizePass


def group_module(inputs: list[tuple[int, ...]], body: str, result: tuple[int, ...], dtype: str = "f32"):
    """@main(%i0, %i1, ...) = one graph.fused group whose block arguments are %a0, %a1, ... and
    whose `body` ends in the value %y."""
    types = [tensor(shape, dtype) for shape in inputs]
    out = tensor(result, dtype)
    arguments = ", ".join(f"%i{k}: {t}" for k, t in enumerate(types))
    block_arguments = ", ".join(f"%a{k}: {t}" for k, t in enumerate(types))
    names = ", ".join(f"%i{k}" for k in range(len(types)))
    return graphopt.parse(
        f"func.func @main({arguments}) -> {out} {{\n"
        f"  %0 = graph.fused({names}) {{name = \"g\", mode = \"compile\"}} : ({', '.join(types)}) -> {out} {{\n"
        f"  ^bb0({block_arguments}):\n{body}    graph.yield %y : {out}\n  }}\n"
        f"  func.return %0 : {out}\n}}"
    )


@pytest.fixture(autouse=True)
def split_small_kernels(monkeypatch):
    """Small kernels split by rows too, so that two threads run two row chunks."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)


def check_group(module, arrays, rtol=1e-4, atol=1e-5):
    """Compile the group on the cpu backend with 1 thread, and with 2 (row chunks of the batch,
    or of a conv's output channels at batch 1); both equal the interpreter."""
    main = next(op for op in module.ops if isinstance(op, FuncOp))
    group = next(op for op in main.body.block.ops if isinstance(op, graph.FusedOp))
    assert row_split(generalized(lower_group(group, "k"))) is not None  # every generic iterates the batch as d0
    split = chunk_split(generalized(lower_group(group, "k")))
    (expected,) = graphopt.interpret(module, *arrays)
    for threads in (1, 2):
        (kernel,) = get_backend("cpu").compile([group], threads)
        assert bool(kernel.chunks) == (threads > 1 and split is not None and split.rows > split.granule)
        out = np.empty(expected.shape, expected.dtype)
        kernel([np.ascontiguousarray(a) for a in arrays], [out])
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=atol, equal_nan=True)


CONVOLUTIONS = [
    # x, w, strides, dilations, padding, groups: output channel blocks of 4, 2 and 1
    ((3, 1, 28, 28), (8, 1, 5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 1),  # MNIST's first conv, odd batch
    ((2, 8, 14, 13), (16, 8, 5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 1),
    ((4, 6, 9, 11), (6, 6, 3, 3), (2, 2), (2, 1), (1, 2, 0, 1), 1),  # 2376-byte images: chunks of 2
    ((2, 6, 8, 7), (12, 2, 3, 3), (1, 2), (1, 2), (0, 1, 1, 0), 3),
    ((1, 4, 10, 9), (4, 4, 2, 2), (3, 3), (1, 1), (0, 0, 0, 0), 1),  # stride > kernel: phases never read
    ((4, 3, 5, 6), (5, 3, 1, 3), (1, 1), (1, 3), (0, 3, 0, 3), 1),  # 360-byte images: chunks of 2
]


@pytest.mark.parametrize("x, w, strides, dilations, padding, groups", CONVOLUTIONS)
@pytest.mark.parametrize("pad_op", [False, True], ids=["padding", "pad_op"])
def test_conv2d_bias_relu(x, w, strides, dilations, padding, groups, pad_op):
    """With `pad_op`, the padding comes from a zero graph.pad in the group, folded into the conv
    by canonicalize (as compile runs it before fusion)."""
    out = conv2d(x, w, strides, dilations, padding, groups)
    attributes = f"strides = {array(strides)}, dilations = {array(dilations)}, groups = {groups} : i64"
    if pad_op:
        top, left, bottom, right = padding
        padded = (x[0], x[1], x[2] + top + bottom, x[3] + left + right)
        source = (
            f"    %p = graph.pad %a0 {{pads = {array((0, 0, top, left, 0, 0, bottom, right))}, value = 0.0 : f64}}"
            f" : ({tensor(x)}) -> {tensor(padded)}\n"
        )
        conv = f"    %c = graph.conv2d %p, %a1 {{{attributes}}} : ({tensor(padded)}, {tensor(w)}) -> {tensor(out)}\n"
    else:
        source = ""
        conv = (
            f"    %c = graph.conv2d %a0, %a1 {{{attributes}, padding = {array(padding)}}}"
            f" : ({tensor(x)}, {tensor(w)}) -> {tensor(out)}\n"
        )
    bias = (out[1], 1, 1)
    body = (
        source + conv + f"    %s = graph.add %c, %a2 : ({tensor(out)}, {tensor(bias)}) -> {tensor(out)}\n"
        f"    %y = graph.relu %s : {tensor(out)}\n"
    )
    module = group_module([x, w, bias], body, out)
    CanonicalizePass().apply(make_context(), module)
    check_group(module, [sample(x), sample(w, seed=1, specials=False), sample(bias, seed=2)])


@pytest.mark.parametrize("x, w, strides, dilations, padding, groups", CONVOLUTIONS)
def test_conv2d_loop_nest(x, w, strides, dilations, padding, groups, monkeypatch):
    """The loop nest on f32 (the ukernels turned off): its blocks of 4, 2 and 1 output channels."""
    monkeypatch.setattr(direct_conv, "applies", lambda *types: False)
    monkeypatch.setattr(depthwise_conv, "applies", lambda *types: False)
    out = conv2d(x, w, strides, dilations, padding, groups)
    attributes = (
        f"strides = {array(strides)}, dilations = {array(dilations)}, groups = {groups} : i64, padding = {array(padding)}"
    )
    body = f"    %y = graph.conv2d %a0, %a1 {{{attributes}}} : ({tensor(x)}, {tensor(w)}) -> {tensor(out)}\n"
    module = group_module([x, w], body, out)
    group = next(op for op in module.walk() if isinstance(op, graph.FusedOp))
    assert "graphopt_sconv" not in str(lower_group(group, "k"))
    check_group(module, [sample(x), sample(w, seed=1, specials=False)], atol=1e-4)  # sums of up to 200 products


def test_conv2d_f64():
    x, w = (2, 4, 7, 6), (4, 4, 3, 3)
    out = conv2d(x, w, (1, 1), (1, 1), (1, 1, 1, 1), 1)
    body = (
        f"    %y = graph.conv2d %a0, %a1 {{padding = {array((1, 1, 1, 1))}}}"
        f" : ({tensor(x, 'f64')}, {tensor(w, 'f64')}) -> {tensor(out, 'f64')}\n"
    )
    module = group_module([x, w], body, out, "f64")
    check_group(module, [sample(x, "f64"), sample(w, "f64", seed=1, specials=False)], rtol=1e-12, atol=1e-12)


POOLS = [
    # x, kernel, strides, padding
    ((3, 8, 28, 28), (2, 2), (2, 2), (0, 0, 0, 0)),  # MNIST's pools, odd batch
    ((3, 16, 14, 14), (3, 3), (3, 3), (0, 0, 0, 0)),  # windows leave the last two rows and columns
    ((2, 3, 9, 8), (3, 3), (2, 1), (0, 0, 0, 0)),  # overlapping windows: the prologue computed once
    ((2, 3, 9, 8), (3, 2), (1, 2), (1, 0, 2, 1)),
    ((1, 2, 9, 18), (9, 9), (9, 9), (0, 0, 0, 0)),  # more taps than are unrolled: a loop over window rows
    ((1, 6, 5, 5), (5, 5), (1, 1), (0, 0, 0, 0)),  # a global pool: the average sums over planes of the prologue
]


@pytest.mark.parametrize("x, kernel, strides, padding", POOLS)
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "avg_pool2d {count_include_pad = true}"])
def test_pool2d_with_prologue(op, x, kernel, strides, padding):
    name, attributes = pool_op(op, kernel, strides, padding)
    out, bias = pool2d(x, kernel, strides, padding), (x[1], 1, 1)
    body = (
        f"    %s = graph.add %a0, %a1 : ({tensor(x)}, {tensor(bias)}) -> {tensor(x)}\n"
        f"    %r = graph.relu %s : {tensor(x)}\n"
        f"    %y = graph.{name} %r {{{attributes}}} : ({tensor(x)}) -> {tensor(out)}\n"
    )
    module = group_module([x, bias], body, out)
    check_group(module, [sample(x), sample(bias, seed=1)])
    check_group(module, [-np.abs(sample(x)) - 1, np.zeros(bias, np.float32)])  # relu's zeros everywhere


UKERNEL_POOLS = [
    # x, kernel, strides, padding: f32 pools of column stride at most 4 call the pooling ukernel
    ((1, 5, 37, 41), (3, 3), (2, 2), (1, 1, 1, 1)),  # ResNet's stem pool at an odd size: 21 columns
    ((3, 4, 11, 50), (3, 3), (1, 1), (1, 1, 1, 1)),  # Inception's 3x3/1: vectors looped and written out
    ((1, 3, 13, 13), (3, 3), (2, 2), (0, 0, 1, 1)),  # ceil mode, as bottom and right padding
    ((2, 3, 10, 71), (2, 3), (2, 1), (0, 2, 1, 0)),
    ((1, 6, 9, 35), (5, 4), (3, 2), (2, 1, 2, 3)),  # row stride 3: blocks of one row
    ((2, 3, 16, 23), (5, 3), (2, 2), (2, 1, 1, 0)),  # 5 rows at row stride 2: blocks of 3 rows, 2 left
    ((3, 4, 14, 14), (3, 3), (3, 3), (0, 0, 0, 0)),  # MNIST's second pool: column stride 3
    ((1, 3, 11, 70), (2, 4), (1, 4), (1, 0, 0, 3)),  # column stride 4
    ((1, 2, 5, 6), (5, 7), (1, 1), (0, 3, 0, 3)),  # a window wider than x's row
    ((1, 9, 7, 7), (7, 7), (1, 1), (0, 0, 0, 0)),  # a global pool: the average sums over planes
]


def with_specials(shape, seed: int) -> np.ndarray:
    """Random values with NaN, inf and -inf at random places (about 1 in 30 each)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape).astype(np.float32)
    for special in (np.nan, np.inf, -np.inf):
        values[rng.random(shape) < 1 / 30] = special
    return values


@pytest.mark.parametrize("x, kernel, strides, padding", UKERNEL_POOLS)
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "avg_pool2d {count_include_pad = true}"])
def test_pool2d_ukernel(op, x, kernel, strides, padding):
    """The pooling ukernel (threads 1 and 2: batch rows, or channels of one image) against the
    interpreter, with NaN, inf and -inf inside windows and at their borders, and with every
    window of a channel -inf (the max) or all of x -inf and +inf (the average's NaN)."""
    name, attributes = pool_op(op, kernel, strides, padding)
    out = pool2d(x, kernel, strides, padding)
    module = group_module([x], f"    %y = graph.{name} %a0 {{{attributes}}} : ({tensor(x)}) -> {tensor(out)}\n", out)
    check_group(module, [with_specials(x, 0)])
    check_group(module, [np.full(x, -np.inf, np.float32)])
    check_group(module, [np.where(np.indices(x)[3] % 2 == 0, np.inf, -np.inf).astype(np.float32)])


@pytest.fixture(params=[True, False], ids=["in_lane", "halves"])
def in_lane(request, monkeypatch):
    """Stride-2 taps from in-lane shuffles or from even and odd halves (`in_lane_stride_2`),
    whatever this CPU's; the kernel caches, keyed by the kernel and not the ukernel's code, are off."""
    monkeypatch.setattr(depthwise_conv, "in_lane_stride_2", lambda: request.param)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    return request.param


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("x, kernel, strides, padding", UKERNEL_POOLS)
@pytest.mark.parametrize("op, kind", [("max_pool2d", "max"), ("avg_pool2d", "avg")])
def test_pool2d_either_load_form(monkeypatch, masked, op, kind, x, kernel, strides, padding):
    """The pooling ukernel's taps past x's rows as masked loads (hosts with AVX-512) or, on the
    planes between x's first and last, full loads and a select (without), on any host: the
    ukernel's IR called directly (the JIT's caches key it by its name, alike in both)."""
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: masked)
    name, attributes = pool_op(op, kernel, strides, padding)
    out_shape = pool2d(x, kernel, strides, padding)
    module = group_module([x], f"    %y = graph.{name} %a0 {{{attributes}}} : ({tensor(x)}) -> {tensor(out_shape)}\n", out_shape)
    values = with_specials(x, 0)
    (expected,) = graphopt.interpret(module, values)
    out = np.full(out_shape, np.nan, np.float32)
    call_ukernel(pooling.name([MemRefType(f32, a.shape) for a in (values, out)], kind, kernel, strides, padding), [values, out])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


STRIDE_2_POOLS = [case for case in UKERNEL_POOLS if case[2][1] == 2] + [
    ((2, 3, 9, 40), (2, 2), (2, 2), (0, 0, 1, 0)),  # DenseNet's 2x2/2 at odd sizes: halves either way
    ((1, 4, 12, 75), (3, 3), (2, 2), (1, 1, 1, 1)),  # 38 columns: two looped vectors and one of 6 lanes
    ((1, 3, 27, 27), (3, 3), (2, 2), (0, 0, 0, 0)),  # SqueezeNet's last pool: 13 rows, the last block of one
]


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("x, kernel, strides, padding", STRIDE_2_POOLS)
@pytest.mark.parametrize("op, kind", [
    ("max_pool2d", "max"), ("avg_pool2d", "avg"), ("avg_pool2d {count_include_pad = true}", "avgpad"),
])
def test_pool2d_stride_2_taps(in_lane, monkeypatch, masked, op, kind, x, kernel, strides, padding):
    """Column-stride-2 pools with taps from in-lane shuffles (windows wider than
    IN_LANE_NARROWEST, in blocks of at least IN_LANE_SHARED_ROWS rows where rows share input rows)
    or from even and odd halves, with either form of loads past x's rows, against the
    interpreter: NaN, inf and -inf at random places, all -inf, and +inf and -inf by column."""
    monkeypatch.setattr(depthwise_conv, "loads_under_masks", lambda: masked)
    name, attributes = pool_op(op, kernel, strides, padding)
    out_shape = pool2d(x, kernel, strides, padding)
    module = group_module([x], f"    %y = graph.{name} %a0 {{{attributes}}} : ({tensor(x)}) -> {tensor(out_shape)}\n", out_shape)
    types = [MemRefType(f32, shape) for shape in (x, out_shape)]
    ukernel = pooling.name(types, kind, kernel, strides, padding)
    columns = np.indices(x)[3] % 2 == 0
    for values in (with_specials(x, 0), np.full(x, -np.inf, np.float32), np.where(columns, np.inf, -np.inf).astype(np.float32)):
        (expected,) = graphopt.interpret(module, values)
        out = np.full(out_shape, np.nan, np.float32)
        call_ukernel(ukernel, [values, out])
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, equal_nan=True)
    ir = ukernels.ukernel_ir(ukernel, types)
    taps_in_lane = in_lane and kernel[1] > pooling.IN_LANE_NARROWEST
    assert (", <16 x i32> <i32 0, i32 1, i32 4, i32 5, i32 2," in ir) == taps_in_lane
    rows = max(int(count) for count in re.findall(r"\.rows(\d+)_", ir))
    assert rows >= 2 if taps_in_lane and kernel[0] > strides[0] else rows == (3 if kernel[0] >= 5 and strides[0] == 2 else 1)


PLANE_SUMS = [
    # x, axes, keepdims: sums over planes of at most row_sums.LONGEST_PLANE floats call the row-sum ukernel
    ((1, 37, 7, 7), (2, 3), True),  # a global average pool: 3 vectors and one under a mask
    ((3, 5, 4, 4), (-1, -2), False),  # one vector per plane, batch 3
    ((1, 6, 3, 5), (2, 3), False),
    ((2, 7, 9), (1, 2), False),  # rank 3: one sum per image
    ((1, 4, 5, 13), (2, 3), True),  # 65 floats: the loop nest
]


@pytest.mark.parametrize("x, axes, keepdims", PLANE_SUMS)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean"])
def test_sums_over_planes(op, x, axes, keepdims):
    """Sums and means over the last two dims (threads 1 and 2: images, or channels of one)
    against the interpreter, with NaN, inf and -inf in x."""
    reduced = {a % len(x) for a in axes}
    out = tuple(1 if d in reduced else size for d, size in enumerate(x) if keepdims or d not in reduced)
    attributes = f"axes = {array(axes)}, keepdims = {str(keepdims).lower()}"
    module = group_module([x], f"    %y = graph.{op} %a0 {{{attributes}}} : ({tensor(x)}) -> {tensor(out)}\n", out)
    check_group(module, [with_specials(x, 0)])
    check_group(module, [sample(x)])
