"""Anchors, reductions and data movement through the real JIT (graphopt.compile) against graphopt.interpret."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_linalg import sample, tensor

import graphopt
from graphopt.dialects.shapes import conv2d, pool2d


def check_compiled(text: str, *arrays, rtol: float = 1e-5, atol: float = 1e-5):
    """Compile @main, require every step to run as a CPU kernel, and compare with the interpreter."""
    module = graphopt.parse(text)
    exe = graphopt.compile(module)
    assert all(line.split()[1] == "cpu" for line in exe.report().splitlines()), exe.report()
    expected = graphopt.interpret(module, *arrays)
    for e, a in zip(expected, exe(*arrays), strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def unary(op_text: str, source: tuple[int, ...], result: tuple[int, ...], epilogue: str = "graph.relu") -> str:
    """@main applying `op_text` (its operand is %x) then `epilogue` to its result."""
    s, r = tensor(source), tensor(result)
    return (
        f"func.func @main(%x: {s}) -> {r} {{\n %0 = {op_text} : ({s}) -> {r}\n"
        f" %1 = {epilogue} %0 : {r}\n func.return %1 : {r}\n}}"
    )


# ----------------------------------------------------------------------------------------
# Matmul
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ((1, 1), (1, 1)),
        ((3, 7), (7, 1)),
        ((7, 3), (3, 7)),
        ((2, 3, 7), (7, 5)),
        ((3, 1, 1, 7), (2, 7, 3)),
        ((64, 256), (256, 512)),  # blocked
        ((2, 32, 256), (256, 256)),  # blocked, batched
        ((2, 1, 32, 384), (3, 384, 256)),  # blocked, batch dims broadcast
    ],
)
def test_matmul_bias_relu(a, b):
    out = np.matmul(np.zeros(a), np.zeros(b)).shape
    o, c = tensor(out), tensor(out[-1:])
    text = (
        f"func.func @main(%a: {tensor(a)}, %b: {tensor(b)}, %c: {c}) -> {o} {{\n"
        f" %0 = graph.matmul %a, %b : ({tensor(a)}, {tensor(b)}) -> {o}\n"
        f" %1 = graph.add %0, %c : ({o}, {c}) -> {o}\n %2 = graph.relu %1 : {o}\n func.return %2 : {o}\n}}"
    )
    # sums of hundreds of products in another order: near-cancelling ones differ by ~1e-5 absolute
    check_compiled(text, sample(a), sample(b, seed=1, specials=False), sample(out[-1:], seed=2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch, heads, seq, depth", [(1, 1, 1, 1), (2, 3, 5, 7), (2, 4, 17, 16), (1, 2, 130, 64)])
def test_scores_with_unsqueezed_mask_in_epilogue(batch, heads, seq, depth):
    """BERT's scores: q @ k, scaled, plus (1 - mask) * -10000 with the [batch, seq] mask
    unsqueezed to [batch, 1, 1, seq]; the reshape runs in the matmul's epilogue, then softmax."""
    q, k, m, s = (batch, heads, seq, depth), (batch, heads, depth, seq), (batch, seq), (batch, heads, seq, seq)
    um = (batch, 1, 1, seq)
    text = (
        f"func.func @main(%q: {tensor(q)}, %k: {tensor(k)}, %m: {tensor(m)}) -> {tensor(s)} {{\n"
        " %one = graph.constant dense<1.0> : tensor<f32>\n"
        " %big = graph.constant dense<-10000.0> : tensor<f32>\n"
        " %scale = graph.constant dense<8.0> : tensor<f32>\n"
        f" %0 = graph.reshape %m : ({tensor(m)}) -> {tensor(um)}\n"
        f" %1 = graph.sub %one, %0 : (tensor<f32>, {tensor(um)}) -> {tensor(um)}\n"
        f" %2 = graph.mul %1, %big : ({tensor(um)}, tensor<f32>) -> {tensor(um)}\n"
        f" %3 = graph.matmul %q, %k : ({tensor(q)}, {tensor(k)}) -> {tensor(s)}\n"
        f" %4 = graph.div %3, %scale : ({tensor(s)}, tensor<f32>) -> {tensor(s)}\n"
        f" %5 = graph.add %4, %2 : ({tensor(s)}, {tensor(um)}) -> {tensor(s)}\n"
        f" %6 = graph.softmax %5 {{axis = 3 : i64}} : ({tensor(s)}) -> {tensor(s)}\n"
        f" func.return %6 : {tensor(s)}\n}}"
    )
    mask = (np.random.default_rng(3).random(m) < 0.7).astype(np.float32)
    check_compiled(text, sample(q), sample(k, seed=1, specials=False), mask, rtol=1e-4, atol=1e-5)
    steps = graphopt.compile(graphopt.parse(text)).report()
    assert any("reshape" in line and "matmul" in line for line in steps.splitlines()), steps


# ----------------------------------------------------------------------------------------
# Reductions (accumulated with reassoc, so vectorized: long rows exercise the vector loop and its tail)
# ----------------------------------------------------------------------------------------

ROWS = [(1, 1), (3, 7), (7, 1029)]


@pytest.mark.parametrize("shape", ROWS)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_row_reductions(op, shape):
    text = unary(f"graph.{op} %x {{axes = array<i64: -1>}}", shape, shape[:1], epilogue="graph.neg")
    x = sample(shape, specials=False)
    check_compiled(text, x, rtol=1e-4)
    x[-1, -1] = np.nan
    x[0, 0] = np.inf
    check_compiled(text, x, rtol=1e-4)


@pytest.mark.parametrize("shape, axes", [((1, 3, 5, 7), (2, 3)), ((2, 3, 56, 56), (2, 3)), ((2, 5, 9, 130), (1, 2, 3)), ((3, 1, 1), (1, 2))])
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max"])
@pytest.mark.parametrize("keepdims", ["true", "false"])
def test_reductions_of_the_last_two_dims(op, shape, axes, keepdims):
    """Global pools: the reduced last two dims run as one loop on the CPU."""
    kept = tuple(1 if i in axes else size for i, size in enumerate(shape) if keepdims == "true" or i not in axes)
    attributes = f"{{axes = array<i64: {', '.join(map(str, axes))}>, keepdims = {keepdims}}}"
    text = unary(f"graph.{op} %x {attributes}", shape, kept, epilogue="graph.neg")
    x = sample(shape, specials=False)
    x.flat[-1], x.flat[0] = np.nan, -np.inf
    check_compiled(text, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", ROWS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows(op, shape):
    x = sample(shape, specials=False) * 10
    x[-1, -1] = -np.inf
    check_compiled(unary(f"graph.{op} %x", shape, shape, epilogue="graph.neg"), x, rtol=1e-4)


@pytest.mark.parametrize("shape", ROWS)
def test_layer_norm_rows(shape):
    t, n = tensor(shape), tensor(shape[-1:])
    text = (
        f"func.func @main(%x: {t}, %s: {n}, %b: {n}) -> {t} {{\n"
        f" %0 = graph.layer_norm %x, %s, %b : ({t}, {n}, {n}) -> {t}\n func.return %0 : {t}\n}}"
    )
    x = sample(shape, specials=False) + 3
    check_compiled(text, x, sample(shape[-1:], seed=1, specials=False), sample(shape[-1:], seed=2), rtol=1e-4)


# ----------------------------------------------------------------------------------------
# Convolution and pooling
# ----------------------------------------------------------------------------------------


def array(values) -> str:
    return f"array<i64: {', '.join(map(str, values))}>"


def pool_op(op: str, kernel, strides, padding) -> tuple[str, str]:
    """The op name and attributes of a pool case: op is "max_pool2d", "avg_pool2d" or
    "avg_pool2d {count_include_pad = true}"."""
    name, _, extra = op.partition(" ")
    attributes = f"kernel = {array(kernel)}, strides = {array(strides)}, padding = {array(padding)}"
    return name, attributes + (f", {extra[1:-1]}" if extra else "")


CONVOLUTIONS = [
    # x, w, strides, dilations, padding, groups
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    ((1, 3, 7, 7), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ((2, 4, 7, 9), (6, 2, 3, 2), (2, 2), (1, 2), (1, 0, 2, 1), 2),
    ((1, 3, 7, 8), (3, 1, 3, 3), (1, 3), (2, 1), (0, 2, 0, 2), 3),
    ((3, 2, 5, 3), (4, 2, 5, 1), (2, 1), (1, 1), (0, 0, 0, 0), 1),
]


@pytest.mark.parametrize("x, w, strides, dilations, padding, groups", CONVOLUTIONS)
def test_conv2d_with_epilogue(x, w, strides, dilations, padding, groups):
    out = conv2d(x, w, strides, dilations, padding, groups)
    o, b = tensor(out), tensor((out[1], 1, 1))
    text = (
        f"func.func @main(%x: {tensor(x)}, %w: {tensor(w)}, %b: {b}) -> {o} {{\n"
        f" %0 = graph.conv2d %x, %w {{strides = {array(strides)}, dilations = {array(dilations)},"
        f" padding = {array(padding)}, groups = {groups} : i64}} : ({tensor(x)}, {tensor(w)}) -> {o}\n"
        f" %1 = graph.add %0, %b : ({o}, {b}) -> {o}\n %2 = graph.relu %1 : {o}\n func.return %2 : {o}\n}}"
    )
    check_compiled(text, sample(x), sample(w, seed=1, specials=False), sample((out[1], 1, 1), seed=2), rtol=1e-4)


POOLS = [
    # x, kernel, strides, padding
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 2, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((2, 3, 7, 5), (2, 3), (1, 2), (1, 0, 0, 2)),
    ((1, 1, 3, 7), (3, 2), (3, 1), (2, 1, 1, 0)),
]


@pytest.mark.parametrize("x, kernel, strides, padding", POOLS)
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d", "avg_pool2d {count_include_pad = true}"])
def test_pool2d_with_epilogue(op, x, kernel, strides, padding):
    name, attributes = pool_op(op, kernel, strides, padding)
    text = unary(f"graph.{name} %x {{{attributes}}}", x, pool2d(x, kernel, strides, padding), epilogue="graph.neg")
    values = sample(x)
    check_compiled(text, values, rtol=1e-4)
    check_compiled(text, -np.abs(values) - 1, rtol=1e-4)  # all negative: padding must never win a max


@pytest.mark.parametrize(
    "x, kernel, strides, padding",
    [((1, 3, 11, 13), (3, 3), (2, 2), (1, 1, 1, 1)), ((1, 2, 5, 37), (3, 3), (2, 2), (1, 1, 1, 1)),
     ((2, 2, 9, 18), (9, 9), (9, 9), (0, 0, 0, 0))],
    ids=["over stride phases", "unrolled", "window rows looped"],
)
def test_max_pool2d_propagates_nan_from_any_tap(x, kernel, strides, padding):
    """A NaN anywhere in a window makes its max NaN, whichever tap holds it; inf and -inf win or lose
    as numbers (about one element in five is special)."""
    name, attributes = pool_op("max_pool2d", kernel, strides, padding)
    text = unary(f"graph.{name} %x {{{attributes}}}", x, pool2d(x, kernel, strides, padding), epilogue="graph.neg")
    rng = np.random.default_rng(3)
    values = sample(x)
    special = rng.random(x) < 0.2
    values[special] = rng.choice([np.nan, np.inf, -np.inf], special.sum())
    check_compiled(text, values)
    check_compiled(text.replace("f32", "f64"), values.astype(np.float64))


# ----------------------------------------------------------------------------------------
# Pad, concat and gather inside elementwise groups
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, pads, dtype",
    [
        ((1,), (0, 0), "f32"),
        ((3, 7), (1, 0, 2, 3), "f32"),
        ((2, 1, 3), (0, 3, 1, 1, 0, 2), "f32"),
        ((3, 7), (2, 1, 0, 1), "i32"),
    ],
)
def test_pad_between_elementwise_ops(shape, pads, dtype):
    out = tuple(s + pads[i] + pads[len(shape) + i] for i, s in enumerate(shape))
    s, o = tensor(shape, dtype), tensor(out, dtype)
    text = (
        f"func.func @main(%x: {s}) -> {o} {{\n %0 = graph.abs %x : {s}\n"
        f" %1 = graph.pad %0 {{pads = {array(pads)}, value = -2.5 : f64}} : ({s}) -> {o}\n"
        f" %2 = graph.neg %1 : {o}\n func.return %2 : {o}\n}}"
    )
    check_compiled(text, sample(shape, dtype))


@pytest.mark.parametrize(
    "shapes, axis",
    [([(1,)], 0), ([(3, 1), (3, 7), (3, 2)], 1), ([(1, 7), (3, 7)], -2),
     ([(2, 5, 3, 7), (2, 0, 3, 7), (2, 2, 3, 7)], 1), ([(2, 3, 3, 5), (2, 3, 3, 1)], -1)],
)
def test_concat_of_elementwise_values(shapes, axis):
    out = np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape
    names = [f"%x{i}" for i in range(len(shapes))]
    args = ", ".join(f"{n}: {tensor(s)}" for n, s in zip(names, shapes))
    lines = [f" %e{i} = graph.exp {n} : {tensor(s)}" for i, (n, s) in enumerate(zip(names, shapes))]
    text = (
        f"func.func @main({args}) -> {tensor(out)} {{\n" + "\n".join(lines) + "\n"
        f" %c = graph.concat {', '.join(f'%e{i}' for i in range(len(shapes)))} {{axis = {axis} : i64}}"
        f" : ({', '.join(tensor(s) for s in shapes)}) -> {tensor(out)}\n"
        f" %r = graph.sqrt %c : {tensor(out)}\n func.return %r : {tensor(out)}\n}}"
    )
    check_compiled(text, *(sample(s, seed=i) for i, s in enumerate(shapes)))


@pytest.mark.parametrize(
    "data, indices, axis", [((7,), (3,), 0), ((7, 3), (2, 5), 0), ((3, 7), (4,), 1), ((2, 7, 3), (1,), -2)]
)
@pytest.mark.parametrize("index_type", ["i64", "i32"])
def test_gather_with_computed_indices_and_epilogue(data, indices, axis, index_type):
    """Indices come from an elementwise op and may be negative (they wrap)."""
    size = data[axis]
    out = np.take(np.zeros(data), np.zeros(indices, int), axis=axis).shape
    d, i, o = tensor(data), tensor(indices, index_type), tensor(out)
    text = (
        f"func.func @main(%d: {d}, %i: {i}) -> {o} {{\n %n = graph.neg %i : {i}\n"
        f" %g = graph.gather %d, %n {{axis = {axis} : i64}} : ({d}, {i}) -> {o}\n"
        f" %r = graph.exp %g : {o}\n func.return %r : {o}\n}}"
    )
    positions = np.random.default_rng(3).integers(1 - size, size, indices).astype(index_type.replace("i", "int"))
    check_compiled(text, sample(data), positions)


def test_gather_from_padded_concat_in_one_kernel():
    text = """
func.func @main(%x: tensor<3x2xf32>, %y: tensor<3x5xf32>, %i: tensor<1x4xi64>) -> tensor<3x1x4xf32> {
  %0 = graph.exp %x : tensor<3x2xf32>
  %1 = graph.concat %0, %y {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<3x7xf32>
  %2 = graph.pad %1 {pads = array<i64: 0, 1, 0, 0>, value = 5.0 : f64} : (tensor<3x7xf32>) -> tensor<3x8xf32>
  %3 = graph.gather %2, %i {axis = 1 : i64} : (tensor<3x8xf32>, tensor<1x4xi64>) -> tensor<3x1x4xf32>
  %4 = graph.neg %3 : tensor<3x1x4xf32>
  func.return %4 : tensor<3x1x4xf32>
}
"""
    check_compiled(text, sample((3, 2)), sample((3, 5), seed=1), np.array([[0, -1, 7, 2]]))
