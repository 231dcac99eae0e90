"""Where a conv's time goes against ONNX Runtime's: the time per input channel (the tile loops'
steps) and the rest (epilogues, stores, per-tile and per-call costs), one thread (issue 17, "lanes_loop").

    python benchmarks/conv_channel_slope.py [--out 1024] [--size 14] [--window 1] [--channels 64,256,512] [--seconds 12]

For each input channel count C, conv2d(x [1, C, size, size], w [out, C, window, window], same
padding) + bias, relu, compiled by graphopt (cpu) and run by ONNX Runtime (Conv, Relu; its
NCHWc reorders included), timed in alternating blocks by the thread's CPU time
(`timing.interleaved_medians` with `time.thread_time`: both run on the calling thread at one
thread, so other processes on a shared machine do not count). Prints the medians, us, and for
each side the slope between neighbouring channel counts (us per input channel) and the
intercept of the line through the first and last (us at C = 0).
"""

import argparse
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.builder import GraphBuilder
from end_to_end import onnxruntime_runner
from timing import interleaved_medians


def runners(channels: int, out: int, size: int, window: int):
    """graphopt's and ONNX Runtime's call of the conv + bias + relu with `channels` input channels."""
    rng = np.random.default_rng(channels)
    w = (rng.standard_normal((out, channels, window, window)) * 0.05).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    pad = window // 2
    g = GraphBuilder()
    y = g.conv2d(g.input("x", x.shape), g.constant(w), padding=(pad,) * 4)
    exe = graphopt.compile(g.finish(g.relu(g.add(y, g.constant(b.reshape(out, 1, 1))))), backends=("cpu",), threads=1)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[pad] * 4), helper.make_node("Relu", ["conv"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, out, size, size))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    ort = onnxruntime_runner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), [x], 1)
    np.testing.assert_allclose(exe(x)[0], ort(), rtol=1e-3, atol=1e-3)
    return (lambda: exe(x)), ort


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=int, default=1024)
    parser.add_argument("--size", type=int, default=14)
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--channels", default="64,256,512")
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()
    counts = [int(c) for c in args.channels.split(",")]
    calls = {}
    for channels in counts:
        calls[f"graphopt {channels}"], calls[f"ORT {channels}"] = runners(channels, args.out, args.size, args.window)
    us = {side: t * 1e6 for side, t in interleaved_medians(calls, args.seconds, clock=time.thread_time).items()}
    print(f"{args.window}x{args.window} C->{args.out} at {args.size}, 1 thread, us: " + ", ".join(f"{k} {v:.0f}" for k, v in us.items()))
    for side in ("graphopt", "ORT"):
        times = [us[f"{side} {c}"] for c in counts]
        slopes = [(t1 - t0) / (c1 - c0) for (c0, t0), (c1, t1) in zip(zip(counts, times), zip(counts[1:], times[1:]))]
        whole = (times[-1] - times[0]) / (counts[-1] - counts[0])
        print(f"{side}: us per input channel {', '.join(f'{s:.2f}' for s in slopes)}; intercept {times[0] - counts[0] * whole:.0f} us")


if __name__ == "__main__":
    main()
