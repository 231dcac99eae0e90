"""The pools of SqueezeNet, ResNet-50, ShuffleNet, Inception-v1 and DenseNet-121 alone on the cpu
backend, with stride-2 taps from in-lane shuffles and from even and odd halves, against ONNX
Runtime (one process).

    python benchmarks/pooling.py [--seconds 0.5] [--threads 1]

Each pool is an ONNX model of one MaxPool or AveragePool node, imported by graphopt.from_onnx and
compiled twice: with the pooling ukernel's `IN_LANE_TAPS` on (`depthwise_conv.in_lane_stride_2`
decides, as the lowering does) and off (the jit's in-memory cache cleared between, since the
ukernel's name is alike in both; run with GRAPHOPT_KERNEL_CACHE=off). The three run in
alternating blocks of calls (benchmarks/timing.py). Prints medians, GB/s (bytes of x and out
over the median) and the time of the halves and of ORT over the in-lane taps'. Results are
checked against ORT's.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
from unittest import mock

import numpy as np
import onnx
from onnx import TensorProto, helper

import graphopt
from graphopt.lowering import pooling
from graphopt.runtime import jit
from graphopt.runtime.arrays import aligned_array

from end_to_end import graphopt_runner, onnxruntime_runner
from timing import interleaved_medians

POOLS = [
    # (model, op, channels, height = width, kernel, stride, pads): the models' pools at batch 1
    ("squeezenet", "MaxPool", 64, 111, 3, 2, 0),
    ("squeezenet", "MaxPool", 128, 55, 3, 2, 0),
    ("squeezenet", "MaxPool", 256, 27, 3, 2, 0),
    ("resnet50", "MaxPool", 64, 112, 3, 2, 1),
    ("shufflenet", "MaxPool", 24, 112, 3, 2, 1),
    ("shufflenet", "AveragePool", 24, 56, 3, 2, 1),
    ("shufflenet", "AveragePool", 136, 28, 3, 2, 1),
    ("shufflenet", "AveragePool", 272, 14, 3, 2, 1),
    ("inception_v1", "MaxPool", 192, 55, 3, 2, 0),
    ("inception_v1", "MaxPool", 192, 27, 3, 1, 1),
    ("inception_v1", "MaxPool", 480, 27, 3, 2, 0),
    ("inception_v1", "MaxPool", 512, 13, 3, 1, 1),
    ("inception_v1", "MaxPool", 832, 13, 3, 2, 0),
    ("densenet121", "AveragePool", 128, 56, 2, 2, 0),
    ("densenet121", "AveragePool", 256, 28, 2, 2, 0),
    ("densenet121", "AveragePool", 512, 14, 2, 2, 0),
]


def pool_model(op: str, channels: int, size: int, kernel: int, stride: int, pads: int) -> onnx.ModelProto:
    out_size = (size + 2 * pads - kernel) // stride + 1
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=[pads] * 4)
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out_size, out_size])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compiled(model: onnx.ModelProto, in_lane: bool, threads: int) -> graphopt.Executable:
    jit._cache.clear()
    with mock.patch.object(pooling._PoolUkernel, "IN_LANE_TAPS", in_lane):
        return graphopt.compile(graphopt.from_onnx(model), backends=("cpu",), threads=threads)


def compare(model_name: str, op: str, channels: int, size: int, kernel: int, stride: int, pads: int,
            seconds: float, threads: int) -> str:
    model = pool_model(op, channels, size, kernel, stride, pads)
    x = aligned_array(np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32))
    calls = {
        "in_lane": graphopt_runner(compiled(model, True, threads), [x]),
        "halves": graphopt_runner(compiled(model, False, threads), [x]),
        "ort": onnxruntime_runner(model, [x], threads),
    }
    results = {side: np.array(call()) for side, call in calls.items()}
    for side in ("in_lane", "halves"):
        np.testing.assert_allclose(results[side], results["ort"], rtol=1e-5, atol=1e-6)
    medians = interleaved_medians(calls, seconds)
    moved = 4 * (x.size + results["ort"].size)
    rates = "  ".join(f"{medians[side] * 1e6:7.1f} us {moved / medians[side] / 1e9:5.1f} GB/s" for side in calls)
    ratios = f"{medians['halves'] / medians['in_lane']:6.2f}x {medians['ort'] / medians['in_lane']:6.2f}x"
    pool = f"{model_name:12s} {op[:3]} {kernel}x{kernel}/{stride} {channels:4d}x{size:<3d}"
    return f"{pool}  {rates}  {ratios}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per pool")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    sides = "  ".join(f"{side:>21s}" for side in ("in-lane taps", "halves", "ONNX Runtime"))
    print(f"{'pool':33s}  {sides}  halves/in ORT/in")
    for pool in POOLS:
        print(compare(*pool, args.seconds, args.threads), flush=True)


if __name__ == "__main__":
    main()
