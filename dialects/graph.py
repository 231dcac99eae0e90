"""The `graph` dialect: tensor ops on static shapes, the contract of ../GRAPH_DIALECT.md.

Every op prints in one readable form and always accepts the generic form:

    %y = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %y = "graph.transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>

Unary elementwise ops whose result type is their operand's print shorter:

    %y = graph.relu %x : tensor<4x8xf32>

Each op class carries its fusion `category` (see `Category`), its attribute defaults and
`infer`, the shape rule its verifier and the graph builder share.
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import ClassVar

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    BaseAttr,
    IRDLOperation,
    VarConstraint,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from graphopt.dialects import shapes
from graphopt.dialects.attributes import attribute_value, is_bool, is_float, is_supported_element
from graphopt.dialects.shapes import ShapeError


class Category(str, Enum):
    """Fusion category of an op (TVM's OpPatternKind)."""

    ELEMENTWISE = "elementwise"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    ANCHOR = "anchor"
    OPAQUE = "opaque"


# ----------------------------------------------------------------------------------------
# Base classes
# ----------------------------------------------------------------------------------------


class GraphOp(IRDLOperation, ABC):
    """Base of every computing graph op: category, attribute defaults, shape inference."""

    CATEGORY: ClassVar[Category]
    DEFAULTS: ClassVar[Mapping[str, object]] = {}
    """Python values of attributes that may be left out."""

    FLOAT_ONLY: ClassVar[bool] = False
    """Operands must have a float element type (exp, softmax, conv2d, ...)."""

    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    traits = traits_def(Pure())

    def __init__(
        self,
        operands: Sequence[SSAValue | Operation],
        attributes: Mapping[str, Attribute] | None = None,
        result_types: Sequence[Attribute] | None = None,
    ):
        values = [SSAValue.get(o) for o in operands]
        attributes = dict(attributes or {})
        if result_types is None:
            try:
                result_types = self.infer([v.type for v in values], attributes)
            except ShapeError as e:
                raise VerifyException(f"{self.name}: {e}") from None
        super().__init__(
            operands=self.group_operands(values),
            attributes=attributes,
            result_types=list(result_types),
        )

    @classmethod
    def group_operands(cls, values: list[SSAValue]) -> list:
        return values

    @classmethod
    def param(cls, attributes: Mapping[str, Attribute], name: str) -> object:
        """Python value of attribute `name`, or its default when left out."""
        if name in attributes:
            return attribute_value(attributes[name])
        if name in cls.DEFAULTS:
            return cls.DEFAULTS[name]
        raise ShapeError(f"missing attribute '{name}'")

    def get(self, name: str) -> object:
        """Python value of this op's attribute `name` (default when left out)."""
        return self.param(self.attributes, name)

    @classmethod
    def infer(cls, operand_types: Sequence[Attribute], attributes: Mapping[str, Attribute]) -> list[TensorType]:
        """Result types from operand types and attributes; raises ShapeError.

        Ops whose result shape is not a function of operands and attributes (reshape,
        broadcast_to, cast) take it from the given result type instead.
        """
        raise ShapeError("the result type must be given")

    def verify_(self) -> None:
        operand_types = [o.type for o in self.operands]
        for i, t in enumerate(operand_types):
            check_tensor(t, f"operand #{i}", self.name)
        for i, t in enumerate(r.type for r in self.results):
            check_tensor(t, f"result #{i}", self.name)
        try:
            expected = self.infer(operand_types, self.attributes)
        except ShapeError as e:
            raise VerifyException(f"{self.name}: {e}") from None
        actual = [r.type for r in self.results]
        if list(expected) != actual:
            raise VerifyException(
                f"{self.name}: result type {_types(actual)} does not match the inferred {_types(expected)}"
            )


MAX_ELEMENTS = 2**63 - 1
"""The most elements a tensor of a graph op may have: compiled code indexes with i64."""


def check_tensor(t: Attribute, what: str, op_name: str) -> None:
    if not isinstance(t, TensorType):
        raise VerifyException(f"{op_name}: {what} must be a ranked tensor, got {t}")
    if any(d < 0 for d in t.get_shape()):
        raise VerifyException(f"{op_name}: {what} {t} has a dynamic dimension; graph ops need static shapes")
    if math.prod(t.get_shape()) > MAX_ELEMENTS:
        raise VerifyException(f"{op_name}: {what} {t} has more than 2^63 - 1 elements (compiled code indexes with i64)")
    element = t.get_element_type()
    if not is_supported_element(element):
        raise VerifyException(f"{op_name}: {what} {t} has unsupported element type {element}")


def _types(types: Sequence[Attribute]) -> str:
    return ", ".join(str(t) for t in types)


def _tensor(shape: Sequence[int], element_type: Attribute) -> TensorType:
    return TensorType(element_type, list(shape))


def _check_element(op: type[GraphOp], t: TensorType, name: str) -> None:
    element = t.get_element_type()
    if is_bool(element):
        raise ShapeError(f"operand '{name}' {t}: i1 is not supported (use graph.cast first)")
    if op.FLOAT_ONLY and not is_float(element):
        raise ShapeError(f"operand '{name}' {t}: expects a float element type")


def _same_element(types: Sequence[TensorType], names: Sequence[str]) -> Attribute:
    element = types[0].get_element_type()
    for t, n in zip(types, names):
        if t.get_element_type() != element:
            raise ShapeError(f"operand '{n}' {t} has element type {t.get_element_type()}, expected {element}")
    return element


class UnaryElementwiseOp(GraphOp, ABC):
    """`%y = graph.<op> %x : tensor<...>`: one operand, same type out."""

    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    T: ClassVar = VarConstraint("T", BaseAttr(TensorType))
    x = operand_def(T)
    result = result_def(T)

    assembly_format = "$x attr-dict `:` type($x)"

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        _check_element(cls, x, "x")
        return [x]


class FloatUnaryOp(UnaryElementwiseOp, ABC):
    FLOAT_ONLY: ClassVar[bool] = True


class BinaryElementwiseOp(GraphOp, ABC):
    """`%c = graph.<op> %a, %b : (A, B) -> C`; a and b broadcast like NumPy."""

    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        a, b = operand_types
        _check_element(cls, a, "a")
        _check_element(cls, b, "b")
        element = _same_element([a, b], ["a", "b"])
        return [_tensor(shapes.broadcast(a.get_shape(), b.get_shape(), names=("a", "b")), cls.result_element(element))]

    @classmethod
    def result_element(cls, element: Attribute) -> Attribute:
        return element


class Identity(str, Enum):
    """The value a reduction starts from: combining it with any element leaves the element."""

    ZERO = "zero"
    LOWEST = "lowest"
    HIGHEST = "highest"

    def of(self, element: Attribute) -> float | int:
        """This identity as a value of `element`, a float or a signed integer type: 0, the
        lowest value (-inf, -2^(w-1)) or the highest (inf, 2^(w-1) - 1)."""
        if self is Identity.ZERO:
            return 0
        if is_float(element):
            return -math.inf if self is Identity.LOWEST else math.inf
        bits = element.width.data - 1
        return -(2**bits) if self is Identity.LOWEST else 2**bits - 1


class ReductionOp(GraphOp, ABC):
    """`%y = graph.reduce_<kind> %x {axes = array<i64: 1>, keepdims = false} : (X) -> Y`.

    `IDENTITY` is the value a reduction over no element gives (mean divides it by 0)."""

    CATEGORY: ClassVar[Category] = Category.REDUCTION
    IDENTITY: ClassVar[Identity]
    DEFAULTS: ClassVar[Mapping[str, object]] = {"keepdims": False}
    x = operand_def(TensorType)
    axes = attr_def(DenseArrayBase.constr(i64))
    keepdims = opt_attr_def(BoolAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        _check_element(cls, x, "x")
        shape = shapes.reduce(x.get_shape(), cls.param(attributes, "axes"), cls.param(attributes, "keepdims"))
        return [_tensor(shape, x.get_element_type())]


class AxisNormalizationOp(GraphOp, ABC):
    """`%y = graph.softmax %x {axis = -1 : i64} : (X) -> X`."""

    CATEGORY: ClassVar[Category] = Category.REDUCTION
    FLOAT_ONLY: ClassVar[bool] = True
    DEFAULTS: ClassVar[Mapping[str, object]] = {"axis": -1}
    x = operand_def(TensorType)
    axis = opt_attr_def(IntegerAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        _check_element(cls, x, "x")
        shapes.normalize_axis(cls.param(attributes, "axis"), len(x.get_shape()))
        return [x]


class Pool2dOp(GraphOp, ABC):
    """`%y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (X) -> Y`."""

    CATEGORY: ClassVar[Category] = Category.ANCHOR
    FLOAT_ONLY: ClassVar[bool] = True
    DEFAULTS: ClassVar[Mapping[str, object]] = {"strides": (1, 1), "padding": (0, 0, 0, 0)}
    x = operand_def(TensorType)
    kernel = attr_def(DenseArrayBase.constr(i64))
    strides = opt_attr_def(DenseArrayBase.constr(i64))
    padding = opt_attr_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        _check_element(cls, x, "x")
        p = lambda n: cls.param(attributes, n)  # noqa: E731
        return [_tensor(shapes.pool2d(x.get_shape(), p("kernel"), p("strides"), p("padding")), x.get_element_type())]


# ----------------------------------------------------------------------------------------
# Constants
# ----------------------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(GraphOp):
    """A tensor constant, splat or full; cheap to duplicate into every consumer's group.

        %c = graph.constant dense<1.0> : tensor<4x8xf32>
    """

    name = "graph.constant"
    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    value = attr_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)

    assembly_format = None

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__([], {"value": value}, [value.get_type()])

    @classmethod
    def infer(cls, operand_types, attributes):
        value = attributes.get("value")
        if not isinstance(value, DenseIntOrFPElementsAttr):
            raise ShapeError("attribute 'value' must be dense elements")
        return [value.get_type()]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes, reserved_attr_names=("value",))

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        start = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("graph.constant expects dense elements, e.g. dense<1.0> : tensor<4xf32>", start, parser.pos)
        extra = parser.parse_optional_attr_dict()
        op = cls(value)
        op.attributes.update(extra)
        return op


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------


@irdl_op_definition
class NegOp(UnaryElementwiseOp):
    """`%y = graph.neg %x : tensor<4xf32>`: -x."""

    name = "graph.neg"


@irdl_op_definition
class AbsOp(UnaryElementwiseOp):
    """`%y = graph.abs %x : tensor<4xf32>`: |x|."""

    name = "graph.abs"


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    """`%y = graph.relu %x : tensor<4xf32>`: max(x, 0)."""

    name = "graph.relu"


@irdl_op_definition
class ExpOp(FloatUnaryOp):
    """`%y = graph.exp %x : tensor<4xf32>`."""

    name = "graph.exp"


@irdl_op_definition
class LogOp(FloatUnaryOp):
    """`%y = graph.log %x : tensor<4xf32>`: natural logarithm."""

    name = "graph.log"


@irdl_op_definition
class SqrtOp(FloatUnaryOp):
    """`%y = graph.sqrt %x : tensor<4xf32>`."""

    name = "graph.sqrt"


@irdl_op_definition
class RsqrtOp(FloatUnaryOp):
    """`%y = graph.rsqrt %x : tensor<4xf32>`: 1 / sqrt(x)."""

    name = "graph.rsqrt"


@irdl_op_definition
class ReciprocalOp(FloatUnaryOp):
    """`%y = graph.reciprocal %x : tensor<4xf32>`: 1 / x."""

    name = "graph.reciprocal"


@irdl_op_definition
class TanhOp(FloatUnaryOp):
    """`%y = graph.tanh %x : tensor<4xf32>`."""

    name = "graph.tanh"


@irdl_op_definition
class SigmoidOp(FloatUnaryOp):
    """`%y = graph.sigmoid %x : tensor<4xf32>`: 1 / (1 + exp(-x))."""

    name = "graph.sigmoid"


@irdl_op_definition
class ErfOp(FloatUnaryOp):
    """`%y = graph.erf %x : tensor<4xf32>`: the Gauss error function."""

    name = "graph.erf"


@irdl_op_definition
class SinOp(FloatUnaryOp):
    """`%y = graph.sin %x : tensor<4xf32>`."""

    name = "graph.sin"


@irdl_op_definition
class CosOp(FloatUnaryOp):
    """`%y = graph.cos %x : tensor<4xf32>`."""

    name = "graph.cos"


@irdl_op_definition
class FloorOp(FloatUnaryOp):
    """`%y = graph.floor %x : tensor<4xf32>`."""

    name = "graph.floor"


@irdl_op_definition
class CeilOp(FloatUnaryOp):
    """`%y = graph.ceil %x : tensor<4xf32>`."""

    name = "graph.ceil"


@irdl_op_definition
class GeluOp(FloatUnaryOp):
    """Gaussian error linear unit, exact (erf) or tanh-approximated.

        %y = graph.gelu %x {approximate = "tanh"} : tensor<4xf32>
    """

    name = "graph.gelu"
    DEFAULTS: ClassVar[Mapping[str, object]] = {"approximate": "none"}
    approximate = opt_attr_def(StringAttr)

    @classmethod
    def infer(cls, operand_types, attributes):
        if cls.param(attributes, "approximate") not in ("none", "tanh"):
            raise ShapeError('approximate must be "none" or "tanh"')
        return super().infer(operand_types, attributes)


@irdl_op_definition
class LeakyReluOp(FloatUnaryOp):
    """`%y = graph.leaky_relu %x {alpha = 0.01 : f64} : tensor<4xf32>`: x if x >= 0 else alpha*x."""

    name = "graph.leaky_relu"
    alpha = attr_def(FloatAttr)


@irdl_op_definition
class ClipOp(UnaryElementwiseOp):
    """`%y = graph.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4xf32>`; either bound optional."""

    name = "graph.clip"
    DEFAULTS: ClassVar[Mapping[str, object]] = {"min": None, "max": None}
    min_value = opt_attr_def(FloatAttr, attr_name="min")
    max_value = opt_attr_def(FloatAttr, attr_name="max")


@irdl_op_definition
class CastOp(GraphOp):
    """Element type conversion; the target type is the result's (NumPy astype semantics).

        %y = graph.cast %x : (tensor<4xf32>) -> tensor<4xi32>
    """

    name = "graph.cast"
    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    x = operand_def(TensorType)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        raise ShapeError("graph.cast needs its result type to be given")

    def verify_(self) -> None:
        check_tensor(self.x.type, "operand 'x'", self.name)
        check_tensor(self.result.type, "result", self.name)
        if self.x.type.get_shape() != self.result.type.get_shape():
            raise VerifyException(f"{self.name}: result {self.result.type} must have the shape of 'x' {self.x.type}")


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    """`%c = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>`."""

    name = "graph.add"


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    """`%c = graph.sub %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`."""

    name = "graph.sub"


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    """`%c = graph.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`."""

    name = "graph.mul"


@irdl_op_definition
class DivOp(BinaryElementwiseOp):
    """`%c = graph.div %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>` (floats only)."""

    name = "graph.div"
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class PowOp(BinaryElementwiseOp):
    """`%c = graph.pow %a, %b : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>` (floats only)."""

    name = "graph.pow"
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class MaxOp(BinaryElementwiseOp):
    """`%c = graph.max %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`; NaN propagates."""

    name = "graph.max"


@irdl_op_definition
class MinOp(BinaryElementwiseOp):
    """`%c = graph.min %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`; NaN propagates."""

    name = "graph.min"


CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


@irdl_op_definition
class CmpOp(BinaryElementwiseOp):
    """`%c = graph.cmp %a, %b {predicate = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>`."""

    name = "graph.cmp"
    predicate = attr_def(StringAttr)

    @classmethod
    def infer(cls, operand_types, attributes):
        if cls.param(attributes, "predicate") not in CMP_PREDICATES:
            raise ShapeError(f"predicate must be one of {', '.join(CMP_PREDICATES)}")
        return super().infer(operand_types, attributes)

    @classmethod
    def result_element(cls, element):
        return IntegerType(1)


@irdl_op_definition
class SelectOp(GraphOp):
    """`%r = graph.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>`."""

    name = "graph.select"
    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    cond = operand_def(TensorType)
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        cond, a, b = operand_types
        if not is_bool(cond.get_element_type()):
            raise ShapeError(f"operand 'cond' {cond} must have element type i1")
        element = _same_element([a, b], ["a", "b"])
        shape = shapes.broadcast(cond.get_shape(), a.get_shape(), b.get_shape(), names=("cond", "a", "b"))
        return [_tensor(shape, element)]


@irdl_op_definition
class BatchNormOp(GraphOp):
    """Inference batch normalization over axis 1 of x [N, C, ...].

        %y = graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f64}
             : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
             -> tensor<1x8x4x4xf32>
    """

    name = "graph.batch_norm"
    CATEGORY: ClassVar[Category] = Category.ELEMENTWISE
    FLOAT_ONLY: ClassVar[bool] = True
    DEFAULTS: ClassVar[Mapping[str, object]] = {"epsilon": 1e-5}
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    epsilon = opt_attr_def(FloatAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        names = ("x", "scale", "bias", "mean", "var")
        for t, n in zip(operand_types, names):
            _check_element(cls, t, n)
        _same_element(operand_types, names)
        x = operand_types[0]
        if len(x.get_shape()) < 2:
            raise ShapeError(f"operand 'x' {x} must have rank >= 2 (N, C, ...)")
        channels = x.get_shape()[1]
        for t, n in zip(operand_types[1:], names[1:]):
            if t.get_shape() != (channels,):
                raise ShapeError(f"operand '{n}' {t} must have shape [{channels}] (the channels of 'x')")
        return [x]


# ----------------------------------------------------------------------------------------
# Data movement (injective)
# ----------------------------------------------------------------------------------------


@irdl_op_definition
class ReshapeOp(GraphOp):
    """`%y = graph.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>`: row-major, same element count."""

    name = "graph.reshape"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    x = operand_def(TensorType)
    result = result_def(TensorType)

    def verify_(self) -> None:
        check_tensor(self.x.type, "operand 'x'", self.name)
        check_tensor(self.result.type, "result", self.name)
        if self.x.type.get_element_type() != self.result.type.get_element_type():
            raise VerifyException(f"{self.name}: result {self.result.type} must keep the element type of {self.x.type}")
        try:
            shapes.reshape(self.x.type.get_shape(), self.result.type.get_shape())
        except ShapeError as e:
            raise VerifyException(f"{self.name}: {e}") from None


@irdl_op_definition
class BroadcastToOp(GraphOp):
    """`%y = graph.broadcast_to %x : (tensor<8xf32>) -> tensor<4x8xf32>`: NumPy rules; cheap to duplicate."""

    name = "graph.broadcast_to"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    x = operand_def(TensorType)
    result = result_def(TensorType)

    def verify_(self) -> None:
        check_tensor(self.x.type, "operand 'x'", self.name)
        check_tensor(self.result.type, "result", self.name)
        if self.x.type.get_element_type() != self.result.type.get_element_type():
            raise VerifyException(f"{self.name}: result {self.result.type} must keep the element type of {self.x.type}")
        try:
            shapes.broadcast_to(self.x.type.get_shape(), self.result.type.get_shape())
        except ShapeError as e:
            raise VerifyException(f"{self.name}: {e}") from None


@irdl_op_definition
class TransposeOp(GraphOp):
    """`%y = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>`."""

    name = "graph.transpose"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    x = operand_def(TensorType)
    perm = attr_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        return [_tensor(shapes.transpose(x.get_shape(), cls.param(attributes, "perm")), x.get_element_type())]


@irdl_op_definition
class SliceOp(GraphOp):
    """Strided slice with Python semantics per axis (negative indices count from the end).

        %y = graph.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>}
             : (tensor<4x8xf32>) -> tensor<4x4xf32>
    """

    name = "graph.slice"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    x = operand_def(TensorType)
    starts = attr_def(DenseArrayBase.constr(i64))
    ends = attr_def(DenseArrayBase.constr(i64))
    steps = attr_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        p = lambda n: cls.param(attributes, n)  # noqa: E731
        return [_tensor(shapes.slice_(x.get_shape(), p("starts"), p("ends"), p("steps")), x.get_element_type())]


@irdl_op_definition
class ConcatOp(GraphOp):
    """`%y = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>`."""

    name = "graph.concat"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    inputs = var_operand_def(TensorType)
    axis = attr_def(IntegerAttr)
    result = result_def(TensorType)

    @classmethod
    def group_operands(cls, values):
        return [values]

    @classmethod
    def infer(cls, operand_types, attributes):
        names = [f"#{i}" for i in range(len(operand_types))]
        if not operand_types:
            raise ShapeError("needs at least one input")
        element = _same_element(operand_types, names)
        shape = shapes.concat([t.get_shape() for t in operand_types], cls.param(attributes, "axis"))
        return [_tensor(shape, element)]


@irdl_op_definition
class PadOp(GraphOp):
    """Constant padding; pads lists all begins then all ends (ONNX order).

        %y = graph.pad %x {pads = array<i64: 0, 1, 0, 1>, value = 0.0 : f64} : (tensor<2x3xf32>) -> tensor<2x5xf32>
    """

    name = "graph.pad"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    DEFAULTS: ClassVar[Mapping[str, object]] = {"value": 0.0}
    x = operand_def(TensorType)
    pads = attr_def(DenseArrayBase.constr(i64))
    value = opt_attr_def(FloatAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        (x,) = operand_types
        return [_tensor(shapes.pad(x.get_shape(), cls.param(attributes, "pads")), x.get_element_type())]


@irdl_op_definition
class GatherOp(GraphOp):
    """ONNX Gather: take slices of `data` along `axis` at `indices`.

        %y = graph.gather %data, %idx {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>

    An index i in [-size, 0) counts from the end (i + size). Indices from a graph.constant
    must lie in [-size, size) (checked by the verifier); an index computed at run time is
    first wrapped if negative, then clamped into [0, size), on every backend and in the
    interpreter: with size 10, 12 takes 9, -3 takes 7 and -12 takes 0.
    """

    name = "graph.gather"
    CATEGORY: ClassVar[Category] = Category.INJECTIVE
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = attr_def(IntegerAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        data, indices = operand_types
        index_type = indices.get_element_type()
        if not (isinstance(index_type, IntegerType) and index_type.width.data in (32, 64)):
            raise ShapeError(f"operand 'indices' {indices} must have element type i32 or i64")
        shape = shapes.gather(data.get_shape(), indices.get_shape(), cls.param(attributes, "axis"))
        return [_tensor(shape, data.get_element_type())]

    def verify_(self) -> None:
        super().verify_()
        if not isinstance(constant := self.indices.owner, ConstantOp):
            return
        axis = self.get("axis")
        size = self.data.type.get_shape()[axis]
        values = constant.value.get_values()
        if values and not (-size <= min(values) and max(values) < size):
            wrong = next(v for v in values if not -size <= v < size)
            raise VerifyException(f"{self.name}: constant index {wrong} is out of range [{-size}, {size}) for axis {axis}")


# ----------------------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------------------


@irdl_op_definition
class ReduceSumOp(ReductionOp):
    """`%y = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>`."""

    name = "graph.reduce_sum"
    IDENTITY: ClassVar[Identity] = Identity.ZERO


@irdl_op_definition
class ReduceMeanOp(ReductionOp):
    """`%y = graph.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>`."""

    name = "graph.reduce_mean"
    IDENTITY: ClassVar[Identity] = Identity.ZERO
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class ReduceMaxOp(ReductionOp):
    """`%y = graph.reduce_max %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>`; NaN propagates."""

    name = "graph.reduce_max"
    IDENTITY: ClassVar[Identity] = Identity.LOWEST


@irdl_op_definition
class ReduceMinOp(ReductionOp):
    """`%y = graph.reduce_min %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>`; NaN propagates."""

    name = "graph.reduce_min"
    IDENTITY: ClassVar[Identity] = Identity.HIGHEST


@irdl_op_definition
class SoftmaxOp(AxisNormalizationOp):
    """`%y = graph.softmax %x {axis = -1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>`."""

    name = "graph.softmax"


@irdl_op_definition
class LogSoftmaxOp(AxisNormalizationOp):
    """`%y = graph.log_softmax %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>`."""

    name = "graph.log_softmax"


@irdl_op_definition
class LayerNormOp(GraphOp):
    """Normalize over axes [axis, rank); scale and bias have the normalized shape.

        %y = graph.layer_norm %x, %scale, %bias {axis = -1 : i64, epsilon = 1.0e-05 : f64}
             : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    """

    name = "graph.layer_norm"
    CATEGORY: ClassVar[Category] = Category.REDUCTION
    FLOAT_ONLY: ClassVar[bool] = True
    DEFAULTS: ClassVar[Mapping[str, object]] = {"axis": -1, "epsilon": 1e-5}
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    axis = opt_attr_def(IntegerAttr)
    epsilon = opt_attr_def(FloatAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        names = ("x", "scale", "bias")
        for t, n in zip(operand_types, names):
            _check_element(cls, t, n)
        _same_element(operand_types, names)
        x = operand_types[0]
        axis = shapes.normalize_axis(cls.param(attributes, "axis"), len(x.get_shape()))
        normalized = x.get_shape()[axis:]
        for t, n in zip(operand_types[1:], names[1:]):
            if t.get_shape() != normalized:
                raise ShapeError(f"operand '{n}' {t} must have the normalized shape {shapes.fmt(normalized)}")
        return [x]


# ----------------------------------------------------------------------------------------
# Anchors: contractions and windows
# ----------------------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(GraphOp):
    """Batched matrix product; batch dims broadcast.

        %c = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    """

    name = "graph.matmul"
    CATEGORY: ClassVar[Category] = Category.ANCHOR
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        a, b = operand_types
        _check_element(cls, a, "a")
        _check_element(cls, b, "b")
        element = _same_element([a, b], ["a", "b"])
        return [_tensor(shapes.matmul(a.get_shape(), b.get_shape()), element)]


@irdl_op_definition
class Conv2dOp(GraphOp):
    """2-D convolution (cross-correlation) in NCHW with OIHW weights; no bias (add it after).

        %y = graph.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 2, 2, 2, 2>}
             : (tensor<1x1x28x28xf32>, tensor<8x1x5x5xf32>) -> tensor<1x8x28x28xf32>
    """

    name = "graph.conv2d"
    CATEGORY: ClassVar[Category] = Category.ANCHOR
    FLOAT_ONLY: ClassVar[bool] = True
    DEFAULTS: ClassVar[Mapping[str, object]] = {"strides": (1, 1), "dilations": (1, 1), "padding": (0, 0, 0, 0), "groups": 1}
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    strides = opt_attr_def(DenseArrayBase.constr(i64))
    dilations = opt_attr_def(DenseArrayBase.constr(i64))
    padding = opt_attr_def(DenseArrayBase.constr(i64))
    groups = opt_attr_def(IntegerAttr)
    result = result_def(TensorType)

    @classmethod
    def infer(cls, operand_types, attributes):
        x, w = operand_types
        _check_element(cls, x, "x")
        _check_element(cls, w, "w")
        element = _same_element([x, w], ["x", "w"])
        p = lambda n: cls.param(attributes, n)  # noqa: E731
        shape = shapes.conv2d(x.get_shape(), w.get_shape(), p("strides"), p("dilations"), p("padding"), p("groups"))
        return [_tensor(shape, element)]


@irdl_op_definition
class MaxPool2dOp(Pool2dOp):
    """`%y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x28x28xf32>) -> tensor<1x8x14x14xf32>`.

    Padded positions never win (they count as -inf).
    """

    name = "graph.max_pool2d"


@irdl_op_definition
class AvgPool2dOp(Pool2dOp):
    """`%y = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>} : (...) -> ...`.

    With count_include_pad = false (the default) padded positions are left out of the divisor.
    """

    name = "graph.avg_pool2d"
    DEFAULTS: ClassVar[Mapping[str, object]] = {**Pool2dOp.DEFAULTS, "count_include_pad": False}
    count_include_pad = opt_attr_def(BoolAttr)


# ----------------------------------------------------------------------------------------
# Groups
# ----------------------------------------------------------------------------------------

FUSED_MODES = ("compile", "fallback")


@irdl_op_definition
class FusedOp(IRDLOperation):
    """A group of ops, exactly equivalent to its body inlined; made by fusion, placed by partitioning.

        %r:2 = graph.fused(%a, %b) {name = "fused_add_relu_0", mode = "compile"}
               : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
        ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
          %s = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
          %t = graph.relu %s : tensor<4xf32>
          graph.yield %s, %t : tensor<4xf32>, tensor<4xf32>
        }
    """

    name = "graph.fused"
    CATEGORY: ClassVar[Category] = Category.OPAQUE

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    group_name = attr_def(StringAttr, attr_name="name")
    mode = opt_attr_def(StringAttr)
    backend = opt_attr_def(StringAttr)
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove())

    assembly_format = "`(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body,
        name: str,
        mode: str = "compile",
        backend: str | None = None,
    ):
        attributes: dict[str, Attribute] = {"name": StringAttr(name), "mode": StringAttr(mode)}
        if backend is not None:
            attributes["backend"] = StringAttr(backend)
        super().__init__(operands=[inputs], result_types=[result_types], attributes=attributes, regions=[body])

    @property
    def mode_name(self) -> str:
        return self.mode.data if self.mode is not None else "compile"

    def verify_(self) -> None:
        block = self.body.block
        arg_types = [a.type for a in block.args]
        input_types = [v.type for v in self.inputs]
        if arg_types != input_types:
            raise VerifyException(
                f"graph.fused '{self.group_name.data}': block arguments ({_types(arg_types)}) "
                f"must match the inputs ({_types(input_types)})"
            )
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"graph.fused '{self.group_name.data}': body must end with graph.yield")
        yielded = [v.type for v in terminator.values]
        results = [r.type for r in self.outputs]
        if yielded != results:
            raise VerifyException(
                f"graph.fused '{self.group_name.data}': yields ({_types(yielded)}) but returns ({_types(results)})"
            )
        if not results:
            raise VerifyException(f"graph.fused '{self.group_name.data}': must return at least one value")
        if self.mode_name not in FUSED_MODES:
            raise VerifyException(f"graph.fused '{self.group_name.data}': mode must be \"compile\" or \"fallback\"")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of graph.fused: the group's results.

        graph.yield %a, %b : tensor<4xf32>, tensor<4xf32>
    """

    name = "graph.yield"
    values = var_operand_def(TensorType)

    traits = traits_def(IsTerminator(), HasParent(FusedOp), Pure())

    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


def category_of(op: Operation) -> Category:
    """The fusion category of any op; ops outside the graph dialect are opaque."""
    return getattr(type(op), "CATEGORY", Category.OPAQUE)


def computed_ops(op: Operation) -> list[Operation]:
    """The ops that `op` computes, in order: a graph.fused's body without its constants and
    yield, or `op` itself (none for a constant)."""
    ops = op.body.block.ops if isinstance(op, FusedOp) else [op]
    return [o for o in ops if not isinstance(o, (ConstantOp, YieldOp))]


GRAPH_OPS: tuple[type[IRDLOperation], ...] = (
    ConstantOp,
    NegOp, AbsOp, ReluOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, SigmoidOp, ErfOp,
    SinOp, CosOp, FloorOp, CeilOp, GeluOp, LeakyReluOp, ClipOp, CastOp,
    AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, CmpOp, SelectOp, BatchNormOp,
    ReshapeOp, BroadcastToOp, TransposeOp, SliceOp, ConcatOp, PadOp, GatherOp,
    ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, SoftmaxOp, LogSoftmaxOp, LayerNormOp,
    MatmulOp, Conv2dOp, MaxPool2dOp, AvgPool2dOp,
    FusedOp, YieldOp,
)  # fmt: skip

Graph = Dialect("graph", list(GRAPH_OPS), [])
