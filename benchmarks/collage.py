"""Collage on whole models: cpu alone, ort alone, the mix and ONNX Runtime on the model, side by side (issue 18).

    python benchmarks/collage.py [--models resnet50,bert_layer] [--threads 1,2] [--repeat 10]
                                 [--quick] [--cache costs.json] [--json out.json]

Needs onnx and onnxruntime (`pip install -e ".[onnx]"`). The models are benchmarks/models.py's
(the ONNX light zoo's CNNs and the builders there) and examples/make_transformer_models.py's
(bert_layer, gpt2_block, vit_stem, whisper_stem, at their default sizes). Per model, three
graphopt Executables of the same imported module:

- cpu: `graphopt.compile(m, backends=("cpu",))`, every group on graphopt's LLVM kernels;
- ort: graphopt's ort backend alone as the mixed search placed it among the plans it timed
  whole (the library-alone plan the mix is compared with: one session per group, or groups
  merged into longer sessions, whichever it timed faster), compiled again; where the search
  timed no ort plan, `graphopt.compile(m, backends=("ort",))`;
- mixed: `graphopt.compile(m, backends=("cpu", "ort"), search="cost", measure=True)`, each
  group placed by the kernels' measured latencies (Collage's search, with long ORT pieces
  between cpu kernels), costs in `--cache`;

and, apart, ONNX Runtime on the original model (end_to_end.onnxruntime_runner: one session,
ORT_ENABLE_ALL, I/O binding): not one of graphopt's plans, since the search cannot choose the
original graph. The outputs are compared (a warning beyond rtol = atol = 1e-3), then the four
are timed interleaved in one run (timing.interleaved_medians: alternating blocks of 4 calls,
for at least TIMING_SECONDS and --repeat blocks each, medians).
Each row gives the medians, the best single backend (cpu or ort) over the mix (above 1: the
mix wins), ORT on the model over the mix, whether the mix splits the work between the
backends, the mix's plan (`ort 5 pieces (120 ops) / cpu 12 kernels`), and the measurement
time: the mixed compile (fusion, candidates, measuring the kernels not in the cache, with
measure's progress bar on a terminal, search, timing the best plans whole, kernel
compilation), how many kernel costs it measured, and of that time how long it spent timing
whole plans (Collage's second level). The cache defaults to a new file per run, so that time
is a cold one; pass `--cache` to keep and reuse the costs.

One child process per thread count, with models.py's environment (timing.thread_environment).
--quick: 2 blocks at least per model and, unless --models is given, resnet50 and bert_layer only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.func import FuncOp

import graphopt
from graphopt.backends.measure import CostCache
from graphopt.backends.steps import compile_kernels, placed_steps
from graphopt.backends.targets import RegistryTargets
from graphopt.dialects import graph

from end_to_end import environment, graphopt_runner, onnxruntime_runner
from models import MODELS, load_model, model_inputs
from timing import (
    child_thread_count,
    interleaved_medians,
    parse_model_arguments,
    results_per_thread_count,
    write_child_result,
    write_json,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from make_transformer_models import TRANSFORMER_MODELS

ALL_MODELS = (*MODELS, *TRANSFORMER_MODELS)
DEFAULT_MODELS = ("resnet50", "inception_v1", "squeezenet", "shufflenet", "bert_layer", "gpt2_block", "vit_stem",
                  "whisper_stem")
QUICK_MODELS = ("resnet50", "bert_layer")
QUICK_ROUNDS = 2
TIMING_SECONDS = 3.0
"""Interleaved timing per model at least this long: on the shared VM a few blocks of a fast
model (shufflenet, 2 ms) moved its medians by 5%."""
SINGLES = ("cpu", "ort")
"""The single backends the mix is compared with."""


def measure_model(name: str, threads: int, rounds: int, cache: str) -> dict:
    """The three Executables of model `name` and ONNX Runtime on the whole model: medians, the
    best single over the mix, the mix's steps per backend, and what its measured search cost."""
    model = TRANSFORMER_MODELS[name]() if name in TRANSFORMER_MODELS else load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    module = graphopt.from_onnx(model)
    executables = {"cpu": graphopt.compile(module, backends=("cpu",), threads=threads)}
    known = len(CostCache(cache).costs)
    start = time.perf_counter()
    with whole_plan_timing() as second_level:
        executables["mixed"] = graphopt.compile(module, backends=("cpu", "ort"), search="cost", measure=True,
                                                threads=threads, cost_cache=cache)
    search_seconds = time.perf_counter() - start
    measured = len(CostCache(cache).costs) - known
    executables["ort"] = fastest_timed_plan_on("ort", second_level.plans, threads) or graphopt.compile(
        module, backends=("ort",), threads=threads)
    runners = {system: graphopt_runner(executables[system], inputs) for system in ("cpu", "ort", "mixed")}
    runners["ORT model"] = onnxruntime_runner(model, inputs, threads)
    expected = np.array(runners["cpu"]())
    for system in ("ort", "mixed", "ORT model"):
        actual = runners[system]()
        if not np.allclose(actual, expected, rtol=1e-3, atol=1e-3):
            print(f"WARNING: {name}: {system} differs from cpu by up to {np.max(np.abs(actual - expected)):.3g}")
    seconds = interleaved_medians(runners, TIMING_SECONDS, rounds)
    best = min(SINGLES, key=seconds.__getitem__)
    mixed = executables["mixed"]
    row = {"seconds": seconds, "best_single": best, "speedup": seconds[best] / seconds["mixed"],
           "ort_model_speedup": seconds["ORT model"] / seconds["mixed"],
           "splits": len({step.backend for step in mixed.steps}) > 1, "plan": plan_summary(mixed),
           "ort_plan": plan_summary(executables["ort"]), "search_seconds": search_seconds,
           "measured_kernels": measured, "whole_plan_seconds": second_level.seconds}
    print(f"{name:<14} cpu {seconds['cpu'] * 1e3:7.2f} ms  ort {seconds['ort'] * 1e3:7.2f} ms  mixed "
          f"{seconds['mixed'] * 1e3:7.2f} ms  best single ({best})/mixed {row['speedup']:5.2f}x  ORT model "
          f"{seconds['ORT model'] * 1e3:7.2f} ms ({row['ort_model_speedup']:.2f}x)  (mixed: {row['plan']}; ort: "
          f"{row['ort_plan']}; compiled in {search_seconds:.0f} s, {measured} kernels measured, "
          f"{row['whole_plan_seconds']:.1f} s timing whole plans)", flush=True)
    return row


@dataclass
class SecondLevel:
    """What the measured search's second level did: `seconds` spent compiling and timing plans
    whole (`RegistryTargets.time_plans`), and each plan it timed (a placed function) with its seconds."""

    seconds: float = 0.0
    plans: list[tuple[FuncOp, float]] = field(default_factory=list)


@contextmanager
def whole_plan_timing() -> Iterator[SecondLevel]:
    """The SecondLevel of the measured searches inside the `with`."""
    second_level = SecondLevel()
    time_plans = RegistryTargets.time_plans

    def timed(targets: RegistryTargets, functions):
        start = time.perf_counter()
        try:
            seconds = time_plans(targets, functions)
            second_level.plans += zip(functions, seconds)
            return seconds
        finally:
            second_level.seconds += time.perf_counter() - start

    RegistryTargets.time_plans = timed
    try:
        yield second_level
    finally:
        RegistryTargets.time_plans = time_plans


def fastest_timed_plan_on(backend: str, plans: list[tuple[FuncOp, float]], threads: int) -> graphopt.Executable | None:
    """The fastest of the timed plans that run every step on `backend` (the search's plan of that
    backend alone), as an Executable with kernels of its own; None if the search timed none."""
    alone = [(function, seconds) for function, seconds in plans
             if {step.backend for step in placed_steps(function)} == {backend}]
    if not alone:
        return None
    function, _ = min(alone, key=lambda plan: plan[1])
    steps = placed_steps(function)
    compile_kernels(steps, threads)  # its own kernels: the mix's, shared, would rebind ORT's buffers each call
    return graphopt.Executable(function.parent_op(), function, steps, threads)


def plan_summary(executable: graphopt.Executable) -> str:
    """The mix's steps per backend, the ORT ones with the graph ops they hold: `ort 5 pieces (120
    ops) / cpu 12 kernels`."""
    parts = []
    for backend in dict.fromkeys(step.backend for step in executable.steps):
        steps = [step for step in executable.steps if step.backend == backend]
        if backend == "ort":
            ops = sum(len(graph.computed_ops(step.op)) for step in steps)
            parts.append(f"ort {len(steps)} piece{'s' * (len(steps) != 1)} ({ops} ops)")
        else:
            parts.append(f"{backend} {len(steps)} kernel{'s' * (len(steps) != 1)}")
    return " / ".join(parts)


def markdown_table(rows: dict[str, dict], threads: str) -> str:
    lines = [f"{threads} thread(s):", "",
             "| model | cpu | ort (its plan) | mixed | best single / mixed | splits | mixed plan | measured search "
             "(of it, timing whole plans) | ORT, original model (over mixed) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        s = row["seconds"]
        lines.append(f"| {name} | {s['cpu'] * 1e3:.2f} ms | {s['ort'] * 1e3:.2f} ms ({row['ort_plan']}) | "
                     f"{s['mixed'] * 1e3:.2f} ms | {row['speedup']:.2f}x ({row['best_single']}) | "
                     f"{'yes' if row['splits'] else 'no'} | {row['plan']} | {row['search_seconds']:.0f} s, "
                     f"{row['measured_kernels']} kernels ({row['whole_plan_seconds']:.1f} s) | "
                     f"{s['ORT model'] * 1e3:.2f} ms ({row['ort_model_speedup']:.2f}x) |")
    return "\n".join(lines)


def parse_arguments() -> argparse.Namespace:
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--cache", help="the measured-cost cache file (default: a new one per run: cold measurements)")

    return parse_model_arguments(__doc__.splitlines()[0], ALL_MODELS, DEFAULT_MODELS, QUICK_MODELS, QUICK_ROUNDS,
                                 add_options)


def main() -> None:
    args = parse_arguments()
    threads = child_thread_count()
    if threads is not None:
        write_child_result({name: measure_model(name, threads, args.repeat, args.cache) for name in args.models.split(",")})
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
