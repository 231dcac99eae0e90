"""graphopt: an xDSL-based graph compiler.

    import graphopt
    m = graphopt.parse("examples/mlp.mlir")      # verified ModuleOp
    outs = graphopt.interpret(m, x)              # reference semantics (NumPy)
    exe = graphopt.compile(m)                    # fuse + lower + JIT (CPU)
    outs = exe(x)
"""

import os

# graphopt's kernel threads run beside OpenBLAS's (the blas backend, NumPy). By default an
# OpenBLAS worker spins for about 2^28 cycles after each GEMM, holding a core that a row chunk
# of the next cpu kernel needs: at 2 threads a cpu GEMM measured after a blas one took 6.1 ms
# instead of 3.3 ms, and the cost search chose blas for it. 2^4 cycles puts the workers to sleep
# at once. A default only, and only in effect when graphopt is imported before NumPy.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from graphopt.builder import GraphBuilder
from graphopt.compiler import Executable, compile
from graphopt.errors import GraphoptError
from graphopt.interpreter import interpret
from graphopt.onnx_import import from_onnx
from graphopt.parsing import parse

__all__ = ["Executable", "GraphBuilder", "GraphoptError", "compile", "from_onnx", "interpret", "parse"]
