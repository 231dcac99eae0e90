"""graphopt.from_onnx and graph-import against ONNX Runtime: every supported op, whole models, errors.

Each node case is a one-node ONNX model built with onnx.helper. It is imported, interpreted
and compared with ONNX Runtime; for compiled runs all cases are merged side by side into one
@main, compiled once per backend set, and each case checks its slice of the results.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from test_cli import assert_fails_with, run_in_process, run_tool
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

import graphopt
from graphopt.backends import backend_names
from graphopt.onnx_import import CONVERTERS
from graphopt.tools import graph_import

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper = pytest.importorskip("onnx.helper")
numpy_helper = pytest.importorskip("onnx.numpy_helper")
TensorProto = onnx.TensorProto

TOLERANCE = {"rtol": 1e-3, "atol": 1e-5}
BACKEND_SETS = [s for s in (("cpu",), ("cpu", "blas")) if set(s) <= set(backend_names())]
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"

rng = np.random.default_rng(0)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def positive(*shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


def booleans(*shape: int) -> np.ndarray:
    return rng.uniform(size=shape) < 0.5


def small_ints(*shape: int) -> np.ndarray:
    return rng.integers(-2, 3, shape).astype(np.int64)


@dataclass(frozen=True)
class Const:
    """A node input given as an initializer (known at import) instead of a graph input."""

    value: np.ndarray


def ints(*values: int) -> Const:
    return Const(np.asarray(values, np.int64))


def scalar(value: float) -> Const:
    return Const(np.asarray(value, np.float32))


@dataclass
class NodeCase:
    op_type: str
    inputs: list
    """Arrays (graph inputs), Const (initializers) or None (an optional input left out)."""
    attributes: dict
    opset: int
    outputs: int
    id: str = field(default="")

    def model(self) -> onnx.ModelProto:
        names, graph_inputs, initializers = [], [], []
        for i, value in enumerate(self.inputs):
            name = "" if value is None else f"in{i}"
            if isinstance(value, Const):
                initializers.append(numpy_helper.from_array(value.value, name))
            elif value is not None:
                dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
                graph_inputs.append(helper.make_tensor_value_info(name, dtype, value.shape))
            names.append(name)
        outputs = [f"out{i}" for i in range(self.outputs)]
        node = helper.make_node(self.op_type, names, outputs, name="node", **self.attributes)
        graph = helper.make_graph(
            [node], "case", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], initializers
        )
        opsets = [helper.make_opsetid("", self.opset)]
        return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))

    def arrays(self) -> list[np.ndarray]:
        return [v for v in self.inputs if isinstance(v, np.ndarray)]


def case(op_type: str, *inputs, opset: int = 17, outputs: int = 1, **attributes) -> NodeCase:
    return NodeCase(op_type, list(inputs), attributes, opset, outputs)


def floats(*values: float) -> Const:
    return Const(np.asarray(values, np.float32))


NO_ROI = floats()
X4 = normal(2, 3, 6, 6)
X1D = normal(2, 3, 10)
SPECIAL = np.asarray([[np.nan, np.inf, -np.inf, 0.0], [1.5, -2.0, np.nan, -np.inf]], np.float32)
X3 = normal(3, 4, 5)
W3 = Const(normal(4, 3, 3, 3))
BN = [Const(normal(3)), Const(normal(3)), Const(normal(3)), Const(positive(3))]

NODE_CASES = [
    *(case(op, normal(3, 4)) for op in ("Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs")),
    *(case(op, positive(3, 4)) for op in ("Log", "Sqrt", "Reciprocal")),
    *(case(op, normal(3, 4) * 3) for op in ("Sin", "Cos", "Floor", "Ceil")),
    *(case(op, np.round(X3), np.round(normal(4, 1))) for op in ("Equal", "Less", "LessOrEqual", "Greater",
                                                                 "GreaterOrEqual")),
    case("Not", normal(3, 4) > 0),
    case("Where", normal(4, 1) > 0, X3, normal(5)),
    case("Expand", normal(4, 1), ints(3, 1, 5)),
    case("Relu", normal(3, 4), opset=9),
    case("Abs", np.arange(-3, 3, dtype=np.int64)),
    case("LeakyRelu", normal(3, 4)),
    case("LeakyRelu", normal(3, 4), alpha=0.2, opset=9),
    case("Gelu", normal(3, 4), opset=20),
    case("Gelu", normal(3, 4), opset=20, approximate="tanh"),
    case("Clip", normal(3, 4), opset=9, min=-0.5, max=0.5),
    case("Clip", normal(3, 4), opset=9, max=0.5),
    case("Clip", normal(3, 4), scalar(-0.5), scalar(0.5), opset=11),
    case("Clip", normal(3, 4), None, scalar(0.5), opset=13),
    case("Clip", normal(3, 4), opset=13),
    case("Add", X3, normal(4, 1)),
    case("Add", X3, Const(normal(5)), opset=9),
    case("Add", np.arange(6, dtype=np.int64), np.arange(6, dtype=np.int64)),
    case("Sub", X3, normal(5)),
    case("Mul", X3, normal(3, 1, 5)),
    case("Div", X3, positive(4, 5)),
    case("Pow", positive(3, 4), normal(4), opset=13),
    case("Pow", positive(3, 4), Const(np.asarray(2, np.int64)), opset=13),
    case("Pow", positive(3, 4), scalar(0.5), opset=9),
    case("Max", normal(3, 4)),
    case("Max", normal(3, 4), normal(4), opset=9),
    case("Max", normal(3, 4), normal(4), normal(3, 1)),
    case("Min", normal(3, 4), normal(4)),
    case("Min", normal(3, 4), normal(3, 1), normal(4), opset=9),
    case("Sum", normal(3, 4)),
    case("Sum", normal(3, 4), normal(4), Const(normal(3, 1))),
    case("Mean", normal(3, 4), normal(4), normal(3, 4), opset=9),
    case("Cast", normal(3, 4) * 3, to=TensorProto.INT64),
    case("Cast", np.arange(-3, 3, dtype=np.int64), to=TensorProto.FLOAT, opset=9),
    case("Cast", normal(3, 4), to=TensorProto.DOUBLE),
    case("Cast", normal(3, 4), to=TensorProto.FLOAT),
    case("Softmax", normal(2, 3, 4), opset=11),
    case("Softmax", normal(2, 3, 4), opset=11, axis=2),
    case("Softmax", normal(2, 3, 4), opset=13),
    case("Softmax", normal(2, 3, 4), opset=13, axis=1),
    case("LogSoftmax", normal(2, 3, 4), opset=9),
    case("LogSoftmax", normal(2, 3, 4), opset=13, axis=0),
    case("LayerNormalization", normal(2, 3, 4), Const(normal(4)), Const(normal(4))),
    case("LayerNormalization", normal(2, 3, 4), normal(3, 4), normal(3, 4), axis=1, epsilon=1e-3),
    case("LayerNormalization", normal(2, 3, 4), Const(normal(4))),
    case("BatchNormalization", X4, *BN, opset=9),
    case("BatchNormalization", normal(2, 3, 5), *BN, opset=15, epsilon=1e-3),
    case("LRN", normal(2, 5, 4, 4), size=3),
    case("LRN", normal(2, 5, 4, 4), size=5, alpha=0.01, beta=0.5, bias=2.0, opset=9),
    case("MaxPool", X4, kernel_shape=[2, 2], strides=[2, 2]),
    case("MaxPool", X4, kernel_shape=[3, 3], pads=[1, 1, 1, 1], opset=9),
    case("MaxPool", X4, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER", opset=11),
    case("MaxPool", X4, kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
    case("MaxPool", X4, kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID", opset=12),
    case("MaxPool", X4, kernel_shape=[2, 3], strides=[1, 3], ceil_mode=1),
    case("AveragePool", X4, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    case("AveragePool", X4, kernel_shape=[3, 3], pads=[1, 0, 1, 0], count_include_pad=1, opset=9),
    case("AveragePool", X4, kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER", opset=19),
    case("GlobalAveragePool", X4),
    case("GlobalAveragePool", normal(2, 3, 7), opset=9),
    case("GlobalMaxPool", X4),
    case("Conv", X4, W3, Const(normal(4))),
    case("Conv", X4, W3, pads=[1, 1, 1, 1], strides=[2, 2], opset=9),
    case("Conv", X4, W3, dilations=[2, 2], pads=[0, 1, 1, 0], opset=11),
    case("Conv", normal(2, 6, 5, 5), Const(normal(6, 2, 3, 3)), Const(normal(6)), group=3),
    case("Conv", X4, W3, strides=[2, 2], auto_pad="SAME_UPPER"),
    case("Conv", X4, Const(normal(4, 3, 2, 2)), auto_pad="SAME_LOWER"),
    case("Conv", X4, normal(4, 3, 3, 3), normal(4), auto_pad="VALID"),
    case("Gemm", normal(3, 4), normal(4, 5), Const(normal(5))),
    case("Gemm", normal(4, 3), Const(normal(5, 4)), normal(3, 5), transA=1, transB=1, alpha=0.5, beta=2.0),
    case("Gemm", normal(3, 4), normal(4, 5), normal(1, 5), beta=0.0, opset=9),
    case("Gemm", normal(3, 4), normal(5, 4), transB=1, alpha=2.0),
    case("MatMul", normal(3, 4), normal(4, 5)),
    case("MatMul", normal(2, 3, 4), Const(normal(4, 5)), opset=9),
    case("MatMul", normal(2, 1, 3, 4), normal(3, 4, 2)),
    case("MatMul", normal(4), normal(2, 4, 5)),
    case("MatMul", normal(3, 4), normal(4)),
    case("Reshape", X3, ints(0, -1)),
    case("Reshape", X3, ints(-1), opset=9),
    case("Reshape", X3, ints(3, 0, 5), opset=14, allowzero=0),
    case("Flatten", X3),
    case("Flatten", X3, axis=0, opset=9),
    case("Flatten", X3, axis=-1),
    case("Flatten", X3, axis=3),
    case("Transpose", X3),
    case("Transpose", X3, perm=[0, 2, 1], opset=9),
    case("Concat", normal(2, 3), normal(2, 4), axis=1),
    case("Concat", normal(2, 3), Const(normal(2, 1)), normal(2, 2), axis=-1, opset=9),
    case("Split", normal(2, 4), axis=1, split=[1, 3], outputs=2, opset=11),
    case("Split", normal(4, 2), outputs=2, opset=9),
    case("Split", normal(2, 4), ints(3, 1), axis=-1, outputs=2, opset=13),
    case("Split", normal(6, 2), outputs=3, opset=13),
    case("Split", normal(2, 5), axis=1, num_outputs=3, outputs=3, opset=18),
    case("Slice", X3, starts=[0, 1], ends=[2, 3], axes=[0, 2], opset=9),
    case("Slice", X3, starts=[1, -3], ends=[100, -1], opset=9),
    case("Slice", X3, ints(0), ints(np.iinfo(np.int64).max), ints(-1), ints(2), opset=13),
    case("Slice", X3, ints(-1, 3), ints(np.iinfo(np.int64).min, 0), ints(2, 1), ints(-1, -2), opset=13),
    case("Slice", X3, ints(1, 0), ints(3, 2), opset=10),
    case("Pad", X3, pads=[0, 1, 2, 1, 0, 0], value=1.5, opset=9),
    case("Pad", X3, ints(1, 0, 0, 0, 2, 1), scalar(-1.0), opset=11),
    case("Pad", X3, ints(0, -1, 1, 1, 2, -2), mode="constant", opset=13),
    case("Pad", X3, ints(2, 1), None, ints(-1), opset=18),
    case("Squeeze", normal(3, 1, 4, 1), axes=[1], opset=11),
    case("Squeeze", normal(3, 1, 4, 1), opset=9),
    case("Squeeze", normal(3, 1, 4, 1), ints(1, -1), opset=13),
    case("Unsqueeze", X3, axes=[0, 4], opset=11),
    case("Unsqueeze", X3, ints(-1), opset=13),
    case("Gather", X3, Const(np.asarray([2, 0], np.int64))),
    case("Gather", X3, np.asarray([[0, -1], [3, 1]], np.int64), axis=1, opset=9),
    case("Gather", X3, Const(np.asarray(1, np.int32)), axis=-1),
    case("Identity", X3),
    case("Identity", X3, opset=9),
    case("Dropout", X3, opset=9, ratio=0.3),
    case("Dropout", X3, outputs=2, opset=12),
    case("Dropout", X3, scalar(0.4), Const(np.asarray(False)), opset=13),
    case("Constant", value=numpy_helper.from_array(normal(2, 3)), opset=9),
    case("Constant", value_float=1.5, opset=13),
    case("Constant", value_ints=[1, 2, 3], opset=13),
    case("ConstantOfShape", ints(2, 3), opset=9),
    case("ConstantOfShape", ints(3), value=numpy_helper.from_array(np.asarray([7], np.int64))),
    case("Shape", X3),
    case("Shape", X3, start=1, opset=15),
    case("Shape", Const(X3), start=-2, end=-1, opset=15),
    *(case(op, X3, axes=[1], opset=11) for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")),
    *(case(op, X3, keepdims=0, opset=13) for op in ("ReduceMean", "ReduceMax")),
    case("ReduceSum", X3, ints(0, 2), keepdims=0, opset=13),
    case("ReduceSum", X3, opset=13, noop_with_empty_axes=1),
    case("ReduceMean", X3, ints(-1), opset=18),
    case("ReduceMax", X3, ints(0, 1), keepdims=0, opset=18),
    case("ReduceMin", X3, opset=18),
    *(case(op, positive(3, 4) - 1.25) for op in ("Sin", "Cos")),
    case("Sin", normal(2, 3), opset=9),
    *(case(op, small_ints(3, 4), small_ints(4)) for op in ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")),
    *(case(op, normal(3, 4), normal(3, 1), opset=9) for op in ("Greater", "Less")),
    case("Equal", normal(3, 4), Const(normal(3, 4)), opset=11),
    case("GreaterOrEqual", X3, Const(normal(5)), opset=16),
    case("LessOrEqual", small_ints(2, 3).astype(np.float32), small_ints(2, 3).astype(np.float32), opset=12),
    case("Equal", booleans(3, 4), booleans(4), opset=13),
    case("Equal", Const(np.arange(4)), Const(np.asarray(2))),
    case("Not", booleans(3, 4)),
    case("Not", booleans(5), opset=9),
    *(case(op, booleans(3, 4), booleans(4)) for op in ("And", "Or", "Xor")),
    *(case(op, booleans(2, 1, 3), booleans(4, 1), opset=9) for op in ("And", "Or", "Xor")),
    case("Where", booleans(3, 4), normal(3, 4), normal(4)),
    case("Where", booleans(3, 1), Const(np.asarray(-1e9, np.float32)), normal(2, 3, 4), opset=9),
    case("Where", booleans(4), small_ints(3, 4), Const(np.asarray(7, np.int64)), opset=16),
    case("Where", booleans(2, 3), small_ints(2, 3).astype(np.int32), small_ints(3).astype(np.int32)),
    case("IsNaN", SPECIAL),
    case("IsNaN", SPECIAL.astype(np.float64), opset=9),
    case("IsInf", SPECIAL, opset=10),
    case("IsInf", SPECIAL, detect_negative=0),
    case("IsInf", SPECIAL.astype(np.float64), detect_positive=0, opset=20),
    case("IsInf", SPECIAL, detect_positive=0, detect_negative=0),
    case("Expand", normal(3, 1), ints(2, 3, 4), opset=9),
    case("Expand", normal(3, 4), ints(4)),
    case("Expand", normal(1, 4), ints(3, 1)),
    case("Expand", booleans(1, 1, 4), ints(2, 3, 1)),
    case("Expand", small_ints(3), ints(1)),
    *(case(op, normal(3, 4) * 4) for op in ("Softplus", "HardSigmoid", "HardSwish")),
    case("Mish", normal(3, 4) * 4, opset=18),
    case("Softplus", normal(2, 5) * 40, opset=9),
    case("Mish", normal(2, 5) * 40, opset=22),
    case("HardSigmoid", normal(3, 4) * 4, alpha=0.5, beta=0.25, opset=9),
    case("HardSwish", normal(2, 3, 4) * 6, opset=14),
    case("RMSNormalization", normal(2, 3, 8), Const(normal(8)), opset=23),
    case("RMSNormalization", normal(2, 3, 8), normal(3, 8), axis=1, epsilon=1e-3, opset=23),
    case("RMSNormalization", normal(2, 3, 8), Const(normal(1, 8)), axis=-2, opset=23),
    case("InstanceNormalization", X4, Const(normal(3)), Const(normal(3))),
    case("InstanceNormalization", normal(2, 3, 7), normal(3), normal(3), epsilon=1e-2, opset=9),
    case("GroupNormalization", normal(2, 6, 4, 4), Const(normal(6)), Const(normal(6)), num_groups=3, opset=21),
    case("GroupNormalization", normal(2, 4, 5), normal(4), normal(4), num_groups=4, epsilon=1e-3, opset=21),
    case("GroupNormalization", normal(2, 6, 3, 3), Const(normal(2)), Const(normal(2)), num_groups=2, opset=18),
    case("Range", Const(np.asarray(0, np.int64)), Const(np.asarray(7, np.int64)), Const(np.asarray(2, np.int64)), opset=11),
    case("Range", Const(np.asarray(1.5, np.float32)), Const(np.asarray(-2, np.float32)), Const(np.asarray(-0.75, np.float32))),
    case("Range", Const(np.asarray(5, np.int32)), Const(np.asarray(3, np.int32)), Const(np.asarray(1, np.int32))),
    case("Trilu", normal(3, 4, 5)),
    case("Trilu", normal(4, 5), Const(np.asarray(-1, np.int64)), upper=0, opset=14),
    case("Trilu", small_ints(2, 4, 4), Const(np.asarray(2, np.int64))),
    case("Trilu", Const(np.ones((4, 4), np.float32)), upper=0),
    case("CumSum", Const(X3), Const(np.asarray(1, np.int64)), opset=11),
    case("CumSum", Const(np.arange(12, dtype=np.int64).reshape(3, 4)), Const(np.asarray(-1, np.int32)), exclusive=1),
    case("CumSum", Const(X3), Const(np.asarray(0, np.int64)), reverse=1),
    case("CumSum", Const(X3), Const(np.asarray(2, np.int64)), reverse=1, exclusive=1),
    case("CumSum", X3, Const(np.asarray(1, np.int64))),
    case("CumSum", np.asarray([[1, np.nan, 2, np.inf], [-np.inf, 1, 2, 3]], np.float32), Const(np.asarray(1, np.int64))),
    case("CumSum", X3, Const(np.asarray(-3, np.int32)), reverse=1, exclusive=1),
    case("CumSum", np.arange(12, dtype=np.int64).reshape(3, 4), Const(np.asarray(1, np.int64)), exclusive=1),
    case("CumSum", np.arange(-5, 7, dtype=np.int32), Const(np.asarray(0, np.int64)), reverse=1),
    case("GatherElements", X3, rng.integers(-4, 4, (3, 2, 5)), axis=1),
    case("GatherElements", X3, Const(rng.integers(-3, 3, (2, 4, 5))), opset=11),
    case("GatherElements", small_ints(3, 4), rng.integers(0, 4, (3, 6)).astype(np.int32), axis=-1),
    case("GatherElements", normal(4, 3), Const(rng.integers(-4, 4, (2, 3)).astype(np.int32)), opset=13),
    case("Einsum", normal(2, 3, 4), normal(2, 4, 5), equation="bij,bjk->bik", opset=12),
    case("Einsum", normal(2, 3, 4, 5), Const(normal(2, 3, 5, 6)), equation="...ij,...jk->...ik"),
    case("Einsum", normal(2, 4, 6, 8), normal(2, 4, 5, 8), equation="bhid,bhjd->bhij"),
    case("Einsum", normal(2, 5, 3), normal(3, 4), equation="bsd, de -> bse"),
    case("Einsum", normal(3, 4), normal(4, 5), equation="ij,jk"),
    case("Einsum", normal(2, 3, 4), normal(5, 4), equation="...d,hd->...h"),
    case("Einsum", normal(2, 3, 4), Const(normal(5, 4)), equation="bsd,hd->bhs"),
    case("Einsum", normal(3, 4), normal(5), equation="ij,k->kji"),
    case("Einsum", normal(2, 3, 4), equation="abc->cab"),
    case("Einsum", normal(2, 3, 4, 5), equation="...ij->...ji"),
    case("Conv", X1D, Const(normal(4, 3, 3)), Const(normal(4)), pads=[1, 1]),
    case("Conv", X1D, Const(normal(4, 3, 3)), strides=[2], dilations=[2], pads=[2, 1], opset=11),
    case("Conv", normal(2, 6, 9), normal(6, 2, 3), normal(6), group=3, auto_pad="SAME_UPPER", strides=[2]),
    case("Conv", X1D, Const(normal(5, 3, 4)), auto_pad="SAME_LOWER", opset=22),
    case("Conv", X1D, Const(normal(5, 3, 2)), auto_pad="VALID", opset=9),
    case("MaxPool", X1D, kernel_shape=[3], strides=[2], pads=[1, 1]),
    case("MaxPool", X1D, kernel_shape=[2], auto_pad="SAME_UPPER", opset=9),
    case("AveragePool", X1D, kernel_shape=[3], pads=[1, 1], count_include_pad=1, opset=11),
    case("AveragePool", X1D, kernel_shape=[4], strides=[3], auto_pad="SAME_LOWER", opset=19),
    case("Mod", normal(3, 4) * 5, positive(4) - 1.25, fmod=1),
    case("Mod", normal(3, 4) * 5, Const(positive(3, 1)), fmod=1, opset=10),
    case("Mod", Const(np.arange(-6, 6).reshape(3, 4)), Const(np.asarray([4, -3, 5, 7]))),
    case("Mod", Const(np.arange(-6, 6, dtype=np.int32)), Const(np.asarray(-4, np.int32)), fmod=1),
    case("ConvTranspose", normal(2, 3, 5, 5), Const(normal(3, 4, 3, 3))),
    case("ConvTranspose", normal(2, 3, 5, 5), Const(normal(3, 4, 3, 3)), Const(normal(4)), strides=[2, 2],
         pads=[1, 1, 1, 1], output_padding=[1, 1], opset=11),
    case("ConvTranspose", normal(1, 4, 4, 5), Const(normal(4, 2, 3, 2)), strides=[2, 3], dilations=[2, 1],
         pads=[0, 2, 1, 0], group=2),
    case("ConvTranspose", normal(1, 4, 4, 5), normal(4, 1, 2, 2), normal(4), strides=[2, 2], group=4,
         pads=[3, 0, 0, 3]),
    case("ConvTranspose", normal(2, 3, 5, 5), Const(normal(3, 4, 3, 3)), strides=[2, 2], auto_pad="VALID", opset=9),
    case("ConvTranspose", X1D, Const(normal(3, 5, 4)), Const(normal(5)), strides=[2], pads=[1, 1]),
    case("ConvTranspose", normal(2, 4, 7), normal(4, 3, 3), strides=[3], dilations=[2], output_padding=[2], group=2,
         kernel_shape=[3]),
    case("ConvTranspose", normal(1, 3, 3, 4), Const(normal(3, 2, 3, 3)), strides=[2, 2], output_shape=[4, 6]),
    case("ConvTranspose", normal(1, 3, 3, 4), Const(normal(3, 2, 3, 3)), strides=[2, 2], output_shape=[5, 6],
         auto_pad="SAME_UPPER"),
    case("ConvTranspose", normal(1, 3, 3, 4), Const(normal(3, 2, 3, 3)), strides=[3, 2], output_shape=[9, 10]),
    case("ConvTranspose", normal(1, 3, 3, 4), Const(normal(3, 2, 3, 3)), strides=[2, 2], auto_pad="SAME_UPPER"),
    case("ConvTranspose", normal(1, 3, 3, 4), Const(normal(3, 2, 3, 3)), strides=[2, 3], auto_pad="SAME_LOWER",
         output_padding=[1, 0]),
    case("ConvTranspose", X1D, Const(normal(3, 5, 4)), strides=[2], output_shape=[20]),
    case("Resize", X4, NO_ROI, floats(1, 1, 2, 2)),
    case("Resize", X4, NO_ROI, floats(1, 1, 2, 3), mode="linear", opset=11),
    case("Resize", X4, NO_ROI, floats(1, 1, 2, 3), mode="cubic"),
    case("Resize", X4, NO_ROI, floats(1, 1, 0.6, 1.7), mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
    case("Resize", X4, NO_ROI, floats(1, 1, 3, 2), mode="cubic", coordinate_transformation_mode="align_corners"),
    case("Resize", X4, NO_ROI, floats(1, 1, 2, 2.5), mode="cubic", coordinate_transformation_mode="asymmetric",
         opset=13),
    case("Resize", X4, NO_ROI, floats(1, 1, 1.5, 2), mode="cubic", coordinate_transformation_mode="pytorch_half_pixel",
         exclude_outside=1),
    case("Resize", X4, NO_ROI, floats(1, 1, 0.5, 0.6), mode="linear", coordinate_transformation_mode="align_corners"),
    case("Resize", X4, NO_ROI, floats(1, 1, 1.5, 2.5), coordinate_transformation_mode="asymmetric",
         nearest_mode="floor"),
    case("Resize", X4, NO_ROI, floats(1, 1, 1.5, 0.5), nearest_mode="round_prefer_ceil", opset=13),
    case("Resize", X4, NO_ROI, floats(1, 1, 0.75, 1.8), coordinate_transformation_mode="pytorch_half_pixel",
         nearest_mode="ceil"),
    case("Resize", X4, NO_ROI, None, ints(2, 3, 7, 3), mode="linear",
         coordinate_transformation_mode="pytorch_half_pixel"),
    case("Resize", X4, NO_ROI, None, ints(2, 3, 8, 9), mode="linear",
         coordinate_transformation_mode="half_pixel_symmetric", opset=19),
    case("Resize", X4, None, None, ints(9, 1), axes=[2, 3], mode="linear", opset=18),
    case("Resize", X4, floats(1, 1, 2, 1.5), opset=10),
    case("Resize", X4, floats(1, 1, 0.5, 2), mode="linear", opset=10),
    case("Resize", X1D, NO_ROI, floats(1, 1, 2), mode="linear"),
    case("Resize", Const(X1D), NO_ROI, None, ints(2, 3, 4)),
]


for _index, _case in enumerate(NODE_CASES):
    _case.id = f"{_case.op_type}-{_index}-opset{_case.opset}"


def test_every_supported_op_has_a_node_case():
    assert sorted({c.op_type for c in NODE_CASES}) == sorted(CONVERTERS)


def onnx_runtime(model: onnx.ModelProto, arrays: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


def assert_matches(actual, expected) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        np.testing.assert_allclose(got, want, **TOLERANCE)


@functools.cache
def expected(case_id: str) -> list[np.ndarray]:
    """ONNX Runtime's results of a node case."""
    node_case = next(c for c in NODE_CASES if c.id == case_id)
    return onnx_runtime(node_case.model(), node_case.arrays())


@pytest.mark.parametrize("node_case", NODE_CASES, ids=lambda c: c.id)
def test_node_interpreted_matches_onnxruntime(node_case: NodeCase):
    module = graphopt.from_onnx(node_case.model())
    assert_matches(graphopt.interpret(module, *node_case.arrays()), expected(node_case.id))


def side_by_side(modules: list[ModuleOp]) -> ModuleOp:
    """One @main that computes every module's @main on its own arguments, results concatenated."""
    block, results = Block(), []
    for module in modules:
        function = next(op for op in module.ops if isinstance(op, FuncOp))
        mapping = {arg: block.insert_arg(arg.type, len(block.args)) for arg in function.args}
        for op in function.body.block.ops:
            if isinstance(op, ReturnOp):
                results += [mapping[v] for v in op.operands]
            else:
                block.add_op(op.clone(value_mapper=mapping))
    block.add_op(ReturnOp(*results))
    signature = ([a.type for a in block.args], [r.type for r in results])
    return ModuleOp([FuncOp("main", signature, Region(block))])


@pytest.fixture(scope="module", params=BACKEND_SETS, ids="+".join)
def compiled(request) -> dict[str, list[np.ndarray]]:
    """Every node case's compiled results, from one module compiled once for `backends`."""
    modules = [graphopt.from_onnx(c.model()) for c in NODE_CASES]
    executable = graphopt.compile(side_by_side(modules), backends=request.param)
    results = iter(executable(*(a for c in NODE_CASES for a in c.arrays())))
    return {c.id: [next(results) for _ in range(c.outputs)] for c in NODE_CASES}


@pytest.mark.parametrize("node_case", NODE_CASES, ids=lambda c: c.id)
def test_node_compiled_matches_onnxruntime(node_case: NodeCase, compiled):
    assert_matches(compiled[node_case.id], expected(node_case.id))


# ------------------------------------------------------------------------- folding


def test_shape_computations_fold_at_import():
    """Shape arithmetic feeding Reshape and ConstantOfShape leaves only the reshape, the ones and the add."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    ones_value = numpy_helper.from_array(np.ones(1, np.float32))
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Slice", ["shape", "one", "three"], ["rest"]),
        helper.make_node("Split", ["rest"], ["rows", "columns"], axis=0),
        helper.make_node("Mul", ["rows", "columns"], ["features"]),
        helper.make_node("Div", ["features", "two"], ["half"]),
        helper.make_node("Concat", ["batch1", "half", "two"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["folded"]),
        helper.make_node("ConstantOfShape", ["target"], ["ones"], value=ones_value),
        helper.make_node("Add", ["folded", "ones"], ["y"]),
    ]
    constants = {"zero": 0, "axes": [0], "one": [1], "two": [2], "three": [3]}
    initializers = [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in constants.items()]
    graph = helper.make_graph(nodes, "fold", [x], [helper.make_empty_tensor_value_info("y")], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    module = graphopt.from_onnx(model)
    ops = [op.name for op in module.walk() if op.name.startswith("graph.")]
    assert ops == ["graph.reshape", "graph.constant", "graph.add"]
    assert "tensor<2x6x2xf32>" in str(module)
    x_value = normal(2, 3, 4)
    assert_matches(graphopt.interpret(module, x_value), onnx_runtime(model, [x_value]))


def test_attention_masks_run_compiled_with_booleans_and_integers():
    """A padding mask (int64 input: Equal, Unsqueeze, Expand, Where), a causal mask (Trilu on a constant,
    folded) and integer and boolean results: fused and compiled as ONNX Runtime computes them."""
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2, 4, 8, 8])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT64, [2, 8])
    nodes = [
        helper.make_node("Equal", ["mask", "zero"], ["padding"]),
        helper.make_node("Unsqueeze", ["padding", "axes"], ["padding4"]),
        helper.make_node("Expand", ["padding4", "shape"], ["padding_full"]),
        helper.make_node("Where", ["padding_full", "low", "scores"], ["padded"]),
        helper.make_node("Trilu", ["ones"], ["lower"], upper=0),
        helper.make_node("Equal", ["lower", "zero_f"], ["future"]),
        helper.make_node("Where", ["future", "low", "padded"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probabilities"], axis=-1),
        helper.make_node("Range", ["zero", "eight", "one"], ["positions"]),
        helper.make_node("Mul", ["mask", "positions"], ["kept"]),
        helper.make_node("Sub", ["kept", "one"], ["shifted"]),
        helper.make_node("Not", ["padding"], ["attended"]),
        helper.make_node("Or", ["attended", "future_row"], ["either"]),
    ]
    constants = {
        "zero": np.asarray(0, np.int64), "one": np.asarray(1, np.int64), "eight": np.asarray(8, np.int64),
        "axes": np.asarray([1, 2], np.int64), "shape": np.asarray([2, 4, 8, 8], np.int64),
        "low": np.asarray(-1e4, np.float32), "ones": np.ones((8, 8), np.float32), "zero_f": np.asarray(0, np.float32),
        "future_row": np.arange(8) > 5,
    }  # fmt: skip
    outputs = ["probabilities", "shifted", "either"]
    graph = helper.make_graph(nodes, "masks", [scores, mask], [helper.make_empty_tensor_value_info(o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    arrays = [normal(2, 4, 8, 8), (np.arange(16).reshape(2, 8) % 5 != 0).astype(np.int64)]
    want = onnx_runtime(model, arrays)
    module = graphopt.from_onnx(model)
    assert [op.name for op in module.walk()].count("graph.cmp") == 1  # the causal mask folded at import
    assert_matches(graphopt.interpret(module, *arrays), want)
    for backends in BACKEND_SETS:
        assert_matches(graphopt.compile(module, backends=backends)(*arrays), want)


def test_input_names_become_argument_names():
    model = case("Relu", normal(2, 2)).model()
    model.graph.input[0].name = model.graph.node[0].input[0] = "input.1"
    assert "%input.1: tensor<2x2xf32>" in str(graphopt.from_onnx(model))


# ------------------------------------------------------------------------- whole models

MODEL_INPUT_SHAPES = {
    "mnist_cnn": (2, 1, 28, 28),
    "transformer_block": (16, 32),
    "resnet_ish": (2, 3, 32, 32),
    "vgg_ish": (2, 3, 32, 32),
}


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory) -> Path:
    """The models of examples/make_onnx_models.py, written by running it."""
    out_dir = tmp_path_factory.mktemp("onnx_models")
    script = EXAMPLES_DIR / "make_onnx_models.py"
    subprocess.run([sys.executable, str(script), str(out_dir)], check=True, capture_output=True)
    return out_dir


def import_model(onnx_models: Path, name: str, batch: int | None = None) -> ModuleOp:
    shape = MODEL_INPUT_SHAPES[name]
    shapes = {"x": (batch, *shape[1:])} if batch else {"x": shape}
    return graphopt.from_onnx(onnx_models / f"{name}.onnx", shapes=shapes if name != "transformer_block" else None)


def test_make_onnx_models_writes_every_model(onnx_models: Path):
    assert sorted(p.stem for p in onnx_models.glob("*.onnx")) == sorted(MODEL_INPUT_SHAPES)


@pytest.mark.parametrize("backends", [None, *BACKEND_SETS], ids=lambda b: "+".join(b) if b else "interpreter")
@pytest.mark.parametrize("name", MODEL_INPUT_SHAPES)
def test_model_matches_onnxruntime(onnx_models: Path, name: str, backends):
    module = import_model(onnx_models, name)
    x = np.random.default_rng(1).standard_normal(MODEL_INPUT_SHAPES[name]).astype(np.float32)
    expected = onnx_runtime(onnx.load(onnx_models / f"{name}.onnx"), [x])
    actual = graphopt.interpret(module, x) if backends is None else graphopt.compile(module, backends=backends)(x)
    assert_matches(actual, expected)


@pytest.mark.parametrize("name", ["mnist_cnn", "transformer_block"])
def test_exported_example_computes_the_mlir_example(onnx_models: Path, name: str):
    """make_onnx_models.py mirrors make_examples.py: same graph, same weights."""
    imported = import_model(onnx_models, name, batch=1)
    example = graphopt.parse(EXAMPLES_DIR / f"{name}.mlir")
    x = np.random.default_rng(2).standard_normal(example.body.block.first_op.args[0].type.get_shape())
    x = x.astype(np.float32)
    np.testing.assert_allclose(graphopt.interpret(imported, x)[0], graphopt.interpret(example, x)[0], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------- errors


def one_node_model(node: onnx.NodeProto, shape=(1, 3, 8, 8), opset: int = 17) -> onnx.ModelProto:
    x = helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, list(shape))
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    opsets = [helper.make_opsetid("", opset)]
    graph = helper.make_graph([node], "g", [x], outputs)
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


UNSUPPORTED = {
    "op": (helper.make_node("Hardmax", ["x"], ["y"], name="hm"), "Hardmax node 'hm': unsupported op type Hardmax"),
    "attribute": (
        helper.make_node("Relu", ["x"], ["y"], name="r", spatial=0),
        "Relu node 'r': unsupported attribute 'spatial'",
    ),
    "attribute value": (
        helper.make_node("Pad", ["x", "p"], ["y"], name="pad1", mode="reflect"),
        "Pad node 'pad1': mode 'reflect' is not supported",
    ),
    "ceil_mode": (
        helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        "MaxPool node 'mp': ceil_mode = 1",
    ),
    "3-D window": (
        helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[2, 2, 2]),
        "AveragePool node 'ap': only 1-D and 2-D windows",
    ),
    "used extra output": (
        helper.make_node("MaxPool", ["x"], ["y", "indices"], name="mpi", kernel_shape=[2, 2]),
        "MaxPool node 'mpi': output #1 ('indices') is not supported",
    ),
    "Mod on integers in the graph": (
        helper.make_node("Mod", ["x", "x"], ["y"], name="m"),
        "Mod node 'm': int64 operands must be constants known at import",
    ),
    "Resize mode": (
        helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="area"),
        "Resize node 'up': mode 'area' is not supported (only 'nearest', 'linear' and 'cubic')",
    ),
    "Resize linear on integers": (
        helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="linear"),
        "Resize node 'up': linear mode needs a floating-point input, got int64",
    ),
    "ConvTranspose output_shape": (
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv", strides=[2, 2], output_shape=[18, 19]),
        "ConvTranspose node 'deconv': output_shape [18, 19] is more than stride - 1 past the full output [17, 17]",
    ),
    "dynamic reshape target": (
        helper.make_node("Reshape", ["x", "x"], ["y"], name="rs"),
        "Reshape node 'rs': input #1 (shape) must be a constant known at import",
    ),
}


@pytest.mark.parametrize("node, message", UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_unsupported_node_names_op_node_and_what(node, message):
    shape = (1, 3, 4, 4, 4) if "AveragePool" in message else (1, 3, 8, 8)
    model = one_node_model(node, shape)
    if node.op_type == "Pad":
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(8, np.int64), "p"))
    if "floating-point input" in message or node.op_type == "Mod":
        model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
    if node.op_type == "Resize":
        model.graph.initializer.append(numpy_helper.from_array(np.asarray([1, 1, 2, 2], np.float32), "s"))
    if node.op_type == "ConvTranspose":
        model.graph.initializer.append(numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w"))
    with pytest.raises(graphopt.GraphoptError, match="^" + re.escape(message)):
        graphopt.from_onnx(model)


def test_unsupported_opset():
    model = one_node_model(helper.make_node("Relu", ["x"], ["y"]), opset=8)
    with pytest.raises(graphopt.GraphoptError, match="ONNX opset 8 is not supported"):
        graphopt.from_onnx(model)


def dynamic_model() -> onnx.ModelProto:
    model = one_node_model(helper.make_node("Relu", ["x"], ["y"]))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    return model


def test_dynamic_dimension_needs_a_shape():
    with pytest.raises(graphopt.GraphoptError, match=r"input 'x' has a dynamic dimension 0 \('batch'\)"):
        graphopt.from_onnx(dynamic_model())
    assert "tensor<5x3x8x8xf32>" in str(graphopt.from_onnx(dynamic_model(), shapes={"x": (5, 3, 8, 8)}))


@pytest.mark.parametrize(
    "shapes, message",
    [({"y": (1,)}, "not an input of the model"), ({"x": (5, 4, 8, 8)}, "does not match its shape [?,3,8,8]")],
)
def test_bad_shapes(shapes, message):
    with pytest.raises(graphopt.GraphoptError, match=message.replace("[", r"\[").replace("?", r"\?")):
        graphopt.from_onnx(dynamic_model(), shapes=shapes)


# ------------------------------------------------------------------------- graph-import


@pytest.fixture
def dynamic_onnx(tmp_path: Path) -> Path:
    path = tmp_path / "relu.onnx"
    onnx.save(dynamic_model(), path)
    return path


def test_graph_import_prints_and_writes(dynamic_onnx: Path, tmp_path: Path, capsys):
    code, out, err = run_in_process(graph_import.main, dynamic_onnx, "--shape", "x=2,3,8,8", capsys=capsys)
    assert code == 0 and err == ""
    assert "graph.relu %x : tensor<2x3x8x8xf32>" in out
    target = tmp_path / "relu.mlir"
    code, out, _ = run_in_process(graph_import.main, dynamic_onnx, "--shape", "x=2,3,8,8", "-o", target, capsys=capsys)
    assert code == 0 and out == ""
    assert str(graphopt.parse(target)) + "\n" == target.read_text()


def test_graph_import_fails_without_traceback(dynamic_onnx: Path):
    run = run_tool("graph-import", dynamic_onnx)
    assert_fails_with(run, "graph-import", "error: input 'x' has a dynamic dimension 0 ('batch')", "--shape x=")


@pytest.mark.parametrize(
    "args, message",
    [(["missing.onnx"], "missing.onnx: no such file"), (["{model}", "--shape", "x=1,3,8"], "does not match its shape")],
)
def test_graph_import_reports_bad_input(dynamic_onnx: Path, args, message, capsys):
    args = [a.replace("{model}", str(dynamic_onnx)) for a in args]
    code, out, err = run_in_process(graph_import.main, *args, capsys=capsys)
    assert code == 1 and out == ""
    assert err.startswith("graph-import: error: ") and message in err


def test_graph_import_names_a_missing_op_its_node_and_the_model(tmp_path: Path, capsys):
    path = tmp_path / "hardmax.onnx"
    onnx.save(one_node_model(helper.make_node("Hardmax", ["x"], ["y"], name="hm")), path)
    code, out, err = run_in_process(graph_import.main, path, capsys=capsys)
    assert code == 1 and out == ""
    unsupported = "Hardmax node 'hm': unsupported op type Hardmax (no converter in graphopt)"
    assert err.strip() == f"graph-import: error: {unsupported} in model {path}"


def test_graph_import_rejects_malformed_shape_option(dynamic_onnx: Path, capsys):
    code, _, err = run_in_process(graph_import.main, dynamic_onnx, "--shape", "x=1,a", capsys=capsys)
    assert code == 2 and "NAME=D0,D1,..." in err


def test_graph_import_of_an_exported_model_round_trips(onnx_models: Path, tmp_path: Path, capsys):
    target = tmp_path / "mnist.mlir"
    args = (onnx_models / "mnist_cnn.onnx", "--shape", "x=1,1,28,28", "-o", target)
    assert run_in_process(graph_import.main, *args, capsys=capsys)[0] == 0
    assert "func.func @main(%x: tensor<1x1x28x28xf32>) -> tensor<1x10xf32>" in target.read_text()
    graphopt.parse(target)
