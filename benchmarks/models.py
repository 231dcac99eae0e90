"""CNN latency of graphopt against ONNX Runtime on whole models, at 1 and 2 threads (issue 17).

    python benchmarks/models.py [--models resnet50,mobilenet_v2_ish] [--threads 1,2] [--repeat 10]
                                [--quick] [--profile] [--json out.json] [--png out.png]

Needs onnx and onnxruntime (`pip install -e ".[onnx]"`; matplotlib, `.[plot]`, for --png). Models:

- the ONNX light zoo's CNNs, which ship inside the onnx package
  (`onnx/backend/test/data/light/light_<name>.onnx`, batch 1, 3x224x224): resnet50,
  inception_v1, inception_v2, shufflenet, squeezenet, vgg19, densenet121, bvlc_alexnet, zfnet512;
- built here, with examples/make_onnx_models.py's builder (batch 1, 3x224x224, 1000 classes):
  mobilenet_v2_ish, MobileNet-v2 at width 1.0 (inverted residual blocks: 1x1 expand, depthwise
  3x3, 1x1 project, each with BatchNormalization, relu6 as Clip, residual adds), and
  efficientnet_ish, EfficientNet-B0's stack (the same blocks with 3x3 and 5x5 depthwise convs,
  SiLU as x*Sigmoid(x), and squeeze-and-excitation: global pool, 1x1, SiLU, 1x1, Sigmoid, Mul).

One child process per thread count, with end_to_end.py's environment (timing.thread_environment).
In it, per model: `graphopt.compile(graphopt.from_onnx(model), backends=("cpu", "blas"))` and an
ONNX Runtime session (end_to_end.onnxruntime_runner: ORT_ENABLE_ALL, I/O binding, no spinning),
their outputs compared (a warning beyond rtol = atol = 1e-3), then timed interleaved
(timing.interleaved_medians: alternating blocks of 4 calls, --repeat blocks each); the ratio is
graphopt's median over ONNX Runtime's. The parent prints one Markdown table per thread count
with the geometric mean of the ratios.

--quick: 2 blocks per model instead of --repeat, and unless --models is given only QUICK_MODELS
(30 s for 1 and 2 threads on a 2-core machine with a warm kernel cache, about 2 minutes cold). --profile: the five slowest steps of
each model (`Executable.profile`: op kinds, median, share, GFLOP/s, GB/s). --json saves every
median, ratio and profile row; --png draws the ratios, one bar group per thread count.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

import graphopt

from end_to_end import environment, graphopt_runner, onnxruntime_runner
from timing import (
    child_thread_count,
    interleaved_medians,
    parse_model_arguments,
    pyplot,
    results_per_thread_count,
    write_child_result,
    write_json,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from make_examples import small_normal, xavier_normal
from make_onnx_models import OnnxBuilder, Value, conv_bn

ZOO_MODELS = ("resnet50", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19", "densenet121",
              "bvlc_alexnet", "zfnet512")
QUICK_MODELS = ("resnet50", "inception_v2", "squeezenet", "shufflenet", "mobilenet_v2_ish", "efficientnet_ish")
QUICK_ROUNDS = 2
TOP_STEPS = 5
PROFILE_REPEAT = 5
BACKENDS = ("cpu", "blas")
OPSET = 17

MOBILENET_V2_STAGES = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3),
                       (6, 160, 3, 2, 3), (6, 320, 1, 1, 3))
"""(expansion, output channels, blocks, stride of the first block, depthwise kernel) per stage."""
EFFICIENTNET_B0_STAGES = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
                          (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))


# ----------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------


def relu6(b: OnnxBuilder, x: Value) -> Value:
    return b.node("Clip", x, b.constant(np.float32(0.0)), b.constant(np.float32(6.0)))


def silu(b: OnnxBuilder, x: Value) -> Value:
    return b.mul(x, b.node("Sigmoid", x))


def squeeze_excite(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int, squeezed: int) -> Value:
    """x * sigmoid(1x1(silu(1x1(global average pool of x)))), the 1x1 convs with biases."""
    def conv1x1(y: Value, out_channels: int, in_channels: int) -> Value:
        weights = xavier_normal(rng, (out_channels, in_channels, 1, 1), in_channels, out_channels)
        return b.node("Conv", y, b.constant(weights), b.constant(small_normal(rng, (out_channels,))))

    scale = conv1x1(silu(b, conv1x1(b.node("GlobalAveragePool", x), squeezed, channels)), channels, squeezed)
    return b.mul(x, b.node("Sigmoid", scale))


def inverted_residual(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], expansion: int,
                      stride: int, kernel: int, activation: Callable, squeeze: bool) -> Value:
    """MobileNet-v2's block (EfficientNet's MBConv with `squeeze`): 1x1 expand, depthwise conv,
    [squeeze-and-excitation,] 1x1 project; the input added back when the shapes agree."""
    out_channels, in_channels = channels
    hidden = in_channels * expansion
    y = x if expansion == 1 else activation(b, conv_bn(b, rng, x, (hidden, in_channels), 1))
    y = activation(b, conv_bn(b, rng, y, (hidden, hidden), kernel, stride, groups=hidden))
    if squeeze:
        y = squeeze_excite(b, rng, y, hidden, max(1, in_channels // 4))
    y = conv_bn(b, rng, y, (out_channels, hidden), 1)
    return b.add(x, y) if stride == 1 and in_channels == out_channels else y


def inverted_residual_net(seed: int, stages: tuple, activation: Callable, squeeze: bool) -> onnx.ModelProto:
    """x[1,3,224,224] -> a 3x3 stride-2 stem (32 channels), `stages` of inverted residual blocks,
    a 1x1 conv to 1280 channels, global average pool and a linear layer -> logits[1,1000]."""
    rng = np.random.default_rng(seed)
    b = OnnxBuilder()
    y = activation(b, conv_bn(b, rng, b.input("x", (1, 3, 224, 224)), (32, 3), 3, stride=2))
    channels = 32
    for expansion, out_channels, blocks, stride, kernel in stages:
        for block in range(blocks):
            y = inverted_residual(b, rng, y, (out_channels, channels), expansion, stride if block == 0 else 1, kernel,
                                  activation, squeeze)
            channels = out_channels
    y = activation(b, conv_bn(b, rng, y, (1280, channels), 1))
    pooled = b.node("Flatten", b.node("GlobalAveragePool", y), axis=1)
    weights, bias = xavier_normal(rng, (1000, 1280), 1280, 1000), small_normal(rng, (1000,))
    return b.model(b.node("Gemm", pooled, b.constant(weights), b.constant(bias), transB=1), (1, 1000), opset=OPSET)


BUILT_MODELS = {
    "mobilenet_v2_ish": lambda: inverted_residual_net(6, MOBILENET_V2_STAGES, relu6, squeeze=False),
    "efficientnet_ish": lambda: inverted_residual_net(7, EFFICIENTNET_B0_STAGES, silu, squeeze=True),
}
MODELS = (*ZOO_MODELS, *BUILT_MODELS)


def load_model(name: str) -> onnx.ModelProto:
    if name in BUILT_MODELS:
        return BUILT_MODELS[name]()
    return onnx.load(str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"))


def model_inputs(model: onnx.ModelProto, rng: np.random.Generator) -> list[np.ndarray]:
    """An array per graph input that is not an initializer: standard normal float32, or for an
    int64 input (token ids, an attention mask) zeros and ones."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    arrays = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            arrays.append(rng.integers(0, 2, dims, dtype=np.int64))
        else:
            arrays.append(rng.standard_normal(dims).astype(np.float32))
    return arrays


# ----------------------------------------------------------------------------------------
# Measuring (in the child process of one thread count)
# ----------------------------------------------------------------------------------------


def measure_model(name: str, threads: int, rounds: int, profile: bool) -> dict:
    """Medians of graphopt and ONNX Runtime on model `name`, their ratio, and with `profile`
    graphopt's slowest steps."""
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    exe = graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=threads)
    systems = {"graphopt": graphopt_runner(exe, inputs), "ONNX Runtime": onnxruntime_runner(model, inputs, threads)}
    expected, actual = np.array(systems["ONNX Runtime"]()), systems["graphopt"]()
    if not np.allclose(actual, expected, rtol=1e-3, atol=1e-3):
        print(f"WARNING: {name}: graphopt differs from ONNX Runtime by up to {np.max(np.abs(actual - expected)):.3g}")
    seconds = interleaved_medians(systems, 0.0, rounds)
    row = {"seconds": seconds, "ratio": seconds["graphopt"] / seconds["ONNX Runtime"], "steps": len(exe.steps)}
    print(f"{name:<18} graphopt {seconds['graphopt'] * 1e3:8.2f} ms  ONNX Runtime {seconds['ONNX Runtime'] * 1e3:8.2f} ms"
          f"  {row['ratio']:5.2f}x  ({len(exe.steps)} steps)", flush=True)
    if profile:
        report = exe.profile(*inputs, repeat=PROFILE_REPEAT)
        print(report.table(report.top(TOP_STEPS)), flush=True)
        row["top_steps"] = [
            {"name": s.name, "backend": s.backend, "ops": list(s.ops), "seconds": s.seconds, "share": s.share,
             "gflops_per_second": s.gflops_per_second, "gbytes_per_second": s.gbytes_per_second}
            for s in report.top(TOP_STEPS)
        ]
    return row


# ----------------------------------------------------------------------------------------
# Reporting (in the parent)
# ----------------------------------------------------------------------------------------


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown_table(rows: dict[str, dict], threads: str) -> str:
    lines = [f"{threads} thread(s):", "", "| model | graphopt | ONNX Runtime | graphopt / ORT |", "|---|---|---|---|"]
    for name, row in rows.items():
        ours, theirs = row["seconds"]["graphopt"], row["seconds"]["ONNX Runtime"]
        lines.append(f"| {name} | {ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms | {row['ratio']:.2f}x |")
    lines.append(f"| geomean | | | {geomean([row['ratio'] for row in rows.values()]):.2f}x |")
    return "\n".join(lines)


def plot(results: dict, path: str) -> None:
    """graphopt / ORT per model, one bar per thread count, a line at 1."""
    plt = pyplot(path)
    if plt is None:
        return

    tables = results["threads"]
    names = list(next(iter(tables.values())))
    width = 0.8 / len(tables)
    figure, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names)), 4.5))
    for i, (threads, rows) in enumerate(tables.items()):
        ratios = [rows[name]["ratio"] for name in names]
        ax.bar(np.arange(len(names)) + (i - len(tables) / 2 + 0.5) * width, ratios, width,
               label=f"{threads} thread(s), geomean {geomean(ratios):.2f}x")
    ax.axhline(1, color="black", linewidth=0.5)
    ax.set_xticks(np.arange(len(names)), names, fontsize=8, rotation=30, ha="right")
    ax.set_ylabel("graphopt / ONNX Runtime (lower is better)")
    ax.set_title(results["machine"]["cpu"])
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def parse_arguments() -> argparse.Namespace:
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--profile", action="store_true", help=f"print the {TOP_STEPS} slowest steps of each model")
        parser.add_argument("--png", help="write a bar chart of the ratios here")

    return parse_model_arguments(__doc__.splitlines()[0], MODELS, MODELS, QUICK_MODELS, QUICK_ROUNDS, add_options)


def main() -> None:
    args = parse_arguments()
    threads = child_thread_count()
    if threads is not None:
        write_child_result({name: measure_model(name, threads, args.repeat, args.profile) for name in args.models.split(",")})
        return
    results = {**environment(), "repeat": args.repeat, "threads": {}}
    with tempfile.TemporaryDirectory() as scratch:
        arguments = ["--models", args.models, "--repeat", str(args.repeat), *(["--profile"] if args.profile else [])]
        results["threads"] = results_per_thread_count(args.threads.split(","), arguments, scratch)
    for threads, rows in results["threads"].items():
        print(markdown_table(rows, threads) + "\n")
    write_json(args.json, results)
    if args.png:
        plot(results, args.png)


if __name__ == "__main__":
    main()
