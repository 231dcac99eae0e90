"""Where a model's time goes against ONNX Runtime, by category (issue 17).

    python benchmarks/model_categories.py --models squeezenet,shufflenet [--threads 1,2] [--repeat 20]

Every graphopt step (`Executable.profile`) and every ONNX Runtime node (its per-node profile,
`SessionOptions.enable_profiling`), medians of `repeat` runs, one profile of each side in turn
(so both see the same phases of a shared host), summed by category: convs by the
ukernel the cpu schedule picks (`CpuSchedule.conv_ukernel`: lanes, depthwise, gemm, direct, loops), pools,
concats, FC, reshapes/transposes (channel shuffles), the rest by op kind. ORT's conv nodes are
matched to graphopt's convs by (w, x) shape in order, so each conv row compares the same convs.
Convs without an ORT node are printed and counted in rows of their own ("conv gemm, no ORT
node"): ORT merges convs of one input and equal weights, and the light zoo's weights are all
`ConstantOfShape` fills of 0.02, so the 1x1s of an Inception block become one node (its batch
norms then separate nodes, "conv, no graphopt step"). The last rows: the sum of steps (nodes), a
whole call's median, and the difference, the per-call overhead. Then the `--top` convs with the largest gaps.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import onnxruntime

import graphopt
from graphopt.dialects import graph
from graphopt.lowering.linalg.abi import Group
from graphopt.lowering.linalg.schedule import CpuSchedule
from models import BACKENDS, MODELS, load_model, model_inputs
from timing import checked_models

ORT_CATEGORIES = {
    "Conv": "conv", "FusedConv": "conv", "MaxPool": "pool", "AveragePool": "pool", "GlobalAveragePool": "pool",
    "Concat": "concat", "Gemm": "FC", "MatMul": "FC", "FusedGemm": "FC",
    "Reshape": "reshape/transpose", "Transpose": "reshape/transpose", "Flatten": "reshape/transpose",
}


def step_category(step) -> tuple[str, graph.Conv2dOp | None]:
    """A step's category, and its conv if it has one."""
    ops = graph.computed_ops(step.op)
    kinds = [op.name.removeprefix("graph.") for op in ops]
    convs = [op for op in ops if isinstance(op, graph.Conv2dOp)]
    if convs:
        return f"conv {CpuSchedule().conv_ukernel(Group.of(step.op), convs[0]) or 'loops'}", convs[0]
    for category, matches in (("pool", "pool"), ("concat", "concat"), ("FC", "matmul")):
        if any(matches in kind for kind in kinds):
            return category, None
    if any(kind in ("transpose", "reshape") for kind in kinds):
        return "reshape/transpose", None
    return "+".join(kinds), None


def ort_node_seconds(model, inputs: list[np.ndarray], threads: int, repeat: int,
                     before_each_run: Callable[[], object] | None = None) -> tuple[dict[str, tuple[dict, float]], float]:
    """Each ORT node's (profile args, median seconds), and the median of whole runs;
    `before_each_run`, if given, runs untimed before each of the `repeat` runs (the other side
    of an interleaved comparison)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as end_to_end's sessions: its
    # threads would otherwise spin on into graphopt's interleaved profile and take a core from it
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {value.name: array for value, array in zip(session.get_inputs(), inputs)}
    session.run(None, feed)
    walls = []
    for _ in range(repeat):
        if before_each_run is not None:
            before_each_run()
        start = time.perf_counter()
        session.run(None, feed)
        walls.append(time.perf_counter() - start)
    path = session.end_profiling()
    with open(path) as file:
        events = json.load(file)
    os.remove(path)
    samples: dict[str, list[float]] = collections.defaultdict(list)
    args: dict[str, dict] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            samples[event["name"]].append(event["dur"] * 1e-6)
            args[event["name"]] = event["args"]
    return {name: (args[name], statistics.median(s[-repeat:])) for name, s in samples.items()}, statistics.median(walls)


def compare(name: str, threads: int, repeat: int, top: int = 8) -> None:
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    executable = graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=threads)
    step_samples: list[list[float]] = [[] for _ in executable.steps]
    call_samples: list[float] = []

    def profile_once() -> None:
        profile = executable.profile(*inputs, repeat=1)
        for samples, row in zip(step_samples, profile.steps):
            samples.append(row.seconds)
        call_samples.append(profile.call_seconds)

    # one profile of each side in turn: this host's speed changes in phases of seconds (docs/benchmarks.md)
    nodes, ort_call = ort_node_seconds(model, inputs, threads, repeat, before_each_run=profile_once)
    step_seconds = [statistics.median(samples) for samples in step_samples]
    ours_sum, ours_call = sum(step_seconds), statistics.median(call_samples)
    ours, ours_count = collections.defaultdict(float), collections.Counter()
    convs = []
    for step, seconds in zip(executable.steps, step_seconds):
        category, conv = step_category(step)
        ours[category] += seconds
        ours_count[category] += 1
        if conv is not None:
            convs.append((category, tuple(conv.w.type.get_shape()), tuple(conv.x.type.get_shape()), seconds))
    theirs, theirs_count = collections.defaultdict(float), collections.Counter()
    ort_convs: dict[tuple, list[float]] = collections.defaultdict(list)
    for args, seconds in nodes.values():
        category = ORT_CATEGORIES.get(args["op_name"], args["op_name"])
        if category == "conv":
            x, w = ([*shape.values()][0] for shape in args["input_type_shape"][:2])
            ort_convs[(tuple(w), tuple(x))].append(seconds)
        else:
            theirs[category] += seconds
            theirs_count[category] += 1
    gaps = []
    for category, w, x, seconds in convs:
        matched = ort_convs.get((w, x))
        if not matched:
            print(f"unmatched conv w{w} x{x}: {seconds * 1e3:.3f} ms")
            for counts, change in ((ours, seconds), (ours_count, 1)):
                counts[category] -= change
                counts[f"{category}, no ORT node"] += change
            continue
        ort_seconds = matched.pop(0)
        theirs[category] += ort_seconds
        theirs_count[category] += 1
        gaps.append((seconds - ort_seconds, category, w, x, seconds, ort_seconds))
    for unmatched in ort_convs.values():
        theirs["conv, no graphopt step"] += sum(unmatched)
        theirs_count["conv, no graphopt step"] += len(unmatched)
    ort_sum = sum(seconds for _, seconds in nodes.values())
    print(f"\n{name}, {threads} thread(s): ms (steps / nodes)")
    print("| category | graphopt | ORT | gap |\n|---|---|---|---|")
    for category in sorted(set(ours) | set(theirs), key=lambda c: theirs[c] - ours[c]):
        print(f"| {category} | {ours[category] * 1e3:.2f} ({ours_count[category]}) | "
              f"{theirs[category] * 1e3:.2f} ({theirs_count[category]}) | {(ours[category] - theirs[category]) * 1e3:+.2f} |")
    print(f"| sum of steps / nodes | {ours_sum * 1e3:.2f} | {ort_sum * 1e3:.2f} | |")
    print(f"| whole call | {ours_call * 1e3:.2f} | {ort_call * 1e3:.2f} | {(ours_call - ort_call) * 1e3:+.2f} |")
    print(f"| call - sum | {(ours_call - ours_sum) * 1e3:+.2f} | {(ort_call - ort_sum) * 1e3:+.2f} | |")
    for _, category, w, x, seconds, ort_seconds in sorted(gaps, reverse=True)[:top]:
        print(f"  {category:<14} w{w} x{x}: {seconds * 1e3:.3f} / {ort_seconds * 1e3:.3f} ms, {seconds / ort_seconds:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet,inception_v2,shufflenet,vgg19")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--top", type=int, default=8, help="convs with the largest gaps to print")
    args = parser.parse_args()
    for name in checked_models(parser, args.models.split(","), MODELS):
        for threads in map(int, args.threads.split(",")):
            compare(name, threads, args.repeat, args.top)


if __name__ == "__main__":
    main()
