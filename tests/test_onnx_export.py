"""graphopt.to_onnx (graphopt/onnx_export.py) against the interpreter: ONNX Runtime runs the
exported model, and graphopt.from_onnx imports it back.

Each case is a small module on odd shapes that computes several ops side by side (one output
each); together the cases use every graph op (checked by `test_every_graph_op_is_covered`).
"""

from __future__ import annotations

import numpy as np
import pytest

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.onnx_export import EXPORTERS

ort = pytest.importorskip("onnxruntime")

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
rng = np.random.default_rng(18)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def positive(*shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


def unary_ops():
    b = GraphBuilder()
    x, p = b.input("x", (3, 5)), b.input("p", (3, 5))
    names = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "erf", "sin", "cos", "floor", "ceil"]
    results = [getattr(b, name)(x) for name in names]
    results += [b.log(p), b.sqrt(p), b.rsqrt(p), b.reciprocal(p), b.gelu(x), b.gelu(x, approximate="tanh"),
                b.leaky_relu(x, alpha=0.2), b.clip(x, min=-0.5, max=0.75), b.clip(x, max=0.25)]
    return b.finish(*results), [normal(3, 5), positive(3, 5)]


def binary_ops():
    b = GraphBuilder()
    x, y, p = b.input("x", (2, 3, 5)), b.input("y", (3, 1)), b.input("p", (5,))
    results = [b.add(x, y), b.sub(x, y), b.mul(x, y), b.div(x, y), b.max(x, y), b.min(x, y), b.pow(p, x)]
    comparisons = [b.cmp(x, y, predicate=p) for p in ("eq", "ne", "lt", "le", "gt", "ge")]
    y_rounded = np.round(normal(3, 1))
    x_values = np.where(rng.random((2, 3, 5)) < 0.3, np.broadcast_to(y_rounded, (2, 3, 5)), normal(2, 3, 5))
    return b.finish(*results, *comparisons, b.select(comparisons[2], x, y)), [x_values, y_rounded, positive(5)]


def casts_and_integers():
    b = GraphBuilder()
    x, i = b.input("x", (4, 3)), b.input("i", (4, 3), "i32")
    results = [b.cast(x, "i32"), b.cast(x, "i1"), b.cast(i, "f64"), b.clip(i, min=-1.5, max=2.5), b.add(i, i)]
    return b.finish(*results), [normal(4, 3) * 3, rng.integers(-4, 5, (4, 3)).astype(np.int32)]


def data_movement():
    b = GraphBuilder()
    x, i = b.input("x", (2, 3, 5)), b.input("i", (4,), "i64")
    results = [
        b.reshape(x, (5, 6)), b.transpose(x, perm=[2, 0, 1]), b.broadcast_to(b.input("v", (3, 1)), (2, 3, 4)),
        b.slice(x, starts=[0, 1, 0], ends=[2, 3, 5], steps=[1, 1, 2]), b.concat([x, x], axis=1),
        b.pad(x, pads=[0, 1, 2, 1, 0, 0], value=1.5), b.gather(x, i, axis=2),
    ]  # fmt: skip
    return b.finish(*results), [normal(2, 3, 5), np.asarray([0, -1, 7, -9], np.int64), normal(3, 1)]


def reductions():
    b = GraphBuilder()
    x = b.input("x", (3, 4, 5))
    results = [b.reduce_sum(x, axes=[0, 2]), b.reduce_mean(x, axes=[1], keepdims=True), b.reduce_max(x, axes=[2]),
               b.reduce_min(x, axes=[0, 1, 2]), b.softmax(x, axis=1), b.log_softmax(x),
               b.layer_norm(x, b.constant(positive(4, 5)), b.constant(normal(4, 5)), axis=-2, epsilon=1e-3)]
    return b.finish(*results), [normal(3, 4, 5)]


def contractions_and_windows():
    b = GraphBuilder()
    a, c, x = b.input("a", (2, 3, 4, 5)), b.input("c", (3, 5, 7)), b.input("x", (2, 4, 9, 7))
    conv = b.conv2d(x, b.constant(normal(6, 2, 3, 2)), strides=[2, 1], dilations=[1, 2], padding=[1, 0, 2, 1], groups=2)
    norm = b.batch_norm(conv, *(b.constant(v) for v in (positive(6), normal(6), normal(6), positive(6))), epsilon=1e-3)
    pools = [b.max_pool2d(x, kernel=[3, 2], strides=[2, 2], padding=[1, 1, 1, 0]),
             b.avg_pool2d(x, kernel=[3, 3], strides=[1, 2], padding=[1, 1, 1, 1]),
             b.avg_pool2d(x, kernel=[2, 3], strides=[2, 1], padding=[1, 0, 0, 1], count_include_pad=True)]
    return b.finish(b.matmul(a, c), norm, *pools), [normal(2, 3, 4, 5), normal(3, 5, 7), normal(2, 4, 9, 7)]


def groups_and_calls():
    """A graph.fused, a func.call and a result returned twice and straight from an input: inlined, then Identity."""
    module = graphopt.parse("""
    func.func @main(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>) {
      %f = graph.fused(%x) {name = "fused_exp_relu_0", mode = "compile"} : (tensor<3x5xf32>) -> tensor<3x5xf32> {
      ^bb0(%a: tensor<3x5xf32>):
        %e = graph.exp %a : tensor<3x5xf32>
        %r = graph.relu %e : tensor<3x5xf32>
        graph.yield %r : tensor<3x5xf32>
      }
      %c = func.call @twice(%f) : (tensor<3x5xf32>) -> tensor<3x5xf32>
      func.return %c, %c, %x, %f : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
    }
    func.func @twice(%y: tensor<3x5xf32>) -> tensor<3x5xf32> {
      %s = graph.add %y, %y : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      func.return %s : tensor<3x5xf32>
    }
    """)
    return module, [normal(3, 5)]


CASES = [unary_ops, binary_ops, casts_and_integers, data_movement, reductions, contractions_and_windows,
         groups_and_calls]


def run_ort(model, arrays: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


def assert_same(actual: list[np.ndarray], expected: tuple[np.ndarray, ...]) -> None:
    assert len(actual) == len(expected)
    for index, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype and got.shape == want.shape, f"output #{index}"
        np.testing.assert_allclose(got, want, **TOLERANCE, err_msg=f"output #{index}")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_onnx_runtime_matches_the_interpreter(case) -> None:
    module, arrays = case()
    assert_same(run_ort(graphopt.to_onnx(module), arrays), graphopt.interpret(module, *arrays))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_import_of_the_export_interprets_the_same(case) -> None:
    module, arrays = case()
    reimported = graphopt.from_onnx(graphopt.to_onnx(module))
    assert_same(list(graphopt.interpret(reimported, *arrays)), graphopt.interpret(module, *arrays))


def test_every_graph_op_is_covered() -> None:
    exported = {op.name for case in CASES for op in case()[0].walk()}
    graph_ops = {op.name for op in graph.GRAPH_OPS}
    assert graph_ops - {"graph.yield"} <= exported
    assert set(EXPORTERS) == graph_ops - {"graph.fused", "graph.yield"}


def test_a_group_and_a_single_op_export_their_inputs_and_results() -> None:
    module, (x,) = groups_and_calls()
    fused = next(op for op in module.walk() if isinstance(op, graph.FusedOp))
    (result,) = run_ort(graphopt.to_onnx(fused), [x])
    np.testing.assert_allclose(result, np.maximum(np.exp(x), 0), **TOLERANCE)
    add = next(op for op in module.walk() if isinstance(op, graph.AddOp))
    model = graphopt.to_onnx(add)
    assert len(model.graph.input) == 1  # add %y, %y reads one input
    np.testing.assert_allclose(run_ort(model, [x])[0], x + x, **TOLERANCE)


def test_an_op_without_mapping_is_an_error_naming_it(monkeypatch) -> None:
    monkeypatch.delitem(EXPORTERS, "graph.erf")
    module, _ = unary_ops()
    with pytest.raises(graphopt.GraphoptError, match=r"'graph.erf' has no ONNX equivalent"):
        graphopt.to_onnx(module)
