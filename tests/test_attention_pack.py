"""Matmuls whose b is computed or an input: b packed into panels at run time, then the packed GEMM
ukernel (batched_gemm per batch matrix), against NumPy and the interpreter; attention's K^T is
read where it lives (operand prologue), and the kernels still split by rows at threads=2."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func, memref

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering.convert_graph_to_linalg import lower_group

TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def transposed_b(a_shape, b_shape):
    """@main(x, y) = x @ b, b = y with its last two dims swapped."""
    g = GraphBuilder()
    *batch, k, n = b_shape
    x, y = g.input("x", a_shape), g.input("y", (*batch, n, k))
    return g.finish(g.matmul(x, g.transpose(y, perm=[*range(len(batch)), len(batch) + 1, len(batch)])))


def attention_scores(heads: int, seq: int, head_dim: int):
    """@main(q, k) = q @ K^T / 8: K [seq, heads * head_dim] reshaped and transposed to heads
    [heads, head_dim, seq], as the transformer models export it."""
    g = GraphBuilder()
    q, k = g.input("q", (heads, seq, head_dim)), g.input("k", (seq, heads * head_dim))
    k_t = g.transpose(g.reshape(k, (seq, heads, head_dim)), perm=[1, 2, 0])
    return g.finish(g.div(g.matmul(q, k_t), g.constant(np.float32(8.0))))


def plain_b(a_shape, b_shape):
    g = GraphBuilder()
    return g.finish(g.matmul(g.input("x", a_shape), g.input("y", b_shape)))


def random_inputs(module, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    (main,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return [rng.standard_normal(t.get_shape()).astype(np.float32) for t in main.function_type.inputs.data]


def only_step(exe):
    (step,) = exe.steps
    return step


def ukernels_called(exe) -> list[str]:
    kernel = lower_group(only_step(exe).op)
    return [op.callee.string_value() for op in kernel.walk() if isinstance(op, func.CallOp)]


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((4, 17, 63), (4, 63, 65)),  # a full panel and an edge panel per batch matrix
        ((3, 65, 5), (3, 5, 130)),  # two full panels and an edge of 2 columns
        ((2, 1, 6, 17), (3, 17, 63)),  # a's batch dims broadcast against b's
        ((6, 130), (3, 130, 17)),  # a without batch dims: one a for every batch matrix
    ],
)
def test_transposed_b_packs_at_run_time(a_shape, b_shape):
    module = transposed_b(a_shape, b_shape)
    x, y = random_inputs(module)
    exe = graphopt.compile(module, backends=("cpu",))
    assert [name.split("_")[2] for name in ukernels_called(exe)] == ["batched"]
    (got,) = exe(x, y)
    np.testing.assert_allclose(got, np.matmul(x, np.swapaxes(y, -1, -2)), **TOLERANCE)
    np.testing.assert_allclose(got, graphopt.interpret(module, x, y)[0], **TOLERANCE)


@pytest.mark.parametrize(
    "a_shape, b_shape, ukernel",
    [
        ((130, 63), (63, 17), "packed"),
        ((3, 17, 5), (5, 63), "packed"),  # b without batch dims: packed once, a's batch dims are rows
        ((2, 63, 130), (1, 130, 65), "packed"),  # b's batch dim of 1 broadcasts: packed once
        ((1, 130), (130, 130), None),  # fewer rows than a register tile: the loop nest
        ((65, 5), (5, 17), None),  # b under 16 x 32: the loop nest
    ],
)
def test_input_b_packs_where_faster(a_shape, b_shape, ukernel):
    module = plain_b(a_shape, b_shape)
    x, y = random_inputs(module, seed=1)
    exe = graphopt.compile(module, backends=("cpu",))
    assert [name.split("_")[2] for name in ukernels_called(exe)] == ([ukernel] if ukernel else [])
    (got,) = exe(x, y)
    np.testing.assert_allclose(got, np.matmul(x, y), **TOLERANCE)


def test_attention_scores_read_k_where_it_lives():
    """K's reshape and transpose join the scores matmul; the kernel's only temporaries are the
    panels and loop-bound buffers, none of K^T's shape."""
    module = attention_scores(heads=4, seq=70, head_dim=16)
    q, k = random_inputs(module)
    exe = graphopt.compile(module, backends=("cpu",))
    step = only_step(exe)
    assert step.op.group_name.data.startswith("fused_reshape_transpose_matmul_div")
    temporaries = [op.memref.type.get_shape() for op in lower_group(step.op).walk() if isinstance(op, memref.AllocOp)]
    assert (4, 16, 70) not in temporaries and (4, 16 * 80) in temporaries
    (got,) = exe(q, k)
    k_t = k.reshape(70, 4, 16).transpose(1, 2, 0)
    np.testing.assert_allclose(got, (q @ k_t) / 8, **TOLERANCE)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("heads, seq, head_dim", [(1, 17, 16), (3, 65, 17), (2, 130, 5), (3, 1, 63)])
def test_attention_scores_of_odd_sizes(heads, seq, head_dim, threads):
    """One head (b's batch dim of 1 packed once), odd sequence lengths and head sizes."""
    module = attention_scores(heads, seq, head_dim)
    q, k = random_inputs(module, seed=4)
    (got,) = graphopt.compile(module, backends=("cpu",), threads=threads)(q, k)
    np.testing.assert_allclose(got, (q @ k.reshape(seq, heads, head_dim).transpose(1, 2, 0)) / 8, **TOLERANCE)


def test_nan_and_inf_propagate():
    module = transposed_b((2, 17, 63), (2, 63, 65))
    x, y = random_inputs(module, seed=2)
    x[0, 3, 5] = np.nan
    y[1, 64, 7] = np.inf  # b[1, 7, 64]: the edge panel's first column
    y[1, 2, 9] = -np.inf
    exe = graphopt.compile(module, backends=("cpu",))
    (got,) = exe(x, y)
    want = np.matmul(x, np.swapaxes(y, -1, -2))
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0 and np.isinf(got).sum() == np.isinf(want).sum() > 0
    np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.mark.parametrize(
    "module, row_bytes",
    [
        # K [seq, heads * head_dim] is read by heads: offset by one head's 64 columns per row unit.
        (attention_scores(heads=4, seq=128, head_dim=64), (64 * 4, 128 * 64 * 4, 128 * 128 * 4)),
        # b an input without batch dims: its panels are packed whole in every chunk.
        (plain_b((512, 96), (96, 40)), (96 * 4, 0, 40 * 4)),
    ],
    ids=["heads", "whole_b"],
)
def test_threads_split_runs(module, row_bytes):
    exe = graphopt.compile(module, backends=("cpu",), threads=2)
    kernel = only_step(exe).kernel
    assert len(kernel.chunks) == 2 and kernel.plan.row_bytes == row_bytes
    arrays = random_inputs(module, seed=3)
    (got,) = exe(*arrays)
    np.testing.assert_allclose(got, graphopt.interpret(module, *arrays)[0], **TOLERANCE)
