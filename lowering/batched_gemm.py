"""The batched packed GEMM: out[i] = a[i] @ b[i] for each batch matrix i, b packed at run time.

A matmul whose b is computed (attention's K transposed, or V) has no panels packed at compile
time: the kernel packs b's batch matrices into a temporary of panels (`packed_gemm.pack_panels`'
layout, one run of `packed_gemm.packed_size` floats per batch matrix), and calls this ukernel,
which runs the packed GEMM ukernel (`packed_gemm.py`) on each batch matrix:

    func.call @graphopt_sgemm_batched_4x128x64_4x128x128(%a, %panels, %out)
        : (memref<4x128x64xf32>, memref<4x8192xf32>, memref<4x128x128xf32>) -> ()

Its name holds a's shape and out's (the JIT generates it from them). Batch dims broadcast as in
NumPy: a batch dim of a of size 1 (or missing) is read at 0 for every batch matrix of out; the
panels have out's batch dims. A row chunk (`row_split.py`) calls the ukernel for its batch matrices.

a, or out, may be a strided view of its buffer (`transforms/strided_view.py`): attention's Q
[seq, heads * head_dim] read as heads [heads, seq, head_dim] (rows 256 floats apart, head h at
64 h), or P @ V written as heads into the merged [seq, heads * head_dim]. The name then holds
out's batch dims, m, k and n, and each view's strides (along out's batch dims, then rows; a
row's elements are contiguous):

    func.call @graphopt_sgemm_batched_s4x128x64x128_a128x256v64x256_o4x128x128(%q, %panels, %out)
        : (memref<128x256xf32>, memref<4x8192xf32>, memref<4x128x128xf32>) -> ()

(each operand: its buffer's shape, then for a view `v` and its strides). A row chunk passes a
view's buffer whole, from its first batch matrix (`strided_by_rows`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType

from graphopt.lowering import packed_gemm
from graphopt.lowering.llvm_text import LLVMText

PREFIX = "graphopt_sgemm_batched"


def name(types: Sequence[MemRefType]) -> str:
    """graphopt_sgemm_batched_<a's shape>_<out's shape>, for a call on memrefs (a, panels, out)."""
    a_type, _, out_type = types
    return f"{PREFIX}_{_joined(a_type.get_shape())}_{_joined(out_type.get_shape())}"


Operand = tuple[tuple[int, ...], tuple[int, ...] | None]
"""An operand of a view call: its buffer's shape, and its strides when it is a strided view
(along out's batch dims, then rows), else None."""


def view_name(sizes: Sequence[int], a: Operand, out: Operand) -> str:
    """graphopt_sgemm_batched_s<batch dims>x<m>x<k>x<n>_a<a>_o<out>, for a call on (a, panels,
    out) where a or out (or both) is a strided view: each its buffer's shape, then for a view
    `v` and its strides (the name fixes every operand's type)."""
    a_part, out_part = (_joined(shape) + ("" if strides is None else f"v{_joined(strides)}") for shape, strides in (a, out))
    return f"{PREFIX}_s{_joined(sizes)}_a{a_part}_o{out_part}"


def _parse_view_name(name: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None] | None:
    """(batch dims..., m, k, n), a's view strides, out's view strides (None: not a view) of a
    `view_name`; None for a `name`."""
    match = re.fullmatch(rf"{PREFIX}_s([\dx]+)_a([\dxv]+)_o([\dxv]+)", name)
    if match is None:
        return None
    sizes, *parts = match.groups()
    strides = (tuple(map(int, part.split("v")[1].split("x"))) if "v" in part else None for part in parts)
    return tuple(map(int, sizes.split("x"))), *strides


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel called on memrefs of other sizes (a row chunk's: its batch
    matrices, which its panels' type gives)."""
    parsed = _parse_view_name(name_)
    if parsed is None:
        return name(types)
    sizes, a_strides, out_strides = parsed
    return view_name(
        (*types[1].get_shape()[:-1], *sizes[-3:]), (types[0].get_shape(), a_strides), (types[2].get_shape(), out_strides)
    )


def strided_by_rows(name_: str) -> tuple[int | None, int | None]:
    """The floats between consecutive batch matrices along out's first batch dim in a's and
    out's buffers, for each that is a view (None for the others, which a row chunk slices)."""
    parsed = _parse_view_name(name_)
    if parsed is None:
        return None, None
    _, a_view, out_view = parsed
    return tuple(None if view is None else view[0] for view in (a_view, out_view))


def _joined(sizes: Sequence[int]) -> str:
    return "x".join(map(str, sizes))


def _dense_strides(shape: Sequence[int], batch: Sequence[int]) -> tuple[int, ...]:
    """The strides of a row-major buffer of `shape` along the batch dims `batch` (its own,
    broadcast as in NumPy: stride 0 along a dim of 1 or a missing one), then along rows."""
    strides = []
    for axis in range(len(batch)):
        own = axis - (len(batch) - (len(shape) - 2))
        strides.append(0 if own < 0 or shape[own] == 1 else math.prod(shape[own + 1 :]))
    return (*strides, shape[-1])


def ukernel_ir(name: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name(ptr a, ptr panels, ptr out)` for these memref types: a loop
    over out's batch matrices calling the packed GEMM ukernel `@<name>_matrix` (defined here too)."""
    a_type, panels_type, out_type = types
    batch = panels_type.get_shape()[:-1]
    parsed = _parse_view_name(name)
    if parsed is None:
        a_shape, out_shape = a_type.get_shape(), out_type.get_shape()
        (m, k), n = a_shape[-2:], out_shape[-1]
        a_view, out_view = _dense_strides(a_shape, batch), _dense_strides(out_shape, batch)
    else:
        (*_, m, k, n), a_view, out_view = parsed
        a_view = a_view or _dense_strides(a_type.get_shape(), batch)
        out_view = out_view or _dense_strides(out_type.get_shape(), batch)
    matrix = f"{name}_matrix"
    text = LLVMText()
    text.lines = []  # the matrix ukernel's text declares the intrinsics
    text.define(f"define void @{name}(ptr noalias %a, ptr noalias %b, ptr noalias %c) {{")

    def offset(i: str, strides: Sequence[int]) -> str:
        """The offset of batch matrix `i` (row-major over `batch`) in a buffer of these strides."""
        total = "0"
        for axis, (size, stride) in enumerate(zip(batch, strides)):
            if stride == 0:
                continue
            position = text.value(f"udiv i64 {i}, {math.prod(batch[axis + 1:])}")
            position = text.value(f"urem i64 {position}, {size}")
            total = text.value(f"add i64 {total}, {text.value(f'mul i64 {position}, {stride}')}")
        return total

    def call(i: str) -> None:
        a_i = text.pointer("%a", offset(i, a_view))
        b_i = text.pointer("%b", text.value(f"mul i64 {i}, {panels_type.get_shape()[-1]}"))
        c_i = text.pointer("%c", offset(i, out_view))
        text.emit(f"  call void @{matrix}(ptr {a_i}, ptr {b_i}, ptr {c_i})")

    text.loop(math.prod(batch), call)
    text.end()
    return packed_gemm.strided_ukernel_ir(matrix, m, k, n, a_view[-1], out_view[-1]) + text.ir()
