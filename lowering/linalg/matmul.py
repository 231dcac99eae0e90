"""matmul: a loop nest (blocked on the CPU when the dims allow) or the packed GEMM ukernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.lowering import batched_gemm, packed_gemm, ukernels
from graphopt.lowering.linalg.indexing import broadcast_index, dims_of, shape_of
from graphopt.lowering.llvm_text import VECTOR
from graphopt.lowering.linalg.scalar import by_type, element_of
from graphopt.transforms.strided_view import Strides, read_view

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import Kernel


def lower_matmul(kernel: Kernel, op: graph.MatmulOp, out: SSAValue) -> None:
    """out[..., m, n] = sum over k of a[..., m, k] * b[..., k, n]; batch dims broadcast.

    A matmul whose b has packed panels (`packed_matmuls`) is one call of the packed GEMM
    ukernel (`packed_gemm`). One whose b is computed or an input packs b at run time when the
    schedule says so (`packs_at_run_time`; f32 on the CPU): loop nests write b's panels into a
    temporary, reading b through the group's scalar code (`_packed_panels`: attention's K
    transposed to heads is read where it lives, never written out as K^T), then one call of the
    packed GEMM ukernel, or of `batched_gemm` when b has batch matrices. Measured at 1 thread
    on this 2-core AMD EPYC (AVX-512), loop nest -> packed: GPT-2's scores [4,128,64] @ K^T
    [4,64,128] with its scale and mask, 41.7 us after a 20.3 us K^T step -> 45.2 us with K's
    reshape and transpose in the step, and P @ V [4,128,128] @ [4,128,64] 42.1 + 2.5 -> 34.0 us
    (BERT's, 8 batch matrices: 79.5 + 39.2 -> 88.5 us and 80.2 + 4.2 -> 68.1 us); 2-D m x k x n
    with m, n in (1, 5, 17, 63, 65, 130) and k in (5, 63, 130): 130x130x130 65.7 -> 20.2 us,
    63x63x63 8.3 -> 2.4 us, 17x130x63 4.6 -> 1.7 us, 130x5x63 3.3 -> 0.8 us; the loop nest was
    faster (0.1-1.2 us against 0.3-1.9 us) for every m = 1, for most m = 5, and for k = 5 with
    n <= 17 at every m, so those keep it (fewer rows than a register tile, or b under 16 x 32).
    Otherwise:
    The loops run (batch..., m, k, n): the reduction sits outside the contiguous n loop, so
    the innermost loop is out[m, :] += a[m, k] * b[k, :], which LLVM vectorizes. When every
    dim is a multiple of its block (`schedule.matmul_blocks`), they run blocked
    (batch..., mb, nb, kb, mi, ki, ni): a KB x NB block of b stays in cache while MB rows use it.
    A b computed in the group (attention's K or V: a bias add, reshape and transpose of the
    projection) is computed once into a temporary first: read in the loop nest, it would be
    computed again for every row m, and read across rows (K transposed) where the n loop
    wants contiguous elements.
    """
    if op.b in kernel.panels:
        operands = [kernel.materialize(op.a), kernel.panels[op.b], out]
        kernel.builder.insert(ukernels.call(packed_gemm.name([v.type for v in operands]), operands))
        return
    if kernel.schedule.packs_at_run_time(op):
        _call_packed_at_run_time(kernel, op, out)
        return
    out_shape = shape_of(op.result)
    rank = len(out_shape)
    m_size, k_size, n_size = out_shape[-2], shape_of(op.a)[-1], out_shape[-1]
    b = kernel.materialize(op.b)
    kernel.fill(out, 0)
    blocks = kernel.schedule.matmul_blocks(m_size, k_size, n_size)
    if blocks is None:
        dims = dims_of(rank + 1)
        batch, (m, k, n) = dims[: rank - 2], dims[rank - 2 :]
        body = kernel.loop(out_shape[:-1] + (k_size, n_size), [(out, batch + (m, n))], {rank - 1})
    else:
        dims = dims_of(rank + 4)
        batch, (mb, nb, kb, mi, ki, ni) = dims[: rank - 2], dims[rank - 2 :]
        (m_block, k_block, n_block), counts = blocks, (m_size // blocks[0], k_size // blocks[1], n_size // blocks[2])
        m, k, n = mb * m_block + mi, kb * k_block + ki, nb * n_block + ni
        bounds = out_shape[:-2] + (counts[0], counts[2], counts[1]) + blocks
        body = kernel.loop(bounds, [(out, batch + (m, n))], {rank, rank + 2})
        for (outer, inner), count, size in zip(((mb, mi), (kb, ki), (nb, ni)), counts, blocks):
            body.read(kernel.temporary((count, size), element_of(out)), (outer, inner))
    a_index = broadcast_index(batch, shape_of(op.a)[:-2], out_shape[:-2]) + (m, k)
    b_index = broadcast_index(batch, shape_of(op.b)[:-2], out_shape[:-2]) + (k, n)
    product = by_type(arith.MulfOp, arith.MuliOp)(body, op, body.value(op.a, a_index), body.read(b, b_index))
    body.finish([by_type(arith.AddfOp, arith.AddiOp)(body, op, body.output(0), product)])


def lower_matmul_into_view(kernel: Kernel, op: graph.MatmulOp, out: SSAValue, strides: Strides) -> bool:
    """`lower_matmul` writing op's result into `out` at `strides` (a view of out's buffer,
    `transforms/strided_view.py`: attention's head merge) when it runs as the batched GEMM
    ukernel, which writes it there; False, lowering nothing, otherwise."""
    if not (kernel.schedule.packs_at_run_time(op) and _has_batch_matrices(op) and strides[-1] == 1):
        return False
    _call_packed_at_run_time(kernel, op, out, strides[:-1])
    return True


def _call_packed_at_run_time(kernel: Kernel, op: graph.MatmulOp, out: SSAValue, out_view: Strides | None = None) -> None:
    """b packed into a temporary (`_packed_panels`), then the packed GEMM ukernel, or the batched
    one when b has batch matrices. The batched one reads a where it lives when a is a strided
    view of one of the kernel's arguments (Q's heads: `transforms/strided_view.py`) and writes
    out at `out_view` (the strides of out's batch dims and rows) when given."""
    panels = _packed_panels(kernel, op)
    if not _has_batch_matrices(op):
        operands = [kernel.materialize(op.a), panels, out]
        kernel.builder.insert(ukernels.call(packed_gemm.name([v.type for v in operands]), operands))
        return
    a_view = _read_view(kernel, op)
    a = kernel.materialize(op.a) if a_view is None else a_view[0]
    operands = [a, panels, out]
    if a_view is None and out_view is None:
        callee = batched_gemm.name([v.type for v in operands])
    else:
        sizes = (*shape_of(op.result)[:-1], shape_of(op.a)[-1], shape_of(op.result)[-1])
        callee = batched_gemm.view_name(sizes, (a.type.get_shape(), a_view and a_view[1]), (out.type.get_shape(), out_view))
    kernel.builder.insert(ukernels.call(callee, operands))


def _read_view(kernel: Kernel, op: graph.MatmulOp) -> tuple[SSAValue, Strides] | None:
    """(an argument's buffer, the strides of a's batch dims and rows) when a is a strided view
    of a kernel argument with a's batch dims those of out and its rows contiguous."""
    if op.a in kernel.buffers or shape_of(op.a)[:-2] != shape_of(op.result)[:-2]:
        return None
    view = read_view(op.a, lambda value: value in kernel.buffers)
    if view is None or view[1][-1] != 1 or kernel.buffers[view[0]] not in kernel.block.args:
        return None
    return kernel.buffers[view[0]], view[1][:-1]


def _has_batch_matrices(op: graph.MatmulOp) -> bool:
    """Whether b has batch dims of more than one element: packed per batch matrix of out."""
    return any(size > 1 for size in shape_of(op.b)[:-2])


def _packed_panels(kernel: Kernel, op: graph.MatmulOp) -> SSAValue:
    """A temporary holding b packed into panels (`packed_gemm.pack_panels`' layout), written by
    loop nests that read b through the group's scalar code: a transpose of K is read strided
    here, never written out. One run of panels per batch matrix of out (`batched_gemm`), or
    one in all when b has no batch dims of more than one element.

    Loop nests (batch..., panel, k, column of the panel) write the full panels, each panel's
    k-th row contiguously; (batch..., k, column) the last, narrower panel's columns of b, and
    its columns past n (zeros). Every read is at an affine index (row splitting needs that).
    """
    b_shape, out_shape = shape_of(op.b), shape_of(op.result)
    k_size, n_size = b_shape[-2:]
    batch_shape = out_shape[:-2] if _has_batch_matrices(op) else ()
    panels = kernel.temporary((*batch_shape, packed_gemm.packed_size(k_size, n_size)), element_of(op.b))
    full, rest = divmod(n_size, packed_gemm.PANEL)
    width = -(-rest // VECTOR) * VECTOR
    edge = full * k_size * packed_gemm.PANEL

    def write(sizes: tuple[int, ...], offset, column) -> None:
        """A loop nest over (batch..., *sizes) writing b at (k, column(dims)), or zeros when
        column is None, at offset(dims) within each batch matrix's panels."""
        dims = dims_of(len(batch_shape) + len(sizes))
        batch, inner = dims[: len(batch_shape)], dims[len(batch_shape) :]
        body = kernel.loop((*batch_shape, *sizes), [(panels, (*batch, offset(*inner)))])
        for dim, size in zip(inner, sizes):
            body.read(kernel.extent(size), (dim,))
        if column is None:
            body.finish([body.constant(0.0, element_of(op.b))])
            return
        k = inner[-2]
        b_batch = broadcast_index(batch, b_shape[:-2], batch_shape)
        b_batch = (AffineExpr.constant(0),) * (len(b_shape) - 2 - len(b_batch)) + b_batch  # b's batch dims of 1, packed once
        body.finish([body.value(op.b, b_batch + (k, column(*inner)))])

    if full:
        write((full, k_size, packed_gemm.PANEL), lambda p, k, j: p * (k_size * packed_gemm.PANEL) + k * packed_gemm.PANEL + j,
              lambda p, k, j: p * packed_gemm.PANEL + j)
    if rest:
        write((k_size, rest), lambda k, j: k * width + j + edge, lambda k, j: j + full * packed_gemm.PANEL)
    if width > rest:
        write((k_size, width - rest), lambda k, j: k * width + j + (edge + rest), None)
    return panels
