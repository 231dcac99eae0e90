"""Index maps: where a graph op reads its operands, given the affine index of its result element
(broadcast, transpose, reshape, slice; pad, concat and gather select between reads).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr

from graphopt.dialects import graph
from graphopt.lowering.linalg.scalar import element_of
from graphopt.transforms.strided_view import contiguous_strides

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import LoopBody


Index = tuple[AffineExpr, ...]


def dims_of(rank: int) -> Index:
    return tuple(AffineExpr.dimension(i) for i in range(rank))


def broadcast_index(index: Index, shape: Sequence[int], result_shape: Sequence[int]) -> Index:
    """NumPy broadcasting: leading dims dropped, stretched size-1 dims read at 0."""
    offset = len(index) - len(shape)
    return tuple(
        AffineExpr.constant(0) if size == 1 and full != 1 else e
        for size, full, e in zip(shape, result_shape[offset:], index[offset:])
    )


def shape_of(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _transpose_index(op, index: Index) -> Index:
    source = [AffineExpr.constant(0)] * len(index)
    for position, axis in enumerate(op.get("perm")):
        source[axis] = index[position]
    return tuple(source)


def _reshape_groups(result_shape: Sequence[int], shape: Sequence[int]) -> list[tuple[range, range]]:
    """Runs of consecutive result dims and operand dims that hold the same elements: cut wherever
    both shapes' prefix products agree ([1, 4, 28, 56, 56] of [1, 112, 56, 56]: [1] [4, 28] [56] [56]
    of [1] [112] [56] [56]). A size-1 dim after a cut joins the next run (the last run, at the end)."""
    prefix_products = lambda sizes: set(itertools.accumulate(sizes, operator.mul))
    cuts = sorted(prefix_products(result_shape) & prefix_products(shape)) or [1]

    def runs(sizes: Sequence[int]) -> list[range]:
        ends = list(itertools.accumulate(sizes, operator.mul))
        stops = [bisect.bisect_left(ends, cut) + 1 for cut in cuts[:-1]] + [len(sizes)]
        return [range(start, stop) for start, stop in zip([0, *stops], stops)]

    return list(zip(runs(result_shape), runs(shape)))


def _reshape_index(op, index: Index) -> Index:
    """Row-major, one run of dims at a time (`_reshape_groups`): the position within the run of
    the result element, split over the operand's dims of the run. A run of one operand dim takes
    the position as it is, so splitting or merging a dim costs no division per element."""
    result_shape, shape = shape_of(op.result), shape_of(op.x)
    if 0 in shape:  # no element is ever read
        return (AffineExpr.constant(0),) * len(shape)
    source = []
    for result_run, run in _reshape_groups(result_shape, shape):
        linear = AffineExpr.constant(0)
        for axis, stride in zip(result_run, contiguous_strides([result_shape[a] for a in result_run])):
            linear = linear + index[axis] * stride
        first = True
        for axis, stride in zip(run, contiguous_strides([shape[a] for a in run])):
            e = linear if stride == 1 else linear // stride
            source.append(AffineExpr.constant(0) if shape[axis] == 1 else e if first else e % shape[axis])
            first = first and shape[axis] == 1
    return tuple(source)


def _slice_index(op, index: Index) -> Index:
    bounds = zip(shape_of(op.x), op.get("starts"), op.get("ends"), op.get("steps"))
    starts = [slice(*b).indices(size) for size, *b in bounds]
    return tuple(e * step + start for e, (start, _, step) in zip(index, starts))


INDEX_RULES: dict[str, Callable[[graph.GraphOp, Index], Index]] = {
    "graph.transpose": _transpose_index,
    "graph.broadcast_to": lambda op, index: broadcast_index(index, shape_of(op.x), shape_of(op.result)),
    "graph.reshape": _reshape_index,
    "graph.slice": _slice_index,
}
"""Injective op name -> index of its operand element that a result element copies."""


def _padded_value(body: LoopBody, x: SSAValue, index: Index, begins: Sequence[int], fill: float) -> SSAValue:
    """`x` shifted by `begins` and surrounded by `fill`: x[index - begins] where that is inside x, else fill."""
    inside = None
    for e, begin, size in zip(index, begins, shape_of(x)):
        low, high = body.interval(e)
        checks = [(begin, "sge")] * (low < begin) + [(begin + size, "slt")] * (high >= begin + size)
        for bound, predicate in checks:
            check = body.emit(arith.CmpiOp(body.index_value(e), body.index_constant(bound), predicate))
            inside = check if inside is None else body.emit(arith.AndIOp(inside, check))
    value = body.value(x, tuple(e - begin for e, begin in zip(index, begins)))
    if inside is None:
        return value
    return body.emit(arith.SelectOp(inside, value, body.constant(fill, element_of(x))))


def _pad(body: LoopBody, op: graph.PadOp, index: Index) -> SSAValue:
    return _padded_value(body, op.x, index, op.get("pads")[: len(index)], op.get("value"))


def _concat(body: LoopBody, op: graph.ConcatOp, index: Index) -> SSAValue:
    """The input whose span along the axis holds the element, read at the offset within it
    (an input with no elements along the axis holds none, and is never read); no select when
    the loop only reaches one input's span (`Kernel.elementwise` over a span)."""
    axis = op.get("axis") % len(index)
    starts = list(itertools.accumulate((shape_of(x)[axis] for x in op.inputs), initial=0))
    low, high = body.interval(index[axis])
    for x, start, end in zip(op.inputs, starts, starts[1:]):
        if start <= low and high < end:
            return body.value(x, index[:axis] + (index[axis] - start,) + index[axis + 1 :])
    position = body.index_value(index[axis])
    result = None
    for x, start, end in reversed(list(zip(op.inputs, starts, starts[1:]))):
        if start == end:
            continue
        value = body.value(x, index[:axis] + (index[axis] - start,) + index[axis + 1 :])
        if result is None:
            result = value
        else:
            before_end = body.emit(arith.CmpiOp(position, body.index_constant(end), "slt"))
            result = body.emit(arith.SelectOp(before_end, value, result))
    return result


def _gather(body: LoopBody, op: graph.GatherOp, index: Index) -> SSAValue:
    """data at the index whose axis position is read from `indices` (negative wraps, out of range clamps).

    Data computed in the group is computed into a temporary first (its reads are not affine).
    """
    data = body.kernel.materialize(op.data)
    shape = shape_of(op.data)
    axis = op.get("axis") % len(shape)
    count = len(shape_of(op.indices))
    taken = body.value(op.indices, index[axis : axis + count])
    taken = body.emit(arith.IndexCastOp(taken, IndexType()))
    negative = body.emit(arith.CmpiOp(taken, body.index_constant(0), "slt"))
    from_end = body.emit(arith.AddiOp(taken, body.index_constant(shape[axis])))
    wrapped = body.emit(arith.SelectOp(negative, from_end, taken))
    outer = [body.index_value(e) for e in index[:axis] + index[axis + count :]]
    return body.emit(memref.LoadOp.get(data, outer[:axis] + [body.clamp(wrapped, shape[axis])] + outer[axis:]))


SELECTING_RULES: dict[str, Callable[[LoopBody, graph.GraphOp, Index], SSAValue]] = {
    "graph.pad": _pad,
    "graph.concat": _concat,
    "graph.gather": _gather,
}
"""Injective op name -> builder of its element at an index from elements of its operands."""


def operand_indices(op: graph.GraphOp, index: Index) -> list[Index]:
    """Where an elementwise op reads each operand (batch_norm's parameters: at the channel)."""
    if isinstance(op, graph.BatchNormOp):
        return [index] + [(index[1],)] * 4
    return [broadcast_index(index, shape_of(o), shape_of(op.results[0])) for o in op.operands]
