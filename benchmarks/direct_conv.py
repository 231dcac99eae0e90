"""The direct convolution ukernel (lowering/direct_conv.py) against the conv2d loop nest, one thread.

    python benchmarks/direct_conv.py [--seconds 1.0]

For each shape, conv2d(x, w) with w a constant, compiled twice by graphopt.compile(backends=
("cpu",)): as the lowering chooses (the ukernel, for every shape here), and with the ukernel
turned off (direct_conv.applies false), so the same stride-phase copy of
x feeds the loop nest. Both times include the Executable's dispatch (a few us a call). The two
run in alternating blocks of calls (benchmarks/timing.py); prints medians, GFLOP/s and
loops / ukernel. The two results are checked against each other.
"""

from unittest import mock

import numpy as np

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering import direct_conv
from graphopt.runtime.arrays import aligned_array, aligned_empty

from timing import checked_rates, main_over_shapes

SHAPES = [
    # (batch, in channels, height = width, out channels, window, stride, padding, groups)
    (64, 8, 14, 16, 5, 1, 2, 1),  # the MNIST CNN's second conv at batch 64
    (1, 64, 56, 64, 3, 1, 1, 1),  # a ResNet stage-1 3x3
    (1, 64, 56, 64, 1, 1, 0, 1),  # a 1x1
    (1, 128, 28, 128, 3, 2, 1, 1),  # a strided 3x3
    (1, 3, 224, 64, 7, 2, 3, 1),  # a ResNet stem
    (8, 16, 32, 32, 3, 1, 1, 1),
    (1, 48, 56, 48, 3, 1, 1, 6),  # regnet_y_400mf's grouped 3x3s (group width 8)
    (1, 104, 28, 104, 3, 1, 1, 13),
    (1, 208, 14, 208, 3, 1, 1, 26),
    (1, 440, 7, 440, 3, 1, 1, 55),
    (1, 240, 28, 240, 1, 1, 0, 3),  # ShuffleNet v1's grouped 1x1s (3 groups)
    (1, 480, 14, 480, 1, 1, 0, 3),
]


def compare(batch, channels, size, out_channels, window, stride, padding, groups, seconds: float) -> str:
    rng = np.random.default_rng(0)
    x = aligned_array(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
    w = rng.standard_normal((out_channels, channels // groups, window, window)).astype(np.float32)
    g = GraphBuilder()
    conv = g.conv2d(g.input("x", x.shape), g.constant(w), padding=[padding] * 4, strides=[stride, stride], groups=groups)
    module = g.finish(conv)
    ukernel = graphopt.compile(module, backends=("cpu",), threads=1)
    with mock.patch.object(direct_conv, "applies", lambda *types: False):
        loops = graphopt.compile(module, backends=("cpu",), threads=1)
    shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    outputs = {side: aligned_empty(shape, np.float32) for side in ("ukernel", "loops")}
    calls = {
        "ukernel": lambda: ukernel(x, out=[outputs["ukernel"]]),
        "loops": lambda: loops(x, out=[outputs["loops"]]),
    }
    flops = 2 * int(np.prod(shape)) * channels // groups * window * window
    name = f"{batch}x{channels}x{size}x{size} {out_channels} {window}x{window}/{stride} g{groups}"
    return f"{name:28s}  " + checked_rates(calls, outputs, flops, seconds)


if __name__ == "__main__":
    main_over_shapes(__doc__.splitlines()[0], f"{'x, out channels, window/stride':28s}  {'ukernel':>24s}  {'loop nest':>24s}  loops / ukernel", SHAPES, compare)
