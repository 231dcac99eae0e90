"""Buffers for the values a sequence of steps produces, reused by liveness: one plan for the
Executable's host buffers and for a device run's device buffers.

    plan = plan_buffers(steps, unplanned=set(results))
    plan.sizes        # [bytes of buffer 0, ...]
    plan.buffer_of    # {value: buffer index} for every produced value not in `unplanned`

A value's buffer is free again once the last step reading it has run; the next value takes the
smallest free buffer it fits, or a new one.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from xdsl.ir import SSAValue

from graphopt.dialects.attributes import numpy_dtype


class PlannedStep(Protocol):
    """What the plan reads of a step: the values it reads and the values it writes."""

    inputs: Sequence[SSAValue]
    outputs: Sequence[SSAValue]


@dataclass(frozen=True)
class BufferPlan:
    sizes: list[int]
    """Bytes of each buffer."""
    buffer_of: dict[SSAValue, int]
    """The buffer each planned value lives in."""


def plan_buffers(steps: Sequence[PlannedStep], unplanned: Set[SSAValue]) -> BufferPlan:
    """A buffer for every value the steps produce, except those in `unplanned` (the caller gives
    them memory of their own: results, values copied out), reused by liveness."""
    last_use: dict[SSAValue, int] = {}
    for index, step in enumerate(steps):
        for value in step.inputs:
            last_use[value] = index
    free: list[int] = []
    sizes: list[int] = []
    buffer_of: dict[SSAValue, int] = {}
    for index, step in enumerate(steps):
        for value in step.outputs:
            if value in unplanned:
                continue
            size = value_nbytes(value)
            fitting = [b for b in free if sizes[b] >= size]
            if fitting:
                buffer = min(fitting, key=sizes.__getitem__)
                free.remove(buffer)
            else:
                buffer = len(sizes)
                sizes.append(size)
            buffer_of[value] = buffer
        for value in step.inputs:
            if last_use.get(value) == index and value in buffer_of and value not in step.outputs:
                free.append(buffer_of[value])
    return BufferPlan(sizes, buffer_of)


def value_dtype(value: SSAValue) -> np.dtype:
    return numpy_dtype(value.type.get_element_type())


def value_nbytes(value: SSAValue) -> int:
    return int(np.prod(value.type.get_shape(), dtype=np.int64)) * value_dtype(value).itemsize
