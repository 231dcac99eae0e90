"""pack-weights: pack the constant b of each matmul that runs as the packed GEMM, for its kernel.

The lowering gives such a kernel an argument for b's packed panels that names b
(`graph.pack_panels`); this pass packs b (`packed_gemm.pack_panels`) into the argument's
constant value (`graph.constant`), as the runtime passes it. Packing happens here, once per
weight while the weight lives, and not when a backend lowers a group only to see whether it
can (a 768x3072 b takes about 10 ms to pack). The weights of a conv run as `conv_lanes` or
`conv_winograd` are packed by the lowering itself (`packed_conv_weights`: a transpose, about 2 ms
for 256x256x3x3, or the weight transform), once per weight too.

    func.func @matmul_0(%a: memref<2x3xf32>, %p: memref<240xf32> {graph.pack_panels = dense<...> : tensor<3x70xf32>}, ...)

becomes

    func.func @matmul_0(%a: memref<2x3xf32>, %p: memref<240xf32> {graph.constant = dense<...> : tensor<240xf32>}, ...)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseIntOrFPElementsAttr, DictionaryAttr, ModuleOp
from xdsl.passes import ModulePass

from graphopt.dialects.attributes import dense_from_numpy, dense_to_numpy
from graphopt.lowering import conv_lanes, conv_winograd, packed_gemm
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR, PACK_ARG_ATTR

_PACKED: weakref.WeakKeyDictionary[DenseIntOrFPElementsAttr, dict[Callable, DenseIntOrFPElementsAttr]] = (
    weakref.WeakKeyDictionary()
)


def _packed_once(weight: DenseIntOrFPElementsAttr, pack: Callable[[np.ndarray], np.ndarray]) -> DenseIntOrFPElementsAttr:
    """`pack` of a constant weight, packed once while the weight lives."""
    packings = _PACKED.setdefault(weight, {})
    if pack not in packings:
        packings[pack] = dense_from_numpy(pack(dense_to_numpy(weight)))
    return packings[pack]


def packed_panels(b: DenseIntOrFPElementsAttr) -> DenseIntOrFPElementsAttr:
    """`packed_gemm.pack_panels` of constant b."""
    return _packed_once(b, packed_gemm.pack_panels)


PACKED_CONV_UKERNELS = {"lanes": conv_lanes, "winograd": conv_winograd}
"""The conv ukernels (`CpuSchedule.conv_ukernel`) that take w packed at compile time, by their
module's `pack` and `packed_shape`."""
READS_UNPACKED_W = frozenset({"winograd"})
"""Those that read w itself too (`conv_winograd`'s direct conv, for a non-finite x)."""


def packed_conv_weights(w: DenseIntOrFPElementsAttr, ukernel: str) -> DenseIntOrFPElementsAttr:
    """A conv's constant w packed for `ukernel` (`PACKED_CONV_UKERNELS`)."""
    return _packed_once(w, PACKED_CONV_UKERNELS[ukernel].pack)


_FINITE: weakref.WeakKeyDictionary[DenseIntOrFPElementsAttr, bool] = weakref.WeakKeyDictionary()


def all_finite(weight: DenseIntOrFPElementsAttr) -> bool:
    """Whether every value of a constant weight is finite (checked once while the weight lives)."""
    if weight not in _FINITE:
        _FINITE[weight] = bool(np.isfinite(dense_to_numpy(weight)).all())
    return _FINITE[weight]


@dataclass(frozen=True)
class PackWeightsPass(ModulePass):
    """Turn each `graph.pack_panels = b` argument attribute into `graph.constant = <b packed>`."""

    name = "pack-weights"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.ops:
            if isinstance(kernel, func.FuncOp) and kernel.arg_attrs is not None:
                if any(PACK_ARG_ATTR in attrs.data for attrs in kernel.arg_attrs.data):
                    kernel.arg_attrs = ArrayAttr([_packed(attrs) for attrs in kernel.arg_attrs.data])


def _packed(attrs: DictionaryAttr) -> DictionaryAttr:
    if PACK_ARG_ATTR not in attrs.data:
        return attrs
    others = {name: value for name, value in attrs.data.items() if name != PACK_ARG_ATTR}
    return DictionaryAttr({**others, CONSTANT_ARG_ATTR: packed_panels(attrs.data[PACK_ARG_ATTR])})
