"""Hand-written kernels lowered to the llvm dialect, JIT-compiled and compared with NumPy."""

import math

import numpy as np
import pytest
from graphopt.lowering.llvm_module import optimized_llvm_ir
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.runtime.jit import CallSequence, KernelArgumentError, NativeCall, compile_kernel, compile_module

rng = np.random.default_rng(0)
F32 = {"rtol": 1e-5, "atol": 1e-6}
F32_REDUCE = {"rtol": 1e-4, "atol": 1e-5}
SIZES = [1, 3, 7, 1023, 1025]
MLIR_TYPES = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64", np.bool_: "i1"}


def elementwise_kernel(n: int, inputs: list, output, body: str) -> str:
    """A 1-D linalg.generic kernel over n elements: `body` reads %x0, %x1, ... and defines %r."""
    types = [f"memref<{n}x{MLIR_TYPES[t]}>" for t in [*inputs, output]]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    ins = ", ".join(f"%a{i}" for i in range(len(inputs)))
    block_args = ", ".join(f"%x{i}: {MLIR_TYPES[t]}" for i, t in enumerate([*inputs, output]))
    maps = ", ".join(["affine_map<(d0) -> (d0)>"] * len(types))
    return f"""
func.func @kernel({args}) {{
  linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({ins} : {", ".join(types[:-1])}) outs(%a{len(inputs)} : {types[-1]}) {{
  ^bb0({block_args}):
{body}
    linalg.yield %r : {MLIR_TYPES[output]}
  }}
  func.return
}}"""


def run_elementwise(body: str, *arrays: np.ndarray, output=np.float32) -> np.ndarray:
    kernel = compile_kernel(elementwise_kernel(arrays[0].size, [a.dtype.type for a in arrays], output, body))
    result = aligned_empty(arrays[0].shape, output)
    kernel(*map(aligned_array, arrays), result)
    return result


def special_values(n: int, dtype=np.float32) -> np.ndarray:
    """n values in [-6, 6] with NaN, ±inf, ±0 and tiny values mixed in where n allows."""
    values = rng.uniform(-6, 6, n).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -3e-4, 20.0], dtype)
    values[: min(n, len(specials))] = specials[: min(n, len(specials))]
    return rng.permutation(values)


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (7, 1025), (2, 1023)])
def test_broadcasting_add_relu(rows, cols):
    kernel = compile_kernel(f"""
#row = affine_map<(d0, d1) -> (d1)>
#col = affine_map<(d0, d1) -> (d0, 0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @fused_add_relu_0(%a: memref<{rows}x{cols}xf32>, %b: memref<{cols}xf32>, %c: memref<{rows}x1xf32>,
                            %out: memref<{rows}x{cols}xf32>) attributes {{graph.kernel}} {{
  linalg.generic {{indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b, %c : memref<{rows}x{cols}xf32>, memref<{cols}xf32>, memref<{rows}x1xf32>) outs(%out : memref<{rows}x{cols}xf32>) {{
  ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.mulf %s, %z : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %t, %zero : f32
    linalg.yield %r : f32
  }}
  func.return
}}""")
    a, b, c = rng.standard_normal((rows, cols), np.float32), rng.standard_normal(cols, np.float32), rng.standard_normal((rows, 1), np.float32)
    out = aligned_empty((rows, cols))
    kernel(aligned_array(a), aligned_array(b), aligned_array(c), out)
    np.testing.assert_allclose(out, np.maximum((a + b) * c, 0), **F32)


UNARY_F32 = {
    "exp": (np.exp, -80, 80),
    "log": (np.log, 1e-3, 1e6),
    "tanh": (np.tanh, -12, 12),
    "erf": (np.vectorize(math.erf), -6, 6),
    "sin": (np.sin, -10, 10),
    "cos": (np.cos, -10, 10),
    "sqrt": (np.sqrt, 0, 1e4),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 1e-3, 1e4),
    "absf": (np.abs, -5, 5),
    "floor": (np.floor, -5, 5),
    "ceil": (np.ceil, -5, 5),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY_F32)
@pytest.mark.parametrize("n", [7, 1025])
def test_math_function(name, dtype, n):
    reference, low, high = UNARY_F32[name]
    x = rng.uniform(low, high, n).astype(dtype)
    if n > 8:
        x[:3] = [np.nan, np.inf, -np.inf] if name not in ("log", "sqrt", "rsqrt") else [np.nan, np.inf, 0.0]
    t = MLIR_TYPES[dtype]
    result = run_elementwise(f"    %r = math.{name} %x0 : {t}", x, output=dtype)
    with np.errstate(all="ignore"):
        expected = reference(x.astype(np.float64)).astype(dtype)
    tolerance = F32 if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-15}
    np.testing.assert_allclose(result, expected, **tolerance)


@pytest.mark.parametrize("n", SIZES)
def test_exp_tanh_erf_chain(n):
    x = special_values(n)
    body = """
    %e = math.exp %x0 : f32
    %t = math.tanh %e : f32
    %h = arith.constant 0.5 : f32
    %m = arith.mulf %x0, %h : f32
    %f = math.erf %m : f32
    %r = arith.addf %t, %f : f32"""
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        expected = np.tanh(np.exp(x64)) + np.vectorize(math.erf)(x64 * 0.5)
    np.testing.assert_allclose(run_elementwise(body, x), expected.astype(np.float32), **F32)


def test_tanh_and_erf_accuracy_f32_dense():
    """The inline rational approximations against float64 on a dense grid, relative error < 1e-6."""
    x = np.concatenate([np.linspace(-9, 9, 200001), np.geomspace(1e-30, 1e-2, 1001)]).astype(np.float32)
    x64 = x.astype(np.float64)
    for name, reference in [("tanh", np.tanh(x64)), ("erf", np.vectorize(math.erf)(x64))]:
        result = run_elementwise(f"    %r = math.{name} %x0 : f32", x).astype(np.float64)
        assert np.max(np.abs(result - reference) / np.maximum(np.abs(reference), 1e-30)) < 1e-6, name


EXP_LOG_GRIDS = {
    "exp": [np.linspace(-110, 95, 400001), np.geomspace(1e-45, 1e-2, 2001), -np.geomspace(1e-45, 1e-2, 2001)],
    "log": [np.geomspace(1e-45, 3.4e38, 400001), np.linspace(0.5, 2, 100001)],
}


@pytest.mark.parametrize("name", EXP_LOG_GRIDS)
def test_exp_and_log_accuracy_f32_dense(name):
    """The inline exp/log against float64 on dense grids: relative error < 1e-6 for normal results,
    within 1 ulp for subnormal ones, overflow to inf where the float32 result overflows."""
    x = np.concatenate(EXP_LOG_GRIDS[name]).astype(np.float32)
    result = run_elementwise(f"    %r = math.{name} %x0 : f32", x).astype(np.float64)
    reference = getattr(np, name)(x.astype(np.float64))
    largest, smallest_normal = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)
    normal = (np.abs(reference) >= smallest_normal) & (np.abs(reference) <= largest)
    assert np.max(np.abs(result - reference)[normal] / np.abs(reference[normal])) < 1e-6
    assert np.max(np.abs(result - reference)[np.abs(reference) < smallest_normal], initial=0) <= 2.0**-149
    np.testing.assert_array_equal(np.isinf(result), np.abs(reference) > largest * (1 + 2**-24))


def test_exp_and_log_special_values_like_numpy():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -1e-40, 1e-45, 1e-40, 1.0, 88.72283, 88.7229,
                  -87.33, -103.97, -103.98, 3.4028235e38, -3.4028235e38], np.float32)
    for name in ("exp", "log"):
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(x)
        np.testing.assert_allclose(run_elementwise(f"    %r = math.{name} %x0 : f32", x), expected, rtol=1e-6, atol=0)


POW_BASES = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, -2.0, 0.5, -0.5, 3.7, -3.7, 1e-30, 1e30, 1e-40,
             -1e-40, 1.0000001, 0.9999999, 7.0, 123.456]
POW_EXPONENTS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 0.75, -0.75, np.inf, -np.inf, np.nan, 2.5,
                 1e10, -1e10, 17.0, 1 / 3, 1e-8, 2.0**24 + 2, 31.0]


def test_pow_f32_inline_like_numpy():
    """Every pair of special bases and exponents as NumPy's powf gives it (signs of zeros and
    infinities, NaN, 1 for pow(NaN, 0) and pow(1, NaN)), finite results to 1e-5; the loop
    vectorizes (no powf call)."""
    x, y = (np.array(v, np.float32).ravel() for v in np.meshgrid(POW_BASES, POW_EXPONENTS))
    body = "    %r = math.powf %x0, %x1 : f32"
    ir = optimized_llvm_ir(elementwise_kernel(x.size, [np.float32, np.float32], np.float32, body))
    assert "powf" not in ir and "@llvm.pow" not in ir
    result = run_elementwise(body, x, y)
    with np.errstate(all="ignore"):
        expected = np.power(x, y)
    numbers = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(result)[numbers], np.signbit(expected)[numbers])
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=0)
    x, y = rng.uniform(0, 30, 100001).astype(np.float32), rng.uniform(-25, 25, 100001).astype(np.float32)
    expected = np.power(x.astype(np.float64), y.astype(np.float64))
    normal = (expected > np.finfo(np.float32).tiny) & (expected < np.finfo(np.float32).max)
    result = run_elementwise(body, x, y).astype(np.float64)
    assert np.max(np.abs(result - expected)[normal] / expected[normal]) < 1e-5


def test_sigmoid_and_softmax_exp_is_inline_and_vectorized():
    body = """
    %n = arith.negf %x0 : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %r = arith.divf %one, %d : f32"""
    ir = optimized_llvm_ir(elementwise_kernel(4096, [np.float32], np.float32, body))
    assert "<16 x float>" in ir or "<8 x float>" in ir
    assert "@llvm.exp" not in ir and "expf" not in ir
    x = special_values(1025)
    with np.errstate(all="ignore"):
        expected = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(run_elementwise(body, x), expected.astype(np.float32), **F32)


def row_sum_kernel(rows: int, cols: int, fastmath: str) -> str:
    return f"""
func.func @row_sum(%x: memref<{rows}x{cols}xf32>, %sum: memref<{rows}xf32>) {{
  linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}}
      ins(%x : memref<{rows}x{cols}xf32>) outs(%sum : memref<{rows}xf32>) {{
  ^bb0(%v: f32, %s: f32):
    %s2 = arith.addf %s, %v {fastmath}: f32
    linalg.yield %s2 : f32
  }}
  func.return
}}"""


def test_reassoc_reduction_vectorizes_and_plain_one_stays_scalar():
    reassociable = optimized_llvm_ir(row_sum_kernel(8, 1024, "fastmath<reassoc,contract> "))
    assert "<16 x float>" in reassociable or "<8 x float>" in reassociable
    assert "llvm.vector.reduce.fadd" in reassociable and "fadd reassoc contract" in reassociable
    in_order = optimized_llvm_ir(row_sum_kernel(8, 1024, ""))
    assert " x float>" not in in_order and "vector.reduce" not in in_order


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (5, 1025)])
def test_reassoc_row_sum(rows, cols):
    kernel = compile_kernel(row_sum_kernel(rows, cols, "fastmath<reassoc> "))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    total = aligned_array(np.zeros(rows, np.float32))
    kernel(aligned_array(x), total)
    np.testing.assert_allclose(total, x.sum(axis=1), **F32_REDUCE)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_floordivsi_rounds_toward_minus_infinity_like_python(dtype):
    limits = np.iinfo(dtype)
    a = np.concatenate([rng.integers(-1000, 1000, 512), [0, 7, -7, 7, -7, limits.min, limits.max, limits.min, limits.max]]).astype(dtype)
    b = np.concatenate([rng.integers(1, 50, 512) * rng.choice([-1, 1], 512), [5, 2, 2, -2, -2, 3, -3, 1, 1]]).astype(dtype)
    result = run_elementwise(f"    %r = arith.floordivsi %x0, %x1 : {MLIR_TYPES[dtype]}", a, b, output=dtype)
    np.testing.assert_array_equal(result, [int(p) // int(q) for p, q in zip(a, b)])


@pytest.mark.parametrize("n", SIZES)
def test_maximumf_minimumf_propagate_nan_like_numpy(n):
    x, y = special_values(n), special_values(n)
    body = """
    %mx = arith.maximumf %x0, %x1 : f32
    %mn = arith.minimumf %x0, %x1 : f32
    %r = arith.subf %mx, %mn : f32"""
    with np.errstate(all="ignore"):
        expected = np.maximum(x, y) - np.minimum(x, y)
    np.testing.assert_allclose(run_elementwise(body, x, y), expected, **F32)


CMPF = {
    "oeq": np.equal, "ogt": np.greater, "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal,
    "one": np.not_equal, "ord": lambda x, y: np.ones_like(x, bool), "ueq": np.equal, "ugt": np.greater,
    "uge": np.greater_equal, "ult": np.less, "ule": np.less_equal, "une": np.not_equal,
    "uno": lambda x, y: np.zeros_like(x, bool), "false": lambda x, y: np.zeros_like(x, bool),
    "true": lambda x, y: np.ones_like(x, bool),
}


@pytest.mark.parametrize("predicate", CMPF)
def test_cmpf_select_with_nan(predicate):
    x, y = special_values(64), special_values(64)
    y[::3] = x[::3]
    body = f"    %c = arith.cmpf {predicate}, %x0, %x1 : f32\n    %r = arith.select %c, %x0, %x1 : f32"
    unordered = np.isnan(x) | np.isnan(y)
    holds = CMPF[predicate](x, y)
    if predicate[0] == "u":
        holds = holds | unordered
    elif predicate[0] == "o":
        holds = holds & ~unordered
    np.testing.assert_array_equal(run_elementwise(body, x, y), np.where(holds, x, y))
    np.testing.assert_array_equal(run_elementwise(f"    %r = arith.cmpf {predicate}, %x0, %x1 : f32", x, y, output=np.bool_), holds)


@pytest.mark.parametrize("n", SIZES)
def test_i32_kernel(n):
    a = rng.integers(-1000, 1000, n).astype(np.int32)
    b = rng.integers(1, 50, n).astype(np.int32)
    body = """
    %p = arith.muli %x0, %x1 : i32
    %q = arith.divsi %x0, %x1 : i32
    %m = arith.remsi %x0, %x1 : i32
    %s = arith.subi %p, %m : i32
    %c = arith.cmpi slt, %x0, %x1 : i32
    %v = arith.select %c, %s, %q : i32
    %k = arith.constant 3 : i32
    %w = arith.shli %v, %k : i32
    %r = arith.maxsi %w, %x1 : i32"""
    quotient = np.trunc(a / b).astype(np.int32)
    expected = np.maximum(np.where(a < b, a * b - (a - quotient * b), quotient) << 3, b)
    np.testing.assert_array_equal(run_elementwise(body, a, b, output=np.int32), expected)


def test_casts():
    x = rng.uniform(-1e4, 1e4, 64).astype(np.float32)
    i = rng.integers(-(2**31), 2**31 - 1, 64).astype(np.int32)
    body = """
    %xi = arith.fptosi %x0 : f32 to i32
    %wide = arith.extsi %xi : i32 to i64
    %iw = arith.extsi %x1 : i32 to i64
    %s = arith.addi %wide, %iw : i64
    %idx = arith.index_cast %s : i64 to index
    %back = arith.index_cast %idx : index to i64
    %f = arith.sitofp %back : i64 to f64
    %d = arith.extf %x0 : f32 to f64
    %sum = arith.addf %f, %d : f64
    %pos = arith.cmpf ogt, %x0, %x0 : f32
    %one = arith.uitofp %pos : i1 to f64
    %r = arith.addf %sum, %one : f64"""
    expected = (np.trunc(x).astype(np.int64) + i.astype(np.int64)).astype(np.float64) + x.astype(np.float64)
    np.testing.assert_array_equal(run_elementwise(body, x, i, output=np.float64), expected)
    narrow = "    %t = arith.trunci %x0 : i64 to i32\n    %h = arith.truncf %x1 : f64 to f32\n    %r = arith.sitofp %t : i32 to f32"
    big = rng.integers(-(2**40), 2**40, 64)
    np.testing.assert_array_equal(
        run_elementwise(narrow, big, x.astype(np.float64)), big.astype(np.int32).astype(np.float32)
    )


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (7, 1023), (5, 1025)])
def test_row_reduction(rows, cols):
    kernel = compile_kernel(f"""
func.func @row_sum_max(%x: memref<{rows}x{cols}xf32>, %sum: memref<{rows}xf32>, %max: memref<{rows}xf32>) {{
  linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}}
      ins(%x : memref<{rows}x{cols}xf32>) outs(%sum, %max : memref<{rows}xf32>, memref<{rows}xf32>) {{
  ^bb0(%v: f32, %s: f32, %m: f32):
    %s2 = arith.addf %s, %v : f32
    %m2 = arith.maximumf %m, %v : f32
    linalg.yield %s2, %m2 : f32, f32
  }}
  func.return
}}""")
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[0, 0] = np.nan if cols > 3 else x[0, 0]
    total, largest = aligned_array(np.zeros(rows, np.float32)), aligned_array(np.full(rows, -np.inf, np.float32))
    kernel(aligned_array(x), total, largest)
    np.testing.assert_allclose(total, x.sum(axis=1), **F32_REDUCE)
    np.testing.assert_array_equal(largest, x.max(axis=1))


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (4, 1025)])
def test_softmax_with_scf_loops_and_alloca_row_buffer(rows, cols):
    kernel = compile_kernel(f"""
func.func @softmax(%x: memref<{rows}x{cols}xf32>, %out: memref<{rows}x{cols}xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant {rows} : index
  %cols = arith.constant {cols} : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %rows step %c1 {{
    %buffer = memref.alloca() : memref<{cols}xf32>
    %m = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %ninf) -> (f32) {{
      %v = memref.load %x[%i, %j] : memref<{rows}x{cols}xf32>
      %n = arith.maximumf %acc, %v : f32
      scf.yield %n : f32
    }}
    %s = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %zero) -> (f32) {{
      %v = memref.load %x[%i, %j] : memref<{rows}x{cols}xf32>
      %d = arith.subf %v, %m : f32
      %e = math.exp %d : f32
      memref.store %e, %buffer[%j] : memref<{cols}xf32>
      %n = arith.addf %acc, %e : f32
      scf.yield %n : f32
    }}
    scf.for %j = %c0 to %cols step %c1 {{
      %e = memref.load %buffer[%j] : memref<{cols}xf32>
      %q = arith.divf %e, %s : f32
      memref.store %q, %out[%i, %j] : memref<{rows}x{cols}xf32>
    }}
  }}
  func.return
}}""")
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 4
    out = aligned_empty((rows, cols))
    kernel(aligned_array(x), out)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), **F32_REDUCE)


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (3, 5, 7), (17, 33, 9)])
def test_matmul(m, k, n):
    kernel = compile_kernel(f"""
func.func @matmul(%a: memref<{m}x{k}xf32>, %b: memref<{k}x{n}xf32>, %c: memref<{m}x{n}xf32>) {{
  linalg.matmul ins(%a, %b : memref<{m}x{k}xf32>, memref<{k}x{n}xf32>) outs(%c : memref<{m}x{n}xf32>)
  func.return
}}""")
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = aligned_array(np.zeros((m, n), np.float32))
    kernel(aligned_array(a), aligned_array(b), c)
    np.testing.assert_allclose(c, a @ b, **F32_REDUCE)


THREE_ARRAY_KERNEL = elementwise_kernel(
    4096,
    [np.float32, np.float32, np.float32],
    np.float32,
    "    %p = arith.mulf %x0, %x1 : f32\n    %r = arith.addf %p, %x2 : f32",
)


def test_identical_kernel_compiles_once():
    first = compile_module(THREE_ARRAY_KERNEL)
    assert compile_module(THREE_ARRAY_KERNEL) is first
    assert compile_module("// the same kernel, spelled differently\n" + THREE_ARRAY_KERNEL.replace("  ", " ")) is first
    assert compile_module(THREE_ARRAY_KERNEL, alignment=0) is not first


def test_elementwise_loop_is_vectorized():
    ir = optimized_llvm_ir(THREE_ARRAY_KERNEL)
    assert "<16 x float>" in ir or "<8 x float>" in ir
    assert "inttoptr" not in ir


@pytest.mark.parametrize("n", SIZES)
def test_i1_masks_load_and_store_as_bytes_and_vectorize(n):
    """A bool mask selects (an attention mask) and a comparison is stored as bool: the i1
    elements move as bytes (one per NumPy bool), so the loop loads <N x i8> vectors."""
    mask = rng.integers(0, 2, n).astype(np.bool_)
    x = special_values(n)
    select = "    %m = arith.constant -1.0e4 : f32\n    %r = arith.select %x0, %m, %x1 : f32"
    np.testing.assert_array_equal(run_elementwise(select, mask, x), np.where(mask, np.float32(-1e4), x))
    flip = "    %t = arith.constant true\n    %r = arith.xori %x0, %t : i1"
    np.testing.assert_array_equal(run_elementwise(flip, mask, output=np.bool_), ~mask)
    ir = optimized_llvm_ir(elementwise_kernel(1024, [np.bool_, np.float32], np.float32, select))
    assert "load <16 x i8>" in ir or "load <8 x i8>" in ir
    assert "load i1" not in ir


def test_call_sequence_calls_kernels_in_order_on_table_and_fixed_addresses():
    kernel = compile_kernel(THREE_ARRAY_KERNEL)
    x, y, z, t, u = (aligned_array(rng.standard_normal(4096).astype(np.float32)) for _ in range(5))
    fixed = aligned_array(np.full(4096, 2.0, np.float32))
    table = np.array([a.ctypes.data for a in (x, y, z, t, u)], np.int64)
    # t = x * y + z, then u = t * 2 + x: the second call reads what the first wrote
    run = CallSequence([NativeCall(kernel.address, (0, 1, 2, 3)), NativeCall(kernel.address, (3, (fixed.ctypes.data,), 0, 4))])
    run.function(table.ctypes.data)
    np.testing.assert_allclose(t, x * y + z, **F32)
    np.testing.assert_allclose(u, (x * y + z) * 2 + x, **F32)
    assert run.llvm_ir.count("call void") == 2


def test_argument_checks():
    kernel = compile_kernel(THREE_ARRAY_KERNEL)
    good = [aligned_array(np.ones(4096, np.float32)) for _ in range(4)]
    read_only = aligned_array(good[3])
    read_only.flags.writeable = False
    kernel(*good)
    np.testing.assert_array_equal(good[3], 2.0)
    cases = {
        "takes 4 arguments": good[:3],
        "float32\\[4096\\] array, got a float64": [good[0].astype(np.float64), *good[1:]],
        "got a float32\\[4095\\]": [good[0][:4095], *good[1:]],
        "not C-contiguous": [aligned_array(np.ones(8192, np.float32))[::2], *good[1:]],
        "not 64-byte aligned": [aligned_array(np.ones(4097, np.float32))[1:], *good[1:]],
        "overlaps argument 0": [*good[:3], good[0]],
        "read-only": [*good[:3], read_only],
        "expected a float32\\[4096\\] array, got list": [[1.0], *good[1:]],
    }
    for message, args in cases.items():
        with pytest.raises(KernelArgumentError, match=message):
            kernel(*args)


def test_unaligned_numpy_arrays_run_with_alignment_zero():
    kernel = compile_kernel(THREE_ARRAY_KERNEL, alignment=0)
    x = np.ones(4097, np.float32)[1:]
    out = np.empty(4096, np.float32)
    kernel(x, x, x, out)
    np.testing.assert_array_equal(out, 2.0)


def test_scalar_arguments_and_result():
    kernel = compile_kernel("""
func.func @axpy_sum(%a: f32, %x: memref<5xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %x[%i] : memref<5xf32>
    %p = arith.mulf %a, %v : f32
    %t = arith.addf %acc, %p : f32
    scf.yield %t : f32
  }
  func.return %s : f32
}""")
    x = aligned_array(np.arange(5, dtype=np.float32))
    assert kernel(2.0, x, 4) == pytest.approx(12.0)
