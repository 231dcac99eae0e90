"""graphopt: an xDSL-based graph compiler.

    import graphopt
    m = graphopt.parse("examples/mlp.mlir")      # verified ModuleOp
    outs = graphopt.interpret(m, x)              # reference semantics (NumPy)
"""

from graphopt.builder import GraphBuilder
from graphopt.errors import GraphoptError
from graphopt.interpreter import interpret
from graphopt.parsing import parse

__all__ = ["GraphBuilder", "GraphoptError", "interpret", "parse"]
