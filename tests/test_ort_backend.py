"""The ort backend (graphopt/backends/onnxruntime.py) against the interpreter: whole modules
compiled on ("ort",) and ("cpu", "ort"), a pin, its kernels' I/O binding, its refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from test_onnx_export import CASES, groups_and_calls

import graphopt
from graphopt.backends import get_backend
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.onnx_export import EXPORTERS

pytest.importorskip("onnxruntime")

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
rng = np.random.default_rng(18)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def conv_relu():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 11, 9))
    conv = b.conv2d(x, b.constant(normal(5, 3, 3, 3)), strides=[2, 1], dilations=[1, 1], padding=[1, 1, 1, 1],
                    groups=1)
    return b.finish(b.relu(b.add(conv, b.constant(normal(5, 1, 1))))), [normal(2, 3, 11, 9)]


def softmax():
    b = GraphBuilder()
    x = b.input("x", (7, 13))
    return b.finish(b.softmax(b.mul(x, b.constant(np.float32(0.5))), axis=0)), [normal(7, 13)]


def mlp():
    return graphopt.parse(EXAMPLES / "mlp.mlir"), [normal(8, 64)]


def check(module, arrays, backends) -> graphopt.Executable:
    executable = graphopt.compile(module, backends=backends, threads=1)
    for _ in range(2):  # the second call: fresh result arrays (bound again), the same intermediate buffers
        for got, want in zip(executable(*arrays), graphopt.interpret(module, *arrays), strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, **TOLERANCE)
    return executable


@pytest.mark.parametrize("backends", [("ort",), ("cpu", "ort")], ids="+".join)
@pytest.mark.parametrize("case", [conv_relu, mlp, softmax], ids=lambda case: case.__name__)
def test_compiled_matches_the_interpreter(case, backends) -> None:
    executable = check(*case(), backends)
    if backends == ("ort",):
        assert {step.backend for step in executable.steps} == {"ort"}


@pytest.mark.parametrize("case", [c for c in CASES if c is not groups_and_calls], ids=lambda case: case.__name__)
def test_every_graph_op_and_element_type_runs_on_ort(case) -> None:
    """The exporter's cases (every graph op; f32, f64, i32, i64 and i1 buffers) compiled on ort alone."""
    executable = check(*case(), ("ort",))
    assert {step.backend for step in executable.steps} == {"ort"}


def test_a_pinned_op_runs_on_ort() -> None:
    module = graphopt.parse("""
    func.func @main(%x: tensor<5x3xf32>) -> tensor<5x3xf32> {
      %e = graph.exp %x {graph.backend = "ort", graph.no_fuse} : tensor<5x3xf32>
      %r = graph.relu %e : tensor<5x3xf32>
      func.return %r : tensor<5x3xf32>
    }
    """)
    executable = check(module, [normal(5, 3)], ("cpu",))
    assert [step.backend for step in executable.steps] == ["ort", "cpu"]


def test_the_kernel_writes_the_output_array_and_rebinds_new_arrays() -> None:
    module, (x,) = softmax()
    group = next(op for op in module.walk() if isinstance(op, graph.SoftmaxOp))
    (kernel,) = get_backend("ort").compile([group], threads=2)
    assert kernel.session.get_session_options().intra_op_num_threads == 2
    first, second = np.empty((7, 13), np.float32), np.empty((7, 13), np.float32)
    kernel([x], [first])
    kernel([-x], [second])
    np.testing.assert_allclose(first, _softmax(x), **TOLERANCE)
    np.testing.assert_allclose(second, _softmax(-x), **TOLERANCE)
    again = x.copy()
    kernel([again], [second])
    binding = kernel.local.binding
    again *= 2  # the same array objects, new contents: the binding stays, the run reads them
    kernel([again], [second])
    assert kernel.local.binding is binding
    np.testing.assert_allclose(second, _softmax(2 * x), **TOLERANCE)


def _softmax(x: np.ndarray) -> np.ndarray:
    exps = np.exp(x - x.max(axis=0))
    return exps / exps.sum(axis=0)


def test_constant_operands_are_in_the_model_and_duplicate_operands_read_once() -> None:
    module = graphopt.parse("""
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
      %m = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %s = graph.add %c, %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      func.return %s : tensor<4xf32>
    }
    """)
    mul, add = [op for op in module.walk() if isinstance(op, (graph.MulOp, graph.AddOp))]
    x, out = np.arange(4, dtype=np.float32), np.empty(4, np.float32)
    kernels = get_backend("ort").compile([mul, add], threads=1)
    kernels[0]([x, x], [out])
    np.testing.assert_array_equal(out, x * x)
    kernels[1]([np.full(4, 99, np.float32), x], [out])  # the constant operand comes from the model
    np.testing.assert_array_equal(out, x + [1, 2, 3, 4])


def test_refusals_say_why(monkeypatch) -> None:
    ort = get_backend("ort")
    b = GraphBuilder()
    relu = b.relu(b.input("i", (3,), "i64"))
    erf = b.erf(b.input("x", (3,)))
    b.finish(relu, erf)
    assert "Could not find an implementation for Relu" in ort.supports(relu.owner)
    monkeypatch.delitem(EXPORTERS, "graph.erf")
    assert ort.supports(erf.owner) == "'graph.erf' has no ONNX equivalent; to_onnx cannot export it"
    fallback = graphopt.parse("""
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %r = graph.fused(%x) {name = "fused_relu_0", mode = "fallback"} : (tensor<4xf32>) -> tensor<4xf32> {
      ^bb0(%a: tensor<4xf32>):
        %n = graph.relu %a : tensor<4xf32>
        graph.yield %n : tensor<4xf32>
      }
      func.return %r : tensor<4xf32>
    }
    """)
    group = next(op for op in fallback.walk() if isinstance(op, graph.FusedOp))
    assert ort.supports(group) == "a fallback group is not compiled as one kernel"


def test_without_onnxruntime_the_backend_says_so(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    module, arrays = softmax()
    group = next(op for op in module.walk() if isinstance(op, graph.SoftmaxOp))
    ort = get_backend("ort")
    assert "the onnxruntime package is not installed" in ort.supports(group)
    with pytest.raises(graphopt.GraphoptError, match=r'backend "ort" cannot run: the onnxruntime package'):
        ort.compile([group], threads=1)
    executable = check(module, arrays, ("ort",))
    assert [step.backend for step in executable.steps] == ["reference"]
    assert "onnxruntime package is not installed" in executable.report()


def test_measured_search_places_groups_between_cpu_and_ort(tmp_path) -> None:
    module, arrays = conv_relu()
    executable = graphopt.compile(module, backends=("cpu", "ort"), search="cost", measure=True,
                                  cost_cache=tmp_path / "costs.json", threads=1)
    assert {step.backend for step in executable.steps} <= {"cpu", "ort"}
    np.testing.assert_allclose(executable(*arrays)[0], graphopt.interpret(module, *arrays)[0], **TOLERANCE)
    assert get_backend("ort").estimate(executable.steps[0].op) > 0
