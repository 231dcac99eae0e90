"""relu(x*w+b)*0.5+x over 2^24 f32: one JIT-compiled linalg.generic vs NumPy op by op vs a copy.

    python benchmarks/jit_elementwise.py [--repeats 30]

All three are measured in the same run, on preallocated outputs; prints medians and ratios.
"""

import argparse
import time

import numpy as np
from timing import median_seconds
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.runtime.jit import compile_kernel

N = 2**24

KERNEL = f"""
#id = affine_map<(d0) -> (d0)>
func.func @fused_chain(%x: memref<{N}xf32>, %w: memref<{N}xf32>, %b: memref<{N}xf32>, %out: memref<{N}xf32>) {{
  linalg.generic {{indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}}
      ins(%x, %w, %b : memref<{N}xf32>, memref<{N}xf32>, memref<{N}xf32>) outs(%out : memref<{N}xf32>) {{
  ^bb0(%xv: f32, %wv: f32, %bv: f32, %o: f32):
    %p = arith.mulf %xv, %wv : f32
    %s = arith.addf %p, %bv : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %zero : f32
    %half = arith.constant 0.5 : f32
    %h = arith.mulf %r, %half : f32
    %y = arith.addf %h, %xv : f32
    linalg.yield %y : f32
  }}
  func.return
}}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    repeats = parser.parse_args().repeats

    rng = np.random.default_rng(0)
    x, w, b = (aligned_array(rng.standard_normal(N, dtype=np.float32)) for _ in range(3))
    out, scratch = aligned_empty(N), aligned_empty(N)

    start = time.perf_counter()
    kernel = compile_kernel(KERNEL)
    compile_ms = (time.perf_counter() - start) * 1e3

    def numpy_op_by_op():
        np.multiply(x, w, out=scratch)
        np.add(scratch, b, out=scratch)
        np.maximum(scratch, 0, out=scratch)
        np.multiply(scratch, 0.5, out=scratch)
        np.add(scratch, x, out=out)

    kernel(x, w, b, out)
    numpy_op_by_op()
    np.testing.assert_allclose(out, np.maximum(x * w + b, 0) * 0.5 + x, rtol=1e-6)

    jit_ms = median_seconds(lambda: kernel(x, w, b, out), repeats) * 1e3
    numpy_ms = median_seconds(numpy_op_by_op, repeats) * 1e3
    copy_ms = median_seconds(lambda: np.copyto(out, x), repeats) * 1e3
    print(f"relu(x*w+b)*0.5+x, 2^24 f32, median of {repeats} (compile {compile_ms:.0f} ms)")
    print(f"  JIT kernel          {jit_ms:7.2f} ms")
    print(f"  NumPy op by op      {numpy_ms:7.2f} ms   JIT is {numpy_ms / jit_ms:.2f}x faster")
    print(f"  copy (np.copyto)    {copy_ms:7.2f} ms   JIT / copy = {jit_ms / copy_ms:.2f}")
    kernel_bytes, copy_bytes = 4 * N * 4, 2 * N * 4  # kernel: 3 reads + 1 write; copy: 1 read + 1 write
    print(f"  bandwidth: JIT {kernel_bytes / jit_ms / 1e6:.1f} GB/s, copy {copy_bytes / copy_ms / 1e6:.1f} GB/s")


if __name__ == "__main__":
    main()
