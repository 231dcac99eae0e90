"""The blas backend: one matmul or conv2d through NumPy's BLAS.

It accepts a single `graph.matmul` or `graph.conv2d` (f32 or f64), or a `graph.fused` holding
exactly one of them (and constants) that yields its result and reads only group inputs or
constants:

    %y = graph.fused(%x, %w) {name = "matmul_0", mode = "compile"} : ... {
    ^bb0(%a: tensor<256x1024xf32>, %c: tensor<1024x1024xf32>):
      %m = graph.matmul %a, %c : ...
      graph.yield %m : tensor<256x1024xf32>
    }

A group with an epilogue (bias add, relu...) is refused: partitioning splits it, so the GEMM
runs here and the epilogue is a group of its own on whichever backend partitioning places it
(the greedy search splits a group that the first backend refuses whole but accepts part of;
the cost search weighs both). Its kernel computes the anchor into the output array
(`np.matmul(a, b, out=...)`; conv2d as an im2col copy made with stride tricks followed by one
batched GEMM). The GEMMs use OpenBLAS's own threads (NumPy's setting).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided
from xdsl.ir import Operation, SSAValue

from graphopt.backends import Backend
from graphopt.backends.costs import machine
from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.runtime.arrays import aligned_array
from graphopt.runtime.executable import Kernel

ANCHORS = (graph.MatmulOp, graph.Conv2dOp)
BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class Refused(Exception):
    """A group the blas backend cannot run; the message says why."""


def anchor_of(group: Operation) -> tuple[graph.MatmulOp | graph.Conv2dOp, list[SSAValue]]:
    """The matmul or conv2d that `group` is, and the group's inputs as the anchor sees them
    (block arguments, or a single op's operands); raises Refused with the reason it cannot."""
    if isinstance(group, ANCHORS):
        anchor, inputs = group, list(group.operands)
    elif not isinstance(group, graph.FusedOp):
        raise Refused(f"'{group.name}' is neither a matmul, a conv2d nor a group holding one")
    elif group.mode_name == "fallback":
        raise Refused("a fallback group is not compiled as one kernel")
    else:
        block = group.body.block
        ops = [op for op in list(block.ops)[:-1] if not isinstance(op, graph.ConstantOp)]
        anchors = [op for op in ops if isinstance(op, ANCHORS)]
        if len(anchors) != 1:
            raise Refused(f"a blas group holds exactly one matmul or conv2d, this one holds {len(anchors)}")
        anchor, inputs = anchors[0], list(block.args)
        others = [op.name for op in ops if op is not anchor]
        if others:
            raise Refused(f"blas runs a {anchor.name.removeprefix('graph.')} alone, not with {', '.join(others)}")
        if list(block.last_op.operands) != [anchor.result]:
            raise Refused("a blas group yields its matmul or conv2d result, once")
    dtype = numpy_dtype(anchor.result.type.get_element_type())
    if dtype not in BLAS_DTYPES:
        raise Refused(f"BLAS computes f32 and f64, not {dtype}")
    return anchor, inputs


class BlasBackend(Backend):
    name = "blas"

    def supports(self, group: Operation) -> str | None:
        try:
            anchor_of(group)
        except Refused as e:
            return str(e)
        return None

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        return [BlasKernel(*anchor_of(group)) for group in groups]

    def estimate(self, group: Operation) -> float:
        """The GEMM at the BLAS rate, plus the im2col copy of a convolution."""
        anchor, _ = anchor_of(group)
        im2col_bytes = 2 * Im2colConv(anchor).columns_bytes if isinstance(anchor, graph.Conv2dOp) else 0
        return machine().library_time(anchor, im2col_bytes)


class BlasKernel:
    """The anchor computed into the output array."""

    def __init__(self, anchor: graph.MatmulOp | graph.Conv2dOp, inputs: list[SSAValue]):
        self.run_anchor = matmul_function(anchor) if isinstance(anchor, graph.MatmulOp) else Im2colConv(anchor)
        self.operands: list[int | np.ndarray] = [
            inputs.index(v) if v in inputs else aligned_array(dense_to_numpy(v.owner.value))
            for v in anchor.operands
        ]

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        (out,) = outputs
        self.run_anchor(*(inputs[o] if isinstance(o, int) else o for o in self.operands), out)


def matmul_function(op: graph.MatmulOp) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """np.matmul into `out`; batch dims of `a` fold into its rows when `b` has no batch (one GEMM).

        matmul_function(op)(a, b, out)     # a [2, 128, 64] @ b [64, 32]: one [256, 64] @ [64, 32]
    """
    k, n = op.b.type.get_shape()[-2:]
    if int(np.prod(op.b.type.get_shape()[:-2])) == 1:
        return lambda a, b, out: np.matmul(a.reshape(-1, k), b.reshape(k, n), out=out.reshape(-1, n))
    return lambda a, b, out: np.matmul(a, b, out=out)


class Im2colConv:
    """conv2d (NCHW, OIHW) as im2col + one batched GEMM, into `out`:

        columns[n, g, (c, kh, kw), (oh, ow)] = padded x[n, g*C/g + c, oh*sh + kh*dh, ow*sw + kw*dw]
        out[n, g] = w[g] @ columns[n, g]        # [O/g, C/g*KH*KW] @ [C/g*KH*KW, OH*OW]

    The padded input and the columns are scratch arrays made once per calling thread.
    """

    def __init__(self, op: graph.Conv2dOp):
        n, c, h, w = op.x.type.get_shape()
        o, per_group, kh, kw = op.w.type.get_shape()
        _, _, oh, ow = op.result.type.get_shape()
        top, left, bottom, right = op.get("padding")
        self.groups = op.get("groups")
        self.dilations = op.get("dilations")
        self.strides = op.get("strides")
        self.dtype = numpy_dtype(op.result.type.get_element_type())
        self.padded_shape = (n, c, h + top + bottom, w + left + right) if any((top, left, bottom, right)) else None
        self.interior = (slice(None), slice(None), slice(top, top + h), slice(left, left + w))
        self.columns_shape = (n, self.groups, per_group, kh, kw, oh, ow)
        self.columns_bytes = int(np.prod(self.columns_shape)) * self.dtype.itemsize
        self.gemm_weights = (self.groups, o // self.groups, per_group * kh * kw)
        self.gemm_columns = (n, self.groups, per_group * kh * kw, oh * ow)
        self.gemm_out = (n, self.groups, o // self.groups, oh * ow)
        self.scratch = threading.local()

    def __call__(self, x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
        padded, columns = self._scratch()
        if padded is not None:
            padded[self.interior] = x
            x = padded
        np.copyto(columns, self._windows(x))
        np.matmul(w.reshape(self.gemm_weights), columns.reshape(self.gemm_columns), out=out.reshape(self.gemm_out))

    def _windows(self, x: np.ndarray) -> np.ndarray:
        """A read-only view of `x` shaped like the columns (no copy)."""
        n_stride, c_stride, h_stride, w_stride = x.strides
        (dh, dw), (sh, sw) = self.dilations, self.strides
        per_group = self.columns_shape[2]
        strides = (n_stride, per_group * c_stride, c_stride, dh * h_stride, dw * w_stride, sh * h_stride, sw * w_stride)
        return as_strided(x, self.columns_shape, strides, writeable=False)

    def _scratch(self) -> tuple[np.ndarray | None, np.ndarray]:
        buffers = getattr(self.scratch, "buffers", None)
        if buffers is None:
            padded = np.zeros(self.padded_shape, self.dtype) if self.padded_shape else None
            buffers = self.scratch.buffers = (padded, np.empty(self.columns_shape, self.dtype))
        return buffers
