"""Buffers for the values a sequence of steps produces, reused by liveness: one plan for the
Executable's host buffers and for a device run's device buffers.

    plan = plan_buffers(steps, unplanned=set(results))
    plan.sizes        # [bytes of buffer 0, ...]
    plan.buffer_of    # {value: buffer index} for every produced value not in `unplanned`
    plan.offset_of    # {value: byte offset in its buffer} for values planned as slices
    plan.overwritten  # {result: the input of its step it is written over}

A value's buffer is free again once the last step reading it has run; the next value takes the
smallest free buffer it fits, or a new one.

A concat whose inputs are consecutive slices of its result (`in_place_concats`: the dims
before its axis all 1) can be planned in place: its result's buffer is taken when the first of
its inputs is produced, each input is planned as its slice, so their producers write the result
and the concat step has nothing left to do (the Executable does not run it):

    %a = conv ...; %b = conv ...; %y = graph.concat %a, %b {axis = 1}   (shapes 1x64x55x55 each)
    buffer_of[%a] == buffer_of[%b] == buffer_of[%y]; offset_of[%b] == 64 * 55 * 55 * 4

Concats in place nest: an input that is itself such a concat's result is a slice of the outer
result, and so are its inputs (a DenseNet block, `%c2 = concat(%c1, %a2)` after `%c1 =
concat(%x, %a1)`, is one buffer from `%x` on, each layer writing its slice). A buffer is free
again once the last step reading any value planned in it has run.

A step whose kernel may write a result over one of its inputs (`overwrites`: {result index:
input index}, the kernel's `may_overwrite`; a conv whose tile epilogue adds a residual reads
each residual element before it stores that element of out) takes that input's buffer for the
result where the input dies there: read by no later step, read once by this one, a whole
buffer of the result's size (not a slice of a concat, not an argument, a constant or a
result). The result is then written where the input's lines still are in cache, and no other
buffer is touched (a ResNet bottleneck's last 1x1 and its shortcut add):

    %y = conv + bias + %r + relu     (shapes 1x256x56x56; %r read by nothing after)
    buffer_of[%y] == buffer_of[%r]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype
from graphopt.runtime.arrays import ALIGNMENT


class PlannedStep(Protocol):
    """What the plan reads of a step: the values it reads and the values it writes."""

    op: Operation
    inputs: Sequence[SSAValue]
    outputs: Sequence[SSAValue]


@dataclass(frozen=True)
class BufferPlan:
    sizes: list[int]
    """Bytes of each buffer."""
    buffer_of: dict[SSAValue, int]
    """The buffer each planned value lives in."""
    offset_of: dict[SSAValue, int]
    """Where in its buffer each value planned as a slice of an in-place concat's result starts
    (bytes); a value not here starts at 0."""
    overwritten: dict[SSAValue, SSAValue]
    """Each result written over an input of its step (`overwrites`), with that input."""


def plan_buffers(steps: Sequence[PlannedStep], unplanned: Set[SSAValue], in_place: Set[int] = frozenset(),
                 overwrites: Mapping[int, Mapping[int, int]] = {}) -> BufferPlan:
    """A buffer for every value the steps produce, except those in `unplanned` (the caller gives
    them memory of their own: results, values copied out), reused by liveness; the concats at
    the indices `in_place` (from `in_place_concats`) get their inputs as slices of their result;
    the step at index i writes its result j over its input k, where k dies there, for each j: k
    of `overwrites[i]`."""
    slice_of = _slices(steps, in_place)

    def whole(value: SSAValue) -> SSAValue:
        return slice_of.get(value, (value, 0))[0]

    last_use: dict[SSAValue, int] = {}  # per value not a slice: the last step reading it or a slice of it
    for index, step in enumerate(steps):
        for value in step.inputs:
            last_use[whole(value)] = index
    free: list[int] = []
    sizes: list[int] = []
    buffer_of: dict[SSAValue, int] = {}
    offset_of: dict[SSAValue, int] = {}
    overwritten: dict[SSAValue, SSAValue] = {}

    def dying_input(index: int, position: int, result: SSAValue) -> SSAValue | None:
        """The input at `position` of step `index`, when `result` can take its buffer."""
        value = steps[index].inputs[position]
        whole_buffer = value in buffer_of and value not in slice_of and value not in overwritten.values()
        return value if (
            whole_buffer
            and last_use[value] == index
            and steps[index].inputs.count(value) == 1
            and value_nbytes(value) == value_nbytes(result)
        ) else None

    for index, step in enumerate(steps):
        for position, value in enumerate(step.outputs):
            if value in unplanned or value in buffer_of:  # an in-place concat's result: taken already
                continue
            over = overwrites.get(index, {}).get(position)
            dying = None if over is None or value in slice_of else dying_input(index, over, value)
            if dying is not None:
                buffer_of[value], overwritten[value] = buffer_of[dying], dying
                continue
            outer, offset = slice_of.get(value, (value, 0))
            if outer not in buffer_of:
                size = value_nbytes(outer)
                fitting = [b for b in free if sizes[b] >= size]
                if fitting:
                    buffer = min(fitting, key=sizes.__getitem__)
                    free.remove(buffer)
                else:
                    buffer = len(sizes)
                    sizes.append(size)
                buffer_of[outer] = buffer
            buffer_of[value] = buffer_of[outer]
            if value is not outer:
                offset_of[value] = offset
        for value in dict.fromkeys(map(whole, step.inputs)):
            if last_use[value] == index and value in buffer_of and value not in step.outputs and value not in overwritten.values():
                free.append(buffer_of[value])
    return BufferPlan(sizes, buffer_of, offset_of, overwritten)


def _slices(steps: Sequence[PlannedStep], in_place: Set[int]) -> dict[SSAValue, tuple[SSAValue, int]]:
    """Each input of the concats at the indices `in_place`: the outermost in-place concat result
    it is a slice of, and its byte offset there."""
    slice_of: dict[SSAValue, tuple[SSAValue, int]] = {}
    for index in sorted(in_place, reverse=True):  # an outer concat comes after the concats it holds
        (result,) = steps[index].outputs
        outer, offset = slice_of.get(result, (result, 0))
        for value in steps[index].inputs:
            slice_of[value], offset = (outer, offset), offset + value_nbytes(value)
    return slice_of


def in_place_concats(steps: Sequence[PlannedStep], unplanned: Set[SSAValue]) -> set[int]:
    """The indices of the steps that are a concat `plan_buffers` can plan in place: every dim
    before its axis 1 (each input a contiguous slice of the result), each input produced by an
    earlier step (an in-place concat too), listed once in this concat and in no other in-place
    concat (other steps may read it), and starting at a multiple of ALIGNMENT bytes (kernels get
    aligned arguments); nothing of it in `unplanned`."""
    producer = {value: index for index, step in enumerate(steps) for value in step.outputs}
    found: set[int] = set()
    sliced: set[SSAValue] = set()
    for index, step in enumerate(steps):
        concat = _lone_concat(step.op)
        if concat is None or any(v in unplanned for v in (*step.inputs, *step.outputs)):
            continue
        shape = step.outputs[0].type.get_shape()
        axis = concat.axis.value.data % len(shape)
        offsets = itertools.accumulate((value_nbytes(v) for v in step.inputs[:-1]), initial=0)
        if (
            all(size == 1 for size in shape[:axis])
            and all(offset % ALIGNMENT == 0 for offset in offsets)
            and len(set(step.inputs)) == len(step.inputs)
            and all(producer.get(v, index) < index and v not in sliced for v in step.inputs)
        ):
            found.add(index)
            sliced.update(step.inputs)
    return found


def _lone_concat(op: Operation) -> graph.ConcatOp | None:
    """`op` when it is a concat, or a fused group of one concat of its inputs in order; else None."""
    if isinstance(op, graph.FusedOp):
        block = op.body.block
        ops = graph.computed_ops(op)
        if len(ops) != 1 or list(ops[0].operands) != list(block.args) or list(block.last_op.operands) != list(ops[0].results):
            return None
        op = ops[0]
    return op if isinstance(op, graph.ConcatOp) else None


def value_dtype(value: SSAValue) -> np.dtype:
    return numpy_dtype(value.type.get_element_type())


def value_nbytes(value: SSAValue) -> int:
    return int(np.prod(value.type.get_shape(), dtype=np.int64)) * value_dtype(value).itemsize
