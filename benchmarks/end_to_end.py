"""End-to-end latency of graphopt against NumPy, ONNX Runtime and PyTorch, side by side in one run.

    python benchmarks/end_to_end.py [--repeat 30] [--threads 1,2] [--json out.json] [--png out.png]
                                    [--cost-cache costs.json] [--only BERT,GPT-2]

Needs onnx and onnxruntime (`pip install -e ".[onnx]"`); PyTorch and matplotlib (`.[plot]`, for
--png) are used when installed. For each thread count a child process (OPENBLAS_NUM_THREADS,
GRAPHOPT_THREADS, torch.set_num_threads and ONNX Runtime's intra_op_num_threads set to it;
OMP_WAIT_POLICY=PASSIVE, or PyTorch's idle OpenMP workers spin on the cores the next system
needs; OPENBLAS_THREAD_TIMEOUT=4, the same for OpenBLAS's workers, as `import graphopt` sets
by default; ONNX Runtime's session.intra_op.allow_spinning=0, the same for its pool) prints one table: the median latency of each workload on each system and its ratio to the
fastest system of that row. Systems:

- NumPy: a hand-written function per workload, op by op (a fresh array per op); none for the
  BERT layer and GPT-2 block (examples/make_transformer_models.py).
- graphopt unfused (fuse=False, cpu), fused (cpu), partitioned (fusion, then the partition
  pass over cpu and blas with search="cost" and measured costs, cached in a fresh file per run
  unless --cost-cache names one), and blas (backends=("blas",), the reference taking what blas
  refuses) where the workload has a matmul or conv. All write into preallocated outputs (out=).
- ONNX Runtime: the same model (examples/make_onnx_models.py's builder, imported into graphopt
  with graphopt.from_onnx), all graph optimizations, run through I/O binding (inputs bound once,
  the output bound to a preallocated array).
- PyTorch eager, autograd off, on tensors sharing the NumPy inputs' memory. The BERT layer and
  GPT-2 block are torch.nn.functional calls (linear, matmul, softmax, layer_norm, gelu, the
  masks built as the model builds them) on the ONNX model's own initializers.

Each system runs once to warm up and is checked against ONNX Runtime (rtol and atol 1e-3).
Samples are taken round-robin over the systems of a workload, so load on the machine falls on
all of them alike; a sample is as many calls as take 2 ms (one call for slower systems). After
the tables: which backend each partitioned group runs on, graphopt's per-call and per-step
dispatch overhead, and the goals of issues 5 and 7. --json saves every median and ratio with the
machine and versions; --png draws the ratios as bar charts, one per thread count.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import metadata
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from numpy.lib.stride_tricks import sliding_window_view
from onnx import numpy_helper

import graphopt
from graphopt.backends.measure import cpu_model
from graphopt.dialects import graph

from cpu_codegen import numpy_layer_norm, numpy_softmax
from timing import child_thread_count, pyplot, results_per_thread_count, write_child_result, write_json

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from make_examples import small_normal, xavier_normal
from make_onnx_models import OnnxBuilder, mnist_cnn
from make_transformer_models import MASKED_SCORE, bert_layer, gpt2_block

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

SYSTEMS = ("NumPy", "unfused", "fused", "partitioned", "blas", "ONNX Runtime", "PyTorch")
PARTITION_BACKENDS = ("cpu", "blas")
MIN_SAMPLE_SECONDS = 2e-3
OPSET = 20
"""Gelu is an ONNX op from opset 20 on."""
HEADS = 4
"""Attention heads of the BERT layer and GPT-2 block (their weights do not tell)."""


@dataclass
class Workload:
    """One model: its ONNX form, its inputs, and the same computation by hand in NumPy and PyTorch,
    which take the inputs and then the weights (the model's float initializers)."""

    name: str
    model: onnx.ModelProto
    inputs: list[np.ndarray]
    weights: list[np.ndarray]
    numpy_function: Callable[..., np.ndarray] | None
    """None for the transformer models, which have no NumPy row."""
    torch_function: Callable | None
    shapes: dict[str, tuple[int, ...]] | None = None
    """Sizes of the model's dynamic input dimensions, for graphopt.from_onnx."""


# ----------------------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------------------


def onnx_model(build: Callable, inputs: dict[str, np.ndarray], weights: list[np.ndarray],
               output_shape: tuple[int, ...]) -> onnx.ModelProto:
    """The model of `build(b, *inputs, *weights)` on an OnnxBuilder: inputs as graph inputs,
    weights as initializers."""
    b = OnnxBuilder()
    values = [b.input(name, array.shape) for name, array in inputs.items()] + [b.constant(w) for w in weights]
    return b.model(build(b, *values), output_shape, opset=OPSET)


def elementwise_chain_graph(b: OnnxBuilder, x, w, bias):
    return b.add(b.mul(b.node("Relu", b.add(b.mul(x, w), bias)), b.constant(np.float32(0.5))), x)


def mlp_graph(b: OnnxBuilder, x, w, bias):
    return b.node("Relu", b.add(b.matmul(x, w), bias))


def layer_norm_graph(b: OnnxBuilder, x, scale, bias):
    return b.layer_norm(x, scale, bias, axis=-1)


def softmax_graph(b: OnnxBuilder, x):
    return b.softmax(x, axis=-1)


def gelu_block_graph(b: OnnxBuilder, x, w1, b1, w2, b2, scale, shift):
    hidden = b.node("Gelu", b.add(b.matmul(x, w1), b1))
    return b.layer_norm(b.add(b.add(b.matmul(hidden, w2), b2), x), scale, shift, axis=-1)


def numpy_erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7): NumPy has no erf."""
    t = 1 / (1 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1 - poly * np.exp(-x * x))


def numpy_gelu_block(x, w1, b1, w2, b2, scale, shift):
    hidden = x @ w1 + b1
    hidden = 0.5 * hidden * (1 + numpy_erf(hidden * np.float32(1 / np.sqrt(2))))
    return numpy_layer_norm(hidden @ w2 + b2 + x, scale, shift)


def torch_gelu_block(x, w1, b1, w2, b2, scale, shift):
    return F.layer_norm(F.gelu(x @ w1 + b1) @ w2 + b2 + x, (x.shape[-1],), scale, shift)


def numpy_conv2d(x: np.ndarray, weights: np.ndarray, pad: int) -> np.ndarray:
    """NCHW convolution, stride 1: padding, im2col through a sliding window view, one tensordot."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = sliding_window_view(padded, weights.shape[2:], axis=(2, 3))  # N, C, H, W, kh, kw
    return np.tensordot(windows, weights, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


def numpy_max_pool(x: np.ndarray, size: int) -> np.ndarray:
    """Non-overlapping size x size max pooling (stride = size, the remainder dropped)."""
    n, c, h, w = x.shape
    h, w = h // size, w // size
    return x[:, :, : h * size, : w * size].reshape(n, c, h, size, w, size).max(axis=(3, 5))


def numpy_mnist(x, w1, b1, w2, b2, w, b):
    features = numpy_max_pool(np.maximum(numpy_conv2d(x, w1, pad=2) + b1, 0), 2)
    features = numpy_max_pool(np.maximum(numpy_conv2d(features, w2, pad=2) + b2, 0), 3)
    return features.reshape(len(x), -1) @ w + b


def torch_mnist(x, w1, b1, w2, b2, w, b):
    features = F.max_pool2d(F.relu(F.conv2d(x, w1, padding=2) + b1), 2)
    features = F.max_pool2d(F.relu(F.conv2d(features, w2, padding=2) + b2), 3)
    return features.reshape(len(x), -1) @ w + b


def torch_dense(x, weights, bias):
    """x @ weights + bias, weights [in, out] as the ONNX MatMul reads them."""
    return F.linear(x, weights.T, bias)


def torch_attention(x, mask, wq, bq, wk, bk, wv, bv, wo, bo):
    """make_transformer_models' Layers.attention of x [batch, seq, dim] with HEADS heads;
    `mask` rewrites the scores [batch, heads, seq, seq]."""
    batch, seq, dim = x.shape
    head_dim = dim // HEADS

    def heads_of(weights, bias):  # [batch, heads, seq, head_dim]
        return torch_dense(x, weights, bias).view(batch, seq, HEADS, head_dim).transpose(1, 2)

    q, k, v = heads_of(wq, bq), heads_of(wk, bk), heads_of(wv, bv)
    scores = mask(q @ k.transpose(-2, -1) / math.sqrt(head_dim))
    attended = torch.softmax(scores, dim=-1) @ v
    return torch_dense(attended.transpose(1, 2).reshape(batch, seq, dim), wo, bo)


def torch_bert_layer(input_ids, attention_mask, words, positions, scale0, shift0, wq, bq, wk, bk, wv, bv, wo, bo,
                     scale1, shift1, w1, b1, w2, b2, scale2, shift2):
    """make_transformer_models.bert_layer: embeddings, then a post-norm layer with the padding
    mask as an additive (1 - mask) * MASKED_SCORE and the erf GELU."""
    dims = positions.shape[1:]
    x = F.embedding(input_ids, words) + F.embedding(torch.arange(input_ids.shape[1]), positions)
    x = F.layer_norm(x, dims, scale0, shift0)
    additive = (1 - attention_mask[:, None, None, :].float()) * MASKED_SCORE
    x = F.layer_norm(x + torch_attention(x, lambda scores: scores + additive, wq, bq, wk, bk, wv, bv, wo, bo),
                     dims, scale1, shift1)
    return F.layer_norm(x + torch_dense(F.gelu(torch_dense(x, w1, b1)), w2, b2), dims, scale2, shift2)


def torch_gpt2_block(x, ones, scale1, shift1, wq, bq, wk, bk, wv, bv, wo, bo, scale2, shift2, w1, b1, w2, b2):
    """make_transformer_models.gpt2_block: a pre-norm block, the causal mask a where() on the
    zeros of tril(ones), and the tanh GELU."""
    dims = x.shape[-1:]
    future = torch.tril(ones) == 0
    causal = partial(torch.where, future, MASKED_SCORE)
    x = x + torch_attention(F.layer_norm(x, dims, scale1, shift1), causal, wq, bq, wk, bk, wv, bv, wo, bo)
    hidden = F.gelu(torch_dense(F.layer_norm(x, dims, scale2, shift2), w1, b1), approximate="tanh")
    return x + torch_dense(hidden, w2, b2)


def float_initializers(model: onnx.ModelProto) -> list[np.ndarray]:
    """The float tensors of `model` in order, not its float scalars, which the NumPy and PyTorch
    functions write as numbers (writable copies: PyTorch shares their memory)."""
    return [numpy_helper.to_array(t).copy() for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT and t.dims]


def workloads(rng: np.random.Generator) -> list[Workload]:
    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def hand_built(name, build, inputs, weights, output_shape, numpy_function, torch_function):
        model = onnx_model(build, inputs, weights, output_shape)
        return Workload(name, model, list(inputs.values()), weights, numpy_function, torch_function)

    n = 1 << 24
    chain = hand_built("relu(x*w+b)*0.5+x, 2^24", elementwise_chain_graph,
                       {"x": normal(n), "w": normal(n), "b": normal(n)}, [], (n,),
                       lambda x, w, b: np.maximum(x * w + b, 0) * np.float32(0.5) + x,
                       lambda x, w, b: torch.relu(x * w + b) * 0.5 + x)
    mlp = hand_built("relu(x@W+b) 256x1024x1024", mlp_graph,
                     {"x": normal(256, 1024)}, [normal(1024, 1024), normal(1024)], (256, 1024),
                     lambda x, w, b: np.maximum(x @ w + b, 0), lambda x, w, b: torch.relu(x @ w + b))
    layer_norm = hand_built("layer_norm 4096x1024", layer_norm_graph,
                            {"x": normal(4096, 1024)}, [normal(1024), normal(1024)], (4096, 1024),
                            numpy_layer_norm, lambda x, scale, bias: F.layer_norm(x, (1024,), scale, bias))
    softmax = hand_built("softmax 4096x1024", softmax_graph, {"x": normal(4096, 1024)}, [], (4096, 1024),
                         numpy_softmax, lambda x: torch.softmax(x, dim=-1))
    mnist = mnist_cnn()
    mnist_batches = [
        Workload(f"MNIST CNN batch {batch}", mnist, [normal(batch, 1, 28, 28)], float_initializers(mnist),
                 numpy_mnist, torch_mnist, shapes={"x": (batch, 1, 28, 28)})
        for batch in (1, 64)
    ]
    weights = np.random.default_rng(6)
    gelu_block = hand_built(
        "GELU MLP block 128x768x3072", gelu_block_graph, {"x": normal(128, 768)},
        [xavier_normal(weights, (768, 3072), 768, 3072), small_normal(weights, (3072,)),
         xavier_normal(weights, (3072, 768), 3072, 768), small_normal(weights, (768,)),
         small_normal(weights, (768,), mean=1.0), small_normal(weights, (768,))],
        (128, 768), numpy_gelu_block, torch_gelu_block)
    tokens = rng.integers(0, 1000, (2, 128)).astype(np.int64)
    mask = np.ones((2, 128), np.int64)
    mask[1, 96:] = 0
    bert_model, gpt2_model = bert_layer(heads=HEADS), gpt2_block(heads=HEADS)
    bert = Workload("BERT layer 2x128x256", bert_model, [tokens, mask], float_initializers(bert_model), None,
                    torch_bert_layer)
    gpt2 = Workload("GPT-2 block 128x256", gpt2_model, [normal(1, 128, 256)], float_initializers(gpt2_model), None,
                    torch_gpt2_block)
    return [chain, mlp, layer_norm, softmax, *mnist_batches, gelu_block, bert, gpt2]


# ----------------------------------------------------------------------------------------
# Systems
# ----------------------------------------------------------------------------------------


def compile_partitioned(module, threads: int, cost_cache: str) -> graphopt.Executable:
    """Fusion, then the partition pass over cpu and blas by measured costs (Collage's search)."""
    return graphopt.compile(module, backends=PARTITION_BACKENDS, search="cost", measure=True, cost_cache=cost_cache,
                            threads=threads)


def has_anchor(module) -> bool:
    """Does the module have a matmul or conv2d, which the blas backend takes?"""
    return any(isinstance(op, (graph.MatmulOp, graph.Conv2dOp)) for op in module.walk())


def graphopt_runner(exe: graphopt.Executable, inputs: list[np.ndarray]) -> Callable[[], np.ndarray]:
    """`exe` on `inputs`, writing into outputs allocated once."""
    outputs = tuple(np.empty(v.type.get_shape(), np.float32) for v in exe.results)
    return lambda: exe(*inputs, out=outputs)[0]


def onnxruntime_session(model: onnx.ModelProto, threads: int) -> onnxruntime.InferenceSession:
    """The CPU InferenceSession every benchmark compares with: `threads` intra-op threads, no
    spinning, all graph optimizations."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # like OMP_WAIT_POLICY=PASSIVE
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def onnxruntime_runner(model: onnx.ModelProto, inputs: list[np.ndarray], threads: int) -> Callable[[], np.ndarray]:
    """An `onnxruntime_session` run through I/O binding: inputs bound once, the output preallocated."""
    session = onnxruntime_session(model, threads)
    binding = session.io_binding()
    for info, array in zip(session.get_inputs(), inputs):
        binding.bind_cpu_input(info.name, array)
    (output_info,) = session.get_outputs()
    first_run = session.run(None, dict(zip((i.name for i in session.get_inputs()), inputs)))[0]
    output = np.empty_like(first_run)
    binding.bind_output(output_info.name, "cpu", 0, np.float32, output.shape, output.ctypes.data)

    def run() -> np.ndarray:
        session.run_with_iobinding(binding)
        return output

    return run


def runners(workload: Workload, module, threads: int, cost_cache: str) -> tuple[dict[str, Callable], graphopt.Executable]:
    """The zero-argument function of each system on this workload, and the partitioned Executable."""
    arrays = [*workload.inputs, *workload.weights]
    partitioned = compile_partitioned(module, threads, cost_cache)
    systems = {
        "unfused": graphopt_runner(graphopt.compile(module, fuse=False, threads=threads), workload.inputs),
        "fused": graphopt_runner(graphopt.compile(module, threads=threads), workload.inputs),
        "partitioned": graphopt_runner(partitioned, workload.inputs),
    }
    if workload.numpy_function is not None:
        systems["NumPy"] = lambda: workload.numpy_function(*arrays)
    if has_anchor(module):
        systems["blas"] = graphopt_runner(graphopt.compile(module, backends=("blas",), threads=threads), workload.inputs)
    systems["ONNX Runtime"] = onnxruntime_runner(workload.model, workload.inputs, threads)
    if torch is not None and workload.torch_function is not None:
        tensors = [torch.from_numpy(a) for a in arrays]
        systems["PyTorch"] = lambda: workload.torch_function(*tensors)
    return systems, partitioned


# ----------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------


def check_against(reference: np.ndarray, systems: dict[str, Callable], workload: str) -> None:
    """Warn about any system whose output differs from ONNX Runtime's beyond rtol = atol = 1e-3."""
    for name, run in systems.items():
        output = np.asarray(run())
        if not np.allclose(output, reference, rtol=1e-3, atol=1e-3):
            print(f"WARNING: {workload}: {name} differs from ONNX Runtime by up to "
                  f"{np.max(np.abs(output - reference)):.3g}", flush=True)


def median_seconds(systems: dict[str, Callable], repeat: int) -> dict[str, float]:
    """Median seconds per call of each system: `repeat` samples taken round-robin, each sample
    as many calls as take MIN_SAMPLE_SECONDS (at least one)."""
    calls = {}
    for name, run in systems.items():
        start = time.perf_counter()
        run()
        calls[name] = max(1, int(MIN_SAMPLE_SECONDS / (time.perf_counter() - start)))
    samples: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(repeat):
        for name, run in systems.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                run()
            samples[name].append((time.perf_counter() - start) / calls[name])
    return {name: statistics.median(times) for name, times in samples.items()}


def relu_chain_model(count: int) -> onnx.ModelProto:
    """`count` Relu nodes in a row on one float."""
    b = OnnxBuilder()
    x = b.input("x", (1,))
    for _ in range(count):
        x = b.node("Relu", x)
    return b.model(x, (1,), opset=OPSET)


def dispatch_overhead(threads: int, repeat: int) -> dict[str, float]:
    """Seconds per call of graphopt on one float: one relu (1 step), 17 relus unfused (17 steps),
    and ONNX Runtime on the same 17 relus."""
    x = np.ones(1, np.float32)
    models = {count: relu_chain_model(count) for count in (1, 17)}
    systems = {f"{count} steps": graphopt_runner(graphopt.compile(graphopt.from_onnx(model), fuse=False, threads=threads), [x])
               for count, model in models.items()}
    systems["ONNX Runtime, 17 relus"] = onnxruntime_runner(models[17], [x], threads)
    seconds = median_seconds(systems, repeat)
    per_step = (seconds["17 steps"] - seconds["1 steps"]) / 16
    return {"per call": seconds["1 steps"] - per_step, "per step": per_step,
            "ONNX Runtime, 17 relus": seconds["ONNX Runtime, 17 relus"]}


def group_summary(exe: graphopt.Executable) -> str:
    """Each step of the Executable: its name, backend and ops."""
    parts = []
    for step in exe.steps:
        names = [op.name.removeprefix("graph.") for op in graph.computed_ops(step.op)]
        parts.append(f"{step.name} -> {step.backend} [{', '.join(names)}]")
    return "\n".join(f"    {part}" for part in parts)


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f}us"


def measure(repeat: int, threads: int, cost_cache: str, only: list[str] | None = None) -> dict:
    """One table for this process's thread count (the workloads whose names contain one of `only`,
    if given); returns what --json saves of it."""
    if torch is not None:
        torch.set_num_threads(threads)
        torch.set_grad_enabled(False)
    header = f"{'workload':<28}" + "".join(f"{name:>19}" for name in SYSTEMS)
    print(header, flush=True)
    rows, partitions = {}, {}
    for workload in workloads(np.random.default_rng(0)):
        if only and not any(part in workload.name for part in only):
            continue
        module = graphopt.from_onnx(workload.model, shapes=workload.shapes)
        systems, partitioned = runners(workload, module, threads, cost_cache)
        check_against(np.array(systems["ONNX Runtime"]()), systems, workload.name)
        seconds = median_seconds(systems, repeat)
        fastest = min(seconds.values())
        rows[workload.name] = {"seconds": seconds, "ratio_to_fastest": {k: v / fastest for k, v in seconds.items()},
                               "partitioned_steps": len(partitioned.steps)}
        cells = [f"{fmt_time(seconds[s])} {seconds[s] / fastest:5.2f}x" if s in seconds else "-" for s in SYSTEMS]
        print(f"{workload.name:<28}" + "".join(f"{cell:>19}" for cell in cells), flush=True)
        if has_anchor(module):
            partitions[workload.name] = group_summary(partitioned)
    print("\npartitioned (cost search, measured costs): group -> backend [ops]")
    for name, summary in partitions.items():
        print(f"  {name}\n{summary}")
    overhead = dispatch_overhead(threads, repeat)
    print(f"\ngraphopt dispatch: {overhead['per call'] * 1e6:.1f} us per call + {overhead['per step'] * 1e6:.1f} us per step "
          f"(ONNX Runtime runs 17 relus on one float in {overhead['ONNX Runtime, 17 relus'] * 1e6:.1f} us)")
    if "MNIST CNN batch 1" in rows:
        steps = rows["MNIST CNN batch 1"]["partitioned_steps"]
        print(f"partitioned MNIST batch 1 has {steps} steps: "
              f"{(overhead['per call'] + steps * overhead['per step']) * 1e6:.0f} us of dispatch")
    goals = check_goals(rows, threads)
    return {"workloads": rows, "partitions": partitions, "dispatch_overhead_seconds": overhead, "goals": goals}


def check_goals(rows: dict, threads: int) -> dict[str, bool]:
    """Print and return the goals of issues 5 and 7 that apply at this thread count (and to the workloads run)."""
    seconds = {name: row["seconds"] for name, row in rows.items()}
    goals = {}
    print("\ngoals:")
    for name in ("relu(x@W+b) 256x1024x1024", "GELU MLP block 128x768x3072"):
        if name not in seconds:
            continue
        s = seconds[name]
        best_single = min(s["fused"], s["blas"])
        goals[f"issue 5: {name}: partitioned >= 1.1x faster than the best single backend"] = best_single / s["partitioned"] >= 1.1
        print(f"  issue 5, {name}: best single backend / partitioned = {best_single / s['partitioned']:.2f}x (goal >= 1.10x)")
        goals[f"issue 5: {name}: partitioned within 1.1x of ONNX Runtime"] = s["partitioned"] / s["ONNX Runtime"] <= 1.1
        print(f"  issue 5, {name}: partitioned / ONNX Runtime = {s['partitioned'] / s['ONNX Runtime']:.2f}x (goal <= 1.10x)")
    if threads == 1:
        for name, s in seconds.items():
            goals[f"issue 7: {name}: partitioned no slower than ONNX Runtime"] = s["partitioned"] <= s["ONNX Runtime"]
            print(f"  issue 7, {name}: partitioned / ONNX Runtime = {s['partitioned'] / s['ONNX Runtime']:.2f}x (goal <= 1.00x)")
        if "MNIST CNN batch 1" in seconds:
            s = seconds["MNIST CNN batch 1"]
            goals["issue 7: MNIST CNN batch 1 within 2x of ONNX Runtime"] = s["partitioned"] <= 2 * s["ONNX Runtime"]
    met = sum(goals.values())
    print(f"  {met} of {len(goals)} goals met", flush=True)
    return goals


# ----------------------------------------------------------------------------------------
# The parent: one child per thread count, then JSON and PNG
# ----------------------------------------------------------------------------------------


def environment() -> dict:
    packages = ("graphopt", "numpy", "onnx", "onnxruntime", "torch", "xdsl", "llvmlite", "matplotlib")
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    machine = {"cpu": cpu_model(), "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    return {"machine": machine, "versions": versions}


def plot(results: dict, path: str) -> None:
    """One bar chart per thread count: each system's time over the fastest, per workload (log scale)."""
    plt = pyplot(path)
    if plt is None:
        return

    tables = results["threads"]
    figure, axes = plt.subplots(len(tables), 1, figsize=(14, 4.5 * len(tables)), squeeze=False)
    for ax, (threads, table) in zip(axes[:, 0], tables.items()):
        names = list(table["workloads"])
        width = 0.8 / len(SYSTEMS)
        for i, system in enumerate(SYSTEMS):
            ratios = [table["workloads"][name]["ratio_to_fastest"].get(system, np.nan) for name in names]
            ax.bar(np.arange(len(names)) + (i - len(SYSTEMS) / 2 + 0.5) * width, ratios, width, label=system)
        ax.set_yscale("log")
        ax.axhline(1, color="black", linewidth=0.5)
        ax.set_xticks(np.arange(len(names)), names, fontsize=8)
        ax.set_ylabel("time / fastest (log)")
        ax.set_title(f"{threads} thread(s), {results['machine']['cpu']}")
        ax.legend(fontsize=7, ncol=len(SYSTEMS))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="samples per system and workload")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, one table each")
    parser.add_argument("--json", help="write medians, ratios, machine and versions here")
    parser.add_argument("--png", help="write a bar chart of the ratios here")
    parser.add_argument("--cost-cache", help="measured-cost cache file (default: a fresh one for this run)")
    parser.add_argument("--only", help="comma-separated parts of workload names: run just those (e.g. BERT,GPT-2)")
    args = parser.parse_args()
    threads = child_thread_count()
    if threads is not None:
        write_child_result(measure(args.repeat, threads, args.cost_cache, args.only.split(",") if args.only else None))
        return
    results = {**environment(), "repeat": args.repeat, "threads": {}}
    with tempfile.TemporaryDirectory() as scratch:
        cost_cache = args.cost_cache or str(Path(scratch) / "costs.json")
        arguments = ["--repeat", str(args.repeat), "--cost-cache", cost_cache, *(["--only", args.only] if args.only else [])]
        results["threads"] = results_per_thread_count(args.threads.split(","), arguments, scratch)
    write_json(args.json, results)
    if args.png:
        plot(results, args.png)


if __name__ == "__main__":
    main()
