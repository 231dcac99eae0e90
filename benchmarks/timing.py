"""Timing shared by the benchmark scripts (run as `python benchmarks/<script>.py`)."""

import statistics
import time
from collections.abc import Callable

BLOCK = 4
"""Timed calls of one side in a row (`interleaved_medians`)."""


def median_seconds(function, repeat: int) -> float:
    """Median wall time of `repeat` calls of `function`, after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(calls: dict[str, Callable[[], object]], seconds: float) -> dict[str, float]:
    """Median seconds of each call, the calls timed in alternating blocks of BLOCK for `seconds`:
    every side sees the same noise, and each block starts after an untimed call that warms the
    caches the previous side filled with its own data."""
    times: dict[str, list[float]] = {side: [] for side in calls}
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for side, call in calls.items():
            call()
            for _ in range(BLOCK):
                begin = time.perf_counter()
                call()
                times[side].append(time.perf_counter() - begin)
    return {side: statistics.median(samples) for side, samples in times.items()}
