"""GPU benchmark (issue 19): graphopt's cuda kernels against a device-to-device copy and PyTorch on one GPU.

    python benchmarks/gpu.py [--repeat 20] [--quick] [--json out.json]

Needs an NVIDIA GPU, its driver and cuda-bindings (`pip install -e ".[cuda]"`); PyTorch with
CUDA is optional (without it the comparison column says so). Each workload is compiled with
`graphopt.compile(m, backends=("cuda",))`, checked against the interpreter, and timed by
`exe.profile`: CUDA events around each kernel's launch, the inputs already on the device, the
sum of the steps' medians. PyTorch runs the same computation on the same GPU, timed by CUDA
events with its inputs on the device too.

- the fused chain relu(x*w+b)*0.5+x on 2^26 f32 (three arrays read, one written) against a
  device-to-device copy of the same bytes (cuMemcpyDtoDAsync of 2 * 2^26 * 4 bytes: as many
  bytes read and written in all); the goal is 80% of the copy's bandwidth;
- softmax and layer_norm at 4096x1024 and 16384x4096;
- the GELU MLP block's two matmuls alone, gelu(x@W1+b1) at 128x768x3072 and x@W2+b2 at
  128x3072x768, and the block 128x768x3072 (end_to_end.py's: layer_norm(gelu(x@W1+b1)@W2+b2+x));
- the MNIST CNN (examples/mnist_cnn.mlir, batch 1) with backends=("cuda", "cpu"): the cost
  search (`search="cost", measure=True`) and greedy cuda-first placement, where each step
  lands and each whole call's wall time (copies in and out included) against cpu alone.

--quick: the smaller softmax and layer_norm only (the matmuls and the block too), and 5 timed runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import graphopt
from graphopt.backends import get_backend
from graphopt.errors import GraphoptError

sys.path.insert(0, str(Path(__file__).parent))
from timing import interleaved_medians, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COPY_GOAL = 0.80
"""The chain's bandwidth over a device-to-device copy's (issue 19)."""


def tensor(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def chain_module(n: int) -> str:
    t = tensor(n)
    return f"""func.func @main(%x: {t}, %w: {t}, %b: {t}) -> {t} {{
  %half = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.mul %x, %w : ({t}, {t}) -> {t}
  %1 = graph.add %0, %b : ({t}, {t}) -> {t}
  %2 = graph.relu %1 : {t}
  %3 = graph.mul %2, %half : ({t}, tensor<f32>) -> {t}
  %4 = graph.add %3, %x : ({t}, {t}) -> {t}
  func.return %4 : {t}
}}"""


def softmax_module(rows: int, columns: int) -> str:
    t = tensor(rows, columns)
    return f"""func.func @main(%x: {t}) -> {t} {{
  %0 = graph.softmax %x : ({t}) -> {t}
  func.return %0 : {t}
}}"""


def layer_norm_module(rows: int, columns: int) -> str:
    t, v = tensor(rows, columns), tensor(columns)
    return f"""func.func @main(%x: {t}, %g: {v}, %b: {v}) -> {t} {{
  %0 = graph.layer_norm %x, %g, %b : ({t}, {v}, {v}) -> {t}
  func.return %0 : {t}
}}"""


def gelu_block_module(rows: int, width: int, hidden: int) -> str:
    x, h, w1, w2 = tensor(rows, width), tensor(rows, hidden), tensor(width, hidden), tensor(hidden, width)
    b1, v = tensor(hidden), tensor(width)
    return f"""func.func @main(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}, %b2: {v}, %g: {v}, %s: {v}) -> {x} {{
  %0 = graph.matmul %x, %w1 : ({x}, {w1}) -> {h}
  %1 = graph.add %0, %b1 : ({h}, {b1}) -> {h}
  %2 = graph.gelu %1 : {h}
  %3 = graph.matmul %2, %w2 : ({h}, {w2}) -> {x}
  %4 = graph.add %3, %b2 : ({x}, {v}) -> {x}
  %5 = graph.add %4, %x : ({x}, {x}) -> {x}
  %6 = graph.layer_norm %5, %g, %s : ({x}, {v}, {v}) -> {x}
  func.return %6 : {x}
}}"""


def matmul_bias_module(rows: int, inner: int, columns: int, gelu: bool) -> str:
    """x @ w + b, then gelu if `gelu`: one matmul kernel with its epilogue."""
    x, w, y, b = tensor(rows, inner), tensor(inner, columns), tensor(rows, columns), tensor(columns)
    last = "%2 = graph.gelu %1 : " + y + "\n  func.return %2 : " + y if gelu else "func.return %1 : " + y
    return f"""func.func @main(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
  %0 = graph.matmul %x, %w : ({x}, {w}) -> {y}
  %1 = graph.add %0, %b : ({y}, {b}) -> {y}
  {last}
}}"""


def torch_functions():
    """PyTorch's version of each workload, by name prefix, or None without PyTorch on a GPU."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return {
        "chain": lambda x, w, b: torch.relu(x * w + b) * 0.5 + x,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "layer_norm": lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b),
        "matmul_bias_gelu": lambda x, w, b: F.gelu(x @ w + b),
        "matmul_bias": lambda x, w, b: x @ w + b,
        "gelu_block": lambda x, w1, b1, w2, b2, g, s: F.layer_norm(F.gelu(x @ w1 + b1) @ w2 + b2 + x, (x.shape[-1],), g, s),
    }


def torch_seconds(function, inputs: list[np.ndarray], repeat: int) -> float:
    """Median time of `function` on the GPU by CUDA events, its inputs on the device."""
    import torch

    on_device = [torch.from_numpy(a).cuda() for a in inputs]
    function(*on_device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        function(*on_device)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def device_copy_seconds(device, nbytes: int, repeat: int) -> float:
    """Median time of a device-to-device copy of `nbytes` by CUDA events."""
    driver, check = device.driver, device.check
    source, target = device.allocate(nbytes), device.allocate(nbytes)
    stream = device.stream()
    start, end = device.event(), device.event()
    try:
        check(driver.cuMemcpyDtoDAsync(target, source, nbytes, stream))
        times = []
        for _ in range(repeat):
            device.record(start, stream)
            check(driver.cuMemcpyDtoDAsync(target, source, nbytes, stream))
            device.record(end, stream)
            times.append(device.seconds_between(start, end))
    finally:
        device.synchronize(stream)
        device.free([source, target])
    return statistics.median(times)


def kernel_row(name: str, text: str, inputs: list[np.ndarray], repeat: int, torch_function) -> dict:
    """graphopt's device time of the module (checked against the interpreter) and PyTorch's."""
    module = graphopt.parse(text)
    exe = graphopt.compile(module, backends=("cuda",), fallback="error")
    (got,) = exe(*inputs)
    (want,) = graphopt.interpret(module, *inputs)
    error = float(np.max(np.abs(got.astype(np.float64) - want)))
    profile = exe.profile(*inputs, repeat=repeat)
    seconds = sum(row.seconds for row in profile.steps)
    moved = sum(a.nbytes for a in inputs) + got.nbytes
    row = {"workload": name, "graphopt_s": seconds, "steps": len(profile.steps), "max_abs_error": error,
           "graphopt_GBps": moved / seconds / 1e9}
    if torch_function is not None:
        row["torch_s"] = torch_seconds(torch_function, inputs, repeat)
    return row


def mnist_rows(repeat: int) -> dict:
    """The MNIST CNN on ("cuda", "cpu"): placements, and wall time per call against cpu alone."""
    module = graphopt.parse((ROOT / "examples" / "mnist_cnn.mlir").read_text())
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    plans = {
        "cpu": graphopt.compile(module, backends=("cpu",)),
        "cuda+cpu greedy": graphopt.compile(module, backends=("cuda", "cpu")),
    }
    start = time.perf_counter()
    plans["cuda+cpu cost search"] = graphopt.compile(module, backends=("cuda", "cpu"), search="cost", measure=True)
    search_seconds = time.perf_counter() - start
    (want,) = graphopt.interpret(module, x)
    for name, exe in plans.items():
        np.testing.assert_allclose(exe(x)[0], want, rtol=1e-4, atol=1e-5, err_msg=name)
    seconds = interleaved_medians({name: (lambda exe=exe: exe(x)) for name, exe in plans.items()}, 1.0, repeat)
    return {
        "seconds": seconds,
        "search_seconds": search_seconds,
        "placement": {name: [(p.step, p.backend) for p in exe.placement()] for name, exe in plans.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the numbers to this file")
    options = parser.parse_args()
    repeat = 5 if options.quick else options.repeat
    try:
        device = get_backend("cuda").device()
    except GraphoptError as error:
        sys.exit(f"gpu.py: {error}")
    print(f"device: {device.name} ({device.arch})")
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    torch = torch_functions()
    n = 1 << 26
    sizes = [(4096, 1024)] if options.quick else [(4096, 1024), (16384, 4096)]
    workloads = [("chain relu(x*w+b)*0.5+x 2^26", chain_module(n), [normal(n), normal(n), normal(n)], "chain")]
    for rows, columns in sizes:
        workloads.append((f"softmax {rows}x{columns}", softmax_module(rows, columns), [normal(rows, columns)], "softmax"))
        workloads.append((f"layer_norm {rows}x{columns}", layer_norm_module(rows, columns),
                          [normal(rows, columns), normal(columns), normal(columns)], "layer_norm"))
    workloads.append(("matmul+bias+gelu 128x768x3072", matmul_bias_module(128, 768, 3072, gelu=True),
                      [normal(128, 768), normal(768, 3072) * 0.03, normal(3072) * 0.1], "matmul_bias_gelu"))
    workloads.append(("matmul+bias 128x3072x768", matmul_bias_module(128, 3072, 768, gelu=False),
                      [normal(128, 3072), normal(3072, 768) * 0.02, normal(768) * 0.1], "matmul_bias"))
    workloads.append(("GELU MLP block 128x768x3072", gelu_block_module(128, 768, 3072),
                      [normal(128, 768), normal(768, 3072) * 0.03, normal(3072) * 0.1, normal(3072, 768) * 0.02,
                       normal(768) * 0.1, 1 + normal(768) * 0.1, normal(768) * 0.1], "gelu_block"))

    results = {"device": device.name, "arch": device.arch, "kernels": []}
    copy_bytes = 2 * n * 4  # read and write 2^27 floats: the chain's 3 reads and 1 write of 2^26
    copy = device_copy_seconds(device, copy_bytes, repeat)
    results["copy"] = {"bytes": copy_bytes, "seconds": copy, "GBps": 2 * copy_bytes / copy / 1e9}
    print(f"device-to-device copy of {copy_bytes / 2**20:.0f} MiB: {copy * 1e3:.3f} ms, "
          f"{2 * copy_bytes / copy / 1e9:.0f} GB/s read + written")
    print(f"{'workload':<32} {'graphopt':>10} {'GB/s':>6} {'PyTorch':>10} {'PyTorch/graphopt':>17} {'max |error|':>11}")
    for name, text, inputs, kind in workloads:
        try:
            row = kernel_row(name, text, inputs, repeat, torch[kind] if torch else None)
        except GraphoptError as error:
            print(f"{name:<32} failed: {error}")
            continue
        results["kernels"].append(row)
        theirs = (f"{row['torch_s'] * 1e3:8.3f} ms {row['torch_s'] / row['graphopt_s']:16.2f}x" if "torch_s" in row
                  else f"{'no PyTorch with CUDA here':>28}")
        print(f"{name:<32} {row['graphopt_s'] * 1e3:7.3f} ms {row['graphopt_GBps']:6.0f} {theirs} {row['max_abs_error']:11.2e}")
    chain = results["kernels"][0]
    if not chain["workload"].startswith("chain"):
        sys.exit("gpu.py: the chain failed, so there is no bandwidth to compare with the copy's")
    share = chain["graphopt_GBps"] / results["copy"]["GBps"]
    results["chain_share_of_copy"] = share
    print(f"chain: {share:.0%} of the copy's bandwidth (goal {COPY_GOAL:.0%}): {'met' if share >= COPY_GOAL else 'NOT met'}")

    mnist = mnist_rows(repeat)
    results["mnist"] = mnist
    print(f"MNIST CNN batch 1, wall time per call (copies included); the cost search took {mnist['search_seconds']:.1f} s")
    cpu = mnist["seconds"]["cpu"]
    for name, seconds in mnist["seconds"].items():
        where = ", ".join(f"{step}: {backend}" for step, backend in mnist["placement"][name])
        print(f"  {name:<22} {seconds * 1e6:8.1f} us  ({cpu / seconds:.2f}x cpu's speed)  {where}")
    write_json(options.json, results)


if __name__ == "__main__":
    main()
