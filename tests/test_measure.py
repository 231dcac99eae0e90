"""Measured costs and their on-disk cache: round trip, recovery, atomic writes, canonical keys."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from graphopt.dialects import graph
from graphopt.transforms.fuse import FusePass
from xdsl.dialects.builtin import StringAttr

import graphopt
from graphopt.backends import get_backend
from graphopt.backends import measure as measuring
from graphopt.backends.costs import MachineRates
from graphopt.backends.measure import (
    CostCache,
    canonical_text,
    default_cache_path,
    measure_all,
)
from graphopt.backends.steps import compile_kernels, placed_steps
from graphopt.parsing import make_context
from graphopt.runtime.executable import Executable


def mlp_group(rows: int = 8, x_name: str = "x", group_name: str | None = None) -> graph.FusedOp:
    """The fused relu(x @ w + b) of a small MLP layer."""
    b = graphopt.GraphBuilder()
    x, w, bias = b.input(x_name, (rows, 16)), b.input("w", (16, 32)), b.input("bias", (32,))
    module = b.finish(b.relu(b.add(b.matmul(x, w), bias)))
    FusePass().apply(make_context(), module)
    (group,) = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    if group_name is not None:
        group.attributes["name"] = StringAttr(group_name)
    return group


def matmul_in(group: graph.FusedOp) -> graph.MatmulOp:
    return next(op for op in group.body.block.ops if isinstance(op, graph.MatmulOp))


@pytest.fixture
def counted(monkeypatch) -> list:
    """Replace the timing by a fake (1 ms) that records each (backend name, group) measured."""
    calls = []

    def fake_measure(pairs, repeat=10, threads=None, on_sample=None):
        calls.extend((backend.name, group) for backend, group in pairs)
        return [1e-3] * len(pairs)

    monkeypatch.setattr(measuring, "measure", fake_measure)
    return calls


def test_round_trip_measures_once(tmp_path, counted):
    path, cpu, group = tmp_path / "costs.json", get_backend("cpu"), mlp_group()
    assert measure_all([(cpu, group)], CostCache(path)) == [1e-3]
    assert measure_all([(cpu, group)], CostCache(path)) == [1e-3]
    assert measure_all([(cpu, mlp_group(group_name="elsewhere"))], CostCache(path)) == [1e-3]
    assert len(counted) == 1
    data = json.loads(path.read_text())
    assert data["format"] == measuring.FORMAT_VERSION and data["cpu"] == measuring.cpu_model()


def test_an_interrupted_measurement_keeps_the_batches_it_finished(tmp_path, counted, monkeypatch):
    monkeypatch.setattr(measuring, "BATCH", 2)
    path, cpu = tmp_path / "costs.json", get_backend("cpu")
    pairs = [(cpu, mlp_group(rows)) for rows in (1, 2, 3)]
    fake = measuring.measure

    def interrupted(batch, *args, **kwargs):
        if len(counted) == 2:
            raise KeyboardInterrupt
        return fake(batch, *args, **kwargs)

    monkeypatch.setattr(measuring, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        measure_all(pairs, CostCache(path))
    assert len(json.loads(path.read_text())["costs"]) == 2
    monkeypatch.setattr(measuring, "measure", fake)
    assert measure_all(pairs, CostCache(path)) == [1e-3] * 3
    assert [group for _, group in counted] == [group for _, group in pairs]


def test_real_measurement_is_a_positive_median(tmp_path):
    cache = CostCache(tmp_path / "costs.json")
    blas, cpu, group = get_backend("blas"), get_backend("cpu"), mlp_group()
    assert all(0 < seconds < 1 for seconds in measuring.measure([(blas, matmul_in(group)), (cpu, group)], repeat=3))
    costs = measure_all([(blas, matmul_in(group)), (cpu, group), (blas, matmul_in(mlp_group(x_name="y")))], cache, quiet=True)
    assert costs[0] == costs[2] and all(0 < c < 1 for c in costs)


def test_measuring_together_orders_kernels_by_their_work():
    """Round-robin samples of a small and a 1024x larger matmul group: the larger costs more (the
    small one's few microseconds are mostly the call itself)."""
    cpu = get_backend("cpu")
    small, large = measuring.measure([(cpu, mlp_group(rows=8)), (cpu, mlp_group(rows=8192))], repeat=5)
    assert large > 4 * small


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "Expecting property name"),
        ('{"format": 2, "cpu": "Imaginary CPU 9000", "costs": {}}', "measured on another CPU ('Imaginary CPU 9000'"),
        ('{"format": 1, "cpu": "%s", "costs": {}}', "format 1, expected 2"),
        ('["a list"]', "not a cost cache"),
    ],
)
def test_corrupt_or_foreign_cache_warns_once_then_works(tmp_path, counted, content, problem):
    path = tmp_path / "costs.json"
    path.write_text(content.replace("%s", measuring.cpu_model()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = CostCache(path)
    assert len(caught) == 1 and problem in str(caught[0].message) and str(path) in str(caught[0].message)
    assert measure_all([(get_backend("cpu"), mlp_group())], cache) == [1e-3]
    assert len(counted) == 1
    assert json.loads(path.read_text())["cpu"] == measuring.cpu_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert CostCache(path).get(CostCache.key("cpu", mlp_group())) == 1e-3


def test_failed_write_warns_once_and_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "costs.json"
    cache = CostCache(path)
    cache.put({"first": 1.0})
    before = path.read_text()

    def failing_dump(data, stream, **kwargs):
        stream.write('{"format": 2, "cp')
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", failing_dump)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.put({"second": 2.0})
        cache.put({"third": 3.0})
    assert len(caught) == 1 and "disk full" in str(caught[0].message) and str(path) in str(caught[0].message)
    assert cache.get("third") == 3.0  # kept in memory
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["costs.json"]


def test_unwritable_cache_directory_still_measures(tmp_path, counted):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(UserWarning, match="cannot write the cost cache"):
        costs = measure_all([(get_backend("cpu"), mlp_group())], CostCache(blocker / "costs.json"))
    assert costs == [1e-3]


def test_key_ignores_ssa_and_group_names_but_not_shapes_or_backend():
    key = CostCache.key("blas", mlp_group())
    assert CostCache.key("blas", mlp_group(x_name="input", group_name="another_name")) == key
    assert CostCache.key("blas", mlp_group(rows=4)) != key
    assert CostCache.key("cpu", mlp_group()) != key
    assert CostCache.key("blas", mlp_group(), threads=1) != CostCache.key("blas", mlp_group(), threads=2)
    text = canonical_text(mlp_group(group_name="another_name"))
    assert "another_name" not in text and "%x" not in text and "tensor<8x16xf32>" in text


def scaled_by_constant(weights: np.ndarray, fused: bool) -> graph.MulOp | graph.FusedOp:
    """relu(x * weights): the mul alone (the constant an operand), or fused (a splat constant is
    cloned inside the group)."""
    b = graphopt.GraphBuilder()
    module = b.finish(b.relu(b.mul(b.input("x", weights.shape, weights.dtype), b.constant(weights))))
    if fused:
        FusePass().apply(make_context(), module)
    return next(op for op in module.walk() if isinstance(op, graph.FusedOp if fused else graph.MulOp))


@pytest.mark.parametrize("fused", [False, True], ids=["operand", "inside"])
def test_key_ignores_constant_values_but_not_their_shapes_and_prints_one_element(fused):
    ones = np.ones((64, 3, 3), np.float32)
    key = CostCache.key("cpu", scaled_by_constant(ones, fused))
    other = np.full(ones.shape, 2.5, np.float32)
    assert CostCache.key("cpu", scaled_by_constant(other, fused)) == key
    assert CostCache.key("cpu", scaled_by_constant(np.ones((64, 9, 1), np.float32), fused)) != key
    assert CostCache.key("cpu", scaled_by_constant(ones.astype(np.float64), fused)) != key
    text = canonical_text(scaled_by_constant(other, fused))
    assert "tensor<1xf32> {type = tensor<64x3x3xf32>}" in text and "2.5" not in text


def test_default_path_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_path() == tmp_path / "graphopt" / "costs.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_path() == Path.home() / ".cache" / "graphopt" / "costs.json"


@pytest.mark.parametrize("terminal, quiet, shown", [(False, False, False), (True, True, False), (True, False, True)])
def test_progress_bar_only_on_a_terminal_and_not_quiet(tmp_path, counted, monkeypatch, capsys, terminal, quiet, shown):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    pairs = [(get_backend("cpu"), mlp_group(rows)) for rows in (2, 3)]
    assert measure_all(pairs, CostCache(tmp_path / "costs.json"), quiet=quiet) == [1e-3, 1e-3]
    assert ("measuring kernels" in capsys.readouterr().err) == shown


def mlp_module(rows: int = 8):
    b = graphopt.GraphBuilder()
    x, w, bias = b.input("x", (rows, 16)), b.input("w", (16, 32)), b.input("bias", (32,))
    return b.finish(b.relu(b.add(b.matmul(x, w), bias)))


def test_compile_measures_once_into_the_cache_it_is_given(tmp_path):
    module, path = mlp_module(), tmp_path / "costs.json"
    inputs = measuring.random_arrays([a.type for a in module.body.block.first_op.body.block.args])
    exe = graphopt.compile(module, backends=("cpu", "blas"), search="cost", measure=True, cost_cache=path)
    (result,) = exe(*inputs)
    (expected,) = graphopt.interpret(module, *inputs)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    measured = json.loads(path.read_text())["costs"]
    assert len(measured) >= 4  # each op and the whole group, on cpu and on blas where it accepts them
    modified = path.stat().st_mtime_ns
    graphopt.compile(module, backends=("cpu", "blas"), search="cost", measure=True, cost_cache=path)
    assert path.stat().st_mtime_ns == modified  # all cached: nothing measured, nothing written


def test_cost_search_without_measuring_takes_estimates(tmp_path, counted):
    graphopt.compile(mlp_module(), backends=("cpu", "blas"), search="cost", cost_cache=tmp_path / "costs.json")
    assert counted == [] and not (tmp_path / "costs.json").exists()


@pytest.mark.parametrize("terminal", [False, True])
def test_measure_plans_times_each_placed_function_whole(monkeypatch, capsys, terminal):
    """Two placements of one function (cpu; matmul on blas, its epilogue on cpu), each compiled
    and run whole, on random inputs: a median per plan, a progress bar on a terminal only."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    module = mlp_module()
    functions = [graphopt.compile(module, backends=backends, threads=1).function
                 for backends in (("cpu",), ("blas", "cpu"))]
    assert [len(list(f.body.block.ops)) for f in functions] == [2, 3]  # the steps and the return
    seconds = measuring.measure_plans(functions, threads=1)
    assert len(seconds) == 2 and all(0 < s < 1 for s in seconds)
    assert ("timing whole plans" in capsys.readouterr().err) == terminal


def dense_relu_module(weights: np.ndarray):
    b = graphopt.GraphBuilder()
    return b.finish(b.relu(b.matmul(b.input("x", (8, 16)), b.constant(weights))))


def test_the_kernels_of_a_plan_timed_whole_are_reused_where_they_compute_the_same():
    """measure_plans hands over the steps it compiled; compile_kernels gives a step the kernel of
    a compiled step of the same name, backend, body and constant values, and compiles the others."""
    weights = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    timed = graphopt.compile(dense_relu_module(weights), backends=("cpu",), threads=1).function
    compiled = []
    measuring.measure_plans([timed], threads=1, compiled=compiled)
    assert len(compiled) == 1 and compiled[0].kernel is not None
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    for w, reused in ((weights, True), (weights + 1, False)):
        function = graphopt.compile(dense_relu_module(w), backends=("cpu",), threads=1).function
        steps = placed_steps(function)
        compile_kernels(steps, threads=1, compiled=compiled)
        assert (steps[0].kernel is compiled[0].kernel) == reused
        (result,) = Executable(function.parent_op(), function, steps, threads=1)(x)
        np.testing.assert_allclose(result, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_only_a_kernel_called_from_python_is_charged_its_extra_cost_in_a_plan(monkeypatch):
    """measure times a native kernel (cpu) at its address, and adds PYTHON_CALL_IN_PLAN_SECONDS
    to a kernel without a native entry (the reference interpreter's, as an ORT session's)."""
    monkeypatch.setattr(measuring, "PYTHON_CALL_IN_PLAN_SECONDS", 1.0)
    group = mlp_group()
    native, python = measuring.measure([(get_backend("cpu"), group), (get_backend("reference"), group)], repeat=3)
    assert native < 1.0 <= python


def test_op_by_op_time_counts_the_ops_that_compute_not_the_constants():
    """A group's constant is data, not an op: the group costs what the same group with the
    constant passed in costs (the op reading it moves its bytes either way)."""
    def group(constant_inside: bool) -> graph.FusedOp:
        scale = "%s = graph.constant dense<0.5> : tensor<f32>" if constant_inside else ""
        inputs, args = ("%x", "%a: tensor<8x16xf32>") if constant_inside else ("%x, %y", "%a: tensor<8x16xf32>, %s: tensor<f32>")
        types = "tensor<8x16xf32>" if constant_inside else "tensor<8x16xf32>, tensor<f32>"
        module = graphopt.parse(f"""
func.func @main(%x: tensor<8x16xf32>, %y: tensor<f32>) -> tensor<8x16xf32> {{
  %0 = graph.fused({inputs}) {{name = "g"}} : ({types}) -> tensor<8x16xf32> {{
  ^bb0({args}):
    %1 = graph.exp %a : tensor<8x16xf32>
    {scale}
    %2 = graph.mul %1, %s : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    graph.yield %2 : tensor<8x16xf32>
  }}
  func.return %0 : tensor<8x16xf32>
}}""")
        return next(op for op in module.walk() if isinstance(op, graph.FusedOp))

    rates = MachineRates(bandwidth=1e10, blas_flops=1e11)
    inside, passed_in = group(True), group(False)
    assert [op.name for op in graph.computed_ops(inside)] == ["graph.exp", "graph.mul"]
    assert rates.numpy_time(inside) == rates.numpy_time(passed_in) > 2 * rates.numpy_op_overhead
