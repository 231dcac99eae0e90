"""Time the fuse pass on a large graph: a stack of transformer blocks of about 2,000 ops.

    python benchmarks/fuse_large_graph.py [--blocks 44] [--repeat 3]

Prints the op count, the groups formed and the median wall time of `fuse` (default options,
and with multi-output), each measured on a freshly built module in this process.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.parsing import make_context
from graphopt.transforms.fuse import FusePass

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from make_examples import transformer_block  # noqa: E402


def build_stack(blocks: int, seq: int = 16, dim: int = 32):
    b = GraphBuilder()
    rng = np.random.default_rng(0)
    x = b.input("x", (seq, dim))
    for _ in range(blocks):
        x = transformer_block(b, x, rng)
    return b.finish(x)


def count(module, op_type=None) -> int:
    ops = [op for op in module.walk() if op.name.startswith("graph.")]
    return len(ops) if op_type is None else sum(isinstance(op, op_type) for op in ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=44)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    ops = count(build_stack(args.blocks))
    print(f"graph: {args.blocks} transformer blocks, {ops} graph ops")
    print(f"{'options':<20} {'groups':>7} {'median s':>9} {'min s':>7}")
    for label, options in (("default", {}), ("multi-output", {"multi_output": True})):
        times, groups = [], 0
        for _ in range(args.repeat):
            module = build_stack(args.blocks)
            start = time.perf_counter()
            FusePass(**options).apply(make_context(), module)
            times.append(time.perf_counter() - start)
            groups = count(module, graph.FusedOp)
        print(f"{label:<20} {groups:>7} {statistics.median(times):>9.3f} {min(times):>7.3f}")


if __name__ == "__main__":
    main()
