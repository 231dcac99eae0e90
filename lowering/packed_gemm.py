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
stays in cache while every row tile uses it; loops (k block, panel, row tile). The last panel
holds the remaining columns, rounded up to 16 with zeros, and stores its last vector under a
mask; the last row tile takes the remaining rows. Tile sizes were picked by measurement: 6x64
tiles and 256-deep blocks ran 1.1-1.3x faster than OpenBLAS (NumPy's matmul, which packs b at
every call) on 128x768x3072, 128x3072x768 and 256x1024x1024, at 1 thread; 12x32 tiles were
slower than OpenBLAS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import MemRefType, f32
from xdsl.ir import Attribute

from graphopt.lowering.llvm_text import VECTOR, VECTOR_TYPE, LLVMText, broadcast, fma, load, store

PANEL = 64
"""Columns of b per panel: 4 vectors of 16 floats."""
ROWS = 6
"""Rows of a per register tile."""
DEPTH = 256
"""Steps of k per block."""
PREFIX = "graphopt_sgemm_packed"


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


def chunk_name(_: str, types: Sequence[MemRefType]) -> str:
    """The name of the ukernel called on memrefs of other sizes (a row chunk's)."""
    return name(types)


def _round_up(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


def ukernel_ir(name: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining `void @name(ptr a, ptr b_panels, ptr out)` for these memref types."""
    return _Ukernel(name, *_sizes(types)).text()


def _sizes(types: Sequence[MemRefType]) -> tuple[int, int, int]:
    """(rows, k, n) of a ukernel call on memrefs (a, b panels, out)."""
    a_type, _, out_type = types
    return math.prod(a_type.get_shape()[:-1]), a_type.get_shape()[-1], out_type.get_shape()[-1]


class _Ukernel(LLVMText):
    def __init__(self, name: str, rows: int, k: int, n: int):
        super().__init__()
        self.name, self.rows, self.k, self.n = name, rows, k, n

    def text(self) -> str:
        tile_rows = sorted({r for r in (ROWS, self.rows % ROWS) if r and r <= self.rows})
        tile_columns = sorted({c for c in (PANEL, self.n % PANEL) if c and c <= self.n})
        for r in tile_rows:
            for c in tile_columns:
                self._tile(r, c)
        self._main()
        return self.ir()

    # --- one register tile: out[r rows, c columns] (+)= a[r rows, kc] @ panel[kc, c] ---

    def _tile_name(self, rows: int, columns: int) -> str:
        return f"@{self.name}.tile{rows}x{columns}"

    def _tile(self, rows: int, columns: int) -> None:
        vectors = -(-columns // VECTOR)
        stride = vectors * VECTOR  # floats per k step of this panel

        def lanes(v: int) -> int:
            return columns - v * VECTOR if v == vectors - 1 else VECTOR

        e = self.emit
        self.define(f"define internal void {self._tile_name(rows, columns)}(ptr %a, ptr %b, ptr %c, i64 %kc, i1 %first) alwaysinline {{")
        for r in range(rows):
            for v in range(vectors):
                e(f"  %c.{r}.{v} = getelementptr float, ptr %c, i64 {r * self.n + v * VECTOR}")
                e(load(f"%old.{r}.{v}", f"%c.{r}.{v}", lanes(v)))
                e(f"  %init.{r}.{v} = select i1 %first, {VECTOR_TYPE} zeroinitializer, {VECTOR_TYPE} %old.{r}.{v}")
        e("  br label %loop")
        e("loop:")
        e("  %k = phi i64 [0, %entry], [%k.next, %loop]")
        for r in range(rows):
            for v in range(vectors):
                e(f"  %acc.{r}.{v} = phi {VECTOR_TYPE} [%init.{r}.{v}, %entry], [%sum.{r}.{v}, %loop]")
        e(f"  %b.k = mul i64 %k, {stride}")
        for v in range(vectors):
            e(f"  %b.at.{v} = add i64 %b.k, {v * VECTOR}")
            e(f"  %b.ptr.{v} = getelementptr float, ptr %b, i64 %b.at.{v}")
            e(load(f"%b.{v}", f"%b.ptr.{v}"))
        for r in range(rows):
            e(f"  %a.at.{r} = add i64 %k, {r * self.k}")
            e(f"  %a.ptr.{r} = getelementptr float, ptr %a, i64 %a.at.{r}")
            e(f"  %a.{r} = load float, ptr %a.ptr.{r}, align 4")
            self.lines += broadcast(f"%a.all.{r}", f"%a.{r}")
            for v in range(vectors):
                e(fma(f"%sum.{r}.{v}", f"%a.all.{r}", f"%b.{v}", f"%acc.{r}.{v}"))
        e("  %k.next = add i64 %k, 1")
        e("  %k.done = icmp eq i64 %k.next, %kc")
        e("  br i1 %k.done, label %exit, label %loop")
        e("exit:")
        for r in range(rows):
            for v in range(vectors):
                e(store(f"%sum.{r}.{v}", f"%c.{r}.{v}", lanes(v)))
        self.end()

    # --- the ukernel: loops over k blocks, panels and row tiles ---

    def _main(self) -> None:
        self.define(f"define void @{self.name}(ptr noalias %a, ptr noalias %b, ptr noalias %c) {{")

        def k_block(kb: str) -> None:
            k0 = self.value(f"mul i64 {kb}, {DEPTH}")
            left = self.value(f"sub i64 {self.k}, {k0}")
            short = self.value(f"icmp ult i64 {left}, {DEPTH}")
            kc = self.value(f"select i1 {short}, i64 {left}, i64 {DEPTH}")
            first = self.value(f"icmp eq i64 {kb}, 0")
            a_k = self.pointer("%a", k0)
            full_panels = self.n // PANEL

            def panel(p: str) -> None:
                start = self.value(f"mul i64 {p}, {self.k * PANEL}")
                b_p = self.pointer("%b", self.value(f"add i64 {start}, {self.value(f'mul i64 {k0}, {PANEL}')}"))
                c_p = self.pointer("%c", self.value(f"mul i64 {p}, {PANEL}"))
                self._row_tiles(a_k, b_p, c_p, PANEL, kc, first)

            self.loop(full_panels, panel)
            if self.n % PANEL:
                width = _round_up(self.n % PANEL, VECTOR)
                offset = self.value(f"add i64 {full_panels * self.k * PANEL}, {self.value(f'mul i64 {k0}, {width}')}")
                b_edge = self.pointer("%b", offset)
                c_edge = self.pointer("%c", full_panels * PANEL)
                self._row_tiles(a_k, b_edge, c_edge, self.n % PANEL, kc, first)

        self.loop(-(-self.k // DEPTH), k_block)
        self.end()

    def _row_tiles(self, a: str, b: str, c: str, columns: int, kc: str, first: str) -> None:
        tiles, rest = divmod(self.rows, ROWS)

        def call(rows: int, row: str) -> None:
            a_r = self.pointer(a, self.value(f"mul i64 {row}, {self.k}"))
            c_r = self.pointer(c, self.value(f"mul i64 {row}, {self.n}"))
            self.emit(f"  call void {self._tile_name(rows, columns)}(ptr {a_r}, ptr {b}, ptr {c_r}, i64 {kc}, i1 {first})")

        self.loop(tiles, lambda t: call(ROWS, self.value(f"mul i64 {t}, {ROWS}")))
        if rest:
            call(rest, str(tiles * ROWS))
