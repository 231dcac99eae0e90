"""convert-graph-to-linalg: kernel structure, and kernels run on xDSL's interpreter against graphopt.interpret."""

from __future__ import annotations

import numpy as np
import pytest
from linalg_kernels import run_module
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp

import graphopt
from graphopt.dialects import graph
from graphopt.lowering import depthwise_conv, direct_conv, pooling
from graphopt.lowering.convert_graph_to_linalg import ConvertGraphToLinalgPass, supports
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR
from graphopt.transforms.canonicalize import CanonicalizePass
from graphopt.transforms.fuse import FusePass

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)


def sample(shape, dtype="f32", seed=0, specials=True) -> np.ndarray:
    """Random values of `shape`; float arrays start with NaN, inf, -inf and signed zeros."""
    rng = np.random.default_rng(seed)
    if dtype in ("i32", "i64"):
        return rng.integers(-9, 10, shape).astype(dtype.replace("i", "int"))
    if dtype == "i1":
        return rng.integers(0, 2, shape).astype(bool)
    values = (rng.standard_normal(shape) * 2).astype(dtype.replace("f", "float"))
    if specials:
        flat = values.reshape(-1)
        flat[: min(flat.size, SPECIALS.size)] = SPECIALS[: flat.size]
    return values


def tensor(shape, dtype="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dtype}>"


def check(text: str, *arrays, fuse: bool = True, rtol: float = 1e-5):
    """Run @main kernel by kernel and compare with the reference interpreter."""
    module = graphopt.parse(text)
    expected = graphopt.interpret(module, *arrays)
    actual = run_module(module, *arrays, fuse=fuse)
    for e, a in zip(expected, actual, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=rtol, atol=1e-6, equal_nan=True)


def kernels(text: str) -> list[func.FuncOp]:
    module = graphopt.parse(text)
    FusePass().apply(Context(), module)
    ConvertGraphToLinalgPass().apply(Context(), module)
    module.verify()
    return list(module.body.ops)


def ops_of(kernel: func.FuncOp, op_type) -> list:
    return [op for op in kernel.walk() if isinstance(op, op_type)]


def is_fill(op) -> bool:
    """A linalg.fill, or a generic that only yields a constant (a fill whose short rows the CPU
    schedule runs as one loop)."""
    if isinstance(op, FillOp):
        return True
    yielded = op.body.block.last_op.operands if isinstance(op, GenericOp) else ()
    return bool(yielded) and all(isinstance(v.owner, arith.ConstantOp) for v in yielded)


def fills_and_loops(kernel: func.FuncOp) -> tuple[list, list]:
    """The kernel's fills, and its other loop nests, each in order."""
    nests = [op for op in kernel.walk() if isinstance(op, (FillOp, GenericOp))]
    return [op for op in nests if is_fill(op)], [op for op in nests if not is_fill(op)]


def maps_of(generic: GenericOp) -> list[str]:
    return [str(m.data) for m in generic.indexing_maps]


def data_buffers(kernel: func.FuncOp) -> list:
    """The kernel's temporaries that a generic writes (not the `Kernel.extent` buffers that
    only give a loop dim its bound)."""
    written = {output for generic in ops_of(kernel, GenericOp) for output in generic.outputs}
    return [alloc.memref for alloc in ops_of(kernel, memref.AllocOp) if alloc.memref in written]


# ----------------------------------------------------------------------------------------
# Elementwise groups
# ----------------------------------------------------------------------------------------

CHAIN = """
func.func @main(%x: tensor<3x7xf32>, %b: tensor<7xf32>, %c: tensor<3x1xf32>) -> tensor<3x7xf32> {
  %0 = graph.add %x, %b : (tensor<3x7xf32>, tensor<7xf32>) -> tensor<3x7xf32>
  %1 = graph.relu %0 : tensor<3x7xf32>
  %2 = graph.mul %1, %c : (tensor<3x7xf32>, tensor<3x1xf32>) -> tensor<3x7xf32>
  %3 = graph.exp %2 : tensor<3x7xf32>
  func.return %3 : tensor<3x7xf32>
}
"""


def test_elementwise_chain_is_one_generic_with_broadcast_maps():
    (kernel,) = kernels(CHAIN)
    assert kernel.sym_name.data == "fused_add_relu_mul_exp_0"
    assert [str(t) for t in kernel.function_type.inputs] == [
        "memref<3x7xf32>", "memref<7xf32>", "memref<3x1xf32>", "memref<3x7xf32>",
    ]  # fmt: skip
    (generic,) = ops_of(kernel, GenericOp)
    assert maps_of(generic) == [
        "(d0, d1) -> (d0, d1)",
        "(d0, d1) -> (d1)",
        "(d0, d1) -> (d0, 0)",
        "(d0, d1) -> (d0, d1)",
    ]
    assert [str(i.data) for i in generic.iterator_types] == ["parallel", "parallel"]
    assert not ops_of(kernel, memref.AllocOp)
    assert "graph.kernel" in kernel.attributes


def test_elementwise_chain_numerics():
    check(CHAIN, sample((3, 7)), sample((7,), seed=1), sample((3, 1), seed=2))


@pytest.mark.parametrize("width, flat", [(7, True), (64, False)])
def test_short_last_two_dims_of_an_elementwise_loop_run_as_one(width, flat):
    """Rows shorter than SHORT_LOOP: (h, w) is one loop dim f, read at (f floordiv W, f mod W)."""
    x, b = tensor((2, 3, 5, width)), tensor((3, 1, 1))
    text = (
        f"func.func @main(%x: {x}, %b: {b}) -> {x} {{\n %0 = graph.add %x, %b : ({x}, {b}) -> {x}\n"
        f" %1 = graph.relu %0 : {x}\n func.return %1 : {x}\n}}"
    )
    (kernel,) = kernels(text)
    (generic,) = ops_of(kernel, GenericOp)
    if flat:
        (extent,) = ops_of(kernel, memref.AllocOp)  # gives f its bound
        assert extent.memref.type.get_shape() == (5 * width,) and generic.inputs[0] is extent.memref
        assert maps_of(generic) == [
            "(d0, d1, d2) -> (d2)",
            f"(d0, d1, d2) -> (d0, d1, (d2 floordiv {width}), (d2 mod {width}))",
            "(d0, d1, d2) -> (d1, 0, 0)",
            f"(d0, d1, d2) -> (d0, d1, (d2 floordiv {width}), (d2 mod {width}))",
        ]
    else:
        assert not ops_of(kernel, memref.AllocOp) and len(generic.iterator_types) == 4
    check(text, sample((2, 3, 5, width)), sample((3, 1, 1), seed=1))


UNARY = ["neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "erf", "sin", "cos",
         "floor", "ceil"]  # fmt: skip
UNARY_WITH_ATTRS = [
    ("gelu", ""), ("gelu", '{approximate = "tanh"}'), ("leaky_relu", "{alpha = 0.1 : f64}"),
    ("clip", "{min = -1.0 : f64, max = 2.5 : f64}"), ("clip", "{max = 0.5 : f64}"),
]  # fmt: skip


@pytest.mark.parametrize("shape", [(1,), (3, 7), ()])
@pytest.mark.parametrize("op, attrs", [(op, "") for op in UNARY] + UNARY_WITH_ATTRS)
def test_unary_float(op, attrs, shape):
    t = tensor(shape)
    check(
        f"func.func @main(%x: {t}) -> {t} {{\n %0 = graph.{op} %x {attrs} : {t}\n func.return %0 : {t}\n}}",
        sample(shape),
    )


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize(
    "op, attrs", [("neg", ""), ("abs", ""), ("relu", ""), ("clip", "{min = -2.5 : f64, max = 3.5 : f64}")]
)
def test_unary_int(op, attrs, dtype):
    t = tensor((3, 7), dtype)
    check(
        f"func.func @main(%x: {t}) -> {t} {{\n %0 = graph.{op} %x {attrs} : {t}\n func.return %0 : {t}\n}}",
        sample((3, 7), dtype),
    )


BROADCASTS = [((3, 7), (7,)), ((3, 1), (1, 7)), ((1,), (3, 7)), ((), (2, 3)), ((2, 1, 3), (4, 1))]


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min"])
def test_binary_float_broadcasting(op, shapes):
    a, b = shapes
    out = np.broadcast_shapes(a, b)
    check(
        f"func.func @main(%a: {tensor(a)}, %b: {tensor(b)}) -> {tensor(out)} {{\n"
        f" %0 = graph.{op} %a, %b : ({tensor(a)}, {tensor(b)}) -> {tensor(out)}\n func.return %0 : {tensor(out)}\n}}",
        sample(a),
        sample(b, seed=1),
    )


def test_pow_float():
    t = tensor((3, 7))
    text = f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n %0 = graph.pow %a, %b : ({t}, {t}) -> {t}\n func.return %0 : {t}\n}}"
    check(text, np.abs(sample((3, 7), specials=False)), sample((3, 7), seed=1, specials=False))


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min"])
def test_binary_int(op, dtype):
    a, b = tensor((3, 7), dtype), tensor((7,), dtype)
    text = f"func.func @main(%a: {a}, %b: {b}) -> {a} {{\n %0 = graph.{op} %a, %b : ({a}, {b}) -> {a}\n func.return %0 : {a}\n}}"
    check(text, sample((3, 7), dtype), sample((7,), dtype, seed=1))


@pytest.mark.parametrize("dtype", ["f32", "i32"])
@pytest.mark.parametrize("predicate", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp_and_select(predicate, dtype):
    """NaN compares false except under `ne`, as in NumPy."""
    a, b, r = tensor((3, 7), dtype), tensor((7,), dtype), tensor((3, 7), dtype)
    x = sample((3, 7), dtype)
    y = x[1].copy() if dtype == "i32" else np.concatenate([[np.nan], x[1, 1:]]).astype(np.float32)
    check(
        f"func.func @main(%a: {a}, %b: {b}) -> {r} {{\n"
        f' %0 = graph.cmp %a, %b {{predicate = "{predicate}"}} : ({a}, {b}) -> {tensor((3, 7), "i1")}\n'
        f" %1 = graph.select %0, %a, %b : ({tensor((3, 7), 'i1')}, {a}, {b}) -> {r}\n func.return %1 : {r}\n}}",
        x,
        y,
    )


@pytest.mark.parametrize(
    "source, target",
    [("f32", "f64"), ("f64", "f32"), ("f32", "f16"), ("f32", "i32"), ("i32", "f32"), ("i32", "i64"), ("i64", "i32"),
     ("f32", "i1"), ("i1", "f32"), ("i1", "i32"), ("i32", "i1")],
)  # fmt: skip
def test_cast(source, target):
    s, t = tensor((3, 7), source), tensor((3, 7), target)
    x = sample((3, 7), source, specials=target != "i32" and target != "i64")
    check(f"func.func @main(%x: {s}) -> {t} {{\n %0 = graph.cast %x : ({s}) -> {t}\n func.return %0 : {t}\n}}", x)


def test_batch_norm():
    x, c = tensor((2, 3, 1, 4)), tensor((3,))
    text = (
        f"func.func @main(%x: {x}, %s: {c}, %b: {c}, %m: {c}, %v: {c}) -> {x} {{\n"
        f" %0 = graph.batch_norm %x, %s, %b, %m, %v {{epsilon = 1.0e-03 : f64}} : ({x}, {c}, {c}, {c}, {c}) -> {x}\n"
        f" func.return %0 : {x}\n}}"
    )
    check(text, sample((2, 3, 1, 4)), *(sample((3,), seed=i, specials=False) for i in range(1, 3)),
          sample((3,), seed=3, specials=False), np.abs(sample((3,), seed=4, specials=False)))  # fmt: skip


MULTI_OUTPUT = """
func.func @main(%x: tensor<3x7xf32>, %y: tensor<7xf32>) -> (tensor<3x7xf32>, tensor<3x7xf32>) {
  %0:2 = graph.fused(%x, %y) {name = "two", mode = "compile"} : (tensor<3x7xf32>, tensor<7xf32>) -> (tensor<3x7xf32>, tensor<3x7xf32>) {
  ^bb0(%a: tensor<3x7xf32>, %b: tensor<7xf32>):
    %s = graph.add %a, %b : (tensor<3x7xf32>, tensor<7xf32>) -> tensor<3x7xf32>
    %t = graph.tanh %s : tensor<3x7xf32>
    graph.yield %s, %t : tensor<3x7xf32>, tensor<3x7xf32>
  }
  func.return %0#0, %0#1 : tensor<3x7xf32>, tensor<3x7xf32>
}
"""


def test_multi_output_group_writes_both_outputs_in_one_generic():
    (kernel,) = kernels(MULTI_OUTPUT)
    (generic,) = ops_of(kernel, GenericOp)
    assert len(generic.outputs) == 2
    assert len(ops_of(kernel, YieldOp)[0].operands) == 2
    check(MULTI_OUTPUT, sample((3, 7)), sample((7,), seed=1))


def test_multi_output_of_different_shapes_gets_one_generic_per_shape():
    text = """
func.func @main(%x: tensor<3x7xf32>, %y: tensor<7xf32>) -> (tensor<3x7xf32>, tensor<7xf32>) {
  %0:2 = graph.fused(%x, %y) {name = "two", mode = "compile"} : (tensor<3x7xf32>, tensor<7xf32>) -> (tensor<3x7xf32>, tensor<7xf32>) {
  ^bb0(%a: tensor<3x7xf32>, %b: tensor<7xf32>):
    %e = graph.exp %b : tensor<7xf32>
    %s = graph.add %a, %e : (tensor<3x7xf32>, tensor<7xf32>) -> tensor<3x7xf32>
    graph.yield %s, %e : tensor<3x7xf32>, tensor<7xf32>
  }
  func.return %0#0, %0#1 : tensor<3x7xf32>, tensor<7xf32>
}
"""
    (kernel,) = kernels(text)
    assert len(ops_of(kernel, GenericOp)) == 2
    check(text, sample((3, 7)), sample((7,), seed=1))


CONSTANTS = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = graph.constant dense<[1.0, -2.0, 4.0]> : tensor<3xf32>
  %h = graph.constant dense<0.5> : tensor<2x3xf32>
  %0 = graph.mul %x, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.add %0, %h : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}
"""


def test_constants_splat_inline_and_full_as_marked_arguments():
    (kernel,) = kernels(CONSTANTS)
    assert [str(t) for t in kernel.function_type.inputs] == ["memref<2x3xf32>", "memref<3xf32>", "memref<2x3xf32>"]
    assert CONSTANT_ARG_ATTR in kernel.arg_attrs.data[1].data
    assert CONSTANT_ARG_ATTR not in kernel.arg_attrs.data[0].data
    (generic,) = ops_of(kernel, GenericOp)
    assert len(generic.inputs) == 2
    check(CONSTANTS, sample((2, 3)))


SPLAT_WEIGHTS = """
func.func @main(%x: tensor<1x3x5x5xf32>) -> tensor<1x4x5x5xf32> {
  %w = graph.constant dense<0.25> : tensor<4x3x3x3xf32>
  %b = graph.constant dense<0.5> : tensor<1x4x1x1xf32>
  %0 = graph.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x5x5xf32>
  %1 = graph.add %0, %b : (tensor<1x4x5x5xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x5x5xf32>
  func.return %1 : tensor<1x4x5x5xf32>
}
"""


def test_splat_conv_weights_are_a_constant_argument():
    """A conv reads w from memory: a splat w is passed like dense weights, not filled per call;
    the splat bias stays inline."""
    (kernel,) = [k for k in kernels(SPLAT_WEIGHTS) if "graph.kernel" in k.attributes]
    assert [str(t) for t in kernel.function_type.inputs] == [
        "memref<1x3x5x5xf32>", "memref<4x3x3x3xf32>", "memref<1x4x5x5xf32>"
    ]
    assert CONSTANT_ARG_ATTR in kernel.arg_attrs.data[1].data
    assert not [op for op in kernel.walk() if isinstance(op, FillOp) and op.outputs[0].type == kernel.args[1].type]
    module, x = graphopt.parse(SPLAT_WEIGHTS), sample((1, 3, 5, 5))
    np.testing.assert_allclose(graphopt.compile(module)(x)[0], graphopt.interpret(module, x)[0], rtol=1e-5, equal_nan=True)


# ----------------------------------------------------------------------------------------
# Injective ops as index maps
# ----------------------------------------------------------------------------------------

INJECTIVE = """
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<6xf32> {
  %0 = graph.exp %x : tensor<2x3xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = graph.broadcast_to %y : (tensor<3xf32>) -> tensor<2x3xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %4 = graph.add %1, %3 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %5 = graph.reshape %4 : (tensor<3x2xf32>) -> tensor<6xf32>
  %6 = graph.neg %5 : tensor<6xf32>
  func.return %6 : tensor<6xf32>
}
"""


def test_transpose_broadcast_reshape_compose_into_index_maps():
    (kernel,) = kernels(INJECTIVE)
    (generic,) = ops_of(kernel, GenericOp)
    assert maps_of(generic) == ["(d0) -> ((d0 mod 2), (d0 floordiv 2))", "(d0) -> ((d0 floordiv 2))", "(d0) -> (d0)"]
    check(INJECTIVE, sample((2, 3)), sample((3,), seed=1))


def test_value_read_at_two_indices():
    t, u = tensor((3, 3)), tensor((3, 3))
    text = (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f" %0 = graph.transpose %x {{perm = array<i64: 1, 0>}} : ({t}) -> {u}\n"
        f" %1 = graph.sub %x, %0 : ({t}, {u}) -> {t}\n func.return %1 : {t}\n}}"
    )
    (kernel,) = kernels(text)
    (generic,) = ops_of(kernel, GenericOp)
    assert maps_of(generic)[:2] == ["(d0, d1) -> (d0, d1)", "(d0, d1) -> (d1, d0)"]
    check(text, sample((3, 3)))


@pytest.mark.parametrize(
    "shape, starts, ends, steps",
    [((7, 5), (1, 0), (7, 5), (2, 1)), ((7, 5), (-3, 4), (7, 0), (1, 1)), ((4, 6), (0, 1), (3, 6), (1, 3))],
)
def test_slice(shape, starts, ends, steps):
    """A slice that keeps part of a dim with step 1 reads it at `d floordiv 1` (plain map dims must span the operand)."""
    out = np.empty(shape)[tuple(slice(*b) for b in zip(starts, ends, steps))].shape
    arr = lambda v: "array<i64: " + ", ".join(map(str, v)) + ">"
    text = (
        f"func.func @main(%x: {tensor(shape)}) -> {tensor(out)} {{\n"
        f" %0 = graph.slice %x {{starts = {arr(starts)}, ends = {arr(ends)}, steps = {arr(steps)}}}"
        f" : ({tensor(shape)}) -> {tensor(out)}\n"
        f" %1 = graph.sqrt %0 : {tensor(out)}\n func.return %1 : {tensor(out)}\n}}"
    )
    (kernel,) = kernels(text)
    assert not ops_of(kernel, memref.LoadOp)
    check(text, sample(shape))


@pytest.mark.parametrize(
    "source, target",
    [((2, 3, 4), (6, 4)), ((6, 4), (2, 12)), ((1, 7), (7, 1)), ((2, 6), (3, 4)), ((1, 6, 1, 4), (3, 1, 8)),
     ((4, 6, 5), (2, 2, 30)), ((2, 0, 3), (0, 6)), ((1, 6, 5, 3), (1, 2, 3, 5, 3)), ((2, 3, 5, 3), (6, 15)),
     ((3, 1, 4), (12,)), ((12,), (3, 1, 4, 1)), ((1, 1), (1,)), ((), (1, 1))],
)
def test_reshape(source, target):
    s, t = tensor(source), tensor(target)
    text = (
        f"func.func @main(%x: {s}) -> {t} {{\n %0 = graph.abs %x : {s}\n"
        f" %1 = graph.reshape %0 : ({s}) -> {t}\n %2 = graph.neg %1 : {t}\n func.return %2 : {t}\n}}"
    )
    check(text, sample(source))


def test_reshape_that_splits_heads_reads_at_a_sum():
    """[1, s, 256] -> [1, s, 4, 64] -> heads first: read at (0, s, h * 64 + d), no division."""
    s, r, t = tensor((1, 5, 128)), tensor((1, 5, 2, 64)), tensor((1, 2, 5, 64))
    text = (
        f"func.func @main(%x: {s}) -> {t} {{\n %0 = graph.abs %x : {s}\n"
        f" %1 = graph.reshape %0 : ({s}) -> {r}\n"
        f" %2 = graph.transpose %1 {{perm = array<i64: 0, 2, 1, 3>}} : ({r}) -> {t}\n"
        f" %3 = graph.neg %2 : {t}\n func.return %3 : {t}\n}}"
    )
    (kernel,) = kernels(text)
    (generic,) = ops_of(kernel, GenericOp)
    assert maps_of(generic)[0] == "(d0, d1, d2, d3) -> (0, d2, ((d1 * 64) + d3))"
    check(text, sample((1, 5, 128)))


def test_channel_shuffle_reads_whole_rows_without_division():
    """ShuffleNet's shuffle: the channel of the read is `d2 * 3 + d1`, H and W are the output's
    (the reshape splits one dim, so its index map divides nothing per element)."""
    s, g, t = tensor((1, 6, 5, 70)), tensor((1, 2, 3, 5, 70)), tensor((1, 3, 2, 5, 70))
    text = (
        f"func.func @main(%x: {s}) -> {t} {{\n %0 = graph.reshape %x : ({s}) -> {g}\n"
        f" %1 = graph.transpose %0 {{perm = array<i64: 0, 2, 1, 3, 4>}} : ({g}) -> {t}\n func.return %1 : {t}\n}}"
    )
    (kernel,) = kernels(text)
    (generic,) = ops_of(kernel, GenericOp)
    assert maps_of(generic)[0] == "(d0, d1, d2, d3, d4) -> (0, ((d2 * 3) + d1), d3, d4)"
    check(text, sample((1, 6, 5, 70)))


def test_supports_names_what_it_rejects():
    text = """
func.func @main(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = graph.fused(%x) {name = "g", mode = "compile"} : (tensor<3x3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<3x3xf32>):
    %m = graph.matmul %a, %a : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %s = graph.softmax %m : (tensor<3x3xf32>) -> tensor<3x3xf32>
    graph.yield %s : tensor<3x3xf32>
  }
  func.return %0 : tensor<3x3xf32>
}
"""
    module = graphopt.parse(text)
    assert "the group has 2 anchors or reductions" in supports(next(op for op in module.walk() if isinstance(op, graph.FusedOp)))
    with pytest.raises(Exception, match="convert-graph-to-linalg: g: the group has 2"):
        ConvertGraphToLinalgPass().apply(Context(), module)


def test_supports_rejects_epilogue_reading_the_reduction_elsewhere():
    text = """
func.func @main(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = graph.fused(%x) {name = "g", mode = "compile"} : (tensor<3x3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<3x3xf32>):
    %s = graph.softmax %a : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %t = graph.transpose %s {perm = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    graph.yield %t : tensor<3x3xf32>
  }
  func.return %0 : tensor<3x3xf32>
}
"""
    group = next(op for op in graphopt.parse(text).walk() if isinstance(op, graph.FusedOp))
    assert "another element" in supports(group)
    assert supports(next(op for op in group.body.ops if isinstance(op, graph.SoftmaxOp))) is None


# ----------------------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", [(1,), (0,), (0, 2), (-1,), (0, 1, 2)])
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reductions_with_elementwise_producer(op, axes, keepdims):
    shape = (3, 1, 7)
    out = tuple(
        1 if i in {a % 3 for a in axes} else s
        for i, s in enumerate(shape)
        if keepdims or i not in {a % 3 for a in axes}
    )
    t, o = tensor(shape), tensor(out)
    axes_attr = f"array<i64: {', '.join(map(str, axes))}>"
    text = (
        f"func.func @main(%x: {t}, %y: {tensor((7,))}) -> {o} {{\n"
        f" %0 = graph.mul %x, %y : ({t}, {tensor((7,))}) -> {t}\n"
        f" %1 = graph.{op} %0 {{axes = {axes_attr}, keepdims = {str(keepdims).lower()}}} : ({t}) -> {o}\n"
        f" func.return %1 : {o}\n}}"
    )
    (kernel,) = kernels(text)
    reductions = [g for g in ops_of(kernel, GenericOp) if "reduction" in [str(i.data) for i in g.iterator_types]]
    assert len(reductions) == 1  # after the fill of its identity
    x = sample(shape, specials=False)
    check(text, x, sample((7,), seed=1), rtol=1e-4)
    x[0, 0, 3] = np.nan
    check(text, x, sample((7,), seed=1), rtol=1e-4)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min"])
def test_int_reductions(op):
    t, o = tensor((3, 7), "i32"), tensor((3,), "i32")
    text = f"func.func @main(%x: {t}) -> {o} {{\n %0 = graph.{op} %x {{axes = array<i64: 1>}} : ({t}) -> {o}\n func.return %0 : {o}\n}}"
    check(text, sample((3, 7), "i32"))


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_with_producers(op, axis):
    t = tensor((3, 4, 7))
    text = (
        f"func.func @main(%x: {t}, %y: {tensor((7,))}) -> {t} {{\n"
        f" %0 = graph.add %x, %y : ({t}, {tensor((7,))}) -> {t}\n"
        f" %1 = graph.{op} %0 {{axis = {axis} : i64}} : ({t}) -> {t}\n func.return %1 : {t}\n}}"
    )
    (kernel,) = kernels(text)
    allocs = ops_of(kernel, memref.AllocOp)
    assert len(allocs) == 2 and all(len(a.memref.type.get_shape()) == 2 for a in allocs)
    x = sample((3, 4, 7), specials=False)
    x[0, 0, 0] = np.inf
    check(text, x, sample((7,), seed=1, specials=False), rtol=1e-4)


def test_softmax_of_an_input_reads_it_directly():
    t = tensor((3, 7))
    text = f"func.func @main(%x: {t}) -> {t} {{\n %0 = graph.softmax %x : ({t}) -> {t}\n %1 = graph.neg %0 : {t}\n func.return %1 : {t}\n}}"
    softmax, _neg = kernels(text)
    fills, loops = fills_and_loops(softmax)
    assert len(fills) == 2 and len(loops) == 3  # two row statistics (fill, reduce), one normalization
    check(text, sample((3, 7), specials=False), rtol=1e-4)


@pytest.mark.parametrize("shape, axis", [((3, 7), -1), ((2, 3, 5), 1), ((2, 3, 5), -1)])
def test_layer_norm_with_producer_and_epilogue(shape, axis):
    t, n = tensor(shape), tensor(shape[axis % len(shape) :])
    text = (
        f"func.func @main(%x: {t}, %s: {n}, %b: {n}) -> {t} {{\n"
        f" %0 = graph.mul %x, %x : ({t}, {t}) -> {t}\n"
        f" %1 = graph.layer_norm %0, %s, %b {{axis = {axis} : i64}} : ({t}, {n}, {n}) -> {t}\n"
        f" func.return %1 : {t}\n}}"
    )
    check(
        text,
        sample(shape, specials=False),
        *(sample(shape[axis % len(shape) :], seed=i, specials=False) for i in (1, 2)),
        rtol=1e-4,
    )


# ----------------------------------------------------------------------------------------
# Matmul with epilogue
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [((3, 5), (5, 7)), ((2, 3, 5), (5, 1)), ((2, 1, 3, 4), (3, 4, 2)), ((1, 1), (1, 1))])
def test_matmul_with_epilogue(a, b):
    out = np.matmul(np.zeros(a), np.zeros(b)).shape
    text = (
        f"func.func @main(%a: {tensor(a)}, %b: {tensor(b)}, %c: {tensor(out[-1:])}) -> {tensor(out)} {{\n"
        f" %0 = graph.matmul %a, %b : ({tensor(a)}, {tensor(b)}) -> {tensor(out)}\n"
        f" %1 = graph.add %0, %c : ({tensor(out)}, {tensor(out[-1:])}) -> {tensor(out)}\n"
        f" %2 = graph.gelu %1 : {tensor(out)}\n func.return %2 : {tensor(out)}\n}}"
    )
    (kernel,) = kernels(text)
    (fill,), (contraction, epilogue) = fills_and_loops(kernel)
    assert list(fill.outputs) == list(contraction.outputs)  # the accumulator starts at 0
    iterators = [str(i.data) for i in contraction.iterator_types]
    assert iterators[-3:] == ["parallel", "reduction", "parallel"]  # (..., m, k, n): n innermost
    assert maps_of(contraction)[-1].endswith(f"-> ({', '.join(f'd{i}' for i in range(len(out) - 1))}, d{len(out)})")
    assert len(epilogue.outputs) == 1 and epilogue.outputs[0] is kernel.body.block.args[-1]
    check(text, sample(a, specials=False), sample(b, seed=1, specials=False), sample(out[-1:], seed=2), rtol=1e-4)


def test_matmul_computes_a_b_from_its_group_once():
    """b = transpose(k + bias), as attention's K^T (a group partitioning makes): computed into a
    temporary by one generic, then read by the contraction at (batch, k, n) of that buffer."""
    a, k, out = (2, 3, 5), (7, 2, 5), (2, 3, 7)
    text = (
        f"func.func @main(%a: {tensor(a)}, %k: {tensor(k)}, %c: {tensor((5,))}) -> {tensor(out)} {{\n"
        f" %r = graph.fused(%a, %k, %c) {{name = \"scores\", mode = \"compile\"}}"
        f" : ({tensor(a)}, {tensor(k)}, {tensor((5,))}) -> {tensor(out)} {{\n"
        f" ^bb0(%x: {tensor(a)}, %y: {tensor(k)}, %z: {tensor((5,))}):\n"
        f"  %0 = graph.add %y, %z : ({tensor(k)}, {tensor((5,))}) -> {tensor(k)}\n"
        f"  %1 = graph.transpose %0 {{perm = array<i64: 1, 2, 0>}} : ({tensor(k)}) -> {tensor((2, 5, 7))}\n"
        f"  %2 = graph.matmul %x, %1 : ({tensor(a)}, {tensor((2, 5, 7))}) -> {tensor(out)}\n"
        f"  graph.yield %2 : {tensor(out)}\n }}\n func.return %r : {tensor(out)}\n}}"
    )
    (kernel,) = kernels(text)
    b_kernel, contraction = fills_and_loops(kernel)[1]
    (b_buffer,) = data_buffers(kernel)
    assert b_kernel.outputs[0] is b_buffer and b_buffer.type.get_shape() == (2, 5, 7)
    assert contraction.inputs[1] is b_buffer and maps_of(contraction)[1] == "(d0, d1, d2, d3) -> (d0, d2, d3)"
    check(text, sample(a), sample(k, seed=1), sample((5,), seed=2), rtol=1e-4)


def test_blocked_matmul_loops_over_blocks_then_within_them():
    """f64: an f32 matmul with b an input packs b at run time (test_attention_pack.py)."""
    a, b, out, c = (2, 32, 256), (256, 512), (2, 32, 512), (512,)
    t = lambda shape: tensor(shape, "f64")
    text = (
        f"func.func @main(%a: {t(a)}, %b: {t(b)}, %c: {t(c)}) -> {t(out)} {{\n"
        f" %0 = graph.matmul %a, %b : ({t(a)}, {t(b)}) -> {t(out)}\n"
        f" %1 = graph.add %0, %c : ({t(out)}, {t(c)}) -> {t(out)}\n"
        f" %2 = graph.relu %1 : {t(out)}\n func.return %2 : {t(out)}\n}}"
    )
    (kernel,) = kernels(text)
    (fill,), (contraction, epilogue) = fills_and_loops(kernel)
    assert list(fill.outputs) == list(contraction.outputs)  # the accumulator starts at 0
    # (batch, mb, nb, kb, mi, ki, ni) with blocks (32, 128, 256)
    assert [str(i.data) for i in contraction.iterator_types] == [
        "parallel", "parallel", "parallel", "reduction", "parallel", "reduction", "parallel"
    ]
    assert tuple(contraction.get_static_loop_ranges()) == (2, 1, 2, 2, 32, 128, 256)
    dims = "(d0, d1, d2, d3, d4, d5, d6)"
    m, k, n = "((d1 * 32) + d4)", "((d3 * 128) + d5)", "((d2 * 256) + d6)"
    assert maps_of(contraction)[-3:] == [f"{dims} -> (d0, {m}, {k})", f"{dims} -> ({k}, {n})", f"{dims} -> (d0, {m}, {n})"]
    assert [op.memref.type.get_shape() for op in ops_of(kernel, memref.AllocOp)] == [(1, 32), (2, 128), (2, 256)]
    assert epilogue.outputs[0] is kernel.body.block.args[-1]


@pytest.mark.parametrize("a, b", [((32, 128), (128, 256)), ((48, 256), (256, 256)), ((32, 200), (200, 256))])
def test_matmul_stays_unblocked_unless_blocks_divide_it_and_b_is_more_than_one(a, b):
    t = lambda shape: tensor(shape, "f64")  # an f32 matmul with b an input packs b at run time
    o = t((a[0], b[1]))
    text = f"func.func @main(%a: {t(a)}, %b: {t(b)}) -> {o} {{\n %0 = graph.matmul %a, %b : ({t(a)}, {t(b)}) -> {o}\n func.return %0 : {o}\n}}"
    (kernel,) = kernels(text)
    assert [str(i.data) for i in ops_of(kernel, GenericOp)[0].iterator_types] == ["parallel", "reduction", "parallel"]


def test_int_matmul():
    a, b, o = tensor((3, 4), "i32"), tensor((4, 2), "i32"), tensor((3, 2), "i32")
    text = f"func.func @main(%a: {a}, %b: {b}) -> {o} {{\n %0 = graph.matmul %a, %b : ({a}, {b}) -> {o}\n func.return %0 : {o}\n}}"
    check(text, sample((3, 4), "i32"), sample((4, 2), "i32", seed=1))


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------


def test_pass_emits_kernels_in_execution_order():
    text = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = graph.exp %x : tensor<4x8xf32>
  %1 = graph.softmax %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = graph.matmul %1, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %4 = graph.reshape %3 : (tensor<3x4xf32>) -> tensor<4x3xf32>
  func.return %4 : tensor<4x3xf32>
}
"""
    names = [k.sym_name.data for k in kernels(text)]
    assert names == ["fused_exp_softmax_0", "matmul_0", "fused_transpose_reshape_1"]
    x, w = sample((4, 8), specials=False), sample((8, 3), seed=1)
    check(text, x, w, rtol=1e-4)
    check(text, x, w, fuse=False, rtol=1e-4)


@pytest.mark.parametrize(
    "op_text, result",
    [
        ("graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<3x7xf32>) -> tensor<3xf32>", "tensor<3xf32>"),
        ("graph.reduce_max %x {axes = array<i64: 1>} : (tensor<3x7xf32>) -> tensor<3xf32>", "tensor<3xf32>"),
        ("graph.softmax %x : (tensor<3x7xf32>) -> tensor<3x7xf32>", "tensor<3x7xf32>"),
        ("graph.log_softmax %x : (tensor<3x7xf32>) -> tensor<3x7xf32>", "tensor<3x7xf32>"),
    ],
)
def test_float_reductions_accumulate_with_reassoc(op_text, result):
    """The accumulating op of every reduction generic may be reassociated (so LLVM vectorizes it)."""
    (kernel,) = kernels(f"func.func @main(%x: tensor<3x7xf32>) -> {result} {{\n %0 = {op_text}\n func.return %0 : {result}\n}}")
    reductions = [g for g in ops_of(kernel, GenericOp) if "reduction" in [str(i.data) for i in g.iterator_types]]
    assert reductions
    for generic in reductions:
        accumulator = generic.body.block.last_op.operands[0].owner
        assert accumulator.operands[0] is generic.body.block.args[len(generic.inputs)]  # the first output
        assert str(accumulator.fastmath) == "#arith.fastmath<reassoc>"


# ----------------------------------------------------------------------------------------
# Convolution and pooling (numerics through the JIT: tests/test_compile_anchors.py)
# ----------------------------------------------------------------------------------------

@pytest.fixture
def loop_nest(monkeypatch):
    """The conv2d loop nest on f32: the direct and depthwise ukernels turned off."""
    monkeypatch.setattr(direct_conv, "applies", lambda *types: False)
    monkeypatch.setattr(depthwise_conv, "applies", lambda *types: False)


CONV = """
func.func @main(%x: tensor<1x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6x1x1xf32>) -> tensor<1x6x4x4xf32> {
  %0 = graph.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, groups = 2 : i64}
       : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  %1 = graph.add %0, %b : (tensor<1x6x4x4xf32>, tensor<6x1x1xf32>) -> tensor<1x6x4x4xf32>
  func.return %1 : tensor<1x6x4x4xf32>
}
"""


def test_conv2d_reads_stride_phases_of_x_and_sums_over_flat_output_positions(loop_nest):
    (kernel,) = kernels(CONV)
    phases, acc = data_buffers(kernel)
    # x [1, 4, 7, 7] padded to 9 x 9, split by stride 2 into 2 x 2 phases of rows of R = 5
    assert phases.type.get_shape() == (1, 4, 2, 2, 26)
    # 6 output channels, 3 per group: blocks of gcd(3, 4) = 1; OH * R = 4 * 5 positions
    assert acc.type.get_shape() == (1, 6, 1, 20)
    fills, (copy, last_column, conv, compact, epilogue) = fills_and_loops(kernel)
    *phase_fills, fill_acc = fills
    assert {f.outputs[0] for f in phase_fills} == {phases} and fill_acc.outputs[0] is conv.outputs[0]
    # only around x: in phase (0, 0) x's rows 1, 3, 5 and columns 1, 3, 5 land on rows and columns 1-3
    assert [maps_of(f)[-1] for f in phase_fills[:3]] == [
        f"(d0, d1, d2, d3) -> (d0, d1, 0, 0, {at})" for at in ("((d2 * 5) + d3)", "(((d2 * 5) + d3) + 9)", "(((d2 * 5) + d3) + 19)")
    ]
    # two columns of x an iteration, one to each column phase; x's last (7th) column alone
    assert list(copy.outputs) == [phases] * 2 and list(last_column.outputs) == [phases]
    assert maps_of(copy)[1:] == [
        "(d0, d1, d2, d3) -> (d0, d1, d2, (d3 * 2))",
        "(d0, d1, d2, d3) -> (d0, d1, d2, ((d3 * 2) + 1))",
        "(d0, d1, d2, d3) -> (d0, d1, ((d2 + 1) mod 2), 1, ((((d2 + 1) floordiv 2) * 5) + d3))",
        "(d0, d1, d2, d3) -> (d0, d1, ((d2 + 1) mod 2), 0, (((((d2 + 1) floordiv 2) * 5) + d3) + 1))",
    ]
    assert [str(i.data) for i in conv.iterator_types] == ["parallel", "parallel", "reduction", "reduction", "parallel"]
    assert maps_of(conv)[:2] == [
        "(d0, d1, d2, d3, d4) -> (d0, (((d1 floordiv 3) * 2) + d2), (d3 mod 2), 0, (d4 + ((d3 floordiv 2) * 5)))",
        "(d0, d1, d2, d3, d4) -> (d1, d2, d3, 0)",
    ]
    assert maps_of(conv)[-1] == "(d0, d1, d2, d3, d4) -> (d0, d1, 0, d4)"
    assert len(ops_of(conv, arith.MulfOp)) == 3  # the window row, unrolled
    assert maps_of(compact)[0] == "(d0, d1, d2, d3) -> (d0, d1, 0, ((d2 * 5) + d3))"
    assert epilogue.outputs[0] is kernel.body.block.args[-1]


def test_conv2d_body_computes_a_block_of_output_channels_with_fused_multiply_adds(loop_nest):
    text = CONV.replace("groups = 2 : i64", "groups = 1 : i64").replace("6x2x3x3", "8x4x3x3")
    text = text.replace("1x6x4x4", "1x8x4x4").replace("6x1x1", "8x1x1")
    (kernel,) = kernels(text)
    _phases, acc = data_buffers(kernel)
    assert acc.type.get_shape() == (1, 2, 4, 20)
    conv = fills_and_loops(kernel)[1][2]  # after x's stride-phase copy (two loops) and the fills
    assert list(conv.outputs) == [acc] * 4
    assert maps_of(conv)[-4:] == [f"(d0, d1, d2, d3, d4) -> (d0, d1, {i}, d4)" for i in range(4)]
    assert len(ops_of(conv, arith.MulfOp)) == 4 * 3
    for add in ops_of(conv, arith.AddfOp):
        assert str(add.fastmath) == "#arith.fastmath<reassoc,contract>"
        assert str(add.operands[1].owner.fastmath) == "#arith.fastmath<contract>"


@pytest.mark.parametrize("value, folded", [(0.0, True), (-0.0, False), (1.0, False)])
def test_conv2d_lowers_a_zero_pad_canonicalize_folded_into_its_padding(value, folded, loop_nest):
    """canonicalize folds a zero pad of H and W into the conv's padding (compile runs it)."""
    text = f"""
func.func @main(%x: tensor<1x2x5x5xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x6x5xf32> {{
  %0 = graph.fused(%x, %w) {{name = "g", mode = "compile"}} : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x5xf32> {{
  ^bb0(%a: tensor<1x2x5x5xf32>, %b: tensor<3x2x3x3xf32>):
    %1 = graph.pad %a {{pads = array<i64: 0, 0, 1, 0, 0, 0, 2, 1>, value = {value} : f64}} : (tensor<1x2x5x5xf32>) -> tensor<1x2x8x6xf32>
    %2 = graph.conv2d %1, %b {{padding = array<i64: 0, 1, 0, 0>}} : (tensor<1x2x8x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x5xf32>
    graph.yield %2 : tensor<1x3x6x5xf32>
  }}
  func.return %0 : tensor<1x3x6x5xf32>
}}
"""
    module = graphopt.parse(text)
    CanonicalizePass().apply(Context(), module)
    text = str(module)
    (kernel,) = kernels(text)
    allocs = [buffer.type.get_shape() for buffer in data_buffers(kernel)]
    if folded:  # x itself copied into the phases: padded to 8 x 7, rows of 7 (6 x 7 outputs + reach 16)
        assert allocs[0] == (1, 2, 1, 1, 58) and not ops_of(kernel, arith.SelectOp)
    else:  # the pad computed into a temporary first
        assert allocs[1] == (1, 2, 8, 6) and ops_of(kernel, arith.SelectOp)
    check(text, sample((1, 2, 5, 5)), sample((3, 2, 3, 3), seed=1, specials=False), rtol=1e-4)


@pytest.fixture
def pool_loop_nest(monkeypatch):
    """The pooling loop nest on f32: the pooling ukernel turned off."""
    monkeypatch.setattr(pooling, "applies", lambda *types: False)


def test_f32_pool2d_calls_the_pooling_ukernel_on_x():
    attributes = "kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>"
    t, o = tensor((1, 2, 9, 20)), tensor((1, 2, 5, 10))
    text = f"func.func @main(%x: {t}) -> {o} {{\n %0 = graph.avg_pool2d %x {{{attributes}}} : ({t}) -> {o}\n func.return %0 : {o}\n}}"
    kernel, declaration = kernels(text)
    (call,) = ops_of(kernel, func.CallOp)
    assert call.callee.string_value() == "graphopt_spool_avg_k3x3_s2x2_p1x1_1x2x9x20_1x2x5x10"
    assert list(call.arguments) == list(kernel.body.block.args) and not ops_of(kernel, GenericOp)
    assert declaration.sym_name.data == call.callee.string_value()


POOL_ATTRIBUTES = "kernel = array<i64: 3, 2>, padding = array<i64: 1, 0, 1, 1>"


@pytest.mark.parametrize("op, divides_by_count", [("max_pool2d", None), ("avg_pool2d", True), ("avg_pool2d", False)])
def test_padded_pool2d_reduces_the_unrolled_window_of_a_padded_copy(op, divides_by_count, pool_loop_nest):
    attributes = POOL_ATTRIBUTES
    if divides_by_count is not None:
        attributes += f", count_include_pad = {str(not divides_by_count).lower()}"
    t, o = tensor((1, 2, 7, 20)), tensor((1, 2, 7, 20))  # output rows of 20: not over stride phases
    text = f"func.func @main(%x: {t}) -> {o} {{\n %0 = graph.{op} %x {{{attributes}}} : ({t}) -> {o}\n func.return %0 : {o}\n}}"
    (kernel,) = kernels(text)
    (padded,) = data_buffers(kernel)
    assert padded.type.get_shape() == (1, 2, 9, 21)
    fills, loops = fills_and_loops(kernel)
    fill, (copy, pool) = fills[0], loops[:2]  # x copied into the filled buffer: no selects
    assert list(fill.outputs) == list(copy.outputs)
    assert maps_of(copy)[1] == "(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 floordiv 1))"
    assert not ops_of(copy, arith.SelectOp) and not ops_of(kernel, memref.LoadOp)
    assert [str(i.data) for i in pool.iterator_types] == ["parallel"] * 4
    assert len(pool.inputs) == 6 and set(pool.inputs) == {padded}
    assert maps_of(pool)[0] == "(d0, d1, d2, d3) -> (d0, d1, (d2 floordiv 1), (d3 floordiv 1))"
    assert maps_of(pool)[-2] == "(d0, d1, d2, d3) -> (d0, d1, (d2 + 2), (d3 + 1))"
    assert bool(ops_of(kernel, arith.IndexCastOp)) is bool(divides_by_count)


def prologue_pool(x_shape, out_shape, attributes: str) -> str:
    """@main(x, b) = max_pool2d(relu(x + b)) as one graph.fused group."""
    t, b, o = tensor(x_shape), tensor((x_shape[1], 1, 1)), tensor(out_shape)
    return f"""
func.func @main(%x: {t}, %b: {b}) -> {o} {{
  %0 = graph.fused(%x, %b) {{name = "g", mode = "compile"}} : ({t}, {b}) -> {o} {{
  ^bb0(%a: {t}, %c: {b}):
    %1 = graph.add %a, %c : ({t}, {b}) -> {t}
    %2 = graph.relu %1 : {t}
    %3 = graph.max_pool2d %2 {{{attributes}}} : ({t}) -> {o}
    graph.yield %3 : {o}
  }}
  func.return %0 : {o}
}}
"""


def check_prologue_pool(text, x_shape):
    check(text, sample(x_shape), sample((x_shape[1], 1, 1), seed=1))


def test_pool2d_computes_its_prologue_at_each_tap_of_windows_that_do_not_overlap(pool_loop_nest):
    text = prologue_pool((2, 3, 7, 34), (2, 3, 2, 17), "kernel = array<i64: 3, 2>, strides = array<i64: 3, 2>")
    (kernel,) = kernels(text)
    assert not ops_of(kernel, memref.AllocOp)
    (pool,) = ops_of(kernel, GenericOp)
    assert len(ops_of(pool, arith.AddfOp)) == 6  # the prologue, once per tap
    assert maps_of(pool)[0] == "(d0, d1, d2, d3) -> (d0, d1, (d2 * 3), (d3 * 2))"
    check_prologue_pool(text, (2, 3, 7, 34))


def test_pool2d_computes_a_prologue_once_for_overlapping_windows(pool_loop_nest):
    text = prologue_pool((1, 2, 6, 20), (1, 2, 2, 18), "kernel = array<i64: 3, 3>, strides = array<i64: 2, 1>")
    (kernel,) = kernels(text)
    (temporary,) = ops_of(kernel, memref.AllocOp)
    assert temporary.memref.type.get_shape() == (1, 2, 6, 20)
    prologue, pool = ops_of(kernel, GenericOp)
    assert set(pool.inputs) == {temporary.memref} and not ops_of(pool, arith.AddfOp)
    check_prologue_pool(text, (1, 2, 6, 20))


def test_pool2d_with_short_output_rows_reduces_over_stride_phases(pool_loop_nest):
    """3x3/2 windows, padding 1, over rows of 7 outputs: relu(x + b) computed once, copied into its
    2 x 2 stride phases (-inf around it, rows of R = 8), one loop over all 7 * 8 positions p reading each tap
    at stride 1 (tap (2, 2) in phase (0, 0) at p + R + 1), then the outputs picked out."""
    attributes = "kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>"
    text = prologue_pool((1, 2, 13, 13), (1, 2, 7, 7), attributes)
    (kernel,) = kernels(text)
    phases, prologue, pooled = (buffer.type.get_shape() for buffer in data_buffers(kernel))
    assert phases[:4] == (1, 2, 2, 2) and prologue == (1, 2, 13, 13) and pooled == (1, 2, 7 * 8)
    pool = next(g for g in ops_of(kernel, GenericOp) if len(g.iterator_types) == 3)
    assert [str(i.data) for i in pool.iterator_types] == ["parallel"] * 3
    assert maps_of(pool)[-2] == "(d0, d1, d2) -> (d0, d1, 0, 0, (d2 + 9))"
    check_prologue_pool(text, (1, 2, 13, 13))


def test_pool2d_window_larger_than_the_unrolled_limit_loops_over_its_rows(pool_loop_nest):
    text = prologue_pool((1, 2, 9, 18), (1, 2, 1, 2), "kernel = array<i64: 9, 9>, strides = array<i64: 9, 9>")
    (kernel,) = kernels(text)
    assert not data_buffers(kernel)
    (fill,), (pool,) = fills_and_loops(kernel)
    assert list(fill.outputs) == list(pool.outputs)
    assert [str(i.data) for i in pool.iterator_types] == ["parallel"] * 3 + ["reduction", "parallel"]
    assert maps_of(pool)[0] == "(d0, d1, d2, d3, d4) -> (d3)"  # the window-row shape operand
    assert len(ops_of(pool, arith.AddfOp)) == 9
    check_prologue_pool(text, (1, 2, 9, 18))


# ----------------------------------------------------------------------------------------
# Pad, concat and gather in elementwise groups
# ----------------------------------------------------------------------------------------


def test_pad_concat_gather_in_one_elementwise_kernel():
    text = """
func.func @main(%x: tensor<3x2xf32>, %y: tensor<3x5xf32>, %i: tensor<4xi64>) -> tensor<3x4xf32> {
  %0 = graph.exp %x : tensor<3x2xf32>
  %1 = graph.concat %0, %y {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<3x7xf32>
  %2 = graph.pad %1 {pads = array<i64: 0, 1, 0, 0>, value = 5.0 : f64} : (tensor<3x7xf32>) -> tensor<3x8xf32>
  %3 = graph.gather %2, %i {axis = 1 : i64} : (tensor<3x8xf32>, tensor<4xi64>) -> tensor<3x4xf32>
  %4 = graph.neg %3 : tensor<3x4xf32>
  func.return %4 : tensor<3x4xf32>
}
"""
    (kernel,) = kernels(text)
    (data,) = ops_of(kernel, memref.AllocOp)
    assert data.memref.type.get_shape() == (3, 8)  # gather's computed data, in a temporary
    padded, gathered = ops_of(kernel, GenericOp)
    assert len(ops_of(padded, arith.SelectOp)) == 2  # pad's fill, concat's choice of input
    assert all(load.memref is not data.memref for load in ops_of(padded, memref.LoadOp))
    (load,) = ops_of(gathered, memref.LoadOp)
    assert load.memref is data.memref


def test_concat_of_channels_loops_over_each_input_without_selects():
    """ShuffleNet's concat + relu: one generic per input over its channels of the output (an empty
    input gets none), each reading its input plainly, with (h, w) merged into one loop dim."""
    a, e, b, o = tensor((1, 5, 3, 7)), tensor((1, 0, 3, 7)), tensor((1, 2, 3, 7)), tensor((1, 7, 3, 7))
    text = (
        f"func.func @main(%a: {a}, %e: {e}, %b: {b}) -> {o} {{\n"
        f" %c = graph.concat %a, %e, %b {{axis = 1 : i64}} : ({a}, {e}, {b}) -> {o}\n"
        f" %r = graph.relu %c : {o}\n func.return %r : {o}\n}}"
    )
    (kernel,) = kernels(text)
    first, second = ops_of(kernel, GenericOp)
    assert not ops_of(kernel, arith.SelectOp)
    read = "(d0, d1, d2) -> (d0, d1, (d2 floordiv 7), (d2 mod 7))"  # after the extents of d2 and d1
    assert maps_of(first)[2:] == [read, "(d0, d1, d2) -> (d0, (d1 floordiv 1), (d2 floordiv 7), (d2 mod 7))"]
    assert maps_of(second)[2:] == [read, "(d0, d1, d2) -> (d0, (d1 + 5), (d2 floordiv 7), (d2 mod 7))"]
    check(text, sample((1, 5, 3, 7)), sample((1, 0, 3, 7)), sample((1, 2, 3, 7), seed=1))


def test_softmax_computes_each_exp_once_on_the_cpu():
    text = "func.func @main(%x: tensor<3x7xf32>) -> tensor<3x7xf32> {\n %0 = graph.softmax %x : (tensor<3x7xf32>) -> tensor<3x7xf32>\n func.return %0 : tensor<3x7xf32>\n}"
    (kernel,) = kernels(text)
    exps = [op for op in kernel.walk() if op.name == "math.exp"]
    assert len(exps) == 1
    sum_of_exp = exps[0].parent_op()
    assert [o is kernel.body.block.args[-1] for o in sum_of_exp.outputs] == [False, True]


@pytest.mark.parametrize("op", ["reduce_mean {axes = array<i64: 2, 3>, keepdims = true}", "avg_pool2d {kernel = array<i64: 7, 7>}"])
def test_f32_global_average_pool_sums_planes_by_the_row_sum_ukernel(op):
    """A mean over 7x7 planes (a reduce_mean, or an avg_pool2d whose window is the plane)
    calls the row-sum ukernel on x and out, then divides out by 49 in place (numerics:
    tests/test_conv_pool_kernels.py)."""
    t, o = tensor((1, 8, 7, 7)), tensor((1, 8, 1, 1))
    name, attributes = op.split(" ", 1)
    text = f"func.func @main(%x: {t}) -> {o} {{\n %0 = graph.{name} %x {attributes} : ({t}) -> {o}\n func.return %0 : {o}\n}}"
    kernel, _ = kernels(text)
    (call,) = ops_of(kernel, func.CallOp)
    assert call.callee.string_value() == "graphopt_srowsum_1x8x7x7_1x8x1x1"
    assert list(call.arguments) == list(kernel.body.block.args)
    (divide,) = ops_of(kernel, GenericOp)
    assert list(divide.outputs) == [call.arguments[1]] and len(ops_of(divide, arith.DivfOp)) == 1


@pytest.mark.parametrize(
    "x_shape, perm, scaled, tiled",
    [
        ((1, 8, 12, 16), (0, 3, 1, 2), True, True),  # NHWC to NCHW: tiles of 4 columns, times a scale
        ((1, 9, 24, 40), (0, 3, 1, 2), False, True),  # tiles of 8 columns
        ((2, 5, 32, 3), (0, 3, 1, 2), True, True),  # two images, tiles of 16 columns
        ((5, 6, 4, 16), (3, 0, 1, 2), False, True),  # x's last dim read along the first
        ((1, 16, 8, 12), (0, 2, 3, 1), True, False),  # NCHW to NHWC: plain loops
        ((1, 7, 7, 32), (0, 3, 1, 2), False, False),  # rows of 7: plain loops
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_transposes_in_tiles_match_the_interpreter(x_shape, perm, scaled, tiled, threads):
    """Transposes, alone or times a per-channel scale, through the whole compile (canonicalized
    into reshapes and a transpose of fewer dims), whether they run in transposing tiles
    (`Kernel.transposing_tile`) or not: the interpreter's results, NaN and inf included."""
    out_shape = tuple(x_shape[p] for p in perm)
    t = lambda shape: f"tensor<{'x'.join(map(str, shape))}xf32>"
    scale = f"tensor<{out_shape[1]}x1x1xf32>"
    body = f"  %0 = graph.transpose %x {{perm = array<i64: {', '.join(map(str, perm))}>}} : ({t(x_shape)}) -> {t(out_shape)}\n"
    if scaled:
        body += f"  %1 = graph.mul %0, %s : ({t(out_shape)}, {scale}) -> {t(out_shape)}\n"
    arguments = f"%x: {t(x_shape)}" + (f", %s: {scale}" if scaled else "")
    text = f"func.func @main({arguments}) -> {t(out_shape)} {{\n{body}  func.return %{int(scaled)} : {t(out_shape)}\n}}"
    (generic,) = [op for kernel in kernels(text) for op in kernel.walk() if isinstance(op, GenericOp)]
    assert len(generic.iterator_types.data) == (len(x_shape) + 1 if tiled else len(x_shape) - 1)
    module = graphopt.parse(text)
    arrays = [sample(x_shape)] + ([sample((out_shape[1], 1, 1), seed=1)] if scaled else [])
    expected = graphopt.interpret(module, *arrays)
    actual = graphopt.compile(module, backends=("cpu",), threads=threads)(*arrays)
    np.testing.assert_array_equal(actual[0], expected[0])
