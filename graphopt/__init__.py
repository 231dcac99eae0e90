"""graphopt: an xDSL-based graph compiler.

    import graphopt
    m = graphopt.parse("examples/mlp.mlir")      # verified ModuleOp
    outs = graphopt.interpret(m, x)              # reference semantics (NumPy)
    exe = graphopt.compile(m)                    # fuse + lower + JIT (CPU)
    outs = exe(x)
"""

from graphopt.builder import GraphBuilder
from graphopt.compiler import Executable, compile
from graphopt.errors import GraphoptError
from graphopt.interpreter import interpret
from graphopt.onnx_import import from_onnx
from graphopt.parsing import parse

__all__ = ["Executable", "GraphBuilder", "GraphoptError", "compile", "from_onnx", "interpret", "parse"]
