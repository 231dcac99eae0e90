"""Writing LLVM IR as text, for the ukernels the JIT generates (`ukernels.py`).

    text = LLVMText()
    text.define("define void @f(ptr %x) {")
    text.loop(4, lambda i: text.emit(f"  store float 0.0, ptr {text.value(f'getelementptr float, ptr %x, i64 {i}')}"))
    text.end()
    ir = text.ir()
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm_binding

VECTOR = 16
"""f32 lanes of one AVX-512 register, the vector width the ukernels are written for."""
VECTOR_TYPE = f"<{VECTOR} x float>"

INTRINSICS = (
    f"declare {VECTOR_TYPE} @llvm.fma.v16f32({VECTOR_TYPE}, {VECTOR_TYPE}, {VECTOR_TYPE})",
    f"declare {VECTOR_TYPE} @llvm.masked.load.v16f32.p0(ptr, i32, <16 x i1>, {VECTOR_TYPE})",
    f"declare void @llvm.masked.store.v16f32.p0({VECTOR_TYPE}, ptr, i32, <16 x i1>)",
    f"declare {VECTOR_TYPE} @llvm.maximum.v16f32({VECTOR_TYPE}, {VECTOR_TYPE})",
    f"declare {VECTOR_TYPE} @llvm.minimum.v16f32({VECTOR_TYPE}, {VECTOR_TYPE})",
    f"declare {VECTOR_TYPE} @llvm.sqrt.v16f32({VECTOR_TYPE})",
    f"declare {VECTOR_TYPE} @llvm.masked.gather.v16f32.v16p0(<16 x ptr>, i32, <16 x i1>, {VECTOR_TYPE})",
    f"declare float @llvm.vector.reduce.fadd.v16f32(float, {VECTOR_TYPE})",
)
"""Declarations of the intrinsics the ukernels call."""


@functools.cache
def host_has_avx512() -> bool:
    """Whether this CPU has AVX-512F: 32 registers of VECTOR floats. Without it (AVX2) a
    <VECTOR x float> value takes two of its 16 registers of 8 floats, so a ukernel's register
    tile holds half as many accumulators before LLVM spills them."""
    return bool(llvm_binding.get_host_cpu_features().get("avx512f"))


class LLVMText:
    """Lines of LLVM IR, numbered values and counted loops."""

    def __init__(self):
        self.lines: list[str] = list(INTRINSICS)
        self.block = "entry"
        """The label of the block being written (a loop's phi names its predecessor)."""
        self.count = 0

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def define(self, header: str) -> None:
        """Start a function: its `define ... {` line and its entry block."""
        self.emit(header)
        self.emit("entry:")
        self.block = "entry"

    def end(self) -> None:
        """End a function that returns void."""
        self.emit("  ret void")
        self.emit("}")

    def value(self, instruction: str) -> str:
        """`%vN = instruction` with a fresh N; returns `%vN`."""
        name = self.fresh()
        self.emit(f"  {name} = {instruction}")
        return name

    def fresh(self) -> str:
        """A value name `%vN` not used yet."""
        self.count += 1
        return f"%v{self.count}"

    def pointer(self, base: str, offset: int | str) -> str:
        """A pointer `offset` floats past `base` (0: `base` itself)."""
        return base if offset == 0 else self.value(f"getelementptr float, ptr {base}, i64 {offset}")

    def loop(self, count: int, body: Callable[..., Sequence[str] | None], carried: Sequence[tuple[str, str]] = ()) -> list[str]:
        """`for i in range(count): body(i)`, as blocks after the current one. `carried`: (type,
        initial value) of values the iterations carry: `body(i, *values)` returns their next
        values, and the loop returns their values after it (the initial ones for no iteration)."""
        if count == 0:
            return [initial for _, initial in carried]
        self.count += 1
        label, index = f"loop{self.count}", f"%i{self.count}"
        self.emit(f"  br label %{label}")
        self.emit(f"{label}:")
        self.emit(f"  {index} = phi i64 [0, %{self.block}], [{index}.next, %{label}.latch]")
        values = [f"%c{self.count}.{k}" for k in range(len(carried))]
        phis, before = len(self.lines), self.block
        self.block = label
        result = body(index, *values)
        following = list(result) if carried else []
        self.lines[phis:phis] = [
            f"  {value} = phi {type_} [{initial}, %{before}], [{next_value}, %{label}.latch]"
            for value, (type_, initial), next_value in zip(values, carried, following, strict=True)
        ]
        self.emit(f"  br label %{label}.latch")
        self.emit(f"{label}.latch:")
        self.emit(f"  {index}.next = add i64 {index}, 1")
        self.emit(f"  {index}.done = icmp eq i64 {index}.next, {count}")
        self.emit(f"  br i1 {index}.done, label %{label}.exit, label %{label}")
        self.emit(f"{label}.exit:")
        self.block = f"{label}.exit"
        return list(following)

    def branch(self, condition: str, if_true: Callable[[], None], if_false: Callable[[], None]) -> None:
        """`if condition: if_true() else: if_false()` (an i1 value), as blocks after the current one."""
        self.count += 1
        label = f"if{self.count}"
        self.emit(f"  br i1 {condition}, label %{label}.true, label %{label}.false")
        for side, body in (("true", if_true), ("false", if_false)):
            self.emit(f"{label}.{side}:")
            self.block = f"{label}.{side}"
            body()
            self.emit(f"  br label %{label}.end")
        self.emit(f"{label}.end:")
        self.block = f"{label}.end"

    def ir(self) -> str:
        return "\n".join(self.lines) + "\n"


def prefetch_next_tile_row(name: str, k: str, rows: int, row_stride: int, locality: int) -> list[str]:
    """At step `k` of a register tile's loop along its `rows` rows of `%name` (rows `row_stride`
    floats apart; k the column), a prefetch of column k of row k mod `rows` of the next tile,
    `%<name>.ahead` floats past `%name`: every line of the next tile's rows, each in the steps
    that read the same line of the tile's own, rows <= 16 times a line of 16 columns apart."""
    return [
        f"  %{name}.row = urem i64 {k}, {rows}",
        f"  %{name}.row.at = mul i64 %{name}.row, {row_stride}",
        f"  %{name}.next.row = add i64 %{name}.row.at, %{name}.ahead",
        f"  %{name}.next.at = add i64 %{name}.next.row, {k}",
        f"  %{name}.next = getelementptr float, ptr %{name}, i64 %{name}.next.at",
        f"  call void @llvm.prefetch.p0(ptr %{name}.next, i32 0, i32 {locality}, i32 1)",
    ]


def broadcast(name: str, scalar: str) -> list[str]:
    """Lines setting `name` to a vector of `scalar` in every lane (`name.one` is a temporary)."""
    return [
        f"  {name}.one = insertelement {VECTOR_TYPE} poison, float {scalar}, i64 0",
        f"  {name} = shufflevector {VECTOR_TYPE} {name}.one, {VECTOR_TYPE} poison, <16 x i32> zeroinitializer",
    ]


def fma(result: str, a: str, b: str, accumulator: str) -> str:
    return f"  {result} = call {VECTOR_TYPE} @llvm.fma.v16f32({VECTOR_TYPE} {a}, {VECTOR_TYPE} {b}, {VECTOR_TYPE} {accumulator})"


def store(vector: str, pointer: str, lanes: int = VECTOR) -> str:
    """Store `vector`'s first `lanes` lanes at `pointer` (under a mask when not all)."""
    if lanes == VECTOR:
        return f"  store {VECTOR_TYPE} {vector}, ptr {pointer}, align 4"
    return f"  call void @llvm.masked.store.v16f32.p0({VECTOR_TYPE} {vector}, ptr {pointer}, i32 4, <16 x i1> {mask(lanes)})"


def store_first(vector: str, pointer: str, lanes: int) -> list[str]:
    """Lines storing `vector`'s first `lanes` lanes at `pointer` as a vector of `lanes` floats
    (`vector.first`): plain stores, where AVX2's masked store (`store`) is microcoded (Zen 1)."""
    first = ", ".join(f"i32 {lane}" for lane in range(lanes))
    return [
        f"  {vector}.first = shufflevector {VECTOR_TYPE} {vector}, {VECTOR_TYPE} poison, <{lanes} x i32> <{first}>",
        f"  store <{lanes} x float> {vector}.first, ptr {pointer}, align 4",
    ]


def load_first(result: str, pointer: str, lanes: int) -> list[str]:
    """Lines loading `lanes` floats at `pointer` into the first lanes of `result` (the others
    zero) as a vector of `lanes` floats (`result.first`): a plain load, where AVX2's masked load
    (`load`) is microcoded (Zen 1); all `lanes` floats must be inside the buffer."""
    first = ", ".join(f"i32 {min(lane, lanes)}" for lane in range(VECTOR))
    return [
        f"  {result}.first = load <{lanes} x float>, ptr {pointer}, align 4",
        f"  {result} = shufflevector <{lanes} x float> {result}.first, <{lanes} x float> zeroinitializer, <{VECTOR} x i32> <{first}>",
    ]


def load(result: str, pointer: str, lanes: int | Sequence[bool] = VECTOR, fill: str = "zeroinitializer") -> str:
    """Load floats at `pointer` into `result`: the first `lanes`, or the lanes where `lanes` is
    true (under a mask, the other lanes `fill`, a vector constant, when not all)."""
    valid = [lane < lanes for lane in range(VECTOR)] if isinstance(lanes, int) else list(lanes)
    if all(valid):
        return f"  {result} = load {VECTOR_TYPE}, ptr {pointer}, align 4"
    return (
        f"  {result} = call {VECTOR_TYPE} @llvm.masked.load.v16f32.p0(ptr {pointer}, i32 4, <16 x i1> {lane_mask(valid)}, "
        f"{VECTOR_TYPE} {fill})"
    )


def mask(lanes: int) -> str:
    return lane_mask([lane < lanes for lane in range(VECTOR)])


def lane_mask(valid: Sequence[bool]) -> str:
    """An <16 x i1> constant, true in the lanes where `valid` is."""
    return "<" + ", ".join(f"i1 {int(bit)}" for bit in valid) + ">"
