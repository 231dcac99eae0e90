"""GraphBuilder: inferred result types for every op, and verifier errors for bad shapes."""

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from graphopt import GraphBuilder
from graphopt.dialects.graph import GRAPH_OPS, GraphOp


def build(op: str, *operand_types: str, **attributes):
    """Apply builder method `op` to new inputs of types like "3x4xf32" ("f32": rank 0)."""
    b = GraphBuilder()
    operands = []
    for i, spec in enumerate(operand_types):
        *dims, dtype = spec.split("x")
        operands.append(b.input(f"x{i}", [int(d) for d in dims], dtype))
    return getattr(b, op)(*operands, **attributes)


INFERRED = [
    *[(op, ["3x1x7xf32"], {}, "tensor<3x1x7xf32>") for op in ("neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt")],
    *[(op, ["f64"], {}, "tensor<f64>") for op in ("reciprocal", "tanh", "sigmoid", "erf", "sin", "cos", "floor")],
    ("ceil", ["1xf16"], {}, "tensor<1xf16>"),
    ("relu", ["4xi32"], {}, "tensor<4xi32>"),
    ("gelu", ["2x3xf32"], {"approximate": "tanh"}, "tensor<2x3xf32>"),
    ("leaky_relu", ["2x3xf32"], {"alpha": 0.1}, "tensor<2x3xf32>"),
    ("clip", ["5xi64"], {"min": 0.0}, "tensor<5xi64>"),
    *[(op, ["3x1xf32", "7xf32"], {}, "tensor<3x7xf32>") for op in ("add", "sub", "mul", "div", "pow", "max", "min")],
    ("add", ["f32", "2x3xf32"], {}, "tensor<2x3xf32>"),
    ("cmp", ["4x1xi32", "3xi32"], {"predicate": "le"}, "tensor<4x3xi1>"),
    ("select", ["3xi1", "2x1xf32", "f32"], {}, "tensor<2x3xf32>"),
    ("batch_norm", ["2x3x5x5xf32", *["3xf32"] * 4], {"epsilon": 1e-3}, "tensor<2x3x5x5xf32>"),
    ("transpose", ["2x3x4xf32"], {"perm": [2, 0, 1]}, "tensor<4x2x3xf32>"),
    ("slice", ["5x7xf32"], {"starts": [-3, 0], "ends": [100, -1], "steps": [1, 2]}, "tensor<3x3xf32>"),
    ("concat", ["2x3xf32", "2x1xf32", "2x4xf32"], {"axis": -1}, "tensor<2x8xf32>"),
    ("pad", ["2x3xf32"], {"pads": [1, 0, 2, 3]}, "tensor<5x6xf32>"),
    ("gather", ["5x4xf32", "2x3xi32"], {"axis": 0}, "tensor<2x3x4xf32>"),
    ("gather", ["5x4xf32", "i64"], {"axis": -1}, "tensor<5xf32>"),
    ("reduce_sum", ["3x4x5xf32"], {"axes": [0, -1]}, "tensor<4xf32>"),
    ("reduce_mean", ["3x4x5xf32"], {"axes": [1], "keepdims": True}, "tensor<3x1x5xf32>"),
    ("reduce_max", ["3x4xi64"], {"axes": [0, 1]}, "tensor<i64>"),
    ("reduce_min", ["3x4xf32"], {"axes": [-2], "keepdims": True}, "tensor<1x4xf32>"),
    ("softmax", ["3x4xf32"], {}, "tensor<3x4xf32>"),
    ("log_softmax", ["3x4xf32"], {"axis": 0}, "tensor<3x4xf32>"),
    ("layer_norm", ["2x3x4xf32", "3x4xf32", "3x4xf32"], {"axis": 1}, "tensor<2x3x4xf32>"),
    ("matmul", ["2x1x3x4xf32", "5x4x6xf32"], {}, "tensor<2x5x3x6xf32>"),
    ("conv2d", ["1x3x28x28xf32", "8x3x5x5xf32"], {"padding": [2, 2, 2, 2]}, "tensor<1x8x28x28xf32>"),
    (
        "conv2d",
        ["2x4x9x8xf32", "6x2x3x3xf32"],
        {"strides": [2, 3], "dilations": [2, 1], "padding": [1, 0, 1, 2], "groups": 2},
        "tensor<2x6x4x3xf32>",
    ),
    ("max_pool2d", ["1x8x28x28xf32"], {"kernel": [2, 2], "strides": [2, 2]}, "tensor<1x8x14x14xf32>"),
    ("avg_pool2d", ["1x2x7x5xf32"], {"kernel": [3, 2], "padding": [1, 1, 1, 0]}, "tensor<1x2x7x5xf32>"),
]


@pytest.mark.parametrize("op, operands, attributes, expected", INFERRED)
def test_inferred_result_type(op, operands, attributes, expected):
    assert str(build(op, *operands, **attributes).type) == expected


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda b: b.constant([[0.0, 1.0, 2.0]]), "tensor<1x3xf32>"),
        (lambda b: b.constant(np.zeros((2, 3))), "tensor<2x3xf64>"),
        (lambda b: b.constant(np.arange(4), "i32"), "tensor<4xi32>"),
        (lambda b: b.constant(1.5), "tensor<f32>"),
        (lambda b: b.reshape(b.input("x", (2, 3)), (3, 2, 1)), "tensor<3x2x1xf32>"),
        (lambda b: b.broadcast_to(b.input("x", (3, 1)), (2, 3, 4)), "tensor<2x3x4xf32>"),
        (lambda b: b.cast(b.input("x", (2, 3)), "i1"), "tensor<2x3xi1>"),
    ],
)
def test_explicit_result_type(make, expected):
    assert str(make(GraphBuilder()).type) == expected


def test_every_op_is_covered():
    covered = {op for op, *_ in INFERRED} | {"constant", "reshape", "broadcast_to", "cast"}
    assert {op.name.removeprefix("graph.") for op in GRAPH_OPS if issubclass(op, GraphOp)} == covered


@pytest.mark.parametrize(
    "op, operands, attributes, fragments",
    [
        ("add", ["3x4xf32", "5xf32"], {}, ["'a' [3, 4]", "'b' [5]", "not broadcast-compatible"]),
        ("mul", ["3xf32", "3xi32"], {}, ["'b' tensor<3xi32>", "expected f32"]),
        ("exp", ["3xi32"], {}, ["'x' tensor<3xi32>", "float"]),
        ("relu", ["3xi1"], {}, ["'x' tensor<3xi1>", "i1"]),
        ("cmp", ["3xf32", "3xf32"], {"predicate": "lesser"}, ["predicate"]),
        ("select", ["3xf32", "3xf32", "3xf32"], {}, ["'cond' tensor<3xf32>", "i1"]),
        ("batch_norm", ["2x3xf32", "3xf32", "3xf32", "4xf32", "3xf32"], {}, ["'mean' tensor<4xf32>", "[3]"]),
        ("transpose", ["2x3xf32"], {"perm": [0, 0]}, ["perm [0, 0]"]),
        ("slice", ["5xf32"], {"starts": [0], "ends": [5], "steps": [0]}, ["steps [0]"]),
        ("concat", ["2x3xf32", "3x3xf32"], {"axis": 1}, ["input #1 [3, 3]", "input #0 [2, 3]"]),
        ("pad", ["2x3xf32"], {"pads": [1, 1]}, ["pads has 2 entries"]),
        ("gather", ["5x4xf32", "2xf32"], {"axis": 0}, ["'indices' tensor<2xf32>"]),
        ("reduce_sum", ["3x4xf32"], {"axes": [2]}, ["axis 2", "rank 2"]),
        ("softmax", ["3x4xi32"], {}, ["'x' tensor<3x4xi32>"]),
        ("layer_norm", ["2x3xf32", "2xf32", "3xf32"], {}, ["'scale' tensor<2xf32>", "[3]"]),
        ("matmul", ["3x4xf32", "5x6xf32"], {}, ["'a' [3, 4]", "'b' [5, 6]"]),
        ("matmul", ["2x3x4xf32", "3x4x5xf32"], {}, ["'a batch' [2]", "'b batch' [3]"]),
        ("conv2d", ["1x3x8x8xf32", "2x2x3x3xf32"], {}, ["'w' [2, 2, 3, 3]", "'x' [1, 3, 8, 8]"]),
        ("conv2d", ["1x4x8x8xf32", "2x2x3x3xf32"], {"groups": 3}, ["groups=3"]),
        ("conv2d", ["1x1x2x2xf32", "1x1x3x3xf32"], {}, ["does not fit"]),
        ("max_pool2d", ["1x1x4x4xf32"], {"kernel": [2, 2], "padding": [2, 0, 0, 0]}, ["padding [2, 0, 0, 0]"]),
        ("avg_pool2d", ["4x4xf32"], {"kernel": [2, 2]}, ["'x' [N, C, H, W], got [4, 4]"]),
    ],
)
def test_bad_shapes_name_op_and_operand(op, operands, attributes, fragments):
    with pytest.raises(VerifyException) as error:
        build(op, *operands, **attributes)
    for fragment in [f"graph.{op}:", *fragments]:
        assert fragment in str(error.value)


@pytest.mark.parametrize(
    "make, fragments",
    [
        (lambda b: b.reshape(b.input("x", (2, 3)), (5,)), ["graph.reshape", "[2, 3]", "[5]"]),
        (lambda b: b.broadcast_to(b.input("x", (3,)), (2, 4)), ["graph.broadcast_to", "[3]", "[2, 4]"]),
    ],
)
def test_bad_explicit_result_shapes(make, fragments):
    with pytest.raises(VerifyException) as error:
        make(GraphBuilder())
    for fragment in fragments:
        assert fragment in str(error.value)
