"""fuse-row-loops: run a row-local kernel's loop nests one row at a time, in one row loop.

A kernel marked `graph.row_local` (by mark-row-local: its generics all iterate d0 in parallel
over the same rows and index every buffer that depends on d0 by exactly d0) computes row i
of each nest from row i of the buffers the earlier nests wrote. After
convert-linalg-to-loops, its consecutive top-level `scf.for`s with identical constant
bounds become ONE loop whose body runs the nests one after the other for the same row, so
the row stays in L1 between them. Constants and static allocs between the loops move above
the first, deallocs below the last.

    %s = memref.alloc() : memref<3xf32>                %s = memref.alloc() : memref<3xf32>
    scf.for %i = %c0 to %c3 step %c1 {                 scf.for %i = %c0 to %c3 step %c1 {
      scf.for %j ... { <row max into %s[%i]> }   ->      scf.for %j ... { <row max into %s[%i]> }
    }                                                    scf.for %j ... { <%x[%i, %j] / %s[%i]> }
    scf.for %k = %c0 to %c3 step %c1 {                 }
      scf.for %j ... { <%x[%k, %j] / %s[%k]> }         memref.dealloc %s : memref<3xf32>
    }
    memref.dealloc %s : memref<3xf32>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from graphopt.lowering.mark_row_local import ROW_LOCAL_ATTR


@dataclass(frozen=True)
class FuseRowLoopsPass(ModulePass):
    """Merge the consecutive top-level row loops of each `graph.row_local` kernel into one."""

    name = "fuse-row-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = [k for k in op.walk() if isinstance(k, func.FuncOp) and ROW_LOCAL_ATTR in k.attributes]
        for kernel in kernels:
            if kernel.body.blocks:
                for run in _runs(kernel.body.block):
                    _merge(run)


def _runs(block: Block) -> list[list[Operation]]:
    """Runs of top-level ops: loops of identical bounds, and the constants, allocs, deallocs between them."""
    runs: list[list[Operation]] = []
    run: list[Operation] = []
    bounds = None
    for op in block.ops:
        if isinstance(op, scf.ForOp) and not op.iter_args and (b := _bounds(op)) is not None:
            if b != bounds:
                runs.append(run)
                run, bounds = [], b
            run.append(op)
        elif run and (isinstance(op, (arith.ConstantOp, memref.DeallocOp)) or _static_alloc(op)):
            run.append(op)
        else:
            runs.append(run)
            run, bounds = [], None
    runs.append(run)
    return [r for r in runs if sum(isinstance(op, scf.ForOp) for op in r) > 1]


def _merge(run: list[Operation]) -> None:
    """Hoist the run's constants and allocs above its first loop, deallocs below its last, and merge its loops."""
    loops = [op for op in run if isinstance(op, scf.ForOp)]
    first, last = loops[0], loops[-1]
    between = [op for op in run if not isinstance(op, scf.ForOp) and op.is_before_in_block(last)]
    block = first.parent_block()
    after = last
    for op in between:
        op.detach()
        if isinstance(op, memref.DeallocOp):
            block.insert_op_after(op, after)
            after = op
        else:
            block.insert_op_before(op, first)
    body = first.body.block
    for loop in loops[1:]:
        body.erase_op(body.last_op)  # the empty scf.yield
        loop.body.block.args[0].replace_all_uses_with(body.args[0])
        for op in list(loop.body.block.ops):
            op.detach()
            body.add_op(op)
        block.erase_op(loop)


def _bounds(loop: scf.ForOp) -> tuple[int, int, int] | None:
    values = [_constant(v) for v in (loop.lb, loop.ub, loop.step)]
    return None if None in values else tuple(values)


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _static_alloc(op: Operation) -> bool:
    return isinstance(op, memref.AllocOp) and not op.operands
