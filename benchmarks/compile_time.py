"""Compile times with and without the persistent kernel cache (issue 20), one row per model.

    python benchmarks/compile_time.py [--models examples/mlp.mlir,resnet50] [--profile resnet50]

Models: examples/*.mlir, the ONNX light zoo's ResNet-50 and Inception v1 (`resnet50`,
`inception_v1`; needs onnx), and examples/make_transformer_models.py's GPT-2 block (`gpt2_block`).
Columns, each `graphopt.compile(module, backends=("cpu",))` timed alone (parsing or the ONNX
import is not counted; the process columns are):

- cold: a new process, an empty kernel cache (a temporary directory),
- warm disk: a new process, the cache the cold run filled,
- warm in process: the same module compiled again in the cold run's process (the JIT's
  in-memory cache of compiled modules),
- process: wall time of the warm-disk process, from start to exit (Python, imports, parsing),
- load: `graphopt.load` of the Executable the cold run saved (`exe.save`), in a new process
  with the kernel cache off (graphopt.compiler already imported), in wall and in CPU time (the
  CPU time depends less on other jobs of a shared machine),
- load process: wall time of that process, from start to exit.

--profile MODEL prints cProfile's top functions (cumulative) of a warm-disk compile of MODEL.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO_MODELS = ("resnet50", "inception_v1")
TRANSFORMER_MODELS = ("gpt2_block",)

CHILD = """
import cProfile, json, pstats, sys, time
import graphopt
from graphopt.runtime.kernel_cache import active_kernel_cache
source, profile, saved = sys.argv[1], sys.argv[2] == "profile", sys.argv[3]
if source.endswith(".onnx"):
    module = graphopt.from_onnx(source)
else:
    module = graphopt.parse(source)
profiler = cProfile.Profile() if profile else None
start = time.perf_counter()
if profiler:
    profiler.enable()
executable = graphopt.compile(module, backends=("cpu",))
if profiler:
    profiler.disable()
first = time.perf_counter() - start
start = time.perf_counter()
graphopt.compile(module, backends=("cpu",))
again = time.perf_counter() - start
executable.save(saved)
if profiler:
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
cache = active_kernel_cache()
print(json.dumps({"first": first, "again": again, "hits": cache.hits, "misses": cache.misses}))
"""

LOAD_CHILD = """
import json, sys, time
import graphopt.compiler
start, cpu = time.perf_counter(), time.process_time()
graphopt.compiler.load(sys.argv[1], recompile=False)
print(json.dumps({"load": time.perf_counter() - start, "cpu": time.process_time() - cpu}))
"""


def model_path(name: str, directory: str) -> str:
    """The model's file: an example, a light-zoo model, or a transformer builder's written to `directory`."""
    if name in ZOO_MODELS:
        import onnx

        return str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx")
    if name in TRANSFORMER_MODELS:
        import onnx

        sys.path.insert(0, str(ROOT / "examples"))
        import make_transformer_models

        path = str(Path(directory) / f"{name}.onnx")
        onnx.save(getattr(make_transformer_models, name)(), path)
        return path
    return str(ROOT / name)


def run_child(arguments: list[str], cache_dir: str, profile: bool = False, child: str = CHILD) -> tuple[dict, float]:
    """The child's timings, and the wall time of its whole process."""
    environment = dict(os.environ, GRAPHOPT_KERNEL_CACHE=cache_dir)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", child, *arguments],
        env=environment, capture_output=True, text=True, check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{arguments[0]}: {done.stderr.strip().splitlines()[-1]}")
    if profile:
        print(done.stderr)
    return json.loads(done.stdout), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.mlir"))
    parser.add_argument("--models", default=",".join([*examples, *ZOO_MODELS, *TRANSFORMER_MODELS]),
                        help="comma-separated")
    parser.add_argument("--profile", help="profile a warm-disk compile of this model")
    arguments = parser.parse_args()

    if arguments.profile:
        with tempfile.TemporaryDirectory() as directory:
            source, saved = model_path(arguments.profile, directory), str(Path(directory) / "model.gx")
            run_child([source, "time", saved], directory)
            run_child([source, "profile", saved], directory, profile=True)
        return

    print(f"{'model':34} {'modules':>7} {'cold s':>8} {'warm disk s':>11} {'warm in process s':>17} {'process s':>9}"
          f" {'load s':>6} {'load cpu s':>10} {'load process s':>14}")
    for name in arguments.models.split(","):
        with tempfile.TemporaryDirectory() as directory:
            source, saved = model_path(name, directory), str(Path(directory) / "model.gx")
            cache_dir = str(Path(directory) / "kernels")
            cold, _ = run_child([source, "time", saved], cache_dir)
            warm, process = run_child([source, "time", saved], cache_dir)
            load, load_process = run_child([saved], "off", child=LOAD_CHILD)
        assert warm["misses"] == 0, f"{name}: the warm run missed the cache"
        print(f"{name:34} {cold['misses']:>7} {cold['first']:>8.2f} {warm['first']:>11.2f} {cold['again']:>17.2f} {process:>9.2f}"
              f" {load['load']:>6.2f} {load['cpu']:>10.2f} {load_process:>14.2f}")


if __name__ == "__main__":
    main()
