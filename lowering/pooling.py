"""The pooling ukernel: an f32 max_pool2d or avg_pool2d read straight from x (no padded copy),
vectorized over output columns.

The cpu lowering calls a ukernel generated for the shapes, with the window, the strides, the
top/left padding and what it computes in its name (`max`, `avg`, or `avgpad`: an average with
count_include_pad):

    func.call @graphopt_spool_max_k3x3_s2x2_p1x1_1x64x112x112_1x64x56x56(%x, %out)
        : (memref<1x64x112x112xf32>, memref<1x64x56x56xf32>) -> ()

It is the depthwise convolution ukernel's code (`depthwise_conv.WindowUkernel`: blocks of
output rows per channel, vectors of 16 output columns, at stride 2 each input row's columns
loaded once and split into even and odd ones by shuffles, at strides 3 and 4 each tap's lanes
picked from them joined into one vector, no copy for the padding), with the
window reduced instead of multiplied: in a block, each input row's taps are combined once
into a row vector, which then joins the vector of every output row that reads it (a 3x3
window at stride 1 and blocks of 4 rows: 5 combines per output vector instead of 8). Lanes
outside x's row load as the identity (-inf for max, 0 for the average) and rows outside x are
skipped. The max is NaN when any tap is (as `linalg/pool.py`'s `_window_max`): `select(a > b,
a, b)` per tap (one vmaxps, which drops NaNs), and an unordered compare per pair of a row's
taps, or-ed into each output row's flag, selects NaN at the end. The average divides by the
window size or, without count_include_pad, by each output's taps inside x (a constant vector:
in a block function the rows inside x are known, and the vectors of a row that read its
padding are written out apart from the loop over the others).

Blocks take the depthwise ukernel's rows (`depthwise_conv.ROWS`: 4 output rows at stride 1,
1 at stride 2, 3 at stride 2 with windows of 5 rows or more: `TALL_STRIDE_2_ROWS`), picked
by measurement on these pools (2026-11-25, one thread, medians): at
stride 1, 2 rows ran 1.2x slower and 8 rows 1.0-1.3x slower than 4 (Inception's 3x3/1
average pools); at stride 2, 1, 2 or 3 rows ran within 5% of each other (ResNet-50's,
SqueezeNet's and ShuffleNet's 3x3/2 max pools). Dividing by the count (exact, as the
interpreter) ran as fast as multiplying by its reciprocal. At stride 2, combining an output
row's input rows column by column first and splitting the result into taps once (5 shuffles per
vector instead of 15) ran 0-10% slower on the same pools: they run at about 65 GB/s, bound by
the memory x streams from, not by shuffles. Against the loop nest of
`linalg/pool.py` the ukernel ran 1.3-3.7x faster on 3x3/2 max pools (ResNet-50's 1x64x112x112:
215 -> 61 us, about 65 GB/s; ONNX Runtime 118 us) and 5-6x on 3x3/1 average pools
(Inception's 1x192x28x28: 133 -> 26 us, ONNX Runtime 48 us); docs/cpu-codegen.md has the table.

Without AVX-512 (`depthwise_conv.in_lane_stride_2`) the stride-2 taps of windows wider than
IN_LANE_NARROWEST columns are the depthwise ukernel's in-lane ones (`_in_lane_taps`), whose
lanes hold the output columns in the order IN_LANE_ORDER: the max's NaN select works lane by
lane, the average's counts are built in that order, and one permute per register puts each
result back in column order before its store (`_in_column_order`). Blocks then have at least
IN_LANE_SHARED_ROWS rows where output rows share input rows. On the AMD EPYC znver1 host
(2026-11-28, one thread) the 3x3/2 max and average pools of SqueezeNet, ResNet-50, ShuffleNet
and Inception-v1 ran 1.17-1.47x faster than with the halves in blocks of one row
(docs/cpu-codegen.md, "Pools on AVX2: in-lane taps").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering.depthwise_conv import IN_LANE_ORDER, WindowUkernel
from graphopt.lowering.llvm_text import VECTOR, VECTOR_TYPE, store

PREFIX = "graphopt_spool"
MAX_TAPS = 64
"""The largest window the ukernel takes (its taps are unrolled per input row and vector)."""
MAX_COLUMN_STRIDE = 4
"""The largest column stride the ukernel takes (a stride above 2 picks each tap's lanes from
the row's pieces joined into one vector: 8 pieces at 4)."""
IN_LANE_NARROWEST = 2
"""The widest window (in columns) whose stride-2 taps stay even and odd halves on AVX2: a 2-wide
window's two taps are one row's halves, which LLVM sums with one cross-lane permute per vector
(vhaddps), where in-lane taps take two shuffles and the stores' permute (DenseNet's 2x2/2 average
pools ran 0.95-0.99x as fast in-lane on 2026-11-28)."""
IN_LANE_SHARED_ROWS = 2
"""Output rows per block (at least) for in-lane stride-2 taps (`WindowUkernel.in_lane`) when
consecutive output rows share input rows: each shared row's taps are shuffled and combined once
for both. On 2026-11-28 (AMD EPYC znver1, one thread) the 3x3/2 max and average pools of
SqueezeNet, ResNet-50, ShuffleNet and Inception-v1 ran 1.02-1.20x faster in blocks of 2 rows than
of 1 (3 rows: within 5% of 2, 9% slower on SqueezeNet's 64x111x111)."""
NAN = "0x7FF8000000000000"
MINUS_INF = "0xFFF0000000000000"


def applies(x_type: Attribute, out_type: Attribute, kernel: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a pool of these types and attributes runs as the ukernel: f32, a column stride of
    at most MAX_COLUMN_STRIDE, at most MAX_TAPS taps."""
    return (
        all(t.get_element_type() == f32 for t in (x_type, out_type))
        and strides[1] <= MAX_COLUMN_STRIDE
        and kernel[0] * kernel[1] <= MAX_TAPS
    )


def name(
    types: Sequence[MemRefType], kind: str, kernel: Sequence[int], strides: Sequence[int], padding: Sequence[int]
) -> str:
    """The ukernel's name for a call on memrefs (x, out) computing `kind`: "max", "avg" (the
    average over the taps inside x) or "avgpad" (over the whole window)."""
    (kh, kw), (sh, sw), (top, left) = kernel, strides, padding[:2]
    shapes = "_".join("x".join(map(str, t.get_shape())) for t in types)
    return f"{PREFIX}_{kind}_k{kh}x{kw}_s{sh}x{sw}_p{top}x{left}_{shapes}"


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk of its images or channels)."""
    return name(types, *_parameters(name_))


def _parameters(name_: str) -> tuple[str, tuple[int, int], tuple[int, int], tuple[int, int]]:
    match = re.match(rf"{PREFIX}_([a-z]+)_k(\d+)x(\d+)_s(\d+)x(\d+)_p(\d+)x(\d+)_", name_)
    kh, kw, sh, sw, top, left = (int(group) for group in match.groups()[1:])
    return match[1], (kh, kw), (sh, sw), (top, left)


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr x, ptr out)` for these memref types."""
    kind, window, strides, padding = _parameters(name_)
    x, out = types[0].get_shape(), types[-1].get_shape()
    return _PoolUkernel(name_, kind, x, window, out, strides, padding).text()


def _splat(literal: str) -> str:
    return f"splat (float {literal})"


class _PoolUkernel(WindowUkernel):
    def __init__(
        self, name_: str, kind: str, x: Sequence[int], window: Sequence[int], out: Sequence[int],
        strides: Sequence[int], padding: Sequence[int],
    ):
        super().__init__(name_, x, window, out, strides, (1, 1), padding, ())
        self.kind = kind
        self.FILL = _splat(MINUS_INF) if kind == "max" else "zeroinitializer"
        self.in_lane = self.in_lane and self.kernel_w > IN_LANE_NARROWEST

    def _block_rows(self) -> int:
        """The depthwise ukernel's rows, but at least IN_LANE_SHARED_ROWS for in-lane taps whose
        consecutive output rows share input rows."""
        rows = super()._block_rows()
        return max(rows, IN_LANE_SHARED_ROWS) if self.in_lane and self.kernel_h > self.sh else rows

    def _main_parameters(self) -> str:
        return ""

    def _block_parameters(self) -> str:
        return ""

    def _block_arguments(self, o: str, out_at: str) -> str:
        return ""

    def _start_block(self) -> None:
        pass

    def _combine(self, a: str, b: str) -> str:
        """max(a, b) (NaN handled apart: `_vector`), or a + b."""
        if self.kind != "max":
            return self.value(f"fadd {VECTOR_TYPE} {a}, {b}")
        greater = self.value(f"fcmp ogt {VECTOR_TYPE} {a}, {b}")
        return self.value(f"select <16 x i1> {greater}, {VECTOR_TYPE} {a}, {VECTOR_TYPE} {b}")

    def _any_nan(self, taps: list[str]) -> str:
        """Lanes where any of `taps` is NaN (one unordered compare per pair)."""
        pairs = [self.value(f"fcmp uno {VECTOR_TYPE} {a}, {b}") for a, b in zip(taps[::2], taps[1::2] + taps[-1:])]
        return functools.reduce(self._or, pairs)

    def _or(self, a: str, b: str) -> str:
        return self.value(f"or <16 x i1> {a}, {b}")

    def _vector(self, v: int | str, like: int, rows: int, inside: tuple[bool, ...]) -> None:
        """out[r, 16 v : 16 v + 16] for the block's rows r (see `WindowUkernel._vector`): each
        input row inside x combined once, then into every output row that reads it."""
        x = self.pointer("%x", v if v == 0 else self.value(f"mul i64 {v}, {VECTOR * self.sw}"))
        totals: list[str | None] = [None] * rows
        nans: list[str | None] = [None] * rows
        for i, row_inside in enumerate(inside):
            readers = [r for r in range(rows) if self._reads(r, i)]
            if not readers or not row_inside:
                continue
            taps = self._row_taps(x, like, i)
            combined = functools.reduce(self._combine, taps)
            nan = self._any_nan(taps) if self.kind == "max" else None
            for r in readers:
                totals[r] = combined if totals[r] is None else self._combine(totals[r], combined)
                if nan is not None:
                    nans[r] = nan if nans[r] is None else self._or(nans[r], nan)
        for r, total in enumerate(totals):
            if self.kind == "max":
                total = self.value(f"select <16 x i1> {nans[r]}, {VECTOR_TYPE} {_splat(NAN)}, {VECTOR_TYPE} {total}")
            else:
                total = self.value(f"fdiv {VECTOR_TYPE} {total}, {self._counts(like, r, inside)}")
            offset, lanes = self._out_offset(v, like, r)
            self.emit(store(self._in_column_order(total), self.pointer("%out", offset), lanes))

    def _counts(self, like: int, r: int, inside: tuple[bool, ...]) -> str:
        """The divisor of block row r's outputs in vector `like` (a vector of the loop over the
        vectors whose taps all lie inside x's row, or one written out): the window's size, or
        its taps inside x; in the taps' lane order (IN_LANE_ORDER with `in_lane`)."""
        if self.kind == "avgpad":
            return _splat(f"{float(self.kernel_h * self.kernel_w):e}")
        rows = sum(inside[i] for i in range(len(inside)) if self._reads(r, i))
        counts = []
        for column in IN_LANE_ORDER if self.in_lane else range(VECTOR):
            start = (like * VECTOR + column) * self.sw - self.left
            columns = sum(0 <= start + kw < self.width for kw in range(self.kernel_w))
            counts.append(float(max(rows * columns, 1)))
        return "<" + ", ".join(f"float {count:e}" for count in counts) + ">"
