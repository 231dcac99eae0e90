"""Arrays as kernels take them: C-contiguous, their data aligned.

    out = aligned_empty((256, 1024), np.float32)      # 64-byte aligned, uninitialized
    w = aligned_array(weights, alignment=ALIGNMENT)   # an aligned copy
"""

import numpy as np

ALIGNMENT = 16
"""Bytes of alignment kernels assume of every array argument: what NumPy's allocator gives."""


def aligned_empty(shape: tuple[int, ...] | int, dtype=np.float32, alignment: int = 64) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an `alignment`-byte boundary."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buffer = np.empty(count * dtype.itemsize + alignment, dtype=np.uint8)
    start = -buffer.ctypes.data % alignment
    return buffer[start : start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_array(values, dtype=None, alignment: int = 64) -> np.ndarray:
    """A copy of `values` in a C-contiguous, `alignment`-byte aligned array."""
    values = np.asarray(values, dtype=dtype)
    result = aligned_empty(values.shape, values.dtype, alignment)
    result[...] = values
    return result
