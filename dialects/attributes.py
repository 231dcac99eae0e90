"""Element types and attribute values of the graph dialect, as Python and NumPy see them."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute

FLOAT_TYPES = (Float16Type, Float32Type, Float64Type)

ELEMENT_TYPES: dict[str, Attribute] = {
    "f16": Float16Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "i1": IntegerType(1),
    "i32": IntegerType(32),
    "i64": IntegerType(64),
}
NUMPY_DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}

BACKEND_PIN = "graph.backend"
"""Discardable attribute that pins an op to a backend: `graph.relu %x {graph.backend = "cpu"}` (a string)."""

FLOAT_ATTRIBUTE_NAMES = frozenset({"alpha", "min", "max", "epsilon", "value"})
"""Attributes that hold an f64 (a Python int given for them is converted)."""


def is_float(element_type: Attribute) -> bool:
    return isinstance(element_type, FLOAT_TYPES)


def is_bool(element_type: Attribute) -> bool:
    return isinstance(element_type, IntegerType) and element_type.width.data == 1


def is_supported_element(element_type: Attribute) -> bool:
    return element_type in ELEMENT_TYPES.values()


def element_type_name(element_type: Attribute) -> str:
    for name, t in ELEMENT_TYPES.items():
        if t == element_type:
            return name
    raise ValueError(f"unsupported element type {element_type}")


def numpy_dtype(element_type: Attribute) -> np.dtype:
    return NUMPY_DTYPES[element_type_name(element_type)]


def element_type_of(dtype: str | np.dtype | type) -> Attribute:
    """The graph element type for a name ("f32") or a NumPy dtype."""
    if isinstance(dtype, str) and dtype in ELEMENT_TYPES:
        return ELEMENT_TYPES[dtype]
    np_dtype = np.dtype(dtype)
    for name, candidate in NUMPY_DTYPES.items():
        if candidate == np_dtype:
            return ELEMENT_TYPES[name]
    raise ValueError(f"unsupported dtype {dtype}; graph tensors hold {', '.join(ELEMENT_TYPES)}")


def tensor_type(shape, dtype: str | np.dtype | type = "f32") -> TensorType:
    return TensorType(element_type_of(dtype), list(shape))


def dense_from_numpy(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    array = np.asarray(array)
    t = tensor_type(array.shape, array.dtype)
    if array.dtype == np.bool_:
        return DenseIntOrFPElementsAttr.from_list(t, [int(v) for v in array.ravel()])
    little_endian = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return DenseIntOrFPElementsAttr(t, BytesAttr(np.ascontiguousarray(little_endian).tobytes()))


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    t = attr.get_type()
    dtype = numpy_dtype(t.get_element_type())
    if dtype == np.bool_:
        flat = np.asarray(attr.get_values(), dtype=np.bool_)
    else:
        flat = np.frombuffer(attr.data.data, dtype=dtype.newbyteorder("<")).astype(dtype)
    return flat.reshape(t.get_shape()).copy()


def is_splat(attr: DenseIntOrFPElementsAttr) -> bool:
    """Do all elements have the same bits (so one element or none is a splat)? Bytes are compared:
    0.0 and -0.0 differ and equal NaNs match, and no Python list of the values is built (xDSL's
    `is_splat` builds one, fails on no elements, and equates 0.0 with -0.0)."""
    flat = dense_to_numpy(attr).reshape(-1)
    return flat.size <= 1 or bool((flat.view(np.uint8).reshape(flat.size, -1) == flat[:1].view(np.uint8)).all())


def attribute_value(attr: Attribute) -> object:
    """The Python value of a graph attribute: tuple, int, bool, float, str or ndarray."""
    if isinstance(attr, DenseArrayBase):
        return tuple(attr.get_values())
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if is_bool(attr.type) else value
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return dense_to_numpy(attr)
    return attr


def attribute_of(name: str, value: object) -> Attribute:
    """The graph attribute for a Python value (the inverse of `attribute_value`)."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return IntegerAttr(int(value), IntegerType(1))
    if name in FLOAT_ATTRIBUTE_NAMES and isinstance(value, (int, float, np.number)):
        return FloatAttr(float(value), f64)
    if isinstance(value, (int, np.integer)):
        return IntegerAttr(int(value), i64)
    if isinstance(value, (float, np.floating)):
        return FloatAttr(float(value), f64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, (list, tuple)):
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if isinstance(value, np.ndarray):
        return dense_from_numpy(value)
    raise TypeError(f"attribute '{name}': cannot represent {value!r}")
