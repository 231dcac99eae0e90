"""convert-graph-to-linalg: one kernel per group, a `func.func` on memrefs in destination-passing style.

A `graph.fused` group (or a single graph op, a group of one) becomes a function whose
arguments are the group's inputs, then its non-splat constants (argument attribute
`graph.constant` holds the value the runtime passes), then one buffer per result:

    func.func @fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                                       affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
          ins(%a, %b : memref<4x8xf32>, memref<8xf32>) outs(%out : memref<4x8xf32>) {
      ^bb0(%x: f32, %y: f32, %o: f32):
        %s = arith.addf %x, %y : f32
        %z = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %s, %z : f32
        linalg.yield %r : f32
      }
      func.return
    }

Values are computed where they are used: a `LoopBody` evaluates a group value at an affine
index of its loop dims, so an elementwise chain is one loop body, broadcasting and
injective ops (transpose, broadcast_to, reshape, slice) are index maps, and nothing is
stored between ops. pad and concat select between reads at shifted indices (a read that may
fall outside its buffer loads at the clamped index); gather loads at positions read from its
indices. A group with one anchor or reduction writes that op's result into the output buffer
with a `linalg.fill` (the init) and a few generics (contraction or reduction, finish) and then applies its elementwise
epilogue in place. Loops are ordered so that the innermost one is parallel and contiguous
(matmul (m, k, n); conv2d (n, o / 4, c, kh, p) over the flat output positions p of a padded,
stride-phase copy of x, with the window row and 4 output channels unrolled in the body;
pooling (n, c, oh, ow) with the window unrolled in the body; elementwise loops and epilogues
over NCHW rows shorter than SHORT_LOOP run (h, w) as one loop); accumulations that stay
innermost (row reductions) are marked `reassoc` so LLVM vectorizes them, and a conv's
multiply-adds `contract` so they become FMAs. Row reductions (softmax, log_softmax,
layer_norm) keep row statistics in row-sized buffers. On the CPU, some ops call ukernels
(`ukernels.py`) instead: a matmul whose b is an f32 constant calls the packed GEMM ukernel
(`packed_gemm.py`) on b's panels, packed here and passed as a constant argument after the
others (an f32 matmul with b computed or an input, on b's panels packed at run time into a
temporary, `linalg/matmul.py`, calling `batched_gemm.py` per batch matrix); an f32 depthwise conv2d calls the depthwise convolution ukernel (`depthwise_conv.py`)
on x, an f32 conv2d with a constant w that the schedule runs with output channels on the lanes
the `conv_lanes.py` ukernel on w packed here (a constant argument), and the other f32 conv2ds
the direct convolution ukernel (`direct_conv.py`) or the packed GEMM on the stride-phase copy of x;
an f32 pool calls the pooling ukernel (`pooling.py`) on x, and a sum over short planes (a global
average pool) the row-sum ukernel (`row_sums.py`). What cannot be lowered raises
`Unsupported`; `supports(op)` returns its reason.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.traits import SymbolTable
from xdsl.transforms.linalg_generalize_named_ops import GeneralizeNamedOpPattern
from xdsl.utils.exceptions import PassFailedException

from graphopt.dialects import graph
from graphopt.lowering import ukernels
from graphopt.lowering.linalg.abi import Group, Unsupported
from graphopt.lowering.linalg.conv import lower_conv2d
from graphopt.lowering.linalg.indexing import INDEX_RULES, SELECTING_RULES, shape_of
from graphopt.lowering.linalg.loop_body import Kernel
from graphopt.lowering.linalg.matmul import lower_matmul, lower_matmul_into_view
from graphopt.lowering.linalg.pool import lower_pool2d
from graphopt.lowering.linalg.reduction import COMBINES, lower_layer_norm, lower_reduce, lower_softmax
from graphopt.lowering.linalg.scalar import SCALAR_BUILDERS, element_of
from graphopt.lowering.linalg.schedule import SCHEDULES, PlainSchedule
from graphopt.lowering.split_rows import WORK_ATTR
from graphopt.transforms.strided_view import written_view
from graphopt.transforms.subgraph import single_op_kernel_name
from graphopt.transforms.work import group_work


LOWERINGS: dict[str, Callable[[Kernel, graph.GraphOp, SSAValue], bool | None]] = {
    **{reduction.name: lower_reduce for reduction in COMBINES},
    "graph.softmax": lower_softmax,
    "graph.log_softmax": lower_softmax,
    "graph.layer_norm": lower_layer_norm,
    "graph.matmul": lower_matmul,
    "graph.conv2d": lower_conv2d,
    "graph.max_pool2d": lower_pool2d,
    "graph.avg_pool2d": lower_pool2d,
}
"""Anchor or reduction op name -> lowering that writes its result into the output buffer (True:
it wrote the group's result, its elementwise tail applied as a ukernel's tile epilogue)."""


# ----------------------------------------------------------------------------------------
# Groups to kernels
# ----------------------------------------------------------------------------------------


def _check_ops(group: Group) -> list[Operation]:
    """The group's anchors and reductions; raises Unsupported for an op no table knows."""
    heavy = []
    for op in group.ops:
        if op.name in LOWERINGS:
            heavy.append(op)
        elif not (
            isinstance(op, graph.ConstantOp)
            or op.name in SCALAR_BUILDERS
            or op.name in INDEX_RULES
            or op.name in SELECTING_RULES
        ):
            raise Unsupported(f"'{op.name}' is not supported by the linalg lowering")
    if len(heavy) > 1:
        raise Unsupported(f"the group has {len(heavy)} anchors or reductions; a kernel holds at most one")
    return heavy


def _lower_elementwise(kernel: Kernel) -> None:
    """One generic per distinct result shape, computing every result of that shape (on the CPU,
    one per input of a concat of that shape, `_concat_spans`)."""
    outputs = kernel.group.outputs
    for shape in dict.fromkeys(shape_of(v) for v in outputs):
        positions = [p for p, v in enumerate(outputs) if shape_of(v) == shape]
        for span in _concat_spans(kernel, shape):
            body = kernel.elementwise(shape, [kernel.results[p] for p in positions], span)
            body.finish([body.value(outputs[p], body.dims) for p in positions])


def _concat_spans(kernel: Kernel, shape: tuple[int, ...]) -> list[tuple[int, int, int] | None]:
    """(axis, start, stop) of each input of the group's one concat when its result has `shape`
    (the loops over them select no input, and short rows still merge: ShuffleNet's concat + relu
    over 28-wide rows ran 3.5x faster so, measured), else [None]: one loop over all of `shape`."""
    concats = [op for op in kernel.group.ops if isinstance(op, graph.ConcatOp)]
    if len(concats) != 1 or shape_of(concats[0].result) != shape or not kernel.schedule.merges_short_rows():
        return [None]
    axis = concats[0].get("axis") % len(shape)
    starts = list(itertools.accumulate((shape_of(x)[axis] for x in concats[0].inputs), initial=0))
    return [(axis, start, stop) for start, stop in zip(starts, starts[1:]) if start < stop]


def _lower_anchored(kernel: Kernel, heavy: Operation) -> None:
    """The anchor or reduction into the output buffer, then the elementwise epilogue in place."""
    outputs = kernel.group.outputs
    if len(outputs) != 1:
        raise Unsupported(f"a group with '{heavy.name}' must have one result, not {len(outputs)}")
    (result,), (out,) = outputs, kernel.results
    if result.type != heavy.results[0].type:
        _lower_into_view(kernel, heavy, out)
        return
    if LOWERINGS[heavy.name](kernel, heavy, out):
        return
    if result is not heavy.results[0]:
        kernel.buffers[heavy.results[0]] = out
        body = kernel.elementwise(shape_of(result), [out])
        body.finish([body.value(result, body.dims)])


def _lower_into_view(kernel: Kernel, heavy: Operation, out: SSAValue) -> None:
    """An anchor whose group's result is its result through reshapes and transposes, a view of
    the output buffer (`transforms/strided_view.py`: attention's head merge after P @ V): a
    matmul run as the batched GEMM writes there; otherwise the anchor writes a temporary and
    a loop nest copies it."""
    (result,) = kernel.group.outputs
    strides = written_view(heavy.results[0], result)
    if strides is None:
        raise Unsupported(
            f"the epilogue of '{heavy.name}' changes its result type {heavy.results[0].type} to {result.type}"
        )
    if isinstance(heavy, graph.MatmulOp) and lower_matmul_into_view(kernel, heavy, out, strides):
        return
    anchored = kernel.temporary(shape_of(heavy.results[0]), element_of(heavy.results[0]))
    LOWERINGS[heavy.name](kernel, heavy, anchored)
    kernel.buffers[heavy.results[0]] = anchored
    body = kernel.elementwise(shape_of(result), [out])
    body.finish([body.value(result, body.dims)])


def kernel_sources(main: func.FuncOp, backend: str | None = None) -> list[tuple[Operation, str]]:
    """The ops of `main` that become kernels, in order, with kernel names: its compile-mode
    groups (when `backend` is given, only those placed on it or not placed at all) and the
    graph ops outside any group (named by `single_op_kernel_name`)."""
    sources = []
    singles = 0
    for node in main.body.block.ops:
        if isinstance(node, graph.FusedOp):
            placed_elsewhere = backend is not None and node.backend is not None and node.backend.data != backend
            if node.mode_name == "compile" and not placed_elsewhere:
                sources.append((node, node.group_name.data))
        elif isinstance(node, graph.GraphOp) and not isinstance(node, graph.ConstantOp):
            sources.append((node, single_op_kernel_name(node, singles)))
            singles += 1
    return sources


def kernel_names(groups: Sequence[Operation]) -> list[str]:
    """Each group's kernel name, as the convert-graph-to-* passes name it in its function
    (`kernel_sources`), made unique among `groups` with a suffix `_<n>` where two share one
    (a group named "" is named "group"): what a backend compiling these groups names their
    kernels."""
    names: dict[Operation, str] = {}
    for function in dict.fromkeys(group.parent_op() for group in groups):
        if isinstance(function, func.FuncOp) and function.body.blocks:
            names.update(kernel_sources(function))
    unique: list[str] = []
    for group in groups:
        name = names.get(group) or Group.of(group).name or "group"
        candidate, n = name, 0
        while candidate in unique:
            n += 1
            candidate = f"{name}_{n}"
        unique.append(candidate)
    return unique


def replace_module_contents(module: ModuleOp, ops: list[Operation]) -> None:
    """Erase everything in `module` and put `ops` there instead."""
    for old in reversed(list(module.body.block.ops)):
        module.body.block.erase_op(old, safe_erase=False)
    module.body.block.add_ops(ops)


def lower_group(
    op: Operation, name: str | None = None, schedule: PlainSchedule = SCHEDULES["cpu"]
) -> func.FuncOp:
    """The kernel of a `graph.fused` or of a single graph op (named `name`, default: the group's).

    A matmul run as the packed GEMM takes its b packed in an argument that names b
    (`graph.pack_panels`): the pack-weights pass packs it, so lowering a group to see whether
    it lowers packs nothing.

    `schedule` is the CPU's, or the plain one-output loop nests (for the CUDA lowering, which
    tiles matmuls and reduces rows itself). Raises Unsupported with the reason when the group cannot be lowered.
    """
    group = Group.of(op, name)
    heavy = _check_ops(group)
    kernel = Kernel(group, schedule)
    if heavy:
        _lower_anchored(kernel, heavy[0])
    else:
        _lower_elementwise(kernel)
    function = kernel.finish()
    work = group_work(op)
    function.attributes[WORK_ATTR] = IntegerAttr(max(work.flops, work.bytes // 4), i64)
    return function


def generalized(kernel: func.FuncOp) -> func.FuncOp:
    """`kernel` with its named linalg ops (`linalg.fill`) rewritten in place as `linalg.generic`s
    (xDSL's `linalg-generalize-named-ops`, which opens the CPU `kernels` stage): the loop nests
    the CPU kernel passes and the CUDA mapper read."""
    PatternRewriteWalker(GeneralizeNamedOpPattern()).rewrite_region(kernel.body)
    return kernel


def supports(op: Operation) -> str | None:
    """None when `lower_group(op)` makes a kernel, else the reason it cannot."""
    try:
        lower_group(op)
    except Unsupported as e:
        return str(e)
    return None


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertGraphToLinalgPass(ModulePass):
    """Replace the module by the kernels of `@entry`'s compile-mode groups and single graph ops, in order.

        func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
          %0 = graph.fused(%x, %b) {name = "fused_add_relu_0", mode = "compile"} : ... {
            ...  graph.add, graph.relu
          }
          %1 = graph.softmax %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
          func.return %1 : tensor<4x8xf32>
        }

    becomes

        func.func @fused_add_relu_0(%a: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {
          linalg.generic ... ins(%a, %b : memref<4x8xf32>, memref<8xf32>) outs(%out : memref<4x8xf32>) {...}
          func.return
        }
        func.func @softmax_0(%x: memref<4x8xf32>, %out: memref<4x8xf32>) attributes {graph.kernel} {...}

    Top-level graph.constant ops and fallback-mode groups are data and reference code for
    the runtime, not kernels. A group that cannot be lowered fails the pass with the reason.
    `schedule` names the loop schedule (`linalg/schedule.py`): `cpu` (default) or `plain`.
    `backend` (given by the target's pipeline, `pipelines.CPU`) leaves out the groups that
    partitioning placed on another backend; the pass itself knows no backend by name.
    """

    name = "convert-graph-to-linalg"

    entry: str = "main"
    schedule: str = "cpu"
    backend: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = SymbolTable.lookup_symbol(op, self.entry)
        if not isinstance(main, func.FuncOp):
            raise PassFailedException(f"convert-graph-to-linalg: no function @{self.entry}")
        if self.schedule not in SCHEDULES:
            raise PassFailedException(
                f"convert-graph-to-linalg: schedule={self.schedule}, expected one of {', '.join(SCHEDULES)}"
            )
        kernels = []
        for node, name in kernel_sources(main, self.backend):
            try:
                kernels.append(lower_group(node, name, SCHEDULES[self.schedule]))
            except Unsupported as e:
                raise PassFailedException(f"convert-graph-to-linalg: {name}: {e}") from None
        replace_module_contents(op, kernels + ukernels.declarations(kernels))
