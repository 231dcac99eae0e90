"""The packed GEMM ukernel: matmuls whose b is a constant, compiled on the cpu backend, against the interpreter."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_graph_to_linalg import sample
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32

import graphopt
from graphopt.backends import get_backend
from graphopt.backends.measure import canonical_text
from graphopt.transforms.subgraph import standalone
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.lowering.convert_graph_to_linalg import ConvertGraphToLinalgPass
from graphopt.runtime.arrays import aligned_empty
from graphopt.runtime.jit import KernelArgumentError, compile_module, native_module
from graphopt.lowering import packed_gemm, tile_epilogue, ukernels
from graphopt.lowering.packed_gemm import (
    PANEL, VECTOR, chunk_name, pack_panels, packed_size, row_major_name,
)
from graphopt.transforms.fuse import FusePass


def dense_layer(a_shape, b: np.ndarray, bias: np.ndarray | None = None, b_is_input: bool = False):
    """@main(x) = relu(x @ b + bias) (or x @ b), b and bias constants (b an input when asked)."""
    g = GraphBuilder()
    x = g.input("x", a_shape, b.dtype)
    w = g.input("w", b.shape) if b_is_input else g.constant(b)
    y = g.matmul(x, w)
    if bias is not None:
        y = g.relu(g.add(y, g.constant(bias)))
    return g.finish(y)


def kernels(module) -> list[func.FuncOp]:
    """The module's kernels and declarations after fuse and convert-graph-to-linalg."""
    lowered = module.clone()
    FusePass().apply(Context(), lowered)
    ConvertGraphToLinalgPass().apply(Context(), lowered)
    return list(lowered.ops)


def matmul_of(module) -> graph.MatmulOp:
    return next(op for op in module.walk() if isinstance(op, graph.MatmulOp))


def ukernel_calls(module) -> list[str]:
    return [op.callee.string_value() for kernel in kernels(module) for op in kernel.walk() if isinstance(op, func.CallOp)]


def check_compiled(module, *arrays):
    expected = graphopt.interpret(module, *arrays)
    actual = graphopt.compile(module, backends=("cpu",))(*arrays)
    for e, a in zip(expected, actual, strict=True):
        # sums of up to hundreds of products in another order (FMAs, blocks of k)
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((1, 1), (1, 1)),
        ((5, 3), (3, 10)),  # one row tile of 5, one edge panel of 10 columns (masked)
        ((7, 257), (257, 65)),  # a full tile and 1 row; a full panel and 1 column; k past one block
        ((13, 300), (300, 130)),
        ((2, 3, 7), (7, 17)),  # a's leading dims are rows
        ((6, 256), (256, 64)),  # exactly one tile, one panel, one block
        ((1, 513), (513, 1)),
    ],
)
@pytest.mark.parametrize("specials_in", ["a", "b"])
def test_dense_layer_matches_interpreter(a_shape, b_shape, specials_in):
    """NaN, inf and signed zeros (at the start of a or b) propagate as in the interpreter."""
    b = sample(b_shape, seed=1, specials=specials_in == "b")
    module = dense_layer(a_shape, b, sample(b_shape[-1:], seed=2, specials=False))
    assert len(ukernel_calls(module)) == 1
    check_compiled(module, sample(a_shape, specials=specials_in == "a"))


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 20), k=st.integers(1, 300), n=st.integers(1, 140), seed=st.integers(0, 2**16))
def test_any_shape_matches_interpreter(m, k, n, seed):
    rng = np.random.default_rng(seed)
    module = dense_layer((m, k), rng.standard_normal((k, n)).astype(np.float32))
    check_compiled(module, rng.standard_normal((m, k)).astype(np.float32))


def test_only_constant_f32_b_is_packed():
    b = sample((8, 16), specials=False)
    assert ukernel_calls(dense_layer((4, 8), b)) == ["graphopt_sgemm_packed_4x8x16"]
    assert ukernel_calls(dense_layer((4, 8), b, b_is_input=True)) == []  # b known only at run time
    assert ukernel_calls(dense_layer((4, 8), b.astype(np.float64))) == []  # f32 only


def test_matmuls_of_equal_sizes_and_different_ranks_compile_together():
    """[2, 3, 4] @ [4, 5] and [6, 4] @ [4, 5] both run 6x4x5 GEMMs; each declares its own ukernel
    (one declaration served both before, with the first call's memref types, and did not verify)."""
    g = GraphBuilder()
    x, y = g.input("x", (2, 3, 4)), g.input("y", (6, 4))
    module = g.finish(g.matmul(x, g.constant(sample((4, 5), seed=1, specials=False))),
                      g.matmul(y, g.constant(sample((4, 5), seed=2, specials=False))))
    assert sorted(ukernel_calls(module)) == ["graphopt_sgemm_packed_2x3x4x5", "graphopt_sgemm_packed_6x4x5"]
    check_compiled(module, sample((2, 3, 4), specials=False), sample((6, 4), seed=3, specials=False))


def test_kernel_takes_panels_and_module_declares_the_ukernel():
    module = dense_layer((4, 8), sample((8, PANEL + 6), specials=False))
    kernel, declaration = kernels(module)
    panels = kernel.function_type.inputs.data[-2]  # after x and b (unused: its panels replace it)
    assert panels.get_shape() == (packed_size(8, PANEL + 6),) == (8 * (PANEL + VECTOR),)
    assert declaration.is_declaration and "graph.ukernel" in declaration.attributes


def test_pack_panels_layout():
    b = np.arange(3 * (PANEL + 6), dtype=np.float32).reshape(3, PANEL + 6)
    packed = pack_panels(b)
    full, edge = packed[: 3 * PANEL].reshape(3, PANEL), packed[3 * PANEL :].reshape(3, VECTOR)
    np.testing.assert_array_equal(full, b[:, :PANEL])  # panel 0, k-major
    np.testing.assert_array_equal(edge[:, :6], b[:, PANEL:])
    assert not edge[:, 6:].any()  # zero padding to a whole vector


def test_ukernel_output_counts_as_written():
    """The kernel writes its output only through the call; an output overlapping an input is refused."""
    lowered = kernels(dense_layer((4, 8), sample((8, 16), specials=False)))
    compiled = compile_module(ModuleOp([op.clone() for op in lowered]))[lowered[0].sym_name.data]
    assert compiled.written == frozenset({len(compiled.arguments) - 1})
    memory = aligned_empty((64,), np.float32)
    x, out = memory[:32].reshape(4, 8), memory.reshape(4, 16)
    b, panels = (aligned_empty(spec.shape, np.float32) for spec in compiled.arguments[1:3])
    with pytest.raises(KernelArgumentError, match="overlap"):
        compiled(x, b, panels, out)


def test_measurement_keeps_constants_and_keys_ignore_their_values():
    first, second = (dense_layer((4, 8), sample((8, 16), seed=s, specials=False)) for s in (1, 2))
    alone = standalone(matmul_of(first))
    assert isinstance(alone.body.block.first_op, graph.ConstantOp) and len(alone.body.block.args) == 1
    assert canonical_text(matmul_of(first)) == canonical_text(matmul_of(second))


def test_cpu_estimate_prefers_packed_gemm_over_blas():
    module = dense_layer((128, 768), np.zeros((768, 3072), np.float32))
    matmul = matmul_of(module)
    assert get_backend("cpu").estimate(matmul) < get_backend("blas").estimate(matmul)


def test_ukernel_kernel_splits_by_rows():
    """At 2 threads the kernel runs as row chunks, each calling the ukernel for its rows."""
    rng = np.random.default_rng(0)
    module = dense_layer((37, 300), rng.standard_normal((300, 130)).astype(np.float32), np.ones(130, np.float32))
    executable = graphopt.compile(module, backends=("cpu",), threads=2)
    (step,) = executable.steps
    assert len(step.kernel.chunks) == 2
    x = sample((37, 300))
    np.testing.assert_allclose(executable(x)[0], graphopt.interpret(module, x)[0], rtol=1e-4, atol=1e-4, equal_nan=True)


def test_kernels_differing_only_in_weights_compile_apart():
    """The JIT's cache keys a module by its text with constant arguments digested, not dropped."""
    x = sample((3, 8), specials=False)
    for seed in (1, 2):
        module = dense_layer((3, 8), sample((8, 16), seed=seed, specials=False))
        np.testing.assert_allclose(graphopt.compile(module)(x)[0], graphopt.interpret(module, x)[0], rtol=1e-5)


def test_placing_packs_no_weight_and_compiling_packs_each_once(monkeypatch):
    """cpu's supports() lowers the group (and keeps it for compile) without packing b; the
    pack-weights pass packs it when the group compiles."""
    from graphopt.lowering import pack_weights

    packed = []
    monkeypatch.setattr(pack_weights.packed_gemm, "pack_panels", lambda b: packed.append(b.shape) or pack_panels(b))
    b = GraphBuilder()
    x = b.input("x", (8, 96))
    weights = np.full((96, 80), 0.25, np.float32) + np.eye(96, 80, dtype=np.float32)
    module = b.finish(b.relu(b.matmul(x, b.constant(weights))))
    FusePass().apply(Context(), module)
    group = next(op for op in module.walk() if isinstance(op, graph.FusedOp))
    cpu = get_backend("cpu")
    assert cpu.supports(group) is None and packed == []
    (kernel,) = cpu.compile([group], threads=1)
    assert packed == [(96, 80)]
    data = np.random.default_rng(0).standard_normal((8, 96)).astype(np.float32)
    out = aligned_empty((8, 80))
    kernel([data, weights], [out])  # the group reads the constant as an input; its kernel, the packed panels
    np.testing.assert_allclose(out, graphopt.interpret(module, data)[0], rtol=1e-5, atol=1e-5)


def guarded(values: np.ndarray) -> tuple[np.ndarray, mmap.mmap]:
    """A copy of `values` ending where an unreadable page starts: a read past it faults."""
    page = mmap.PAGESIZE
    pages = -(-values.nbytes // page)
    memory = mmap.mmap(-1, (pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(base + pages * page), page, 0) == 0  # PROT_NONE
    copy = np.frombuffer(memory, values.dtype, values.size, pages * page - values.nbytes).reshape(values.shape)
    copy[...] = values
    return copy, memory


def call_ukernel(ukernel: str, arrays: list[np.ndarray]) -> None:
    """The ukernel named `ukernel` (any kind; not optimized) called on `arrays`, its memref types theirs."""
    engine = native_module(ukernels.ukernel_ir(ukernel, [MemRefType(f32, x.shape) for x in arrays]))
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arrays))(engine.get_function_address(ukernel))
    function(*(x.ctypes.data for x in arrays))


def run_row_major(b: np.ndarray, a: np.ndarray, epilogue=(), operands=(), out_shape=None) -> np.ndarray:
    """The row-major-b ukernel called on (b, a, operands..., out)."""
    out = np.full(out_shape, np.nan, np.float32)
    arrays = [b, a, *operands, out]
    call_ukernel(row_major_name([MemRefType(f32, x.shape) for x in arrays], epilogue), arrays)
    return out

def assert_row_major_matches_numpy(images: int, rows: int, k: int, n: int) -> None:
    """The row-major ukernel on b [images, k, n] ending at an unreadable page and a [rows, k]
    equals a @ b; NaN and inf in b propagate."""
    b, a = sample((images, k, n), seed=1), sample((rows, k), seed=2, specials=False)
    guarded_b, memory = guarded(b)
    out = run_row_major(guarded_b, a, out_shape=(images, rows, n))
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4, equal_nan=True)
    del guarded_b
    memory.close()



def assert_packed_and_row_major_match_numpy(a: np.ndarray, b: np.ndarray) -> None:
    """a @ b by the ukernel on b's packed panels and on b row-major, against NumPy (NaN and inf included)."""
    out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
    panels = pack_panels(b)
    call_ukernel(packed_gemm.name([MemRefType(f32, x.shape) for x in (a, panels, out)]), [a, panels, out])
    with np.errstate(invalid="ignore"):
        expected = a @ b
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(run_row_major(b[None], a, out_shape=(1, *out.shape))[0], expected, rtol=1e-4, atol=1e-4,
                               equal_nan=True)


@pytest.mark.parametrize("panel", [16, 64])
@pytest.mark.parametrize("rows, k, n", [(13, 300, 130), (7, 5, 17), (6, 257, 64), (1, 3, 1)])
def test_either_panel_width_matches_numpy(monkeypatch, panel, rows, k, n):
    """The tiles of both kinds of host (PANEL 64 with AVX-512, 16 without) on packed and on
    row-major b: edge panels, edge row tiles, k past one block; NaN and inf in b propagate."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    a, b = sample((rows, k), seed=2, specials=False), sample((k, n), seed=1)
    assert_packed_and_row_major_match_numpy(a, b)


@pytest.mark.parametrize(
    "images, rows, k, n",
    [
        (1, 1, 1, 1),
        (1, 13, 7, 49),  # 6 + 6 + 1 rows; one edge tile of 49 columns, the last a dot product along k
        (2, 8, 300, 49),  # the dot product over blocks of 256 (16 steps of 16) and 44 (the last 12 masked)
        (1, 5, 40, 17),  # one vector and a dot product
        (3, 7, 300, 50),  # k past one block: partial sums stored, then reloaded
        (2, 6, 20, 130),  # two full panels and 2 columns
        (1, 19, 9, 196),
        (1, 5, 3, 64),
        (2, 7, 33, 65),  # a last tile of one column: a dot product with tiles of one vector or four
        (1, 6, 20, 31),  # two vectors, the second of 15 lanes
    ],
)
@pytest.mark.parametrize("panel", [16, 64])  # the tiles of hosts without AVX-512 and with, on any host
def test_row_major_b_matches_numpy_and_reads_nothing_past_b(monkeypatch, panel, images, rows, k, n):
    """out[i] = a @ b[i] with b row-major, ending at an unreadable page; NaN and inf in b propagate."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    assert_row_major_matches_numpy(images, rows, k, n)


@pytest.mark.parametrize(
    "layout, n, depth",
    [
        (packed_gemm.ROW_MAJOR, 64, 64),  # rows 4 lines apart: 16 of L1's 64 sets, 128 lines
        (packed_gemm.ROW_MAJOR, 56 * 56, 64),  # 196 lines apart: 16 sets
        (packed_gemm.ROW_MAJOR, 32 * 32, 64),  # 64 lines apart: one set
        (packed_gemm.ROW_MAJOR, 28 * 28, 256),  # 49 lines apart: every set
        (packed_gemm.ROW_MAJOR, 48, 256),  # 3 lines apart: every set
        (packed_gemm.ROW_MAJOR, 27 * 27, 256),  # rows not a whole number of lines apart
        (packed_gemm.PANELS, 1024, 256),  # packed panels are contiguous
    ],
)
@pytest.mark.parametrize("conflict_depth", [64, None])  # without AVX-512 and with
def test_row_major_k_blocks_shrink_where_b_rows_share_l1_sets(monkeypatch, layout, n, depth, conflict_depth):
    """The k block is CONFLICT_DEPTH where a row-major panel's DEPTH lines overfill the L1 sets
    its rows map to, else DEPTH (always DEPTH where CONFLICT_DEPTH is None: AVX-512)."""
    monkeypatch.setattr(packed_gemm, "DEPTH", 256)
    monkeypatch.setattr(packed_gemm, "CONFLICT_DEPTH", conflict_depth)
    ukernel = packed_gemm._Ukernel("u", layout, 1, 13, 300, n)
    assert ukernel._depth() == (depth if conflict_depth else 256)


@pytest.mark.parametrize(
    "layout, n, prefetch_b, far_line",
    [
        (packed_gemm.ROW_MAJOR, 55 * 55, True, True),  # rows 12100 bytes apart, 4 past a line
        (packed_gemm.ROW_MAJOR, 1025, True, True),
        (packed_gemm.ROW_MAJOR, 27 * 27, True, False),  # within a page
        (packed_gemm.ROW_MAJOR, 1023, True, False),
        (packed_gemm.ROW_MAJOR, 56 * 56, True, False),  # on lines: a vector's one line
        (packed_gemm.ROW_MAJOR, 55 * 55, False, False),  # no prefetch of b (AVX-512)
        (packed_gemm.PANELS, 55 * 55, True, False),  # packed panels are contiguous
    ],
)
def test_b_far_line_prefetched_where_rows_are_off_lines_and_a_page_apart(monkeypatch, layout, n, prefetch_b, far_line):
    """Row-major b whose rows lie a page or more apart and off lines prefetches the far line;
    none where `PREFETCH_B_FAR_LINE` is off."""
    monkeypatch.setattr(packed_gemm, "PREFETCH_B", prefetch_b)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_FAR_LINE", True)
    assert packed_gemm._Ukernel("u", layout, 1, 16, 128, n)._prefetches_b_far_line() == far_line
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_FAR_LINE", False)
    assert not packed_gemm._Ukernel("u", layout, 1, 16, 128, n)._prefetches_b_far_line()


@pytest.mark.parametrize("panel", [16, 64])
@pytest.mark.parametrize("images, rows, k, n", [(1, 13, 9, 1025), (2, 16, 5, 1039), (1, 3, 20, 1040 + 17)])
def test_row_major_b_far_line_prefetch_matches_numpy_and_reads_nothing_past_b(monkeypatch, panel, images, rows, k, n):
    """b's rows more than a page apart and off lines, prefetching the next panel's far line
    (`PREFETCH_B_FAR_LINE`): edge panels of 1, 15 and 1 or 17 columns, edge row tiles; b ends at
    an unreadable page; NaN and inf in b propagate."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B", True)
    monkeypatch.setattr(packed_gemm, "PREFETCH_B_FAR_LINE", True)
    assert_row_major_matches_numpy(images, rows, k, n)


@pytest.mark.parametrize("panel", [16, 64])
@pytest.mark.parametrize("images, rows, k, n", [(2, 13, 150, 64), (1, 7, 64, 1024), (1, 8, 65, 64), (1, 2, 200, 128)])
def test_row_major_short_k_blocks_match_numpy_with_their_epilogue(monkeypatch, panel, images, rows, k, n):
    """Blocks of CONFLICT_DEPTH (64) steps of k: 150 = 64 + 64 + 22, exactly one block, one step
    past it; partial sums stored and reloaded between blocks, the epilogue (bias per row, residual,
    relu) on the last only; NaN and inf in b propagate; edge row tiles of 1 and 2 rows."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    monkeypatch.setattr(packed_gemm, "CONFLICT_DEPTH", 64)
    assert packed_gemm._Ukernel("u", packed_gemm.ROW_MAJOR, images, rows, k, n)._depth() == 64
    b, a = sample((images, k, n), seed=1), sample((rows, k), seed=2, specials=False)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(run_row_major(b, a, out_shape=(images, rows, n)), a @ b, rtol=1e-4, atol=1e-4,
                                   equal_nan=True)
    bias, residual = sample((rows, 1), seed=3, specials=False), sample((images, rows, n), seed=4)
    steps = (("add", ("A", "P0")), ("add", ("S0", "R")), ("max", ("S1", tile_epilogue.constant(0.0))))
    out = run_row_major(b, a, steps, (bias, residual), (images, rows, n))
    with np.errstate(invalid="ignore"):
        expected = np.maximum(a @ b + bias + residual, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("panel", [16, 64])
def test_row_major_epilogue_per_row_applies_after_the_last_k_block(monkeypatch, panel):
    """relu(a @ b + bias[row] + residual): the bias is per row (an output channel), the residual of out's shape."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    images, rows, k, n = 2, 8, 270, 49
    b, a = sample((images, k, n), seed=1, specials=False), sample((rows, k), seed=2, specials=False)
    bias, residual = sample((rows, 1), seed=3, specials=False), sample((images, rows, n), seed=4, specials=False)
    steps = (("add", ("A", "P0")), ("add", ("S0", "R")), ("max", ("S1", tile_epilogue.constant(0.0))))
    out = run_row_major(b, a, steps, (bias, residual), (images, rows, n))
    np.testing.assert_allclose(out, np.maximum(a @ b + bias + residual, 0), rtol=1e-4, atol=1e-4)
    types = [MemRefType(f32, x.shape) for x in (b, a, bias, residual, out)]
    name = row_major_name(types, steps)
    assert name.startswith("graphopt_sgemm_rowmajor_eaddAP0.addS0R.maxS1C00000000_2x270x49_8x270_")
    chunk_types = [MemRefType(f32, shape) for shape in ((1, k, n), (rows, k), (rows, 1), (1, rows, n), (1, rows, n))]
    assert chunk_name(name, chunk_types) == row_major_name(chunk_types, steps)  # a chunk keeps the epilogue


@pytest.mark.parametrize("panel", [16, 64])
@pytest.mark.parametrize("rows, k, n", [(1, 300, 7 * 16 + 5), (2, 260, 4 * 16), (3, 9, 5 * 16 + 1), (5, 257, 3 * 16)])
def test_few_rows_take_several_panels_per_tile(monkeypatch, panel, rows, k, n):
    """Rows under a register tile (a matrix-vector product) take FEW_ROWS_PANELS // rows panels
    per tile and k in one block: groups of panels, the full panels left over, the edge panel
    (n of 7 panels and 5 columns at PANEL 16); NaN and inf in b's later panels propagate."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    monkeypatch.setattr(packed_gemm, "FEW_ROWS_PANELS", 6)
    a, b = sample((rows, k), seed=2, specials=False), sample((k, n), seed=1, specials=False)
    b[k - 1, n - 1], b[0, n // 2], b[k // 2, 3 * n // 4] = np.nan, np.inf, -np.inf
    out = np.full((rows, n), np.nan, np.float32)
    panels = pack_panels(b)
    call_ukernel(packed_gemm.name([MemRefType(f32, x.shape) for x in (a, panels, out)]), [a, panels, out])
    with np.errstate(invalid="ignore"):
        expected = a @ b
    assert np.isnan(expected).any() and np.isinf(expected).any()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("panel", [16, 64])
def test_row_blocks_past_their_edge(monkeypatch, panel):
    """Rows on packed b in blocks of ROW_BLOCK past ROWS_IN_L2 rows (12 past 24 here: two blocks
    and 7 rows, the last a row tile of 1) within k blocks; the row-major b keeps one block."""
    monkeypatch.setattr(packed_gemm, "PANEL", panel)
    monkeypatch.setattr(packed_gemm, "ROW_BLOCK", 12)
    monkeypatch.setattr(packed_gemm, "ROWS_IN_L2", 24)
    rows, k, n = 31, 300, panel + 5
    a, b = sample((rows, k), seed=2, specials=False), sample((k, n), seed=1)
    assert_packed_and_row_major_match_numpy(a, b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("a_shape", [(1, 300), (2, 40)])
def test_dense_layer_of_few_rows_matches_interpreter_on_1_and_2_threads(a_shape, threads):
    """relu(x @ b + bias) for one and two rows (panels grouped per tile on AVX2); on 2 threads
    the chunks of out's columns (whole panels, the last with the edge) each group their own."""
    b = sample((a_shape[1], 13 * 16 + 5), seed=1)
    module = dense_layer(a_shape, b, sample(b.shape[-1:], seed=2, specials=False))
    x = sample(a_shape, seed=3)
    expected = graphopt.interpret(module, x)
    actual = graphopt.compile(module, backends=("cpu",), threads=threads)(x)
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4, atol=1e-4, equal_nan=True)
