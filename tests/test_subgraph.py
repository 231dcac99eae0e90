"""transforms/subgraph.py: the one topological order, convexity test, and extraction (as a group,
as a function) of the graph level."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import graphopt
from graphopt.dialects import graph
from graphopt.transforms.subgraph import is_convex, outline, standalone, topological_order

DIAMOND = {0: [1, 2], 1: [3], 2: [3], 3: []}
"""0 -> 1 -> 3 and 0 -> 2 -> 3, by successor."""


def producers_of(successors):
    producers = {n: [] for n in successors}
    for n, outs in successors.items():
        for o in outs:
            producers[o].append(n)
    return producers.__getitem__


def test_order_follows_dataflow_and_breaks_ties_by_rank():
    assert topological_order([3, 2, 1, 0], producers_of(DIAMOND), rank=lambda n: -n) == [0, 2, 1, 3]
    assert topological_order([3, 2, 1, 0], producers_of(DIAMOND), rank=lambda n: n) == [0, 1, 2, 3]


def test_a_cycle_has_no_order():
    assert topological_order(["a", "b"], {"a": ["b"], "b": ["a"]}.__getitem__, rank=str) is None


def test_a_set_a_path_leaves_and_reenters_is_not_convex():
    assert not is_convex({0, 3}, DIAMOND.__getitem__, position=int)
    assert is_convex({0, 1, 2, 3}, DIAMOND.__getitem__, position=int)
    assert is_convex({1, 3}, {0: [1, 2], 1: [3], 2: [], 3: []}.__getitem__, position=int)


@given(st.lists(st.lists(st.integers(0, 7), max_size=3), min_size=8, max_size=8), st.sets(st.integers(0, 7), min_size=1))
def test_convex_means_no_outside_node_is_both_reachable_from_and_reaching_the_set(raw, members):
    """Against the definition, on random DAGs (edges only go forward, so indices are topological)."""
    successors = {n: sorted({m for m in outs if m > n}) for n, outs in enumerate(raw)}

    def reachable(start):
        seen, pending = set(), list(start)
        while pending:
            n = pending.pop()
            if n not in seen:
                seen.add(n)
                pending += successors[n]
        return seen

    after = reachable([s for m in members for s in successors[m]])
    between = {n for n in after - members if reachable(successors[n]) & members}
    assert is_convex(members, successors.__getitem__, position=int) == (not between)


def test_outline_reads_each_outside_value_once_in_order_of_first_use():
    b = graphopt.GraphBuilder()
    x, w, bias = b.input("x", (4, 8)), b.input("w", (8, 8)), b.input("bias", (8,))
    product = b.matmul(x, w)
    total = b.add(product, bias)
    twice = b.add(total, x)
    ops = [product.owner, total.owner, twice.owner]
    group, inputs = outline(ops, [twice, product], "g", mode="fallback")
    assert inputs == [x, w, bias] and list(group.operands) == [x, w, bias]
    assert (group.group_name.data, group.mode_name) == ("g", "fallback")
    body = [op.name for op in group.body.block.ops]
    assert body == ["graph.matmul", "graph.add", "graph.add", "graph.yield"]
    assert [r.type for r in group.results] == [twice.type, product.type]


def test_outline_sees_operands_through_source_and_reads_outer_values():
    b = graphopt.GraphBuilder()
    x, y = b.input("x", (3,)), b.input("y", (3,))
    negated = b.neg(x)
    group, inputs = outline([negated.owner], [negated], "g", source=lambda v: y, outer=lambda v: x)
    assert inputs == [y] and list(group.operands) == [x]


def test_standalone_keeps_constant_operands_as_constants():
    b = graphopt.GraphBuilder()
    x = b.input("x", (2, 3))
    scale = b.constant(np.full((3,), 2.0, np.float32))
    product = b.mul(x, scale)
    b.finish(product)
    function = standalone(product.owner)
    assert [type(op) for op in function.body.block.ops][:2] == [graph.ConstantOp, graph.MulOp]
    assert [t for t in function.function_type.inputs.data] == [x.type]
    (result,) = graphopt.interpret(function.parent_op(), np.ones((2, 3), np.float32), entry="group")
    np.testing.assert_array_equal(result, np.full((2, 3), 2.0, np.float32))
