"""MobileNet-v2's depthwise 3x3 convs (padding 1, with bias and an activation) on the cpu backend,
against the conv2d loop nest and ONNX Runtime, one thread.

    python benchmarks/depthwise.py [--seconds 1.0] [--activation relu6|silu|none]

Each shape is an ONNX model, Conv (group = channels, w and bias initializers) then the
activation (Clip 0..6, x * Sigmoid(x), or none), imported by graphopt.from_onnx and compiled
by graphopt.compile(backends=("cpu",)) twice: as the lowering chooses (the depthwise ukernel,
lowering/depthwise_conv.py) and with the conv ukernels turned off (the stride-phase loop nest); ORT
runs the same model (end_to_end.onnxruntime_runner: I/O binding, all graph optimizations).
The three run in alternating blocks of calls (benchmarks/timing.py). Prints medians, GB/s
(bytes of x, out, w and bias over the median) and the time of the loop nest and of ORT over
the ukernel's. Results are checked against ORT's.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
from unittest import mock

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.lowering import depthwise_conv, direct_conv
from graphopt.runtime.arrays import aligned_array

from end_to_end import graphopt_runner, onnxruntime_runner
from timing import interleaved_medians

SHAPES = [
    # (channels, height = width, stride): the depthwise convs of torchvision's mobilenet_v2
    (32, 112, 1),
    (96, 112, 2),
    (144, 56, 1),
    (144, 56, 2),
    (192, 28, 1),
    (192, 28, 2),
    (384, 14, 1),
    (576, 14, 1),
    (576, 14, 2),
    (960, 7, 1),
]


def depthwise_model(channels: int, size: int, stride: int, activation: str) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    out_size = (size - 1) // stride + 1
    w = numpy_helper.from_array(rng.standard_normal((channels, 1, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "bias")
    conv = "y" if activation == "none" else "c"
    nodes = [helper.make_node("Conv", ["x", "w", "bias"], [conv], group=channels, pads=[1] * 4, strides=[stride] * 2)]
    initializers = [w, bias]
    if activation == "relu6":
        initializers += [numpy_helper.from_array(np.float32(0), "low"), numpy_helper.from_array(np.float32(6), "high")]
        nodes.append(helper.make_node("Clip", ["c", "low", "high"], ["y"]))
    elif activation == "silu":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "depthwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out_size, out_size])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def never(*types) -> bool:
    return False


def compare(channels: int, size: int, stride: int, activation: str, seconds: float) -> str:
    model = depthwise_model(channels, size, stride, activation)
    x = aligned_array(np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32))
    module = graphopt.from_onnx(model)
    ukernel = graphopt.compile(module, backends=("cpu",), threads=1)
    with mock.patch.object(depthwise_conv, "applies", never), mock.patch.object(direct_conv, "applies", never):
        loops = graphopt.compile(graphopt.from_onnx(model), backends=("cpu",), threads=1)
    calls = {
        "ukernel": graphopt_runner(ukernel, [x]),
        "loops": graphopt_runner(loops, [x]),
        "ort": onnxruntime_runner(model, [x], 1),
    }
    results = {side: np.array(call()) for side, call in calls.items()}
    for side in ("ukernel", "loops"):
        np.testing.assert_allclose(results[side], results["ort"], rtol=1e-4, atol=1e-4)
    medians = interleaved_medians(calls, seconds)
    out_size = (size - 1) // stride + 1
    moved = 4 * (channels * size * size + channels * out_size * out_size + channels * 10)
    rates = "  ".join(f"{medians[side] * 1e6:8.1f} us {moved / medians[side] / 1e9:5.1f} GB/s" for side in calls)
    ratios = f"{medians['loops'] / medians['ukernel']:6.2f}x {medians['ort'] / medians['ukernel']:6.2f}x"
    return f"{channels:4d}x{size:3d}x{size:<3d} s{stride}  {rates}  {ratios}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape")
    parser.add_argument("--activation", choices=("relu6", "silu", "none"), default="relu6")
    args = parser.parse_args()
    sides = "  ".join(f"{side:>24s}" for side in ("ukernel", "loop nest", "ONNX Runtime"))
    print(f"{'C x H x W, stride':18s}  {sides}  loops/uk  ORT/uk")
    for shape in SHAPES:
        print(compare(*shape, args.activation, args.seconds), flush=True)


if __name__ == "__main__":
    main()
