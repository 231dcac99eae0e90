"""The MNIST CNN's conv and pool kernels (examples/make_onnx_models.py `mnist_cnn`) at batch 1
and 64, one thread: the cpu backend against a reference measured in the same run, interleaved.

    python benchmarks/conv_pool.py [--seconds 1.0]

Each kernel is one graph.fused group, as the partitioner forms them: conv2d (padding 2) + bias +
relu, whose reference is the conv on the blas backend (im2col + one OpenBLAS GEMM per image)
and its epilogue as a cpu kernel (`backends=("blas", "cpu")`, as partition splits it), and bias + relu + max_pool2d, whose reference is NumPy (add, maximum, and the
maximum of the window's strided views, into preallocated arrays). cpu kernels are called through their native entry (as the runtime
calls them), so per-call Python overhead is in the reference's time only. The two sides run in
alternating blocks of calls; prints medians, the reference / cpu ratio and, for convs, GFLOP/s;
every result is checked against the interpreter.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import ctypes

import numpy as np
from xdsl.dialects.func import FuncOp

import graphopt
from graphopt.backends import get_backend
from graphopt.dialects import graph
from graphopt.runtime.arrays import aligned_array, aligned_empty

from timing import interleaved_medians


def tensor(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def group(inputs, body: str, result) -> str:
    """@main(%x, %b[, ...]) = one compile-mode graph.fused group computing %y from %a0, %a1, ..."""
    types = [tensor(s) for s in inputs]
    arguments = ", ".join(f"%i{k}: {t}" for k, t in enumerate(types))
    block = ", ".join(f"%a{k}: {t}" for k, t in enumerate(types))
    return (
        f"func.func @main({arguments}) -> {tensor(result)} {{\n"
        f"  %0 = graph.fused({', '.join(f'%i{k}' for k in range(len(types)))}) {{name = \"g\", mode = \"compile\"}}"
        f" : ({', '.join(types)}) -> {tensor(result)} {{\n  ^bb0({block}):\n{body}"
        f"    graph.yield %y : {tensor(result)}\n  }}\n  func.return %0 : {tensor(result)}\n}}"
    )


def conv(batch: int, channels: int, size: int, out_channels: int):
    x, w, bias = (batch, channels, size, size), (out_channels, channels, 5, 5), (out_channels, 1, 1)
    y = (batch, out_channels, size, size)
    body = (
        f"    %c = graph.conv2d %a0, %a1 {{padding = array<i64: 2, 2, 2, 2>}} : ({tensor(x)}, {tensor(w)}) -> {tensor(y)}\n"
        f"    %s = graph.add %c, %a2 : ({tensor(y)}, {tensor(bias)}) -> {tensor(y)}\n"
        f"    %y = graph.relu %s : {tensor(y)}\n"
    )
    flops = 2 * np.prod(y) * channels * 25
    return group([x, w, bias], body, y), flops, "blas"


def pool(batch: int, channels: int, size: int, window: int):
    x, bias = (batch, channels, size, size), (channels, 1, 1)
    y = (batch, channels, size // window, size // window)
    body = (
        f"    %s = graph.add %a0, %a1 : ({tensor(x)}, {tensor(bias)}) -> {tensor(x)}\n"
        f"    %r = graph.relu %s : {tensor(x)}\n"
        f"    %y = graph.max_pool2d %r {{kernel = array<i64: {window}, {window}>, strides = array<i64: {window}, {window}>}}"
        f" : ({tensor(x)}) -> {tensor(y)}\n"
    )
    return group([x, bias], body, y), 0, numpy_pool(x, window)


def numpy_pool(shape, window: int):
    """NumPy's add + relu, then the max of the window's strided views, into preallocated arrays."""
    n, c, h, w = shape
    oh, ow = h // window, w // window
    scratch = np.empty(shape, np.float32)

    def run(inputs, outputs):
        x, bias = inputs
        (out,) = outputs
        np.add(x, bias, out=scratch)
        np.maximum(scratch, 0, out=scratch)
        taps = [scratch[:, :, i : i + oh * window : window, j : j + ow * window : window] for i in range(window) for j in range(window)]
        np.maximum(taps[0], taps[1], out=out)
        for tap in taps[2:]:
            np.maximum(out, tap, out=out)

    return run


def native_call(kernel, inputs, outputs):
    """The cpu kernel's native function bound to the arrays' addresses."""
    entry = kernel.native
    arrays = [*inputs, *entry.constants, *outputs]
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arrays))(entry.address)
    addresses = [a.ctypes.data for a in arrays]
    return lambda: function(*addresses)


def measure(name: str, text: str, flops: int, reference, seconds: float) -> str:
    module = graphopt.parse(text)
    main = next(op for op in module.ops if isinstance(op, FuncOp))
    fused = next(op for op in main.body.block.ops if isinstance(op, graph.FusedOp))
    rng = np.random.default_rng(0)
    inputs = [aligned_array(rng.standard_normal(t.get_shape()).astype(np.float32)) for t in main.function_type.inputs.data]
    (expected,) = graphopt.interpret(module, *inputs)
    (cpu_kernel,) = get_backend("cpu").compile([fused], threads=1)
    outputs = {side: aligned_empty(expected.shape) for side in ("cpu", "reference")}
    if reference == "blas":  # the conv on blas, its epilogue a cpu kernel, as partition splits it
        reference_name, executable = "blas", graphopt.compile(module, backends=("blas", "cpu"), threads=1)
        run_reference = lambda: executable(*inputs, out=(outputs["reference"],))  # noqa: E731
    else:
        reference_name, run_reference = "numpy", lambda: reference(inputs, [outputs["reference"]])  # noqa: E731
    calls = {"cpu": native_call(cpu_kernel, inputs, [outputs["cpu"]]), "reference": run_reference}
    for side, call in calls.items():
        call()
        np.testing.assert_allclose(outputs[side], expected, rtol=1e-4, atol=1e-4)
    medians = interleaved_medians(calls, seconds)
    cpu, ref = medians["cpu"], medians["reference"]
    rate = f"{flops / cpu / 1e9:6.1f} GFLOP/s" if flops else ""
    return f"{name:34s} {cpu * 1e6:9.1f} us {reference_name:>6s} {ref * 1e6:9.1f} us  {ref / cpu:6.2f}x  {rate}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per kernel")
    args = parser.parse_args()
    print(f"{'kernel (one thread)':34s} {'cpu':>12s} {'reference':>16s}  {'ref/cpu':>7s}")
    for batch in (1, 64):
        workloads = [
            (f"conv 1->8 5x5 +b relu     N={batch}", *conv(batch, 1, 28, 8)),
            (f"+b relu max_pool 2x2      N={batch}", *pool(batch, 8, 28, 2)),
            (f"conv 8->16 5x5 +b relu    N={batch}", *conv(batch, 8, 14, 16)),
            (f"+b relu max_pool 3x3 s3   N={batch}", *pool(batch, 16, 14, 3)),
        ]
        for name, text, flops, reference in workloads:
            print(measure(name, text, flops, reference, args.seconds), flush=True)


if __name__ == "__main__":
    main()
