"""The reference interpreter: the executable definition of the graph dialect's semantics.

    outs = interpret(module, x, w)          # tuple of NumPy arrays, one per result of @main

A plain evaluator: `OPS` maps each op name to a small NumPy function of the op and its
operand arrays. xDSL's interpreter framework is not used: one function per op in one table
is simpler to read and check against the contract, and evaluating straight on NumPy arrays
(no per-op registration classes, no interpreter frames) is faster.

Numerics follow NumPy (ONNX where NumPy has no such op) and stay in the tensor's own
element type: every op result is converted to its result type's dtype. NaN and inf flow
through silently, as in NumPy (floating-point warnings are suppressed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import SymbolTable

from graphopt.dialects.attributes import numpy_dtype
from graphopt.dialects.graph import FusedOp, YieldOp
from graphopt.errors import GraphoptError

OpFunction = Callable[..., np.ndarray]


def interpret(module: ModuleOp, *arrays, entry: str = "main") -> tuple[np.ndarray, ...]:
    """Run function `entry` of `module` on `arrays`; one array per result.

    Arguments are checked against the function's tensor types: the shape must match and
    the dtype must convert with same-kind casting (f64 to f32 and int to float do, float
    to int does not). Raises GraphoptError for bad arguments, unknown ops and functions.
    """
    func = _lookup_function(module, entry)
    args = check_arguments(func, arrays)
    with np.errstate(all="ignore"):
        results = _run_block(module, func.body.block, args)
    return tuple(np.array(value) for value in results)


def check_arguments(func: FuncOp, arrays: Sequence[object]) -> list[np.ndarray]:
    """The arrays converted to `func`'s argument types, or a GraphoptError naming the argument."""
    params = func.body.block.args
    if len(arrays) != len(params):
        types = ", ".join(str(p.type) for p in params)
        raise GraphoptError(f"@{func.sym_name.data} expects {len(params)} arguments ({types}), got {len(arrays)}")
    converted = []
    for i, (param, value) in enumerate(zip(params, arrays)):
        array = np.asarray(value)
        dtype = numpy_dtype(param.type.get_element_type())
        shape = tuple(param.type.get_shape())
        if array.shape != shape or not np.can_cast(array.dtype, dtype, casting="same_kind"):
            name = f" ('{param.name_hint}')" if param.name_hint else ""
            raise GraphoptError(
                f"@{func.sym_name.data} argument #{i}{name}: expected {param.type}, "
                f"got an array of shape {list(array.shape)} and dtype {array.dtype}"
            )
        converted.append(array.astype(dtype, copy=False))
    return converted


def _lookup_function(module: ModuleOp, name: str) -> FuncOp:
    func = SymbolTable.lookup_symbol(module, name)
    if not isinstance(func, FuncOp):
        raise GraphoptError(f"no function @{name} in the module")
    if not func.body.blocks:
        raise GraphoptError(f"function @{name} has no body (a declaration cannot be interpreted)")
    return func


def _run_block(module: ModuleOp, block: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate `block` on `args`; the operands of its terminator (func.return, graph.yield)."""
    env: dict[SSAValue, np.ndarray] = dict(zip(block.args, args))
    for op in block.ops:
        operands = [env[o] for o in op.operands]
        if isinstance(op, (ReturnOp, YieldOp)):
            return operands
        env.update(zip(op.results, evaluate(module, op, operands)))
    raise GraphoptError(f"block of {block.parent_op().name} has no terminator")


def evaluate(module: ModuleOp, op: Operation, operands: list[np.ndarray]) -> list[np.ndarray]:
    """The results of one op (a graph op, graph.fused or func.call of `module`) on NumPy operands."""
    if isinstance(op, CallOp):
        callee = _lookup_function(module, op.callee.string_value())
        results = _run_block(module, callee.body.block, operands)
    elif isinstance(op, FusedOp):
        results = _run_block(module, op.body.block, operands)
    elif op.name in OPS:
        results = [OPS[op.name](op, *operands)]
    else:
        raise GraphoptError(f"the reference interpreter does not know op '{op.name}'")
    return [_as_type(value, r.type) for value, r in zip(results, op.results)]


def _as_type(value, t: TensorType) -> np.ndarray:
    return np.asarray(value).astype(numpy_dtype(t.get_element_type()), copy=False)


# ----------------------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """The Gauss error function: math.erf in double precision, rounded to x's type."""
    return _erf(x).astype(x.dtype)


def gelu(op, x):
    if op.get("approximate") == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def clip_bounds(op, dtype: np.dtype) -> tuple[float | int | None, float | int | None]:
    """graph.clip's (min, max) for tensors of `dtype`: integer tensors clamp to the integers in
    [min, max] (that the type holds); a missing bound is None."""
    low, high = op.get("min"), op.get("max")
    if dtype.kind == "i":
        limits = np.iinfo(dtype)
        low = None if low is None else math.ceil(max(low, limits.min))
        high = None if high is None else math.floor(min(high, limits.max))
    return low, high


def clip(op, x):
    """Clamp to [min, max] (NaN stays NaN)."""
    return np.clip(x, *clip_bounds(op, x.dtype))


def batch_norm(op, x, scale, bias, mean, var):
    channel = (-1,) + (1,) * (x.ndim - 2)
    scale, bias, mean, var = (p.reshape(channel) for p in (scale, bias, mean, var))
    return (x - mean) / np.sqrt(var + op.get("epsilon")) * scale + bias


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "graph.neg": np.negative,
    "graph.abs": np.abs,
    "graph.exp": np.exp,
    "graph.log": np.log,
    "graph.sqrt": np.sqrt,
    "graph.rsqrt": lambda x: 1 / np.sqrt(x),
    "graph.reciprocal": np.reciprocal,
    "graph.tanh": np.tanh,
    "graph.sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "graph.relu": lambda x: np.maximum(x, 0),
    "graph.erf": erf,
    "graph.sin": np.sin,
    "graph.cos": np.cos,
    "graph.floor": np.floor,
    "graph.ceil": np.ceil,
}

BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "graph.add": np.add,
    "graph.sub": np.subtract,
    "graph.mul": np.multiply,
    "graph.div": np.divide,
    "graph.pow": np.power,
    "graph.max": np.maximum,
    "graph.min": np.minimum,
}

CMP_PREDICATES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}

# ----------------------------------------------------------------------------------------
# Data movement
# ----------------------------------------------------------------------------------------


def slice_(op, x):
    return x[tuple(slice(*bounds) for bounds in zip(op.get("starts"), op.get("ends"), op.get("steps")))]


def pad(op, x):
    padded = np.full(op.result.type.get_shape(), op.get("value"), x.dtype)
    padded[tuple(slice(begin, begin + size) for begin, size in zip(op.get("pads"), x.shape))] = x
    return padded


def gather(op, data, indices):
    """Negative indices count from the end, then out-of-range ones clamp (see graph.GatherOp)."""
    axis = op.get("axis")
    size = data.shape[axis]
    wrapped = np.where(indices < 0, indices + size, indices)
    return np.take(data, np.clip(wrapped, 0, size - 1), axis=axis)


# ----------------------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------------------


REDUCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "graph.reduce_sum": lambda x, axis, keepdims, identity: np.sum(x, axis, x.dtype, keepdims=keepdims),
    "graph.reduce_mean": lambda x, axis, keepdims, identity: (
        np.sum(x, axis, x.dtype, keepdims=keepdims) / math.prod(x.shape[a] for a in axis)
    ),
    "graph.reduce_max": lambda x, axis, keepdims, identity: np.max(x, axis, keepdims=keepdims, initial=identity),
    "graph.reduce_min": lambda x, axis, keepdims, identity: np.min(x, axis, keepdims=keepdims, initial=identity),
}
"""Over an empty set: sum 0, mean NaN, max the lowest value, min the highest (ONNX): the op's
`IDENTITY`."""


def _reduction(reduce: Callable[..., np.ndarray]) -> OpFunction:
    def run(op, x):
        identity = op.IDENTITY.of(op.x.type.get_element_type())
        return reduce(x, tuple(op.get("axes")), op.get("keepdims"), identity)

    return run


def softmax(op, x):
    shifted = x - np.max(x, axis=op.get("axis"), keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=op.get("axis"), keepdims=True)


def log_softmax(op, x):
    shifted = x - np.max(x, axis=op.get("axis"), keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=op.get("axis"), keepdims=True))


def layer_norm(op, x, scale, bias):
    axes = tuple(range(op.get("axis") % x.ndim, x.ndim))
    centered = x - np.mean(x, axis=axes, keepdims=True)
    variance = np.mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(variance + op.get("epsilon")) * scale + bias


# ----------------------------------------------------------------------------------------
# Anchors: contractions and windows
# ----------------------------------------------------------------------------------------


def _windows(x, kernel, strides, dilations, padding, fill) -> np.ndarray:
    """Windows of NCHW `x` padded with `fill`, as [N, C, OH, OW, KH, KW]."""
    top, left, bottom, right = padding
    padded = np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)], constant_values=fill)
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilations))
    windows = sliding_window_view(padded, span, axis=(2, 3))
    return windows[:, :, :: strides[0], :: strides[1], :: dilations[0], :: dilations[1]]


def conv2d(op, x, w):
    groups = op.get("groups")
    windows = _windows(x, w.shape[2:], op.get("strides"), op.get("dilations"), op.get("padding"), 0)
    n, c, oh, ow, kh, kw = windows.shape
    windows = windows.reshape(n, groups, c // groups, oh, ow, kh, kw)
    w = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    out = np.einsum("ngchwij,gocij->ngohw", windows, w, optimize=True)
    return out.reshape(n, -1, oh, ow)


def max_pool2d(op, x):
    windows = _windows(x, op.get("kernel"), op.get("strides"), (1, 1), op.get("padding"), -np.inf)
    return np.max(windows, axis=(-2, -1))


def avg_pool2d(op, x):
    kernel, strides, padding = op.get("kernel"), op.get("strides"), op.get("padding")
    total = np.sum(_windows(x, kernel, strides, (1, 1), padding, 0), axis=(-2, -1))
    if op.get("count_include_pad"):
        return total / (kernel[0] * kernel[1])
    ones = np.ones((1, 1) + x.shape[2:], x.dtype)
    return total / np.sum(_windows(ones, kernel, strides, (1, 1), padding, 0), axis=(-2, -1))


def _pointwise(function: Callable[..., np.ndarray]) -> OpFunction:
    return lambda op, *operands: function(*operands)


OPS: dict[str, OpFunction] = {
    "graph.constant": lambda op: op.get("value"),
    **{name: _pointwise(f) for name, f in UNARY.items()},
    **{name: _pointwise(f) for name, f in BINARY.items()},
    "graph.gelu": gelu,
    "graph.leaky_relu": lambda op, x: np.where(x >= 0, x, op.get("alpha") * x),
    "graph.clip": clip,
    "graph.cast": lambda op, x: x,  # evaluate converts every result to its type
    "graph.cmp": lambda op, a, b: CMP_PREDICATES[op.get("predicate")](a, b),
    "graph.select": lambda op, cond, a, b: np.where(cond, a, b),
    "graph.batch_norm": batch_norm,
    "graph.reshape": lambda op, x: x.reshape(op.result.type.get_shape()),
    "graph.broadcast_to": lambda op, x: np.broadcast_to(x, op.result.type.get_shape()),
    "graph.transpose": lambda op, x: np.transpose(x, op.get("perm")),
    "graph.slice": slice_,
    "graph.concat": lambda op, *xs: np.concatenate(xs, axis=op.get("axis")),
    "graph.pad": pad,
    "graph.gather": gather,
    **{name: _reduction(f) for name, f in REDUCTIONS.items()},
    "graph.softmax": softmax,
    "graph.log_softmax": log_softmax,
    "graph.layer_norm": layer_norm,
    "graph.matmul": lambda op, a, b: np.matmul(a, b),
    "graph.conv2d": conv2d,
    "graph.max_pool2d": max_pool2d,
    "graph.avg_pool2d": avg_pool2d,
}
"""Op name -> NumPy function of the op and its operand arrays (one result)."""
