"""The packed GEMM ukernel: out[rows, n] = a[rows, k] @ b[k, n] in f32, with b packed once, at compile time.

A matmul whose b is a constant (the weights of a dense layer) does not need b in the layout it
was given. As in IREE's data-tiled matmuls (a packed operand and a ukernel call), the cpu
lowering passes b packed into panels of PANEL columns (`pack_panels`), each panel stored
k-major so that one step of k reads its PANEL floats contiguously, and calls a ukernel
generated for the shapes:

    func.call @graphopt_sgemm_packed_128x768x3072(%a, %b_panels, %out)
        : (memref<128x768xf32>, memref<2359296xf32>, memref<128x3072xf32>) -> ()
    func.func private @graphopt_sgemm_packed_128x768x3072(memref<128x768xf32>, memref<2359296xf32>,
        memref<128x3072xf32>) attributes {graph.ukernel}

The JIT links in the ukernel's LLVM IR (`ukernel_ir`, through `ukernels.py`), generated from the declared types: a's
leading dims are its rows. The ukernel computes tiles of ROWS x PANEL outputs in registers
(24 accumulators of 16 floats): each step of k loads 4 vectors of the panel, broadcasts one a
element per row and issues 4 FMAs per row. k runs in blocks of DEPTH, so the block of a panel
stays in cache while every row tile uses it (without AVX-512 blocks of CONFLICT_DEPTH on row-major
b whose rows map to too few L1 sets); without AVX-512 many rows of a on packed b run in
blocks of ROW_BLOCK within a k block, so that a's block stays in L2 while every panel uses it,
and with AVX-512 the rows on row-major b whose k block fits in L2 run in blocks of
ROW_MAJOR_ROW_BLOCK (`_Ukernel._row_block`); loops (k block, row block, panel, row tile).
Fewer rows than a tile (a dense layer at batch 1) take several panels per tile
(`FEW_ROWS_PANELS`) and k in one block. The last panel holds the
remaining columns, rounded up to 16 with zeros, and stores its last vector under a
mask; the last row tile takes the remaining rows. Tile sizes were picked by measurement: 6x64
tiles and 256-deep blocks ran 1.1-1.3x faster than OpenBLAS (NumPy's matmul, which packs b at
every call) on 128x768x3072, 128x3072x768 and 256x1024x1024, at 1 thread; 12x32 tiles were
slower than OpenBLAS. Those were AVX-512 hosts: without AVX-512 (AVX2, 16 registers of 8 floats)
a tile is 6x16 (PANEL), since 6x64 tiles spilled their accumulators and ran 1.6-2.1x slower.

Since 2026-11-25 the same generator also writes the ukernel on a b that is not packed: b
row-major (`ROW_MAJOR`: any k x n, rows of n floats; a tile's last vector of a row is loaded
under a mask, so nothing past b is read), the way a conv runs as a GEMM (linalg/conv.py:
out[O, OH * OW] = w as [O, C * KH * KW] @ x as [C, H * W] for a 1x1 of stride 1, or @ an
im2col buffer [C * KH * KW, OH * OW]). It is called as the conv ukernels are (`ukernels.py`):
b of each image first, a (w, whole), the tile epilogue's operands (`tile_epilogue.py`; a row
of a and out is an output channel, so per-channel values are per row), then out; the name
carries the epilogue and every operand's shape:

    func.call @graphopt_sgemm_rowmajor_eaddAP0_1x512x7x7_2048x512x1x1_2048x1x1_1x2048x7x7(%x, %w, %bias, %out)
        : (memref<1x512x7x7xf32>, memref<2048x512x1x1xf32>, memref<2048x1x1xf32>, memref<1x2048x7x7xf32>) -> ()

b holds images x k x n floats, a rows x k (its first dim counts rows), out images x rows x n;
the ukernel loops over images, then as above, and applies the epilogue to the tiles of the
last k block. A grouped conv (since 2026-11-27, 1x1s) has the same call: b holds groups x k x
n floats an image (groups = b's floats an image over k x n: x's channels over w's), and each
image runs one GEMM per group, out's rows of group g = a's rows of group g @ b's group g, the
epilogue's per-channel values read at the group's rows. A tile whose last vector would hold
one column (n of 49, a 7x7 output: 3 vectors and one lane) computes that column as a dot
product along k per row, 16 steps of k at a time (b's column gathered), rather than an FMA per
row and k step for one useful product: the 7x7 convs of ResNet-50 ran 213-221 GFLOP/s against
195-199 (benchmarks/conv_gemm.py).

A chunk of a conv's output positions (`row_split.position_split`, since 2026-11-28) calls the
row-major ukernel for its columns (`columns_chunk_name`: the whole call's name, then `_n<columns>`)
on b, the residual and out from its first column, whole in type: their rows stay the whole n
floats apart (`_Ukernel`'s b_stride and out_stride). A chunk of whole output rows of a conv on
an im2col copy passes its own copy of its columns as b: the rows of an im2col copy [N, C, KH,
KW, OH, OW] lie OH x OW floats apart (n for a whole copy, the chunk's columns for a chunk's).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering import tile_epilogue
from graphopt.lowering.llvm_text import (
    VECTOR,
    VECTOR_TYPE,
    LLVMText,
    broadcast,
    fma,
    host_has_avx512,
    load,
    prefetch_next_tile_row,
    store,
)

PANEL = 64 if host_has_avx512() else 16
"""Columns of b per panel: 4 vectors of 16 floats with AVX-512 (a 6x64 tile: 24 accumulators of
its 32 registers), else one vector of 16 floats (6x16: 12 accumulators of AVX2's 16 registers of
8 floats; 6x64 tiles spilled there and ran 1.6-2.1x slower)."""
PREFETCH_B = not host_has_avx512()
"""Whether, on row-major b (a conv), each k step of a tile prefetches b's line of the next panel
(`_prefetches_b`): b's rows lie n floats apart, a panel's k lines are strided streams, and few
rows (MobileNet-v2's projection 1x1s: 24 and 32 output channels, 4-6 row tiles a panel) do not
hide their misses (Zen 1: 144->24 at 56 1.05x, 96->48 at 56 1.07x, 192->32 at 28 1.36x
faster; 64->256 at 56, 128->512 at 28, 256->64 at 56 unchanged). AVX-512's IR is unchanged."""
PREFETCH_B_FAR_LINE = PREFETCH_B
"""Whether, where b's rows do not start on lines and lie at least a page apart
(`_Ukernel._prefetches_b_far_line`), the prefetch of the next panel (`PREFETCH_B`) takes the
line of its vector's last float rather than its first. Such a vector spans two lines; its first
is the current panel's second, already loaded, so the line the next panel would still miss is
the other, and the hardware's stride prefetcher does not follow strides across pages.
SqueezeNet's 1x1s at 55x55 (rows of 3025 floats, 12100 bytes) on 2026-11-28 (2-core EPYC
znver1, AVX2, 1 thread, both compiled in one process): in the model's profile 128->16 596 ->
466 us, 64->16 260 -> 182 us, 16->64 254 -> 234 us; alone (+ bias + relu, x from memory, ours /
ORT) 64->16 0.81x -> 0.72-0.76x, 16->64 0.99-1.15x -> 0.87-0.91x, 64->64 0.97-0.99x -> 0.94x,
but 128->16 0.82-0.89x -> 0.86-0.94x. At 27x27 (2916 bytes apart, within a page) the far line
took 128->32 and 256->32 4-16% longer in the model: they keep the first line. AVX-512's IR is
unchanged (PREFETCH_B off)."""
PREFETCH_B_ROWS_AHEAD = 16
"""Steps of k ahead at which each k step of a tile on row-major b (a conv) prefetches the lines of
b its vectors will read (`_Ukernel._prefetches_b_rows_ahead`; 0: none). b's rows lie n floats
apart, a stride the hardware prefetchers do not follow across pages, and in a model b (x) is
cold, or at 2 threads partly written by the other core. Measured on 2026-11-29 (Emerald Rapids,
AVX-512; each step in the model's plan order, both plans in one process, interleaved, two
runs), none -> 16: at 2 threads ResNet-50's 512->128 at 28 0.845 and 0.859, 256->64 at 56 0.869
and 0.893, 256->128 at 56 0.927 and 0.948, 512->256 at 28 0.92, the conv GEMM steps' sum 0.980
and 0.975; at 1 thread 256->64 at 56 0.90 and 0.95, 512->128 at 28 0.965, the sum 0.989 and
0.995. 32 and 8 steps ahead did no better than 16."""
PREFETCH_A = True
"""Whether, on row-major b (a conv) of one panel of columns or fewer (`_Ukernel._prefetches_a`),
each k step of a full row tile prefetches a line of the next row tile's a: the conv's weights,
read once and cold in a model (ResNet-50's 512->2048 1x1s at 7x7: 4 MB for 49 columns). Measured
on 2026-11-29 (Emerald Rapids, AVX-512; each step in ResNet-50's plan order, both plans in one
process, interleaved, two runs): 512->2048 at 7 0.843 and 0.848 at 1 thread, 0.860 and 0.868 at
2; 2048->512 at 7 0.93 and 0.95-0.98; 1024->2048 1x1/2 at 14 (49 columns) 0.96; the steps' sum
0.98-0.99; DenseNet-121's 1x1s at 7 0.88-0.99, Inception-v2's 0.94-0.98. The eighteenth
session's version prefetched on every conv GEMM: its 1x1s of many panels, which read a again
from cache for each panel, ran 1.00-1.04x (the prefetch takes a load slot) and the steps' sum
did not move (1.005)."""
ROWS = 6
"""Rows of a per register tile."""
DEPTH = 256
"""Steps of k per block."""
PAGE_FLOATS = 1024
"""Floats per 4 KB page."""
L1_SETS, L1_WAYS, LINE_FLOATS = 64, 8, 16
"""The L1 data cache the row-major k blocks are sized for (32 KB, 8 ways of 64-byte lines: Zen 1's,
and most x86 cores')."""
CONFLICT_DEPTH = None if host_has_avx512() else 64
"""Steps of k per block on row-major b (a conv) whose rows are a whole number of lines apart and
whose panel's DEPTH lines fall into L1 sets that cannot hold them (`_Ukernel._depth`): a
56x56 output (rows 196 lines apart: 16 of the 64 sets, 128 lines) or 32x32 (64 lines apart:
one set). On 2026-11-28 (2-core EPYC znver1, AVX2, conv + bias + relu, 1 thread, interleaved
with ONNX Runtime's Conv + Relu, ours / ORT) 64 steps took 256->64 at 56 from 0.93-0.96x to
0.90x, 192->64 at 56 0.91-0.96x to 0.89x, 256->128 at 56 1.00-1.01x to 0.94-0.96x, 128->128
at 56 0.97x to 0.94x, 512->64 at 32 1.12-1.17x to 0.98-1.00x; 128 steps helped less (0.98x
to 1.08x), 32 no more; rows 49 lines apart (28x28: all 64 sets) lost with 64 steps (0.85-0.88x
to 0.90-0.92x) and keep DEPTH. None with AVX-512 (not measured there: its IR is unchanged)."""
ROW_BLOCK = None if host_has_avx512() else 96
"""Rows of a per block within a k block (None: all rows) where b is packed and a has more than
ROWS_IN_L2 rows, so that a's block (ROW_BLOCK x DEPTH floats, 96 KB) stays in L2 while every
panel passes over it, rather than a's whole k block coming from L3 for every panel: 2048 x 1024
x 1000 ran 1.9x faster (docs/cpu-codegen.md). A multiple of ROWS. The conv GEMM (row-major b)
measured the same either way there (Zen 1, 96 rows); it has ROW_MAJOR_ROW_BLOCK."""
ROWS_IN_L2 = 256
"""Rows of a whose k block (256 KB at DEPTH 256: half of Zen 1's L2) stays in L2 unblocked."""
ROW_MAJOR_ROW_BLOCK = 24 if host_has_avx512() else None
"""Rows of a (output channels) per block within a k block on row-major b (a conv) where b's k
block, read again by every row block, is at most ROW_MAJOR_B_BYTES, so that it comes from L2:
a pass over the panels then stores 24 rows of out, not all of them. A multiple of ROWS. On
2026-11-28 (2-core Emerald Rapids, AVX-512, conv + bias + relu, 1 thread, interleaved, all rows
-> 24): SqueezeNet's 3->64 3x3/2 stem 0.574 -> 0.475 ms, 64->256 1x1 at 56 0.772 -> 0.686 ms,
16->128 at 55 0.218 -> 0.154 ms, 64->64 at 56 0.184 -> 0.177 ms; 12 and 48 rows did no better.
With b's block larger, its extra reads come from L3 and cost more than they save: 256->64 at 56
(3.2 MB) 0.754 -> 0.960 ms, 128->512 at 56 (1.6 MB) 4.02 -> 5.74 ms, 64->256 at 112 (3.2 MB)
4.06 -> 4.59 ms. Shapes whose out fits in L2 (192->64 at 28, 32->128 at 27, 256->1024 at 14)
ran the same either way. Without AVX-512 not measured: all rows, as before."""
ROW_MAJOR_B_BYTES = 1536 * 1024
"""The largest k block of row-major b (k block x n floats, in bytes) read by row blocks
(`ROW_MAJOR_ROW_BLOCK`): three quarters of Emerald Rapids' 2 MB L2 (Zen 4's L2 is 1 MB: not
measured there)."""
FEW_ROWS_PANELS = 1 if host_has_avx512() else 6
"""Packed panels per tile when a has fewer than ROWS rows (a matrix-vector product: one row, a
dense layer at batch 1): r rows take FEW_ROWS_PANELS // r panels, so that a tile still holds
about 12 accumulators whose FMAs do not wait on each other (one row of one panel: 2, each
waiting on the last)."""
PREFIX = "graphopt_sgemm_packed"
ROW_MAJOR_PREFIX = "graphopt_sgemm_rowmajor"
COLUMNS_MARK = "_n"
"""Ends the name of a row-major-b ukernel called for some of its columns (`columns_chunk_name`)."""
PANELS, ROW_MAJOR = "panels", "row-major"
"""The layouts of b: packed panels (`pack_panels`), or row-major k x n."""


def packs(a_type: Attribute, b_type: Attribute, out_type: Attribute) -> bool:
    """Whether a matmul of these types runs as the ukernel when its b is constant: all f32,
    b 2-D (a's leading dims then count as rows)."""
    types = (a_type, b_type, out_type)
    return all(t.get_element_type() == f32 for t in types) and len(b_type.get_shape()) == 2


def pack_panels(b: np.ndarray) -> np.ndarray:
    """b (k x n) as the ukernel reads it: n // PANEL panels of k x PANEL, then the remaining
    columns as one k x width panel, width rounded up to VECTOR with zeros; flat."""
    k, n = b.shape
    full = n // PANEL * PANEL
    panels = [b[:, :full].reshape(k, n // PANEL, PANEL).transpose(1, 0, 2).ravel()]
    if full < n:
        edge = np.zeros((k, _round_up(n - full, VECTOR)), b.dtype)
        edge[:, : n - full] = b[:, full:]
        panels.append(edge.ravel())
    return np.concatenate(panels)


def packed_size(k: int, n: int) -> int:
    return k * (n // PANEL * PANEL + _round_up(n % PANEL, VECTOR))


def name(types: Sequence[MemRefType]) -> str:
    """The ukernel's name for a call on memrefs (a, b panels, out): graphopt_sgemm_packed_<a's shape>xN,
    e.g. _8x2x3 for a 8x2, _2x4x2x3 for a 2x4x2 (one name, one declaration: one memref type of a)."""
    a_type, _, out_type = types
    return f"{PREFIX}_{'x'.join(map(str, a_type.get_shape()))}x{out_type.get_shape()[-1]}"


def row_major_name(types: Sequence[MemRefType], epilogue: Sequence[tile_epilogue.Step] = ()) -> str:
    """The name of the row-major-b ukernel for a call on memrefs (b, a, epilogue operands..., out)
    applying `epilogue` before each store."""
    shapes = "_".join("x".join(map(str, t.get_shape())) for t in types)
    steps = f"_e{tile_epilogue.token(epilogue)}" if epilogue else ""
    return f"{ROW_MAJOR_PREFIX}{steps}_{shapes}"


def is_row_major(name_: str) -> bool:
    """Whether `name_` is the row-major-b ukernel's (the conv GEMM's), not the packed one's."""
    return name_.startswith(f"{ROW_MAJOR_PREFIX}_")


def chunk_name(name_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel `name_` called on memrefs of other sizes (a chunk's rows, images
    or output channels)."""
    return row_major_name(types, _epilogue(name_)) if is_row_major(name_) else name(types)


def columns_chunk_name(name_: str, columns: int) -> str:
    """The name of the row-major-b ukernel `name_` called for `columns` of its columns (a chunk of
    output positions: `row_split.position_split`), on its operands whole in type from the chunk's
    first column: `name_` then `_n<columns>`; out's rows stay their whole n floats apart, and
    b's too unless b is a chunk's own im2col copy (its columns apart)."""
    return f"{name_}{COLUMNS_MARK}{columns}"


def _columns(name_: str) -> int | None:
    """The columns of a `columns_chunk_name`, None for a whole call's name."""
    match = re.search(rf"{COLUMNS_MARK}([0-9]+)$", name_)
    return int(match[1]) if match else None


def _epilogue(name_: str) -> tuple[tile_epilogue.Step, ...]:
    """The epilogue steps in a row-major-b ukernel's name."""
    match = re.match(rf"{ROW_MAJOR_PREFIX}_e([a-zA-Z0-9.]+)_", name_)
    return tile_epilogue.parse(match[1]) if match else ()


def _round_up(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


def ukernel_ir(name_: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name_(ptr a, ptr b_panels, ptr out)` for these memref types, or
    for the row-major-b ukernel `void @name_(ptr b, ptr a, <the tile epilogue's operands>, ptr out)`."""
    if is_row_major(name_):
        b_type, a_type, *_, out_type = types
        a_shape = a_type.get_shape()
        k, n = math.prod(a_shape[1:]), math.prod(out_type.get_shape()[2:])
        b_shape = b_type.get_shape()
        b_stride = math.prod(b_shape[4:]) if len(b_shape) == 6 else n  # an im2col copy's (a chunk's) columns
        groups = math.prod(b_shape[1:]) // (k * b_stride)
        sizes = (out_type.get_shape()[0], a_shape[0] // groups, k, _columns(name_) or n)
        return _Ukernel(name_, ROW_MAJOR, *sizes, _epilogue(name_), out_stride=n, groups=groups, b_stride=b_stride).text()
    a_type, _, out_type = types
    return strided_ukernel_ir(name_, math.prod(a_type.get_shape()[:-1]), a_type.get_shape()[-1], out_type.get_shape()[-1])


def writes_over_residual(name_: str, types: Sequence[MemRefType]) -> bool:
    """Whether the row-major-b ukernel `name_` on (b, a, <the tile epilogue's operands>, out) of
    these types stays correct with out the buffer of its epilogue's residual: where k runs in
    one block in the call and in any chunk of it (k at most DEPTH and CONFLICT_DEPTH,
    `_Ukernel._depth`), each tile reads its residual lines, then stores out's; with more
    blocks, out holds partial sums before the last block reads the residual."""
    k = math.prod(types[1].get_shape()[1:])
    return is_row_major(name_) and k <= min(depth for depth in (DEPTH, CONFLICT_DEPTH) if depth)


def strided_ukernel_ir(name_: str, rows: int, k: int, n: int, a_stride: int | None = None, out_stride: int | None = None) -> str:
    """LLVM IR defining `void @name_(ptr a, ptr b_panels, ptr out)`: out = a @ b on b's panels,
    a's rows `a_stride` floats apart and out's `out_stride` floats apart (default k and n)."""
    return _Ukernel(name_, PANELS, 1, rows, k, n, a_stride=a_stride, out_stride=out_stride).text()


class _Ukernel(LLVMText):
    """The ukernel's IR. a's rows lie `a_stride` floats apart (k: contiguous), out's rows
    `out_stride` floats apart (n), so that a and out may be strided views (`strided_ukernel_ir`: the batched GEMM), and
    row-major b's rows `b_stride` floats apart (n; more for a chunk of b's columns). With
    `groups` (row-major b: a grouped conv), each image runs one GEMM per group g on `rows` rows:
    out[g rows..] = a[g rows..] @ b[g], b's groups k x n floats apart."""

    def __init__(
        self, name: str, layout: str, images: int, rows: int, k: int, n: int, epilogue: Sequence[tile_epilogue.Step] = (),
        a_stride: int | None = None, out_stride: int | None = None, groups: int = 1, b_stride: int | None = None,
    ):
        super().__init__()
        self.name, self.layout, self.images, self.rows, self.k, self.n = name, layout, images, rows, k, n
        self.groups = groups
        self.epilogue = tuple(epilogue)
        self.a_stride, self.out_stride = a_stride or k, out_stride or n
        self.b_stride = b_stride or n

    def text(self) -> str:
        if self._prefetches() or self._prefetches_b() or self._prefetches_b_rows_ahead() or self._prefetches_a():
            self.emit(tile_epilogue.PREFETCH_DECLARATION)
        tile_rows = sorted({r for r in (ROWS, self.rows % ROWS) if r and r <= self.rows})
        tile_columns = sorted({c for c in (PANEL, self.n % PANEL) if c and c <= self.n})
        for r in tile_rows:
            for c in tile_columns:
                self._tile(r, c)
        if self._panel_group() > 1:
            self._tile(self.rows, self._panel_group() * PANEL)
        self._main()
        return self.ir()

    # --- one register tile: out[r rows, c columns] (+)= a[r rows, kc] @ b[kc, c columns] ---

    def _tile_name(self, rows: int, columns: int) -> str:
        return f"@{self.name}.tile{rows}x{columns}"

    def _tile(self, rows: int, columns: int) -> None:
        """The tile's b: k-major steps of a panel, or rows of b (the last vector under a mask).
        With an epilogue, %last says the k block is the last: the tile stores the epilogue's
        result, else the partial sums."""
        vectors = -(-columns // VECTOR)
        row_major = self.layout == ROW_MAJOR
        stride = self.b_stride if row_major else min(vectors * VECTOR, PANEL)  # floats per k step of b

        def b_offset(v: int) -> int:
            """Vector v's offset in b's k step: past PANEL columns, in the next panel (k x PANEL floats on)."""
            return v * VECTOR if row_major else v * VECTOR // PANEL * self.k * PANEL + v * VECTOR % PANEL

        def lanes(v: int) -> int:
            return columns - v * VECTOR if v == vectors - 1 else VECTOR

        # the vectors the k loop computes: a last vector of one lane (7x7 outputs: 49 = 3 x 16 + 1;
        # with PANEL 16, 49 = 3 x 16 + a tile of one column), which would take one FMA per row for
        # one useful product, is a dot product along k per row after the loop instead (`_dot_column`)
        dot = row_major and lanes(vectors - 1) == 1
        looped = range(vectors - 1 if dot else vectors)

        e = self.emit
        epilogue = f", i1 %last{tile_epilogue.parameters(self.epilogue)}" if self.epilogue else ""
        ahead = (", i64 %ahead" if self._prefetches() else "") + (", i64 %b.ahead" if self._prefetches_b() else "")
        ahead += ", i64 %a.ahead" if self._prefetches_a() else ""
        self.define(
            f"define internal void {self._tile_name(rows, columns)}(ptr %a, ptr %b, ptr %c, i64 %kc, i1 %first{ahead}{epilogue}) alwaysinline {{"
        )
        if self._prefetches():
            # each vector's first float, and its last where rows do not start on a line
            ends = (0,) if self.out_stride % VECTOR == 0 else (0, VECTOR - 1)
            offsets = [r * self.out_stride + v * VECTOR + end for r in range(rows) for v in range(vectors) for end in ends]
            tile_epilogue.prefetch_next_tile(self, self.epilogue, "%c", offsets, "%ahead")
        for r in range(rows):
            for v in range(vectors):
                e(f"  %c.{r}.{v} = getelementptr float, ptr %c, i64 {r * self.out_stride + v * VECTOR}")
                e(load(f"%old.{r}.{v}", f"%c.{r}.{v}", lanes(v)))
                e(f"  %init.{r}.{v} = select i1 %first, {VECTOR_TYPE} zeroinitializer, {VECTOR_TYPE} %old.{r}.{v}")
        if self._prefetches_b_rows_ahead() and looped:
            e(f"  %kc.ahead = sub i64 %kc, {PREFETCH_B_ROWS_AHEAD}")
        e("  br label %loop")
        e("loop:")
        e("  %k = phi i64 [0, %entry], [%k.next, %loop]")
        for r in range(rows):
            for v in looped:
                e(f"  %acc.{r}.{v} = phi {VECTOR_TYPE} [%init.{r}.{v}, %entry], [%sum.{r}.{v}, %loop]")
        e(f"  %b.k = mul i64 %k, {stride}")
        for v in looped:
            e(f"  %b.at.{v} = add i64 %b.k, {b_offset(v)}")
            e(f"  %b.ptr.{v} = getelementptr float, ptr %b, i64 %b.at.{v}")
            e(load(f"%b.{v}", f"%b.ptr.{v}", lanes(v) if row_major else VECTOR))
        if self._prefetches_b() and looped:
            e("  %b.next = getelementptr float, ptr %b.ptr.0, i64 %b.ahead")
            e("  call void @llvm.prefetch.p0(ptr %b.next, i32 0, i32 3, i32 1)")
        if self._prefetches_b_rows_ahead() and looped:  # the block's last steps their own row: never past b
            e("  %b.down.last = icmp sge i64 %k, %kc.ahead")
            e(f"  %b.down = select i1 %b.down.last, i64 0, i64 {PREFETCH_B_ROWS_AHEAD * stride}")
            for v in looped:
                e(f"  %b.down.{v} = getelementptr float, ptr %b.ptr.{v}, i64 %b.down")
                e(f"  call void @llvm.prefetch.p0(ptr %b.down.{v}, i32 0, i32 3, i32 1)")
        if self._prefetches_a():
            self.lines += prefetch_next_tile_row("a", "%k", rows, self.a_stride, 3)
        for r in range(rows):
            e(f"  %a.at.{r} = add i64 %k, {r * self.a_stride}")
            e(f"  %a.ptr.{r} = getelementptr float, ptr %a, i64 %a.at.{r}")
            e(f"  %a.{r} = load float, ptr %a.ptr.{r}, align 4")
            self.lines += broadcast(f"%a.all.{r}", f"%a.{r}")
            for v in looped:
                e(fma(f"%sum.{r}.{v}", f"%a.all.{r}", f"%b.{v}", f"%acc.{r}.{v}"))
        e("  %k.next = add i64 %k, 1")
        e("  %k.done = icmp eq i64 %k.next, %kc")
        e("  br i1 %k.done, label %exit, label %loop")
        e("exit:")
        if dot:
            self._dot_column(rows, vectors - 1)
        if self.epilogue:
            e("  br i1 %last, label %finish, label %partial")
            e("partial:")
        for r in range(rows):
            for v in range(vectors):
                e(store(f"%sum.{r}.{v}", f"%c.{r}.{v}", lanes(v)))
        if self.epilogue:
            e("  ret void")
            e("finish:")
            finish = tile_epilogue.TileEpilogue(self, self.epilogue)
            for r in range(rows):
                for v in range(vectors):
                    result = finish.apply(f"%sum.{r}.{v}", r, r * self.out_stride + v * VECTOR, lanes(v))
                    e(store(result, f"%c.{r}.{v}", lanes(v)))
        self.end()

    def _prefetches(self) -> bool:
        """Whether the tiles prefetch the next row tile's out and residual lines
        (`tile_epilogue.prefetch_next_tile`): on row-major b (a conv), whose row tiles' lines
        lie a row of out apart, strided streams that the hardware prefetchers do not follow."""
        return tile_epilogue.PREFETCH and self.layout == ROW_MAJOR

    def _prefetches_b(self) -> bool:
        """Whether each k step of the tiles prefetches b's line of the next panel (`PREFETCH_B`):
        `b_ahead` of `_row_tiles`, PANEL floats, or 0 in the last panel (so nothing past b's rows);
        see `_prefetches_b_far_line` for rows off lines a page apart."""
        return PREFETCH_B and self.layout == ROW_MAJOR

    def _prefetches_b_rows_ahead(self) -> bool:
        """Whether each k step of the tiles prefetches the lines of b that its vectors read
        PREFETCH_B_ROWS_AHEAD steps on (in the block's last steps, their own): on row-major b (a
        conv), whose rows lie n floats apart, too far for the hardware's stride prefetcher."""
        return PREFETCH_B_ROWS_AHEAD > 0 and self.layout == ROW_MAJOR

    def _prefetches_a(self) -> bool:
        """Whether each k step of the tiles prefetches a line of the next row tile's a
        (`PREFETCH_A`): on row-major b of one panel or fewer, where each row tile of a is read by
        one tile only and a (a conv's weights, cold in a model) streams from memory; with more
        panels the tiles of the next panels read it again from cache."""
        return PREFETCH_A and self.layout == ROW_MAJOR and self.n <= PANEL

    def _prefetches_b_far_line(self) -> bool:
        """Whether the tiles' prefetch of b (`_prefetches_b`) takes the line of the next panel's
        last float (`PREFETCH_B_FAR_LINE`): b_ahead is then that float's offset from the panel,
        the last float of b's row in the last panels (so nothing past b's rows)."""
        off_lines = self.b_stride % LINE_FLOATS != 0
        return PREFETCH_B_FAR_LINE and self._prefetches_b() and off_lines and self.b_stride >= PAGE_FLOATS

    def _dot_column(self, rows: int, v: int) -> None:
        """%sum.<r>.<v> for a vector `v` of one lane: out[r, 16 v] (+)= the dot product of a's
        row r and b's column 16 v over the block's %kc steps, 16 steps at a time (b's column
        gathered, a's rows loaded, both under a mask past %kc), summed across lanes at the end."""
        e = self.emit
        lane_indices = "<" + ", ".join(f"i64 {lane}" for lane in range(VECTOR)) + ">"
        splat = lambda name, scalar: [
            f"  {name}.one = insertelement <16 x i64> poison, i64 {scalar}, i64 0",
            f"  {name} = shufflevector <16 x i64> {name}.one, <16 x i64> poison, <16 x i32> zeroinitializer",
        ]
        e("  br label %dot")
        e("dot:")
        e("  %j = phi i64 [0, %exit], [%j.next, %dot]")
        for r in range(rows):
            e(f"  %dot.acc.{r} = phi {VECTOR_TYPE} [zeroinitializer, %exit], [%dot.sum.{r}, %dot]")
        e("  %j.left.scalar = sub i64 %kc, %j")
        self.lines += splat("%j.left", "%j.left.scalar") + splat("%j.all", "%j")
        e(f"  %j.valid = icmp ult <16 x i64> {lane_indices}, %j.left")
        e(f"  %j.steps = add <16 x i64> %j.all, {lane_indices}")
        e(f"  %b.rows = mul <16 x i64> %j.steps, splat (i64 {self.b_stride})")
        e(f"  %b.column = getelementptr float, ptr %b, i64 {v * VECTOR}")
        e("  %b.column.ptrs = getelementptr float, ptr %b.column, <16 x i64> %b.rows")
        e(f"  %b.column.values = call {VECTOR_TYPE} @llvm.masked.gather.v16f32.v16p0(<16 x ptr> %b.column.ptrs, i32 4, "
          f"<16 x i1> %j.valid, {VECTOR_TYPE} zeroinitializer)")
        for r in range(rows):
            e(f"  %dot.a.at.{r} = add i64 %j, {r * self.a_stride}")
            e(f"  %dot.a.ptr.{r} = getelementptr float, ptr %a, i64 %dot.a.at.{r}")
            e(f"  %dot.a.{r} = call {VECTOR_TYPE} @llvm.masked.load.v16f32.p0(ptr %dot.a.ptr.{r}, i32 4, <16 x i1> %j.valid, "
              f"{VECTOR_TYPE} zeroinitializer)")
            e(fma(f"%dot.sum.{r}", f"%dot.a.{r}", "%b.column.values", f"%dot.acc.{r}"))
        e(f"  %j.next = add i64 %j, {VECTOR}")
        e("  %j.more = icmp ult i64 %j.next, %kc")
        e("  br i1 %j.more, label %dot, label %dot.exit")
        e("dot.exit:")
        for r in range(rows):
            e(f"  %dot.{r} = call reassoc float @llvm.vector.reduce.fadd.v16f32(float -0.0, {VECTOR_TYPE} %dot.sum.{r})")
            e(f"  %dot.old.{r} = extractelement {VECTOR_TYPE} %init.{r}.{v}, i64 0")
            e(f"  %dot.total.{r} = fadd float %dot.old.{r}, %dot.{r}")
            e(f"  %sum.{r}.{v} = insertelement {VECTOR_TYPE} zeroinitializer, float %dot.total.{r}, i64 0")

    # --- the ukernel: loops over images, k blocks, panels and row tiles ---

    def _main(self) -> None:
        if self.layout == ROW_MAJOR:
            self.define(f"define void @{self.name}(ptr noalias %b, ptr noalias %a{tile_epilogue.parameters_and_out(self.epilogue)}) {{")
        else:
            self.define(f"define void @{self.name}(ptr noalias %a, ptr noalias %b, ptr noalias %out) {{")
        depth = self._depth()
        blocks = -(-self.k // depth)

        def image(i: str) -> None:
            b_i = self.pointer("%b", self.value(f"mul i64 {i}, {self.groups * self.k * self.b_stride}"))
            out_i = self.pointer("%out", self.value(f"mul i64 {i}, {self.groups * self.rows * self.out_stride}"))
            if self.groups == 1:
                self.loop(blocks, lambda kb: k_block(kb, "%a", b_i, out_i, "0"))
            else:
                self.loop(self.groups, lambda g: group(g, b_i, out_i))

        def group(g: str, b_i: str, out_i: str) -> None:
            channel = self.value(f"mul i64 {g}, {self.rows}")
            a_g = self.pointer("%a", self.value(f"mul i64 {channel}, {self.k}"))
            b_g = self.pointer(b_i, self.value(f"mul i64 {g}, {self.k * self.b_stride}"))
            out_g = self.pointer(out_i, self.value(f"mul i64 {channel}, {self.out_stride}"))
            self.loop(blocks, lambda kb: k_block(kb, a_g, b_g, out_g, channel))

        def k_block(kb: str, a: str, b_i: str, out_i: str, channel: str) -> None:
            k0 = self.value(f"mul i64 {kb}, {depth}")
            left = self.value(f"sub i64 {self.k}, {k0}")
            short = self.value(f"icmp ult i64 {left}, {depth}")
            kc = self.value(f"select i1 {short}, i64 {left}, i64 {depth}")
            flags = (self.value(f"icmp eq i64 {kb}, 0"), self.value(f"icmp eq i64 {kb}, {blocks - 1}"))
            a_k = self.pointer(a, k0)
            block_rows = self._row_block()
            full_blocks, rest_rows = divmod(self.rows, block_rows)

            def row_block(row: int | str, rows: int) -> None:
                a_m = self.pointer(a_k, self._times(row, self.a_stride))
                out_m = self.pointer(out_i, self._times(row, self.out_stride))
                block_channel = channel if row == 0 else self.value(f"add i64 {channel}, {row}")
                panels(a_m, out_m, b_i, k0, kc, flags, rows, block_channel)

            if full_blocks == 1 and not rest_rows:
                row_block(0, block_rows)
            else:
                self.loop(full_blocks, lambda mb: row_block(self.value(f"mul i64 {mb}, {block_rows}"), block_rows))
                if rest_rows:
                    row_block(full_blocks * block_rows, rest_rows)

        def panels(a_m: str, out_m: str, b_i: str, k0: str, kc: str, flags: tuple[str, str], rows: int, channel: str) -> None:
            full_panels = self.n // PANEL
            group = self._panel_group()

            def panels_from(first: int | str, count: int) -> None:
                column = self._times(first, PANEL)
                b_p = self._panel(b_i, column, k0, PANEL)
                b_ahead = "0"
                if self._prefetches_b_far_line():
                    last_float = self.value(f"add i64 {column}, {PANEL + VECTOR - 1}")
                    inside = self.value(f"icmp ult i64 {last_float}, {self.n}")
                    clamped = self.value(f"select i1 {inside}, i64 {last_float}, i64 {self.n - 1}")
                    b_ahead = self.value(f"sub i64 {clamped}, {column}")
                elif self._prefetches_b():
                    if self.n % PANEL:
                        b_ahead = str(PANEL)
                    else:
                        has_next = self.value(f"icmp ult i64 {column}, {self.n - PANEL}")
                        b_ahead = self.value(f"select i1 {has_next}, i64 {PANEL}, i64 0")
                self._row_tiles(a_m, b_p, self.pointer(out_m, column), count * PANEL, kc, flags, rows, channel, b_ahead)

            self.loop(full_panels // group, lambda g: panels_from(self._times(g, group), group))
            for p in range(full_panels // group * group, full_panels):
                panels_from(p, 1)
            if self.n % PANEL:
                b_edge = self._panel(b_i, full_panels * PANEL, k0, _round_up(self.n % PANEL, VECTOR))
                c_edge = self.pointer(out_m, full_panels * PANEL)
                self._row_tiles(a_m, b_edge, c_edge, self.n % PANEL, kc, flags, rows, channel, "0")

        if self.images == 1:
            image("0")
        else:
            self.loop(self.images, image)
        self.end()

    def _panel(self, b: str, column: int | str, k0: str, width: int) -> str:
        """A pointer to b's columns from `column` (a multiple of PANEL) at row k0: in a packed
        panel (of `width` floats a row), or in row-major b."""
        if self.layout == ROW_MAJOR:
            return self.pointer(b, self.value(f"add i64 {self.value(f'mul i64 {k0}, {self.b_stride}')}, {column}"))
        start = self.value(f"mul i64 {column}, {self.k}")
        return self.pointer(b, self.value(f"add i64 {start}, {self.value(f'mul i64 {k0}, {width}')}"))

    def _depth(self) -> int:
        """Steps of k per block: all of k where panels are grouped for few rows (one row tile uses
        each block of b), CONFLICT_DEPTH where row-major b's panel of DEPTH lines overfills the
        L1 sets its rows map to, else DEPTH."""
        if self._panel_group() > 1:
            return self.k
        if CONFLICT_DEPTH and self.layout == ROW_MAJOR and self.b_stride % LINE_FLOATS == 0:
            sets = L1_SETS // math.gcd(self.b_stride // LINE_FLOATS, L1_SETS)
            if sets * L1_WAYS < DEPTH:
                return CONFLICT_DEPTH
        return DEPTH

    def _row_block(self) -> int:
        """Rows of a per block within a k block: ROW_BLOCK on packed b with more than ROWS_IN_L2
        rows, ROW_MAJOR_ROW_BLOCK on row-major b whose k block is at most ROW_MAJOR_B_BYTES,
        else all rows (of a group)."""
        if self.layout == PANELS:
            return ROW_BLOCK if ROW_BLOCK and self.rows > ROWS_IN_L2 else self.rows
        b_block_bytes = min(self.k, self._depth()) * self.n * np.dtype(np.float32).itemsize
        if ROW_MAJOR_ROW_BLOCK and self.rows > ROW_MAJOR_ROW_BLOCK and b_block_bytes <= ROW_MAJOR_B_BYTES:
            return ROW_MAJOR_ROW_BLOCK
        return self.rows

    def _panel_group(self) -> int:
        """Packed panels per tile (`FEW_ROWS_PANELS`)."""
        return max(1, FEW_ROWS_PANELS // self.rows) if self.layout == PANELS and self.rows < ROWS else 1

    def _times(self, count: int | str, factor: int) -> int | str:
        """count * factor: a number for a number, else a value (count itself for a factor of 1)."""
        if isinstance(count, int):
            return count * factor
        if factor == 1:
            return count
        return self.value(f"mul i64 {count}, {factor}")

    def _row_tiles(
        self, a: str, b: str, c: str, columns: int, kc: str, flags: tuple[str, str], rows: int, channel: str,
        b_ahead: str = "0",
    ) -> None:
        """The tiles of `rows` rows of a and c (a row block's; with an epilogue, from output
        channel `channel`: the row block's first, in its group);
        `b_ahead`: floats from b to the line its tiles prefetch (`_prefetches_b`)."""
        tiles, rest = divmod(rows, ROWS)
        first, last = flags

        def call(rows: int, row: str, ahead: str = "0", a_ahead: str = "0") -> None:
            a_r = self.pointer(a, self.value(f"mul i64 {row}, {self.a_stride}"))
            c_r = self.pointer(c, self.value(f"mul i64 {row}, {self.out_stride}"))
            if self.epilogue:
                row_channel = row if channel == "0" else self.value(f"add i64 {channel}, {row}")
                epilogue = f", i1 {last}{tile_epilogue.arguments(self, self.epilogue, row_channel, c_r)}"
            else:
                epilogue = ""
            prefetch = (f", i64 {ahead}" if self._prefetches() else "") + (f", i64 {b_ahead}" if self._prefetches_b() else "")
            prefetch += f", i64 {a_ahead}" if self._prefetches_a() else ""
            self.emit(f"  call void {self._tile_name(rows, columns)}(ptr {a_r}, ptr {b}, ptr {c_r}, i64 {kc}, i1 {first}{prefetch}{epilogue})")

        def full_tile(t: str) -> None:
            """Tile t of the full ones; it prefetches the next full tile's lines, the last its own."""
            has_next = self.value(f"icmp ult i64 {t}, {tiles - 1}") if self._prefetches() or self._prefetches_a() else ""
            ahead, a_ahead = (
                self.value(f"select i1 {has_next}, i64 {ROWS * stride}, i64 0") if prefetches else "0"
                for stride, prefetches in ((self.out_stride, self._prefetches()), (self.a_stride, self._prefetches_a()))
            )
            call(ROWS, self.value(f"mul i64 {t}, {ROWS}"), ahead, a_ahead)

        self.loop(tiles, full_tile)
        if rest:
            call(rest, str(tiles * ROWS))
