"""transforms/subgraph.py: the one topological order and the one convexity test of the graph level."""

from hypothesis import given
from hypothesis import strategies as st

from graphopt.transforms.subgraph import is_convex, topological_order

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
