"""The row-sum ukernel: the f32 sum over the last two dims of x (a global average pool), for
planes shorter than the loop nest vectorizes.

The cpu lowering calls a ukernel generated for the shapes; out holds one sum per plane (x's
leading dims, with or without unit dims for the reduced ones):

    func.call @graphopt_srowsum_1x2048x7x7_1x2048x1x1(%x, %out)
        : (memref<1x2048x7x7xf32>, memref<1x2048x1x1xf32>) -> ()

Alone, the loop nest reduces a plane of fewer than 64 floats (LLVM's vector loop: 4 x 16
lanes) in scalar code: 49 dependent adds per 7x7 plane. The ukernel sums each plane in
vectors of 16 (the last under a mask), then the vector's lanes. A global average pool (a
reduce_mean, or an avg_pool2d whose window is the plane) then divides out in place. Measured
on 2026-11-25 (one thread, medians): ResNet-50's pool over 1x2048x7x7 ran 29 -> 10 us
(ONNX Runtime: 16 us); on 14x14 planes (196 floats) the ukernel and the loop nest ran alike
(10.5 us over 1x480x14x14; ONNX Runtime 14.5 us), so longer planes keep the loop nest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering.llvm_text import VECTOR, VECTOR_TYPE, LLVMText, load

PREFIX = "graphopt_srowsum"
LONGEST_PLANE = 63
"""The longest plane the ukernel sums: longer ones fill the loop nest's vector loop."""


def applies(x_type: Attribute, reduced: set[int]) -> bool:
    """Whether a sum of an x of this type over the dims `reduced` runs as the ukernel: f32, over
    the last two dims of at least three, of at most LONGEST_PLANE elements."""
    shape = x_type.get_shape()
    return (
        x_type.get_element_type() == f32
        and len(shape) >= 3
        and reduced == {len(shape) - 2, len(shape) - 1}
        and shape[-2] * shape[-1] <= LONGEST_PLANE
    )


def name(types: Sequence[MemRefType]) -> str:
    """The ukernel's name for a call on memrefs (x, out)."""
    return f"{PREFIX}_" + "_".join("x".join(map(str, t.get_shape())) for t in types)


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel called on memrefs of other sizes (a chunk of its images or channels)."""
    return name(types)


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr x, ptr out)` for these memref types."""
    x, out = types[0].get_shape(), types[-1].get_shape()
    rows = math.prod(out)
    length = math.prod(x) // rows
    text = LLVMText()
    text.define(f"define void @{name_}(ptr noalias %x, ptr noalias %out) {{")

    def row(i: str) -> None:
        start = text.value(f"mul i64 {i}, {length}")
        vectors = []
        for first in range(0, length, VECTOR):
            vector = text.fresh()
            pointer = text.pointer("%x", text.value(f"add i64 {start}, {first}"))
            text.emit(load(vector, pointer, min(VECTOR, length - first)))
            vectors.append(vector)
        while len(vectors) > 1:  # a tree of adds
            odd = vectors[len(vectors) // 2 * 2 :]
            vectors = [text.value(f"fadd reassoc {VECTOR_TYPE} {a}, {b}") for a, b in zip(vectors[::2], vectors[1::2])] + odd
        total = text.value(f"call reassoc float @llvm.vector.reduce.fadd.v16f32(float -0.0, {VECTOR_TYPE} {vectors[0]})")
        text.emit(f"  store float {total}, ptr {text.pointer('%out', i)}, align 4")

    text.loop(rows, row)
    text.end()
    return text.ir()
