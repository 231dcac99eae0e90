"""The CUDA path offline: every kernel kind lowered to PTX and validated by ptxas (sm_80, sm_90);
the backend's errors without a GPU; on a GPU (marker `gpu`), every kind against the interpreter."""

import gc
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.context import Context

import graphopt
from graphopt.backends import get_backend
from graphopt.backends.cuda import CudaBackend, CudaUnavailable, Device
from graphopt.backends.measure import random_arrays
from graphopt.dialects.attributes import numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.lowering.graph_to_cuda import (
    MATMUL_OUTPUTS_PER_THREAD,
    MIN_MATMUL_BLOCKS,
    ConvertGraphToCudaPass,
    lower_group_to_cuda,
    matmul_outputs_per_thread,
    supports,
)
from graphopt.lowering.ptx import lower_to_nvvm, nvvm_to_ptx
from graphopt.transforms.fuse import FusePass


def main(signature: str, body: str) -> str:
    """`func.func @main(<signature> { <body> }`: the signature closes the argument list."""
    return f"func.func @main({signature} {{\n{body}\n}}"


KINDS: dict[str, tuple[str, set[str]]] = {
    "elementwise": (main("%x: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<64x128xf32>", """
      %0 = graph.mul %x, %b : (tensor<64x128xf32>, tensor<128xf32>) -> tensor<64x128xf32>
      %1 = graph.sigmoid %0 : tensor<64x128xf32>
      %2 = graph.gelu %1 : tensor<64x128xf32>
      %3 = graph.tanh %2 : tensor<64x128xf32>
      func.return %3 : tensor<64x128xf32>"""), set()),
    "injective": (main("%x: tensor<6x10xf32>, %y: tensor<10x4xf32>) -> tensor<12x10xf32>", """
      %0 = graph.transpose %y {perm = array<i64: 1, 0>} : (tensor<10x4xf32>) -> tensor<4x10xf32>
      %1 = graph.pad %0 {pads = array<i64: 1, 0, 1, 0>, value = 0.5 : f64} : (tensor<4x10xf32>) -> tensor<6x10xf32>
      %2 = graph.concat %x, %1 {axis = 0 : i64} : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<12x10xf32>
      %3 = graph.exp %2 : tensor<12x10xf32>
      func.return %3 : tensor<12x10xf32>"""), set()),
    "gather_cast": (main("%x: tensor<9x16xf32>, %i: tensor<5xi64>) -> tensor<5x16xi32>", """
      %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<9x16xf32>, tensor<5xi64>) -> tensor<5x16xf32>
      %1 = graph.cast %0 : (tensor<5x16xf32>) -> tensor<5x16xi32>
      func.return %1 : tensor<5x16xi32>"""), set()),
    "reduce_sum": (main("%x: tensor<32x300xf32>) -> tensor<32xf32>", """
      %0 = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<32x300xf32>) -> tensor<32xf32>
      func.return %0 : tensor<32xf32>"""), {"bar.sync", "shfl.sync.down", ".shared"}),
    "reduce_max_i32": (main("%x: tensor<4x8x50xi32>) -> tensor<4x1x1xi32>", """
      %0 = graph.reduce_max %x {axes = array<i64: 1, 2>, keepdims = true} : (tensor<4x8x50xi32>) -> tensor<4x1x1xi32>
      func.return %0 : tensor<4x1x1xi32>"""), {"bar.sync", "shfl.sync.down"}),
    "reduce_mean_all": (main("%x: tensor<7x33xf32>) -> tensor<f32>", """
      %0 = graph.reduce_mean %x {axes = array<i64: 0, 1>} : (tensor<7x33xf32>) -> tensor<f32>
      func.return %0 : tensor<f32>"""), {"bar.sync", "shfl.sync.down"}),
    "softmax_fused": (main("%x: tensor<16x1000xf32>) -> tensor<16x1000xf32>", """
      %c = graph.constant dense<2.0> : tensor<f32>
      %0 = graph.mul %x, %c : (tensor<16x1000xf32>, tensor<f32>) -> tensor<16x1000xf32>
      %1 = graph.softmax %0 : (tensor<16x1000xf32>) -> tensor<16x1000xf32>
      func.return %1 : tensor<16x1000xf32>"""), {"bar.sync", "shfl.sync.down", ".shared"}),
    "log_softmax": (main("%x: tensor<3x5x40xf32>) -> tensor<3x5x40xf32>", """
      %0 = graph.log_softmax %x : (tensor<3x5x40xf32>) -> tensor<3x5x40xf32>
      func.return %0 : tensor<3x5x40xf32>"""), {"bar.sync", "shfl.sync.down"}),
    "layer_norm": (main("%x: tensor<8x512xf32>, %g: tensor<512xf32>, %b: tensor<512xf32>) -> tensor<8x512xf32>", """
      %0 = graph.layer_norm %x, %g, %b : (tensor<8x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<8x512xf32>
      func.return %0 : tensor<8x512xf32>"""), {"bar.sync", "shfl.sync.down", ".shared"}),
    "elementwise_f64": (main("%x: tensor<37x29xf64>, %y: tensor<29xf64>) -> tensor<37x29xf64>", """
      %0 = graph.mul %x, %y : (tensor<37x29xf64>, tensor<29xf64>) -> tensor<37x29xf64>
      %1 = graph.relu %0 : tensor<37x29xf64>
      %2 = graph.div %1, %x : (tensor<37x29xf64>, tensor<37x29xf64>) -> tensor<37x29xf64>
      %3 = graph.max %2, %y : (tensor<37x29xf64>, tensor<29xf64>) -> tensor<37x29xf64>
      func.return %3 : tensor<37x29xf64>"""), {"div.rn.f64"}),
    "grid_stride_odd": (main("%x: tensor<4097x4099xf32>, %b: tensor<4099xf32>) -> tensor<4097x4099xf32>", """
      %0 = graph.add %x, %b : (tensor<4097x4099xf32>, tensor<4099xf32>) -> tensor<4097x4099xf32>
      %1 = graph.relu %0 : tensor<4097x4099xf32>
      func.return %1 : tensor<4097x4099xf32>"""), set()),
    "matmul": (main("%a: tensor<70x50xf32>, %b: tensor<50x33xf32>) -> tensor<70x33xf32>", """
      %0 = graph.matmul %a, %b : (tensor<70x50xf32>, tensor<50x33xf32>) -> tensor<70x33xf32>
      func.return %0 : tensor<70x33xf32>"""), {"bar.sync", ".shared", "ld.shared"}),
    "batched_matmul_epilogue": (main("%a: tensor<3x20x24xf32>, %b: tensor<24x17xf32>, %c: tensor<17xf32>) -> tensor<3x20x17xf32>", """
      %0 = graph.matmul %a, %b : (tensor<3x20x24xf32>, tensor<24x17xf32>) -> tensor<3x20x17xf32>
      %1 = graph.add %0, %c : (tensor<3x20x17xf32>, tensor<17xf32>) -> tensor<3x20x17xf32>
      %2 = graph.relu %1 : tensor<3x20x17xf32>
      func.return %2 : tensor<3x20x17xf32>"""), {"bar.sync", ".shared", "ld.shared"}),
    "matmul_4x4_broadcast_gelu": (main("%a: tensor<66x70x33xf32>, %b: tensor<33x130xf32>, %c: tensor<130xf32>) -> tensor<66x70x130xf32>", """
      %0 = graph.matmul %a, %b : (tensor<66x70x33xf32>, tensor<33x130xf32>) -> tensor<66x70x130xf32>
      %1 = graph.add %0, %c : (tensor<66x70x130xf32>, tensor<130xf32>) -> tensor<66x70x130xf32>
      %2 = graph.gelu %1 : tensor<66x70x130xf32>
      func.return %2 : tensor<66x70x130xf32>"""), {"bar.sync", "ld.shared", "fma.rn.f32"}),
    "matmul_2x2_residual": (main("%a: tensor<4x5x130x129xf32>, %b: tensor<5x129x77xf32>, %r: tensor<4x5x130x77xf32>) -> tensor<4x5x130x77xf32>", """
      %0 = graph.matmul %a, %b : (tensor<4x5x130x129xf32>, tensor<5x129x77xf32>) -> tensor<4x5x130x77xf32>
      %1 = graph.add %0, %r : (tensor<4x5x130x77xf32>, tensor<4x5x130x77xf32>) -> tensor<4x5x130x77xf32>
      %2 = graph.relu %1 : tensor<4x5x130x77xf32>
      func.return %2 : tensor<4x5x130x77xf32>"""), {"bar.sync", "ld.shared", "fma.rn.f32"}),
}
"""Kernel kind -> (module, PTX it must contain besides `.entry` and `ld.global`). grid_stride_odd
has more elements than MAX_BLOCKS blocks of THREADS_PER_BLOCK threads: each thread loops. The
matmuls cover each register tile (test_launch_configuration) with M, N and K not multiples of
the tile, batch dims broadcast and epilogues."""

ARCHS = ("sm_80", "sm_90")


def fused(text: str):
    module = graphopt.parse(text)
    FusePass().apply(Context(), module)
    return module


@pytest.fixture(scope="module")
def kernels_ptx() -> dict[tuple[str, str], str]:
    result = {}
    for kind, (text, _) in KINDS.items():
        module = fused(text)
        ConvertGraphToCudaPass().apply(Context(), module)
        lowered = lower_to_nvvm(module)
        for arch in ARCHS:
            result[kind, arch] = nvvm_to_ptx(lowered, arch)
    return result


@pytest.mark.parametrize("kind", KINDS)
def test_one_kernel_per_group_with_its_memory_ops(kind, kernels_ptx):
    text = kernels_ptx[kind, "sm_80"]
    assert text.count(".entry") == 1
    for expected in {".target sm_80", "ld.global", *KINDS[kind][1]}:
        assert expected in text, f"{kind}: no {expected} in\n{text}"


def test_elementwise_kernels_have_no_barriers(kernels_ptx):
    assert "bar.sync" not in kernels_ptx["elementwise", "sm_80"]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", KINDS)
def test_ptxas_accepts(kind, arch, kernels_ptx, tmp_path):
    source = tmp_path / f"{kind}.ptx"
    source.write_text(kernels_ptx[kind, arch])
    run = subprocess.run(["ptxas", f"-arch={arch}", str(source), "-o", str(tmp_path / "out.cubin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("body, reason", [
    ("""%0 = graph.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32>""",
     "convolution"),
    ("""%0 = graph.reduce_sum %y {axes = array<i64: 0>} : (tensor<6x7xf32>) -> tensor<7xf32>""", "leading"),
    ("""%0 = graph.sin %y : tensor<6x7xf32>""", "libdevice"),
])
def test_unsupported_groups_say_why(body, reason):
    module = graphopt.parse(main("%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>, %y: tensor<6x7xf32>)", body + "\nfunc.return"))
    op = next(op for op in module.walk() if op.name.startswith("graph.") and op.name != "graph.constant")
    assert reason in supports(op)


@pytest.mark.parametrize("kind, grid, a_tile", [
    ("matmul", (3, 5, 1), "16x16"),  # 70x33 outputs: 15 blocks of 16x16, one output per thread
    ("batched_matmul_epilogue", (2, 2, 3), "16x16"),
    ("matmul_2x2_residual", (3, 5, 20), "32x16"),  # 2 x 3 x 20 = 120 blocks of 64x64, too few
    ("matmul_4x4_broadcast_gelu", (3, 2, 66), "64x16"),
])
def test_launch_configuration(kind, grid, a_tile):
    module = fused(KINDS[kind][0])
    group = next(op for op in module.walk() if op.name in ("graph.fused", "graph.matmul"))
    kernel = lower_group_to_cuda(group, "mm")
    assert (kernel.grid, kernel.block) == (grid, (16, 16, 1))
    assert f"cuda.launch @mm grid [{', '.join(map(str, grid))}] block [16, 16, 1]" in str(kernel.launcher())
    assert f"cuda.shared_alloc : memref<{a_tile}xf32" in str(kernel.function)


@given(st.integers(1, 3000), st.integers(1, 3000), st.integers(1, 64))
def test_matmul_tile_is_the_largest_with_enough_blocks(m, n, batch):
    blocks_of = lambda edge: -(-m // edge) * -(-n // edge) * batch
    r = matmul_outputs_per_thread(blocks_of)
    assert r in (1, *MATMUL_OUTPUTS_PER_THREAD)
    assert r == 1 or blocks_of(16 * r) >= MIN_MATMUL_BLOCKS
    assert all(blocks_of(16 * larger) < MIN_MATMUL_BLOCKS for larger in MATMUL_OUTPUTS_PER_THREAD if larger > r)


# ----------------------------------------------------------------------------------------
# Without a GPU
# ----------------------------------------------------------------------------------------


def gpu_unavailable_reason() -> str | None:
    try:
        Device()
    except GraphoptError as e:
        return str(e)
    return None


NO_GPU = gpu_unavailable_reason()


@pytest.mark.skipif(NO_GPU is None, reason="a GPU is available")
def test_compile_without_gpu_is_one_clear_error():
    module = graphopt.parse(KINDS["elementwise"][0])
    with pytest.raises(GraphoptError) as error:
        graphopt.compile(module, backends=("cuda",))
    message = str(error.value)
    assert 'backend "cpu"' in message and "cuda-bindings" in message


def test_no_driver_is_one_clear_error(monkeypatch):
    """cuda-bindings without a driver: cuInit raises a RuntimeError subclass."""

    class CUDARuntimeError(RuntimeError):
        pass

    def cu_init(flags):
        raise CUDARuntimeError("CUDA_ERROR_NO_DEVICE: libcuda.so not found")

    driver = types.SimpleNamespace(cuInit=cu_init)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    backend = CudaBackend()
    for _ in range(2):  # the same error each time, no retry
        with pytest.raises(CudaUnavailable, match='no CUDA driver .*use backend "cpu"'):
            backend.compile([], 1)


def test_supports_and_estimate_need_no_driver():
    backend = get_backend("cuda")
    module = graphopt.parse(KINDS["softmax_fused"][0])
    op = next(op for op in module.walk() if op.name == "graph.softmax")
    assert backend.supports(op) is None
    if NO_GPU is not None:
        assert 0 < backend.estimate(op) < 1e-3


# ----------------------------------------------------------------------------------------
# On a GPU
# ----------------------------------------------------------------------------------------


def kind_inputs(kind: str, special_values: bool = False) -> tuple:
    """The module of `kind` and seeded inputs for it; with `special_values`, each float input
    starts with NaN, +inf and -inf."""
    module = graphopt.parse(KINDS[kind][0])
    main_function = next(op for op in module.walk() if op.name == "func.func")
    rng = np.random.default_rng(0)
    arrays = []
    for arg in main_function.body.block.args:
        dtype = numpy_dtype(arg.type.get_element_type())
        shape = arg.type.get_shape()
        array = rng.integers(-3, 3, shape).astype(dtype) if dtype.kind == "i" else rng.standard_normal(shape).astype(dtype)
        if special_values and dtype.kind == "f":
            array.flat[:3] = [np.nan, np.inf, -np.inf]
        arrays.append(array)
    return module, arrays


def on_gpu(test):
    """Mark `test` as a GPU test (`pytest -m gpu`), skipped where there is none."""
    return pytest.mark.gpu(pytest.mark.skipif(NO_GPU is not None, reason=f"no GPU: {NO_GPU}")(test))


@on_gpu
@pytest.mark.parametrize("special_values", [False, True], ids=["", "nan_inf"])
@pytest.mark.parametrize("kind", KINDS)
def test_matches_the_interpreter_on_gpu(kind, special_values):
    if special_values and kind == "gather_cast":
        pytest.skip("a cast of NaN or inf to i32 has no one answer")
    module, arrays = kind_inputs(kind, special_values)
    expected = graphopt.interpret(module, *arrays)
    got = graphopt.compile(module, backends=("cuda",), fallback="error")(*arrays)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


CHAIN = main("%x: tensor<33x65xf32>, %w: tensor<65xf32>) -> tensor<33x65xf32>", """
      %0 = graph.mul %x, %w : (tensor<33x65xf32>, tensor<65xf32>) -> tensor<33x65xf32>
      %1 = graph.add %0, %x : (tensor<33x65xf32>, tensor<33x65xf32>) -> tensor<33x65xf32>
      %2 = graph.softmax %1 : (tensor<33x65xf32>) -> tensor<33x65xf32>
      %3 = graph.neg %2 : tensor<33x65xf32>
      func.return %3 : tensor<33x65xf32>""")
"""Four kernels unfused, all on cuda: one device run."""


@on_gpu
def test_a_module_on_the_gpu_copies_its_inputs_in_once_and_its_result_out_once(monkeypatch):
    exe = graphopt.compile(graphopt.parse(CHAIN), backends=("cuda",), fuse=False, fallback="error")
    assert [step.device_run for step in exe.steps] == [0, 0, 0, 0] and exe.buffer_of == {}
    device = get_backend("cuda").device()
    copies = []
    for name in ("copy_in", "copy_out"):
        copy = getattr(device, name)
        monkeypatch.setattr(device, name, lambda *args, copy=copy, name=name: (copies.append(name), copy(*args))[1])
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((33, 65)).astype(np.float32), rng.standard_normal(65).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    (got,) = exe(x, w)
    np.testing.assert_allclose(got, graphopt.interpret(exe.module, x, w)[0], rtol=1e-5, atol=1e-6)
    assert sorted(copies) == ["copy_in", "copy_in", "copy_out"]
    profile = exe.profile(x, w, repeat=3)
    assert all(0 < row.seconds < 1e-2 for row in profile.steps)
    assert "[device run 0]" in exe.report()


@on_gpu
def test_a_device_run_releases_its_stream_and_events():
    device = get_backend("cuda").device()
    released = []
    release = device.release
    device.release = lambda handles: (released.extend(handles), release(handles))  # the run's finalizer takes this one
    try:
        exe = graphopt.compile(graphopt.parse(CHAIN), backends=("cuda",), fuse=False, fallback="error")
        (run,) = exe.runs
        handles = {id(handle) for handle in [run._stream, *run._marks]}  # a stream, an event around each launch
        del exe, run
        gc.collect()
    finally:
        del device.release
    assert len(handles) == 1 + 5 and handles <= {id(handle) for handle in released}  # destroyed without an error


@on_gpu
def test_calls_from_another_thread_make_the_context_current():
    from concurrent.futures import ThreadPoolExecutor

    exe = graphopt.compile(graphopt.parse(CHAIN), backends=("cuda",), fallback="error")
    x, w = np.ones((33, 65), np.float32), np.arange(65, dtype=np.float32)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: exe(x, w)[0], range(4)))
    for got in results:
        np.testing.assert_allclose(got, graphopt.interpret(exe.module, x, w)[0], rtol=1e-5, atol=1e-6)


EXAMPLES = Path(__file__).parent.parent / "examples"


@on_gpu
@pytest.mark.parametrize("example", ["mlp", "mnist_cnn", "transformer_block"])
def test_the_examples_on_cuda_and_cpu_match_the_interpreter(example):
    """What cuda refuses (convolutions, pools) runs on cpu; values cross between the device runs
    and the host."""
    module = graphopt.parse((EXAMPLES / f"{example}.mlir").read_text())
    exe = graphopt.compile(module, backends=("cuda", "cpu"), fallback="error")
    assert "cuda" in {step.backend for step in exe.steps}
    main_function = next(op for op in module.walk() if op.name == "func.func")
    arrays = random_arrays([arg.type for arg in main_function.args], seed=2)
    for got, want in zip(exe(*arrays), graphopt.interpret(module, *arrays), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@on_gpu
def test_estimate_times_the_group_on_the_gpu():
    module = graphopt.parse(KINDS["layer_norm"][0])
    op = next(op for op in module.walk() if op.name == "graph.layer_norm")
    assert 0 < CudaBackend().estimate(op) < 1e-3


@on_gpu
def test_graph_run_backend_cuda_check():
    run = subprocess.run([sys.executable, "-m", "graphopt.tools.graph_run", str(EXAMPLES / "mlp.mlir"), "--backend", "cuda", "--check",
                          "--report", "--profile"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "cuda  [device run" in run.stdout and run.stdout.rstrip().endswith("ok")


@pytest.mark.skipif(NO_GPU is None, reason="a GPU is available")
def test_graph_run_backend_cuda_without_a_gpu_is_one_clear_error():
    run = subprocess.run([sys.executable, "-m", "graphopt.tools.graph_run", str(EXAMPLES / "mlp.mlir"), "--backend", "cuda"],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith("graph-run: error: backend \"cuda\" cannot run") and "Traceback" not in run.stderr


def test_matmul_the_cpu_would_block_stays_one_nest_for_cuda():
    module = graphopt.parse(main("%a: tensor<64x256xf32>, %b: tensor<256x512xf32>)",
                                 "%0 = graph.matmul %a, %b : (tensor<64x256xf32>, tensor<256x512xf32>) -> tensor<64x512xf32>\nfunc.return"))
    op = next(op for op in module.walk() if op.name == "graph.matmul")
    assert supports(op) is None
    assert lower_group_to_cuda(op, "mm").block == (16, 16, 1)
