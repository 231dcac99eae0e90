"""Executable.profile and graph-run --profile: one row per step, positive times, exact FLOPs."""

import contextlib

import numpy as np
import pytest

import graphopt
from graphopt.runtime import executable, thread_pool
from graphopt.tools import graph_run

from test_cli import run_in_process

M, K, N = 6, 40, 24
X_SHAPE, W_SHAPE, GROUPS = (2, 4, 9, 11), (8, 2, 3, 3), 2
"""A grouped conv: 8 output channels, 2 input channels per group; output 2x8x5x6 (stride 2, pad 1)."""
CONV_OUTPUT = (2, 8, 5, 6)


def matmul_conv_module():
    """@main(a, b, x, w) = (relu(a @ b), conv2d(x, w), max_pool2d(x)), one step per op (fuse=False)."""
    b = graphopt.GraphBuilder()
    product = b.relu(b.matmul(b.input("a", (M, K)), b.input("b", (K, N))))
    x = b.input("x", X_SHAPE)
    conv = b.conv2d(x, b.input("w", W_SHAPE), strides=(2, 2), padding=(1, 1, 1, 1), groups=GROUPS)
    pool = b.max_pool2d(x, kernel=(3, 3), strides=(2, 2))
    return b.finish(product, conv, pool)


def random_inputs(exe):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(dtype) for shape, dtype in exe.argument_types]


@pytest.fixture(scope="module")
def profiled():
    exe = graphopt.compile(matmul_conv_module(), fuse=False)
    return exe, exe.profile(*random_inputs(exe), repeat=3)


def test_one_row_per_step_with_positive_times(profiled):
    exe, report = profiled
    assert [row.name for row in report.steps] == [step.name for step in exe.steps]
    assert [row.backend for row in report.steps] == [step.backend for step in exe.steps]
    assert all(row.seconds > 0 for row in report.steps)
    assert report.call_seconds > 0
    assert sum(row.share for row in report.steps) == pytest.approx(1.0)
    assert report.top(1)[0].seconds == max(row.seconds for row in report.steps)


def test_flops_and_bytes_of_a_matmul_a_conv_and_a_pool_are_exact(profiled):
    _, report = profiled
    by_ops = {row.ops: row for row in report.steps}
    assert set(by_ops) == {("matmul",), ("relu",), ("conv2d",), ("max_pool2d",)}
    assert by_ops[("matmul",)].flops == 2 * M * N * K
    assert by_ops[("matmul",)].bytes_moved == 4 * (M * K + K * N + M * N)
    assert by_ops[("conv2d",)].flops == 2 * np.prod(CONV_OUTPUT) * (X_SHAPE[1] // GROUPS) * 3 * 3
    assert by_ops[("conv2d",)].bytes_moved == 4 * (np.prod(X_SHAPE) + np.prod(W_SHAPE) + np.prod(CONV_OUTPUT))
    assert by_ops[("max_pool2d",)].flops == 2 * 4 * 4 * 5 * 3 * 3
    conv = by_ops[("conv2d",)]
    assert conv.gflops_per_second == pytest.approx(conv.flops / conv.seconds / 1e9)
    assert conv.gbytes_per_second == pytest.approx(conv.bytes_moved / conv.seconds / 1e9)


def test_a_fused_step_lists_its_op_kinds_once_each_and_counts_its_weights():
    b = graphopt.GraphBuilder()
    x = b.input("x", (4, 8))
    weights = b.constant(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32))
    module = b.finish(b.relu(b.add(b.relu(b.matmul(x, weights)), x)))
    exe = graphopt.compile(module)
    report = exe.profile(*random_inputs(exe), repeat=1)
    assert [row.ops for row in report.steps] == [("matmul", "relu", "add")]
    assert report.steps[0].flops == 2 * 4 * 8 * 8 + 3 * 4 * 8
    assert report.steps[0].bytes_moved == 4 * (4 * 8 + 8 * 8 + 4 * 8)  # x, the weights, the result
    assert report.steps[0].name in str(report)


def test_the_table_has_a_header_a_row_per_step_and_the_totals(profiled):
    exe, report = profiled
    lines = str(report).splitlines()
    assert lines[0].split() == ["step", "backend", "ops", "median", "share", "MFLOP", "GFLOP/s", "MB", "GB/s"]
    assert [line.split()[0] for line in lines[1:-1]] == [step.name for step in exe.steps]
    assert lines[-1].startswith(f"{len(exe.steps)} steps: ")
    assert len(report.table(report.top(2)).splitlines()) == 4


def test_a_module_without_steps_has_an_empty_profile():
    b = graphopt.GraphBuilder()
    exe = graphopt.compile(b.finish(b.input("x", (3,))))
    report = exe.profile(np.ones(3, np.float32), repeat=2)
    assert exe.steps == [] and report.steps == () and report.total_seconds == 0
    assert str(report).splitlines()[-1].startswith("0 steps: 0.0 us in all")


def test_steps_are_profiled_with_the_workers_awake(monkeypatch):
    """A step's chunks start as inside a call: the pool's workers spin between the profiled steps
    rather than sleep, and sleep again once the profile is done."""
    spin_limits = []

    @contextlib.contextmanager
    def recording_workers_awake():
        with thread_pool.workers_awake():
            spin_limits.append(pool.state[thread_pool.SPIN // 8])
            yield

    exe = graphopt.compile(matmul_conv_module(), fuse=False, threads=2)
    pool = thread_pool.ThreadPool.of(2)
    monkeypatch.setattr(executable, "workers_awake", recording_workers_awake)
    exe.profile(*random_inputs(exe), repeat=2)
    assert spin_limits == [thread_pool.AWAKE_ROUNDS]
    assert pool.state[thread_pool.SPIN // 8] == thread_pool.SPIN_ROUNDS


def test_profile_needs_one_repeat_at_least(profiled):
    exe, _ = profiled
    with pytest.raises(graphopt.GraphoptError, match="repeat of at least 1, got 0"):
        exe.profile(*random_inputs(exe), repeat=0)


def test_graph_run_profile_prints_the_table(tmp_path, capsys):
    path = tmp_path / "model.mlir"
    path.write_text(str(matmul_conv_module()))
    code, out, err = run_in_process(graph_run.main, path, "--profile", capsys=capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split()[:3] == ["step", "backend", "ops"]
    assert "GFLOP/s" in out and "result_2: shape (2, 4, 4, 5)" in out


def test_graph_run_profile_needs_a_compiled_module(tmp_path, capsys):
    path = tmp_path / "model.mlir"
    path.write_text(str(matmul_conv_module()))
    code, _, err = run_in_process(graph_run.main, path, "--profile", "--backend", "reference", capsys=capsys)
    assert code == 2 and "--profile times a compiled module" in err
