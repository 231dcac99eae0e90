"""The elementwise tail of an anchor's group as a ukernel's tile epilogue (`tile_epilogue.py`).

    %y = graph.conv2d(%x, %w) ...                          : tensor<1x16x14x14xf32>
    %b = graph.add(%y, %bias) : (..., tensor<16x1x1xf32>) -> tensor<1x16x14x14xf32>
    %r = graph.relu(%b)

is the epilogue `addAP0.maxS0C00000000` with operand P0 = %bias. The tail qualifies when every
op from the anchor's result to the group's result is one of EPILOGUE_OPS on f32 tensors of the
result's shape, and every other value it reads is a splat constant, a per-output-channel value
(O elements along dim 1 of the result) or one residual tensor of the result's shape; anything
else stays a loop nest over the stored result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, is_splat
from graphopt.lowering import tile_epilogue
from graphopt.lowering.linalg.indexing import shape_of

if TYPE_CHECKING:
    from graphopt.lowering.linalg.loop_body import Kernel


def _binary(name: str):
    return lambda op, a, b: [(name, (a, b))]


def _clip(op: graph.ClipOp, x: str) -> list[tile_epilogue.Step]:
    """max then min (NaN stays NaN, as in NumPy's clip); the second step reads the first (`S+0`)."""
    steps, low, high = [], op.get("min"), op.get("max")
    if low is not None:
        steps.append(("max", (x, tile_epilogue.constant(low))))
    if high is not None:
        steps.append(("min", ("S+0" if steps else x, tile_epilogue.constant(high))))
    return steps


def _batch_norm(op: graph.BatchNormOp, x: str, scale: str, bias: str, mean: str, var: str) -> list[tile_epilogue.Step]:
    """(x - mean) / sqrt(var + epsilon) * scale + bias, in the interpreter's order."""
    return [
        ("sub", (x, mean)),
        ("add", (var, tile_epilogue.constant(op.get("epsilon")))),
        ("sqrt", ("S+1",)),
        ("div", ("S+0", "S+2")),
        ("mul", ("S+3", scale)),
        ("add", ("S+4", bias)),
    ]


EPILOGUE_OPS = {
    **{f"graph.{name}": _binary(name) for name in ("add", "sub", "mul", "div", "max", "min")},
    "graph.relu": lambda op, x: [("max", (x, tile_epilogue.constant(0.0)))],
    "graph.clip": _clip,
    "graph.batch_norm": _batch_norm,
    "graph.sigmoid": lambda op, x: [("sigmoid", (x,))],
}
"""Op name -> its steps from its operands' epilogue operands; `S+k` names the op's own k-th step."""


def tile_epilogue_of(kernel: Kernel, anchor: Operation) -> tuple[tuple[tile_epilogue.Step, ...], list[SSAValue]] | None:
    """The epilogue that computes the group's result from `anchor`'s, with the buffers of its
    per-channel operands then its residual; None when the tail does not qualify (or is empty)."""
    (result,) = kernel.group.outputs
    if result is anchor.results[0]:
        return None
    reader = _TailReader(kernel, anchor.results[0])
    try:
        reader.operand(result)
    except _NotAnEpilogue:
        return None
    return tuple(reader.steps), [kernel.materialize(v) for v in reader.per_channel] + (
        [kernel.materialize(reader.residual)] if reader.residual is not None else []
    )


class _NotAnEpilogue(Exception):
    pass


class _TailReader:
    """Steps of the values between an anchor's result and the group's result, operands first."""

    def __init__(self, kernel: Kernel, anchored: SSAValue):
        self.kernel = kernel
        self.shape = shape_of(anchored)
        self.steps: list[tile_epilogue.Step] = []
        self.per_channel: list[SSAValue] = []
        self.residual: SSAValue | None = None
        self.operands: dict[SSAValue, str] = {anchored: tile_epilogue.ACCUMULATOR}
        self.dependent = {anchored}
        """The group's values computed from the anchor's result."""
        for op in kernel.group.ops:
            if any(o in self.dependent for o in op.operands):
                self.dependent.update(op.results)

    def operand(self, value: SSAValue, channel_vector: bool = False) -> str:
        """The epilogue operand of `value` (adding the steps that compute it); `channel_vector`:
        a [C] operand of batch_norm, whose one dim is the channel dim."""
        if value not in self.operands:
            if value.type.get_element_type() != f32:
                raise _NotAnEpilogue
            self.operands[value] = self._step(value) if value in self.dependent else self._outside(value, channel_vector)
        return self.operands[value]

    def _step(self, value: SSAValue) -> str:
        """The last step of the op computing `value` from the anchor's result."""
        op = value.owner
        if op.name not in EPILOGUE_OPS or shape_of(value) != self.shape:
            raise _NotAnEpilogue
        vectors = [isinstance(op, graph.BatchNormOp) and position > 0 for position in range(len(op.operands))]
        operands = [self.operand(o, vector) for o, vector in zip(op.operands, vectors)]
        first = len(self.steps)
        local = lambda a: tile_epilogue.step_result(first + int(a[2:])) if a.startswith("S+") else a
        for name, arguments in EPILOGUE_OPS[op.name](op, *operands):
            self.steps.append((name, tuple(local(a) for a in arguments)))
        return tile_epilogue.step_result(len(self.steps) - 1)

    def _outside(self, value: SSAValue, channel_vector: bool) -> str:
        """A value that does not depend on the anchor: a splat constant, per-channel, or the residual."""
        splat = self.kernel.group.constant_value(value)
        if splat is not None and is_splat(splat):
            return tile_epilogue.constant(float(dense_to_numpy(splat).reshape(-1)[0]))
        shape, rank = shape_of(value), len(self.shape)
        if shape == self.shape:
            if self.residual not in (None, value):
                raise _NotAnEpilogue
            self.residual = value
            return tile_epilogue.RESIDUAL
        aligned = (1, *shape, *(1,) * (rank - 2)) if channel_vector else (1,) * (rank - len(shape)) + tuple(shape)
        if aligned != tuple(self.shape[1] if i == 1 else 1 for i in range(rank)):
            raise _NotAnEpilogue
        if value not in self.per_channel:
            self.per_channel.append(value)
        return tile_epilogue.per_channel(self.per_channel.index(value))
