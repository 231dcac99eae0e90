"""Timing shared by the benchmark scripts (run as `python benchmarks/<script>.py`)."""

import statistics
import time


def median_seconds(function, repeat: int) -> float:
    """Median wall time of `repeat` calls of `function`, after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
