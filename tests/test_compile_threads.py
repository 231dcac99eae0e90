"""Row-parallel kernels: which kernels split by rows, and that split runs equal the interpreter."""

import os
import subprocess
import sys

import numpy as np
import pytest
from xdsl.parser import Parser

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering import packed_gemm
from graphopt.lowering.convert_graph_to_linalg import generalized, lower_group
from graphopt.lowering.pipelines import CPU
from graphopt.lowering.row_split import row_split
from graphopt.runtime.thread_pool import usable_cores
from graphopt.parsing import make_context


def chain(shape, bias_shape):
    b = GraphBuilder()
    x, w = b.input("x", shape), b.input("w", bias_shape)
    return b.finish(b.mul(b.relu(b.add(x, w)), b.constant(np.float32(0.5))))


def transposed(shape):
    b = GraphBuilder()
    x = b.input("x", shape)
    return b.finish(b.neg(b.transpose(b.exp(x), perm=[1, 0])))


def only_step(exe):
    (step,) = exe.steps
    return step


@pytest.mark.parametrize(
    "module, split",
    [
        (chain((1025, 67), (67,)), True),  # w broadcast along rows: not sliced; rows of 268 bytes
        (chain((70001,), (1,)), True),
        (chain((12, 30001), (12, 1)), True),  # w's rows of 4 bytes: chunks start at multiples of 4 rows
        (transposed((301, 257)), True),  # d0 reads x's columns: x passed strided
        (chain((1024, 64), (64,)), True),
    ],
    ids=["rows_and_broadcast", "vector", "few_rows", "transpose", "aligned_rows"],
)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_split_runs_equal_the_interpreter(module, split, threads):
    rng = np.random.default_rng(threads)
    main = module.body.block.first_op
    inputs = [rng.standard_normal(t.get_shape()).astype(np.float32) for t in main.function_type.inputs.data]
    inputs[0].flat[::97] = np.nan
    exe = graphopt.compile(module, threads=threads)
    step = only_step(exe)
    assert bool(step.kernel.chunks) == (split and threads > 1)
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_row_bytes_leave_broadcast_arguments_whole():
    module = chain((1024, 64), (64,))
    fused = next(iter(graphopt.compile(module, threads=1).module.body.block.first_op.body.block.ops))
    split = row_split(generalized(lower_group(fused, "k")))
    assert split.rows == 1024
    assert split.row_bytes == (64 * 4, 0, 64 * 4)


@pytest.mark.parametrize("shape, granule", [((1024, 64), 1), ((1026, 66), 2), ((1025, 67), 4), ((5, 3, 7), 4)])
@pytest.mark.parametrize("threads", [2, 3])
def test_chunks_start_16_byte_aligned(shape, granule, threads, monkeypatch):
    """A chunk's arguments start `begin * row_bytes` past the caller's (16-byte aligned) ones."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    module = chain(shape, shape[-1:])
    exe = graphopt.compile(module, threads=threads)
    split = row_split(generalized(lower_group(only_step(exe).op)))
    assert (split.rows, split.granule) == (shape[0], granule)
    begins = [begin for _, begin in only_step(exe).kernel.chunks]
    assert begins[0] == 0 and len(begins) > 1 and all(begin * split.row_bytes[0] % 16 == 0 for begin in begins)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[-1:]).astype(np.float32)]
    np.testing.assert_allclose(exe(*inputs)[0], graphopt.interpret(module, *inputs)[0], rtol=1e-6)


def test_small_kernels_stay_on_one_thread():
    exe = graphopt.compile(chain((7, 5), (5,)), threads=2)
    assert only_step(exe).kernel.chunks == []


def test_threads_from_the_environment(monkeypatch):
    monkeypatch.setenv("GRAPHOPT_THREADS", "3")
    assert graphopt.compile(chain((4,), (4,))).threads == 3
    with pytest.raises(graphopt.GraphoptError, match="threads must be at least 1"):
        graphopt.compile(chain((4,), (4,)), threads=0)


def softmax_then_matmul(rows: int):
    b = GraphBuilder()
    x, w = b.input("x", (rows, 96)), b.input("w", (96, 40))
    return b.finish(b.relu(b.matmul(b.softmax(x, axis=-1), w)), b.layer_norm(x, b.constant(np.full(96, 1.5, np.float32)), b.constant(np.zeros(96, np.float32))))


@pytest.mark.parametrize("rows", [1024, 1025])
def test_row_local_reductions_and_matmul_split(rows):
    module = softmax_then_matmul(rows)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((rows, 96)).astype(np.float32), rng.standard_normal((96, 40)).astype(np.float32)]
    exe = graphopt.compile(module, threads=2)
    assert [bool(step.kernel.chunks) for step in exe.steps] == [True, True, True]
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_reduction_over_rows_does_not_split():
    b = GraphBuilder()
    x = b.input("x", (4096, 64))
    exe = graphopt.compile(b.finish(b.reduce_sum(x, axes=[0])), threads=2)
    assert only_step(exe).kernel.chunks == []


def test_blocked_matmul_splits_by_row_blocks():
    """f64: an f32 matmul with b an input packs b at run time instead (the next test)."""
    b = GraphBuilder()
    f64 = np.dtype(np.float64)
    x, w, bias = b.input("x", (128, 256), f64), b.input("w", (256, 512), f64), b.input("bias", (512,), f64)
    module = b.finish(b.relu(b.add(b.matmul(x, w), bias)))
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(shape) for shape in ((128, 256), (256, 512), (512,))]
    exe = graphopt.compile(module, threads=2)
    split = row_split(generalized(lower_group(only_step(exe).op)))
    assert split.rows == 4 and split.row_bytes == (32 * 256 * 8, 0, 0, 32 * 512 * 8)  # units of 32 rows
    assert only_step(exe).kernel.chunks
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("out_rows, strided", [(8, False), (10, True)])
def test_rows_indexed_by_d0_times_a_step_slice_or_stride_the_operand(out_rows, strided):
    """out written at d0 * 4 + d1: where its 8 elements are the rows' (2 x 4) it is sliced;
    where it holds 10, each chunk gets it from its first row's element, whole in type."""
    text = f"""
func.func @k(%x: memref<2x4xf32>, %o: memref<{out_rows}xf32>) {{
  linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 * 4 + d1)>], iterator_types = ["parallel", "parallel"]}} ins(%x : memref<2x4xf32>) outs(%o : memref<{out_rows}xf32>) {{
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }}
  func.return
}}"""
    kernel = Parser(make_context(), text).parse_module().body.block.first_op
    split = row_split(kernel)
    assert split.row_bytes == (16, 16)
    assert split.strided_arguments == ({kernel.body.block.args[1]} if strided else set())


@pytest.mark.parametrize("preset, expected", [(None, "4"), ("28", "28")])
def test_tools_tell_openblas_workers_not_to_spin(preset, expected):
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads; the tools set a short one before
    they import NumPy, unless the user chose one. `import graphopt` sets nothing."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if preset is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = preset
    code = ("import os, graphopt; library = os.environ.get('OPENBLAS_THREAD_TIMEOUT'); "
            "import graphopt.tools.graph_run; print(library, os.environ['OPENBLAS_THREAD_TIMEOUT'])")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == [str(preset), expected]


def test_no_more_chunks_than_usable_cores():
    """Threads beyond the cores run no faster, and the pool's spinning threads would wait on each other."""
    cores = usable_cores()
    exe = graphopt.compile(chain((4096, 256), (256,)), threads=cores + 2)
    assert len(only_step(exe).kernel.chunks) == (cores if cores > 1 else 0)


def test_leading_unit_dims_split_by_the_next_dim():
    """ConvNeXt's MLP: a matmul on [1, h, w, c] after a conv (so the function keeps its batch
    dim) runs by rows of h, and so does the transpose before it (x, NCHW, read strided); an
    elementwise step on [1, n] runs by its n columns."""
    b = GraphBuilder()
    x, w, y = b.input("x", (1, 3, 37, 33)), b.input("w", (96, 40)), b.input("y", (1, 40001))
    c = b.transpose(b.conv2d(x, b.constant(np.full((96, 3, 1, 1), 0.25, np.float32))), perm=[0, 2, 3, 1])
    mlp = b.erf(b.add(b.matmul(c, w), b.constant(np.linspace(-1, 1, 40, dtype=np.float32))))
    module = b.finish(mlp, b.exp(y))
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in ((1, 3, 37, 33), (96, 40), (1, 40001))]
    inputs[0][0, 1, 4, 5:9] = inputs[2][0, 7:11] = [np.nan, np.inf, -np.inf, 0.0]
    exe = graphopt.compile(module, threads=2)
    split = {step.name: bool(step.kernel.chunks) for step in exe.steps}
    assert split == {"conv2d_0": True, "transpose_1": True, "fused_matmul_add_erf_0": True, "exp_2": True}
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("columns", [208, 200])
@pytest.mark.parametrize("threads", [2, 3])
def test_dense_layer_of_one_row_splits_by_columns(columns, threads, monkeypatch):
    """A dense layer at batch 1 (the packed GEMM on one row of a) runs by chunks of out's
    columns, each starting at a panel of b; where b's last panel is padded (200 columns end in
    8 columns padded to a vector of 16, at either PANEL), the last chunk, a function of its own,
    takes the rest; 208 columns end in a whole vector, unpadded."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    rng = np.random.default_rng(threads)
    b = GraphBuilder()
    x = b.input("x", (1, 37))
    w = b.constant(rng.standard_normal((37, columns)).astype(np.float32))
    bias = b.constant(rng.standard_normal(columns).astype(np.float32))
    module = b.finish(b.relu(b.add(b.matmul(x, w), bias)))
    inputs = [rng.standard_normal((1, 37)).astype(np.float32)]
    inputs[0][0, 3:6] = [np.nan, np.inf, -np.inf]
    exe = graphopt.compile(module, backends=("cpu",), threads=threads)
    chunks = only_step(exe).kernel.chunks
    assert len(chunks) == min(threads, usable_cores()) and all(begin % packed_gemm.PANEL == 0 for _, begin in chunks)
    padded = packed_gemm.packed_size(37, columns) != 37 * columns
    assert padded == (columns == 200)
    assert [name.endswith("_last") for name, _ in chunks] == [padded and i == len(chunks) - 1 for i in range(len(chunks))]
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
def test_channel_mixing_matmul_on_one_image_splits_by_rows_of_a(threads, monkeypatch):
    """AlexNet's local response normalization: a constant [c, c] times x viewed as [1, c, h * w],
    reshaped back; the split by d0 (one image) fails on the reshape's loop nest, each loop
    nest's first long loop (a's rows, out's channels) splits it."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    rng = np.random.default_rng(threads)
    b = GraphBuilder()
    x = b.input("x", (1, 24, 7, 9))
    a = b.constant(rng.standard_normal((24, 24)).astype(np.float32))
    module = b.finish(b.reshape(b.matmul(a, b.reshape(x, (1, 24, 63))), (1, 24, 7, 9)))
    inputs = [rng.standard_normal((1, 24, 7, 9)).astype(np.float32)]
    inputs[0][0, 5, 2, 3:6] = [np.nan, np.inf, -np.inf]
    exe = graphopt.compile(module, backends=("cpu",), threads=threads)
    assert len(only_step(exe).kernel.chunks) == min(threads, usable_cores())
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize(
    "shape, perm",
    [((1, 7, 9, 12), (0, 3, 1, 2)), ((1, 12, 7, 9), (0, 2, 3, 1)), ((1, 5, 33, 16), (0, 3, 1, 2)), ((13, 6), (1, 0))],
)
@pytest.mark.parametrize("threads", [2, 3])
def test_transposes_split_by_rows_match_the_interpreter(shape, perm, threads, monkeypatch):
    """Transposes, alone and times a per-channel scale plus a residual (ConvNeXt's NHWC to NCHW,
    in transposing tiles where the last dim allows), run by rows: the buffer whose first long dim
    the loop's row dim indexes is sliced, the other passed strided (read or written); odd sizes,
    NaN and inf."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    out_shape = tuple(shape[p] for p in perm)
    b = GraphBuilder()
    x, residual = b.input("x", shape), b.input("r", out_shape)
    t = b.transpose(x, perm=list(perm))
    scale = b.constant(np.linspace(0.5, 1.5, out_shape[1], dtype=np.float32).reshape(out_shape[1], *[1] * (len(shape) - 2)))
    module = b.finish(b.neg(t), b.add(b.mul(t, scale), residual))
    rng = np.random.default_rng(threads)
    inputs = [rng.standard_normal(shape).astype(np.float32), rng.standard_normal(out_shape).astype(np.float32)]
    inputs[0].flat[5:8] = [np.nan, np.inf, -np.inf]
    exe = graphopt.compile(module, backends=("cpu",), threads=threads)
    assert all(step.kernel.chunks for step in exe.steps)
    for got, want in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(1, 56, 56, 96), (1, 7, 9, 12)])
def test_layer_norm_over_channels_last_splits_by_rows(shape, monkeypatch):
    """ConvNeXt's LayerNorm on [1, h, w, c]: the fills of its [1, h, w] statistics keep h a loop
    of its own (`Kernel.merges_short_rows`), so the kernel splits by rows of h (7 rows: 4 and 3);
    NaN and inf."""
    monkeypatch.setitem(CPU.defaults, "min_work", 0)
    b = GraphBuilder()
    x = b.input("x", shape)
    gamma = b.constant(np.linspace(0.5, 1.5, shape[-1], dtype=np.float32))
    module = b.finish(b.layer_norm(x, gamma, b.constant(np.zeros(shape[-1], np.float32))))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32)]
    inputs[0][0, 1, 2, :3] = [np.nan, np.inf, -np.inf]
    exe = graphopt.compile(module, backends=("cpu",), threads=2)
    (layer_norm,) = [step for step in exe.steps if "layer_norm" in step.name]
    assert [begin for _, begin in layer_norm.kernel.chunks] == [0, -(-shape[1] // 2)]
    np.testing.assert_allclose(exe(*inputs)[0], graphopt.interpret(module, *inputs)[0], rtol=1e-5, atol=1e-5)
