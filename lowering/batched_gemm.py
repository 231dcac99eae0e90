"""The batched packed GEMM: out[i] = a[i] @ b[i] for each batch matrix i, b packed at run time.

A matmul whose b is computed (attention's K transposed, or V) has no panels packed at compile
time: the kernel packs b's batch matrices into a temporary of panels (`packed_gemm.pack_panels`'
layout, one run of `packed_gemm.packed_size` floats per batch matrix), and calls this ukernel,
which runs the packed GEMM ukernel (`packed_gemm.py`, unchanged) on each batch matrix:

    func.call @graphopt_sgemm_batched_4x128x64_4x128x128(%a, %panels, %out)
        : (memref<4x128x64xf32>, memref<4x8192xf32>, memref<4x128x128xf32>) -> ()

Its name holds a's shape and out's (the JIT generates it from them). Batch dims broadcast as in
NumPy: a batch dim of a of size 1 (or missing) is read at 0 for every batch matrix of out; the
panels have out's batch dims. A row chunk (`row_split.py`) calls the ukernel for its batch matrices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType, f32

from graphopt.lowering import packed_gemm
from graphopt.lowering.llvm_text import LLVMText

PREFIX = "graphopt_sgemm_batched"


def name(types: Sequence[MemRefType]) -> str:
    """graphopt_sgemm_batched_<a's shape>_<out's shape>, for a call on memrefs (a, panels, out)."""
    a_type, _, out_type = types
    return f"{PREFIX}_{'x'.join(map(str, a_type.get_shape()))}_{'x'.join(map(str, out_type.get_shape()))}"


def chunk_name(_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel called on memrefs of other sizes (a row chunk's)."""
    return name(types)


def ukernel_ir(name: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name(ptr a, ptr panels, ptr out)` for these memref types: a loop
    over out's batch matrices calling the packed GEMM ukernel `@<name>_matrix` (defined here too)."""
    a_type, _, out_type = types
    a_shape, out_shape = a_type.get_shape(), out_type.get_shape()
    (m, k), n, batch = a_shape[-2:], out_shape[-1], out_shape[:-2]
    matrix = f"{name}_matrix"
    matrix_types = [MemRefType(f32, [m, k]), MemRefType(f32, [packed_gemm.packed_size(k, n)]), MemRefType(f32, [m, n])]
    text = LLVMText()
    text.lines = []  # the matrix ukernel's text declares the intrinsics
    text.define(f"define void @{name}(ptr noalias %a, ptr noalias %b, ptr noalias %c) {{")

    def call(i: str) -> None:
        a_offset = "0"
        for axis, size in enumerate(batch):
            a_axis = axis - (len(batch) - (len(a_shape) - 2))
            if a_axis < 0 or a_shape[a_axis] == 1:
                continue
            position = text.value(f"udiv i64 {i}, {math.prod(batch[axis + 1:])}")
            position = text.value(f"urem i64 {position}, {size}")
            step = text.value(f"mul i64 {position}, {math.prod(a_shape[a_axis + 1:])}")
            a_offset = text.value(f"add i64 {a_offset}, {step}")
        a_i = text.pointer("%a", a_offset)
        b_i = text.pointer("%b", text.value(f"mul i64 {i}, {matrix_types[1].get_shape()[0]}"))
        c_i = text.pointer("%c", text.value(f"mul i64 {i}, {m * n}"))
        text.emit(f"  call void @{matrix}(ptr {a_i}, ptr {b_i}, ptr {c_i})")

    text.loop(math.prod(batch), call)
    text.end()
    return packed_gemm.ukernel_ir(matrix, matrix_types) + text.ir()
