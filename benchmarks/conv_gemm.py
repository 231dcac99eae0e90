"""Convolutions run as the packed GEMM ukernel (b row-major) against the direct ukernel, one thread.

    python benchmarks/conv_gemm.py [--seconds 1.0] [--threads 1] [--shapes 0:23]
    python benchmarks/conv_gemm.py --model resnet50 [--threads 1]
    python benchmarks/conv_gemm.py --grouped [--threads 1]

For each shape (ResNet-50's and Inception-v2's convs at batch 1, then a few others), conv2d(x, w) + bias, relu with
w and bias constants, compiled twice by graphopt.compile(backends=("cpu",)): as the packed GEMM
ukernel (the cpu schedule's `conv_gemm` made true) and as the direct ukernel (made false). Both
apply bias and relu in the tile and include the Executable's dispatch. The two run in
alternating blocks of calls (benchmarks/timing.py); prints medians, GFLOP/s and direct / GEMM.
The two results are checked against each other.

--grouped: ShuffleNet v1's grouped 1x1s (4 groups) instead, GROUPED_SHAPES.

--model NAME: the ONNX light zoo's model (onnx/backend/test/data/light/light_NAME.onnx, batch 1)
compiled both ways; `Executable.profile` of each, 3 rounds alternating, 5 runs a round; prints
each conv step's median time and GFLOP/s both ways, then the sums of all steps.
"""

import argparse
import os
import statistics
from unittest import mock

import numpy as np
import onnx

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.runtime.arrays import aligned_array, aligned_empty

from timing import checked_rates


def compiled(module, threads: int, conv_gemm):
    """`module` compiled on the cpu backend with `conv_gemm` as the cpu schedule's choice; every step on cpu."""
    with mock.patch.object(CpuSchedule, "conv_gemm", conv_gemm):
        executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    assert all(step.backend == "cpu" for step in executable.steps), executable.report()
    return executable


ALWAYS, NEVER, RULE = (lambda self, op: True), (lambda self, op: False), CpuSchedule.conv_gemm


SHAPES = [
    # (batch, in channels, height = width, out channels, window, stride): ResNet-50 and Inception-v2
    (1, 64, 56, 256, 1, 1),
    (1, 256, 56, 64, 1, 1),
    (1, 256, 56, 512, 1, 2),
    (1, 512, 28, 128, 1, 1),
    (1, 128, 28, 512, 1, 1),
    (1, 512, 28, 1024, 1, 2),
    (1, 1024, 14, 256, 1, 1),
    (1, 256, 14, 1024, 1, 1),
    (1, 576, 14, 128, 1, 1),
    (1, 1024, 14, 2048, 1, 2),
    (1, 2048, 7, 512, 1, 1),
    (1, 512, 7, 2048, 1, 1),
    (1, 1024, 7, 192, 1, 1),
    (1, 64, 56, 64, 3, 1),
    (1, 128, 56, 128, 3, 2),
    (1, 128, 28, 128, 3, 1),
    (1, 96, 28, 96, 3, 1),
    (1, 256, 28, 256, 3, 2),
    (1, 256, 14, 256, 3, 1),
    (1, 128, 14, 160, 3, 1),
    (1, 512, 14, 512, 3, 2),
    (1, 512, 7, 512, 3, 1),
    (1, 192, 7, 320, 3, 1),
    # other models' convs: stems, few channels, batches
    (1, 3, 224, 64, 7, 2),
    (1, 3, 224, 32, 3, 2),
    (1, 16, 112, 16, 1, 1),
    (1, 16, 56, 16, 3, 1),
    (1, 32, 28, 32, 3, 1),
    (64, 8, 14, 16, 5, 1),
    (8, 64, 7, 64, 3, 1),
]

GROUPED_SHAPES = [
    # (batch, in channels, height = width, out channels, window, stride, groups): ShuffleNet v1's (light zoo)
    (1, 24, 56, 112, 1, 1, 4),
    (1, 112, 28, 112, 1, 1, 4),
    (1, 136, 28, 136, 1, 1, 4),
    (1, 136, 14, 136, 1, 1, 4),
    (1, 272, 14, 272, 1, 1, 4),
    (1, 272, 7, 272, 1, 1, 4),
    (1, 544, 7, 544, 1, 1, 4),
]


def compare(batch, channels, size, out_channels, window, stride, seconds: float, threads: int, groups: int = 1) -> str:
    rng = np.random.default_rng(0)
    x = aligned_array(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
    w = rng.standard_normal((out_channels, channels // groups, window, window)) / np.sqrt(channels // groups * window**2)
    g = GraphBuilder()
    padding = [window // 2] * 4
    conv = g.conv2d(g.input("x", x.shape), g.constant(w.astype(np.float32)), padding=padding, strides=[stride, stride], groups=groups)
    module = g.finish(g.relu(g.add(conv, g.constant(rng.standard_normal((out_channels, 1, 1)).astype(np.float32)))))
    executables = {"gemm": compiled(module, threads, ALWAYS), "direct": compiled(module.clone(), threads, NEVER)}
    shape = module.body.block.first_op.function_type.outputs.data[0].get_shape()
    outputs = {side: aligned_empty(shape, np.float32) for side in executables}
    calls = {side: (lambda e=e, o=outputs[side]: e(x, out=[o])) for side, e in executables.items()}
    flops = 2 * int(np.prod(shape)) * channels // groups * window * window
    name = f"{batch}x{channels}x{size}x{size} {out_channels} {window}x{window}/{stride}" + (f" g{groups}" if groups > 1 else "")
    return f"{name:26s}  " + checked_rates(calls, outputs, flops, seconds)


def profile_model(name: str, threads: int) -> None:
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
    module = graphopt.from_onnx(path)
    executables = {"gemm": compiled(module, threads, RULE), "direct": compiled(module.clone(), threads, NEVER)}
    shape = module.body.block.first_op.function_type.inputs.data[0].get_shape()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    profiles = {side: [] for side in executables}
    for _ in range(3):
        for side, executable in executables.items():
            profiles[side].append(executable.profile(x, repeat=5).steps)
    medians = {side: [statistics.median(p[i].seconds for p in runs) for i in range(len(runs[0]))] for side, runs in profiles.items()}
    print(f"{'step':40s}  {'GEMM rule':>22s}  {'direct only':>22s}  direct / GEMM rule")
    for i, step in enumerate(profiles["gemm"][0]):
        if "conv2d" in step.ops:
            gemm, direct = medians["gemm"][i], medians["direct"][i]
            rates = "  ".join(f"{t * 1e3:6.3f} ms {step.flops / t / 1e9:6.1f} GFLOP/s" for t in (gemm, direct))
            print(f"{step.name:40s}  {rates}  {direct / gemm:6.2f}x")
    print(f"all steps: GEMM rule {sum(medians['gemm']) * 1e3:.2f} ms, direct only {sum(medians['direct']) * 1e3:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shapes", default=":", help="a slice of SHAPES, e.g. 23: for the others")
    parser.add_argument("--model", help="profile this light zoo model's conv steps instead")
    parser.add_argument("--grouped", action="store_true", help="the grouped shapes (GROUPED_SHAPES) instead")
    args = parser.parse_args()
    if args.model:
        profile_model(args.model, args.threads)
        raise SystemExit
    start, stop = (int(i) if i else None for i in args.shapes.split(":"))
    print(f"{'x, out channels, window/stride':26s}  {'GEMM':>24s}  {'direct':>24s}  direct / GEMM")
    shapes = GROUPED_SHAPES if args.grouped else [(*shape, 1) for shape in SHAPES]
    for *shape, groups in shapes[start:stop]:
        print(compare(*shape, args.seconds, args.threads, groups), flush=True)
