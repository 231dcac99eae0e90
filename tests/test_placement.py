"""Issue 18, deliverables 3-5: fallback groups run compiled op by op, a group can be replaced by
an implementation of its own (from Python or from the IR), and placement is data with a strict
mode. The interpreter is the oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt import GraphBuilder
from graphopt.backends import get_backend
from graphopt.backends.implementation import IMPLEMENTATION, unregister_implementation
from graphopt.dialects import graph
from graphopt.parsing import make_context
from graphopt.runtime.executable import StepPlacement
from graphopt.tools import graph_run
from graphopt.tools.graph_run import random_inputs
from graphopt.transforms.fuse import FusePass

EXAMPLES = Path(__file__).parents[1] / "examples"

MLP_LAYER = """
func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = graph.add %0, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %2 = graph.relu %1 : tensor<8x16xf32>
  %3 = graph.softmax %2 {axis = -1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %3 : tensor<8x16xf32>
}
"""
"""One fused group (fused_matmul_add_relu_0) and an op alone (softmax)."""


BOUND_IN_THE_IR = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = graph.fused(%x) {name = "my_group", mode = "fallback", graph.implementation = "test_halved_exp"} : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %1 = graph.exp %a : tensor<8x16xf32>
    %2 = graph.constant dense<0.5> : tensor<f32>
    %3 = graph.mul %1, %2 : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    graph.yield %3 : tensor<8x16xf32>
  }
  %4 = graph.neg %0 : tensor<8x16xf32>
  func.return %4 : tensor<8x16xf32>
}
"""
"""A fallback group bound in the IR to the implementation `test_halved_exp`, then an op alone."""


def layer_inputs(seed: int = 0) -> list[np.ndarray]:
    return random_inputs(graphopt.parse(MLP_LAYER).body.block.first_op, seed)


def fused_in_fallback_mode(module):
    FusePass(mode="fallback").apply(make_context(), module)
    return module


def close_to_the_interpreter(exe, module, inputs) -> None:
    for got, expected in zip(exe(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------------------
# 3. Fallback groups run compiled, op by op
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backends", [("cpu",), ("cpu", "blas"), ("blas", "cpu"), ("ort", "cpu")])
@pytest.mark.parametrize("search", ["greedy", "cost"])
def test_the_mlp_in_fallback_mode_runs_its_matmuls_compiled(backends, search):
    if "ort" in backends:
        pytest.importorskip("onnxruntime")
    module = fused_in_fallback_mode(graphopt.parse(EXAMPLES / "mlp.mlir"))
    exe = graphopt.compile(module, backends=backends, search=search)
    placement = exe.placement()
    matmuls = [p for p in placement if p.ops == ("matmul",)]
    assert [p.step for p in matmuls] == ["fused_matmul_add_relu_0.matmul_0", "fused_matmul_add_1.matmul_0"]
    assert all(p.backend in backends for p in placement), exe.report()
    assert all(len(p.ops) == 1 for p in placement), "an op of a fallback group is a kernel of its own"
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    close_to_the_interpreter(exe, module, [x])


def test_an_op_of_a_fallback_group_no_backend_accepts_alone_goes_to_the_reference():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    module = fused_in_fallback_mode(b.finish(b.neg(b.cast(b.cast(b.relu(x), "f16"), "f32"))))
    exe = graphopt.compile(module)
    placed = {p.step: (p.backend, p.reason) for p in exe.placement()}
    (group,) = {name.partition(".")[0] for name in placed}
    assert placed[f"{group}.relu_0"] == ("cpu", None)
    assert placed[f"{group}.cast_1"] == ("reference", "cpu: kernels cannot take or return f16")
    assert placed[f"{group}.neg_3"] == ("cpu", None)
    close_to_the_interpreter(exe, module, [np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)])


def test_a_fallback_group_with_a_constant_inside_runs_op_by_op():
    module = graphopt.parse(BOUND_IN_THE_IR.replace(', graph.implementation = "test_halved_exp"', ""))
    exe = graphopt.compile(module)
    assert [(p.step, p.backend) for p in exe.placement()] == [
        ("my_group.exp_0", "cpu"), ("my_group.mul_1", "cpu"), ("neg_0", "cpu")]
    close_to_the_interpreter(exe, module, random_inputs(module.body.block.first_op, 2))


# ----------------------------------------------------------------------------------------
# 4. Replacing a group
# ----------------------------------------------------------------------------------------


def dense_relu(x, w, b):
    return np.maximum(x @ w + b, 0).astype(np.float32)


@pytest.mark.parametrize("mode", ["compile", "fallback"])
def test_a_group_replaced_by_a_numpy_function(mode):
    module = graphopt.parse(MLP_LAYER)
    if mode == "fallback":
        fused_in_fallback_mode(module)
    calls = []
    exe = graphopt.compile(module, implementations={"fused_matmul_add_relu_0": lambda *a: calls.append(1) or dense_relu(*a)})
    replaced, softmax = exe.placement()
    assert (replaced.step, replaced.ops, replaced.backend) == ("fused_matmul_add_relu_0", ("matmul", "add", "relu"), "implementation")
    assert replaced.reason.startswith(f'{IMPLEMENTATION} = "fused_matmul_add_relu_0#')
    assert softmax == StepPlacement("softmax_0", ("softmax",), "cpu", None)
    inputs = layer_inputs()
    calls.clear()
    close_to_the_interpreter(exe, module, inputs)
    assert len(calls) == 1, "the step called the replacement"


def test_a_group_replaced_by_a_kernel_of_another_backend():
    fused = graphopt.parse(MLP_LAYER)
    FusePass().apply(make_context(), fused)
    group = next(op for op in fused.walk() if isinstance(op, graph.FusedOp))
    (kernel,) = get_backend("reference").compile([group], threads=1)
    module = graphopt.parse(MLP_LAYER)
    exe = graphopt.compile(module, implementations={"fused_matmul_add_relu_0": kernel})
    assert exe.steps[0].kernel is kernel
    close_to_the_interpreter(exe, module, layer_inputs(1))


@pytest.mark.parametrize("implementation, message", [
    (lambda x, w, b: (x @ w).astype(np.float64), r"returns \(\[8, 16\] float64\); the group's results are \(\[8, 16\] float32\)"),
    (lambda x, w, b: (x, x), r"returns \(\[8, 16\] float32, \[8, 16\] float32\); the group's results are \(\[8, 16\] float32\)"),
    (lambda x, w, b: x[:4], r"returns \(\[4, 16\] float32\)"),
    (lambda x: x, r"fails on inputs of the group's signature .*\[16\] float32\)\): TypeError"),
])
def test_a_replacement_with_the_wrong_signature_is_refused(implementation, message):
    with pytest.raises(graphopt.GraphoptError, match="group 'fused_matmul_add_relu_0' is bound to backend 'implementation'.*" + message):
        graphopt.compile(graphopt.parse(MLP_LAYER), implementations={"fused_matmul_add_relu_0": implementation})


def test_a_replacement_must_be_callable_and_is_registered_only_while_compiling():
    from graphopt.backends import implementation

    before = dict(implementation._implementations)
    with pytest.raises(graphopt.GraphoptError, match="must be a function on NumPy arrays or a Kernel, got int"):
        graphopt.compile(graphopt.parse(MLP_LAYER), implementations={"fused_matmul_add_relu_0": 3})
    graphopt.compile(graphopt.parse(MLP_LAYER), implementations={"fused_matmul_add_relu_0": dense_relu})
    assert implementation._implementations == before


def test_replacing_an_unknown_group_names_the_known_ones():
    with pytest.raises(graphopt.GraphoptError, match=r"no group 'fused_conv2d_add_relu_0' in @main \(its groups: fused_matmul_add_relu_0\)"):
        graphopt.compile(graphopt.parse(MLP_LAYER), implementations={"fused_conv2d_add_relu_0": dense_relu})


def test_a_replacement_that_changes_its_results_later_is_an_error_at_run_time():
    shapes = iter([(8, 16), (8, 15)])
    exe = graphopt.compile(graphopt.parse(MLP_LAYER),
                           implementations={"fused_matmul_add_relu_0": lambda x, w, b: np.zeros(next(shapes), np.float32)})
    with pytest.raises(graphopt.GraphoptError, match=r"returns \(\[8, 15\] float32\); the group's results are \(\[8, 16\] float32\)"):
        exe(*layer_inputs())


@pytest.fixture
def halved_exp():
    """Registers `test_halved_exp`; `wrong` makes it compute something else."""
    state = {"wrong": False}
    graphopt.register_implementation("test_halved_exp", lambda x: np.exp(x) * (0.25 if state["wrong"] else 0.5))
    yield state
    unregister_implementation("test_halved_exp")


def test_a_group_bound_in_the_ir_runs_its_registered_implementation(halved_exp):
    module = graphopt.parse(BOUND_IN_THE_IR)
    exe = graphopt.compile(module)
    assert [(p.step, p.backend) for p in exe.placement()] == [("my_group", "implementation"), ("neg_0", "cpu")]
    close_to_the_interpreter(exe, module, random_inputs(module.body.block.first_op, 0))


def test_a_group_bound_to_an_unregistered_implementation_is_an_error():
    with pytest.raises(graphopt.GraphoptError, match="no implementation named 'test_halved_exp' is registered"):
        graphopt.compile(graphopt.parse(BOUND_IN_THE_IR))


def test_graph_run_check_compares_a_replaced_group_with_the_interpreter(halved_exp, tmp_path, capsys):
    path = tmp_path / "bound.mlir"
    path.write_text(BOUND_IN_THE_IR)
    graph_run.main([str(path), "--check", "--report"])
    out = capsys.readouterr().out
    assert "my_group" in out and "implementation" in out and "result_0: max abs diff" in out and "ok" in out
    halved_exp["wrong"] = True
    with pytest.raises(SystemExit) as exit_code:
        graph_run.main([str(path), "--check"])
    assert exit_code.value.code == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_an_implementation_from_an_entry_point(monkeypatch):
    """Another package registers `graphopt.implementations` entry points (here NumPy's negative,
    a ufunc: called on arrays); graph-opt and graph-run find them as compile does."""
    from importlib.metadata import EntryPoint

    from graphopt.backends import implementation

    plugin = EntryPoint(name="test_plugin_negative", value="numpy:negative", group="graphopt.implementations")
    monkeypatch.setattr(implementation, "entry_points", lambda group: [plugin] if group == plugin.group else [])
    monkeypatch.setattr(implementation, "_plugins_loaded", False)
    module = graphopt.parse(BOUND_IN_THE_IR.replace("test_halved_exp", "test_plugin_negative"))
    try:
        exe = graphopt.compile(module)
        assert exe.placement()[0].backend == "implementation"
        x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
        np.testing.assert_array_equal(exe(x)[0], x)  # neg(negative(x)): the plugin ran, not the group's exp
    finally:
        unregister_implementation("test_plugin_negative")


def test_an_entry_point_that_does_not_load_is_a_clear_error(monkeypatch):
    from importlib.metadata import EntryPoint

    from graphopt.backends import implementation

    broken = EntryPoint(name="test_broken", value="no_such_package_here:kernel", group="graphopt.implementations")
    monkeypatch.setattr(implementation, "entry_points", lambda group: [broken])
    monkeypatch.setattr(implementation, "_plugins_loaded", False)
    with pytest.raises(graphopt.GraphoptError, match=r"entry point 'test_broken' \(no_such_package_here:kernel\) does not load: ModuleNotFoundError"):
        graphopt.compile(graphopt.parse(BOUND_IN_THE_IR))


# ----------------------------------------------------------------------------------------
# 5. Placement as data, and the strict mode
# ----------------------------------------------------------------------------------------


def f16_round_trip():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    return b.finish(b.neg(b.cast(b.cast(b.relu(x), "f16"), "f32")))


def test_placement_is_the_report_as_data():
    exe = graphopt.compile(f16_round_trip(), fuse=False)
    placement = exe.placement()
    assert [(p.step, p.ops, p.backend) for p in placement] == [
        ("relu_0", ("relu",), "cpu"), ("cast_1", ("cast",), "reference"),
        ("cast_2", ("cast",), "reference"), ("neg_3", ("neg",), "cpu")]
    assert placement[1].reason == "cpu: kernels cannot take or return f16"
    for p, line in zip(placement, exe.report().splitlines(), strict=True):
        assert line.startswith(p.step) and p.backend in line and (p.reason is None or p.reason in line)


def test_strict_mode_names_each_op_left_to_the_reference_and_why():
    with pytest.raises(graphopt.GraphoptError) as error:
        graphopt.compile(f16_round_trip(), fuse=False, backends=("cpu", "blas"), fallback="error")
    assert str(error.value).splitlines() == [
        'fallback="error": 2 step(s) of @main would run on the reference interpreter:',
        "  cast_1 (cast): cpu: kernels cannot take or return f16; blas: a blas group holds exactly one matmul or conv2d, this one holds 0",
        "  cast_2 (cast): cpu: kernels cannot take or return f16; blas: a blas group holds exactly one matmul or conv2d, this one holds 0",
    ]


def test_strict_mode_accepts_a_module_that_needs_no_fallback_and_checks_its_value():
    module = graphopt.parse(MLP_LAYER)
    close_to_the_interpreter(graphopt.compile(module, fallback="error"), module, layer_inputs())
    with pytest.raises(graphopt.GraphoptError, match='fallback must be "reference" or "error", got \'never\''):
        graphopt.compile(module, fallback="never")


def test_graph_run_no_fallback(tmp_path, capsys):
    path = tmp_path / "pinned.mlir"
    path.write_text("""
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = graph.exp %x {graph.backend = "reference"} : tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }""")
    graph_run.main([str(path)])
    with pytest.raises(SystemExit) as exit_code:
        graph_run.main([str(path), "--no-fallback"])
    assert exit_code.value.code == 1
    err = capsys.readouterr().err
    assert "graph-run: error: fallback=\"error\": 1 step(s) of @main would run on the reference interpreter" in err
    assert "exp_0 (exp): it is the first backend allowed (a pin, or the backends asked for)" in err
    assert "Traceback" not in err
