"""Timing shared by the benchmark scripts (run as `python benchmarks/<script>.py`)."""

import argparse
import json
import os
import subprocess
import sys
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

BLOCK = 4
"""Timed calls of one side in a row (`interleaved_medians`)."""


def median_seconds(function, repeat: int, before: Callable[[], object] | None = None) -> float:
    """Median wall time of `repeat` calls of `function`, after one warm-up call; `before`, if
    given, runs untimed before each timed call (e.g. reading a large array: operands cold)."""
    function()
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(calls: dict[str, Callable[[], object]], seconds: float, rounds: int = 1,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of each call, the calls timed in alternating blocks of BLOCK for `seconds`
    and at least `rounds` blocks each: every side sees the same noise, and each block starts
    after an untimed call that warms the caches the previous side filled with its own data.
    `clock`: wall time, or `time.thread_time` for calls that run on the calling thread alone (the
    CPU time it got: on a shared machine, without the time other processes held its core)."""
    times: dict[str, list[float]] = {side: [] for side in calls}
    start = time.perf_counter()
    done = 0
    while time.perf_counter() - start < seconds or done < rounds:
        done += 1
        for side, call in calls.items():
            call()
            for _ in range(BLOCK):
                begin = clock()
                call()
                times[side].append(clock() - begin)
    return {side: statistics.median(samples) for side, samples in times.items()}


def checked_rates(calls: dict[str, Callable[[], object]], results: dict[str, np.ndarray], flops: int,
                  seconds: float) -> str:
    """Two calls writing `results` (by the same names), checked against each other (rtol and
    atol 1e-3), then timed by `interleaved_medians`: each one's median and GFLOP/s, then the
    second's time over the first's."""
    for call in calls.values():
        call()
    first, second = results.values()
    np.testing.assert_allclose(first, second, rtol=1e-3, atol=1e-3)
    medians = list(interleaved_medians(calls, seconds).values())
    columns = "  ".join(f"{t * 1e3:8.3f} ms {flops / t / 1e9:6.1f} GFLOP/s" for t in medians)
    return f"{columns}  {medians[1] / medians[0]:6.2f}x"


def main_over_shapes(description: str, header: str, shapes: Sequence[tuple], compare: Callable[..., str]) -> None:
    """A benchmark script's main: `--seconds` per shape, `header`, then `compare(*shape, seconds)`
    printed for each shape."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape")
    args = parser.parse_args()
    print(header)
    for shape in shapes:
        print(compare(*shape, args.seconds))


def results_per_thread_count(thread_counts: Sequence[str], arguments: Sequence[str], scratch: str) -> dict[str, object]:
    """Run this benchmark script again with `arguments`, once per thread count, each in a fresh
    process with that thread environment; what each child wrote, by thread count."""
    results = {}
    for threads in thread_counts:
        result_path = Path(scratch) / f"{threads}.json"
        print(f"== {threads} thread(s) ==", flush=True)
        subprocess.run([sys.executable, sys.argv[0], *arguments], env=thread_environment(threads, str(result_path)), check=True)
        results[threads] = json.loads(result_path.read_text())
        print(flush=True)
    return results


def child_thread_count() -> int | None:
    """The thread count this process measures at when `results_per_thread_count` started it, else None."""
    return int(os.environ["GRAPHOPT_THREADS"]) if "GRAPHOPT_BENCHMARK_RESULT" in os.environ else None


def write_child_result(result: object) -> None:
    """Hand `result` (JSON data) to the `results_per_thread_count` that started this process."""
    Path(os.environ["GRAPHOPT_BENCHMARK_RESULT"]).write_text(json.dumps(result))


def thread_environment(threads: int | str, result_path: str) -> dict[str, str]:
    """The environment of a benchmark's child process for one thread count: graphopt, OpenBLAS
    at `threads`; idle OpenMP and OpenBLAS workers not spinning on the cores the next system
    needs; GRAPHOPT_BENCHMARK_RESULT, where the child writes its results."""
    return dict(os.environ, GRAPHOPT_BENCHMARK_RESULT=result_path, GRAPHOPT_THREADS=str(threads),
                OPENBLAS_NUM_THREADS=str(threads), OPENBLAS_THREAD_TIMEOUT="4", OMP_WAIT_POLICY="PASSIVE")


def pyplot(path: str):
    """matplotlib.pyplot on the Agg backend, or None (saying so) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed (pip install -e '.[plot]'): no {path}")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def parse_model_arguments(description: str, models: Sequence[str], default_models: Sequence[str],
                          quick_models: Sequence[str], quick_rounds: int,
                          add_options: Callable[[argparse.ArgumentParser], None]) -> argparse.Namespace:
    """The options of a benchmark over named models (--models, --threads, --repeat, --quick,
    --json, and those `add_options` adds); `models` in the result is the checked list, comma-joined."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", help=f"comma-separated, from {', '.join(models)} (default: {', '.join(default_models)})")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, one table each")
    parser.add_argument("--repeat", type=int, default=10, help="timed blocks of 4 calls per system and model")
    parser.add_argument("--quick", action="store_true",
                        help=f"{quick_rounds} blocks per model; without --models only {', '.join(quick_models)}")
    parser.add_argument("--json", help="write the medians, ratios, machine and versions here")
    add_options(parser)
    args = parser.parse_args()
    names = args.models.split(",") if args.models else list(quick_models if args.quick else default_models)
    args.models = ",".join(checked_models(parser, names, models))
    if args.quick:
        args.repeat = quick_rounds
    return args


def checked_models(parser: argparse.ArgumentParser, names: Sequence[str], models: Sequence[str]) -> list[str]:
    """`names`, each one of `models`; else the parser's error (exit status 2) naming the unknown
    ones and the models there are."""
    unknown = [name for name in names if name not in models]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the models are {', '.join(models)}")
    return list(names)


def write_json(path: str | None, results: dict) -> None:
    """`results` as JSON at `path`, when one is given."""
    if path:
        Path(path).write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {path}")
