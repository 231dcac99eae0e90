"""Property tests: the interpreter equals NumPy, and the builder's shapes equal the interpreter's."""

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import graphopt
from graphopt import GraphBuilder

PROPERTY = settings(max_examples=100, deadline=None)

FLOATS = st.floats(-100, 100, width=32)
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}
REDUCTIONS = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}


def run(build, *arrays) -> tuple[tuple[int, ...], np.ndarray]:
    """The builder's inferred shape of `build(b, *inputs)` and the interpreter's result."""
    b = GraphBuilder()
    result = build(b, *(b.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)))
    (value,) = graphopt.interpret(b.finish(result), *arrays)
    return tuple(result.type.get_shape()), value


def float_arrays(draw, *shapes):
    return [draw(hnp.arrays(np.float32, shape, elements=FLOATS)) for shape in shapes]


@PROPERTY
@given(
    st.data(), st.sampled_from(sorted(BINARY)), hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4)
)
def test_binary_ops_broadcast_like_numpy(data, op, shapes):
    a, b = float_arrays(data.draw, *shapes.input_shapes)
    shape, value = run(lambda builder, x, y: getattr(builder, op)(x, y), a, b)
    with np.errstate(all="ignore"):
        expected = BINARY[op](a, b)
    assert shape == value.shape == expected.shape == shapes.result_shape
    np.testing.assert_array_equal(value, expected)


@st.composite
def reduction_cases(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    signed = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    return draw(hnp.arrays(np.float32, shape, elements=FLOATS)), signed, draw(st.booleans())


@PROPERTY
@given(st.sampled_from(sorted(REDUCTIONS)), reduction_cases())
def test_reductions_equal_numpy(op, case):
    x, axes, keepdims = case
    shape, value = run(lambda b, v: getattr(b, op)(v, axes=axes, keepdims=keepdims), x)
    expected = REDUCTIONS[op](x.astype(np.float64), axis=tuple(axes), keepdims=keepdims)
    assert shape == value.shape == expected.shape
    assert value.dtype == np.float32
    # f32 cannot come closer than its smallest subnormal: an exact float64 mean of tiny values
    # (2.1487e-44) is 2.1e-44 in f32
    atol = max(1e-5 * np.abs(x).sum(), np.finfo(np.float32).smallest_subnormal)
    np.testing.assert_allclose(value, expected, rtol=1e-4, atol=atol)


@st.composite
def slice_cases(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    bound = st.integers(-8, 8)
    starts, ends = ([draw(bound) for _ in shape] for _ in range(2))
    steps = [draw(st.integers(1, 4)) for _ in shape]
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape), starts, ends, steps


@PROPERTY
@given(slice_cases())
def test_slice_equals_python_slicing(case):
    x, starts, ends, steps = case
    shape, value = run(lambda b, v: b.slice(v, starts=starts, ends=ends, steps=steps), x)
    expected = x[tuple(slice(*bounds) for bounds in zip(starts, ends, steps))]
    assert shape == value.shape
    np.testing.assert_array_equal(value, expected)


@st.composite
def window_cases(draw):
    """x [N, C, H, W] with a kernel, strides, dilations and padding that fit it."""
    kernel = [draw(st.integers(1, 3)) for _ in range(2)]
    dilations = [draw(st.integers(1, 2)) for _ in range(2)]
    strides = [draw(st.integers(1, 3)) for _ in range(2)]
    padding = [draw(st.integers(0, k - 1)) for k in kernel * 2]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    sizes = [draw(st.integers(max(1, s - padding[i] - padding[i + 2]), 7)) for i, s in enumerate(spans)]
    channels = draw(st.integers(1, 3))
    x = draw(hnp.arrays(np.float32, (draw(st.integers(1, 2)), channels, *sizes), elements=FLOATS))
    return x, kernel, strides, dilations, padding


@PROPERTY
@given(window_cases(), st.integers(1, 3))
def test_conv2d_shape_equals_inferred(case, out_channels):
    x, kernel, strides, dilations, padding = case
    w = np.ones((out_channels, x.shape[1], *kernel), np.float32)
    shape, value = run(lambda b, v, k: b.conv2d(v, k, strides=strides, dilations=dilations, padding=padding), x, w)
    assert shape == value.shape


@PROPERTY
@given(window_cases(), st.sampled_from(["max_pool2d", "avg_pool2d"]))
def test_pooling_shape_equals_inferred(case, op):
    x, kernel, strides, _, padding = case
    shape, value = run(lambda b, v: getattr(b, op)(v, kernel=kernel, strides=strides, padding=padding), x)
    assert shape == value.shape


@PROPERTY
@given(hnp.array_shapes(min_dims=0, max_dims=4, max_side=4), st.data())
def test_pad_and_transpose_shapes_equal_inferred(shape, data):
    x = np.zeros(shape, np.float32)
    pads = data.draw(st.lists(st.integers(0, 3), min_size=2 * len(shape), max_size=2 * len(shape)))
    perm = data.draw(st.permutations(range(len(shape))))
    shape, value = run(lambda b, v: b.transpose(b.pad(v, pads=pads), perm=perm), x)
    assert shape == value.shape


@PROPERTY
@given(
    hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3),
    st.lists(st.integers(1, 3), min_size=3, max_size=3),
)
def test_matmul_equals_numpy(batch, sizes):
    m, k, n = sizes
    a = np.arange(np.prod(batch.input_shapes[0]) * m * k, dtype=np.float32).reshape(*batch.input_shapes[0], m, k)
    b = np.ones((*batch.input_shapes[1], k, n), np.float32)
    shape, value = run(lambda builder, x, y: builder.matmul(x, y), a, b)
    assert shape == value.shape == (*batch.result_shape, m, n)
    np.testing.assert_allclose(value, np.matmul(a, b), rtol=1e-6)
