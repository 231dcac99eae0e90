"""f32 exp, log and sigmoid over 2^22 elements: a JIT-compiled linalg.generic vs NumPy, same run.

    python benchmarks/jit_math.py [--repeats 30]

Outputs are preallocated for both sides; prints medians, ratios and the largest relative
error of each kernel against NumPy in float64.
"""

import argparse

import numpy as np
from timing import median_seconds
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.runtime.jit import compile_kernel

N = 2**22

BODIES = {
    "exp": "%r = math.exp %x : f32",
    "log": "%r = math.log %x : f32",
    "sigmoid": """%n = arith.negf %x : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %r = arith.divf %one, %d : f32""",
}


def kernel_text(body: str) -> str:
    return f"""
#id = affine_map<(d0) -> (d0)>
func.func @kernel(%in: memref<{N}xf32>, %out: memref<{N}xf32>) {{
  linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%in : memref<{N}xf32>) outs(%out : memref<{N}xf32>) {{
  ^bb0(%x: f32, %o: f32):
    {body}
    linalg.yield %r : f32
  }}
  func.return
}}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    repeats = parser.parse_args().repeats

    rng = np.random.default_rng(0)
    inputs = {
        "exp": aligned_array(rng.uniform(-80, 80, N).astype(np.float32)),
        "log": aligned_array(rng.uniform(1e-6, 1e6, N).astype(np.float32)),
        "sigmoid": aligned_array(rng.uniform(-20, 20, N).astype(np.float32)),
    }
    scratch = aligned_empty(N)

    def numpy_sigmoid(x, out):
        np.negative(x, out=scratch)
        np.exp(scratch, out=scratch)
        np.add(scratch, 1, out=scratch)
        np.divide(1, scratch, out=out)

    numpy_versions = {"exp": lambda x, out: np.exp(x, out=out), "log": lambda x, out: np.log(x, out=out), "sigmoid": numpy_sigmoid}

    print(f"f32 math over 2^22 elements, median of {repeats}")
    for name, body in BODIES.items():
        compare(name, compile_kernel(kernel_text(body)), numpy_versions[name], inputs[name], repeats)


def compare(name: str, kernel, numpy_version, x: np.ndarray, repeats: int) -> None:
    """Print the kernel's and NumPy's median times on `x` and the kernel's largest relative error."""
    out, expected = aligned_empty(N), aligned_empty(N)
    kernel(x, out)
    numpy_version(x, expected)
    error = np.max(np.abs(out.astype(np.float64) - expected) / np.maximum(np.abs(expected.astype(np.float64)), 1e-37))
    jit_ms = median_seconds(lambda: kernel(x, out), repeats) * 1e3
    numpy_ms = median_seconds(lambda: numpy_version(x, expected), repeats) * 1e3
    print(f"  {name:8} JIT {jit_ms:6.2f} ms   NumPy {numpy_ms:6.2f} ms   NumPy / JIT = {numpy_ms / jit_ms:5.2f}"
          f"   max rel. error vs NumPy {error:.1e}")

if __name__ == "__main__":
    main()
