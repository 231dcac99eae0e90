"""The blas backend: every group form it accepts equals the interpreter; the others are refused with a reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype
from xdsl.dialects.func import FuncOp

import graphopt
from graphopt.backends import get_backend
from graphopt.backends.blas import BlasKernel
from graphopt.backends.costs import machine
from graphopt.backends.cpu import CpuBackend, CpuKernel
from graphopt.backends.reference import ReferenceKernel

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.mlir"))


def random_inputs(module, seed: int = 0) -> list[np.ndarray]:
    func = next(op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == "main")
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.get_shape()).astype(numpy_dtype(t.get_element_type())) for t in func.function_type.inputs.data]


def check_on_blas(module, fuse: bool = True, threads: int = 1) -> graphopt.Executable:
    """Compile with blas first: the anchor's step must run on blas; results equal the interpreter."""
    exe = graphopt.compile(module, backends=("blas", "cpu"), fuse=fuse, threads=threads)
    assert any(step.backend == "blas" for step in exe.steps), exe.report()
    inputs = random_inputs(module)
    for expected, actual in zip(graphopt.interpret(module, *inputs), exe(*inputs), strict=True):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
    return exe


def matmul_module(a_shape, b_shape, epilogue=None, dtype="f32"):
    """@main(a, b[, bias]) = epilogue(a @ b) with epilogue one of None, "relu", "gelu", "residual"."""
    b = graphopt.GraphBuilder()
    a_value, b_value = b.input("a", a_shape, dtype), b.input("b", b_shape, dtype)
    y = b.matmul(a_value, b_value)
    if epilogue in ("relu", "gelu"):
        y = getattr(b, epilogue)(b.add(y, b.input("bias", y.type.get_shape()[-1:], dtype)))
    elif epilogue == "residual":
        y = b.add(b.input("residual", y.type.get_shape(), dtype), b.mul(y, b.constant(0.5)))
    return b.finish(y)


def conv_module(x_shape, w_shape, epilogue: bool = False, **attributes):
    """@main(x, w[, bias]) = conv2d(x, w), then + bias[O, 1, 1] and relu when `epilogue`."""
    b = graphopt.GraphBuilder()
    y = b.conv2d(b.input("x", x_shape), b.input("w", w_shape), **attributes)
    if epilogue:
        y = b.relu(b.add(y, b.input("bias", (w_shape[0], 1, 1))))
    return b.finish(y)


@pytest.mark.parametrize(
    "a, b",
    [
        ((64, 32), (32, 48)),  # 2-D
        ((3, 16, 32), (3, 32, 24)),  # batched
        ((2, 1, 16, 32), (3, 32, 24)),  # batch dims broadcast
        ((4, 16, 32), (32, 24)),  # batch folded into rows: one GEMM
        ((4, 16, 32), (1, 32, 24)),
        ((16, 32), (2, 32, 8)),  # only b batched
    ],
)
@pytest.mark.parametrize("epilogue", [None, "relu", "gelu", "residual"])
def test_matmul(a, b, epilogue):
    check_on_blas(matmul_module(a, b, epilogue))


def test_matmul_f64():
    check_on_blas(matmul_module((8, 16), (16, 4), "relu", dtype="f64"))


@pytest.mark.parametrize(
    "x, w, attributes",
    [
        ((1, 3, 12, 12), (8, 3, 3, 3), {}),
        ((2, 3, 12, 11), (4, 3, 3, 2), {"padding": (1, 2, 0, 1)}),
        ((1, 2, 13, 12), (4, 2, 3, 3), {"strides": (2, 3), "padding": (1, 1, 1, 1)}),
        ((1, 2, 14, 14), (3, 2, 3, 3), {"dilations": (2, 3), "padding": (2, 0, 2, 1)}),
        ((2, 4, 9, 9), (6, 2, 3, 3), {"groups": 2, "strides": (2, 2)}),
        ((1, 4, 8, 8), (4, 1, 3, 3), {"groups": 4, "padding": (1, 1, 1, 1)}),  # depthwise
        ((2, 8, 6, 6), (16, 8, 1, 1), {}),  # pointwise
    ],
)
@pytest.mark.parametrize("epilogue", [False, True])
def test_conv2d(x, w, attributes, epilogue):
    check_on_blas(conv_module(x, w, epilogue, **attributes))


def test_epilogue_is_a_group_of_its_own_on_the_next_backend():
    exe = check_on_blas(matmul_module((256, 128), (128, 512), "relu"), threads=2)
    gemm, epilogue = exe.steps
    assert (gemm.backend, epilogue.backend) == ("blas", "cpu")
    assert isinstance(gemm.kernel, BlasKernel) and isinstance(epilogue.kernel, CpuKernel)
    assert [op.name for op in epilogue.op.body.block.ops] == ["graph.add", "graph.relu", "graph.yield"]
    assert "fused_add_relu_0 " in exe.report() and "(blas: a blas group holds exactly one matmul" in exe.report()


def test_epilogue_cpu_refuses_runs_on_the_interpreter(monkeypatch):
    monkeypatch.setattr(CpuBackend, "supports", lambda self, group: "refused for the test")
    exe = check_on_blas(matmul_module((8, 16), (16, 4), "gelu"))
    assert [type(step.kernel) for step in exe.steps] == [BlasKernel, ReferenceKernel]


def fused_group(arguments: str, ops: list[str], result: str, mode: str = "compile") -> graph.FusedOp:
    """The graph.fused (block arguments `arguments`, body `ops`, yielding `result` = "%v: type")
    of a parsed @main made of it alone."""
    types = [a.split(":")[1].strip() for a in arguments.split(",")]
    value, result_type = (part.strip() for part in result.split(":"))
    inputs = ", ".join(f"%in{i}" for i in range(len(types)))
    body = "\n".join([*ops, f"graph.yield {value} : {result_type}"])
    text = (
        f"func.func @main({', '.join(f'%in{i}: {t}' for i, t in enumerate(types))}) -> {result_type} {{\n"
        f"%r = graph.fused({inputs}) {{name = \"g\", mode = \"{mode}\"}} : ({', '.join(types)}) -> {result_type} {{\n"
        f"^bb0({arguments}):\n{body}\n}}\nfunc.return %r : {result_type}\n}}"
    )
    module = graphopt.parse(text)
    return next(op for op in module.walk() if isinstance(op, graph.FusedOp))


AB = "%a: tensor<4x8xf32>, %b: tensor<8x8xf32>"
MATMUL = "%m = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>"
M = "%m: tensor<4x8xf32>"


def test_group_with_a_broadcast_bias_is_split_between_blas_and_cpu():
    group = fused_group(
        f"{AB}, %c: tensor<8xf32>",
        [
            MATMUL,
            "%d = graph.broadcast_to %c : (tensor<8xf32>) -> tensor<4x8xf32>",
            "%s = graph.add %m, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>",
        ],
        "%s: tensor<4x8xf32>",
    )
    assert "not with graph.broadcast_to, graph.add" in get_backend("blas").supports(group)
    exe = check_on_blas(group.get_toplevel_object(), fuse=False)
    assert [step.backend for step in exe.steps] == ["blas", "cpu"]


REFUSED = {
    "two anchors": (
        AB,
        [MATMUL, "%n = graph.matmul %m, %b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>"],
        "%n: tensor<4x8xf32>",
        "exactly one matmul or conv2d, this one holds 2",
    ),
    "no anchor": (
        AB,
        ["%s = graph.add %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>"],
        "%s: tensor<4x8xf32>",
        "this one holds 0",
    ),
    "prologue": (
        AB,
        [
            "%t = graph.transpose %b {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>",
            "%m = graph.matmul %a, %t : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>",
        ],
        M,
        "blas runs a matmul alone, not with graph.transpose",
    ),
    "reduction epilogue": (
        AB,
        [MATMUL, "%s = graph.softmax %m : (tensor<4x8xf32>) -> tensor<4x8xf32>"],
        "%s: tensor<4x8xf32>",
        "not with graph.softmax",
    ),
    "data movement epilogue": (
        "%a: tensor<8x8xf32>, %b: tensor<8x8xf32>",
        [
            "%m = graph.matmul %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>",
            "%t = graph.transpose %m {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>",
        ],
        "%t: tensor<8x8xf32>",
        "not with graph.transpose",
    ),
    "growing epilogue": (
        f"{AB}, %c: tensor<2x4x8xf32>",
        [MATMUL, "%s = graph.add %m, %c : (tensor<4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>"],
        "%s: tensor<2x4x8xf32>",
        "not with graph.add",
    ),
    "integers": (
        "%a: tensor<4x8xi32>, %b: tensor<8x8xi32>",
        ["%m = graph.matmul %a, %b : (tensor<4x8xi32>, tensor<8x8xi32>) -> tensor<4x8xi32>"],
        "%m: tensor<4x8xi32>",
        "BLAS computes f32 and f64, not int32",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refusals_say_why(case):
    arguments, ops, result, reason = REFUSED[case]
    assert reason in get_backend("blas").supports(fused_group(arguments, ops, result))


def test_refuses_fallback_groups_two_results_and_other_ops():
    blas = get_backend("blas")
    assert "fallback" in blas.supports(fused_group(AB, [MATMUL], M, mode="fallback"))
    module = graphopt.parse(
        "func.func @main(%in0: tensor<4x8xf32>, %in1: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {\n"
        "%r:2 = graph.fused(%in0, %in1) {name = \"g\", mode = \"compile\"}"
        " : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {\n"
        f"^bb0({AB}):\n{MATMUL}\n"
        "graph.yield %m, %m : tensor<4x8xf32>, tensor<4x8xf32>\n}\n"
        "func.return %r#0, %r#1 : tensor<4x8xf32>, tensor<4x8xf32>\n}"
    )
    (group,) = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    assert "yields its matmul or conv2d result, once" in blas.supports(group)
    relu = graphopt.GraphBuilder()
    relu.relu(relu.input("x", (4,)))
    assert "'graph.relu' is neither a matmul, a conv2d nor a group holding one" in blas.supports(relu.block.last_op)


def test_estimate_is_the_gemm_at_the_blas_rate():
    module = matmul_module((256, 1024), (1024, 1024))
    (matmul,) = [op for op in module.walk() if isinstance(op, graph.MatmulOp)]
    blas, cpu = get_backend("blas"), get_backend("cpu")
    flops_time = 2 * 256 * 1024 * 1024 / machine().blas_flops
    assert flops_time < blas.estimate(matmul) < 1.5 * flops_time
    assert blas.estimate(matmul) < cpu.estimate(matmul)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_run_mixed_on_blas_and_cpu(path):
    exe = check_on_blas(graphopt.parse(path))
    assert {step.backend for step in exe.steps} == {"blas", "cpu"}, exe.report()
