"""Import ONNX models (opsets 9 to 23) into the graph dialect.

    module = graphopt.from_onnx("model.onnx")                            # static input shapes
    module = graphopt.from_onnx(model_proto, shapes={"x": (1, 3, 224, 224)})

Each ONNX op has one converter in `CONVERTERS`, which appends graph ops through a
`GraphBuilder`. Initializers and `Constant` outputs stay NumPy arrays until an op needs them
as operands (then they become `graph.constant`), and a node whose inputs are all known at
import is folded: its converter runs on a scratch builder and the interpreter evaluates it.
So shape computations (Shape, Gather, Concat, Unsqueeze, Reshape targets, ...) vanish.
Anything unsupported raises one GraphoptError naming the op type, the node and what is missing.
`onnx` is imported on first use, so that `import graphopt` does not pay for it.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import VerifyException

from graphopt.builder import GraphBuilder
from graphopt.dialects.attributes import element_type_of, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.interpreter import interpret

if TYPE_CHECKING:
    import onnx

MIN_OPSET, MAX_OPSET = 9, 23
DEFAULT_DOMAINS = ("", "ai.onnx")
MAX_ELEMENTS = 2**63 - 1
"""The most elements an input may have: compiled code indexes tensors with i64."""

Tensor = SSAValue | np.ndarray
"""A value during import: in the graph being built, or known now (initializer or folded)."""


def from_onnx(path_or_model, shapes: dict[str, Sequence[int]] | None = None) -> ModuleOp:
    """The graph-dialect module (`@main`) of an ONNX model: a path, serialized bytes or a ModelProto.

    `shapes` gives the full shape of inputs that have dynamic (symbolic or unknown) dimensions.
    """
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise GraphoptError('ONNX import needs the onnx package: pip install "graphopt[onnx]"') from None
    model, base_dir = _load(path_or_model)
    given = {name: _given_shape(name, dims) for name, dims in (shapes or {}).items()}
    model_name = str(path_or_model) if isinstance(path_or_model, (str, os.PathLike)) else f"'{model.graph.name}'"
    return Importer(model.graph, _default_opset(model), given, base_dir, model_name).run()


def _given_shape(name: str, dims) -> tuple[int, ...]:
    """`shapes[name]` as a tuple of ints."""
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise GraphoptError(f"shape {dims!r} given for input '{name}' is not a sequence of integers") from None


def _load(path_or_model) -> tuple[onnx.ModelProto, str]:
    """The model, and the folder its external data is in (a file's own; else the current one)."""
    import onnx
    from google.protobuf import json_format, text_format
    from google.protobuf.message import DecodeError

    if isinstance(path_or_model, onnx.ModelProto):
        model, source, base_dir = path_or_model, "the model", ""
    elif isinstance(path_or_model, bytes):
        source, base_dir = "the model bytes", ""
        try:
            model = onnx.load_model_from_string(path_or_model)
        except DecodeError:
            raise GraphoptError(f"{source}: not an ONNX model (protobuf does not decode)") from None
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = Path(path_or_model)
        source, base_dir = str(path), str(path.parent)
        if path.is_dir():
            raise GraphoptError(f"{path}: is a directory, not an ONNX model")
        if not path.is_file():
            raise GraphoptError(f"{path}: no such file")
        try:
            model = onnx.load(path, load_external_data=False)
        except DecodeError:
            raise GraphoptError(f"{path}: not an ONNX model (protobuf does not decode)") from None
        except (json_format.Error, text_format.Error, onnx.parser.ParseError):
            raise GraphoptError(f"{path}: not an ONNX model (does not parse as {path.suffix[1:]} text)") from None
        except OSError as e:
            raise GraphoptError(f"{path}: {e.strerror}") from None
    else:
        kind = type(path_or_model).__name__
        raise GraphoptError(f"from_onnx takes a path, bytes or an onnx.ModelProto, not {kind}")
    if not model.HasField("graph"):
        raise GraphoptError(f"{source}: empty ONNX model (no graph)")
    return model, base_dir


def _default_opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        imported = ", ".join(f"'{o.domain}' version {o.version}" for o in model.opset_import) or "none"
        raise GraphoptError(
            f"the model imports no opset of the default ONNX domain ('' or 'ai.onnx'), which graphopt needs "
            f"(opsets {MIN_OPSET} to {MAX_OPSET}); it imports: {imported}"
        )
    opset = versions[0]
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise GraphoptError(f"ONNX opset {opset} is not supported (graphopt imports opsets {MIN_OPSET} to {MAX_OPSET})")
    return opset


# ----------------------------------------------------------------------------------------
# The importer
# ----------------------------------------------------------------------------------------


class Scope:
    """ONNX values by name, and the builder whose graph ops hold the non-constant ones."""

    def __init__(self, builder: GraphBuilder, values: dict[str, Tensor]):
        self.builder = builder
        self.values = values
        self.materialized: dict[str, SSAValue] = {}

    def ssa(self, name: str) -> SSAValue:
        """The value as a graph operand; a constant becomes one graph.constant, shared by its uses."""
        value = self.values[name]
        if isinstance(value, SSAValue):
            return value
        if name not in self.materialized:
            self.materialized[name] = self.builder.constant(value)
        return self.materialized[name]


class Importer:
    """Converts one ONNX graph, node by node, into the function @main."""

    def __init__(self, graph: onnx.GraphProto, opset: int, shapes: dict[str, tuple[int, ...]], base_dir: str,
                 model_name: str):
        self.graph = graph
        self.opset = opset
        self.shapes = shapes
        self.base_dir = base_dir
        self.model_name = model_name
        """The model's path, or its graph's name: unsupported ops name it."""
        initializers = {t.name: _tensor_array(t, f"initializer '{t.name}'", base_dir) for t in graph.initializer}
        self.scope = Scope(GraphBuilder(), initializers)
        self.used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        self.producers = {name: f"initializer '{name}'" for name in initializers}
        """Who defines each value: an initializer, a graph input or a node (a value has one)."""

    def run(self) -> ModuleOp:
        self._add_inputs()
        for index, node in enumerate(self.graph.node):
            self._convert(node, index)
        missing = [o.name for o in self.graph.output if o.name not in self.scope.values]
        if missing:
            raise GraphoptError(f"graph output '{missing[0]}' is not produced by any node")
        results = [self.scope.ssa(o.name) for o in self.graph.output]
        return self.scope.builder.finish(*results)

    def _add_inputs(self) -> None:
        inputs = [i for i in self.graph.input if i.name not in self.scope.values]
        unknown = sorted(set(self.shapes) - {i.name for i in inputs})
        if unknown:
            raise GraphoptError(
                f"shape given for '{unknown[0]}', which is not an input of the model "
                f"(inputs: {', '.join(i.name for i in inputs)})"
            )
        for graph_input in inputs:
            shape = self._input_shape(graph_input)
            self._check_dimensions(graph_input.name, shape)
            self.producers[graph_input.name] = f"graph input '{graph_input.name}'"
            dtype = _element_type(graph_input.type.tensor_type.elem_type, f"input '{graph_input.name}'")
            self.scope.values[graph_input.name] = self.scope.builder.input(_name_hint(graph_input.name), shape, dtype)

    def _input_shape(self, graph_input: onnx.ValueInfoProto) -> tuple[int, ...]:
        name = graph_input.name
        if not graph_input.type.HasField("tensor_type"):
            raise GraphoptError(f"input '{name}' is not a tensor; graphopt imports tensor inputs only")
        tensor_type = graph_input.type.tensor_type
        if not tensor_type.HasField("shape"):
            if name in self.shapes:
                return self.shapes[name]
            raise GraphoptError(f"input '{name}' has an unknown rank; give its shape (--shape {name}=d0,d1,...)")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
        if name not in self.shapes:
            for axis, (dim, proto) in enumerate(zip(dims, tensor_type.shape.dim)):
                if dim is None:
                    label = f" ('{proto.dim_param}')" if proto.dim_param else ""
                    raise GraphoptError(
                        f"input '{name}' has a dynamic dimension {axis}{label}; give its shape "
                        f"(shapes={{'{name}': (...)}}, or --shape {name}=d0,d1,...)"
                    )
            return tuple(dims)
        given = self.shapes[name]
        if len(given) != len(dims) or any(d is not None and d != g for d, g in zip(dims, given)):
            shown = ",".join("?" if d is None else str(d) for d in dims)
            raise GraphoptError(f"shape {list(given)} given for input '{name}' does not match its shape [{shown}]")
        return given

    @staticmethod
    def _check_dimensions(name: str, shape: tuple[int, ...]) -> None:
        """Each dimension of input `name` positive, and its element count at most MAX_ELEMENTS."""
        if any(d < 1 for d in shape) or math.prod(shape) > MAX_ELEMENTS:
            raise GraphoptError(
                f"input '{name}' has shape {list(shape)}; each dimension must be positive and the "
                f"element count at most {MAX_ELEMENTS}"
            )

    def _convert(self, node: onnx.NodeProto, index: int) -> None:
        where = f"{node.op_type} node '{node.name or f'#{index}'}'"
        converter = CONVERTERS.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
        if converter is None:
            domain = f" of domain '{node.domain}'" if node.domain not in DEFAULT_DOMAINS else ""
            raise GraphoptError(f"{where}: unsupported op type {node.op_type}{domain} (no converter in graphopt) "
                                f"in model {self.model_name}")
        for attribute in node.attribute:
            if attribute.name not in converter.attributes:
                raise GraphoptError(f"{where}: unsupported attribute '{attribute.name}'")
        for name in node.input:
            if name and name not in self.scope.values:
                raise GraphoptError(f"{where}: input '{name}' is not defined before the node")
        for name in node.output:
            if name in self.producers:
                raise GraphoptError(f"{where}: output '{name}' is already defined by {self.producers[name]}")
            if name:
                self.producers[name] = where
        present = [self.scope.values[name] for name in node.input if name]
        foldable = bool(present) and all(isinstance(v, np.ndarray) for v in present)
        results = self._fold(node, converter, where) if foldable else self._run(node, converter, self.scope, where)
        for position, name in enumerate(node.output):
            if position < len(results):
                self.scope.values[name] = results[position]
                if isinstance(results[position], SSAValue) and results[position].name_hint is None:
                    results[position].name_hint = _name_hint(name)
            elif name in self.used:
                supported = f"only the first {len(results)}"
                raise GraphoptError(f"{where}: output #{position} ('{name}') is not supported ({supported})")

    def _run(self, node: onnx.NodeProto, converter: Converter, scope: Scope, where: str) -> list[Tensor]:
        try:
            return converter.function(Node(node, self.opset, scope, where, self.base_dir))
        except (VerifyException, ValueError) as e:
            raise GraphoptError(f"{where}: {e}") from None

    def _fold(self, node: onnx.NodeProto, converter: Converter, where: str) -> list[np.ndarray]:
        """Run the converter on constants in a scratch function and evaluate it now."""
        scope = Scope(GraphBuilder(), {name: self.scope.values[name] for name in node.input if name})
        results = self._run(node, converter, scope, where)
        computed = [r for r in results if isinstance(r, SSAValue)]
        if not computed:
            return results
        values = iter(interpret(scope.builder.finish(*computed)))
        return [next(values) if isinstance(r, SSAValue) else r for r in results]


def _name_hint(onnx_name: str) -> str:
    """An SSA name for an ONNX value name (characters MLIR does not allow become '_')."""
    name = re.sub(r"[^A-Za-z0-9_$.-]", "_", onnx_name)
    return name if re.match(r"[A-Za-z_$.-]", name) else f"v{name}"


def _tensor_array(tensor: onnx.TensorProto, what: str, base_dir: str) -> np.ndarray:
    """The NumPy array of an initializer or tensor attribute (`what`); external data is read from `base_dir`."""
    from onnx import external_data_helper, numpy_helper
    from onnx.checker import ValidationError

    if external_data_helper.uses_external_data(tensor):
        location = Path(base_dir, external_data_helper.ExternalDataInfo(tensor).location)
        if not location.is_file():
            raise GraphoptError(f"{what}: its external data file {location} does not exist")
    try:
        return numpy_helper.to_array(tensor, base_dir)
    except (ValueError, OSError, ValidationError) as e:
        raise GraphoptError(f"{what} (dims {list(tensor.dims)}) cannot be read: {e}") from None


def _element_type(onnx_type: int, what: str) -> np.dtype:
    """The NumPy dtype of an ONNX tensor element type that the graph dialect holds."""
    from onnx import TensorProto, helper

    name = TensorProto.DataType.Name(onnx_type)
    try:
        dtype = helper.tensor_dtype_to_np_dtype(onnx_type)
        element_type_of(dtype)
    except (ValueError, KeyError):
        raise GraphoptError(f"{what}: element type {name} is not supported (f32, f64, f16, i64, i32, bool)") from None
    return dtype


# ----------------------------------------------------------------------------------------
# What a converter sees of its node
# ----------------------------------------------------------------------------------------

REQUIRED = object()


class Node:
    """One ONNX node for its converter: inputs (graph values or constants), attributes, the builder."""

    def __init__(self, node: onnx.NodeProto, opset: int, scope: Scope, where: str, base_dir: str):
        self.proto = node
        self.opset = opset
        self.scope = scope
        self.b = scope.builder
        self.where = where
        self.attributes = {
            a.name: _attribute_value(a, f"{where}: attribute '{a.name}'", base_dir) for a in node.attribute
        }

    def unsupported(self, what: str) -> GraphoptError:
        return GraphoptError(f"{self.where}: {what}")

    def attr(self, name: str, default=REQUIRED):
        if name in self.attributes:
            return self.attributes[name]
        if default is REQUIRED:
            raise self.unsupported(f"missing required attribute '{name}'")
        return default

    def axis(self, value: int, rank: int, what: str = "axis") -> int:
        """`value` as an axis in [0, rank): ONNX allows [-rank, rank), negative counting from the end."""
        if not -rank <= value < rank:
            expected = f"from {-rank} to {rank - 1}" if rank else "none: the input is a scalar"
            raise self.unsupported(f"{what} {value} is out of range for rank {rank} (expected {expected})")
        return int(value) % rank

    def axes(self, values: Sequence[int], rank: int, what: str = "axes") -> list[int]:
        """Each of `values` as an axis in [0, rank), as `axis` does; an axis given twice is an error."""
        values = [int(v) for v in values]
        axes = [self.axis(v, rank, f"{what} {values}: axis") for v in values]
        if len(set(axes)) < len(axes):
            raise self.unsupported(f"{what} {values} name an axis twice (rank {rank})")
        return axes

    def has(self, index: int) -> bool:
        """Whether optional input `index` is given."""
        return index < len(self.proto.input) and bool(self.proto.input[index])

    def __call__(self, index: int) -> SSAValue:
        """Input `index` as a graph operand."""
        self.raw(index)
        return self.scope.ssa(self.proto.input[index])

    def inputs(self) -> list[SSAValue]:
        return [self(i) for i in range(len(self.proto.input)) if self.has(i)]

    def raw(self, index: int) -> Tensor:
        """Input `index` as it is: a graph value, or a NumPy array when known at import."""
        if not self.has(index):
            raise self.unsupported(f"missing required input #{index}")
        return self.scope.values[self.proto.input[index]]

    def constant(self, index: int, what: str, default=REQUIRED) -> np.ndarray:
        """Input `index`, which must be known at import (an initializer or a folded computation)."""
        if not self.has(index):
            if default is REQUIRED:
                raise self.unsupported(f"missing required input #{index} ({what})")
            return default
        value = self.raw(index)
        if not isinstance(value, np.ndarray):
            raise self.unsupported(f"input #{index} ({what}) must be a constant known at import")
        return value

    def attr_or_input(self, name: str, index: int, default=REQUIRED):
        """An operand given as attribute `name` (older opsets) or as constant input `index` (newer)."""
        if name in self.attributes:
            return self.attributes[name]
        if self.has(index):
            return self.constant(index, name).tolist()
        if default is REQUIRED:
            raise self.unsupported(f"missing '{name}' (an attribute, or input #{index} in newer opsets)")
        return default

    def shape(self, index: int) -> tuple[int, ...]:
        value = self.raw(index)
        return value.shape if isinstance(value, np.ndarray) else tuple(value.type.get_shape())

    def transformed(self, index: int, at_import: Callable[[np.ndarray], np.ndarray],
                    in_graph: Callable[[SSAValue], SSAValue]) -> SSAValue:
        """Input `index` transformed: by NumPy at import when it is a constant, else by graph ops."""
        value = self.raw(index)
        return self.b.constant(at_import(value)) if isinstance(value, np.ndarray) else in_graph(value)

    def dtype(self, index: int) -> np.dtype:
        value = self.raw(index)
        return value.dtype if isinstance(value, np.ndarray) else numpy_dtype(value.type.get_element_type())

    def converted(self, index: int, dtype: np.dtype) -> SSAValue:
        """Input `index` as element type `dtype` (an exponent of Pow, which may differ from the base's)."""
        if self.dtype(index) == dtype:
            return self(index)
        return self.transformed(index, lambda value: value.astype(dtype), lambda value: self.b.cast(value, dtype))

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A rank-0 constant of `like`'s element type."""
        return self.b.constant(np.asarray(value, numpy_dtype(like.type.get_element_type())))


def _attribute_value(attribute: onnx.AttributeProto, what: str, base_dir: str):
    from onnx import TensorProto, helper

    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, TensorProto):
        return _tensor_array(value, what, base_dir)
    return value


@dataclass(frozen=True)
class Converter:
    function: Callable[[Node], list[Tensor]]
    attributes: frozenset[str]


CONVERTERS: dict[str, Converter] = {}
"""ONNX op type -> its converter and the attributes it understands."""


def converts(*op_types: str, attributes: Sequence[str] = ()):
    """Register the decorated function as the converter of `op_types`."""

    def register(function: Callable[[Node], list[Tensor]]):
        for op_type in op_types:
            CONVERTERS[op_type] = Converter(function, frozenset(attributes))
        return function

    return register


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------

UNARY_OPS = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "neg", "Abs": "abs", "Sin": "sin", "Cos": "cos",
    "Floor": "floor", "Ceil": "ceil",
}  # fmt: skip
BINARY_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max", "Min": "min"}
INTEGER_FOLDS = {
    "Div": lambda a, b: np.trunc(a / b).astype(a.dtype),
    "Pow": lambda a, b: np.power(a, b).astype(a.dtype),
}
"""Integer Div and Pow of constants (shape arithmetic), which graph.div and graph.pow refuse."""


@converts(*UNARY_OPS)
def unary(node: Node) -> list[Tensor]:
    return [getattr(node.b, UNARY_OPS[node.proto.op_type])(node(0))]


@converts("LeakyRelu", attributes=["alpha"])
def leaky_relu(node: Node) -> list[Tensor]:
    return [node.b.leaky_relu(node(0), alpha=node.attr("alpha", 0.01))]


@converts("Gelu", attributes=["approximate"])
def gelu(node: Node) -> list[Tensor]:
    return [node.b.gelu(node(0), approximate=node.attr("approximate", "none"))]


@converts("Clip", attributes=["min", "max"])
def clip(node: Node) -> list[Tensor]:
    low, high = (node.attr_or_input(name, index, None) for name, index in (("min", 1), ("max", 2)))
    return [node.b.clip(node(0), min=low, max=high)]


def softplus_of(node: Node, x: SSAValue) -> SSAValue:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)), which does not overflow."""
    b = node.b
    return b.add(b.relu(x), b.log(b.add(node.scalar(1.0, x), b.exp(b.neg(b.abs(x))))))


def hard_sigmoid_of(node: Node, x: SSAValue, alpha: float, beta: float) -> SSAValue:
    """clip(alpha * x + beta, 0, 1)."""
    return node.b.clip(node.b.add(node.b.mul(x, node.scalar(alpha, x)), node.scalar(beta, x)), min=0.0, max=1.0)


@converts("Softplus")
def softplus(node: Node) -> list[Tensor]:
    return [softplus_of(node, node(0))]


@converts("Mish")
def mish(node: Node) -> list[Tensor]:
    """x * tanh(softplus(x))."""
    return [node.b.mul(node(0), node.b.tanh(softplus_of(node, node(0))))]


@converts("HardSigmoid", attributes=["alpha", "beta"])
def hard_sigmoid(node: Node) -> list[Tensor]:
    return [hard_sigmoid_of(node, node(0), node.attr("alpha", 0.2), node.attr("beta", 0.5))]


@converts("HardSwish")
def hard_swish(node: Node) -> list[Tensor]:
    """x * hard_sigmoid(x) with alpha 1/6 and beta 1/2."""
    return [node.b.mul(node(0), hard_sigmoid_of(node, node(0), 1 / 6, 0.5))]


@converts(*BINARY_OPS, "Sum", "Mean")
def elementwise(node: Node) -> list[Tensor]:
    """Binary ops broadcast like NumPy; Max, Min, Sum and Mean take any number of inputs."""
    op_type = node.proto.op_type
    values = [node.raw(i) for i in range(len(node.proto.input)) if node.has(i)]
    if op_type in INTEGER_FOLDS and all(isinstance(v, np.ndarray) and v.dtype.kind in "iu" for v in values):
        return [INTEGER_FOLDS[op_type](*values)]
    graph_op = getattr(node.b, BINARY_OPS.get(op_type, "add"))
    operands = [node(0), node.converted(1, node.dtype(0))] if op_type == "Pow" else node.inputs()
    result = operands[0]
    for operand in operands[1:]:
        result = graph_op(result, operand)
    if op_type == "Mean":
        result = node.b.div(result, node.scalar(len(operands), like=result))
    return [result]


@converts("Mod", attributes=["fmod"])
def mod(node: Node) -> list[Tensor]:
    """Remainder: the sign of the divisor (fmod 0, integers) or of the dividend (fmod 1, C's fmod).
    Constants fold by NumPy; floats in the graph are a - b * trunc(a / b); integers must fold."""
    fmod = node.attr("fmod", 0)
    a, b = node.raw(0), node.raw(1)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return [(np.fmod if fmod else np.mod)(a, b).astype(np.result_type(a, b))]
    if node.dtype(0).kind != "f":
        raise node.unsupported(f"{node.dtype(0)} operands must be constants known at import "
                               f"(graph.div refuses integers)")
    if not fmod:
        raise node.unsupported("floating-point operands need fmod = 1")
    quotient = node.b.div(node(0), node(1))
    negative = node.b.cmp(quotient, node.scalar(0.0, quotient), predicate="lt")
    truncated = node.b.select(negative, node.b.ceil(quotient), node.b.floor(quotient))
    return [node.b.sub(node(0), node.b.mul(node(1), truncated))]


# ----------------------------------------------------------------------------------------
# Comparisons and logic (results are i1)
# ----------------------------------------------------------------------------------------

COMPARISONS = {"Equal": "eq", "Greater": "gt", "GreaterOrEqual": "ge", "Less": "lt", "LessOrEqual": "le"}


def compare(node: Node, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
    """graph.cmp of `a` and `b`; i1 operands (which graph.cmp refuses) are compared as i32."""
    if a.type.get_element_type() == element_type_of(np.bool_):
        a, b = node.b.cast(a, np.int32), node.b.cast(b, np.int32)
    return node.b.cmp(a, b, predicate=predicate)


def boolean(node: Node, value: bool) -> SSAValue:
    return node.b.constant(np.asarray(value))


@converts(*COMPARISONS)
def comparison(node: Node) -> list[Tensor]:
    return [compare(node, node(0), node(1), COMPARISONS[node.proto.op_type])]


@converts("Not", "And", "Or", "Xor")
def logic(node: Node) -> list[Tensor]:
    """On i1: Not, And and Or select between an operand and a constant; Xor is "not equal"."""
    a = node(0)
    if node.proto.op_type == "Not":
        return [node.b.select(a, boolean(node, False), boolean(node, True))]
    c = node(1)
    if node.proto.op_type == "And":
        return [node.b.select(a, c, boolean(node, False))]
    if node.proto.op_type == "Or":
        return [node.b.select(a, boolean(node, True), c)]
    return [compare(node, a, c, "ne")]


@converts("Where")
def where(node: Node) -> list[Tensor]:
    return [node.b.select(node(0), node(1), node(2))]


@converts("IsNaN")
def is_nan(node: Node) -> list[Tensor]:
    return [compare(node, node(0), node(0), "ne")]


@converts("IsInf", attributes=["detect_positive", "detect_negative"])
def is_inf(node: Node) -> list[Tensor]:
    """x == inf, x == -inf, or |x| == inf when both are detected."""
    x = node(0)
    positive, negative = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if positive and negative:
        return [compare(node, node.b.abs(x), node.scalar(math.inf, x), "eq")]
    if positive or negative:
        return [compare(node, x, node.scalar(math.inf if positive else -math.inf, x), "eq")]
    return [node.b.broadcast_to(boolean(node, False), node.shape(0))]


@converts("Cast", attributes=["to", "saturate"])
def cast(node: Node) -> list[Tensor]:
    dtype = _element_type(node.attr("to"), node.where)
    x = node(0)
    return [x if element_type_of(dtype) == x.type.get_element_type() else node.b.cast(x, dtype)]


@converts("Identity")
def identity(node: Node) -> list[Tensor]:
    return [node.raw(0)]


@converts("Dropout", attributes=["ratio", "seed"])
def dropout(node: Node) -> list[Tensor]:
    """Inference: the input unchanged, and an all-true mask."""
    if node.has(2) and node.constant(2, "training_mode").item():
        raise node.unsupported("training_mode = true is not supported (inference only)")
    return [node.raw(0), np.ones(node.shape(0), np.bool_)]


# ----------------------------------------------------------------------------------------
# Constants and shapes (known at import)
# ----------------------------------------------------------------------------------------

CONSTANT_ATTRIBUTES: dict[str, Callable[[object], np.ndarray]] = {
    "value": np.asarray,
    "value_float": lambda v: np.asarray(v, np.float32),
    "value_floats": lambda v: np.asarray(v, np.float32),
    "value_int": lambda v: np.asarray(v, np.int64),
    "value_ints": lambda v: np.asarray(v, np.int64),
}


@converts("Constant", attributes=CONSTANT_ATTRIBUTES)
def constant(node: Node) -> list[Tensor]:
    ((name, value),) = node.attributes.items()
    return [CONSTANT_ATTRIBUTES[name](value)]


@converts("ConstantOfShape", attributes=["value"])
def constant_of_shape(node: Node) -> list[Tensor]:
    value = node.attr("value", np.zeros(1, np.float32))
    return [np.full(node.constant(0, "shape").astype(np.int64), value.reshape(-1)[0], value.dtype)]


@converts("Shape", attributes=["start", "end"])
def shape(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    return [np.asarray(dims[node.attr("start", 0) : node.attr("end", len(dims))], np.int64)]


@converts("Range")
def range_(node: Node) -> list[Tensor]:
    """start + delta * [0, 1, ..., n - 1] with n = max(ceil((limit - start) / delta), 0)."""
    start, limit, delta = (node.constant(i, what).reshape(()) for i, what in enumerate(("start", "limit", "delta")))
    if delta == 0:
        raise node.unsupported("delta is 0")
    count = max(math.ceil((limit - start) / delta), 0)
    return [(start + delta * np.arange(count)).astype(start.dtype)]


@converts("CumSum", attributes=["exclusive", "reverse"])
def cumsum(node: Node) -> list[Tensor]:
    """Running sums along `axis` (backwards with `reverse`; each leaving out its own element with
    `exclusive`). Folded at import for a constant x; else, with x as [before, L, after], output j
    sums x selected where a constant [L, L] mask takes input i into it (select, not a matmul
    with a triangle of ones, so a NaN or inf reaches only the sums that include it)."""
    dims = node.shape(0)
    axis = node.axis(int(node.constant(1, "axis").reshape(())), len(dims))
    backwards, exclusive = bool(node.attr("reverse", 0)), bool(node.attr("exclusive", 0))
    x = node.raw(0)
    if isinstance(x, np.ndarray):
        ordered = np.flip(x, axis) if backwards else x
        sums = np.cumsum(ordered, axis=axis, dtype=x.dtype)
        if exclusive:
            shifted = np.zeros_like(sums)
            shifted[(slice(None),) * axis + (slice(1, None),)] = sums[(slice(None),) * axis + (slice(None, -1),)]
            sums = shifted
        return [np.flip(sums, axis) if backwards else sums]
    b, length = node.b, dims[axis]
    position = np.arange(length)
    offset = position[None, :] - position[:, None]  # [j, i]: how far input i lies past output j
    takes = (offset > 0 if exclusive else offset >= 0) if backwards else (offset < 0 if exclusive else offset <= 0)
    rows = b.reshape(x, (math.prod(dims[:axis]), 1, length, math.prod(dims[axis + 1 :])))
    taken = b.select(b.constant(takes.reshape(length, length, 1)), rows, b.constant(np.zeros((), node.dtype(0))))
    return [b.reshape(b.reduce_sum(taken, axes=[2]), dims)]


# ----------------------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------------------


@converts("Reshape", attributes=["allowzero"])
def reshape(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    target = [int(d) for d in node.constant(1, "shape")]
    if not node.attr("allowzero", 0):
        target = [dims[i] if d == 0 else d for i, d in enumerate(target)]
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(dims) // known if known else 0
    return [node.b.reshape(node(0), target)]


@converts("Flatten", attributes=["axis"])
def flatten(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    axis = node.attr("axis", 1)
    axis = axis if axis == len(dims) else node.axis(axis, len(dims))  # axis = rank: all in the first dimension
    return [node.b.reshape(node(0), (math.prod(dims[:axis]), math.prod(dims[axis:])))]


@converts("Squeeze", attributes=["axes"])
def squeeze(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    axes = node.attr_or_input("axes", 1, None)
    squeezed = set(node.axes(axes, len(dims))) if axes is not None else {i for i, d in enumerate(dims) if d == 1}
    if any(dims[a] != 1 for a in squeezed):
        raise node.unsupported(f"cannot squeeze axes {sorted(squeezed)} of shape {list(dims)} (size is not 1)")
    return [node.b.reshape(node(0), [d for i, d in enumerate(dims) if i not in squeezed])]


@converts("Unsqueeze", attributes=["axes"])
def unsqueeze(node: Node) -> list[Tensor]:
    dims, axes = list(node.shape(0)), node.attr_or_input("axes", 1)
    for axis in sorted(node.axes(axes, len(dims) + len(axes))):
        dims.insert(axis, 1)
    return [node.b.reshape(node(0), dims)]


@converts("Expand")
def expand(node: Node) -> list[Tensor]:
    """Broadcast to the input's shape broadcast with `shape` (both ways, like NumPy)."""
    target = [int(d) for d in node.constant(1, "shape")]
    try:
        shape = np.broadcast_shapes(node.shape(0), tuple(target))
    except ValueError:
        message = f"shape {target} does not broadcast with the input shape {list(node.shape(0))}"
        raise node.unsupported(message) from None
    return [node.raw(0) if shape == node.shape(0) else node.b.broadcast_to(node(0), shape)]


@converts("Transpose", attributes=["perm"])
def transpose(node: Node) -> list[Tensor]:
    rank = len(node.shape(0))
    return [node.b.transpose(node(0), perm=node.attr("perm", list(reversed(range(rank)))))]


@converts("Concat", attributes=["axis"])
def concat(node: Node) -> list[Tensor]:
    return [node.b.concat(node.inputs(), axis=node.axis(node.attr("axis"), len(node.shape(0))))]


@converts("Gather", attributes=["axis"])
def gather(node: Node) -> list[Tensor]:
    return [node.b.gather(node(0), node(1), axis=node.axis(node.attr("axis", 0), len(node.shape(0))))]


@converts("GatherElements", attributes=["axis"])
def gather_elements(node: Node) -> list[Tensor]:
    """y[i, j] = data[indices[i, j], j] (axis 0): a gather from the flattened data at element offsets,
    computed at import when the indices are constant. Negative indices count from the end."""
    b, dims, index_dims = node.b, node.shape(0), node.shape(1)
    axis = node.axis(node.attr("axis", 0), len(dims))
    if len(index_dims) != len(dims) or any(i > d for a, (i, d) in enumerate(zip(index_dims, dims)) if a != axis):
        raise node.unsupported(f"indices of shape {list(index_dims)} do not fit data of shape {list(dims)} "
                               f"(same rank, no larger outside axis {axis})")
    strides = [math.prod(dims[d + 1 :]) for d in range(len(dims))]
    coordinates = np.indices(index_dims, np.int64)
    base = sum((coordinates[d] * strides[d] for d in range(len(dims)) if d != axis), np.zeros(index_dims, np.int64))
    size, stride = dims[axis], strides[axis]

    def offsets_in_graph(indices: SSAValue) -> SSAValue:
        indices = indices if indices.type.get_element_type() == element_type_of(np.int64) else b.cast(indices, np.int64)
        negative = b.cmp(indices, b.constant(np.int64(0)), predicate="lt")
        wrapped = b.select(negative, b.add(indices, b.constant(np.int64(size))), indices)
        return b.add(b.constant(base), b.mul(wrapped, b.constant(np.int64(stride))))

    offsets = node.transformed(1, lambda i: base + np.where(i < 0, i + size, i).astype(np.int64) * stride,
                               offsets_in_graph)
    return [b.gather(b.reshape(node(0), (math.prod(dims),)), offsets, axis=0)]


@converts("Trilu", attributes=["upper"])
def trilu(node: Node) -> list[Tensor]:
    """The upper (or lower) triangle of the last two axes from diagonal k; the rest is 0."""
    dims = node.shape(0)
    if len(dims) < 2:
        raise node.unsupported(f"the input must have rank 2 or more, got shape {list(dims)}")
    k = int(node.constant(1, "k", np.zeros(())).reshape(()))
    ones = np.ones(dims[-2:], np.bool_)
    keep = np.triu(ones, k) if node.attr("upper", 1) else np.tril(ones, k)
    zero = node.b.constant(np.zeros((), node.dtype(0)))
    return [node.b.select(node.b.constant(keep), node(0), zero)]


def slice_axis(node: Node, x: SSAValue, axis: int, start: int, stop: int, step: int = 1) -> SSAValue:
    """x[..., start:stop:step, ...] along `axis`, with ONNX/Python clamping; a negative step gathers."""
    dims = x.type.get_shape()
    indices = range(*slice(start, stop, step).indices(dims[axis]))
    if step < 0:
        return node.b.gather(x, node.b.constant(np.asarray(indices, np.int64)), axis=axis)
    starts, ends, steps = [0] * len(dims), list(dims), [1] * len(dims)
    starts[axis], ends[axis], steps[axis] = indices.start, max(indices.stop, indices.start), step
    return node.b.slice(x, starts=starts, ends=ends, steps=steps)


@converts("Slice", attributes=["starts", "ends", "axes"])
def slice_(node: Node) -> list[Tensor]:
    starts, ends = node.attr_or_input("starts", 1), node.attr_or_input("ends", 2)
    axes = node.axes(node.attr_or_input("axes", 3, list(range(len(starts)))), len(node.shape(0)))
    steps = node.attr_or_input("steps", 4, [1] * len(starts))
    x = node(0)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise node.unsupported("a step of 0")
        x = slice_axis(node, x, axis, start, end, step)
    return [x]


@converts("Split", attributes=["axis", "split", "num_outputs"])
def split(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    axis = node.axis(node.attr("axis", 0), len(dims))
    sizes = node.attr_or_input("split", 1, None)
    if sizes is None:
        parts = node.attr("num_outputs", len(node.proto.output))
        chunk = -(-dims[axis] // parts)
        sizes = [min(chunk, dims[axis] - i * chunk) for i in range(parts)]
    if sum(sizes) != dims[axis]:
        raise node.unsupported(f"split sizes {sizes} do not add up to dimension {axis} of shape {list(dims)}")
    offsets = np.cumsum([0, *sizes])
    return [slice_axis(node, node(0), axis, int(begin), int(end)) for begin, end in itertools.pairwise(offsets)]


@converts("Pad", attributes=["mode", "pads", "value"])
def pad(node: Node) -> list[Tensor]:
    """Constant padding; negative pads crop."""
    if node.attr("mode", "constant") != "constant":
        raise node.unsupported(f"mode '{node.attr('mode')}' is not supported (only 'constant')")
    rank = len(node.shape(0))
    given = node.attr_or_input("pads", 1)
    axes = node.axes(node.attr_or_input("axes", 3, range(rank)), rank)
    pads = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        pads[axis], pads[rank + axis] = given[i], given[len(axes) + i]
    value = np.asarray(node.attr_or_input("value", 2, 0.0)).reshape(-1)[0]
    return [padded(node, node(0), pads, float(value))]


def padded(node: Node, x: SSAValue, pads: Sequence[int], value: float = 0.0) -> SSAValue:
    """x padded by `value` (`pads`: all begins, then all ends, as ONNX); negative pads crop."""
    rank = len(pads) // 2
    if any(p > 0 for p in pads):
        x = node.b.pad(x, pads=[max(p, 0) for p in pads], value=value)
    for axis in range(rank):
        if pads[axis] < 0 or pads[rank + axis] < 0:
            size = x.type.get_shape()[axis]
            x = slice_axis(node, x, axis, -min(pads[axis], 0), size + min(pads[rank + axis], 0))
    return x


# ----------------------------------------------------------------------------------------
# Reductions and normalizations
# ----------------------------------------------------------------------------------------

REDUCE_OPS = {
    "ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
}  # fmt: skip


@converts(*REDUCE_OPS, attributes=["axes", "keepdims", "noop_with_empty_axes"])
def reduce(node: Node) -> list[Tensor]:
    axes = node.axes(node.attr_or_input("axes", 1, []), len(node.shape(0)))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return [node.raw(0)]
        axes = list(range(len(node.shape(0))))
    graph_op = getattr(node.b, REDUCE_OPS[node.proto.op_type])
    return [graph_op(node(0), axes=axes, keepdims=bool(node.attr("keepdims", 1)))]


@converts("GlobalAveragePool", "GlobalMaxPool")
def global_pool(node: Node) -> list[Tensor]:
    graph_op = node.b.reduce_mean if node.proto.op_type == "GlobalAveragePool" else node.b.reduce_max
    return [graph_op(node(0), axes=list(range(2, len(node.shape(0)))), keepdims=True)]


@converts("Softmax", "LogSoftmax", attributes=["axis"])
def softmax(node: Node) -> list[Tensor]:
    """Opset 13+: along `axis`; before: over the input flattened to 2-D at `axis` (default 1)."""
    graph_op = node.b.softmax if node.proto.op_type == "Softmax" else node.b.log_softmax
    dims = node.shape(0)
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), len(dims))
    if node.opset >= 13 or axis == len(dims) - 1:
        return [graph_op(node(0), axis=axis)]
    flat = node.b.reshape(node(0), (math.prod(dims[:axis]), math.prod(dims[axis:])))
    return [node.b.reshape(graph_op(flat, axis=1), dims)]


@converts("LayerNormalization", attributes=["axis", "epsilon", "stash_type"])
def layer_norm(node: Node) -> list[Tensor]:
    dims = node.shape(0)
    axis = node.axis(node.attr("axis", -1), len(dims))
    normalized = dims[axis:]
    x = node(0)

    def parameter(index: int, fill: float) -> SSAValue:
        if not node.has(index):
            return node.b.constant(np.full(normalized, fill, numpy_dtype(x.type.get_element_type())))
        value = node(index)
        return value if value.type.get_shape() == normalized else node.b.broadcast_to(value, normalized)

    return [node.b.layer_norm(x, parameter(1, 1.0), parameter(2, 0.0), axis=axis, epsilon=node.attr("epsilon", 1e-5))]


def standardized(node: Node, x: SSAValue, axis: int, epsilon: float) -> SSAValue:
    """(x - mean) / sqrt(var + epsilon) over the axes from `axis` on: a layer_norm of unit scale and zero bias."""
    normalized = x.type.get_shape()[axis:]
    dtype = numpy_dtype(x.type.get_element_type())
    ones, zeros = node.b.constant(np.ones(normalized, dtype)), node.b.constant(np.zeros(normalized, dtype))
    return node.b.layer_norm(x, ones, zeros, axis=axis, epsilon=epsilon)


def per_channel(node: Node, index: int, rank: int) -> SSAValue:
    """Input `index`, of shape [C], as [C, 1, ...] to broadcast over axis 1 of a rank-`rank` tensor."""
    shape = (node.shape(index)[0], *[1] * (rank - 2))
    return node.transformed(index, lambda c: c.reshape(shape), lambda c: node.b.reshape(c, shape))


@converts("RMSNormalization", attributes=["axis", "epsilon", "stash_type"])
def rms_norm(node: Node) -> list[Tensor]:
    """x / sqrt(mean(x^2 over the axes from `axis` on) + epsilon) * scale."""
    b, x = node.b, node(0)
    rank = len(node.shape(0))
    axes = list(range(node.axis(node.attr("axis", -1), rank), rank))
    mean_square = b.reduce_mean(b.mul(x, x), axes=axes, keepdims=True)
    inverse_rms = b.rsqrt(b.add(mean_square, node.scalar(node.attr("epsilon", 1e-5), x)))
    return [b.mul(b.mul(x, inverse_rms), node(1))]


@converts("InstanceNormalization", attributes=["epsilon"])
def instance_norm(node: Node) -> list[Tensor]:
    """Each (sample, channel) standardized over its spatial axes, then scaled and shifted per channel."""
    rank = len(node.shape(0))
    y = standardized(node, node(0), 2, node.attr("epsilon", 1e-5))
    return [node.b.add(node.b.mul(y, per_channel(node, 1, rank)), per_channel(node, 2, rank))]


@converts("GroupNormalization", attributes=["epsilon", "num_groups", "stash_type"])
def group_norm(node: Node) -> list[Tensor]:
    """x [N, C, ...] as [N, groups, rest] standardized over `rest`; scale and bias are per channel
    (opset 21) or per group (opset 18, applied before reshaping back)."""
    b, dims = node.b, node.shape(0)
    groups = node.attr("num_groups")
    if dims[1] % groups:
        raise node.unsupported(f"num_groups {groups} does not divide the {dims[1]} channels of shape {list(dims)}")
    grouped = (dims[0], groups, math.prod(dims[1:]) // groups)
    y = standardized(node, b.reshape(node(0), grouped), 2, node.attr("epsilon", 1e-5))
    if node.opset < 21:
        y = b.add(b.mul(y, per_channel(node, 1, 3)), per_channel(node, 2, 3))
        return [b.reshape(y, dims)]
    y = b.reshape(y, dims)
    return [b.add(b.mul(y, per_channel(node, 1, len(dims))), per_channel(node, 2, len(dims)))]


@converts("BatchNormalization", attributes=["epsilon", "momentum", "training_mode"])
def batch_norm(node: Node) -> list[Tensor]:
    if node.attr("training_mode", 0):
        raise node.unsupported("training_mode = 1 is not supported (inference only)")
    return [node.b.batch_norm(*node.inputs(), epsilon=node.attr("epsilon", 1e-5))]


@converts("LRN", attributes=["alpha", "beta", "bias", "size"])
def lrn(node: Node) -> list[Tensor]:
    """x / (bias + alpha / size * (sum of x^2 over `size` neighbouring channels))^beta.

    The channel window sum is a matmul with a band matrix of ones: [C, C] @ x^2 as [N, C, rest].
    """
    b, x = node.b, node(0)
    dims, size = node.shape(0), node.attr("size")
    channel = np.arange(dims[1])
    offset = channel[None, :] - channel[:, None]
    band = ((-((size - 1) // 2) <= offset) & (offset <= size // 2)).astype(numpy_dtype(x.type.get_element_type()))
    squares = b.reshape(b.mul(x, x), (dims[0], dims[1], math.prod(dims[2:])))
    window_sum = b.reshape(b.matmul(b.constant(band), squares), dims)
    alpha_over_size = node.scalar(node.attr("alpha", 1e-4) / size, x)
    scaled = b.add(node.scalar(node.attr("bias", 1.0), x), b.mul(window_sum, alpha_over_size))
    return [b.div(x, b.pow(scaled, node.scalar(node.attr("beta", 0.75), x)))]


# ----------------------------------------------------------------------------------------
# Contractions and windows
# ----------------------------------------------------------------------------------------


@converts("MatMul")
def matmul(node: Node) -> list[Tensor]:
    """NumPy matmul; 1-D operands get a unit dimension that the result drops."""
    b, a, c = node.b, node(0), node(1)
    a_dims, c_dims = node.shape(0), node.shape(1)
    if len(a_dims) >= 2 and len(c_dims) >= 2:
        return [b.matmul(a, c)]
    a = b.reshape(a, (1, *a_dims)) if len(a_dims) == 1 else a
    c = b.reshape(c, (*c_dims, 1)) if len(c_dims) == 1 else c
    product = b.matmul(a, c)
    dims = list(product.type.get_shape())
    drop = ([len(dims) - 2] if len(a_dims) == 1 else []) + ([len(dims) - 1] if len(c_dims) == 1 else [])
    return [b.reshape(product, [d for i, d in enumerate(dims) if i not in drop])]


@converts("Gemm", attributes=["alpha", "beta", "transA", "transB"])
def gemm(node: Node) -> list[Tensor]:
    """alpha * A' @ B' + beta * C, A' and B' optionally transposed."""
    b = node.b

    def operand(index: int, transposed: str) -> SSAValue:
        if not node.attr(transposed, 0):
            return node(index)
        return node.transformed(index, np.transpose, lambda m: b.transpose(m, perm=[1, 0]))

    y = b.matmul(operand(0, "transA"), operand(1, "transB"))
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = b.mul(y, node.scalar(alpha, y))
    if node.has(2) and beta != 0.0:
        scale = (lambda c: (c * beta).astype(c.dtype)), (lambda c: b.mul(c, node.scalar(beta, y)))
        y = b.add(y, node(2) if beta == 1.0 else node.transformed(2, *scale))
    return [y]


ELLIPSIS_LABELS = "0123456789"
"""Labels that stand for the axes of an Einsum '...' (right-aligned, as NumPy broadcasts them)."""


def einsum_labels(node: Node, equation: str) -> tuple[list[str], str]:
    """Each operand's axis labels and the output's, with '...' spelled out and an implicit output made explicit."""
    terms, arrow, output = equation.replace(" ", "").partition("->")
    operands = terms.split(",")
    if len(operands) != len(node.proto.input):
        given = len(node.proto.input)
        raise node.unsupported(f"equation '{equation}' names {len(operands)} operands, the node has {given}")
    ellipsis_ranks = [len(node.shape(i)) - len(term) + 3 for i, term in enumerate(operands) if "..." in term]
    ellipsis_rank = max(ellipsis_ranks, default=0)

    def spelled(term: str, rank: int) -> str:
        if "..." not in term:
            return term
        count = rank - len(term.replace("...", ""))
        return term.replace("...", ELLIPSIS_LABELS[ellipsis_rank - count : ellipsis_rank])

    labels = [spelled(term, len(node.shape(i))) for i, term in enumerate(operands)]
    if arrow:
        output = spelled(output, ellipsis_rank + len(output.replace("...", "")))
    else:
        once = sorted(c for c in set("".join(labels)) if "".join(labels).count(c) == 1 and c.isalpha())
        output = ELLIPSIS_LABELS[:ellipsis_rank] + "".join(once)
    for i, term in enumerate(labels):
        if len(term) != len(node.shape(i)):
            raise node.unsupported(f"equation '{equation}': operand #{i} '{operands[i]}' does not label the "
                                   f"{len(node.shape(i))} axes of its shape {list(node.shape(i))}")
    return labels, output


def arranged(node: Node, x: SSAValue, labels: str, order: str, shape: Sequence[int]) -> SSAValue:
    """x (axes labelled `labels`) transposed to the label order `order`, then reshaped to `shape`."""
    perm = [labels.index(c) for c in order]
    if perm != sorted(perm):
        x = node.b.transpose(x, perm=perm)
    return x if tuple(x.type.get_shape()) == tuple(shape) else node.b.reshape(x, shape)


def arranged_input(node: Node, index: int, labels: str, order: str, shape: Sequence[int]) -> SSAValue:
    """Input `index` arranged as `arranged` does; a constant one by NumPy at import."""
    perm = [labels.index(c) for c in order]
    if perm == sorted(perm) and tuple(node.shape(index)) == tuple(shape):
        return node(index)
    return node.transformed(index, lambda a: np.transpose(a, perm).reshape(shape),
                            lambda x: arranged(node, x, labels, order, shape))


@converts("Einsum", attributes=["equation"])
def einsum(node: Node) -> list[Tensor]:
    """Transpose-like (one operand, the output permutes its labels) or matmul-like (two operands,
    each label in both and the output: batch; in both only: contracted; in one and the output: free):
    the operands arranged as [batch, free, contracted] @ [batch, contracted, free], then the
    product arranged as the output."""
    equation = node.attr("equation")
    labels, output = einsum_labels(node, equation)
    size: dict[str, int] = {}
    for i, term in enumerate(labels):
        for c, d in zip(term, node.shape(i)):
            if size.setdefault(c, d) != d:
                raise node.unsupported(f"equation '{equation}': label '{c}' has sizes {size[c]} and {d}")
    refused = node.unsupported(
        f"equation '{equation}' is not supported (only transpose-like equations of one operand and "
        "matmul-like ones of two: no repeated labels, every label that is not in the output in both operands)"
    )
    if any(len(set(term)) != len(term) for term in [*labels, output]) or not set(output) <= set(size):
        raise refused
    if len(labels) == 1:
        if sorted(labels[0]) != sorted(output):
            raise refused
        return [arranged_input(node, 0, labels[0], output, [size[c] for c in output])]
    if len(labels) != 2:
        raise refused
    a, c = labels
    batch = [x for x in output if x in a and x in c]
    a_free, c_free = [x for x in output if x in a and x not in c], [x for x in output if x in c and x not in a]
    contracted = [x for x in a if x in c and x not in output]
    if len(batch) + len(a_free) + len(contracted) != len(a) or len(batch) + len(c_free) + len(contracted) != len(c):
        raise refused
    batch_sizes = [size[x] for x in batch]

    def product(group: list[str]) -> int:
        return math.prod(size[x] for x in group)

    left = arranged_input(node, 0, a, "".join(batch + a_free + contracted),
                          [*batch_sizes, product(a_free), product(contracted)])
    right = arranged_input(node, 1, c, "".join(batch + contracted + c_free),
                           [*batch_sizes, product(contracted), product(c_free)])
    result = "".join(batch + a_free + c_free)
    unpacked = arranged(node, node.b.matmul(left, right), result, result, [size[x] for x in result])
    return [arranged(node, unpacked, result, output, [size[x] for x in output])]


@dataclass(frozen=True)
class Window:
    """A Conv's or pool's input as [N, C, H, W] and its window in 2-D: a 1-D window (input
    [N, C, L], attributes of one value per axis) runs as [N, C, 1, L] with a unit H window."""

    x: SSAValue
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    padding: list[int]
    """[top, left, bottom, right]"""
    dims: tuple[int, ...]
    """The input's own shape."""

    def restored(self, node: Node, y: SSAValue) -> SSAValue:
        """A [N, C', 1, L'] result of a 1-D window back as [N, C', L']; a 2-D one as it is."""
        if len(self.dims) == 4:
            return y
        n, c, _, length = y.type.get_shape()
        return node.b.reshape(y, (n, c, length))


def window(node: Node, kernel: Sequence[int]) -> Window:
    """The window of a Conv or pool node with `kernel` (one size per spatial axis)."""
    dims = node.shape(0)
    if len(dims) not in (3, 4):
        raise node.unsupported(
            f"only 1-D and 2-D windows (input [N, C, L] or [N, C, H, W]) are supported, got shape {list(dims)}"
        )
    one_d = len(dims) == 3

    def lifted(values: Sequence[int], fill: int) -> list[int]:
        return [fill, *values] if one_d else list(values)

    x = node.b.reshape(node(0), (*dims[:2], 1, dims[2])) if one_d else node(0)
    sizes = lifted(dims[2:], 1)
    ones = [1] * len(kernel)
    kernel = lifted(kernel, 1)
    strides, dilations = lifted(node.attr("strides", ones), 1), lifted(node.attr("dilations", ones), 1)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(node.attr("pads", [0, 0] * len(ones)))
        padding = [0, pads[0], 0, pads[1]] if one_d else pads
    elif auto_pad == "VALID":
        padding = [0, 0, 0, 0]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(sizes, kernel, strides, dilations):
            total = max((-(-size // s) - 1) * s + d * (k - 1) + 1 - size, 0)
            small, large = total // 2, total - total // 2  # SAME_UPPER puts the odd pixel at the end
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        padding = begins + ends
    else:
        raise node.unsupported(f"auto_pad '{auto_pad}' is not supported")
    return Window(x, kernel, strides, dilations, padding, dims)


@converts("Conv", attributes=["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"])
def conv(node: Node) -> list[Tensor]:
    w_dims = node.shape(1)
    win = window(node, w_dims[2:])
    weights = node(1)
    if len(w_dims) == 3:
        lifted = (*w_dims[:2], 1, w_dims[2])
        weights = node.transformed(1, lambda w: w.reshape(lifted), lambda w: node.b.reshape(w, lifted))
    y = node.b.conv2d(win.x, weights, strides=win.strides, dilations=win.dilations, padding=win.padding,
                      groups=node.attr("group", 1))
    y = win.restored(node, y)
    if node.has(2):
        y = node.b.add(y, per_channel(node, 2, len(win.dims)))
    return [y]


@converts("ConvTranspose", attributes=["auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                      "output_shape", "pads", "strides"])
def conv_transpose(node: Node) -> list[Tensor]:
    """The gradient of Conv: a stride-1 conv2d of the input with stride - 1 zeros inserted between
    its elements and padded by dilation * (kernel - 1) - pads (+ output_padding at the end), with
    the weights [C, M/group, ...] flipped and their channel axes swapped. 1-D runs as 2-D
    with a unit height. An `output_shape` (or auto_pad SAME_*: the input size times the stride)
    sets the pads as ONNX Runtime does: the full output less the wanted size, split with the odd
    element at the start (SAME_UPPER: at the end); a wanted size up to stride - 1 past the full
    output adds zeros at the end."""
    b, dims, w_dims = node.b, node.shape(0), node.shape(1)
    if len(dims) not in (3, 4) or len(w_dims) != len(dims):
        raise node.unsupported(f"only 1-D and 2-D transposed convolutions (input [N, C, L] or [N, C, H, W], "
                               f"weights of the same rank) are supported, got shapes {list(dims)} and {list(w_dims)}")
    spatial = len(dims) - 2
    groups = node.attr("group", 1)
    if dims[1] != w_dims[0] or dims[1] % groups:
        raise node.unsupported(f"weights of shape {list(w_dims)} do not fit an input of shape {list(dims)} "
                               f"in {groups} groups (weights [C, M/group, ...] with C the input channels)")
    if list(node.attr("kernel_shape", w_dims[2:])) != list(w_dims[2:]):
        raise node.unsupported(f"kernel_shape {node.attr('kernel_shape')} differs from the weights' {list(w_dims[2:])}")
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported(f"auto_pad '{auto_pad}' is not supported")
    ones, zeros = [1] * spatial, [0] * spatial
    strides, dilations = node.attr("strides", ones), node.attr("dilations", ones)
    output_padding = node.attr("output_padding", zeros)
    pads = node.attr("pads", zeros * 2) if auto_pad == "NOTSET" else zeros * 2
    wanted = node.attr("output_shape", None)
    if wanted is None and auto_pad.startswith("SAME"):
        wanted = [size * stride for size, stride in zip(dims[2:], strides)]
    if wanted is not None:
        if len(wanted) != spatial:
            raise node.unsupported(f"output_shape {list(wanted)} must give the {spatial} spatial sizes")
        full = [stride * (size - 1) + extra + dilation * (k - 1) + 1
                for size, stride, extra, dilation, k in zip(dims[2:], strides, output_padding, dilations, w_dims[2:])]
        totals = [f - size for f, size in zip(full, wanted)]
        if any(total < 1 - stride for total, stride in zip(totals, strides)):
            raise node.unsupported(f"output_shape {list(wanted)} is more than stride - 1 past the full output {full}")
        heads = [0 if total < 0 else total // 2 if auto_pad == "SAME_UPPER" else total - total // 2 for total in totals]
        pads = [*heads, *(total - head for total, head in zip(totals, heads))]

    def lifted(values: Sequence[int], fill: int) -> list[int]:
        return [fill, *values] if spatial == 1 else list(values)

    (h, w), (kh, kw) = lifted(dims[2:], 1), lifted(w_dims[2:], 1)
    (sh, sw), (dh, dw) = lifted(strides, 1), lifted(dilations, 1)
    output_padding = lifted(output_padding, 0)
    begins, ends = lifted(pads[:spatial], 0), lifted(pads[spatial:], 0)
    n, c, m = dims[0], dims[1], w_dims[1] * groups
    x = b.reshape(node(0), (n, c, h, w)) if spatial == 1 else node(0)
    if sh > 1 or sw > 1:  # each element followed by stride - 1 zeros along each axis
        spread = padded(node, b.reshape(x, (n, c, h, 1, w, 1)), [0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1])
        x = b.reshape(spread, (n, c, h * sh, w * sw))
    edges = [d * (k - 1) for d, k in ((dh, kh), (dw, kw))]
    border = [edges[0] - begins[0], edges[1] - begins[1],
              edges[0] - ends[0] + output_padding[0] - (sh - 1), edges[1] - ends[1] + output_padding[1] - (sw - 1)]
    x = padded(node, x, [0, 0, *(min(p, 0) for p in border[:2]), 0, 0, *(min(p, 0) for p in border[2:])])
    swapped = (groups, c // groups, m // groups, kh, kw)

    def conv_weights_in_graph(weights: SSAValue) -> SSAValue:
        weights = b.transpose(b.reshape(weights, swapped), perm=[0, 2, 1, 3, 4])
        weights = b.reshape(weights, (m, c // groups, kh, kw))
        return slice_axis(node, slice_axis(node, weights, 2, -1, -kh - 1, -1), 3, -1, -kw - 1, -1)

    def conv_weights_at_import(weights: np.ndarray) -> np.ndarray:
        weights = weights.reshape(swapped).transpose(0, 2, 1, 3, 4).reshape(m, c // groups, kh, kw)
        return np.ascontiguousarray(weights[:, :, ::-1, ::-1])

    weights = node.transformed(1, conv_weights_at_import, conv_weights_in_graph)
    y = b.conv2d(x, weights, strides=[1, 1], dilations=[dh, dw], padding=[max(p, 0) for p in border], groups=groups)
    if spatial == 1:
        y = b.reshape(y, (n, m, y.type.get_shape()[3]))
    if node.has(2):
        y = b.add(y, per_channel(node, 2, len(dims)))
    return [y]


POOL_ATTRIBUTES = ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"]


@converts("MaxPool", attributes=[*POOL_ATTRIBUTES, "storage_order"])
@converts("AveragePool", attributes=[*POOL_ATTRIBUTES, "count_include_pad"])
def pool(node: Node) -> list[Tensor]:
    win = window(node, node.attr("kernel_shape"))
    if any(d != 1 for d in win.dilations):
        raise node.unsupported(f"dilations {node.attr('dilations')} are not supported (only 1)")
    if node.attr("ceil_mode", 0):
        sizes = win.x.type.get_shape()[2:]
        for axis, (size, k, s) in enumerate(zip(sizes, win.kernel, win.strides)):
            if (size + win.padding[axis] + win.padding[axis + 2] - k) % s:
                raise node.unsupported("ceil_mode = 1 is not supported where it rounds the output size up")
    if node.proto.op_type == "MaxPool":
        y = node.b.max_pool2d(win.x, kernel=win.kernel, strides=win.strides, padding=win.padding)
    else:
        include = bool(node.attr("count_include_pad", 0))
        y = node.b.avg_pool2d(win.x, kernel=win.kernel, strides=win.strides, padding=win.padding,
                              count_include_pad=include)
    return [win.restored(node, y)]


# ----------------------------------------------------------------------------------------
# Resize
# ----------------------------------------------------------------------------------------

SOURCE_COORDINATES = {
    "half_pixel": lambda out, size, scale, length: (out + 0.5) / scale - 0.5,
    "half_pixel_symmetric": lambda out, size, scale, length:
        size / 2 * (1 - length / (scale * size)) + (out + 0.5) / scale - 0.5,
    "pytorch_half_pixel": lambda out, size, scale, length:
        (out + 0.5) / scale - 0.5 if length > 1 else np.zeros_like(out),
    "align_corners": lambda out, size, scale, length:
        out * (size - 1) / (length - 1) if length > 1 else np.zeros_like(out),
    "asymmetric": lambda out, size, scale, length: out / scale,
}  # fmt: skip
"""coordinate_transformation_mode: where output index `out` (of `length`) samples an axis of
`size` resized by `scale`."""
NEAREST_ROUNDING = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


@converts("Resize", attributes=["mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                "exclude_outside", "extrapolation_value", "antialias", "axes",
                                "keep_aspect_ratio_policy"])
def resize(node: Node) -> list[Tensor]:
    """Nearest: one gather of the source indices per resized axis. Linear: per resized axis, the
    two neighbouring source elements gathered and mixed by their constant weights (separable, so
    bilinear is exact). Scales or sizes must be constant. Opset 10 (no roi input) samples
    asymmetrically and rounds nearest down (up where it shrinks), as ONNX Runtime does."""
    dims = node.shape(0)
    rank = len(dims)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise node.unsupported(f"mode '{mode}' is not supported (only 'nearest', 'linear' and 'cubic')")
    if mode != "nearest" and node.dtype(0).kind != "f":
        raise node.unsupported(f"{mode} mode needs a floating-point input, got {node.dtype(0)}")
    if node.attr("antialias", 0):
        raise node.unsupported("antialias = 1 is not supported")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise node.unsupported(f"keep_aspect_ratio_policy '{node.attr('keep_aspect_ratio_policy')}' is not "
                               f"supported (only 'stretch')")
    opset10 = node.opset < 11
    transform = "asymmetric" if opset10 else node.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in SOURCE_COORDINATES:
        raise node.unsupported(f"coordinate_transformation_mode '{transform}' is not supported "
                               f"(supported: {', '.join(SOURCE_COORDINATES)})")
    axes = node.axes(node.attr("axes", range(rank)), rank)
    scales = node.constant(1 if opset10 else 2, "scales", np.zeros(0)).reshape(-1)
    sizes = None if opset10 else node.constant(3, "sizes", None)
    if sizes is not None and sizes.size:
        lengths = [int(v) for v in sizes.reshape(-1)]
        scales = [np.float32(length) / np.float32(dims[axis]) for axis, length in zip(axes, lengths)]
    elif len(scales):
        lengths = [int(np.floor(np.float32(dims[axis]) * np.float32(s))) for axis, s in zip(axes, scales)]  # as ORT
    else:
        raise node.unsupported("needs constant scales or sizes")
    if len(lengths) != len(axes) or any(length < 1 for length in lengths):
        raise node.unsupported(f"output sizes {lengths} do not fit axes {axes} of the input shape {list(dims)}")
    nearest_mode = node.attr("nearest_mode", "round_prefer_floor")
    if nearest_mode not in NEAREST_ROUNDING:
        raise node.unsupported(f"nearest_mode '{nearest_mode}' is not supported")
    y = node(0)
    for axis, scale, length in zip(axes, scales, lengths):
        size = dims[axis]
        if size == length and scale == 1:  # every transformation maps an axis onto itself
            continue
        out, scale = np.arange(length, dtype=np.float32), np.float32(scale)  # float32 arithmetic, as ORT
        source = SOURCE_COORDINATES[transform](out, np.float32(size), scale, np.float32(length))
        if mode == "linear":
            y = linearly_resampled(node, y, axis, np.clip(source, 0, size - 1))
            continue
        if mode == "cubic":
            y = cubically_resampled(node, y, axis, source, node.attr("cubic_coeff_a", -0.75),
                                    bool(node.attr("exclude_outside", 0)))
            continue
        rounding = (np.ceil if scale < 1 else np.floor) if opset10 else NEAREST_ROUNDING[nearest_mode]
        y = node.b.gather(y, node.b.constant(np.clip(rounding(source), 0, size - 1).astype(np.int64)), axis=axis)
    return [y]


def linearly_resampled(node: Node, x: SSAValue, axis: int, source: np.ndarray) -> SSAValue:
    """x sampled along `axis` at the fractional indices `source`: a mix of the two neighbours."""
    b, dims = node.b, x.type.get_shape()
    below = np.floor(source).astype(np.int64)
    above = np.minimum(below + 1, dims[axis] - 1)
    dtype = numpy_dtype(x.type.get_element_type())
    weight = (source - below).astype(dtype).reshape(-1, *[1] * (len(dims) - axis - 1))
    low, high = b.gather(x, b.constant(below), axis=axis), b.gather(x, b.constant(above), axis=axis)
    return b.add(low, b.mul(b.sub(high, low), b.constant(weight)))


def cubically_resampled(node: Node, x: SSAValue, axis: int, source: np.ndarray, a: float, exclude_outside: bool) -> SSAValue:
    """x sampled along `axis` at the fractional indices `source`: the four neighbours (clamped
    into the axis) weighted by the cubic convolution kernel with coefficient `a` (Keys); with
    `exclude_outside`, neighbours outside the axis weigh 0 and the rest are renormalized."""
    b, dims = node.b, x.type.get_shape()
    below = np.floor(source)
    distances = np.abs(np.stack([source - (below + k) for k in (-1, 0, 1, 2)]))  # [4, length]
    near = ((a + 2) * distances - (a + 3)) * distances**2 + 1
    far = ((a * distances - 5 * a) * distances + 8 * a) * distances - 4 * a
    weights = np.where(distances <= 1, near, np.where(distances < 2, far, 0))
    indices = np.stack([below + k for k in (-1, 0, 1, 2)]).astype(np.int64)
    if exclude_outside:
        weights = np.where((indices >= 0) & (indices < dims[axis]), weights, 0)
        weights = weights / weights.sum(axis=0)
    dtype = numpy_dtype(x.type.get_element_type())
    terms = [
        b.mul(b.gather(x, b.constant(np.clip(index, 0, dims[axis] - 1)), axis=axis),
              b.constant(weight.astype(dtype).reshape(-1, *[1] * (len(dims) - axis - 1))))
        for index, weight in zip(indices, weights)
    ]
    return b.add(b.add(terms[0], terms[1]), b.add(terms[2], terms[3]))
