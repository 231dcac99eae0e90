"""GraphBuilder: write graph-dialect functions from Python with inferred result types.

    b = GraphBuilder()
    x = b.input("x", (4, 8))
    w = b.constant(np.ones((8, 16), np.float32))
    y = b.relu(b.matmul(x, w))
    module = b.finish(y)            # builtin.module { func.func @main(...) {...} }

Every graph op is a method named after it (`b.add`, `b.reduce_sum(x, axes=[1])`,
`b.concat([a, b], axis=0)`); attributes are Python values. Ops whose result shape is not
implied by their operands take it explicitly: `b.reshape(x, shape)`,
`b.broadcast_to(x, shape)`, `b.cast(x, "i32")`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region, SSAValue

from graphopt.dialects import graph
from graphopt.dialects.attributes import (
    attribute_of,
    dense_from_numpy,
    element_type_of,
    numpy_dtype,
    tensor_type,
)

Value = SSAValue


class GraphBuilder:
    """Appends graph ops to one function; `finish` returns the module holding it."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.block = Block()

    def input(self, name: str, shape: Sequence[int], dtype: str | np.dtype = "f32") -> Value:
        """A new function argument."""
        arg = self.block.insert_arg(tensor_type(shape, dtype), len(self.block.args))
        arg.name_hint = name
        return arg

    def op(self, op_class: type[graph.GraphOp], *operands: Value | Sequence[Value], **attributes) -> Value:
        """Append `op_class` with inferred result type; list operands are spliced (concat)."""
        values = [v for o in operands for v in (o if isinstance(o, (list, tuple)) else [o])]
        attrs = {k: attribute_of(k, v) for k, v in attributes.items() if v is not None}
        return self._append(op_class(values, attrs))

    def constant(self, value, dtype: str | np.dtype | None = None) -> Value:
        """A constant from an array or scalar (f32 unless dtype or the array says otherwise)."""
        array = np.asarray(value)
        if dtype is not None:
            array = array.astype(numpy_dtype(element_type_of(dtype)))
        elif array.dtype == np.float64 and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)
        return self._append(graph.ConstantOp(dense_from_numpy(array)))

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        return self._retyped(graph.ReshapeOp, x, shape, x.type.get_element_type())

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        return self._retyped(graph.BroadcastToOp, x, shape, x.type.get_element_type())

    def cast(self, x: Value, dtype: str | np.dtype) -> Value:
        return self._retyped(graph.CastOp, x, x.type.get_shape(), element_type_of(dtype))

    def finish(self, *results: Value) -> ModuleOp:
        """Return `results` from the function and wrap it in a verified module."""
        module = ModuleOp([self.function(*results)])
        module.verify()
        return module

    def function(self, *results: Value) -> FuncOp:
        """Return `results` and give back the func.func (for modules of several functions)."""
        self.block.add_op(ReturnOp(*results))
        arg_types = [a.type for a in self.block.args]
        func = FuncOp(self.name, (arg_types, [r.type for r in results]), Region(self.block))
        self.block = Block()
        return func

    def _retyped(self, op_class, x: Value, shape, element_type) -> Value:
        return self._append(op_class([x], {}, [TensorType(element_type, list(shape))]))

    def _append(self, op) -> Value:
        op.verify()
        self.block.add_op(op)
        return op.results[0]


def _op_method(op_class: type[graph.GraphOp]):
    def method(self: GraphBuilder, *operands, **attributes) -> Value:
        return self.op(op_class, *operands, **attributes)

    method.__name__ = op_class.name.removeprefix("graph.")
    method.__doc__ = op_class.__doc__
    return method


for _op_class in graph.GRAPH_OPS:
    _method_name = _op_class.name.removeprefix("graph.")
    if issubclass(_op_class, graph.GraphOp) and not hasattr(GraphBuilder, _method_name):
        setattr(GraphBuilder, _method_name, _op_method(_op_class))
