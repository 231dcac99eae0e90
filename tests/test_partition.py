"""The partition pass: its search on hand-made cost tables, mixed partitions against the
interpreter, and the picture graph-opt draws of the groups (`-t dot`)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp

import graphopt
from graphopt import GraphBuilder
from graphopt.dialects import graph
from graphopt.parsing import make_context
from graphopt.tools import graph_opt
from graphopt.tools.graph_opt import BACKEND_COLOURS
from graphopt.tools.graph_run import random_inputs
from graphopt.backends.targets import RegistryPartitionPass, RegistryTargets
from graphopt.backends.steps import compile_kernels, placed_step
from graphopt.errors import GraphoptError
from graphopt.runtime.executable import Executable
from graphopt.transforms.fuse import FusePass
from graphopt.transforms.partition import PLACEMENT_REASON, Candidate, PartitionPass, search

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.mlir"))
CHAIN = [[], [0], [1]]
"""Three ops in a row: 0 -> 1 -> 2."""


def kernels(chosen: list[Candidate]) -> list[tuple[list[int], str]]:
    return [(sorted(c.ops), c.backend) for c in chosen]


def table(*rows: tuple[set[int], str, float]) -> list[Candidate]:
    return [Candidate(frozenset(ops), backend, cost) for ops, backend, cost in rows]


# ----------------------------------------------------------------------------------------
# The search alone
# ----------------------------------------------------------------------------------------


def test_search_finds_the_optimum_where_greedy_would_not():
    # Taking the largest kernel at op 0 ({0, 1}) costs 2 + 1; the optimum starts small.
    candidates = table(({0}, "cpu", 1.0), ({1}, "cpu", 1.0), ({2}, "cpu", 1.0), ({0, 1}, "blas", 2.0), ({1, 2}, "cpu", 0.5))
    assert kernels(search(CHAIN, candidates, ["cpu", "blas"])) == [([0], "cpu"), ([1, 2], "cpu")]


def test_search_adds_the_launch_penalty_per_kernel():
    candidates = table(({0}, "cpu", 1.0), ({1}, "cpu", 1.0), ({2}, "cpu", 1.0), ({0, 1, 2}, "blas", 3.5))
    assert kernels(search(CHAIN, candidates, ["cpu", "blas"])) == [([0], "cpu"), ([1], "cpu"), ([2], "cpu")]
    assert kernels(search(CHAIN, candidates, ["cpu", "blas"], launch_penalty=1.0)) == [([0, 1, 2], "blas")]


def test_search_breaks_ties_by_priority_then_ops_whatever_the_candidate_order():
    candidates = table(
        ({0}, "blas", 1.0), ({0}, "cpu", 1.0), ({1}, "cpu", 1.0), ({2}, "cpu", 1.0),
        ({0, 1}, "cpu", 2.0), ({1, 2}, "cpu", 2.0),
    )
    expected = [([0], "cpu"), ([1], "cpu"), ([2], "cpu")]
    for seed in range(5):
        random.Random(seed).shuffle(candidates)
        assert kernels(search(CHAIN, candidates, ["cpu", "blas"])) == expected
    assert kernels(search(CHAIN, candidates, ["blas", "cpu"]))[0] == ([0], "blas")


def test_search_never_takes_a_candidate_a_path_leaves_and_reenters():
    # {0, 2} is free but 0 -> 1 -> 2 leaves it and comes back.
    candidates = table(({0}, "cpu", 1.0), ({1}, "cpu", 1.0), ({2}, "cpu", 1.0), ({0, 2}, "cpu", 0.0))
    assert kernels(search(CHAIN, candidates, ["cpu"])) == [([0], "cpu"), ([1], "cpu"), ([2], "cpu")]


def test_search_never_takes_two_kernels_that_feed_each_other():
    # 0 -> 1 and 2 -> 3: A = {0, 3} and B = {1, 2} are each valid, but A feeds B and B feeds A.
    inputs = [[], [0], [], [2]]
    candidates = table(*(({i}, "cpu", 1.0) for i in range(4)), ({0, 3}, "cpu", 0.0), ({1, 2}, "cpu", 0.0))
    chosen = search(inputs, candidates, ["cpu"])
    assert sum(c.cost for c in chosen) == 2.0
    covered: set[int] = set()
    for candidate in chosen:  # each kernel reads only what earlier ones computed
        assert {p for op in candidate.ops for p in inputs[op]} - candidate.ops <= covered
        covered |= candidate.ops
    assert covered == {0, 1, 2, 3}


def test_search_ignores_infinite_costs_and_says_when_nothing_covers():
    candidates = table(({0}, "cpu", 1.0), ({1}, "cpu", 1.0), ({2}, "cpu", 1.0), ({0, 1, 2}, "cpu", float("inf")))
    assert len(search(CHAIN, candidates, ["cpu"])) == 3
    with pytest.raises(ValueError, match="cannot cover"):
        search(CHAIN, table(({0}, "cpu", 1.0), ({2}, "cpu", 1.0)), ["cpu"])


def brute_force_cost(inputs: list[list[int]], candidates: list[Candidate], penalty: float) -> int | None:
    """The least cost (in picoseconds, as `search` sums) of any set of candidates covering every
    op once whose kernels can run in some order (no two feed each other through a cycle)."""
    best = None
    everything = frozenset(range(len(inputs)))
    for size in range(1, len(inputs) + 1):
        for chosen in itertools.combinations(candidates, size):
            covered = [op for c in chosen for op in c.ops]
            if len(covered) != len(set(covered)) or set(covered) != everything:
                continue
            kernel_of = {op: i for i, c in enumerate(chosen) for op in c.ops}
            feeds = {(kernel_of[p], kernel_of[op]) for op in everything for p in inputs[op] if kernel_of[p] != kernel_of[op]}
            done: set[int] = set()
            while len(done) < size:
                ready = [k for k in range(size) if k not in done and all(a in done for a, b in feeds if b == k)]
                if not ready:
                    break
                done |= set(ready)
            if len(done) < size:
                continue
            cost = sum(round((c.cost + penalty) * 1e12) for c in chosen)
            best = cost if best is None else min(best, cost)
    return best


@st.composite
def small_searches(draw):
    count = draw(st.integers(1, 8))
    inputs = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else [] for i in range(count)]
    rows = [Candidate(frozenset({op}), "cpu", draw(st.integers(1, 9)) * 1e-6) for op in range(count)]
    for _ in range(draw(st.integers(0, 5))):
        ops = frozenset(draw(st.sets(st.integers(0, count - 1), min_size=2, max_size=3))) if count > 1 else frozenset({0})
        rows.append(Candidate(ops, draw(st.sampled_from(["cpu", "blas"])), draw(st.integers(1, 20)) * 1e-6))
    return inputs, rows, draw(st.sampled_from([0.0, 1e-6]))


@settings(max_examples=150, deadline=None)
@given(small_searches())
def test_search_is_exact_on_small_graphs(case):
    inputs, rows, penalty = case
    chosen = search(inputs, rows, ["cpu", "blas"], launch_penalty=penalty)
    position = {op: i for i, c in enumerate(chosen) for op in c.ops}
    assert sorted(position) == list(range(len(inputs)))
    assert all(position[p] <= position[op] for op in range(len(inputs)) for p in inputs[op])
    assert sum(round((c.cost + penalty) * 1e12) for c in chosen) == brute_force_cost(inputs, rows, penalty)


def test_search_is_fast_on_wide_graphs():
    independent = [[] for _ in range(200)]
    branches = [[]] + [[0] for _ in range(199)]
    for inputs in (independent, branches):
        rows = [Candidate(frozenset({op}), b, 1e-6 * (1 + op % 3)) for op in range(200) for b in ("cpu", "blas")]
        rows += [Candidate(frozenset({0, op}), "cpu", 1.5e-6) for op in range(1, 200) if inputs[op]]
        start = time.perf_counter()
        chosen = search(inputs, rows, ["cpu", "blas"], launch_penalty=1e-6)
        assert time.perf_counter() - start < 5.0
        assert sorted(op for c in chosen for op in c.ops) == list(range(200))


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------


def top_level_ops(module: ModuleOp) -> list:
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    return [op for op in function.body.block.ops if not isinstance(op, (graph.ConstantOp, ReturnOp))]


@pytest.mark.parametrize("search_mode", ["greedy", "cost"])
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_op_ends_in_a_placed_group(path: Path, search_mode: str):
    module = graphopt.parse(path)
    FusePass().apply(make_context(), module)
    RegistryPartitionPass(search=search_mode).apply(make_context(), module)
    module.verify()
    for op in top_level_ops(module):
        assert isinstance(op, graph.FusedOp) and op.backend is not None, op.name


def test_cost_search_merges_touching_kernels_of_one_backend():
    # With max-depth=1 every candidate is one op; merging makes one cpu kernel of the chain.
    b = GraphBuilder()
    module = b.finish(b.relu(b.exp(b.neg(b.input("x", (8,))))))
    RegistryPartitionPass(backends=("cpu",), search="cost", max_depth=1).apply(make_context(), module)
    (group,) = top_level_ops(module)
    assert (group.group_name.data, group.backend.data) == ("fused_neg_exp_relu_0", "cpu")


@pytest.mark.parametrize("search_mode", ["greedy", "cost"])
@pytest.mark.parametrize("backends", [("cpu", "blas"), ("blas", "cpu")], ids=["cpu-first", "blas-first"])
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_mixed_partitions_equal_the_interpreter(path: Path, backends: tuple[str, ...], search_mode: str):
    module = graphopt.parse(path)
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    inputs = random_inputs(function, seed=0)
    executable = graphopt.compile(module, backends=backends, search=search_mode, threads=1)
    for actual, expected in zip(executable(*inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------
# The picture: graph-opt -t dot
# ----------------------------------------------------------------------------------------

MLP = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.softmax %1 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %2 : tensor<4x16xf32>
}
"""


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.mlir"
    path.write_text(MLP)
    return path


def test_dot_has_a_cluster_per_group_coloured_by_backend(mlp_file: Path, capsys):
    graph_opt.main([str(mlp_file), "--fuse", "--partition=backends=blas,cpu", "-t", "dot"])
    dot = capsys.readouterr().out
    assert dot.startswith("digraph graphopt {") and dot.rstrip().endswith("}")
    assert f'label="matmul_0 (blas)"; style=filled; fillcolor="{BACKEND_COLOURS["blas"]}"' in dot
    assert f'label="add_1 (cpu)"; style=filled; fillcolor="{BACKEND_COLOURS["cpu"]}"' in dot
    assert f'label="softmax_2 (cpu)"; style=filled; fillcolor="{BACKEND_COLOURS["cpu"]}"' in dot
    ops = {name: node for node, name in re.findall(r'(main_op\d+) \[label="(\w+)"\]', dot)}
    assert set(ops) == {"matmul", "add", "softmax"}
    edges = set(re.findall(r"(\w+) -> (\w+);", dot))
    assert {(ops["matmul"], ops["add"]), (ops["add"], ops["softmax"]), (ops["softmax"], "main_return")} <= edges
    assert ("main_arg0", ops["matmul"]) in edges


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_dot_renders_pictures(mlp_file: Path, tmp_path: Path, suffix: str, magic: bytes):
    picture = tmp_path / f"mlp{suffix}"
    graph_opt.main([str(mlp_file), "--fuse", "--partition", "-t", "dot", "-o", str(picture)])
    assert picture.read_bytes().startswith(magic)


def test_rendering_without_graphviz_says_so(mlp_file: Path, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit):
        graph_opt.main([str(mlp_file), "-t", "dot", "-o", str(tmp_path / "mlp.svg")])
    assert "needs Graphviz's `dot` on PATH" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------
# The pass knows backends only through the targets its caller hands it
# ----------------------------------------------------------------------------------------


class ExpOnlyTargets:
    """Two made-up backends: "fast" runs groups without an exp, "slow" runs anything."""

    fallback = "slow"
    defaults = ("fast",)
    launch_cost = 1e-6

    def names(self):
        return ["fast", "slow"]

    def supports(self, backend, group):
        ops = group.body.block.ops if isinstance(group, graph.FusedOp) else [group]
        if backend == "fast" and any(isinstance(op, graph.ExpOp) for op in ops):
            return "no exp here"
        return None

    def costs(self, pairs):
        return [1e-3 if backend == "slow" else 1e-4 for backend, _ in pairs]

    def binding(self, group):
        return ("slow", "its name says slow") if group.group_name.data.startswith("slow_") else None


@dataclasses.dataclass(frozen=True)
class ExpOnlyPartitionPass(PartitionPass):
    def targets(self):
        return ExpOnlyTargets()


def exp_then_neg() -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (4,))
    return b.finish(b.neg(b.exp(x)))


@pytest.mark.parametrize("search_mode", ["greedy", "cost"])
def test_the_pass_places_on_the_targets_it_is_handed(search_mode):
    module = exp_then_neg()
    ExpOnlyPartitionPass(search=search_mode).apply(make_context(), module)
    groups = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
    placed = {g.body.block.first_op.name: (g.backend.data, g.attributes.get(PLACEMENT_REASON)) for g in groups}
    assert placed["graph.exp"][0] == "slow" and placed["graph.exp"][1].data == "fast: no exp here"
    assert placed["graph.neg"] == ("fast", None)


class SessionTargets:
    """A made-up library that is cheap only on kernels of four ops or more (it keeps its data
    layout between them), and "own", which costs the same per kernel whatever its size."""

    fallback = "own"
    defaults = ("own", "library")
    launch_cost = 0.0

    def names(self):
        return ["own", "library"]

    def supports(self, backend, group):
        return None

    def binding(self, group):
        return None

    def costs(self, pairs):
        return [1e-3 if backend == "own" else 1e-4 if ops_in(group) >= 4 else 1e-2 for backend, group in pairs]


def ops_in(group: graph.FusedOp) -> int:
    return len(graph.computed_ops(group))


@dataclasses.dataclass(frozen=True)
class SessionPartitionPass(PartitionPass):
    def targets(self):
        return SessionTargets()


def two_dense_layers() -> ModuleOp:
    """Two fused groups of three ops (matmul, add, relu) in a row."""
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    for _ in range(2):
        x = b.relu(b.add(b.matmul(x, b.input("w", (8, 8))), b.input("b", (8,))))
    module = b.finish(x)
    FusePass().apply(make_context(), module)
    assert len(top_level_ops(module)) == 2
    return module


def test_cost_search_measures_chains_of_whole_groups_beyond_max_depth_ops():
    module = two_dense_layers()  # no set of two ops has four
    SessionPartitionPass(search="cost", max_depth=2).apply(make_context(), module)
    (group,) = top_level_ops(module)
    assert group.backend.data == "library"
    assert sum(isinstance(op, graph.MatmulOp) for op in group.body.block.ops) == 2


def test_cost_search_keeps_one_backend_alone_when_its_merged_plan_costs_less():
    # With max-depth=1 the library is never cheaper on a candidate (each three ops): the search
    # puts both groups on "own"; every group on the library, merged into one kernel, costs less.
    module = two_dense_layers()
    SessionPartitionPass(search="cost", max_depth=1).apply(make_context(), module)
    (group,) = top_level_ops(module)
    assert group.backend.data == "library"


class PieceTargets:
    """A made-up library that pays 10 us per run of a kernel whatever its size (a session run),
    then 10 us per matmul and 20 us per softmax; "own" pays nothing per run, 18 us per matmul
    and 1 us per softmax. Every other op costs 1 us on both. Alone, a dense layer is cheaper on
    "own" (20 against 22 us); three in one library kernel cost 46 us against 60. The
    interpreter, the last resort, takes a second per kernel."""

    fallback = "interpreter"
    defaults = ("own", "library")
    launch_cost = 0.0

    def __init__(self):
        self.asked: list[tuple[str, int]] = []
        """(backend, matmuls) of each kernel whose cost was asked for."""

    def names(self):
        return ["own", "library", "interpreter"]

    def supports(self, backend, group):
        return None

    def binding(self, group):
        return None

    def costs(self, pairs):
        prices = {"own": (0.0, 18e-6, 1e-6), "library": (10e-6, 10e-6, 20e-6), "interpreter": (1.0, 0.0, 0.0)}
        seconds = []
        for backend, group in pairs:
            run, matmul, softmax = prices[backend]
            ops = graph.computed_ops(group)
            matmuls = sum(isinstance(op, graph.MatmulOp) for op in ops)
            softmaxes = sum(isinstance(op, graph.SoftmaxOp) for op in ops)
            self.asked.append((backend, matmuls))
            seconds.append(run + matmuls * matmul + softmaxes * softmax + (len(ops) - matmuls - softmaxes) * 1e-6)
        return seconds


def dense_runs(runs: int, layers: int) -> ModuleOp:
    """`runs` runs of `layers` fused dense layers (matmul, add, relu), a softmax after each run but the last."""
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    for run in range(runs):
        for _ in range(layers):
            x = b.relu(b.add(b.matmul(x, b.input("w", (8, 8))), b.input("b", (8,))))
        if run < runs - 1:
            x = b.softmax(x)
    module = b.finish(x)
    FusePass().apply(make_context(), module)
    return module


def place_on(targets, module: ModuleOp, **options) -> list[graph.FusedOp]:
    """Run the cost search over `targets` on `module`; its groups."""

    @dataclasses.dataclass(frozen=True)
    class Pass(PartitionPass):
        def targets(self):
            return targets

    Pass(search="cost", **options).apply(make_context(), module)
    return top_level_ops(module)


def test_cost_search_mixes_long_library_pieces_with_own_kernels_between_them():
    """Chains of at most two groups (max-depth=2) never show the library a run of three dense
    layers: the search alone puts one of each three on "own" (109 us), the library alone costs
    102 us, "own" alone 121 us. The library's pieces between the softmaxes (where "own" wins
    even against a saved session run) cost 46 + 1 + 46 = 93 us."""
    module = dense_runs(2, 3)
    groups = place_on(PieceTargets(), module, max_depth=2)
    placed = [(g.backend.data, sum(isinstance(op, graph.MatmulOp) for op in g.body.block.ops)) for g in groups]
    assert placed == [("library", 3), ("own", 0), ("library", 3)]
    arrays = random_inputs(module.body.block.first_op, seed=0)
    np.testing.assert_allclose(graphopt.interpret(module, *arrays)[0], graphopt.interpret(dense_runs(2, 3), *arrays)[0],
                               rtol=1e-6)


def test_the_pieces_measured_grow_linearly_with_the_cuts():
    """Twelve runs of three dense layers: each piece starts after a cut (a softmax) and takes in
    at most two more cuts, so at most (cuts + 1) * 3 library kernels of more than two groups
    are measured (and the library's plan alone, merged into one), not one per pair of groups."""
    targets = PieceTargets()
    start = time.perf_counter()
    groups = place_on(targets, dense_runs(12, 3), max_depth=2)
    assert time.perf_counter() - start < 20.0
    assert len([1 for backend, matmuls in targets.asked if backend == "library" and matmuls > 2]) <= 12 * 3 + 1
    assert [g.backend.data for g in groups] == ["library", "own"] * 11 + ["library"]


def test_cost_search_keeps_one_backend_where_it_wins_everywhere():
    """Where the library costs less than "own" on every kernel, the whole function is one library kernel."""
    targets = PieceTargets()
    targets.costs = lambda pairs: [2e-6 if backend == "own" else 1e-6 for backend, _ in pairs]
    groups = place_on(targets, dense_runs(2, 3), max_depth=2)
    assert [g.backend.data for g in groups] == ["library"]


class WholePlanTargets(PieceTargets):
    """PieceTargets' prices, where "own" runs a matmul only alone (as blas does), and where
    whole plans, timed (`time_plans`), run fastest all on "own" (say its kernels share caches
    in sequence), whatever their kernels cost alone."""

    def __init__(self):
        super().__init__()
        self.timed: list[list[str]] = []
        """The backends of the groups of each plan timed whole."""

    def supports(self, backend, group):
        ops = graph.computed_ops(group)
        if backend == "own" and len(ops) > 1 and any(isinstance(op, graph.MatmulOp) for op in ops):
            return "own runs a matmul alone"
        return None

    def time_plans(self, functions):
        plans = [top_level_ops(function.parent_op()) for function in functions]
        assert all(isinstance(op, graph.FusedOp) and op.backend is not None for plan in plans for op in plan)
        self.timed += [[op.backend.data for op in plan] for plan in plans]
        return [1e-6 if {op.backend.data for op in plan} == {"own"} else 1e-3 for plan in plans]


@pytest.mark.parametrize("measure", [False, True])
def test_measured_search_keeps_the_plan_that_runs_fastest_whole(measure):
    """By the kernels' costs the library's pieces win (as in the test above); timed whole, "own"
    alone wins: its plan is the greedy one over "own" alone, each dense layer's matmul split
    from its epilogue (a plan of every group whole on "own" does not exist). Only each backend's
    greedy plan, the cheaper of its plans alone and the best mix are timed (four distinct
    plans), and only with `measure`."""
    targets = WholePlanTargets()
    module = dense_runs(2, 3)
    groups = place_on(targets, module, max_depth=2, measure=measure)
    backends = [g.backend.data for g in groups]
    if measure:
        assert backends == ["own"] * 13  # 6 matmuls, 6 epilogues, a softmax
        assert len(targets.timed) == 4 and targets.timed.count(backends) == 1
    else:
        assert "library" in backends and targets.timed == []
    arrays = random_inputs(module.body.block.first_op, seed=0)
    np.testing.assert_allclose(graphopt.interpret(module, *arrays)[0], graphopt.interpret(dense_runs(2, 3), *arrays)[0],
                               rtol=1e-6)


@pytest.mark.parametrize(("own_over_mix", "kept"), [(1.02, ["own"] * 13), (1.10, ["library", "own", "library"])])
def test_a_backend_alone_wins_a_tie_with_a_faster_mix(own_over_mix, kept):
    """Timed whole, "own" alone runs 2% slower than the mix: within the noise of the timings
    (`_WHOLE_PLAN_TIE`), so "own" alone (its greedy plan, first in preference) is kept; 10%
    slower, the mix is kept."""
    def time_plans(functions):
        seconds = {("own",): own_over_mix, ("library",): 2.0}  # any mix: 1.0
        return [seconds.get(tuple({op.backend.data for op in top_level_ops(f.parent_op())}), 1.0) for f in functions]

    targets = WholePlanTargets()
    targets.time_plans = time_plans
    groups = place_on(targets, dense_runs(2, 3), max_depth=2, measure=True)
    assert [g.backend.data for g in groups] == kept


class PricedRegistryTargets(RegistryTargets):
    """graphopt's backends, cpu then ort, at PieceTargets' prices (cpu as "own", ort as the library)."""

    defaults = ("cpu", "ort")

    def costs(self, pairs):
        names = {"cpu": "own", "ort": "library"}
        return PieceTargets().costs([(names.get(backend, "interpreter"), group) for backend, group in pairs])


def test_library_pieces_on_ort_between_cpu_kernels_equal_the_interpreter():
    pytest.importorskip("onnxruntime")
    module = dense_runs(2, 3)
    groups = place_on(PricedRegistryTargets(), module, max_depth=2)
    assert [g.backend.data for g in groups] == ["ort", "cpu", "ort"]
    function = module.body.block.first_op
    steps = [placed_step(group) for group in groups]
    compile_kernels(steps, threads=1)
    arrays = random_inputs(function, seed=0)
    np.testing.assert_allclose(Executable(module, function, steps)(*arrays)[0],
                               graphopt.interpret(dense_runs(2, 3), *arrays)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("search_mode", ["greedy", "cost"])
@pytest.mark.parametrize("mode", ["compile", "fallback"])
def test_a_group_the_targets_bind_goes_whole_to_its_backend(search_mode, mode):
    """Partition asks the targets which groups are bound (`binding`), and never splits, merges
    or outlines them; it knows no backend by name."""
    module = graphopt.parse(f"""
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
      %0 = graph.fused(%x) {{name = "slow_neg_relu_0", mode = "{mode}"}} : (tensor<4xf32>) -> tensor<4xf32> {{
      ^bb0(%a: tensor<4xf32>):
        %1 = graph.neg %a : tensor<4xf32>
        %2 = graph.relu %1 : tensor<4xf32>
        graph.yield %2 : tensor<4xf32>
      }}
      %3 = graph.neg %0 : tensor<4xf32>
      func.return %3 : tensor<4xf32>
    }}""")
    ExpOnlyPartitionPass(search=search_mode).apply(make_context(), module)
    groups = {g.group_name.data: g for g in top_level_ops(module) if isinstance(g, graph.FusedOp)}
    assert sorted(groups) == ["neg_0", "slow_neg_relu_0"]
    bound = groups["slow_neg_relu_0"]
    assert (bound.backend.data, bound.attributes[PLACEMENT_REASON].data) == ("slow", "its name says slow")
    assert [op.name for op in bound.body.block.ops] == ["graph.neg", "graph.relu", "graph.yield"]
    assert groups["neg_0"].backend.data == "fast"


def test_the_pass_without_targets_says_so():
    with pytest.raises(Exception, match="no backends were handed to the pass"):
        PartitionPass().apply(make_context(), exp_then_neg())


def test_compile_places_nothing_itself():
    """A step that partitioning did not place is an internal error, not a second placement."""
    (exp, neg) = [op for op in exp_then_neg().walk() if isinstance(op, (graph.ExpOp, graph.NegOp))]
    with pytest.raises(GraphoptError, match="graph.exp in @main is not a group placed on a backend"):
        placed_step(exp)

def test_cost_partition_of_forty_independent_ops_is_quick():
    """Issue 15: 24 independent unary ops took over 60 s (the search was exponential in width)."""
    b = GraphBuilder()
    module = b.finish(*(b.relu(b.input(f"x{i}", (4,))) for i in range(40)))
    FusePass().apply(make_context(), module)
    start = time.perf_counter()
    RegistryPartitionPass(search="cost").apply(make_context(), module)
    assert time.perf_counter() - start < 10.0
    assert sum(isinstance(op, graph.FusedOp) for op in top_level_ops(module)) == 40
