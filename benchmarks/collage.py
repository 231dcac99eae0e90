"""Collage on whole CNNs: cpu alone, ort alone and the measured mix, side by side (issue 18).

    python benchmarks/collage.py [--models resnet50,inception_v1] [--threads 1,2] [--repeat 10]
                                 [--quick] [--cache costs.json] [--json out.json]

Needs onnx and onnxruntime (`pip install -e ".[onnx]"`). The models are benchmarks/models.py's
(the ONNX light zoo's CNNs and the builders there). Per model, three graphopt Executables of
the same imported module:

- cpu: `graphopt.compile(m, backends=("cpu",))`, every group on graphopt's LLVM kernels;
- ort: `graphopt.compile(m, backends=("ort",))`, every group a small ONNX Runtime session;
- mixed: `graphopt.compile(m, backends=("cpu", "ort"), search="cost", measure=True)`, each
  group placed by the kernels' measured latencies (Collage's search), costs in `--cache`.

For reference, ONNX Runtime on the whole model (end_to_end.onnxruntime_runner: one session,
ORT_ENABLE_ALL, I/O binding) runs beside them. The outputs are compared (a warning beyond rtol =
atol = 1e-3), then timed interleaved (timing.interleaved_medians: alternating blocks of 4 calls,
--repeat blocks each, medians).
Each row gives the medians, the best single backend over the mix (above 1: the mix wins), the
mix's steps per backend, and the measurement time: the mixed compile (fusion, candidates,
measuring the kernels not in the cache, with measure's progress bar on a terminal, search,
kernel compilation) and how many kernel costs it measured. The cache defaults to a new file
per run, so that time is a cold one; pass `--cache` to keep and reuse the costs.

One child process per thread count, with models.py's environment (timing.thread_environment).
--quick: 2 blocks per model and, unless --models is given, resnet50 and inception_v1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

import graphopt
from graphopt.backends.measure import CostCache

from end_to_end import environment, graphopt_runner, onnxruntime_runner
from models import MODELS, load_model, model_inputs
from timing import interleaved_medians, parse_model_arguments, results_per_thread_count, write_json

DEFAULT_MODELS = ("resnet50", "inception_v1", "inception_v2", "squeezenet", "shufflenet", "densenet121")
QUICK_MODELS = ("resnet50", "inception_v1")
QUICK_ROUNDS = 2
SYSTEMS = ("cpu", "ort", "mixed")


def measure_model(name: str, threads: int, rounds: int, cache: str) -> dict:
    """The three Executables of model `name`: medians, the best single over the mix, the mix's
    steps per backend, and what its measured search cost."""
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    module = graphopt.from_onnx(model)
    executables = {backend: graphopt.compile(module, backends=(backend,), threads=threads) for backend in ("cpu", "ort")}
    known = len(CostCache(cache).costs)
    start = time.perf_counter()
    executables["mixed"] = graphopt.compile(module, backends=("cpu", "ort"), search="cost", measure=True,
                                            threads=threads, cost_cache=cache)
    search_seconds = time.perf_counter() - start
    measured = len(CostCache(cache).costs) - known
    runners = {system: graphopt_runner(exe, inputs) for system, exe in executables.items()}
    runners["ORT model"] = onnxruntime_runner(model, inputs, threads)
    expected = np.array(runners["cpu"]())
    for system in ("ort", "mixed", "ORT model"):
        actual = runners[system]()
        if not np.allclose(actual, expected, rtol=1e-3, atol=1e-3):
            print(f"WARNING: {name}: {system} differs from cpu by up to {np.max(np.abs(actual - expected)):.3g}")
    seconds = interleaved_medians(runners, 0.0, rounds)
    best = min(seconds["cpu"], seconds["ort"])
    steps = Counter(step.backend for step in executables["mixed"].steps)
    row = {"seconds": seconds, "speedup": best / seconds["mixed"], "mixed_steps": dict(steps),
           "search_seconds": search_seconds, "measured_kernels": measured}
    print(f"{name:<14} cpu {seconds['cpu'] * 1e3:7.2f} ms  ort {seconds['ort'] * 1e3:7.2f} ms  mixed "
          f"{seconds['mixed'] * 1e3:7.2f} ms  best/mixed {row['speedup']:5.2f}x  ORT model {seconds['ORT model'] * 1e3:7.2f} ms  "
          f"(mixed: {', '.join(f'{n} {b}' for b, n in steps.items())}; compiled in {search_seconds:.0f} s, "
          f"{measured} kernels measured)", flush=True)
    return row


def markdown_table(rows: dict[str, dict], threads: str) -> str:
    lines = [f"{threads} thread(s):", "",
             "| model | cpu | ort | mixed | best single / mixed | mixed steps | measured search | ORT, whole model |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        s = row["seconds"]
        steps = ", ".join(f"{n} {b}" for b, n in row["mixed_steps"].items())
        lines.append(f"| {name} | {s['cpu'] * 1e3:.2f} ms | {s['ort'] * 1e3:.2f} ms | {s['mixed'] * 1e3:.2f} ms | "
                     f"{row['speedup']:.2f}x | {steps} | {row['search_seconds']:.0f} s, {row['measured_kernels']} kernels | "
                     f"{s['ORT model'] * 1e3:.2f} ms |")
    return "\n".join(lines)


def parse_arguments() -> argparse.Namespace:
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--cache", help="the measured-cost cache file (default: a new one per run: cold measurements)")

    return parse_model_arguments(__doc__.splitlines()[0], MODELS, DEFAULT_MODELS, QUICK_MODELS, QUICK_ROUNDS, add_options)


def main() -> None:
    args = parse_arguments()
    if "GRAPHOPT_BENCHMARK_RESULT" in os.environ:
        threads = int(os.environ["GRAPHOPT_THREADS"])
        rows = {name: measure_model(name, threads, args.repeat, args.cache) for name in args.models.split(",")}
        Path(os.environ["GRAPHOPT_BENCHMARK_RESULT"]).write_text(json.dumps(rows))
        return
    results = {**environment(), "repeat": args.repeat, "threads": {}}
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or str(Path(scratch) / "costs.json")
        arguments = ["--models", args.models, "--repeat", str(args.repeat), "--cache", cache]
        results["threads"] = results_per_thread_count(args.threads.split(","), arguments, scratch)
    for threads, rows in results["threads"].items():
        print(markdown_table(rows, threads) + "\n")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
