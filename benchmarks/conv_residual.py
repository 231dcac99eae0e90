"""A conv + bias + residual add + relu alone, with x, the residual and out fresh per call, against ONNX Runtime (issue 17).

    python benchmarks/conv_residual.py [--threads 1] [--seconds 3] [--buffers 8]

Each shape's ONNX model (Conv with bias -> Add(residual) -> Relu) is compiled by graphopt
twice, with the tiles' prefetches on and off (of out and the residual: `tile_epilogue.PREFETCH`;
of the GEMM's b: `packed_gemm.PREFETCH_B`), and run by ONNX Runtime at the same thread count
(`end_to_end.onnxruntime_session`). The calls rotate over `buffers` sets of (x, residual,
out), together larger than the L3, so that, as inside a model, the operands come from memory.
A fourth call runs this host's default (prefetch on without AVX-512, off with it) with out the
residual itself, as the Executable plans a conv whose residual dies there (`buffer_plan.py`,
`graph.may_overwrite`; where the conv's kernel may not, it says so and times nothing).
Interleaved medians (benchmarks/timing.py); prints ms and the ratios to ORT.
"""

import argparse
import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.lowering import packed_gemm, tile_epilogue
from graphopt.runtime import jit
from graphopt.runtime.arrays import aligned_array, aligned_empty

from end_to_end import onnxruntime_session
from timing import interleaved_medians

SHAPES = [
    # (in channels, out channels, height = width): ResNet-50's 1x1 + residual (GEMM at 56 and 28,
    # conv_lanes at 14), MobileNet-v2's projection 1x1s + residual at 56 and 28
    (64, 256, 56),
    (128, 512, 28),
    (256, 1024, 14),
    (144, 24, 56),
    (192, 32, 28),
    (96, 48, 56),
]


def model(channels: int, out_channels: int, size: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((out_channels, channels, 1, 1)) / np.sqrt(channels)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "bias"], ["conv"]),
        helper.make_node("Add", ["conv", "residual"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    value = lambda name, c: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, c, size, size])
    graph = helper.make_graph(nodes, "conv_residual", [value("x", channels), value("residual", out_channels)],
                              [value("y", out_channels)], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compiled(proto: onnx.ModelProto, threads: int, prefetch: bool):
    """The model compiled with the tiles' prefetches (of out, the residual and the GEMM's b) on or off."""
    tile_epilogue.PREFETCH = packed_gemm.PREFETCH_B = prefetch
    jit._cache.clear()
    return graphopt.compile(graphopt.from_onnx(proto), backends=("cpu",), threads=threads)


def compare(channels: int, out_channels: int, size: int, threads: int, seconds: float, buffers: int) -> str:
    proto = model(channels, out_channels, size)
    default = tile_epilogue.PREFETCH, packed_gemm.PREFETCH_B
    executables = {"on": compiled(proto, threads, True), "off": compiled(proto, threads, False)}
    tile_epilogue.PREFETCH, packed_gemm.PREFETCH_B = default
    session = onnxruntime_session(proto, threads)
    rng = np.random.default_rng(1)
    sets = [(aligned_array(rng.standard_normal((1, channels, size, size)).astype(np.float32)),
             aligned_array(rng.standard_normal((1, out_channels, size, size)).astype(np.float32)),
             aligned_empty((1, out_channels, size, size), np.float32)) for _ in range(buffers)]
    expected = session.run(None, {"x": sets[0][0], "residual": sets[0][1]})[0]
    for side, executable in executables.items():
        executable(sets[0][0], sets[0][1], out=[sets[0][2]])
        np.testing.assert_allclose(sets[0][2], expected, rtol=1e-4, atol=1e-4, err_msg=side)
    rotations = {side: itertools.cycle(sets) for side in ("on", "off", "over", "ort")}
    host_side = "on" if default[0] else "off"
    executable = executables[host_side]
    (step,) = executable.steps

    def ours(side):
        x, residual, out = next(rotations[side])
        executables[side](x, residual, out=[out])

    def over_residual():  # the kernel itself, as the Executable calls it with the residual's buffer as out
        x, residual, _ = next(rotations["over"])
        arguments = dict(zip(executable.function.body.block.args, (x, residual)))
        step.kernel([arguments.get(v, executable.constants.get(v)) for v in step.inputs], [residual])

    def ort():
        x, residual, _ = next(rotations["ort"])
        session.run(None, {"x": x, "residual": residual})

    calls = {"on": lambda: ours("on"), "off": lambda: ours("off"), "ort": ort}
    if step.kernel.may_overwrite:
        calls["over"] = over_residual
    times = interleaved_medians(calls, seconds)
    on, off, theirs = (times[s] * 1e3 for s in ("on", "off", "ort"))
    over = (f"  over the residual {times['over'] * 1e3:6.3f} ms, /{host_side} {times['over'] / times[host_side]:.3f}"
            if "over" in times else "  (may not write over the residual)")
    return (f"{channels:4d}->{out_channels:<4d} at {size:2d}  prefetch {on:6.3f} ms  without {off:6.3f} ms  ORT {theirs:6.3f} ms"
            f"  on/ORT {on / theirs:.2f}  off/ORT {off / theirs:.2f}  off/on {off / on:.3f}{over}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--buffers", type=int, default=8)
    parser.add_argument("--shapes", default=None, help="indices, e.g. 0,2")
    arguments = parser.parse_args()
    chosen = SHAPES if arguments.shapes is None else [SHAPES[int(i)] for i in arguments.shapes.split(",")]
    for shape in chosen:
        print(compare(*shape, arguments.threads, arguments.seconds, arguments.buffers), flush=True)


if __name__ == "__main__":
    main()
