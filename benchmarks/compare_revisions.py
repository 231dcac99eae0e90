"""graphopt at two revisions, side by side in one run: end_to_end.py's workloads, interleaved.

    python benchmarks/compare_revisions.py --baseline /path/to/old/checkout [--threads 1] [--repeat 20]

Each revision runs in a worker process of its own (the baseline with the Python of its checkout's
`.venv`, the candidate with this Python), which builds end_to_end.py's workloads from its own
checkout and compiles each of graphopt's systems there (unfused, fused, partitioned by measured
costs; blas alone where the workload has an anchor). The driver then takes samples round-robin:
one sample of a system on one revision, then on the other, alternating which goes first, so
load on the machine falls on both alike. It prints each median and the ratio candidate ÷
baseline (above 1: the candidate is slower), and checks that both revisions compute the same
outputs (rtol 1e-4, atol 1e-5 of the largest output).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEMS = ("unfused", "fused", "partitioned", "blas")
SAMPLE_SECONDS = 2e-3


# ----------------------------------------------------------------------------------------
# The worker: one revision, answering requests on stdin, one JSON line each
# ----------------------------------------------------------------------------------------


def serve(threads: int, cost_cache: str) -> None:
    """Build and compile every workload, then answer `time <workload> <system> <calls>` lines
    with the seconds per call, and `output <workload> <system> <file>` by saving the output."""
    import numpy as np

    sys.path.insert(0, os.getcwd())  # the revision's own benchmarks/ (the worker runs there), not this file's
    import end_to_end

    systems = {}
    for workload in end_to_end.workloads(np.random.default_rng(0)):
        module = end_to_end.graphopt.from_onnx(workload.model, shapes=workload.shapes)
        runners, _ = end_to_end.runners(workload, module, threads, cost_cache)
        for name in SYSTEMS:
            if name in runners:
                systems[workload.name, name] = runners[name]
    print(json.dumps(sorted(systems)), flush=True)
    for line in sys.stdin:
        request, workload, system, argument = json.loads(line)
        run = systems[workload, system]
        if request == "output":
            np.save(argument, np.asarray(run()))
            print(json.dumps(None), flush=True)
        else:
            start = time.perf_counter()
            for _ in range(argument):
                run()
            print(json.dumps((time.perf_counter() - start) / argument), flush=True)


class Worker:
    """A revision's worker process."""

    def __init__(self, python: str, checkout: Path, threads: int):
        env = {**os.environ, "GRAPHOPT_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
               "OPENBLAS_THREAD_TIMEOUT": "4", "OMP_WAIT_POLICY": "PASSIVE"}
        cache = Path(tempfile.mkdtemp()) / "costs.json"
        self.process = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--serve", "--threads", str(threads), "--cost-cache", str(cache)],
            cwd=checkout / "benchmarks", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.systems = {tuple(pair) for pair in self._answer()}

    def ask(self, *request) -> object:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> object:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"compare_revisions: a worker exited with status {self.process.wait()}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


# ----------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------


def same_outputs(baseline: Worker, candidate: Worker, pair: tuple[str, str]) -> bool:
    import numpy as np

    folder = Path(tempfile.mkdtemp())
    arrays = []
    for worker, name in ((baseline, "baseline.npy"), (candidate, "candidate.npy")):
        worker.ask("output", *pair, str(folder / name))
        arrays.append(np.load(folder / name))
    # atol scales with the output: a GEMM's sum over 1024 terms in another order moves an output
    # of 0.001 next to ones of 150 by 2e-4 (what two revisions picking blas or cpu differ by)
    scale = float(np.nanmax(np.abs(arrays[0]), initial=1.0, where=np.isfinite(arrays[0])))
    return bool(np.allclose(*arrays, rtol=1e-4, atol=1e-5 * scale, equal_nan=True))


def compare(baseline: Worker, candidate: Worker, repeat: int) -> list[tuple[str, str, float, float]]:
    rows = []
    for pair in sorted(baseline.systems & candidate.systems):
        calls = max(1, round(SAMPLE_SECONDS / min(baseline.ask("time", *pair, 1), candidate.ask("time", *pair, 1))))
        samples: dict[Worker, list[float]] = {baseline: [], candidate: []}
        for index in range(repeat):
            order = (baseline, candidate) if index % 2 == 0 else (candidate, baseline)
            for worker in order:
                samples[worker].append(worker.ask("time", *pair, calls))
        medians = statistics.median(samples[baseline]), statistics.median(samples[candidate])
        rows.append((*pair, *medians))
        note = "" if same_outputs(baseline, candidate, pair) else "   OUTPUTS DIFFER"
        print(f"{pair[0]:<30} {pair[1]:<12} {medians[0] * 1e3:10.3f} ms {medians[1] * 1e3:10.3f} ms "
              f"{medians[1] / medians[0]:7.3f}x{note}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the old checkout (its .venv/bin/python runs it)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20, help="samples per system and revision")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cost-cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.threads, args.cost_cache)
        return
    if args.baseline is None:
        parser.error("--baseline is required")
    candidate_checkout = Path(__file__).resolve().parent.parent
    baseline = Worker(str(args.baseline / ".venv" / "bin" / "python"), args.baseline.resolve(), args.threads)
    candidate = Worker(sys.executable, candidate_checkout, args.threads)
    print(f"{'workload':<30} {'system':<12} {'baseline':>13} {'candidate':>13} {'ratio':>8}  ({args.threads} thread(s))")
    rows = compare(baseline, candidate, args.repeat)
    worst = max(rows, key=lambda row: row[3] / row[2])
    print(f"slowest change: {worst[0]} / {worst[1]}: {worst[3] / worst[2]:.3f}x")
    baseline.close()
    candidate.close()


if __name__ == "__main__":
    main()
