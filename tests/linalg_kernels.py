"""Run graph-to-linalg kernels on NumPy arrays with xDSL's interpreter, and run whole modules kernel by kernel.

xDSL 0.74's own interpreter functions cover too little of what the kernels use (no
arith.divf/negf/casts, math ops beyond exp/sqrt/log, no linalg.index, one output per
linalg.generic, and buffers that cannot hold i1 or f16), so `KernelFunctions` supplies these ops with buffers
held as NumPy arrays and scalars computed in their MLIR type's NumPy dtype; the interpreter
framework (func, regions, linalg.yield, constants, comparisons, select) is xDSL's.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, memref
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.dialects.linalg.ops import FillOp, GenericOp, IndexOp
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.linalg import LinalgFunctions

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.lowering.convert_graph_to_linalg import lower_group
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR
from graphopt.transforms.fuse import FusePass

_erf = np.vectorize(math.erf, otypes=[np.float64])

SCALAR_FUNCTIONS = {
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.NegfOp: np.negative,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
    mathd.ExpOp: np.exp,
    mathd.LogOp: np.log,
    mathd.SqrtOp: np.sqrt,
    mathd.RsqrtOp: lambda x: 1 / np.sqrt(x),
    mathd.TanhOp: np.tanh,
    mathd.ErfOp: lambda x: _erf(x).astype(x.dtype),
    mathd.SinOp: np.sin,
    mathd.CosOp: np.cos,
    mathd.FloorOp: np.floor,
    mathd.CeilOp: np.ceil,
    mathd.AbsFOp: np.abs,
    mathd.AbsIOp: np.abs,
    mathd.PowFOp: np.power,
}
CASTS = (
    arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp, arith.UIToFPOp, arith.FPToSIOp,
    arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp,
)  # fmt: skip


def _dtype(t) -> np.dtype:
    return np.dtype(np.int64) if isinstance(t, IndexType) else numpy_dtype(t)


class KernelFunctions(InterpreterFunctions):
    """linalg.generic and memref buffers as NumPy arrays; scalar arith/math in NumPy dtypes."""

    def __init__(self):
        self.points: list[tuple[int, ...]] = []
        """The iteration of each linalg.generic being run (innermost last), for linalg.index."""

    @impl(GenericOp)
    def run_generic(self, interpreter, op, args):
        maps = [m.data for m in op.indexing_maps]
        bounds = op.get_shapes_to_loops_map().eval([d for a in args for d in a.shape], [])
        outputs = args[len(op.inputs) :]
        for point in itertools.product(*(range(b) for b in bounds)):
            self.points.append(point)
            scalars = [a[m.eval(point, ())].item() for a, m in zip(args, maps)]
            results = interpreter.run_ssacfg_region(op.body, tuple(scalars), "linalg.generic")
            for out, m, value in zip(outputs, maps[len(op.inputs) :], results):
                out[m.eval(point, ())] = value
            self.points.pop()
        return ()

    @impl(FillOp)
    def run_fill(self, interpreter, op, args):
        value, out = args
        out[...] = value
        return ()

    @impl(IndexOp)
    def run_index(self, interpreter, op, args):
        return (self.points[-1][op.dim.value.data],)

    @impl(memref.LoadOp)
    def run_load(self, interpreter, op, args):
        buffer, *indices = args
        return (buffer[tuple(indices)].item(),)

    @impl(memref.AllocOp)
    def run_alloc(self, interpreter, op, args):
        t = op.memref.type
        return (np.zeros(t.get_shape(), _dtype(t.get_element_type())),)

    @impl(memref.DeallocOp)
    def run_dealloc(self, interpreter, op, args):
        return ()


def _scalar_impl(op_type, function):
    def run(self, interpreter, op, args):
        dtype = _dtype(op.results[0].type)
        with np.errstate(all="ignore"):
            return (function(*(dtype.type(a) for a in args)).astype(dtype).item(),)

    return impl(op_type)(run)


def _cast_impl(op_type):
    def run(self, interpreter, op, args):
        with np.errstate(all="ignore"):
            return (np.asarray(args[0]).astype(_dtype(op.results[0].type)).item(),)

    return impl(op_type)(run)


for _op_type, _function in SCALAR_FUNCTIONS.items():
    setattr(KernelFunctions, f"run_{_op_type.name}", _scalar_impl(_op_type, _function))
for _op_type in CASTS:
    setattr(KernelFunctions, f"run_{_op_type.name}", _cast_impl(_op_type))
KernelFunctions = register_impls(KernelFunctions)


def run_kernel(kernel: func.FuncOp, *arrays: np.ndarray) -> list[np.ndarray]:
    """Call `kernel` on copies of the input arrays (plus its constant arguments); its output buffers."""
    module = ModuleOp([kernel.clone()])
    interpreter = Interpreter(module)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(LinalgFunctions())
    interpreter.register_implementations(KernelFunctions(), override=True)
    types = kernel.function_type.inputs.data
    constants = [
        dense_to_numpy(attrs.data[CONSTANT_ARG_ATTR])
        for attrs in (kernel.arg_attrs or [])
        if CONSTANT_ARG_ATTR in attrs.data
    ]
    given = [np.array(a, _dtype(t.get_element_type())) for a, t in zip([*arrays, *constants], types)]
    outputs = [np.zeros(t.get_shape(), _dtype(t.get_element_type())) for t in types[len(given) :]]
    interpreter.call_op(kernel.sym_name.data, (*given, *outputs))
    return outputs


def run_module(module: ModuleOp, *arrays, fuse: bool = True) -> tuple[np.ndarray, ...]:
    """@main run the way the runtime will: each compile group or single graph op as its kernel, in order."""
    module = module.clone()
    if fuse:
        FusePass().apply(Context(), module)
    main = next(op for op in module.body.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main")
    env = dict(zip(main.body.block.args, arrays))
    for node in main.body.block.ops:
        if isinstance(node, func.ReturnOp):
            return tuple(env[v] for v in node.operands)
        if isinstance(node, graph.ConstantOp):
            env[node.result] = dense_to_numpy(node.value)
            continue
        outputs = run_kernel(lower_group(node, "kernel"), *(env[v] for v in node.operands))
        env.update(zip(node.results, outputs))
    raise AssertionError("@main has no func.return")
