"""fuse-row-loops: which kernels are row-local, and that their merged row loops compute what the interpreter does."""

import numpy as np
import pytest

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering.convert_graph_to_linalg import generalized, lower_group
from graphopt.lowering.mark_row_local import is_row_local


def single_op(shape, build):
    b = GraphBuilder()
    x = b.input("x", shape)
    return b.finish(build(b, x, shape))


OPS = {
    "softmax": lambda b, x, shape: b.softmax(x, axis=-1),
    "log_softmax": lambda b, x, shape: b.log_softmax(x, axis=-1),
    "layer_norm": lambda b, x, shape: b.layer_norm(
        x, b.constant(np.linspace(0.5, 1.5, shape[-1], dtype=np.float32)), b.constant(np.full(shape[-1], 0.25, np.float32))
    ),
    "reduce_max": lambda b, x, shape: b.reduce_max(x, axes=[1]),
    "reduce_mean": lambda b, x, shape: b.reduce_mean(x, axes=[1]),
}


def kernel_of(module):
    main = graphopt.compile(module, threads=1).module.body.block.first_op
    (group,) = [op for op in main.body.block.ops if op.name not in ("func.return", "graph.constant")]
    return generalized(lower_group(group, "k"))


@pytest.mark.parametrize("op", OPS)
def test_row_reductions_are_row_local(op):
    assert is_row_local(kernel_of(single_op((5, 7), OPS[op])))


@pytest.mark.parametrize(
    "build",
    [
        lambda b, x, shape: b.neg(b.transpose(b.exp(x), perm=[1, 0])),  # d0 reads another dimension
        lambda b, x, shape: b.reduce_sum(x, axes=[0]),  # reduces over the rows
    ],
    ids=["transpose", "reduce_over_rows"],
)
def test_other_kernels_are_not_row_local(build):
    assert not is_row_local(kernel_of(single_op((6, 6), build)))


def test_blocked_matmul_with_epilogue_is_not_row_local():
    b = GraphBuilder()
    x, w = b.input("x", (128, 256)), b.input("w", (256, 512))
    assert not is_row_local(kernel_of(b.finish(b.relu(b.matmul(x, w)))))  # d0 over blocks, then over rows


@pytest.mark.parametrize("rows", [1, 3, 1025])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("threads", [1, 2])
def test_merged_row_loops_equal_the_interpreter(op, rows, threads):
    module = single_op((rows, 37), OPS[op])
    x = np.random.default_rng(rows).standard_normal((rows, 37)).astype(np.float32)
    for got, want in zip(graphopt.compile(module, threads=threads)(x), graphopt.interpret(module, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
