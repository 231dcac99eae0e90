"""graphopt.runtime.arrays: aligned arrays, and large ones on huge-page boundaries."""

from __future__ import annotations

import gc
import mmap
import sys

import numpy as np
import pytest

from graphopt.runtime.arrays import CACHE_LINE, HUGE_PAGE, aligned_array, aligned_empty


def mapping_of(address: int) -> tuple[str, list[str]] | None:
    """The /proc/self/smaps header line of the mapping holding `address` and its VmFlags, or None."""
    with open("/proc/self/smaps") as smaps:
        lines = smaps.read().splitlines()
    for index, line in enumerate(lines):
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            if start <= address < end:
                flags = next(entry for entry in lines[index + 1 :] if entry.startswith("VmFlags:"))
                return line, flags.split()[1:]
    return None


def memory_owner(array: np.ndarray) -> object:
    """The object that owns an array's memory: its last NumPy base, or what that base views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.base.obj if isinstance(array.base, memoryview) else array.base or array


@pytest.mark.parametrize("shape, dtype, alignment", [((3, 5), np.float32, CACHE_LINE), (7, np.int64, 16), ((2, 3, 4), np.float64, 4096)])
def test_small_arrays_start_on_their_alignment(shape, dtype, alignment):
    array = aligned_empty(shape, dtype, alignment)
    assert array.shape == (shape if isinstance(shape, tuple) else (shape,)) and array.dtype == dtype
    assert array.ctypes.data % alignment == 0 and array.flags.c_contiguous and array.flags.writeable


def test_aligned_array_copies_values():
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    copy = aligned_array(values)
    values[0, 0] = 99
    assert copy.ctypes.data % CACHE_LINE == 0 and copy[0, 0] == 0 and np.array_equal(copy[1:], values[1:])


@pytest.mark.parametrize("shape", [(HUGE_PAGE // 4,), (1024, 1025), (3, 1000, 1001)])
def test_large_lasting_arrays_start_on_a_huge_page_and_hold_their_values(shape):
    """Arrays of HUGE_PAGE bytes or more made with `huge_pages` start on a HUGE_PAGE boundary,
    are writable and C-contiguous, and hold what is written to their first and last elements."""
    array = aligned_empty(shape, np.float32, huge_pages=True)
    assert array.shape == shape and array.ctypes.data % HUGE_PAGE == 0
    assert array.flags.c_contiguous and array.flags.writeable
    array.reshape(-1)[-1] = 7.0
    array.reshape(-1)[0] = -1.0
    assert array.reshape(-1)[-1] == 7.0 and array.reshape(-1)[0] == -1.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps is Linux's")
def test_large_lasting_arrays_are_advised_as_huge_pages_and_unmapped_with_the_array():
    """The mapping under a large array made with `huge_pages` (aligned_array's too) carries the
    huge-page advice (VmFlags "hg"), and goes when the array does; a large array made without
    it (a result, made at each call) is NumPy's, on no mapping of its own advised by us."""
    array = aligned_array(np.ones(HUGE_PAGE, np.uint8), huge_pages=True)
    address = array.ctypes.data
    header, flags = mapping_of(address)
    assert "hg" in flags and address % HUGE_PAGE == 0, header
    del array
    gc.collect()
    remaining = mapping_of(address)
    assert remaining is None or remaining[0] != header
    assert not isinstance(memory_owner(aligned_empty((3 * HUGE_PAGE,), np.uint8)), mmap.mmap)
    assert isinstance(memory_owner(aligned_empty((3 * HUGE_PAGE,), np.uint8, huge_pages=True)), mmap.mmap)
