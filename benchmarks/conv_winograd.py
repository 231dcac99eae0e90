"""The Winograd F(2x2, 3x3) conv ukernel (lowering/conv_winograd.py) against the one it replaces
(`conv_lanes`) and ONNX Runtime, on the 3x3s of stride 1 of ResNet-18/50, VGG-19, Inception-v2 and
SqueezeNet (odd sizes from 24: --shapes 24:).

    python benchmarks/conv_winograd.py [--seconds 2] [--threads 1] [--shapes 0:3]
    python benchmarks/conv_winograd.py --models resnet18_ish,resnet50 [--threads 2] [--repeat 6] [--on every]

For each shape (batch 1, padding 1), an ONNX model Conv (with bias) -> Relu, compiled twice by
graphopt in this process (kernel caches off): with the cpu schedule's Winograd rule taking every
conv it can (`schedule.winograd_applies`) and taking none, and run by ONNX Runtime at the same
thread count. Interleaved medians (benchmarks/timing.py; at one thread of the calling thread's
CPU time, `time.thread_time`); prints ms and the ratios; the outputs are checked against ORT's.

--models: whole models (benchmarks/models.py's), compiled as models.py does (backends cpu and
blas) with the rule as the schedule sets it (--on every: taking every conv it can) and taking no
conv, and ORT; --repeat blocks of 4
calls each, interleaved (wall time); prints ms, the ratios and the largest difference from ORT's
output relative to its largest magnitude.
"""

import argparse
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.lowering.linalg import schedule
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.runtime import jit
from graphopt.runtime.arrays import aligned_array, aligned_empty

from end_to_end import onnxruntime_session
from timing import interleaved_medians

SHAPES = [
    # (in channels, out channels, height = width)
    (64, 64, 56), (128, 128, 28), (256, 256, 14),  # ResNet-18/50
    (64, 64, 224), (64, 128, 112), (128, 128, 112), (128, 256, 56), (256, 256, 56), (256, 512, 28), (512, 512, 28),
    (512, 512, 14),  # VGG-19
    (64, 192, 56), (64, 64, 28), (64, 96, 28), (96, 96, 28), (64, 96, 14), (96, 128, 14), (128, 128, 14),
    (128, 160, 14), (160, 160, 14), (128, 192, 14), (160, 192, 14), (192, 192, 14), (192, 256, 14),  # Inception-v2
    # odd sizes
    (16, 64, 55), (32, 128, 27), (48, 192, 13), (64, 256, 13),  # SqueezeNet 1.0
    (512, 512, 7),  # ResNet-18/50
    (192, 320, 7), (160, 224, 7), (224, 224, 7), (192, 224, 7),  # Inception-v2
]


def model(channels: int, out_channels: int, size: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((out_channels, channels, 3, 3)) / np.sqrt(9 * channels)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "bias"], ["y"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["y"], ["out"]),
        ],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, out_channels, size, size])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


RULES = {
    "every": lambda self, op: schedule.winograd_applies(op),
    "none": lambda self, op: False,
    "schedule": CpuSchedule.winograd_conv,
}
"""The Winograd rules compared: every conv the ukernel can run, none, the schedule's own."""


def compiled(proto: onnx.ModelProto, threads: int, rule: str, backends=("cpu",)):
    """The model compiled with the Winograd rule `rule` (of RULES)."""
    previous = CpuSchedule.winograd_conv
    CpuSchedule.winograd_conv = RULES[rule]
    jit._cache.clear()
    try:
        return graphopt.compile(graphopt.from_onnx(proto), backends=backends, threads=threads)
    finally:
        CpuSchedule.winograd_conv = previous


def compare(channels: int, out_channels: int, size: int, threads: int, seconds: float) -> str:
    proto = model(channels, out_channels, size)
    x = aligned_array(np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32))
    session = onnxruntime_session(proto, threads)
    expected = session.run(None, {"x": x})[0]
    outputs = {side: aligned_empty(expected.shape, np.float32) for side in ("lanes", "winograd")}
    executables = {side: compiled(proto, threads, "every" if side == "winograd" else "none") for side in outputs}
    calls = {side: (lambda e=executables[side], o=outputs[side]: e(x, out=[o])) for side in outputs}
    calls["ort"] = lambda: session.run(None, {"x": x})
    for side in outputs:
        calls[side]()
        np.testing.assert_allclose(outputs[side], expected, rtol=1e-3, atol=1e-3)
    clock = time.thread_time if threads == 1 else time.perf_counter
    times = interleaved_medians(calls, seconds, clock=clock)
    lanes, winograd, ort = (times[side] * 1e3 for side in ("lanes", "winograd", "ort"))
    name = f"{channels}->{out_channels} at {size}"
    return f"{name:18s} {lanes:9.3f} {winograd:9.3f} {ort:9.3f}   {winograd / lanes:5.2f}   {winograd / ort:5.2f}   {lanes / ort:5.2f}"


def compare_model(name: str, threads: int, repeat: int, on_rule: str) -> str:
    from models import load_model, model_inputs
    from end_to_end import graphopt_runner, onnxruntime_runner

    proto = load_model(name)
    inputs = [aligned_array(a) for a in model_inputs(proto, np.random.default_rng(0))]
    calls = {"ort": onnxruntime_runner(proto, inputs, threads)}
    for side, rule in (("off", "none"), ("on", on_rule)):
        calls[side] = graphopt_runner(compiled(proto, threads, rule, ("cpu", "blas")), inputs)
    expected = calls["ort"]()
    differences = [np.abs(calls[side]() - expected).max() / np.abs(expected).max() for side in ("off", "on")]
    times = interleaved_medians(calls, 0, rounds=repeat)
    off, on, ort = (times[side] * 1e3 for side in ("off", "on", "ort"))
    return (
        f"{name:14s} {off:9.2f} {on:9.2f} {ort:9.2f}   {on / off:5.3f}   {off / ort:5.3f}   {on / ort:5.3f}"
        f"   {differences[0]:.1e} {differences[1]:.1e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per shape")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shapes", default=":", help="a slice of SHAPES, e.g. 0:3")
    parser.add_argument("--models", help="whole models instead, comma-separated")
    parser.add_argument("--repeat", type=int, default=6, help="blocks of calls per model")
    parser.add_argument("--on", choices=("schedule", "every"), default="schedule", help="--models: the rule of the 'on' column")
    args = parser.parse_args()
    if args.models:
        print(f"{'model':14s} {'off ms':>9s} {'on ms':>9s} {'ORT ms':>9s}   on/off  off/ORT  on/ORT   max diff off, on")
        for name in args.models.split(","):
            print(compare_model(name, args.threads, args.repeat, args.on), flush=True)
        return
    start, stop = (int(i) if i else None for i in args.shapes.split(":"))
    print(f"{'conv':18s} {'lanes ms':>9s} {'wino ms':>9s} {'ORT ms':>9s}   wino/lanes wino/ORT lanes/ORT")
    for shape in SHAPES[start:stop]:
        print(compare(*shape, args.threads, args.seconds), flush=True)


if __name__ == "__main__":
    main()
