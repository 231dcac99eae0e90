"""A conv whose tile epilogue adds a residual may write its result over that residual's buffer
(`graph.may_overwrite`, `ukernels.writes_over_residual`); the buffer plan takes it where the
residual dies at the conv (`buffer_plan.plan_buffers`), and every result matches the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_linalg import sample

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.lowering import conv_lanes, packed_gemm
from graphopt.lowering.linalg.abi import Group
from graphopt.lowering.linalg.schedule import CpuSchedule
from graphopt.lowering.pipelines import CPU
from graphopt.runtime import jit


def residual_block(channels=16, out_channels=32, size=9, kernel=3, return_residual=False, read_residual_again=False,
                   conv_of_residual=False):
    """A ResNet block's shortcut: r = relu(1x1 conv of s); x = 1x1 conv of r (`channels`);
    y = relu(conv(x) + bias + r), then a 1x1 conv of y. r dies at y's conv unless a variant
    reads it after (returned, or read by another conv); `conv_of_residual`: y's conv reads r itself."""
    g = GraphBuilder()
    s = g.input("s", (1, out_channels, size, size))
    r = g.relu(g.conv2d(s, g.constant(sample((out_channels, out_channels, 1, 1), seed=1, specials=False) / 8)))
    x = r if conv_of_residual else g.conv2d(r, g.constant(sample((channels, out_channels, 1, 1), seed=2, specials=False) / 8))
    w = g.constant(sample((out_channels, out_channels if conv_of_residual else channels, kernel, kernel), seed=3,
                          specials=False) / 8)
    y = g.conv2d(x, w, padding=[kernel // 2] * 4)
    y = g.relu(g.add(g.add(y, g.constant(sample((out_channels, 1, 1), seed=4, specials=False))), r))
    results = [g.conv2d(y, g.constant(sample((8, out_channels, 1, 1), seed=5, specials=False) / 8))]
    if return_residual:
        results.append(r)
    if read_residual_again:
        results.append(g.conv2d(r, g.constant(sample((8, out_channels, 1, 1), seed=6, specials=False) / 8)))
    return g.finish(*results)


@pytest.fixture
def ukernel(request, monkeypatch):
    """Every conv calls the ukernel `request.param` names where it applies (a 1x1: the GEMM)."""
    kind = request.param
    monkeypatch.setattr(CpuSchedule, "winograd_conv", lambda self, op: kind == "winograd" and self.lanes_conv(op))
    monkeypatch.setattr(CpuSchedule, "lanes_conv", lambda self, op: kind in ("lanes", "winograd") and op.w.type.get_shape()[2] > 1)
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", "off")
    monkeypatch.setattr(jit, "_cache", {})
    return kind


def run_and_check(module, threads):
    arrays = [sample(a.type.get_shape(), seed=9) for a in module.body.block.first_op.body.block.args]
    expected = graphopt.interpret(module, *arrays)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    for _ in range(2):  # the second call runs on the buffers the first wrote
        for e, a in zip(expected, executable(*arrays), strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)
    return executable


def block_and_residual(executable):
    """The step of the residual add, and r."""
    (block,) = [s for s in executable.steps if s.name.startswith("fused_conv2d_add_relu")]
    (residual,) = [v for v in block.inputs if isinstance(v.owner, graph.FusedOp) and v.owner.group_name.data.startswith("fused_conv2d_relu")]
    return block, residual


def overwriting_steps(executable) -> list[str]:
    return [step.name for step in executable.steps if any(v in executable.overwritten for v in step.outputs)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "ukernel, kernel, channels",
    [("lanes", 3, 16), ("winograd", 3, 16), ("gemm", 1, 16), ("gemm", 1, 300)],
    indirect=["ukernel"],
)
def test_the_conv_writes_over_its_dying_residual(monkeypatch, ukernel, kernel, channels, threads):
    monkeypatch.setitem(CPU.defaults, "min_work", 0)  # chunks at 2 threads: each writes over its own part
    executable = run_and_check(residual_block(channels=channels, kernel=kernel), threads)
    block, residual = block_and_residual(executable)
    conv = next(op for op in graph.computed_ops(block.op) if isinstance(op, graph.Conv2dOp))
    assert CpuSchedule().conv_ukernel(Group.of(block.op), conv) == ukernel
    one_k_block = channels <= packed_gemm.DEPTH or ukernel != "gemm"
    writes_over = one_k_block and (ukernel != "lanes" or conv_lanes.OVERLAP_STORE_LANES <= conv_lanes.PLAIN_STORE_LANES)
    position = block.inputs.index(residual)
    assert block.kernel.may_overwrite == ({0: position} if writes_over else {})
    assert overwriting_steps(executable) == ([block.name] if writes_over else [])
    if writes_over:
        assert executable.overwritten == {block.outputs[0]: residual}
        assert executable.buffer_of[residual] == executable.buffer_of[block.outputs[0]]
        assert f"[result 0 over input {position}]" in executable.report()
        (ir,) = executable.llvm_ir()
        signature = next(line for line in ir.splitlines() if line.startswith(f"define void @{block.name}("))
        assert signature.count("noalias") == signature.count("ptr") - 2  # the residual and out may be one buffer


@pytest.mark.parametrize("ukernel", ["lanes"], indirect=True)
def test_tiles_that_store_past_their_positions_keep_out_apart(monkeypatch, ukernel):
    """Without AVX-512 a tile of 5 to 8 positions stores 8, over residual values of the next tile."""
    monkeypatch.setattr(conv_lanes, "PLAIN_STORE_LANES", 4)
    monkeypatch.setattr(conv_lanes, "OVERLAP_STORE_LANES", 8)
    executable = run_and_check(residual_block(size=7), threads=1)
    assert overwriting_steps(executable) == []
    assert all(not step.kernel.may_overwrite for step in executable.steps)


@pytest.mark.parametrize(
    "variant", [{"return_residual": True}, {"read_residual_again": True}, {"conv_of_residual": True}]
)
@pytest.mark.parametrize("ukernel", ["winograd"], indirect=True)
def test_a_residual_read_after_the_conv_or_by_it_keeps_its_buffer(variant, ukernel):
    executable = run_and_check(residual_block(**variant), threads=1)
    assert overwriting_steps(executable) == []
    block, residual = block_and_residual(executable)
    assert block.kernel.may_overwrite == ({} if variant.get("conv_of_residual") else {0: block.inputs.index(residual)})


@pytest.mark.parametrize("ukernel", ["gemm"], indirect=True)
def test_a_saved_executable_keeps_writing_over_the_residual(tmp_path, ukernel):
    executable = run_and_check(residual_block(kernel=1), threads=1)
    executable.save(tmp_path / "block.gx")
    loaded = graphopt.load(tmp_path / "block.gx")
    assert overwriting_steps(loaded) == overwriting_steps(executable) != []
    arrays = [sample(a.type.get_shape(), seed=9) for a in executable.function.body.block.args]
    np.testing.assert_array_equal(loaded(*arrays)[0], executable(*arrays)[0])
