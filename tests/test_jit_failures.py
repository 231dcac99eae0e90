"""What LLVM fails on never takes the process down (issue 15): the inputs that made LLVM 22's loop
vectorizer abort now compile and match the interpreter, and an LLVM error is a GraphoptError."""

import subprocess
import sys

import numpy as np
import pytest

import graphopt
from graphopt import GraphBuilder
from graphopt.errors import GraphoptError
from graphopt.lowering import llvm_module
from graphopt.lowering.pipelines import CPU

ABORTING = [("log_softmax", (17, 4), 0), ("softmax", (17, 4), 0), ("softmax", (16, 4), 0),
            ("softmax", (65, 4), 0), ("log_softmax", (4, 17, 4), 1)]
"""(op, shape, axis) that aborted with LoopVectorize's "VPlan cost model and legacy cost model disagreed"."""

CHILD = """
import sys, numpy as np, graphopt
op, shape, axis = sys.argv[1], tuple(map(int, sys.argv[2].split("x"))), int(sys.argv[3])
b = graphopt.GraphBuilder()
module = b.finish(getattr(b, op)(b.input("x", shape), axis=axis))
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
x.flat[::7] = [np.inf, -np.inf, np.nan][: len(x.flat[::7])] + [0.5] * max(0, len(x.flat[::7]) - 3)
(compiled,) = graphopt.compile(module, backends=("cpu",), threads=1)(x)
(expected,) = graphopt.interpret(module, x)
np.testing.assert_allclose(compiled, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
print("same")
"""


@pytest.mark.parametrize("op, shape, axis", ABORTING, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_row_loops_that_aborted_llvm_compile_and_match(op, shape, axis):
    """Run in a child process: an abort there fails this test instead of ending pytest."""
    child = subprocess.run([sys.executable, "-c", CHILD, op, "x".join(map(str, shape)), str(axis)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and child.stdout.strip() == "same", child.stderr[-2000:]


def test_short_rows_under_an_outer_reduction_are_vectorized_without_interleaving():
    b = GraphBuilder()
    narrow = b.finish(b.softmax(b.input("x", (17, 4)), axis=0))
    b = GraphBuilder()
    wide = b.finish(b.softmax(b.input("x", (17, 64)), axis=0))
    assert [llvm_module.interleaving_is_safe(kernels(m)) for m in (narrow, wide)] == [False, True]


def kernels(module):
    return CPU.apply(module.clone(), "to-kernels")


def test_an_llvm_error_is_a_graphopt_error(monkeypatch):
    """A ukernel generator that emits IR LLVM cannot parse (a bug) fails with the kernel's name."""
    monkeypatch.setattr(llvm_module, "ukernel_ir", lambda name, types: "this is not LLVM IR")
    b = GraphBuilder()
    x = b.input("x", (3, 11))
    module = b.finish(b.matmul(x, b.constant(np.ones((11, 67), np.float32))))
    with pytest.raises(GraphoptError, match="LLVM could not compile the kernels matmul_0"):
        graphopt.compile(module, backends=("cpu",), threads=1)
