"""The conv ukernel with output channels on the lanes (lowering/conv_lanes.py) against the direct
ukernel and the conv GEMM, one thread unless said.

    python benchmarks/conv_lanes.py [--seconds 1.0] [--threads 1] [--shapes 0:8]

For each shape (ResNet-50's and Inception-v2's 3x3s and stems at batch 1, 1x1s, stride 2,
SqueezeNet's and Inception-v2's 3x3s at 55, 27, 13, 28, 14 and 7, and odd ones), conv2d(x, w) +
bias, relu with w and bias constants, compiled three times by graphopt.compile(backends=("cpu",)):
as `conv_lanes` (the cpu schedule's `lanes_conv` made true, `conv_gemm` false), as the direct
ukernel (both false) and as the packed GEMM (`conv_gemm` true, `lanes_conv` false). All apply bias
and relu in the tile and include the Executable's dispatch; they run in alternating blocks of calls
(benchmarks/timing.py). Prints medians, GFLOP/s and each other's time over the lanes ukernel's; the
results are checked against each other.
"""

import argparse
from contextlib import ExitStack
from unittest import mock

import numpy as np

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.runtime.arrays import aligned_array, aligned_empty

from timing import interleaved_medians

ALWAYS, NEVER = (lambda self, op: True), (lambda self, op: False)
SIDES = {"lanes": (ALWAYS, NEVER), "direct": (NEVER, NEVER), "gemm": (NEVER, ALWAYS)}
"""(lanes_conv, conv_gemm) of each way compiled."""

SHAPES = [
    # (batch, in channels, height, width, out channels, window, stride): ResNet-50's and
    # Inception-v2's, 1x1s, SqueezeNet's, Inception-v2's and VGG's 3x3s, few channels, odd sizes
    (1, 64, 56, 56, 64, 3, 1),
    (1, 128, 28, 28, 128, 3, 1),
    (1, 256, 14, 14, 256, 3, 1),
    (1, 512, 7, 7, 512, 3, 1),
    (1, 3, 224, 224, 64, 7, 2),
    (1, 64, 56, 56, 192, 3, 1),
    (1, 128, 56, 56, 128, 3, 2),
    (1, 256, 28, 28, 256, 3, 2),
    (1, 64, 56, 56, 256, 1, 1),
    (1, 256, 28, 28, 128, 1, 1),
    (1, 1024, 14, 14, 256, 1, 1),
    (1, 16, 55, 55, 64, 3, 1),
    (1, 32, 27, 27, 128, 3, 1),
    (1, 64, 13, 13, 256, 3, 1),
    (1, 48, 13, 13, 192, 3, 1),
    (1, 64, 28, 28, 96, 3, 1),
    (1, 64, 14, 14, 96, 3, 1),
    (1, 160, 14, 14, 192, 3, 1),
    (1, 192, 7, 7, 320, 3, 1),
    (1, 128, 28, 28, 160, 3, 2),
    (1, 64, 224, 224, 64, 3, 1),
    (1, 64, 50, 50, 40, 3, 1),
    (1, 3, 56, 56, 24, 3, 1),
    (1, 32, 7, 1, 32, 3, 1),
    (1, 96, 1, 1, 96, 3, 1),
    (1, 48, 5, 10, 36, 3, 1),
    (3, 32, 28, 28, 32, 3, 1),
]


def compare(batch, channels, height, width, out_channels, window, stride, seconds: float, threads: int) -> str:
    rng = np.random.default_rng(0)
    x = aligned_array(rng.standard_normal((batch, channels, height, width)).astype(np.float32))
    w = (rng.standard_normal((out_channels, channels, window, window)) / np.sqrt(channels * window**2)).astype(np.float32)
    g = GraphBuilder()
    conv = g.conv2d(g.input("x", x.shape), g.constant(w), padding=[window // 2] * 4, strides=[stride, stride])
    module = g.finish(g.relu(g.add(conv, g.constant(rng.standard_normal((out_channels, 1, 1)).astype(np.float32)))))
    executables = {}
    for side, (lanes, gemm) in SIDES.items():
        with ExitStack() as stack:
            stack.enter_context(mock.patch.object(CpuSchedule, "lanes_conv", lanes))
            stack.enter_context(mock.patch.object(CpuSchedule, "conv_gemm", gemm))
            executables[side] = graphopt.compile(module.clone(), backends=("cpu",), threads=threads)
    shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    outputs = {side: aligned_empty(shape, np.float32) for side in executables}
    calls = {side: (lambda e=e, o=outputs[side]: e(x, out=[o])) for side, e in executables.items()}
    for call in calls.values():
        call()
    for side in ("direct", "gemm"):
        np.testing.assert_allclose(outputs[side], outputs["lanes"], rtol=1e-3, atol=1e-3)
    medians = interleaved_medians(calls, seconds)
    flops = 2 * int(np.prod(shape)) * channels * window * window
    rates = "  ".join(f"{t * 1e3:7.3f} ms {flops / t / 1e9:6.1f}" for t in medians.values())
    ratios = "  ".join(f"{medians[side] / medians['lanes']:5.2f}x" for side in ("direct", "gemm"))
    name = f"{batch}x{channels}x{height}x{width} {out_channels} {window}x{window}/{stride}"
    return f"{name:28s}  {rates}  {ratios}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shapes", default=":", help="a slice of SHAPES, e.g. 4:8")
    args = parser.parse_args()
    start, stop = (int(i) if i else None for i in args.shapes.split(":"))
    print(f"{'x, out channels, window/stride':28s}  {'lanes ms GFLOP/s':>18s}  {'direct':>18s}  {'gemm':>18s}  direct/lanes gemm/lanes")
    for shape in SHAPES[start:stop]:
        print(compare(*shape, args.seconds, args.threads), flush=True)
