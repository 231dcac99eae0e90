"""The blas backend: one matmul or conv2d through NumPy's BLAS, its epilogue on the cpu backend.

It accepts a single `graph.matmul` or `graph.conv2d` (f32 or f64), or a `graph.fused` holding
exactly one of them whose operands are group inputs (or constants), followed by an elementwise
epilogue that reads only the anchor's result, group inputs and constants and yields one value
of the anchor's type, e.g. bias add + relu:

    %y = graph.fused(%x, %w, %b) {name = "fused_matmul_add_relu_0", mode = "compile"} : ... {
    ^bb0(%a: tensor<256x1024xf32>, %c: tensor<1024x1024xf32>, %d: tensor<1024xf32>):
      %m = graph.matmul %a, %c : ...
      %s = graph.add %m, %d : ...
      %r = graph.relu %s : tensor<256x1024xf32>
      graph.yield %r : tensor<256x1024xf32>
    }

Its kernel computes the anchor into the output array (`np.matmul(a, b, out=...)`; conv2d as an
im2col copy made with stride tricks followed by one batched GEMM), then applies the epilogue in
place on that array. The epilogue becomes its own `graph.fused` (inputs: the anchor's result
and the group inputs it reads) compiled once, at compile time, by the cpu backend, or run by
the reference interpreter where cpu refuses it. The GEMMs use OpenBLAS's own threads (NumPy's
setting); `threads` only sizes the epilogue kernels.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

from graphopt.backends import Backend, get_backend
from graphopt.backends.costs import machine, values_bytes
from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.dialects.graph import Category, category_of
from graphopt.runtime.arrays import aligned_array
from graphopt.runtime.executable import Kernel

ANCHORS = (graph.MatmulOp, graph.Conv2dOp)
BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
EPILOGUE_BACKENDS = ("cpu", "reference")
"""Where an epilogue runs: the first of these that accepts it."""


class Refused(Exception):
    """A group the blas backend cannot run; the message says why."""


@dataclass
class AnchoredGroup:
    """A group seen as one anchor (matmul or conv2d) and the elementwise epilogue after it."""

    anchor: graph.MatmulOp | graph.Conv2dOp
    inputs: list[SSAValue]
    """The group's inputs as its ops see them (block arguments, or a single op's operands)."""
    epilogue: list[Operation]
    """Ops computing `result` from the anchor's result, inputs and constants, in order."""
    result: SSAValue


def anchored(group: Operation) -> AnchoredGroup:
    """Split `group` into anchor and epilogue; raises Refused with the reason it cannot."""
    if isinstance(group, ANCHORS):
        return AnchoredGroup(group, list(group.operands), [], group.result)
    if not isinstance(group, graph.FusedOp):
        raise Refused(f"'{group.name}' is neither a matmul, a conv2d nor a group holding one")
    if group.mode_name == "fallback":
        raise Refused("a fallback group is not compiled as one kernel")
    block = group.body.block
    ops = list(block.ops)[:-1]
    anchors = [op for op in ops if isinstance(op, ANCHORS)]
    if len(anchors) != 1:
        raise Refused(f"a blas group holds exactly one matmul or conv2d, this one holds {len(anchors)}")
    results = list(block.last_op.operands)
    if len(results) != 1:
        raise Refused(f"a blas group has one result, this one has {len(results)}")
    split = AnchoredGroup(anchors[0], list(block.args), _slice_to(results[0], ops, anchors[0]), results[0])
    _check_in_place(split)
    return split


def _slice_to(result: SSAValue, ops: list[Operation], anchor: Operation) -> list[Operation]:
    """The ops other than `anchor` that `result` depends on, in block order."""
    wanted = {result}
    sliced: list[Operation] = []
    for op in reversed(ops):
        if op is not anchor and wanted.intersection(op.results):
            sliced.append(op)
            wanted.update(op.operands)
    return sliced[::-1]


def _check_in_place(split: AnchoredGroup) -> None:
    """The anchor reads group inputs or constants; the epilogue keeps the anchor's result type
    and reads the anchor's values elementwise only, so it can run in place on its output (a
    broadcast_to that fusion cloned into the group may read inputs)."""
    anchor = split.anchor
    kind = anchor.name.removeprefix("graph.")
    for index, operand in enumerate(anchor.operands):
        if operand not in split.inputs and not isinstance(operand.owner, graph.ConstantOp):
            raise Refused(f"the {kind}'s operand #{index} is computed inside the group ({operand.owner.name})")
    if split.result.type != anchor.result.type:
        raise Refused(f"the epilogue changes the {kind}'s result type {anchor.result.type} to {split.result.type}")
    anchored_values = {anchor.result}
    for op in split.epilogue:
        reads_anchor = bool(anchored_values.intersection(op.operands))
        if category_of(op) is not Category.ELEMENTWISE and (reads_anchor or not isinstance(op, graph.BroadcastToOp)):
            raise Refused(f"'{op.name}' in the epilogue is not elementwise")
        if reads_anchor:
            anchored_values.update(op.results)


def _check_dtype(split: AnchoredGroup) -> None:
    dtype = numpy_dtype(split.anchor.result.type.get_element_type())
    if dtype not in BLAS_DTYPES:
        raise Refused(f"BLAS computes f32 and f64, not {dtype}")


class BlasBackend(Backend):
    name = "blas"

    def supports(self, group: Operation) -> str | None:
        try:
            _check_dtype(anchored(group))
        except Refused as e:
            return str(e)
        return None

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        splits = [anchored(group) for group in groups]
        epilogues = iter(_compile_epilogues([_epilogue_group(s) for s in splits if s.epilogue], threads))
        return [BlasKernel(s, next(epilogues) if s.epilogue else None) for s in splits]

    def measured_parts(self, group: Operation) -> list[tuple[str, Operation]]:
        """The anchor alone on blas, then the epilogue on the backend that runs it. Candidates
        with the same GEMM then share one measurement of it (in the cost search, a GEMM whose
        epilogue runs inside it and one followed by a separate cpu kernel differ only by the
        epilogue and the launch, not by the noise of two timings of the same GEMM)."""
        split = anchored(group)
        if not split.epilogue:
            return [(self.name, split.anchor)]
        epilogue = _epilogue_group(split)
        return [(self.name, split.anchor), (_epilogue_backend(epilogue), epilogue)]

    def estimate(self, group: Operation) -> float:
        """The GEMM at the BLAS rate, plus the im2col copy and the in-place epilogue pass."""
        split = anchored(group)
        rates = machine()
        im2col_bytes = 2 * Im2colConv(split.anchor).columns_bytes if isinstance(split.anchor, graph.Conv2dOp) else 0
        if not split.epilogue:
            return rates.library_time(split.anchor, im2col_bytes)
        epilogue_bytes = values_bytes([split.result, *_epilogue_inputs(split)])
        return rates.library_time(split.anchor, im2col_bytes + epilogue_bytes) + rates.kernel_overhead


# ----------------------------------------------------------------------------------------
# The epilogue: its own graph.fused, compiled by the cpu backend (else the interpreter)
# ----------------------------------------------------------------------------------------


def _epilogue_inputs(split: AnchoredGroup) -> list[SSAValue]:
    """The anchor's result, then the group inputs the epilogue reads (in input order)."""
    read = {operand for op in split.epilogue for operand in op.operands}
    return [split.anchor.result, *(v for v in split.inputs if v in read)]


def _epilogue_group(split: AnchoredGroup) -> graph.FusedOp:
    """`split`'s epilogue as a graph.fused in a module of its own (@main returns it)."""
    sources = _epilogue_inputs(split)
    types = [v.type for v in sources]
    outer, inner = Block(arg_types=types), Block(arg_types=types)
    mapping = dict(zip(sources, inner.args))
    for op in split.epilogue:
        inner.add_op(op.clone(mapping))
    inner.add_op(graph.YieldOp([mapping[split.result]]))
    fused = graph.FusedOp(list(outer.args), [split.result.type], Region(inner), name="epilogue")
    outer.add_ops([fused, ReturnOp(fused.outputs[0])])
    ModuleOp([FuncOp("main", (types, [split.result.type]), Region(outer))])  # the interpreter needs a module
    return fused


def _epilogue_backend(epilogue: graph.FusedOp) -> str:
    return next(name for name in EPILOGUE_BACKENDS if get_backend(name).supports(epilogue) is None)


def _compile_epilogues(groups: list[graph.FusedOp], threads: int) -> list[Kernel]:
    """One kernel per epilogue; those of one backend compiled together."""
    placed = [_epilogue_backend(g) for g in groups]
    kernels: list[Kernel | None] = [None] * len(groups)
    for name in dict.fromkeys(placed):
        positions = [i for i, p in enumerate(placed) if p == name]
        for position, kernel in zip(positions, get_backend(name).compile([groups[i] for i in positions], threads)):
            kernels[position] = kernel
    return kernels


# ----------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------


class BlasKernel:
    """The anchor into the output array, then the epilogue in place on it."""

    def __init__(self, split: AnchoredGroup, epilogue: Kernel | None):
        anchor = split.anchor
        self.run_anchor = matmul_function(anchor) if isinstance(anchor, graph.MatmulOp) else Im2colConv(anchor)
        self.operands: list[int | np.ndarray] = [
            split.inputs.index(v) if v in split.inputs else aligned_array(dense_to_numpy(v.owner.value))
            for v in anchor.operands
        ]
        self.epilogue = epilogue
        self.epilogue_inputs = [split.inputs.index(v) for v in _epilogue_inputs(split)[1:]]

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        (out,) = outputs
        self.run_anchor(*(inputs[o] if isinstance(o, int) else o for o in self.operands), out)
        if self.epilogue is not None:
            self.epilogue([out, *(inputs[i] for i in self.epilogue_inputs)], [out])


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
