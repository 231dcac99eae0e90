"""Arrays as kernels take them: C-contiguous, their data aligned.

    out = aligned_empty((256, 1024), np.float32)      # 64-byte aligned (CACHE_LINE), uninitialized
    w = aligned_array(weights)                        # an aligned copy
    w = aligned_array(weights, huge_pages=True)       # kept: 2 MB or more on a 2 MB boundary (HUGE_PAGE), advised as huge pages
"""

import mmap

import numpy as np

ALIGNMENT = 16
"""Bytes of alignment kernels assume of every array argument: what NumPy's allocator gives."""
CACHE_LINE = 64
"""Bytes of alignment of the arrays graphopt allocates itself (the Executable's buffers, results
and constants, the kernels' packed weights): a 64-byte vector load from them never splits a
cache line. Packed weights 16 or 32 bytes past a line (as NumPy's allocator may place them) made
ResNet-50 1.11-1.18x slower at 1 thread on Emerald Rapids (AVX-512; 2026-11-28, one process,
interleaved), ResNet-18-ish 0.99-1.01x: one executable compiled twice could differ that much."""


HUGE_PAGE = 2 << 20
"""Bytes of an x86-64 huge page: lasting arrays of at least this many bytes start on one (`aligned_empty`)."""


def aligned_empty(
    shape: tuple[int, ...] | int, dtype=np.float32, alignment: int = CACHE_LINE, huge_pages: bool = False
) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an `alignment`-byte boundary.

    With `huge_pages` (an array kept as long as its Executable: constants, packed weights,
    buffers), one of HUGE_PAGE bytes or more starts on a HUGE_PAGE boundary of its own anonymous
    mapping, advised as huge pages where the OS takes the advice (Linux's transparent huge pages
    in "madvise" mode or "always"): a 4 MB weight then takes two TLB entries rather than 1024 and
    lies at the same offsets in every process. Whole models at 1 thread, each compiled twice both
    ways in one process, interleaved (2026-11-28, Emerald Rapids): ResNet-50 0.990 and 0.995 of
    the time with NumPy's allocation, ResNet-18-ish 0.984 and 0.990, Inception-v2 0.993 twice,
    SqueezeNet and mobilenet_v2_ish 0.992-1.001 (docs/design.md). Not for an array made at each
    call (results, argument copies): a fresh mapping faults its pages in at every call, where
    NumPy's allocator reuses freed memory (a 16 MB result: layer_norm 4096x1024 1.36x slower)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    nbytes = count * dtype.itemsize
    if huge_pages and nbytes >= HUGE_PAGE and hasattr(mmap, "MAP_ANONYMOUS"):
        buffer = _huge_page_buffer(nbytes)
    else:
        buffer = np.empty(nbytes + alignment, dtype=np.uint8)
        buffer = buffer[-buffer.ctypes.data % alignment :]
    return buffer[:nbytes].view(dtype).reshape(shape)


def _huge_page_buffer(nbytes: int) -> np.ndarray:
    """At least `nbytes` bytes from a HUGE_PAGE boundary of a new private anonymous mapping
    (freed with the array), advised as huge pages where `mmap` offers the advice (a shared
    mapping, mmap's default, would be shmem, which the advice does not reach)."""
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(mapping, dtype=np.uint8)
    start = -whole.ctypes.data % HUGE_PAGE
    if hasattr(mapping, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE, start, nbytes + HUGE_PAGE - start)
    return whole[start:]


def aligned_array(values, dtype=None, alignment: int = CACHE_LINE, huge_pages: bool = False) -> np.ndarray:
    """A copy of `values` in a C-contiguous, `alignment`-byte aligned array (`huge_pages`: as
    `aligned_empty`)."""
    values = np.asarray(values, dtype=dtype)
    result = aligned_empty(values.shape, values.dtype, alignment, huge_pages)
    result[...] = values
    return result
