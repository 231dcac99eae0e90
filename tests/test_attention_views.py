"""Attention's Q heads read and its head merge written through strided views (transforms/
strided_view.py): one step per matmul, the batched GEMM ukernel reading a and writing out with
row strides (lowering/batched_gemm.py), against NumPy and the interpreter, with odd sizes, NaN
and inf, and row chunks at threads=2."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func, memref

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering import batched_gemm
from graphopt.lowering.convert_graph_to_linalg import lower_group
from graphopt.transforms.strided_view import contiguous_strides, reshaped_strides

TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def heads_scores(batch: tuple[int, ...], heads: int, m: int, k: int, n: int):
    """@main(q, kk) = Q's heads @ K's heads transposed: q [*batch, m, heads * k], kk [*batch, n, heads * k]."""
    g = GraphBuilder()
    q, kk = g.input("q", (*batch, m, heads * k)), g.input("kk", (*batch, n, heads * k))
    b = len(batch)
    q_heads = g.transpose(g.reshape(q, (*batch, m, heads, k)), perm=[*range(b), b + 1, b, b + 2])
    k_t = g.transpose(g.reshape(kk, (*batch, n, heads, k)), perm=[*range(b), b + 1, b + 2, b])
    return g.finish(g.matmul(q_heads, k_t))


def head_merge(batch: tuple[int, ...], heads: int, m: int, k: int, n: int):
    """@main(p, v) = (p @ V's heads) with its heads merged: p [*batch, heads, m, k], v [*batch, k, heads * n]
    -> [*batch, m, heads * n]."""
    g = GraphBuilder()
    p, v = g.input("p", (*batch, heads, m, k)), g.input("v", (*batch, k, heads * n))
    b = len(batch)
    v_heads = g.transpose(g.reshape(v, (*batch, k, heads, n)), perm=[*range(b), b + 1, b, b + 2])
    attended = g.matmul(p, v_heads)
    merged = g.transpose(attended, perm=[*range(b), b + 1, b, b + 2])
    return g.finish(g.reshape(merged, (*batch, m, heads * n)))


def numpy_scores(q, kk, heads):
    *batch, m, width = q.shape
    b = len(batch)
    q_heads = q.reshape(*batch, m, heads, width // heads).transpose(*range(b), b + 1, b, b + 2)
    k_t = kk.reshape(*batch, kk.shape[-2], heads, width // heads).transpose(*range(b), b + 1, b + 2, b)
    return q_heads @ k_t


def numpy_merge(p, v, heads):
    *batch, _, m, k = p.shape
    b = len(batch)
    v_heads = v.reshape(*batch, k, heads, v.shape[-1] // heads).transpose(*range(b), b + 1, b, b + 2)
    return (p @ v_heads).transpose(*range(b), b + 1, b, b + 2).reshape(*batch, m, v.shape[-1])


def random_inputs(module, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    (main,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return [rng.standard_normal(t.get_shape()).astype(np.float32) for t in main.function_type.inputs.data]


def only_kernel(exe):
    (step,) = exe.steps
    return lower_group(step.op)


def callees(kernel) -> list[str]:
    return [op.callee.string_value() for op in kernel.walk() if isinstance(op, func.CallOp)]


SIZES = [1, 5, 17, 63, 65, 130]


@pytest.mark.parametrize("m, k, n", [(m, k, n) for m in SIZES for k, n in ((5, 130), (63, 17), (130, 65), (17, 1))])
def test_scores_read_q_heads_where_they_live(m, k, n):
    """One step; where the matmul runs as the batched GEMM (at least 6 rows, b not under 16 x
    32), it reads q through the view and no temporary has Q's heads' shape."""
    module = heads_scores((), 3, m, k, n)
    q, kk = random_inputs(module, seed=m + k + n)
    exe = graphopt.compile(module, backends=("cpu",))
    kernel = only_kernel(exe)
    if m >= 6 and not (k < 16 and n < 32):
        assert callees(kernel) == [batched_gemm.view_name((3, m, k, n), ((m, 3 * k), (k, 3 * k)), ((3, m, n), None))]
        assert (3, m, k) not in [op.memref.type.get_shape() for op in kernel.walk() if isinstance(op, memref.AllocOp)]
    (got,) = exe(q, kk)
    np.testing.assert_allclose(got, numpy_scores(q, kk, 3), **TOLERANCE)
    np.testing.assert_allclose(got, graphopt.interpret(module, q, kk)[0], **TOLERANCE)


@pytest.mark.parametrize("m, k, n", [(m, k, n) for m in SIZES for k, n in ((130, 5), (17, 63), (65, 130), (1, 17))])
def test_head_merge_written_through_the_view(m, k, n):
    module = head_merge((), 3, m, k, n)
    p, v = random_inputs(module, seed=m * k + n)
    exe = graphopt.compile(module, backends=("cpu",))
    kernel = only_kernel(exe)
    if m >= 6 and not (k < 16 and n < 32):
        assert callees(kernel) == [batched_gemm.view_name((3, m, k, n), ((3, m, k), None), ((m, 3 * n), (n, 3 * n)))]
    (got,) = exe(p, v)
    np.testing.assert_allclose(got, numpy_merge(p, v, 3), **TOLERANCE)
    np.testing.assert_allclose(got, graphopt.interpret(module, p, v)[0], **TOLERANCE)


@pytest.mark.parametrize("threads", [1, 2])
def test_batched_heads_split_by_rows(threads):
    """BERT's layout, [batch, seq, heads * head_dim]: the views' strides cross the batch and
    the heads; at threads=2 each chunk takes one sequence, offset in the views' buffers."""
    scores, merge = heads_scores((2,), 4, 70, 16, 33), head_merge((2,), 4, 33, 70, 16)
    for module, want in ((scores, numpy_scores), (merge, numpy_merge)):
        arrays = random_inputs(module, seed=5)
        exe = graphopt.compile(module, backends=("cpu",), threads=threads)
        (step,) = exe.steps
        if threads == 2:
            assert len(step.kernel.chunks) == 2
        (got,) = exe(*arrays)
        np.testing.assert_allclose(got, want(*arrays, 4), **TOLERANCE)
        np.testing.assert_allclose(got, graphopt.interpret(module, *arrays)[0], **TOLERANCE)


def test_heads_split_by_rows_offsets_the_views():
    """Without a batch dim the heads are the row units: a chunk of heads reads q and writes
    the merged result from its first head's column."""
    for module, want in ((heads_scores((), 4, 64, 32, 48), numpy_scores), (head_merge((), 4, 64, 48, 32), numpy_merge)):
        exe = graphopt.compile(module, backends=("cpu",), threads=2)
        (step,) = exe.steps
        assert len(step.kernel.chunks) == 2 and 32 * 4 in step.kernel.plan.row_bytes
        arrays = random_inputs(module, seed=6)
        (got,) = exe(*arrays)
        np.testing.assert_allclose(got, want(*arrays, 4), **TOLERANCE)


def test_nan_and_inf_through_the_views():
    module = heads_scores((), 2, 17, 63, 65)
    q, kk = random_inputs(module, seed=7)
    q[3, 70] = np.nan  # head 1
    kk[64, 7] = np.inf  # head 0, the edge panel's first column
    kk[2, 9] = -np.inf
    (got,) = graphopt.compile(module, backends=("cpu",))(q, kk)
    want = numpy_scores(q, kk, 2)
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0 and np.isinf(got).sum() == np.isinf(want).sum() > 0
    np.testing.assert_allclose(got, want, **TOLERANCE)


@pytest.mark.parametrize(
    "shape, perm, new_shape",
    [
        ((128, 256), None, (128, 4, 64)),  # splits a dim
        ((4, 6, 10), (1, 0, 2), (6, 40)),  # merges dims that are not adjacent in memory: no view
        ((4, 6, 10), (1, 0, 2), (3, 2, 4, 10)),  # splits a strided dim
        ((1, 6, 1, 10), (2, 3, 1, 0), (1, 60, 1)),  # unit dims anywhere
        ((6, 10), (1, 0), (60,)),  # a transposed matrix read flat: no view
    ],
)
def test_reshaped_strides_match_numpy(shape, perm, new_shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = x if perm is None else x.transpose(perm)
    strides = reshaped_strides(y.shape, [s // 4 for s in y.strides], new_shape)
    z = y.reshape(new_shape)
    assert (strides is not None) == np.shares_memory(z, x)
    if strides is not None:
        index = np.indices(new_shape).reshape(len(new_shape), -1)
        np.testing.assert_array_equal(x.ravel()[np.dot(strides, index)], z.ravel())
    assert contiguous_strides(shape) == tuple(s // 4 for s in x.strides)


@pytest.mark.parametrize("threads", [1, 2])
def test_masked_softmax_matches_the_interpreter(threads):
    """Scores masked with -10000 (GPT-2's causal mask), with -inf, a fully -inf row (NaN, as
    the interpreter gives), a NaN, and exponents under EXP_FLOOR (terms counted as 0)."""
    g = GraphBuilder()
    module = g.finish(g.softmax(g.input("x", (4, 65, 130)), axis=-1))
    x = np.random.default_rng(8).standard_normal((4, 65, 130)).astype(np.float32)
    x[0][np.triu_indices(65, 1, 130)] = -10000.0
    x[1, :, 3:] = -np.inf
    x[1, 7, :] = -np.inf
    x[2, 5, 11] = np.nan
    x[3, :, 1::2] = -95.0  # e^-95 is subnormal: 0 here, about 5.5e-42 in NumPy
    (got,) = graphopt.compile(module, backends=("cpu",), threads=threads)(x)
    (want,) = graphopt.interpret(module, x)
    assert np.isnan(got[1, 7]).all() and np.isnan(got[2, 5]).all() and np.isnan(got).sum() == np.isnan(want).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-30)
    assert (got[0][np.triu_indices(65, 1, 130)] == 0).all()


def test_views_of_buffers_of_two_shapes_in_one_module():
    """Q's heads viewed in a [m, h * k] buffer and in a [m, h, k] one have the same strides: the
    ukernels' names differ by the buffers' shapes (one declaration per name and type)."""
    g = GraphBuilder()
    flat, split, kk = g.input("flat", (24, 32)), g.input("split", (24, 4, 8)), g.input("kk", (40, 32))

    def k_t():
        return g.transpose(g.reshape(kk, (40, 4, 8)), perm=[1, 2, 0])

    first = g.matmul(g.transpose(g.reshape(flat, (24, 4, 8)), perm=[1, 0, 2]), k_t())
    second = g.matmul(g.transpose(split, perm=[1, 0, 2]), k_t())
    module = g.finish(first, second)
    arrays = random_inputs(module, seed=9)
    exe = graphopt.compile(module, backends=("cpu",))
    names = {name for step in exe.steps for name in callees(lower_group(step.op))}
    assert len(names) == 2 and all("v8x32" in name for name in names)
    got = exe(*arrays)
    for result, want in zip(got, graphopt.interpret(module, *arrays)):
        np.testing.assert_allclose(result, want, **TOLERANCE)
