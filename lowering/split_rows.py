"""split-rows: row-chunk variants of large row-parallel kernels, one chunk per thread.

A kernel that `row_split` can run by rows, whose `graph.work` (the flops, or 4-byte elements
moved, of its group: convert-graph-to-linalg records it) is at least `min-work`, gets up to
`threads` chunks, each starting at a multiple of the split's granule (so its arguments stay
16-byte aligned). A chunk of N row units is the function `<kernel>_rows<N>`; the kernel lists
its chunks, in order, in `graph.row_chunks` (name and first row unit of each), and the bytes
per row unit of each argument in `graph.row_bytes` (0: passed whole). The runtime runs the
chunks at once on its thread pool, offsetting each sliced argument by begin * row bytes.

    func.func @relu_0(%x: memref<1024x64xf32>, %out: memref<1024x64xf32>) attributes {graph.kernel, graph.work = 65536 : i64}

becomes, with `split-rows{threads=2 min-work=0}`,

    func.func @relu_0(...) attributes {graph.kernel, graph.row_chunks = [["relu_0_rows512", 0], ["relu_0_rows512", 512]],
                                       graph.row_bytes = array<i64: 256, 256>, ...} {...}
    func.func @relu_0_rows512(%x: memref<512x64xf32>, %out: memref<512x64xf32>) attributes {graph.kernel, ...} {...}

A convolution of one image (one row) splits by blocks of its output channels instead, a dense
layer of one row by blocks of its columns (`row_split.channel_split`); its chunks are listed
the same way, their units being channels (columns). Where the weights hold a padded last
block (1000 channels in 63 blocks of 16), the last chunk, `<kernel>_rows<N>_last`, takes the rest:

    func.func @conv(%x: memref<1x8x7x6xf32>, %w: memref<16x8x3x3xf32>, %out: memref<1x16x7x6xf32>)
        attributes {graph.row_chunks = [["conv_rows8", 0], ["conv_rows8", 8]], graph.row_bytes = array<i64: 0, 288, 168>, ...}

The lanes conv of one register tile of output channels or whose x outweighs half of its w, and
the Winograd conv of many output positions per output channel, split by their output rows
(`row_split.output_row_split`): each chunk is a function of its own, `<kernel>_oh<first>to<end>`
(`output_rows.chunk_name`), called on the arguments whole (row bytes all 0).

Kernels that do less work, that cannot split by rows (or channels), or whose rows make one
chunk are left as they are; so is every kernel when `threads` is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from graphopt.lowering import output_rows, ukernels
from graphopt.lowering.pipelines import PARALLEL_MIN_WORK
from graphopt.lowering.row_split import (
    RowSplit,
    channel_split,
    output_row_split,
    position_split,
    row_chunk_kernel,
    row_split,
)
from graphopt.lowering.share_kernel_code import ALIASES_ATTR

WORK_ATTR = "graph.work"
"""i64 on a kernel: its group's flops, or its 4-byte elements moved, whichever is more."""
ROW_CHUNKS_ATTR = "graph.row_chunks"
ROW_BYTES_ATTR = "graph.row_bytes"


@dataclass(frozen=True)
class SplitRowsPass(ModulePass):
    """Give each large row-parallel kernel its row chunks (see the module docstring)."""

    name = "split-rows"

    threads: int = 1
    min_work: int = PARALLEL_MIN_WORK

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.threads < 2:
            return
        chunks: list[func.FuncOp] = []
        for kernel in list(op.ops):
            chunks += self._split(kernel)
        declared = {f.sym_name.data for f in op.ops if isinstance(f, func.FuncOp)}
        op.body.block.add_ops(d for d in ukernels.declarations(chunks) if d.sym_name.data not in declared)

    def _split(self, kernel) -> list[func.FuncOp]:
        """`kernel`'s chunk functions, inserted after it, and its attributes set; or none."""
        work = kernel.attributes.get(WORK_ATTR) if isinstance(kernel, func.FuncOp) else None
        if not (isinstance(work, IntegerAttr) and work.value.data >= self.min_work and kernel.body.blocks):
            return []
        split = chunk_split(kernel)
        if split is None:
            return []
        per_chunk = -(-split.rows // (self.threads * split.granule)) * split.granule
        begins = range(0, split.rows, per_chunk)
        sizes = [min(per_chunk, split.rows - begin) for begin in begins]
        if len(sizes) < 2:
            return []
        name = kernel.sym_name.data
        if split.static_rows:  # a function per chunk
            names = [output_rows.chunk_name(name, begin, begin + size) for begin, size in zip(begins, sizes)]
            chunks = [row_chunk_kernel(kernel, split, size, n, first=begin) for begin, size, n in zip(begins, sizes, names)]
        else:
            names = [f"{name}_rows{size}" for size in sizes]
            if split.ragged:  # the last chunk takes the rest: a function of its own
                names[-1] += "_last"
            chunks = [
                row_chunk_kernel(kernel, split, size, chunk_name, last=split.ragged and chunk_name == names[-1])
                for size, chunk_name in sorted(set(zip(sizes, names)))
            ]
        for chunk in reversed(chunks):
            for attribute in (ALIASES_ATTR, WORK_ATTR):
                chunk.attributes.pop(attribute, None)
            Rewriter.insert_op(chunk, InsertPoint.after(kernel))
        kernel.attributes[ROW_CHUNKS_ATTR] = ArrayAttr([
            ArrayAttr([StringAttr(chunk_name), IntegerAttr(begin, i64)]) for chunk_name, begin in zip(names, begins)
        ])
        kernel.attributes[ROW_BYTES_ATTR] = DenseArrayBase.from_list(i64, split.row_bytes)
        return chunks


def chunk_split(kernel: func.FuncOp) -> RowSplit | None:
    """How split-rows cuts `kernel` into chunks: by rows, or, a convolution of one image (one
    row), by output positions where it has few output channels, or by whole output rows where
    it runs as the GEMM on an im2col copy of many positions per channel (`position_split`) or
    as the lanes conv of one register tile of output channels or of x outweighing half of w, or
    the Winograd conv of many positions per channel (`output_row_split`), else by
    output channels; None when it cannot."""
    split = row_split(kernel)
    if split is not None and split.rows > 1:
        return split
    return position_split(kernel) or output_row_split(kernel) or channel_split(kernel)


def row_chunks(kernel: func.FuncOp) -> tuple[list[tuple[str, int]], tuple[int, ...]]:
    """The (chunk name, first row unit) of each of `kernel`'s chunks and its row bytes per
    argument; no chunks when split-rows left it whole."""
    chunks = kernel.attributes.get(ROW_CHUNKS_ATTR)
    if chunks is None:
        return [], ()
    pairs = [(pair.data[0].data, pair.data[1].value.data) for pair in chunks.data]
    return pairs, tuple(kernel.attributes[ROW_BYTES_ATTR].get_values())
