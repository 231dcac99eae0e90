"""CPU code generation against NumPy, measured side by side in one process per thread count.

    python benchmarks/cpu_codegen.py [--repeat 20] [--threads 1,2]

For each thread count, a child process (OPENBLAS_NUM_THREADS and GRAPHOPT_THREADS set to it)
prints one table: median time of each workload for graphopt (fused, and unfused: one kernel
per op), NumPy op by op, PyTorch eager when it is installed, and a floor, with ratios; then
compile times. Results are written
into preallocated arrays (`exe(..., out=...)`) so that page faults of fresh outputs are not
what is measured. The floor of the elementwise chain is a copy moving the same bytes
(2 x 64 MiB read, 2 x 64 MiB written), split over the same number of threads.
"""

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from timing import median_seconds

import graphopt
from graphopt.builder import GraphBuilder

try:
    import torch
except ImportError:
    torch = None

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def chain_module(n: int):
    b = GraphBuilder()
    x, w, bias = b.input("x", (n,)), b.input("w", (n,)), b.input("b", (n,))
    y = b.add(b.mul(b.relu(b.add(b.mul(x, w), bias)), b.constant(np.float32(0.5))), x)
    return b.finish(y)


def softmax_module(rows: int, cols: int):
    b = GraphBuilder()
    return b.finish(b.softmax(b.input("x", (rows, cols)), axis=-1))


def layer_norm_module(rows: int, cols: int):
    b = GraphBuilder()
    x, scale, bias = b.input("x", (rows, cols)), b.input("scale", (cols,)), b.input("bias", (cols,))
    return b.finish(b.layer_norm(x, scale, bias, axis=-1))


def mlp_module(m: int, k: int, n: int):
    b = GraphBuilder()
    x, w, bias = b.input("x", (m, k)), b.input("w", (k, n)), b.input("b", (n,))
    return b.finish(b.relu(b.add(b.matmul(x, w), bias)))


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_layer_norm(x, scale, bias):
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * scale + bias


def parallel_copy(target: np.ndarray, source: np.ndarray, pool: ThreadPoolExecutor, threads: int) -> None:
    """np.copyto in `threads` slices at once (NumPy releases the GIL while copying)."""
    bounds = np.linspace(0, len(source), threads + 1).astype(int)
    for future in [pool.submit(np.copyto, target[a:b], source[a:b]) for a, b in zip(bounds, bounds[1:])]:
        future.result()


def workloads(rng, threads: int):
    """(name, module, inputs, NumPy function, PyTorch function or None, floor function or None, flops or None)."""
    t = (lambda *arrays: [torch.from_numpy(a) for a in arrays]) if torch else None
    n = 1 << 24
    x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    source, target = rng.standard_normal(2 * n).astype(np.float32), np.empty(2 * n, np.float32)
    pool = ThreadPoolExecutor(threads)
    tx, tw, tb = t(x, w, b) if t else (None,) * 3
    yield ("relu(x*w+b)*0.5+x, 2^24", chain_module(n), (x, w, b),
           lambda: np.maximum(x * w + b, 0) * np.float32(0.5) + x,
           t and (lambda: torch.relu(tx * tw + tb) * 0.5 + tx),
           lambda: parallel_copy(target, source, pool, threads), None)
    rows = rng.standard_normal((4096, 1024)).astype(np.float32)
    scale, bias = rng.standard_normal(1024).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    trows, tscale, tbias = t(rows, scale, bias) if t else (None,) * 3
    yield ("softmax 4096x1024", softmax_module(4096, 1024), (rows,), lambda: numpy_softmax(rows),
           t and (lambda: torch.softmax(trows, dim=-1)), None, None)
    yield ("layer_norm 4096x1024", layer_norm_module(4096, 1024), (rows, scale, bias),
           lambda: numpy_layer_norm(rows, scale, bias),
           t and (lambda: torch.nn.functional.layer_norm(trows, (1024,), tscale, tbias)), None, None)
    a, weights = rng.standard_normal((256, 1024)).astype(np.float32), rng.standard_normal((1024, 1024)).astype(np.float32)
    ta, tweights = t(a, weights) if t else (None,) * 2
    yield ("relu(x@W+b) 256x1024x1024", mlp_module(256, 1024, 1024), (a, weights, scale),
           lambda: np.maximum(a @ weights + scale, 0),
           t and (lambda: torch.relu(ta @ tweights + tscale)), None, 2 * 256 * 1024 * 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, one table each")
    args = parser.parse_args()
    if "GRAPHOPT_BENCHMARK_CHILD" in os.environ:
        measure(args.repeat, int(os.environ["GRAPHOPT_THREADS"]))
        return
    for threads in args.threads.split(","):
        env = dict(os.environ, GRAPHOPT_BENCHMARK_CHILD="1", GRAPHOPT_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
        print(f"== {threads} thread(s) ==", flush=True)
        subprocess.run([sys.executable, __file__, "--repeat", str(args.repeat)], env=env, check=True)


def measure(repeat: int, threads: int) -> None:
    rng = np.random.default_rng(0)
    if torch:
        torch.set_num_threads(threads)
    print(f"{'workload':<28} {'fused':>9} {'unfused':>9} {'NumPy':>9} {'PyTorch':>9} {'floor':>9} "
          f"{'NumPy/fused':>12} {'torch/fused':>12} {'fused/floor':>12}")
    for name, module, inputs, numpy_function, torch_function, floor_function, flops in workloads(rng, threads):
        fused, unfused = graphopt.compile(module), graphopt.compile(module, fuse=False)
        outputs = tuple(np.empty(v.type.get_shape(), np.float32) for v in fused.results)
        t_fused = median_seconds(lambda: fused(*inputs, out=outputs), repeat)
        t_unfused = median_seconds(lambda: unfused(*inputs, out=outputs), repeat)
        t_numpy = median_seconds(numpy_function, repeat)
        t_torch = median_seconds(torch_function, repeat) if torch_function else float("nan")
        t_floor = median_seconds(floor_function, repeat) if floor_function else float("nan")
        line = f"{name:<28} {t_fused * 1e3:>7.2f}ms {t_unfused * 1e3:>7.2f}ms {t_numpy * 1e3:>7.2f}ms "
        line += f"{t_torch * 1e3:>7.2f}ms {t_floor * 1e3:>7.2f}ms {t_numpy / t_fused:>11.2f}x "
        line += f"{t_torch / t_fused:>11.2f}x {t_fused / t_floor:>11.2f}x"
        if flops:
            line += f"   {flops / t_fused / 1e9:.1f} vs NumPy {flops / t_numpy / 1e9:.1f} GFLOP/s"
        print(line)

    print("\ncompile (fuse + lower + JIT), warm process:")
    for n in (1 << 20) + 1, (1 << 20) + 3:  # fresh shapes: no kernel cache hit
        start = time.perf_counter()
        graphopt.compile(chain_module(n))
        print(f"  one elementwise kernel: {(time.perf_counter() - start) * 1e3:.0f} ms")
    for path in sorted(EXAMPLES.glob("*.mlir")):
        module = graphopt.parse(path)
        start = time.perf_counter()
        exe = graphopt.compile(module)
        kernels = sum(step.backend == "cpu" for step in exe.steps)
        print(f"  {path.name:<24} {(time.perf_counter() - start) * 1e3:6.0f} ms, {kernels} kernels, "
              f"{len(exe.steps) - kernels} reference steps")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
