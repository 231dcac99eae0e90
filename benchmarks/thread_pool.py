"""Row chunks on the native thread pool (`graphopt/runtime/thread_pool.py`) against one thread and against
a Python ThreadPoolExecutor running the same chunk functions (how graphopt ran them before):
whole compiled models and single kernels, interleaved in one run.

    python benchmarks/thread_pool.py [--seconds 1.0]

Columns: the median call at 1 thread; at 2 threads on the native pool; at 2 threads with the
chunks handed to a ThreadPoolExecutor from Python (every step called from Python, the split
ones as chunk calls, the executor's worker running chunks 1..); then 1 thread / native pool and
executor / native pool. A workload's three results are checked against each other. The
workloads all have split kernels; on the executor side their unsplit steps are Python calls too
(a few µs each), where the executable calls them from native code.
"""

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import graphopt
from graphopt.builder import GraphBuilder

from timing import interleaved_medians, main_over_shapes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from make_onnx_models import mnist_cnn


def relu_chain(rows: int, columns: int):
    b = GraphBuilder()
    x, w = b.input("x", (rows, columns)), b.input("w", (columns,))
    return b.finish(b.mul(b.relu(b.add(x, w)), b.constant(np.float32(0.5))))


def mlp(rows: int, inner: int, columns: int):
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (rows, inner))
    w = b.constant(rng.standard_normal((inner, columns)).astype(np.float32) / inner**0.5)
    bias = b.constant(rng.standard_normal(columns).astype(np.float32))
    return b.finish(b.relu(b.add(b.matmul(x, w), bias)))


def executor_run(executable, executor: ThreadPoolExecutor):
    """The executable's steps called from Python, split kernels' chunks on `executor`."""
    frame = executable._frame()

    def step_call(step):
        inputs, outputs = [executable.slots[v] for v in step.inputs], [executable.slots[v] for v in step.outputs]
        kernel = step.kernel
        if not kernel.chunks:
            return lambda: kernel([frame.arrays[s] for s in inputs], [frame.arrays[s] for s in outputs])
        compiled, _ = kernel.owners
        chunk_functions = [(compiled[name].unchecked, begin) for name, begin in kernel.chunks]

        def run():
            addresses = [a.ctypes.data for a in (*(frame.arrays[s] for s in inputs), *kernel.constants,
                                                 *(frame.arrays[s] for s in outputs))]
            calls = [(f, [a + begin * size for a, size in zip(addresses, kernel.plan.row_bytes)]) for f, begin in chunk_functions]
            pending = [executor.submit(f, *args) for f, args in calls[1:]]
            calls[0][0](*calls[0][1])
            for future in pending:
                future.result()
        return run

    calls = [step_call(step) for step in executable.steps]

    def run(*arguments):
        for slot, array in zip(executable.argument_slots, arguments):
            frame.bind(slot, array)
        for call in calls:
            call()
        return [frame.arrays[slot] for slot in executable.result_slots]
    return run


def compare(name: str, module, seconds: float) -> str:
    main = module.body.block.first_op
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(t.get_shape()).astype(np.float32) for t in main.function_type.inputs.data]
    one, two = graphopt.compile(module, threads=1), graphopt.compile(module, threads=2)
    with ThreadPoolExecutor(1) as executor:
        through_executor = executor_run(two, executor)
        results = [one(*inputs), two(*inputs), through_executor(*inputs)]
        for other in results[1:]:
            for got, want in zip(other, results[0], strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        medians = interleaved_medians({
            "one": lambda: one(*inputs), "pool": lambda: two(*inputs), "executor": lambda: through_executor(*inputs),
        }, seconds)
    split = sum(bool(step.kernel.chunks) for step in two.steps)
    times = "  ".join(f"{medians[side] * 1e6:9.1f} us" for side in ("one", "pool", "executor"))
    return (f"{name:34s} {split}/{len(two.steps)} split  {times}  "
            f"{medians['one'] / medians['pool']:5.2f}x  {medians['executor'] / medians['pool']:5.2f}x")


WORKLOADS = [
    ("relu chain 64x1024", relu_chain(64, 1024)),
    ("relu chain 1024x1024", relu_chain(1024, 1024)),
    ("MLP relu(x@W+b) 256x1024x1024", mlp(256, 1024, 1024)),
    ("MNIST CNN batch 64", graphopt.from_onnx(mnist_cnn(), shapes={"x": [64, 1, 28, 28]})),
]

if __name__ == "__main__":
    main_over_shapes(
        __doc__.splitlines()[0],
        f"{'workload':34s} {'steps':11s} {'1 thread':>12s} {'2, pool':>12s} {'2, executor':>12s}  "
        "1 thread/pool  executor/pool",
        WORKLOADS,
        compare,
    )
