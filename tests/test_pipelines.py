"""lowering/pipelines.py: the stages are pass-pipeline text that graph-opt runs, and compile runs
exactly what `graph-opt --fuse --partition -t llvm` prints, for every shipped example."""

from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.backends import get_backend
from graphopt.lowering.convert_graph_to_linalg import kernel_names
from graphopt.builder import GraphBuilder
from graphopt.runtime.arrays import ALIGNMENT
from graphopt.lowering.pipelines import CPU, CUDA
from graphopt.parsing import parse_text
from graphopt.tools import graph_opt

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.mlir"))


def test_stages_are_graph_opt_pipeline_text():
    llvm = CPU.spec("llvm", alignment=16)
    assert llvm.startswith("convert-linalg-to-loops,fuse-row-loops,")
    assert "convert-func-to-llvm{alignment=16}" in llvm
    assert [p.name for p in CPU.pipeline("kernels").passes] == [
        "linalg-generalize-named-ops",
        "share-kernel-code",
        "mark-row-local",
        "split-rows",
    ]
    assert [p.alignment for p in CPU.pipeline("llvm", alignment=32).passes if p.name == "convert-func-to-llvm"] == [32]
    assert CUDA.pipeline("to-kernels", "nvvm").passes[-1].name == "reconcile-unrealized-casts"
    tool = graph_opt.GraphOptMain(["--lower-to-llvm"])
    assert tool.args.passes == CPU.spec("to-kernels", "weights", "kernels", "llvm", alignment=ALIGNMENT)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_compile_runs_what_graph_opt_prints(example: Path, tmp_path: Path):
    printed = tmp_path / "opt.ll"
    executable = graphopt.compile(parse_text(example.read_text()), backends=("cpu",), threads=1)
    assert executable.pipeline.startswith("canonicalize,cse,fuse,partition{")
    graph_opt.main([str(example), "-p", executable.pipeline, "-t", "llvm", "-o", str(printed)])
    assert executable.llvm_ir() == [printed.read_text()]


def test_kernels_are_named_as_graph_opt_names_them():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    module = b.finish(b.relu(b.exp(x)))
    executable = graphopt.compile(module, backends=("cpu",), fuse=False, threads=1)
    (ir,) = executable.llvm_ir()
    assert "define void @exp_0(" in ir and "define void @relu_1(" in ir


def test_kernel_names_are_unique_in_one_compile():
    groups = []
    for _ in range(2):  # two modules, each a group named "epilogue"
        module = parse_text(
            "func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
            '  %0 = graph.fused(%x) {name = "epilogue", mode = "compile"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {\n'
            "  ^bb0(%a: tensor<4x8xf32>):\n    %1 = graph.relu %a : tensor<4x8xf32>\n    graph.yield %1 : tensor<4x8xf32>\n  }\n"
            "  func.return %0 : tensor<4x8xf32>\n}\n"
        )
        groups.append(module.body.block.first_op.body.block.first_op)
    assert kernel_names(groups) == ["epilogue", "epilogue_1"]
    kernels = get_backend("cpu").compile(groups, threads=1)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    for kernel in kernels:
        out = np.empty_like(x)
        kernel([x], [out])
        np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_groups_named_empty_compile_under_a_name_of_their_own():
    """A group named "" (the mutation fuzzer wrote one) beside a group placed on another backend
    once gave two LLVM functions one name."""
    module = parse_text(
        "func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {\n"
        '  %0 = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "blas"} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {\n'
        "  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>):\n    %m = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>\n"
        "    graph.yield %m : tensor<4x16xf32>\n  }\n"
        '  %1 = graph.fused(%0) {name = "", mode = "compile"} : (tensor<4x16xf32>) -> tensor<4x16xf32> {\n'
        "  ^bb0(%c: tensor<4x16xf32>):\n    %r = graph.relu %c : tensor<4x16xf32>\n    graph.yield %r : tensor<4x16xf32>\n  }\n"
        "  func.return %1 : tensor<4x16xf32>\n}\n"
    )
    groups = [op for op in module.body.block.first_op.body.block.ops if op.name == "graph.fused"]
    assert kernel_names(groups) == ["matmul_0", "group"]
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
    (got,) = graphopt.compile(module, backends=("cpu",), threads=1)(x, w)
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_repeated_blocks_share_their_code_with_their_own_weights(threads):
    """Three dense layers of one shape and other weights: one kernel's code, three results."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    y = b.input("x", (256, 64))
    for _ in range(3):
        y = b.relu(b.add(b.matmul(y, b.constant(rng.standard_normal((64, 64)).astype(np.float32) / 8)),
                         b.constant(rng.standard_normal(64).astype(np.float32))))
    module = b.finish(y)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    (ir,) = executable.llvm_ir()
    assert ir.count("define void @fused_matmul_add_relu_0(") == 1 and "define void @fused_matmul_add_relu_1(" not in ir
    assert len(executable.steps) == 3
    x = rng.standard_normal((256, 64)).astype(np.float32)
    np.testing.assert_allclose(executable(x)[0], graphopt.interpret(module, x)[0], rtol=1e-4, atol=1e-4)


def test_compile_merges_branches_that_read_one_input_through_equal_weights():
    """An Inception-style block: three 1x1 branches on x, two with equal weights (another
    constant of the same values) and one with other weights. `cse` leaves two convs, so two
    steps plus the concat's; the results are the interpreter's (NaN and inf in x)."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((8, 5, 1, 1)).astype(np.float32)
    b = GraphBuilder()
    x = b.input("x", (1, 5, 7, 9))
    branches = [b.relu(b.conv2d(x, b.constant(w))) for w in (weights, weights.copy(), weights[::-1].copy())]
    module = b.finish(b.concat(branches, axis=1))
    executable = graphopt.compile(module, backends=("cpu",), threads=1)
    assert sum("conv2d" in step.ops for step in executable.placement()) == 2
    x_value = rng.standard_normal((1, 5, 7, 9)).astype(np.float32)
    x_value[0, 1, 2, 3], x_value[0, 4, 6, 8] = np.nan, np.inf
    np.testing.assert_allclose(executable(x_value)[0], graphopt.interpret(module, x_value)[0], rtol=1e-5, atol=1e-5,
                               equal_nan=True)
