"""graphopt.compile against graphopt.interpret: every op, fused and unfused, and the runtime's calling conventions.

The case table is compiled as one module per fusion setting, every case an independent set
of inputs and results, so two compiles cover it; each case is still its own test.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from test_interpreter import BINARY, F32, F32_REDUCE, POSITIVE_UNARY, REDUCTIONS, UNARY
from xdsl.dialects.builtin import ModuleOp

import graphopt
from graphopt import GraphBuilder
from graphopt.dialects.attributes import NUMPY_DTYPES
from graphopt.dialects.graph import GRAPH_OPS, GraphOp
from graphopt.runtime.arrays import aligned_empty
from graphopt.parsing import make_context
from graphopt.tools.graph_run import random_inputs
from graphopt.transforms.fuse import FusePass

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.mlir"))
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)

FALLBACKS = {("graph.cast", "cpu: kernels cannot take or return f16")}
"""(op, reason) of each op of the table that runs on the reference interpreter instead of a CPU kernel."""


# ----------------------------------------------------------------------------------------
# The op table
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """`build(b, *inputs)` on new inputs of `types` ("3x7xf32", "f32" for rank 0), compared at `tolerance`."""

    id: str
    build: Callable
    types: tuple[str, ...]
    tolerance: dict = field(default_factory=lambda: F32)
    specials: bool = True
    """Float inputs start with NaN, inf, -inf, 0 and -0."""


def op_case(op: str, *types: str, tolerance=F32, specials=True, **attributes) -> Case:
    """One op, `b.<op>(*inputs, **attributes)`."""
    label = " ".join([*types, *(f"{k}={v}" for k, v in attributes.items())])
    return Case(f"{op}[{label}]", lambda b, *xs: getattr(b, op)(*xs, **attributes), types, tolerance, specials)


def spec(shape: tuple[int, ...], dtype: str = "f32") -> str:
    return "x".join([*map(str, shape), dtype])


def constants(b):
    return b.constant(np.arange(6, dtype=np.float32).reshape(2, 3)), b.constant(2.5)


def constant_operands(b, x):
    return b.mul(b.add(x, b.constant(np.linspace(-1, 1, 7, dtype=np.float32))), b.constant(3.0))


def returned_twice_and_argument(b, x):
    y = b.exp(x)
    return y, y, x


def add_relu_softmax(b, x, y):
    return b.softmax(b.relu(b.add(x, y)))


def exp_reduce_sum(b, x):
    return b.reduce_sum(b.exp(x), axes=[-1])


def matmul_add_gelu(b, x, w, c):
    return b.gelu(b.add(b.matmul(x, w), c))


def transpose_reshape_mul(b, x, y):
    return b.mul(b.reshape(b.transpose(x, perm=[1, 0]), (21,)), y)


def channel_shuffle_relu(b, x):
    """ShuffleNet's shuffle of 2 groups (Reshape, Transpose, Reshape), then relu; x is [N, C, H, W]."""
    n, c, h, w = x.type.get_shape()
    grouped = b.reshape(x, (n, 2, c // 2, h, w))
    return b.relu(b.reshape(b.transpose(grouped, perm=[0, 2, 1, 3, 4]), (n, c, h, w)))


def layer_norm_two_uses(b, x, scale, bias):
    normalized = b.layer_norm(x, scale, bias)
    return b.mul(normalized, normalized), b.sigmoid(normalized)


def pad_relu(b, x):
    return b.relu(b.pad(x, pads=[0, 1, 0, 1]))


SHAPES = [(), (1,), (3,), (2, 7), (1023,), (3, 1025)]
BROADCASTS = [((), (7,)), ((3, 1), (1, 7)), ((2, 1, 1023), (3, 1)), ((1025,), (2, 1025)), ((1,), ())]
UNARY_WITH_ATTRIBUTES = [
    ("gelu", {}), ("leaky_relu", {"alpha": 0.1}), ("clip", {"min": -1.0, "max": 0.5}), ("clip", {"min": 0.0}),
    ("clip", {"max": 6.0}),
]  # fmt: skip
REDUCTION_AXES = [
    ((3, 1025), [-1], False), ((1023, 3), [0], True), ((2, 3, 7), [0, -1], False), ((1, 7), [-2, 1], True),
]  # fmt: skip
CASTS = [
    ("f32", "f64"), ("f64", "f32"), ("f32", "f16"), ("f16", "f32"), ("f32", "i32"), ("i32", "f32"), ("i64", "i32"),
    ("f32", "i1"), ("i1", "f32"),
]  # fmt: skip
SOFTMAX_AXES = [("3x1025xf32", -1), ("1023x3xf32", 0), ("2x3x7xf32", 1)]

CASES = [
    *[op_case(op, spec(shape)) for op in [*UNARY, *POSITIVE_UNARY] for shape in SHAPES],
    *[op_case(op, spec(shape), **attributes) for op, attributes in UNARY_WITH_ATTRIBUTES for shape in SHAPES],
    # without infinities: see test_gelu_tanh_saturates_like_the_reference
    *[op_case("gelu", spec(shape), approximate="tanh", specials=False) for shape in SHAPES],
    *[op_case(op, "5xf64") for op in ("exp", "tanh", "sqrt")],
    *[op_case(op, "2x7xi32") for op in ("neg", "abs", "relu")],
    op_case("clip", "7xi64", min=1.0, max=2.0),
    *[op_case(op, spec(a), spec(b)) for op in BINARY for a, b in BROADCASTS],
    *[op_case(op, "3x1xi64", "7xi64") for op in ("add", "sub", "mul", "max", "min")],
    *[op_case("cmp", "3x1025xf32", "1025xf32", predicate=p) for p in ("eq", "ne", "lt", "le", "gt", "ge")],
    op_case("cmp", "3x1xi32", "7xi32", predicate="le"),
    op_case("select", "3x1xi1", "1023xf32", "f32"),
    op_case("select", "i1", "2x7xf32", "7xf32"),
    *[Case(f"cast[{s}->{t}]", lambda b, x, t=t: b.cast(x, t), (f"3x7x{s}",), specials=not t.startswith("i"))
      for s, t in CASTS],
    op_case("batch_norm", "2x3x1025xf32", "3xf32", "3xf32", "3xf32", "3xf32", epsilon=1e-3),
    Case("constant", constants, ()),
    Case("reshape", lambda b, x: b.reshape(x, (7, 3)), ("3x7xf32",)),
    Case("reshape[rank 0]", lambda b, x: b.reshape(x, (1, 1)), ("f32",)),
    Case("broadcast_to", lambda b, x: b.broadcast_to(x, (2, 3, 1025)), ("3x1xf32",)),
    Case("broadcast_to[rank 0]", lambda b, x: b.broadcast_to(x, (7,)), ("f32",)),
    op_case("transpose", "3x1025xf32", perm=[1, 0]),
    op_case("transpose", "2x3x7xf32", perm=[2, 0, 1]),
    op_case("slice", "5x1025xf32", starts=[-3, 1], ends=[100, -1], steps=[2, 3]),
    op_case("concat", "2x3xf32", "2x1xf32", "2x1023xf32", axis=-1),
    op_case("pad", "3x7xf32", pads=[1, 0, 2, 3], value=-1.5),
    op_case("gather", "5x1023xf32", "2x3xi32", axis=0),
    op_case("gather", "3x7xf32", "4xi64", axis=-1),
    *[op_case(op, spec(shape), axes=axes, keepdims=keep, tolerance=F32_REDUCE)
      for op in REDUCTIONS for shape, axes, keep in REDUCTION_AXES],
    op_case("reduce_sum", "3x7xi32", axes=[-1]),
    op_case("reduce_max", "3x7xi64", axes=[0]),
    *[op_case(op, shape, axis=axis, tolerance=F32_REDUCE)
      for op in ("softmax", "log_softmax") for shape, axis in SOFTMAX_AXES],
    op_case("softmax", "2x5xf64", tolerance=F32_REDUCE),
    op_case("layer_norm", "3x1023xf32", "1023xf32", "1023xf32", tolerance=F32_REDUCE),
    op_case("layer_norm", "2x3x7xf32", "3x7xf32", "3x7xf32", axis=-2, epsilon=1e-3, tolerance=F32_REDUCE),
    op_case("matmul", "3x1023xf32", "1023x5xf32", tolerance=F32_REDUCE),
    op_case("matmul", "7x1xf32", "1x1025xf32", tolerance=F32_REDUCE),
    op_case("matmul", "2x1x3x4xf32", "3x4x7xf32", tolerance=F32_REDUCE),
    op_case("matmul", "3x5xi32", "5x2xi32"),
    op_case("conv2d", "1x3x9x8xf32", "4x3x3x3xf32", padding=[1, 1, 1, 1], tolerance=F32_REDUCE),
    op_case("conv2d", "2x4x9x8xf32", "6x2x3x3xf32", strides=[2, 3], dilations=[2, 1], padding=[1, 0, 1, 2], groups=2,
            tolerance=F32_REDUCE),
    op_case("max_pool2d", "1x2x7x5xf32", kernel=[3, 2], strides=[2, 1], padding=[1, 1, 1, 0]),
    op_case("avg_pool2d", "1x2x7x5xf32", kernel=[3, 2], padding=[1, 1, 1, 0], count_include_pad=True),
    op_case("avg_pool2d", "1x2x7x5xf32", kernel=[2, 2], strides=[2, 2]),
]
"""Cases of one op (besides constants): fusion leaves them alone, so they are compiled unfused only."""

GROUPS = [
    Case("constant[operands]", constant_operands, ("3x7xf32",)),
    Case("results[returned twice, argument]", returned_twice_and_argument, ("7xf32",)),
    Case("chain[add relu softmax]", add_relu_softmax, ("3x1025xf32", "1025xf32"), F32_REDUCE),
    Case("chain[exp reduce_sum]", exp_reduce_sum, ("7x1023xf32",), F32_REDUCE),
    Case("chain[matmul add gelu]", matmul_add_gelu, ("3x7xf32", "7x1025xf32", "1025xf32"), F32_REDUCE),
    Case("chain[transpose reshape mul]", transpose_reshape_mul, ("3x7xf32", "21xf32")),
    Case("chain[channel shuffle relu]", channel_shuffle_relu, ("2x6x5x7xf32",)),
    Case("chain[channel shuffle relu, long rows]", channel_shuffle_relu, ("1x6x3x67xf32",)),
    Case("chain[layer_norm, two uses]", layer_norm_two_uses, ("3x1023xf32", "1023xf32", "1023xf32"), F32_REDUCE),
    Case("chain[pad relu]", pad_relu, ("3x7xf32",)),
]
"""Cases of several ops: compiled fused and unfused."""


def parse_type(type_spec: str) -> tuple[tuple[int, ...], str]:
    """"3x7xf32" -> ((3, 7), "f32")."""
    *dims, dtype = type_spec.split("x")
    return tuple(map(int, dims)), dtype


def sample(type_spec: str, seed: int, specials: bool = True) -> np.ndarray:
    """Random values of a type like "3x7xf32": floats ~ N(0, 4), small non-negative integers, fair booleans."""
    shape, dtype_name = parse_type(type_spec)
    dtype = NUMPY_DTYPES[dtype_name]
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 3, shape).astype(dtype)
    values = (rng.standard_normal(shape) * 2).astype(dtype)
    if specials:
        flat = values.reshape(-1)
        flat[: min(flat.size, SPECIALS.size)] = SPECIALS[: flat.size]
    return values


def compare(actual: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...], tolerance=F32) -> None:
    """Same count, dtypes and shapes; values within `tolerance`, NaN equal to NaN."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert (a.dtype, a.shape) == (e.dtype, e.shape)
        np.testing.assert_allclose(a, e, equal_nan=True, **tolerance)


def compiled_equals_interpreted(module: ModuleOp, inputs, tolerance=F32, **options) -> graphopt.Executable:
    """Compile `module` with `options`, check one call on `inputs` against the interpreter, return it."""
    executable = graphopt.compile(module, **options)
    compare(executable(*inputs), graphopt.interpret(module, *inputs), tolerance)
    return executable


@dataclass
class TableRun:
    """The table compiled as one module: the executable, each case's results and the interpreter's."""

    executable: graphopt.Executable
    outputs: dict[str, slice]
    actual: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]


@functools.cache
def run_table(fuse: bool) -> TableRun:
    """Unfused: every case; fused: GROUPS, the cases fusion changes."""
    b = GraphBuilder()
    results, outputs, inputs = [], {}, []
    for index, case in enumerate(GROUPS if fuse else CASES + GROUPS):
        arrays = [sample(t, seed=index * 8 + i, specials=case.specials) for i, t in enumerate(case.types)]
        values = case.build(b, *(b.input(f"c{index}_{i}", a.shape, a.dtype) for i, a in enumerate(arrays)))
        values = values if isinstance(values, tuple) else (values,)
        outputs[case.id] = slice(len(results), len(results) + len(values))
        results.extend(values)
        inputs.extend(arrays)
    module = b.finish(*results)
    executable = graphopt.compile(module, fuse=fuse)
    return TableRun(executable, outputs, executable(*inputs), graphopt.interpret(module, *inputs))


def test_case_ids_are_unique():
    assert len({case.id for case in CASES + GROUPS}) == len(CASES + GROUPS)


def test_every_op_has_a_case():
    b = GraphBuilder()
    for case in CASES + GROUPS:
        case.build(b, *(b.input("x", *parse_type(t)) for t in case.types))
    assert {op.name for op in b.block.ops} == {op.name for op in GRAPH_OPS if issubclass(op, GraphOp)}


RUNS = [(False, case) for case in CASES + GROUPS] + [(True, case) for case in GROUPS]


@pytest.mark.parametrize("fuse, case", RUNS, ids=[f"{'fused' if f else 'unfused'}-{c.id}" for f, c in RUNS])
def test_case_matches_interpreter(fuse: bool, case: Case):
    table = run_table(fuse)
    where = table.outputs[case.id]
    compare(table.actual[where], table.expected[where], case.tolerance)


def test_unfused_runs_one_step_per_op_and_exactly_these_ops_fall_back():
    steps = run_table(fuse=False).executable.steps
    assert all(len(list(step.op.body.block.ops)) == 2 for step in steps)  # one op and its graph.yield
    assert {(step.op.body.block.first_op.name, step.reason) for step in steps if step.backend == "reference"} == FALLBACKS


def test_gelu_tanh_saturates_like_the_reference():
    """Issue 15: compiled gelu tanh gave about x * 2^-23 for large negative x (-0.119 at -1e6)."""
    b = GraphBuilder()
    module = b.finish(b.gelu(b.input("x", (9,)), approximate="tanh"))
    x = np.array([-np.inf, -1e30, -1e6, -1e4, -20.0, -10.0, -7.9, np.nan, np.inf], np.float32)
    (compiled,) = compiled_equals_interpreted(module, [x])(x)
    assert list(compiled[1:6]) == [0.0] * 5


def test_tanh_is_exactly_one_where_f32_rounds_to_one():
    b = GraphBuilder()
    module = b.finish(b.tanh(b.input("x", (10,))))
    x = np.array([-np.inf, -1e30, -10.0, -7.9053111, -7.9, 7.9, 7.9053111, 10.0, 1e30, np.inf], np.float32)
    (compiled,) = graphopt.compile(module, threads=1)(x)
    assert list(compiled[[0, 1, 2, 3, 6, 7, 8, 9]]) == [-1.0] * 4 + [1.0] * 4
    compiled_equals_interpreted(module, [x])


# ----------------------------------------------------------------------------------------
# Groups and whole models
# ----------------------------------------------------------------------------------------


def multi_output_module() -> ModuleOp:
    """@main with one multi-output group: yields of two shapes, one also feeding a reduction outside."""
    b = GraphBuilder()
    x, c = b.input("x", (3, 1025)), b.input("c", (1025,))
    t = b.exp(b.add(x, c))
    module = b.finish(b.relu(t), b.neg(b.transpose(t, perm=[1, 0])), t, b.reduce_max(t, axes=[-1]))
    FusePass(multi_output=True).apply(make_context(), module)
    return module


@pytest.mark.parametrize("fuse", [True, False])
def test_multi_output_group_is_one_kernel(fuse):
    module = multi_output_module()
    inputs = [sample("3x1025xf32", 0), sample("1025xf32", 1)]
    executable = compiled_equals_interpreted(module, inputs, fuse=fuse)
    groups = [step for step in executable.steps if len(step.outputs) > 1]
    assert [(len(step.outputs), step.backend) for step in groups] == [(3, "cpu")]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples(path: Path, fuse: bool):
    module = graphopt.parse(path)
    compiled_equals_interpreted(module, random_inputs(module.body.block.first_op, seed=0), F32_REDUCE, fuse=fuse)


# ----------------------------------------------------------------------------------------
# Calling conventions: repeated calls, argument conversion, threads
# ----------------------------------------------------------------------------------------


def chain_module() -> ModuleOp:
    """Several kernels with intermediates whose buffers the plan reuses (when unfused)."""
    b = GraphBuilder()
    x, c = b.input("x", (3, 1025)), b.input("c", (1025,))
    h = b.tanh(b.mul(b.exp(b.neg(x)), c))
    return b.finish(b.softmax(b.add(h, x)), b.reduce_sum(b.sigmoid(h), axes=[0]))


def chain_inputs(seed: int) -> list[np.ndarray]:
    return [sample("3x1025xf32", seed), sample("1025xf32", seed + 1)]


@pytest.mark.parametrize("fuse", [True, False])
def test_repeated_calls_reuse_buffers_without_mixing_results(fuse):
    module = chain_module()
    executable = graphopt.compile(module, fuse=fuse)
    input_sets = [chain_inputs(seed) for seed in (0, 10, 20, 0)]
    results = [executable(*inputs) for inputs in input_sets]
    for inputs, result in zip(input_sets, results):
        compare(result, graphopt.interpret(module, *inputs), F32_REDUCE)
    compare(results[0], results[-1], {"rtol": 0, "atol": 0})


def test_same_array_objects_changed_in_place_between_calls():
    """The runtime reuses the address of an array passed again; its new contents must count."""
    module = chain_module()
    executable = graphopt.compile(module)
    inputs = chain_inputs(0)
    out = executable(*inputs)
    for seed in (5, 6):
        for given, fresh in zip(inputs, chain_inputs(seed)):
            given[...] = fresh
        executable(*inputs, out=out)
        compare(out, graphopt.interpret(module, *inputs), F32_REDUCE)


def square_matmul_module(n: int) -> ModuleOp:
    """relu(x @ w + x): a GEMM reads every column of x for each row of its result."""
    b = GraphBuilder()
    x = b.input("x", (n, n))
    w = b.constant(np.random.default_rng(3).standard_normal((n, n)).astype(np.float32) / n)
    return b.finish(b.relu(b.add(b.matmul(x, w), x)))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shift", [0, 4, -68])
def test_out_sharing_memory_with_an_argument_gets_the_result_of_the_argument_as_it_was(threads, shift):
    """`exe(x, out=[x])`, or out a view overlapping x `shift` floats on, computes from x as it was
    passed, as NumPy's `out=` does: written in place, the GEMM would read rows it had overwritten."""
    n = 72
    module = square_matmul_module(n)
    executable = graphopt.compile(module, threads=threads)
    storage = aligned_empty((n * n + 2 * 68,), np.float32)
    x = storage[68 : 68 + n * n].reshape(n, n)
    x[...] = sample(f"{n}x{n}xf32", 4)
    expected = graphopt.interpret(module, x.copy())
    out = storage[68 + shift : 68 + shift + n * n].reshape(n, n)
    (result,) = executable(x, out=[out])
    assert result is out
    compare((out,), expected, F32_REDUCE)


def test_out_sharing_memory_is_checked_whenever_the_arrays_change():
    """The check is skipped for the arrays of the last call, checked then; new ones are checked."""
    n = 40
    module = square_matmul_module(n)
    executable = graphopt.compile(module)
    x = aligned_empty((n, n), np.float32)
    for seed, out in enumerate([aligned_empty((n, n), np.float32), x, aligned_empty((n, n), np.float32), x, x]):
        x[...] = sample(f"{n}x{n}xf32", seed)
        expected = graphopt.interpret(module, x.copy())
        executable(x, out=[out])
        compare((out,), expected, F32_REDUCE)


def test_out_sharing_memory_with_arguments_returned_as_results():
    """Results that are arguments are copied into out after the kernels: out[1] = y must not
    clobber y before it is copied into out[2], whichever arrays the call before had."""
    b = GraphBuilder()
    x, y = b.input("x", (4, 8)), b.input("y", (4, 8))
    module = b.finish(b.exp(x), x, y)
    executable = graphopt.compile(module)
    x_given, y_given, exp_out, spare = (aligned_empty((4, 8), np.float32) for _ in range(4))
    x_original, y_original = sample("4x8xf32", 1), sample("4x8xf32", 2)
    for outs in ([exp_out, spare, aligned_empty((4, 8), np.float32)], [exp_out, y_given, spare], [x_given, exp_out, spare]):
        x_given[...], y_given[...] = x_original, y_original
        executable(x_given, y_given, out=outs)
        compare(tuple(outs), graphopt.interpret(module, x_original, y_original), F32)


def test_out_arrays_sharing_memory_with_each_other_are_refused():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    module = b.finish(b.exp(x), b.neg(x))
    executable = graphopt.compile(module)
    given, out = aligned_empty((4, 8), np.float32), aligned_empty((4, 8), np.float32)
    with pytest.raises(graphopt.GraphoptError, match=r"out\[0\] and out\[1\] share memory"):
        executable(given, out=[out, out])
    with pytest.raises(graphopt.GraphoptError, match=r"out\[0\] and out\[1\] share memory"):
        executable(given, out=[given, given])  # sharing memory with the argument too


def test_native_runs_are_broken_by_steps_called_from_python():
    """cpu kernels run from native code; a reference step between them is called from Python."""
    b = GraphBuilder()
    x = b.input("x", [5, 7])
    rounded = b.cast(b.cast(b.tanh(b.reduce_max(b.exp(b.relu(x)), axes=[1])), "f16"), "f32")
    module = b.finish(b.neg(rounded))
    executable = graphopt.compile(module, fuse=False)
    runs = [line.partition("[")[2].rstrip("]") or line.split()[1] for line in executable.report().splitlines()]
    assert runs == ["native run 0"] * 4 + ["reference"] * 2 + ["native run 3"], executable.report()
    inputs = [sample("5x7xf32", 3)]
    compare(executable(*inputs), graphopt.interpret(module, *inputs), F32_REDUCE)


def misaligned(array: np.ndarray) -> np.ndarray:
    """A copy of `array` whose data starts 4 bytes past a 16-byte boundary."""
    buffer = aligned_empty(array.nbytes + 4, np.uint8, alignment=16)
    view = buffer[4:].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


ARGUMENT_FORMS = {
    "float64": lambda a: a.astype(np.float64),
    "strided": lambda a: np.repeat(a, 2, axis=-1)[..., ::2],
    "transposed": lambda a: np.ascontiguousarray(a.T).T,
    "misaligned": misaligned,
    "read-only": lambda a: np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape),
}


@pytest.mark.parametrize("form", ARGUMENT_FORMS)
def test_arguments_are_converted(form):
    module = chain_module()
    inputs = chain_inputs(0)
    given = [ARGUMENT_FORMS[form](a) for a in inputs]
    before = [g.copy() for g in given]
    compare(graphopt.compile(module)(*given), graphopt.interpret(module, *inputs), F32_REDUCE)
    compare(tuple(given), tuple(before), {"rtol": 0, "atol": 0})


def test_calls_from_two_threads_at_once():
    module = chain_module()
    executable = graphopt.compile(module, fuse=False)
    input_sets = [chain_inputs(seed) for seed in (1, 2)]
    expected = [graphopt.interpret(module, *inputs) for inputs in input_sets]
    start = threading.Barrier(2)

    def call_repeatedly(inputs):
        start.wait()
        return [executable(*inputs) for _ in range(20)]

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(call_repeatedly, input_sets))
    for results, want in zip(runs, expected):
        for result in results:
            compare(result, want, F32_REDUCE)


def test_a_call_in_main_is_refused_with_its_callee():
    module = graphopt.parse(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = graph.relu %x : tensor<4xf32>\n  func.return %0 : tensor<4xf32>\n}\n"
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>\n  func.return %0 : tensor<4xf32>\n}"
    )
    with pytest.raises(graphopt.GraphoptError, match=r"'func.call' in @main \(a call of @f: inline it\): compile runs graph ops only"):
        graphopt.compile(module)


@pytest.mark.parametrize("threads", [1, 2])
def test_tensors_without_elements_compile(threads):
    b = GraphBuilder()
    x = b.input("x", (0, 3))
    module = b.finish(b.relu(b.add(x, b.constant(np.zeros((0, 3), np.float32)))))
    (result,) = graphopt.compile(module, threads=threads)(np.zeros((0, 3), np.float32))
    assert result.shape == (0, 3) and result.dtype == np.float32
