"""graphopt: an xDSL-based graph compiler.

    import graphopt
    m = graphopt.parse("examples/mlp.mlir")      # verified ModuleOp
    outs = graphopt.interpret(m, x)              # reference semantics (NumPy)
    exe = graphopt.compile(m)                    # canonicalize + fuse + partition + lower + JIT
    outs = exe(x)
    exe.save("m.gx"); exe = graphopt.load("m.gx")  # a saved Executable: no compile on load

The names below load their modules on first use, so `import graphopt.dialects.graph` (or a
tool that only parses) loads neither the compiler, the JIT nor llvmlite.
"""

from importlib import import_module

_EXPORTS = {
    "Executable": "graphopt.runtime.executable",
    "GraphBuilder": "graphopt.builder",
    "GraphoptError": "graphopt.errors",
    "compile": "graphopt.compiler",
    "from_onnx": "graphopt.onnx_import",
    "interpret": "graphopt.interpreter",
    "load": "graphopt.compiler",
    "parse": "graphopt.parsing",
    "register_implementation": "graphopt.backends.implementation",
    "to_onnx": "graphopt.onnx_export",
}
"""Public name -> the module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphopt' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
