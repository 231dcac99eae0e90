"""The packed GEMM ukernel (lowering/packed_gemm.py) against NumPy's matmul (OpenBLAS), one thread.

    python benchmarks/packed_gemm.py [--seconds 1.0]

For each shape, x (m x k) @ W (k x n) with W a constant: graphopt.compile(backends=("cpu",))
runs it as one kernel calling the ukernel on W's panels (packed at compile time); NumPy runs
np.matmul(x, W, out=...), which packs W at every call. The ukernel's time includes the Executable's dispatch (about 6 us a call).
The two run in alternating blocks of calls
(benchmarks/timing.py); prints medians, GFLOP/s and NumPy / ukernel. Results are checked
against NumPy.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import numpy as np

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.runtime.arrays import aligned_array, aligned_empty

from timing import checked_rates, main_over_shapes

SHAPES = [
    (128, 768, 3072),  # the GELU MLP block's first GEMM
    (128, 3072, 768),  # its second
    (256, 1024, 1024),  # the MLP
    (2048, 1024, 1000),
    (64, 256, 10),  # the MNIST CNN's classifier at batch 64
    (1, 1024, 1024),  # one row
]


def compare(m: int, k: int, n: int, seconds: float) -> str:
    rng = np.random.default_rng(0)
    x = aligned_array(rng.standard_normal((m, k)).astype(np.float32))
    w = rng.standard_normal((k, n)).astype(np.float32)
    g = GraphBuilder()
    executable = graphopt.compile(g.finish(g.matmul(g.input("x", (m, k)), g.constant(w))), backends=("cpu",), threads=1)
    outputs = {side: aligned_empty((m, n), np.float32) for side in ("ukernel", "numpy")}
    calls = {
        "ukernel": lambda: executable(x, out=[outputs["ukernel"]]),
        "numpy": lambda: np.matmul(x, w, out=outputs["numpy"]),
    }
    return f"{m:5d} x {k:5d} x {n:5d}  " + checked_rates(calls, outputs, 2 * m * k * n, seconds)


if __name__ == "__main__":
    main_over_shapes(__doc__.splitlines()[0], f"{'m x k x n':23s}  {'ukernel':>24s}  {'NumPy (OpenBLAS)':>24s}  NumPy / ukernel", SHAPES, compare)
