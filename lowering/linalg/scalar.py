"""Scalar semantics of the elementwise graph ops: one builder per op, emitting arith/math ops
into a loop body (`SCALAR_BUILDERS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from graphopt.dialects.attributes import is_bool, is_float

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import LoopBody


def element_of(value: SSAValue) -> Attribute:
    t = value.type
    return t.get_element_type() if isinstance(t, (TensorType, MemRefType)) else t


def by_type(float_op: type[Operation], int_op: type[Operation] | None = None):
    """Builder of `float_op(*args)` on floats, `int_op(*args)` on integers."""

    def build(body: LoopBody, op, *args):
        return body.emit((float_op if is_float(args[0].type) else int_op)(*args))

    return build


def _math(op_class: type[Operation]):
    return lambda body, op, x: body.emit(op_class(x))


def _neg(body, op, x):
    if is_float(x.type):
        return body.emit(arith.NegfOp(x))
    return body.emit(arith.SubiOp(body.constant(0, x.type), x))


def _relu(body, op, x):
    return by_type(arith.MaximumfOp, arith.MaxSIOp)(body, op, x, body.constant(0, x.type))


def _reciprocal(body, x):
    return body.emit(arith.DivfOp(body.constant(1.0, x.type), x))


def _sigmoid(body, op, x):
    one = body.constant(1.0, x.type)
    return _reciprocal(body, body.emit(arith.AddfOp(one, body.emit(mathd.ExpOp(body.emit(arith.NegfOp(x)))))))


def _gelu(body, op, x):
    """0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3))."""
    c = lambda v: body.constant(v, x.type)
    mul = lambda a, b: body.emit(arith.MulfOp(a, b))
    if op.get("approximate") == "tanh":
        cube = mul(mul(x, x), x)
        inner = mul(c(math.sqrt(2 / math.pi)), body.emit(arith.AddfOp(x, mul(c(0.044715), cube))))
        gate = body.emit(mathd.TanhOp(inner))
    else:
        gate = body.emit(mathd.ErfOp(body.emit(arith.DivfOp(x, c(math.sqrt(2))))))
    return mul(mul(c(0.5), x), body.emit(arith.AddfOp(c(1.0), gate)))


def _leaky_relu(body, op, x):
    non_negative = body.emit(arith.CmpfOp(x, body.constant(0.0, x.type), "oge"))
    scaled = body.emit(arith.MulfOp(body.constant(op.get("alpha"), x.type), x))
    return body.emit(arith.SelectOp(non_negative, x, scaled))


def _clip(body, op, x):
    """Clamp to [min, max]; NaN stays NaN, integer tensors clamp to the integers in the range."""
    low, high = op.get("min"), op.get("max")
    if not is_float(x.type):
        limits = np.iinfo(f"int{x.type.width.data}")
        low = None if low is None else math.ceil(max(low, limits.min))
        high = None if high is None else math.floor(min(high, limits.max))
    if low is not None:
        x = by_type(arith.MaximumfOp, arith.MaxSIOp)(body, op, x, body.constant(low, x.type))
    if high is not None:
        x = by_type(arith.MinimumfOp, arith.MinSIOp)(body, op, x, body.constant(high, x.type))
    return x


def _cast(body, op, x):
    """NumPy astype: to i1 is `!= 0` (NaN is true), from i1 is unsigned."""
    source, target = x.type, op.result.type.get_element_type()
    if source == target:
        return x
    if is_bool(target):
        if is_float(source):
            return body.emit(arith.CmpfOp(x, body.constant(0.0, source), "une"))
        return body.emit(arith.CmpiOp(x, body.constant(0, source), "ne"))
    if is_float(source) and is_float(target):
        wider = target.bitwidth > source.bitwidth
        return body.emit((arith.ExtFOp if wider else arith.TruncFOp)(x, target))
    if is_float(source):
        return body.emit(arith.FPToSIOp(x, target))
    if is_float(target):
        return body.emit((arith.UIToFPOp if is_bool(source) else arith.SIToFPOp)(x, target))
    if target.width.data > source.width.data:
        return body.emit((arith.ExtUIOp if is_bool(source) else arith.ExtSIOp)(x, target))
    return body.emit(arith.TruncIOp(x, target))


FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""NumPy comparisons on floats: every predicate is false on NaN but `ne`, which is true."""
INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}


def _cmp(body, op, a, b):
    predicate = op.get("predicate")
    if is_float(a.type):
        return body.emit(arith.CmpfOp(a, b, FLOAT_PREDICATES[predicate]))
    return body.emit(arith.CmpiOp(a, b, INT_PREDICATES[predicate]))


def _batch_norm(body, op, x, scale, bias, mean, var):
    """(x - mean) / sqrt(var + epsilon) * scale + bias."""
    std = body.emit(mathd.SqrtOp(body.emit(arith.AddfOp(var, body.constant(op.get("epsilon"), x.type)))))
    normalized = body.emit(arith.DivfOp(body.emit(arith.SubfOp(x, mean)), std))
    return body.emit(arith.AddfOp(body.emit(arith.MulfOp(normalized, scale)), bias))


ScalarBuilder = Callable[..., SSAValue]

SCALAR_BUILDERS: dict[str, ScalarBuilder] = {
    "graph.neg": _neg,
    "graph.abs": by_type(mathd.AbsFOp, mathd.AbsIOp),
    "graph.relu": _relu,
    "graph.exp": _math(mathd.ExpOp),
    "graph.log": _math(mathd.LogOp),
    "graph.sqrt": _math(mathd.SqrtOp),
    "graph.rsqrt": _math(mathd.RsqrtOp),
    "graph.reciprocal": lambda body, op, x: _reciprocal(body, x),
    "graph.tanh": _math(mathd.TanhOp),
    "graph.sigmoid": _sigmoid,
    "graph.erf": _math(mathd.ErfOp),
    "graph.sin": _math(mathd.SinOp),
    "graph.cos": _math(mathd.CosOp),
    "graph.floor": _math(mathd.FloorOp),
    "graph.ceil": _math(mathd.CeilOp),
    "graph.gelu": _gelu,
    "graph.leaky_relu": _leaky_relu,
    "graph.clip": _clip,
    "graph.cast": _cast,
    "graph.add": by_type(arith.AddfOp, arith.AddiOp),
    "graph.sub": by_type(arith.SubfOp, arith.SubiOp),
    "graph.mul": by_type(arith.MulfOp, arith.MuliOp),
    "graph.div": by_type(arith.DivfOp),
    "graph.pow": by_type(mathd.PowFOp),
    "graph.max": by_type(arith.MaximumfOp, arith.MaxSIOp),
    "graph.min": by_type(arith.MinimumfOp, arith.MinSIOp),
    "graph.cmp": _cmp,
    "graph.select": lambda body, op, cond, a, b: body.emit(arith.SelectOp(cond, a, b)),
    "graph.batch_norm": _batch_norm,
}
"""Elementwise op name -> builder of its scalar code from its operands' scalars."""
