"""Seconds the partition pass's cost search (`transforms.partition.search`) takes on wide graphs,
with costs from a fake table: independent ops, an Inception-like and a DenseNet-like graph.

    python benchmarks/partition_search.py
"""

from __future__ import annotations

import itertools
import time

from graphopt.transforms.partition import Candidate, search

MAX_DEPTH = 3


def independent(count: int) -> list[list[int]]:
    return [[] for _ in range(count)]


def inception(ops: int) -> list[list[int]]:
    """Blocks of four branches (of 1, 2, 3 and 2 ops) from one input, joined by a concat."""
    inputs: list[list[int]] = [[]]
    while len(inputs) < ops:
        start = len(inputs) - 1
        ends = []
        for length in (1, 2, 3, 2):
            previous = start
            for _ in range(length):
                inputs.append([previous])
                previous = len(inputs) - 1
            ends.append(previous)
        inputs.append(ends)
    return inputs[:ops]


def densenet(ops: int, block: int = 12) -> list[list[int]]:
    """Dense blocks: each op reads every earlier op of its block (and the block's input)."""
    inputs: list[list[int]] = [[]]
    while len(inputs) < ops:
        first = len(inputs) - 1
        for _ in range(block):
            inputs.append(list(range(first, len(inputs))))
    return inputs[:ops]


def candidates(inputs: list[list[int]]) -> list[Candidate]:
    """Every connected set of at most MAX_DEPTH ops, on two backends, with made-up costs."""
    neighbours = [set(p) for p in inputs]
    for op, producers in enumerate(inputs):
        for p in producers:
            neighbours[p].add(op)
    found = layer = {frozenset({op}) for op in range(len(inputs))}
    for _ in range(MAX_DEPTH - 1):
        layer = {s | {n} for s in layer for op in s for n in neighbours[op] - s}
        found = found | layer
    table = []
    for ops, backend in itertools.product(sorted(found, key=sorted), ("cpu", "blas")):
        cost = (len(ops) * 3 + sum(ops) % 7 + (backend == "blas")) * 1e-6 / len(ops) ** 0.5
        table.append(Candidate(ops, backend, cost))
    return table


def seconds(inputs: list[list[int]]) -> float:
    table = candidates(inputs)
    start = time.perf_counter()
    search(inputs, table, ["cpu", "blas"], launch_penalty=2e-6)
    return time.perf_counter() - start


def main() -> None:
    cases = {
        "24 independent ops": independent(24),
        "100 independent ops": independent(100),
        "500 independent ops": independent(500),
        "500-op Inception-like": inception(500),
        "500-op DenseNet-like": densenet(500),
    }
    for name, inputs in cases.items():
        print(f"{name:24} {seconds(inputs):8.3f} s")


if __name__ == "__main__":
    main()
