"""mark-row-local: mark each row-local kernel `graph.row_local`, so fuse-row-loops merges its row loops.

A kernel is row-local when it splits by rows (`row_split`) with one d0 extent for all its
generics, and every buffer that depends on d0 is indexed by exactly d0 in its first dim: row i of each loop
nest is then computed from row i of what the earlier nests wrote.

    func.func @softmax_0(%x: memref<64x128xf32>, %out: memref<64x128xf32>) attributes {graph.kernel} {
      <row max, row sum of exp, divide: linalg.generics over (d0, d1), rows indexed by d0>
    }

becomes

    func.func @softmax_0(...) attributes {graph.kernel, graph.row_local} {...}

A matmul's blocked loop nest (d0 over blocks of rows) followed by its epilogue (d0 over
rows), a reduction over rows, or a kernel that reads at computed indices is left unmarked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir.affine import AffineDimExpr, AffineExpr
from xdsl.passes import ModulePass

from graphopt.lowering.row_split import row_split

ROW_LOCAL_ATTR = "graph.row_local"
"""Unit attribute of a kernel func whose loop nests may run row by row in one loop."""


def is_row_local(kernel: func.FuncOp) -> bool:
    """Whether `kernel` splits by rows with one d0 extent for all its generics, every buffer's rows
    indexed by plain d0 in its first dim."""
    generics = [op for op in kernel.body.block.ops if isinstance(op, GenericOp)]
    if any(not generic.iterator_types.data for generic in generics) or row_split(kernel) is None:
        return False
    if len({generic.get_static_loop_ranges()[0] for generic in generics}) != 1:
        return False
    for generic in generics:
        maps = [m.data.results for m in generic.indexing_maps.data]
        if any(results[0] != AffineDimExpr(0) for results in maps[len(generic.inputs) :] if results) or any(
            any(0 in expr.used_dims() for expr in results) and not _rows_first(results) for results in maps
        ):
            return False
    return True


def _rows_first(index: Sequence[AffineExpr]) -> bool:
    """Whether d0 indexes the first dim alone and no other (not a transpose's x, read along d0 in a later dim)."""
    return bool(index) and index[0] == AffineDimExpr(0) and all(0 not in expr.used_dims() for expr in index[1:])


@dataclass(frozen=True)
class MarkRowLocalPass(ModulePass):
    """Set `graph.row_local` on every kernel (a func.func with a body) that `is_row_local`."""

    name = "mark-row-local"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.ops:
            if isinstance(kernel, func.FuncOp) and kernel.body.blocks and is_row_local(kernel):
                kernel.attributes[ROW_LOCAL_ATTR] = UnitAttr()
