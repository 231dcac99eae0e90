"""The epilogue a ukernel applies to each vector of its output tile before the store, as LLVM IR text.

An epilogue is a tuple of steps, each an op and its operands; an operand is the accumulator
`A`, the residual `R` (one tensor of the output's shape, read at the stored position),
per-output-channel operand `P<i>` (broadcast along the vector), the result of step `S<j>`, or
an f32 constant `C<its bits in hex>`. The ukernel's name carries `token(steps)`, the steps
joined by `.`, so kernels that share a ukernel share its epilogue too. conv2d -> add(bias) ->
relu, the bias per-channel operand 0, is

    addAP0.maxS0C00000000

Ops: add, sub, mul, div, max and min (NaN-propagating, as NumPy's maximum and minimum), sqrt
and sigmoid (1 / (1 + exp(-x)), convert-math-to-llvm's `expand_sigmoid_f32`, which the loop
nests' sigmoid expands to as well). Steps
that read neither `A` nor `R` (a batch norm's sqrt(var + eps)) are computed once per channel of
the tile.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

import numpy as np

from graphopt.lowering.convert_math_to_llvm import expand_sigmoid_f32
from graphopt.lowering.llvm_text import VECTOR_TYPE, LLVMText, broadcast, host_has_avx512, load, load_first

Step = tuple[str, tuple[str, ...]]

ACCUMULATOR, RESIDUAL = "A", "R"

PREFETCH = not host_has_avx512()
"""Whether a tile prefetches the lines of out (for writing) and of the residual that the next
tile stores and reads (`prefetch_next_tile`): without AVX-512 (Zen 1, AVX2); AVX-512's IR is
unchanged (not measured there)."""
PREFETCH_DECLARATION = "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)"


def prefetch_next_tile(text: LLVMText, steps: Sequence[Step], out: str, offsets: Sequence[int], ahead: str) -> None:
    """Prefetches, for each of `offsets` (floats past a tile's out pointer `out` and its residual
    pointer %r), the line `ahead` floats further (an i64 value): out's for writing, the
    residual's (where the steps read one) for reading. The caller keeps `ahead` inside the
    buffers (0 for a tile without a next one): a prefetch does not fault, but one into an
    unmapped page costs a page walk (docs/cpu-codegen.md, "conv_lanes' prefetches stay inside x")."""
    bases = [(out, 1)] + ([("%r", 0)] if reads_residual(steps) else [])
    for base, write in bases:
        ahead_base = text.pointer(base, ahead)
        for offset in offsets:
            text.emit(f"  call void @llvm.prefetch.p0(ptr {text.pointer(ahead_base, offset)}, i32 {write}, i32 3, i32 1)")


def constant(value: float) -> str:
    """The operand of the f32 constant `value`."""
    return f"C{struct.unpack('<I', struct.pack('<f', value))[0]:08x}"


def per_channel(index: int) -> str:
    return f"P{index}"


def step_result(index: int) -> str:
    return f"S{index}"


def token(steps: Sequence[Step]) -> str:
    """The steps as they appear in a ukernel's name."""
    return ".".join(op + "".join(operands) for op, operands in steps)


def parse(text: str) -> tuple[Step, ...]:
    """The steps of a `token`."""
    steps = []
    for step in text.split("."):
        op = re.match(r"[a-z]+", step)[0]
        steps.append((op, tuple(re.findall(r"[ARPSC][0-9a-f]*", step[len(op) :]))))
    return tuple(steps)


def per_channel_count(steps: Sequence[Step]) -> int:
    """How many per-channel operands the steps read (P0 ... P<n-1>)."""
    return 1 + max((int(o[1:]) for _, operands in steps for o in operands if o[0] == "P"), default=-1)


def reads_residual(steps: Sequence[Step]) -> bool:
    return any(RESIDUAL in operands for _, operands in steps)


def parameters(steps: Sequence[Step], attributes: str = "") -> str:
    """The epilogue's pointer parameters of a ukernel or of its tile functions, after the ones
    before them (each `, ptr <attributes>%p<i>`, then `, ptr <attributes>%r`): the per-channel
    operands, then the residual."""
    names = [f"p{i}" for i in range(per_channel_count(steps))] + (["r"] if reads_residual(steps) else [])
    return "".join(f", ptr {attributes}%{name}" for name in names)


def parameters_and_out(steps: Sequence[Step]) -> str:
    """`parameters`, then out's, of a ukernel that may write out over its residual
    (`ukernels.writes_over_residual`): each `noalias` but the residual and out, which the
    runtime may pass as one buffer (`linalg/abi.py`, `OVERWRITES_ATTR`)."""
    shared = reads_residual(steps)
    per_channel = "".join(f", ptr noalias %p{i}" for i in range(per_channel_count(steps)))
    return per_channel + (", ptr %r, ptr %out" if shared else ", ptr noalias %out")


def arguments(text: LLVMText, steps: Sequence[Step], channel: str, out_tile: str) -> str:
    """The arguments for `parameters` of a tile function whose out pointer is `out_tile` (a
    pointer into the ukernel's %out) and whose first output channel is `channel`: the
    per-channel operands at that channel, the residual at out_tile's offset from %out."""
    pointers = [text.pointer(f"%p{i}", channel) for i in range(per_channel_count(steps))]
    if reads_residual(steps):
        offset = text.value(f"sub i64 {text.value(f'ptrtoint ptr {out_tile} to i64')}, {text.value('ptrtoint ptr %out to i64')}")
        pointers.append(text.value(f"getelementptr i8, ptr %r, i64 {offset}"))
    return "".join(f", ptr {p}" for p in pointers)


def _float_literal(value: float) -> str:
    """An f32 value as LLVM writes it: the double of the same value, in hex."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(np.float32(value))))[0]:016X}"


class VectorExpression:
    """The builders of `convert_math_to_llvm.FloatExpression` that `expand_sigmoid_f32` calls, on
    <16 x float> values of LLVM IR text (operands: value names, or numbers for splat constants)."""

    INT_TYPE = "<16 x i32>"

    def __init__(self, text: LLVMText):
        self.text = text

    def float_value(self, value: str | float) -> str:
        return value if isinstance(value, str) else f"splat (float {_float_literal(value)})"

    def _instruction(self, name: str, *operands: str | float) -> str:
        return self.text.value(f"{name} {VECTOR_TYPE} " + ", ".join(self.float_value(o) for o in operands))

    def _call(self, intrinsic: str, *operands: str) -> str:
        return self.text.value(f"call {VECTOR_TYPE} @llvm.{intrinsic}(" + ", ".join(operands) + ")")

    def sub(self, a: str | float, b: str | float) -> str:
        return self._instruction("fsub", a, b)

    def div(self, a: str | float, b: str | float) -> str:
        return self._instruction("fdiv", a, b)

    def fma(self, a: str | float, b: str | float, c: str | float) -> str:
        return self._call("fma.v16f32", *(f"{VECTOR_TYPE} {self.float_value(o)}" for o in (a, b, c)))

    def clamp(self, x: str, lower: float, upper: float) -> str:
        """x clamped to [lower, upper], NaN passing through (ordered compares)."""
        for predicate, bound in (("ogt", upper), ("olt", lower)):
            outside = self._instruction(f"fcmp {predicate}", x, bound)
            bound_vector = self.float_value(bound)
            x = self.text.value(f"select <16 x i1> {outside}, {VECTOR_TYPE} {bound_vector}, {VECTOR_TYPE} {x}")
        return x

    def polynomial(self, x: str, coefficients: Sequence[float]) -> str:
        """Horner's scheme with fma, highest-degree coefficient first."""
        result = self.float_value(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.fma(x, result, coefficient)
        return result

    def to_bits(self, x: str) -> str:
        return self.text.value(f"bitcast {VECTOR_TYPE} {x} to {self.INT_TYPE}")

    def from_bits(self, bits: str) -> str:
        return self.text.value(f"bitcast {self.INT_TYPE} {bits} to {VECTOR_TYPE}")

    def _int_instruction(self, name: str, a: str, b: str | int) -> str:
        operand = b if isinstance(b, str) else f"splat (i32 {b})"
        return self.text.value(f"{name} {self.INT_TYPE} {a}, {operand}")

    def int_add(self, a: str, b: str | int) -> str:
        return self._int_instruction("add", a, b)

    def shift_left(self, a: str, bits: int) -> str:
        return self._int_instruction("shl", a, bits)

    def mul(self, a: str | float, b: str | float) -> str:
        return self._instruction("fmul", a, b)

    def neg(self, a: str) -> str:
        return self.text.value(f"fneg {VECTOR_TYPE} {a}")


class TileEpilogue:
    """Writes `steps` on the output vectors of one register tile, into `text`.

    The tile function's parameters (`parameters`) point at each per-channel operand's value
    for the tile's first channel (%p<i>), and into the residual where %out points (%r).
    """

    def __init__(self, text: LLVMText, steps: Sequence[Step]):
        self.text = text
        self.steps = tuple(steps)
        self.channels = [f"%p{i}" for i in range(per_channel_count(steps))]
        self.residual = "%r" if reads_residual(steps) else None
        self.varying = set()
        """The steps that read the accumulator or the residual (directly or through a step)."""
        for index, (_, operands) in enumerate(self.steps):
            if any(o in (ACCUMULATOR, RESIDUAL) or (o[0] == "S" and int(o[1:]) in self.varying) for o in operands):
                self.varying.add(index)
        self.uniform: dict[tuple[int, str], str] = {}
        """Values computed once per channel: (channel, operand) -> vector."""

    def apply(self, accumulator: str, channel: int, offset: int | str, lanes: int, plain: bool = False) -> str:
        """The epilogue of the vector `accumulator` of tile channel `channel`, stored `offset`
        floats (a number or an i64 value) past the tile's out pointer with `lanes` valid lanes
        (`plain`: the residual's `lanes` floats read as a plain vector, `load_first`, not under a
        mask); returns the vector to store."""
        values = {ACCUMULATOR: accumulator}
        if self.residual is not None:
            pointer = self.text.pointer(self.residual, offset)
            values[RESIDUAL] = self.text.fresh()
            if plain:
                self.text.lines += load_first(values[RESIDUAL], pointer, lanes)
            else:
                self.text.emit(load(values[RESIDUAL], pointer, lanes))
        for index, (op, operands) in enumerate(self.steps):
            if index in self.varying:
                arguments = [values.get(o) or self._uniform(channel, o) for o in operands]
                values[step_result(index)] = self._step(op, arguments)
        return values[step_result(len(self.steps) - 1)] if self.steps else accumulator

    def _uniform(self, channel: int, operand: str) -> str:
        """The vector of an operand that does not vary along the tile's vectors."""
        key = (channel, operand)
        if key not in self.uniform:
            kind, number = operand[0], operand[1:]
            if kind == "C":
                value = f"splat (float {_float_literal(struct.unpack('<f', struct.pack('<I', int(number, 16)))[0])})"
            elif kind == "P":
                pointer = self.text.pointer(self.channels[int(number)], channel)
                scalar = self.text.value(f"load float, ptr {pointer}, align 4")
                value = self.text.fresh()
                self.text.lines += broadcast(value, scalar)
            else:
                op, operands = self.steps[int(number)]
                value = self._step(op, [self._uniform(channel, o) for o in operands])
            self.uniform[key] = value
        return self.uniform[key]

    def _step(self, op: str, arguments: Sequence[str]) -> str:
        """One step on <16 x float> values: an instruction (add, sub, mul, div), the sigmoid
        expansion or an intrinsic."""
        if op == "sigmoid":
            return expand_sigmoid_f32(VectorExpression(self.text), arguments[0])
        if op in ("add", "sub", "mul", "div"):
            return self.text.value(f"f{op} {VECTOR_TYPE} {arguments[0]}, {arguments[1]}")
        intrinsic = f"{op}imum" if op in ("max", "min") else op
        typed = ", ".join(f"{VECTOR_TYPE} {a}" for a in arguments)
        return self.text.value(f"call {VECTOR_TYPE} @llvm.{intrinsic}.v16f32({typed})")
