"""The reference interpreter against independent NumPy and Python computations, op by op."""

import itertools
import math
import operator

import numpy as np
import pytest

import graphopt
from graphopt import GraphBuilder, GraphoptError
from graphopt.dialects.attributes import NUMPY_DTYPES
from graphopt.dialects.graph import GRAPH_OPS, FusedOp, YieldOp
from graphopt.interpreter import OPS

rng = np.random.default_rng(0)
F32 = {"rtol": 1e-5, "atol": 1e-6}
F32_REDUCE = {"rtol": 1e-4, "atol": 1e-5}


def rand(*shape, low=-3.0, high=3.0, dtype=np.float32) -> np.ndarray:
    return np.asarray(rng.uniform(low, high, shape)).astype(dtype)


def evaluate(build, *arrays) -> tuple[np.ndarray, ...]:
    """Interpret the function `build(b, *inputs)` returns (one value or a tuple) on `arrays`."""
    b = GraphBuilder()
    inputs = [b.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    results = build(b, *inputs)
    module = b.finish(*(results if isinstance(results, tuple) else (results,)))
    return graphopt.interpret(module, *arrays)


def apply(op: str, *arrays, **attributes) -> np.ndarray:
    """Interpret one graph op (a GraphBuilder method) on `arrays`."""
    (result,) = evaluate(lambda b, *xs: getattr(b, op)(*xs, **attributes), *arrays)
    return result


def per_element(function, *arrays) -> np.ndarray:
    """`function` of Python floats applied to the broadcast `arrays`, in float64."""
    return np.vectorize(function, otypes=[np.float64])(*(a.astype(np.float64) for a in arrays))


def check(actual: np.ndarray, expected, dtype=np.float32, tolerance=F32) -> None:
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == dtype and actual.shape == expected.shape
    np.testing.assert_allclose(actual.astype(np.float64), expected, **tolerance)


def test_every_op_has_an_evaluator():
    assert {op.name for op in GRAPH_OPS} - set(OPS) == {FusedOp.name, YieldOp.name}


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------

UNARY = {
    "neg": operator.neg,
    "abs": abs,
    "relu": lambda v: max(v, 0.0),
    "exp": math.exp,
    "tanh": math.tanh,
    "sigmoid": lambda v: 1 / (1 + math.exp(-v)),
    "erf": math.erf,
    "sin": math.sin,
    "cos": math.cos,
    "floor": math.floor,
    "ceil": math.ceil,
}
POSITIVE_UNARY = {
    "log": math.log,
    "sqrt": math.sqrt,
    "rsqrt": lambda v: 1 / math.sqrt(v),
    "reciprocal": lambda v: 1 / v,
}
SHAPES = [(), (1,), (7,), (3, 7), (2, 1, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", [*UNARY, *POSITIVE_UNARY])
def test_unary(op, dtype, shape):
    reference = UNARY.get(op) or POSITIVE_UNARY[op]
    x = rand(*shape, low=0.1 if op in POSITIVE_UNARY else -3.0, dtype=dtype)
    check(apply(op, x), per_element(reference, x), dtype)


@pytest.mark.parametrize("op", ["neg", "abs", "relu"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_unary(op, dtype):
    x = np.array([-7, -1, 0, 1, 5], dtype)
    np.testing.assert_array_equal(apply(op, x), [int(UNARY[op](int(v))) for v in x])
    assert apply(op, x).dtype == dtype


@pytest.mark.parametrize(
    "attributes, expected",
    [
        ({"min": -2.5, "max": 1e30}, [-2, -2, 0, 3, 2**62 + 1]),
        ({"min": 0.5, "max": 2.5}, [1, 1, 1, 2, 2]),
        ({}, [-7, -3, 0, 3, 2**62 + 1]),
    ],
)
def test_integer_clip_clamps_to_the_integers_in_range(attributes, expected):
    x = np.array([-7, -3, 0, 3, 2**62 + 1], np.int64)
    result = apply("clip", x, **attributes)
    assert result.dtype == np.int64
    np.testing.assert_array_equal(result, expected)


NAN_INF = np.array([np.nan, np.inf, -np.inf, -2.0], np.float32)


@pytest.mark.parametrize(
    "op, attributes, expected",
    [
        ("relu", {}, [np.nan, np.inf, 0, 0]),
        ("sigmoid", {}, [np.nan, 1, 0, 1 / (1 + math.exp(2))]),
        ("tanh", {}, [np.nan, 1, -1, math.tanh(-2)]),
        ("erf", {}, [np.nan, 1, -1, math.erf(-2)]),
        ("exp", {}, [np.nan, np.inf, 0, math.exp(-2)]),
        ("abs", {}, [np.nan, np.inf, np.inf, 2]),
        ("sqrt", {}, [np.nan, np.inf, np.nan, np.nan]),
        ("log", {}, [np.nan, np.inf, np.nan, np.nan]),
        ("reciprocal", {}, [np.nan, 0, 0, -0.5]),
        ("leaky_relu", {"alpha": 0.1}, [np.nan, np.inf, -np.inf, -0.2]),
        ("clip", {"min": -1.0, "max": 1.0}, [np.nan, 1, -1, -1]),
    ],
)
def test_nan_and_inf_propagate_silently(op, attributes, expected):
    with np.errstate(all="raise"):
        check(apply(op, NAN_INF, **attributes), expected)


def gelu_erf(v: float) -> float:
    return v * (1 + math.erf(v / math.sqrt(2))) / 2


def gelu_tanh(v: float) -> float:
    return v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) / 2


@pytest.mark.parametrize("shape", [(), (3, 7)])
@pytest.mark.parametrize(
    "op, attributes, reference",
    [
        ("gelu", {}, gelu_erf),
        ("gelu", {"approximate": "none"}, gelu_erf),
        ("gelu", {"approximate": "tanh"}, gelu_tanh),
        ("leaky_relu", {"alpha": 0.01}, lambda v: v if v >= 0 else 0.01 * v),
        ("leaky_relu", {"alpha": 2.5}, lambda v: v if v >= 0 else 2.5 * v),
        ("clip", {"min": -1.0, "max": 0.5}, lambda v: min(max(v, -1.0), 0.5)),
        ("clip", {"min": 0.0}, lambda v: max(v, 0.0)),
        ("clip", {"max": 6}, lambda v: min(v, 6.0)),
        ("clip", {}, lambda v: v),
    ],
)
def test_unary_with_attributes(op, attributes, reference, shape):
    x = rand(*shape, low=-8, high=8)
    check(apply(op, x, **attributes), per_element(reference, x))


@pytest.mark.parametrize(
    "values, source, target, expected",
    [
        ([-1.7, -0.5, 0.0, 2.5, 3.9], np.float32, "i32", [-1, 0, 0, 2, 3]),
        ([-1.7, 0.0, 2.5], np.float32, "i64", [-1, 0, 2]),
        ([-3, 0, 7], np.int32, "f32", [-3.0, 0.0, 7.0]),
        ([-3, 0, 7], np.int64, "i32", [-3, 0, 7]),
        ([-0.5, 0.0, 2.0, np.nan], np.float32, "i1", [True, False, True, True]),
        ([True, False], np.bool_, "f32", [1.0, 0.0]),
        ([1.0 / 3, 65504.0], np.float32, "f16", [np.float16(1.0 / 3), 65504.0]),
        ([1.0 / 3], np.float64, "f32", [np.float32(1.0 / 3)]),
    ],
)
def test_cast(values, source, target, expected):
    result = evaluate(lambda b, x: b.cast(x, target), np.array(values, source))[0]
    assert result.dtype == NUMPY_DTYPES[target]
    np.testing.assert_array_equal(result, np.array(expected, result.dtype))


BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": operator.pow,
    "max": max,
    "min": min,
}
BROADCAST_SHAPES = [
    ((3, 7), (3, 7)),
    ((), (3, 7)),
    ((3, 1), (1, 7)),
    ((1,), (2, 3, 1)),
    ((2, 1, 7), (3, 1)),
    ((7,), ()),
]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcasts(op, shapes):
    a, b = (rand(*s, low=0.5 if op == "pow" else -3.0) for s in shapes)
    check(apply(op, a, b), per_element(BINARY[op], a, b))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_binary(op, dtype):
    a, b = np.array([[-4], [0], [9]], dtype), np.array([3, -2], dtype)
    expected = [[BINARY[op](int(x), int(y)) for y in b] for x in a[:, 0]]
    result = apply(op, a, b)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("op, expected", [("max", [np.nan, np.nan, 2.0]), ("min", [np.nan, np.nan, 1.0])])
def test_binary_max_min_propagate_nan(op, expected):
    a, b = np.array([np.nan, 1, 2], np.float32), np.array([0, np.nan, 1], np.float32)
    np.testing.assert_array_equal(apply(op, a, b), np.array(expected, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("predicate", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp(predicate, dtype):
    compare = getattr(operator, predicate)
    a = np.array([[1, 2, 3], [np.nan, 0, -1]] if dtype == np.float32 else [[1, 2, 3], [4, 0, -1]], dtype)
    b = np.array([2, 2, np.nan] if dtype == np.float32 else [2, 2, 5], dtype)
    result = apply("cmp", a, b, predicate=predicate)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, [[compare(x, y) for x, y in zip(row, b)] for row in a.tolist()])


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((4,), (3, 1), ()), ((), (2, 3), (3,))])
def test_select(shapes):
    cond = rng.uniform(size=shapes[0]) < 0.5
    a, b = rand(*shapes[1]), rand(*shapes[2])
    expected = per_element(lambda c, x, y: x if c else y, cond, a, b)
    check(apply("select", cond, a, b), expected)


@pytest.mark.parametrize("shape", [(2, 3), (1, 3, 5), (2, 4, 3, 1)])
def test_batch_norm(shape):
    x = rand(*shape)
    channels = shape[1]
    scale, bias, mean = rand(channels), rand(channels), rand(channels)
    var = rand(channels, low=0.1, high=2.0)
    expected = np.empty(shape)
    for c in range(channels):
        expected[:, c] = (x[:, c] - mean[c]) / math.sqrt(var[c] + 1e-3) * scale[c] + bias[c]
    check(apply("batch_norm", x, scale, bias, mean, var, epsilon=1e-3), expected)


@pytest.mark.parametrize(
    "value, dtype",
    [(rand(3, 7), None), (np.arange(6).reshape(2, 3), "i64"), (np.float32(2.5), None), ([True, False], "i1")],
)
def test_constant(value, dtype):
    (result,) = evaluate(lambda b: b.constant(value, dtype))
    np.testing.assert_array_equal(result, np.asarray(value))
    assert result.shape == np.shape(value)


# ----------------------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, target", [((3, 4), (12,)), ((2, 3, 1), (1, 6)), ((1,), ()), ((), (1, 1))])
def test_reshape(source, target):
    x = rand(*source)
    result = evaluate(lambda b, v: b.reshape(v, target), x)[0]
    check(result, np.array(x.ravel().tolist()).reshape(target))


@pytest.mark.parametrize("source, target", [((), (2, 3)), ((3,), (2, 3)), ((2, 1), (2, 7)), ((1, 3), (4, 1, 3))])
def test_broadcast_to(source, target):
    x = rand(*source)
    result = evaluate(lambda b, v: b.broadcast_to(v, target), x)[0]
    expected = np.empty(target)
    for index in itertools.product(*map(range, target)):
        source_index = tuple(0 if d == 1 else i for i, d in zip(index[len(target) - x.ndim :], source))
        expected[index] = x[source_index]
    check(result, expected)


@pytest.mark.parametrize(
    "shape, perm", [((3, 7), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((1, 3, 1), (0, 2, 1)), ((5,), (0,))]
)
def test_transpose(shape, perm):
    x = rand(*shape)
    expected = np.empty([shape[p] for p in perm])
    for index in itertools.product(*map(range, expected.shape)):
        source = [0] * len(shape)
        for axis, i in zip(perm, index):
            source[axis] = i
        expected[index] = x[tuple(source)]
    check(apply("transpose", x, perm=perm), expected)


@pytest.mark.parametrize(
    "starts, ends, steps",
    [
        ((0, 0), (5, 7), (1, 1)),
        ((1, 2), (4, 6), (2, 3)),
        ((-3, -1), (5, 7), (1, 1)),
        ((0, -5), (-1, -2), (1, 2)),
        ((-100, 3), (100, 100), (3, 1)),
        ((4, 6), (2, 3), (1, 1)),
        ((0, 1), (1, 2), (7, 7)),
    ],
)
def test_slice(starts, ends, steps):
    x = rand(5, 7)
    rows, cols = (list(range(*slice(b, e, s).indices(n))) for b, e, s, n in zip(starts, ends, steps, x.shape))
    expected = np.array([[x[i, j] for j in cols] for i in rows]).reshape(len(rows), len(cols))
    check(apply("slice", x, starts=starts, ends=ends, steps=steps), expected)


@pytest.mark.parametrize(
    "shapes, axis", [([(2, 3), (2, 1), (2, 4)], 1), ([(1, 3), (3, 3)], 0), ([(2, 1, 3)], -1), ([(2, 3), (2, 3)], -2)]
)
def test_concat(shapes, axis):
    arrays = [rand(*s) for s in shapes]
    expected = arrays[0]
    for array in arrays[1:]:
        expected = np.concatenate([expected, array], axis=axis)
    result = evaluate(lambda b, *xs: b.concat(list(xs), axis=axis), *arrays)[0]
    check(result, expected)


@pytest.mark.parametrize(
    "shape, pads, value",
    [((3, 4), (1, 0, 2, 3), 0.0), ((5,), (0, 0), 1.5), ((2, 1, 3), (0, 1, 2, 1, 0, 1), -7.0), ((), (), 3.0)],
)
def test_pad(shape, pads, value):
    x = rand(*shape)
    begins, ends = pads[: len(shape)], pads[len(shape) :]
    expected = np.full([d + b + e for d, b, e in zip(shape, begins, ends)], value)
    expected[tuple(slice(b, b + d) for b, d in zip(begins, shape))] = x
    check(apply("pad", x, pads=pads, value=value), expected)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize(
    "shape, indices, axis",
    [((5, 3), [0, 4, -1, -5], 0), ((5, 3), [[2, -2], [0, 0]], 1), ((2, 3, 4), [-1], -1), ((7,), 3, 0)],
)
def test_gather(shape, indices, axis, index_dtype):
    data, indices = rand(*shape), np.array(indices, index_dtype)
    axis %= data.ndim
    expected = np.empty(shape[:axis] + indices.shape + shape[axis + 1 :])
    for index in itertools.product(*map(range, expected.shape)):
        position = int(indices[index[axis : axis + indices.ndim]]) % shape[axis]
        expected[index] = data[index[:axis] + (position,) + index[axis + indices.ndim :]]
    check(apply("gather", data, indices, axis=axis), expected)


def test_gather_wraps_negative_then_clamps_out_of_range_indices():
    data = rand(5)
    indices = np.array([5, 99, -1, -5, -6, -99])
    check(apply("gather", data, indices, axis=0), data[[4, 4, 4, 0, 0, 0]])


# ----------------------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------------------

REDUCTIONS = {
    "reduce_sum": math.fsum,
    "reduce_mean": lambda values: math.fsum(values) / len(values),
    "reduce_max": max,
    "reduce_min": min,
}


def reduce_reference(x: np.ndarray, axes, keepdims: bool, function) -> np.ndarray:
    """`function` of the list of values of each reduced group, by explicit iteration."""
    axes = {a % x.ndim for a in axes}
    out_shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
    groups: dict[tuple, list] = {}
    for index in itertools.product(*map(range, x.shape)):
        key = tuple(0 if d in axes else i for d, i in enumerate(index))
        groups.setdefault(key, []).append(float(x[index]))
    result = np.array([function(groups[k]) for k in itertools.product(*map(range, out_shape))]).reshape(out_shape)
    return result if keepdims else result.reshape([n for d, n in enumerate(x.shape) if d not in axes])


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(
    "shape, axes",
    [
        ((3, 7), (1,)),
        ((3, 7), (-1, 0)),
        ((2, 3, 5), (0, 2)),
        ((2, 3, 5), (-2,)),
        ((1, 7), (0,)),
        ((7,), ()),
        ((4,), (0,)),
    ],
)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions(op, shape, axes, keepdims):
    x = rand(*shape)
    expected = reduce_reference(x, axes, keepdims, REDUCTIONS[op])
    check(apply(op, x, axes=axes, keepdims=keepdims), expected, tolerance=F32_REDUCE)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions(op, dtype):
    x = np.array([[3, -8, 5], [2**30, 2**30, 7]], dtype)
    result = apply(op, x, axes=[1])
    assert result.dtype == dtype
    expected = [sum(r) if op == "reduce_sum" else REDUCTIONS[op](r) for r in x.tolist()]
    np.testing.assert_array_equal(result, np.array(expected).astype(dtype))


@pytest.mark.parametrize(
    "op, expected",
    [("reduce_max", [np.nan, 3.0]), ("reduce_min", [np.nan, -np.inf]), ("reduce_sum", [np.nan, -np.inf])],
)
def test_reductions_propagate_nan(op, expected):
    x = np.array([[1, np.nan, 2], [3, -np.inf, 0]], np.float32)
    np.testing.assert_array_equal(apply(op, x, axes=[-1]), np.array(expected, np.float32))


@pytest.mark.parametrize(
    "op, expected", [("reduce_sum", 0), ("reduce_mean", np.nan), ("reduce_max", -np.inf), ("reduce_min", np.inf)]
)
def test_reductions_over_empty_axes(op, expected):
    np.testing.assert_array_equal(apply(op, np.zeros((0, 2), np.float32), axes=[0]), np.full(2, expected, np.float32))


def softmax_reference(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """softmax and log_softmax in float64 through log-sum-exp."""
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    peak = x.max(axis=-1, keepdims=True)
    log_sum = peak + np.log(np.exp(x - peak).sum(axis=-1, keepdims=True))
    return np.moveaxis(np.exp(x - log_sum), -1, axis), np.moveaxis(x - log_sum, -1, axis)


@pytest.mark.parametrize("scale", [1.0, 1000.0])
@pytest.mark.parametrize("shape, axis", [((3, 7), None), ((3, 7), 0), ((2, 3, 5), 1), ((2, 3, 5), -3), ((1,), 0)])
@pytest.mark.parametrize("op, index", [("softmax", 0), ("log_softmax", 1)])
def test_softmax(op, index, shape, axis, scale):
    x = rand(*shape) * np.float32(scale)
    result = apply(op, x, axis=axis)
    assert np.isfinite(result).all()
    check(result, softmax_reference(x, -1 if axis is None else axis)[index], tolerance=F32_REDUCE)


@pytest.mark.parametrize(
    "shape, axis", [((3, 7), None), ((3, 7), -1), ((2, 3, 5), 1), ((2, 3, 5), -2), ((4, 3), 0), ((1, 1), -1)]
)
def test_layer_norm(shape, axis):
    first = (-1 if axis is None else axis) % len(shape)
    x, scale, bias = rand(*shape), rand(*shape[first:]), rand(*shape[first:])
    rows = x.astype(np.float64).reshape(math.prod(shape[:first]), -1)
    normalized = (rows - rows.mean(axis=1, keepdims=True)) / np.sqrt(rows.var(axis=1, keepdims=True) + 1e-5)
    expected = normalized.reshape(shape) * scale + bias
    check(apply("layer_norm", x, scale, bias, axis=axis), expected, tolerance=F32_REDUCE)


# ----------------------------------------------------------------------------------------
# Anchors: contractions and windows
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 7), (7, 1)),
        ((1, 1), (1, 5)),
        ((2, 3, 4), (4, 5)),
        ((4, 5), (2, 5, 3)),
        ((1, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
    ],
)
def test_matmul(a_shape, b_shape, dtype):
    a, b = rand(*a_shape, low=-5, high=5, dtype=dtype), rand(*b_shape, low=-5, high=5, dtype=dtype)
    expected = np.einsum("...ik,...kj->...ij", a.astype(np.float64), b.astype(np.float64))
    check(apply("matmul", a, b), expected, dtype, F32_REDUCE)


def conv2d_reference(x, w, strides, dilations, padding, groups) -> np.ndarray:
    """Cross-correlation by explicit loops over output positions; padding reads zero."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + left + right - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    for b, f, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        group = f // (o // groups)
        for ci, p, q in itertools.product(range(cg), range(kh), range(kw)):
            row = i * strides[0] + p * dilations[0] - top
            col = j * strides[1] + q * dilations[1] - left
            if 0 <= row < h and 0 <= col < wd:
                out[b, f, i, j] += x[b, group * cg + ci, row, col] * w[f, ci, p, q]
    return out


@pytest.mark.parametrize(
    "x_shape, w_shape, attributes",
    [
        ((1, 1, 5, 5), (1, 1, 3, 3), {}),
        ((2, 3, 7, 6), (4, 3, 3, 2), {"padding": [1, 0, 2, 1]}),
        ((1, 2, 7, 7), (3, 2, 3, 3), {"strides": [2, 3], "padding": [1, 1, 1, 1]}),
        ((1, 2, 7, 7), (2, 2, 2, 3), {"dilations": [2, 3], "padding": [0, 2, 1, 0]}),
        ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 3, 6, 5), (3, 1, 3, 1), {"groups": 3, "dilations": [2, 1]}),
        ((1, 1, 1, 1), (1, 1, 1, 1), {"padding": [1, 1, 1, 1]}),
    ],
)
def test_conv2d(x_shape, w_shape, attributes):
    x, w = rand(*x_shape), rand(*w_shape)
    options = {"strides": (1, 1), "dilations": (1, 1), "padding": (0, 0, 0, 0), "groups": 1, **attributes}
    check(apply("conv2d", x, w, **attributes), conv2d_reference(x, w, **options), tolerance=F32_REDUCE)


def pool_reference(x, kernel, strides, padding, reduce) -> np.ndarray:
    """`reduce(values, window size)` of each window's in-bounds values, by explicit loops."""
    n, c, h, w = x.shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - kernel[0]) // strides[0] + 1
    ow = (w + left + right - kernel[1]) // strides[1] + 1
    out = np.zeros((n, c, oh, ow))
    for b, f, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        rows = range(max(i * strides[0] - top, 0), min(i * strides[0] - top + kernel[0], h))
        cols = range(max(j * strides[1] - left, 0), min(j * strides[1] - left + kernel[1], w))
        out[b, f, i, j] = reduce([x[b, f, r, s] for r in rows for s in cols], kernel[0] * kernel[1])
    return out


POOLS = {
    ("max_pool2d", None): lambda values, size: max(values),
    ("avg_pool2d", False): lambda values, size: sum(values) / len(values),
    ("avg_pool2d", True): lambda values, size: sum(values) / size,
}


@pytest.mark.parametrize(
    "shape, kernel, strides, padding",
    [
        ((1, 1, 4, 4), (2, 2), (2, 2), (0, 0, 0, 0)),
        ((2, 3, 7, 5), (3, 3), (1, 1), (1, 1, 1, 1)),
        ((1, 2, 7, 7), (3, 2), (2, 3), (2, 1, 0, 1)),
        ((1, 1, 1, 1), (2, 2), (1, 1), (1, 1, 0, 0)),
        ((1, 2, 5, 6), (1, 3), (2, 1), (0, 2, 0, 1)),
    ],
)
@pytest.mark.parametrize("op, count_include_pad", POOLS)
def test_pooling(op, count_include_pad, shape, kernel, strides, padding):
    x = rand(*shape) - 10  # all negative: a padded zero must never win the max
    attributes = {"kernel": kernel, "strides": strides, "padding": padding}
    if count_include_pad is not None:
        attributes["count_include_pad"] = count_include_pad
    expected = pool_reference(x, kernel, strides, padding, POOLS[op, count_include_pad])
    check(apply(op, x, **attributes), expected, tolerance=F32_REDUCE)


def test_max_pool_propagates_nan():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    expected = np.array([[[[np.nan, 7], [13, 15]]]], np.float32)
    np.testing.assert_array_equal(apply("max_pool2d", x, kernel=[2, 2], strides=[2, 2]), expected)


# ----------------------------------------------------------------------------------------
# Functions, calls, groups
# ----------------------------------------------------------------------------------------

CALLS = """
func.func @scaled(%x: tensor<3xf32>, %s: tensor<f32>) -> tensor<3xf32> {
  %0 = graph.mul %x, %s : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func @twice(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %two = graph.constant dense<2.0> : tensor<f32>
  %0 = func.call @scaled(%x, %two) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  func.return %0, %two : tensor<3xf32>, tensor<f32>
}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0:2 = func.call @twice(%x) : (tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>)
  %1 = func.call @scaled(%0#0, %0#1) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  func.return %1 : tensor<3xf32>
}
"""


@pytest.mark.parametrize("entry, expected", [("main", [[4.0, -8.0, 0.0]]), ("twice", [[2.0, -4.0, 0.0], 2.0])])
def test_function_calls(entry, expected):
    results = graphopt.interpret(graphopt.parse(CALLS), np.array([1, -2, 0], np.float32), entry=entry)
    assert len(results) == len(expected)
    for result, value in zip(results, expected):
        check(result, value)


FUSED = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>) {
  %r:2 = graph.fused(%a, %b) {name = "fused_add_relu_sum", mode = "compile"}
         : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
    %s = graph.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %t = graph.relu %s : tensor<2x3xf32>
    %u = graph.reduce_sum %t {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
    graph.yield %t, %u : tensor<2x3xf32>, tensor<2xf32>
  }
  %n = graph.neg %r#0 : tensor<2x3xf32>
  func.return %r#0, %r#1, %n : tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>
}
"""


def test_fused_group_runs_as_its_inlined_body():
    a, b = rand(2, 3), rand(3)
    relu = np.array([[max(x + y, 0.0) for x, y in zip(row, b.tolist())] for row in a.tolist()])
    results = graphopt.interpret(graphopt.parse(FUSED), a, b)
    for result, expected in zip(results, [relu, relu.sum(axis=1), -relu], strict=True):
        check(result, expected)


# ----------------------------------------------------------------------------------------
# Arguments, results and errors
# ----------------------------------------------------------------------------------------


def two_argument_module():
    b = GraphBuilder()
    x, n = b.input("x", (2, 3)), b.input("n", (3,), "i32")
    return b.finish(b.add(x, b.cast(n, "f32")), b.reduce_sum(x, axes=[0, 1]))


@pytest.mark.parametrize(
    "arrays, message",
    [
        ((np.zeros((2, 3), np.float32),), r"@main expects 2 arguments \(tensor<2x3xf32>, tensor<3xi32>\), got 1"),
        (
            (np.zeros((3, 2)), np.zeros(3, np.int32)),
            r"argument #0 \('x'\): expected tensor<2x3xf32>, got an array of shape \[3, 2\]",
        ),
        ((np.zeros((2, 3)), np.zeros(3)), r"argument #1 \('n'\): expected tensor<3xi32>, got .* dtype float64"),
        ((np.zeros((2, 3)), np.zeros(3, np.int32), np.zeros(1)), "expects 2 arguments"),
        ((np.zeros((2, 3), np.complex64), np.zeros(3, np.int32)), r"argument #0 \('x'\).*dtype complex64"),
    ],
)
def test_bad_arguments(arrays, message):
    with pytest.raises(GraphoptError, match=message):
        graphopt.interpret(two_argument_module(), *arrays)


@pytest.mark.parametrize(
    "x, n",
    [
        (np.ones((2, 3), np.float64), np.arange(3, dtype=np.int64)),
        (np.ones((2, 3), np.int64), np.arange(3, dtype=np.int16)),
        ([[1, 1, 1], [1, 1, 1]], [0, 1, 2]),
        (np.ones((2, 3), np.bool_), np.arange(3, dtype=np.uint8)),
    ],
)
def test_arguments_convert_by_same_kind_casting(x, n):
    total, summed = graphopt.interpret(two_argument_module(), x, n)
    np.testing.assert_array_equal(total, np.array([[1, 2, 3], [1, 2, 3]], np.float32))
    assert total.dtype == np.float32
    assert isinstance(summed, np.ndarray) and summed.shape == () and summed.dtype == np.float32 and summed == 6


def test_results_are_fresh_arrays():
    b = GraphBuilder()
    x = b.input("x", (3,))
    module = b.finish(x, b.reshape(x, (1, 3)))
    x_value = np.ones(3, np.float32)
    for result in graphopt.interpret(module, x_value):
        result[...] = 0
    assert (x_value == 1).all()


def test_missing_entry_function():
    with pytest.raises(GraphoptError, match="no function @forward"):
        graphopt.interpret(two_argument_module(), entry="forward")


def test_unknown_op():
    module = graphopt.parse(
        """
        func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = arith.addf %x, %x : tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
        """
    )
    with pytest.raises(GraphoptError, match="does not know op 'arith.addf'"):
        graphopt.interpret(module, np.zeros(4, np.float32))
