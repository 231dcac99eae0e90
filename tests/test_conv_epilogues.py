"""The direct, depthwise and GEMM conv ukernels' tile epilogues (bias, batch norm, relu, clip, SiLU, hardswish,
residual add), compiled on the cpu backend, against the interpreter; NaN and inf included. SiLU
runs in the direct and GEMM ukernels' tiles, and over each output plane in the depthwise one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import graphopt
from test_direct_conv import check_compiled
from test_graph_to_linalg import sample
from test_packed_gemm import kernels, run_row_major
from xdsl.dialects import func

from graphopt.builder import GraphBuilder
from graphopt.lowering import depthwise_conv, direct_conv, packed_gemm, tile_epilogue
from graphopt.lowering.pipelines import CPU

CHANNELS = 19
"""Output channels: two full tiles of 8 and a partial one (of the GEMM: three of 6 and 1 row)."""
KINDS = ["direct", "depthwise", "gemm"]
"""The conv ukernel that `conv_module` calls."""


def bias(g: GraphBuilder, y, shape=(CHANNELS, 1, 1)):
    values = sample(shape, seed=3, specials=False)
    values.reshape(-1)[:2] = [np.nan, -np.inf]  # whole channels NaN and -inf
    return g.add(y, g.constant(values))


def batch_norm(g: GraphBuilder, y):
    scale, shift, mean = (sample((CHANNELS,), seed=s, specials=False) for s in (4, 5, 6))
    var = np.abs(sample((CHANNELS,), seed=7, specials=False)) + 0.1
    return g.batch_norm(y, *(g.constant(v) for v in (scale, shift, mean, var)), epsilon=1e-5)


def hardswish(g: GraphBuilder, y):
    """x * clip(x / 6 + 1/2, 0, 1), as the ONNX importer writes HardSwish."""
    gate = g.add(g.mul(y, g.constant(np.float32(1 / 6))), g.constant(np.float32(0.5)))
    return g.mul(y, g.clip(gate, min=0.0, max=1.0))


def silu(g: GraphBuilder, y):
    return g.mul(y, g.sigmoid(y))


TAILS = {
    "bias relu": lambda g, y, r: g.relu(bias(g, y)),
    "batch_norm relu": lambda g, y, r: g.relu(batch_norm(g, y)),
    "batch_norm relu6": lambda g, y, r: g.clip(batch_norm(g, y), min=0.0, max=6.0),
    "batch_norm hardswish": lambda g, y, r: hardswish(g, batch_norm(g, y)),
    "bias silu": lambda g, y, r: silu(g, bias(g, y)),
    "batch_norm silu residual": lambda g, y, r: g.add(silu(g, batch_norm(g, y)), r),
    "batch_norm residual relu": lambda g, y, r: g.relu(g.add(batch_norm(g, y), r)),
    "residual first": lambda g, y, r: g.sub(r, g.mul(y, bias(g, y, (1, CHANNELS, 1, 1)))),
    "bias input and computed scale": lambda g, y, r: g.mul(
        g.add(y, g.input("b", (CHANNELS, 1, 1))), g.exp(g.constant(sample((1, CHANNELS, 1, 1), seed=9, specials=False)))
    ),
}


def conv_module(tail, x_shape=(1, 5, 9, 11), strides=(1, 1), residual_shape=None, kind="direct"):
    """@main(x, r) = tail(conv2d(x, w), r), with a 3x3 window and w a constant; `kind` "depthwise":
    one input channel per group, x with CHANNELS channels; "gemm": x 4 * stride columns wide,
    so that the output rows have 4 columns, at most 8 (`CpuSchedule.conv_gemm`)."""
    g = GraphBuilder()
    depthwise = kind == "depthwise"
    if depthwise:
        x_shape = (x_shape[0], CHANNELS, *x_shape[2:])
    if kind == "gemm":
        x_shape = (*x_shape[:3], 4 * strides[1])
    x = g.input("x", x_shape)
    w = g.constant(sample((CHANNELS, 1 if depthwise else x_shape[1], 3, 3), seed=1, specials=False))
    groups = CHANNELS if depthwise else 1
    y = g.conv2d(x, w, strides=strides, dilations=(1, 1), padding=(1, 1, 1, 1), groups=groups)
    out_shape = [s.data for s in y.type.shape]
    r = g.input("r", residual_shape or out_shape)
    return g.finish(tail(g, y, r)), out_shape


def inputs(module):
    """x with a NaN, an inf and a -inf, then the other arguments (NaN, inf, -inf, signed zeros first)."""
    shapes = [t.get_shape() for t in module.body.block.first_op.function_type.inputs.data]
    x = sample(shapes[0], specials=False)
    x.reshape(-1)[[0, 20, 50]] = [np.nan, np.inf, -np.inf]
    return x, *(sample(shape, seed=2 + i) for i, shape in enumerate(shapes[1:]))


def epilogue_of(module) -> str:
    """The token of the epilogue that the module's one conv ukernel call applies ('' for none)."""
    (name,) = [op.callee.string_value() for kernel in kernels(module) for op in kernel.walk() if isinstance(op, func.CallOp)]
    if name.startswith(packed_gemm.ROW_MAJOR_PREFIX):
        return tile_epilogue.token(packed_gemm._epilogue(name))
    if name.startswith(depthwise_conv.PREFIX):
        return tile_epilogue.token(depthwise_conv._parameters(name)[-1])
    return tile_epilogue.token(direct_conv.parameters(name)[-1])


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("kind", KINDS)
def test_tails_run_in_the_ukernel_and_match_interpreter(tail, kind):
    """Every tail is the ukernel's epilogue, but SiLU's on the depthwise ukernel's 9x11 planes (99
    floats in 7 vectors: more idle lanes than `depthwise_conv.PLANE_WASTE` allows): a loop nest."""
    module, _ = conv_module(TAILS[tail], kind=kind)
    loop_nest = "silu" in tail and kind == "depthwise"
    assert bool(epilogue_of(module)) != loop_nest
    check_compiled(module, *inputs(module))


SIGMOID_GRID = np.concatenate(
    [np.linspace(-110, 40, 19990), [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, -88.72, -87.33, -103.97, -103.98]]
)
"""20000 sigmoid arguments: a dense grid over the range where sigmoid is a normal float and
below it, the special values and the edges of exp's clamp and overflow."""


def assert_sigmoid_accurate(result: np.ndarray, arguments: np.ndarray) -> None:
    """Relative error < 1e-6 against float64 sigmoid where the result is a normal float (the
    loop nest's exp bound), within 2^-126 below it; NaN where it is NaN."""
    with np.errstate(over="ignore"):
        reference = 1 / (1 + np.exp(-arguments.astype(np.float64).ravel()))
    result = result.astype(np.float64).ravel()
    tiny = float(np.finfo(np.float32).tiny)
    normal = reference >= tiny
    assert np.max(np.abs(result - reference)[normal] / reference[normal], initial=0) < 1e-6
    assert np.max(np.abs(result - reference)[~normal & ~np.isnan(reference)], initial=0) <= tiny
    np.testing.assert_array_equal(np.isnan(result), np.isnan(reference))


@pytest.mark.parametrize("kind", ["direct", "gemm"])
def test_sigmoid_in_the_tile_is_as_accurate_as_the_loop_nest(kind):
    """sigmoid of the conv outputs SIGMOID_GRID, against float64 sigmoid of the interpreter's
    conv (`assert_sigmoid_accurate`). The conv (2 channels, weight 1 at one tap of channel 0, 0
    elsewhere) outputs the grid; a 1x2 window on 200-column rows is the direct ukernel's, a 1x1
    the GEMM's."""
    x = np.stack([SIGMOID_GRID.reshape(100, 200), np.zeros((100, 200))])[None].astype(np.float32)
    w = np.zeros((1, 2, 1, 2 if kind == "direct" else 1), np.float32)
    w[0, 0, 0, 0] = 1.0

    def conv_then(tail):
        g = GraphBuilder()
        attributes = dict(strides=(1, 1), dilations=(1, 1), padding=(0, 0, 0, w.shape[3] - 1), groups=1)
        return g.finish(tail(g, g.conv2d(g.input("x", x.shape), g.constant(w), **attributes)))

    module = conv_then(lambda g, y: g.sigmoid(y))
    assert epilogue_of(module) == "sigmoidA"
    calls = [op.callee.string_value() for kernel in kernels(module) for op in kernel.walk()
             if isinstance(op, func.CallOp)]
    assert calls[0].startswith(direct_conv.PREFIX if kind == "direct" else packed_gemm.ROW_MAJOR_PREFIX)
    (result,) = check_compiled(module, x)(x)
    (y,) = graphopt.interpret(conv_then(lambda g, y: y), x)
    assert_sigmoid_accurate(result, y)


def run_sigmoids(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sigmoid(x) from the GEMM ukernel's epilogue (called directly) and from a loop nest."""
    steps = (("sigmoid", (tile_epilogue.ACCUMULATOR,)),)
    tile = run_row_major(x.reshape(1, 1, -1), np.ones((1, 1), np.float32), steps, out_shape=(1, 1, x.size))
    g = GraphBuilder()
    module = g.finish(g.sigmoid(g.input("x", x.shape)))
    (loop_nest,) = graphopt.compile(module, backends=("cpu",))(x)
    return tile.reshape(-1), np.asarray(loop_nest)


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(np.where(np.isnan(a), 0, a.view(np.int32)), np.where(np.isnan(b), 0, b.view(np.int32)))
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))


def test_sigmoid_is_one_expansion_in_the_tile_and_the_loop_nest():
    """`expand_sigmoid_f32` in the ukernel epilogue and in the loop nest (convert-math-to-llvm's
    ExpandSigmoid): the same bits on SIGMOID_GRID and on the edges of its clamp and of exp's
    overflow, accurate (`assert_sigmoid_accurate`), exactly 0 and 1 where it saturates, and
    subnormal results kept above x = -88.37."""
    edges = np.concatenate([np.linspace(-89.5, -86.5, 3001), np.linspace(85.5, 87.5, 201), [-100.0, 100.0, 1e30, -1e30]])
    x = np.concatenate([SIGMOID_GRID, edges]).astype(np.float32)
    tile, loop_nest = run_sigmoids(x)
    assert_same_bits(tile, loop_nest)
    assert_sigmoid_accurate(loop_nest, x)
    assert np.all(loop_nest[x <= -88.73] == 0) and np.all(loop_nest[x >= 17] == 1)
    subnormal = (loop_nest > 0) & (loop_nest < np.finfo(np.float32).tiny)
    assert np.any(subnormal) and np.all(x[subnormal] > -88.4)


@settings(max_examples=20, deadline=None)
@given(arrays(np.float32, st.integers(1, 67), elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_sigmoid_expansion_is_accurate_for_any_float(x):
    """Property: for any f32 x (odd lengths, NaN, inf, subnormals), the tile's and the loop nest's
    sigmoid are the same bits and within `assert_sigmoid_accurate`'s bounds of float64."""
    tile, loop_nest = run_sigmoids(x)
    assert_same_bits(tile, loop_nest)
    assert_sigmoid_accurate(loop_nest, x)


@pytest.mark.parametrize("kind", KINDS)
def test_relu_and_clip_keep_nan_exactly(kind):
    """relu(NaN) and clip(NaN) are NaN, as in NumPy; -inf becomes 0 and +inf 6."""
    tail = lambda g, y, r: g.clip(g.relu(g.add(y, r)), min=-1.0, max=6.0)
    module, out_shape = conv_module(tail, kind=kind)
    assert epilogue_of(module) == "addAR.maxS0C00000000.maxS1Cbf800000.minS2C40c00000"
    x = np.zeros(module.body.block.first_op.function_type.inputs.data[0].get_shape(), np.float32)
    r = np.zeros(out_shape, np.float32)
    r.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    (out,) = check_compiled(module, x, r)(x, r)
    assert np.isnan(out.reshape(-1)[0]) and list(out.reshape(-1)[1:3]) == [6.0, 0.0]


@pytest.mark.parametrize("kind", KINDS)
def test_strided_and_batch_norm_with_residual_at_two_threads(kind):
    tail = TAILS["batch_norm residual relu"]
    module, _ = conv_module(tail, x_shape=(1, 6, 33, 40), strides=(2, 2), kind=kind)
    assert "R" in epilogue_of(module)
    check_compiled(module, *inputs(module), threads=2)


@pytest.mark.parametrize("batch, threads", [(1, 1), (1, 2), (3, 2)])
def test_depthwise_silu_runs_over_each_plane(monkeypatch, batch, threads):
    """On 13x12 planes (156 floats: 9 vectors and 12 lanes) the depthwise ukernel takes batch
    norm + SiLU + residual and applies it over each channel's plane after its rows; at two
    threads split by images (batch 3) and by channels (batch 1). 7x7 planes keep the loop nest."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    tail = TAILS["batch_norm silu residual"]
    module, _ = conv_module(tail, x_shape=(batch, 5, 13, 12), kind="depthwise")
    assert "sigmoid" in epilogue_of(module)
    steps = check_compiled(module, *inputs(module), threads=threads).steps
    assert bool(next(step for step in steps if "conv2d" in step.name).kernel.chunks) == (threads == 2)
    assert epilogue_of(conv_module(tail, x_shape=(batch, 5, 7, 7), kind="depthwise")[0]) == ""


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("kind", ["direct", "gemm"])
def test_silu_epilogue_at_two_threads(monkeypatch, batch, kind):
    """SiLU in the tile splits by images and by output channels as the other epilogues do."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    module, _ = conv_module(TAILS["batch_norm silu residual"], x_shape=(batch, 6, 13, 12), kind=kind)
    assert "sigmoid" in epilogue_of(module)
    steps = check_compiled(module, *inputs(module), threads=2).steps
    assert next(step for step in steps if "conv2d" in step.name).kernel.chunks


@pytest.mark.parametrize(
    "tail",
    [
        lambda g, y, r: g.add(g.exp(y), r),  # exp is not an epilogue op
        lambda g, y, r: g.add(y, r),  # r broadcast along rows, not channels
        lambda g, y, r: g.relu(g.add(y, g.constant(sample((1, 1, 9, 1), seed=8, specials=False)))),
    ],
    ids=["exp", "row broadcast input", "row broadcast constant"],
)
def test_tails_that_are_not_epilogues_stay_loop_nests(tail):
    module, _ = conv_module(tail, residual_shape=(1, 1, 9, 1))
    assert epilogue_of(module) == ""
    check_compiled(module, *inputs(module))


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("tail", ["batch_norm residual relu", "residual first", "bias input and computed scale"])
@pytest.mark.parametrize("kind", KINDS)
def test_tile_epilogues_split_across_two_threads(monkeypatch, batch, tail, kind):
    """A call with epilogue operands splits like one without: three images by images (the
    per-channel operands read whole, the residual sliced as out), one image by its 19 output
    channels (the per-channel operands and the residual sliced as out). Rows of 12 columns keep
    each image a multiple of 16 bytes, so one image can be a chunk."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    module, _ = conv_module(TAILS[tail], x_shape=(batch, 5, 9, 12), kind=kind)
    assert epilogue_of(module)
    steps = check_compiled(module, *inputs(module), threads=2).steps
    assert next(step for step in steps if "conv2d" in step.name).kernel.chunks


def test_token_round_trip_and_chunk_names_keep_the_epilogue():
    steps = (("sub", ("A", "P2")), ("add", ("P3", tile_epilogue.constant(1e-5))), ("sqrt", ("S1",)), ("mul", ("S0", "R")))
    assert tile_epilogue.parse(tile_epilogue.token(steps)) == steps
    module, _ = conv_module(TAILS["bias relu"])
    (call,) = [op for kernel in kernels(module) for op in kernel.walk() if isinstance(op, func.CallOp)]
    name = call.callee.string_value()
    assert direct_conv.chunk_name(name, [v.type for v in call.arguments]) == name
