"""Export graph-dialect functions and groups to ONNX: the inverse of graphopt.onnx_import.

    model = to_onnx(module)          # @main as an onnx.ModelProto (opset 20)
    model = to_onnx(func_op)         # one func.func
    model = to_onnx(fused_op)        # one graph.fused (or one graph op): its inputs and results

Each graph op has one exporter in `EXPORTERS`, which appends ONNX nodes for it (usually one
node of the ONNX op of that name; `rsqrt`, `cmp "ne"` and `gather` take two). Constants become
initializers; graph.fused bodies and func.call callees are inlined. Attributes that ONNX takes
as inputs (reduction axes, Reshape and Expand shapes, Slice bounds, Pad pads, Clip bounds)
become int64 or typed initializers. An op with no ONNX equivalent raises GraphoptError naming it.

The model's inputs are the source's arguments (block arguments, or a single op's distinct
operands) in order, its outputs the source's results in order; an output that is also an
input, a constant or an earlier output goes through an Identity node so that every output is
written by a node of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import SymbolTable

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.interpreter import clip_bounds

if TYPE_CHECKING:
    import onnx

OPSET = 20
"""Gelu is an ONNX op from opset 20 (LayerNormalization from 17, reduction axes as inputs from 18)."""
IR_VERSION = 9
"""The lowest IR version that opset 20 allows, so that older ONNX Runtimes load the models."""


def to_onnx(source: ModuleOp | FuncOp | Operation, entry: str = "main") -> onnx.ModelProto:
    """The ONNX model of `source`: a module's function `entry`, a func.func, a graph.fused or one graph op."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise GraphoptError('ONNX export needs the onnx package: pip install "graphopt[onnx]"') from None
    if isinstance(source, ModuleOp):
        source = _function(source, entry)
    if isinstance(source, FuncOp):
        if not source.body.blocks:
            raise GraphoptError(f"function @{source.sym_name.data} has no body (a declaration cannot be exported)")
        return Exporter(source.sym_name.data).block_model(source.body.block)
    if isinstance(source, graph.FusedOp):
        return Exporter(source.group_name.data).block_model(source.body.block)
    if isinstance(source, graph.GraphOp):
        return Exporter(source.name.removeprefix("graph.")).op_model(source)
    raise GraphoptError(f"to_onnx exports a module, a func.func, a graph.fused or a graph op, not '{source.name}'")


def _function(module: ModuleOp, name: str) -> FuncOp:
    func = SymbolTable.lookup_symbol(module, name)
    if not isinstance(func, FuncOp):
        raise GraphoptError(f"no function @{name} in the module")
    return func


def onnx_element_type(value: SSAValue) -> int:
    """The ONNX TensorProto element type of a tensor value."""
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(numpy_dtype(value.type.get_element_type()))


class Exporter:
    """Collects the nodes and initializers of one ONNX graph while walking graph ops."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.taken: set[str] = set()

    # -- the model ---------------------------------------------------------------------

    def block_model(self, block: Block) -> onnx.ModelProto:
        """A function or group body: its arguments are the inputs, its terminator's operands the outputs."""
        inputs = [self.fresh(arg.name_hint or f"input{i}") for i, arg in enumerate(block.args)]
        outputs = self.emit_block(block, inputs)
        return self.model(list(block.args), inputs, list(block.last_op.operands), outputs)

    def op_model(self, op: graph.GraphOp) -> onnx.ModelProto:
        """One op: its distinct operands are the inputs, its results the outputs."""
        operands = list(dict.fromkeys(op.operands))
        inputs = [self.fresh(f"input{i}") for i in range(len(operands))]
        names = dict(zip(operands, inputs))
        outputs = self.emit(op, [names[o] for o in op.operands])
        return self.model(operands, inputs, list(op.results), outputs)

    def model(self, input_values: Sequence[SSAValue], inputs: list[str], output_values: Sequence[SSAValue],
              outputs: list[str]) -> onnx.ModelProto:
        from onnx import helper

        produced = {name for node in self.nodes for name in node.output}
        unique_outputs = []
        for name in outputs:
            if name not in produced or name in unique_outputs:
                name = self.node("Identity", [name])
            unique_outputs.append(name)
        graph_proto = helper.make_graph(
            self.nodes,
            self.name,
            [_value_info(name, value) for name, value in zip(inputs, input_values)],
            [_value_info(name, value) for name, value in zip(unique_outputs, output_values)],
            self.initializers,
        )
        return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", OPSET)],
                                 ir_version=IR_VERSION, producer_name="graphopt")

    # -- walking the IR ----------------------------------------------------------------

    def emit_block(self, block: Block, arguments: list[str]) -> list[str]:
        """Nodes for `block`'s ops with its arguments named `arguments`; the names of its terminator's operands."""
        names: dict[SSAValue, str] = dict(zip(block.args, arguments))
        for op in block.ops:
            operands = [names[o] for o in op.operands]
            if isinstance(op, (ReturnOp, graph.YieldOp)):
                return operands
            names.update(zip(op.results, self.emit(op, operands)))
        raise GraphoptError(f"block of {block.parent_op().name} has no terminator")

    def emit(self, op: Operation, operands: list[str]) -> list[str]:
        """Nodes computing `op` from the values named `operands`; the names of its results."""
        if isinstance(op, graph.FusedOp):
            return self.emit_block(op.body.block, operands)
        if isinstance(op, CallOp):
            callee = _function(op.get_toplevel_object(), op.callee.string_value())
            return self.emit_block(callee.body.block, operands)
        if op.name not in EXPORTERS:
            raise GraphoptError(f"'{op.name}' has no ONNX equivalent; to_onnx cannot export it")
        return [EXPORTERS[op.name](self, op, operands)]

    # -- building blocks for the exporters ---------------------------------------------

    def fresh(self, hint: str) -> str:
        """A value name not used before in this graph."""
        name, suffix = hint, 0
        while name in self.taken:
            suffix += 1
            name = f"{hint}_{suffix}"
        self.taken.add(name)
        return name

    def node(self, op_type: str, inputs: Sequence[str], **attributes) -> str:
        """Append one node; the name of its (first) output."""
        from onnx import helper

        output = self.fresh(f"{op_type.lower()}_out")
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=output, **attributes))
        return output

    def constant(self, array: np.ndarray, hint: str = "const") -> str:
        """An initializer holding `array`; its name."""
        from onnx import numpy_helper

        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        """An int64 vector initializer (axes, shapes, pads, slice bounds)."""
        return self.constant(np.asarray(values, np.int64), "ints")


def _value_info(name: str, value: SSAValue) -> onnx.ValueInfoProto:
    from onnx import helper

    return helper.make_tensor_value_info(name, onnx_element_type(value), list(value.type.get_shape()))


def _dtype(value: SSAValue) -> np.dtype:
    return numpy_dtype(value.type.get_element_type())


# ----------------------------------------------------------------------------------------
# One exporter per graph op: (exporter, op, operand names) -> result name
# ----------------------------------------------------------------------------------------

OpExporter = Callable[[Exporter, Operation, list[str]], str]

SAME_NAME = {
    "graph.neg": "Neg", "graph.abs": "Abs", "graph.exp": "Exp", "graph.log": "Log", "graph.sqrt": "Sqrt",
    "graph.reciprocal": "Reciprocal", "graph.tanh": "Tanh", "graph.sigmoid": "Sigmoid", "graph.relu": "Relu",
    "graph.erf": "Erf", "graph.sin": "Sin", "graph.cos": "Cos", "graph.floor": "Floor", "graph.ceil": "Ceil",
    "graph.add": "Add", "graph.sub": "Sub", "graph.mul": "Mul", "graph.div": "Div", "graph.pow": "Pow",
    "graph.max": "Max", "graph.min": "Min", "graph.select": "Where", "graph.matmul": "MatMul",
}  # fmt: skip
"""Graph ops that are one ONNX node of the same operands and no attributes."""

COMPARISONS = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}
"""graph.cmp predicates with an ONNX op; "ne" is Not(Equal)."""

REDUCTIONS = {
    "graph.reduce_sum": "ReduceSum", "graph.reduce_mean": "ReduceMean",
    "graph.reduce_max": "ReduceMax", "graph.reduce_min": "ReduceMin",
}  # fmt: skip


def _rsqrt(ex: Exporter, op, operands) -> str:
    return ex.node("Reciprocal", [ex.node("Sqrt", operands)])


def _cmp(ex: Exporter, op, operands) -> str:
    predicate = op.get("predicate")
    if predicate == "ne":
        return ex.node("Not", [ex.node("Equal", operands)])
    return ex.node(COMPARISONS[predicate], operands)


def _clip(ex: Exporter, op, operands) -> str:
    """Clip with typed bound inputs; a missing bound is an empty input name."""
    dtype = _dtype(op.result)
    low, high = clip_bounds(op, dtype)
    bounds = ["" if bound is None else ex.constant(np.asarray(bound, dtype), "bound") for bound in (low, high)]
    while bounds and not bounds[-1]:
        bounds.pop()
    return ex.node("Clip", [*operands, *bounds])


def _cast(ex: Exporter, op, operands) -> str:
    return ex.node("Cast", operands, to=onnx_element_type(op.result))


def _gather(ex: Exporter, op, operands) -> str:
    """Indices clamped to [-size, size - 1] first: the graph op clamps where ONNX Gather fails."""
    data, indices = operands
    axis = op.get("axis")
    size = op.operands[0].type.get_shape()[axis]
    index_type = _dtype(op.operands[1])
    bounds = [ex.constant(np.asarray(bound, index_type), "bound") for bound in (-size, size - 1)]
    return ex.node("Gather", [data, ex.node("Clip", [indices, *bounds])], axis=axis)


def _pad(ex: Exporter, op, operands) -> str:
    value = ex.constant(np.asarray(op.get("value"), _dtype(op.result)), "pad_value")
    return ex.node("Pad", [*operands, ex.ints(op.get("pads")), value])


def _slice(ex: Exporter, op, operands) -> str:
    rank = len(op.result.type.get_shape())
    bounds = [ex.ints(op.get(name)) for name in ("starts", "ends")]
    return ex.node("Slice", [*operands, *bounds, ex.ints(range(rank)), ex.ints(op.get("steps"))])


def _reduction(ex: Exporter, op, operands) -> str:
    axes = op.get("axes")
    return ex.node(REDUCTIONS[op.name], [*operands, ex.ints(axes)], keepdims=int(op.get("keepdims")),
                   noop_with_empty_axes=int(not axes))


def _conv2d(ex: Exporter, op, operands) -> str:
    return ex.node("Conv", operands, kernel_shape=list(op.w.type.get_shape()[2:]), strides=list(op.get("strides")),
                   dilations=list(op.get("dilations")), pads=list(op.get("padding")), group=op.get("groups"))


def _pool(op_type: str) -> OpExporter:
    def export(ex: Exporter, op, operands) -> str:
        extra = {"count_include_pad": int(op.get("count_include_pad"))} if op_type == "AveragePool" else {}
        return ex.node(op_type, operands, kernel_shape=list(op.get("kernel")), strides=list(op.get("strides")),
                       pads=list(op.get("padding")), **extra)

    return export


def _one_node(op_type: str, **attribute_names: str) -> OpExporter:
    """One node of `op_type`; each ONNX attribute (keyword) from the graph attribute it names."""

    def export(ex: Exporter, op, operands) -> str:
        return ex.node(op_type, operands, **{key: op.get(name) for key, name in attribute_names.items()})

    return export


EXPORTERS: dict[str, OpExporter] = {
    "graph.constant": lambda ex, op, operands: ex.constant(dense_to_numpy(op.value)),
    **{name: _one_node(op_type) for name, op_type in SAME_NAME.items()},
    "graph.rsqrt": _rsqrt,
    "graph.gelu": _one_node("Gelu", approximate="approximate"),
    "graph.leaky_relu": _one_node("LeakyRelu", alpha="alpha"),
    "graph.clip": _clip,
    "graph.cast": _cast,
    "graph.cmp": _cmp,
    "graph.batch_norm": _one_node("BatchNormalization", epsilon="epsilon"),
    "graph.reshape": lambda ex, op, operands: ex.node("Reshape", [*operands, ex.ints(op.result.type.get_shape())]),
    "graph.broadcast_to": lambda ex, op, operands: ex.node("Expand", [*operands, ex.ints(op.result.type.get_shape())]),
    "graph.transpose": lambda ex, op, operands: ex.node("Transpose", operands, perm=list(op.get("perm"))),
    "graph.slice": _slice,
    "graph.concat": _one_node("Concat", axis="axis"),
    "graph.pad": _pad,
    "graph.gather": _gather,
    **{name: _reduction for name in REDUCTIONS},
    "graph.softmax": _one_node("Softmax", axis="axis"),
    "graph.log_softmax": _one_node("LogSoftmax", axis="axis"),
    "graph.layer_norm": _one_node("LayerNormalization", axis="axis", epsilon="epsilon"),
    "graph.conv2d": _conv2d,
    "graph.max_pool2d": _pool("MaxPool"),
    "graph.avg_pool2d": _pool("AveragePool"),
}
"""Graph op name -> its exporter."""
