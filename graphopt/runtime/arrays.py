"""Arrays as kernels take them: C-contiguous, their data aligned.

    out = aligned_empty((256, 1024), np.float32)      # 64-byte aligned (CACHE_LINE), uninitialized
    w = aligned_array(weights)                        # an aligned copy
"""

import numpy as np

ALIGNMENT = 16
"""Bytes of alignment kernels assume of every array argument: what NumPy's allocator gives."""
CACHE_LINE = 64
"""Bytes of alignment of the arrays graphopt allocates itself (the Executable's buffers, results
and constants, the kernels' packed weights): a 64-byte vector load from them never splits a
cache line. Packed weights 16 or 32 bytes past a line (as NumPy's allocator may place them) made
ResNet-50 1.11-1.18x slower at 1 thread on Emerald Rapids (AVX-512; 2026-11-28, one process,
interleaved), ResNet-18-ish 0.99-1.01x: one executable compiled twice could differ that much."""


def aligned_empty(shape: tuple[int, ...] | int, dtype=np.float32, alignment: int = CACHE_LINE) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an `alignment`-byte boundary."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buffer = np.empty(count * dtype.itemsize + alignment, dtype=np.uint8)
    start = -buffer.ctypes.data % alignment
    return buffer[start : start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_array(values, dtype=None, alignment: int = CACHE_LINE) -> np.ndarray:
    """A copy of `values` in a C-contiguous, `alignment`-byte aligned array."""
    values = np.asarray(values, dtype=dtype)
    result = aligned_empty(values.shape, values.dtype, alignment)
    result[...] = values
    return result
