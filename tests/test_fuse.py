"""The fuse pass from Python: user patterns, determinism, and equivalence on the examples."""

from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.dialects import graph
from graphopt.parsing import make_context
from graphopt.transforms.fuse import PATTERN_SETS, FusePass, FusionPattern, register_pattern

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.mlir"))

CHAIN = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.exp %x : tensor<4x8xf32>
  %1 = graph.sigmoid %0 : tensor<4x8xf32>
  %2 = graph.neg %1 : tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}
"""


def fused(text: str, **options) -> str:
    module = graphopt.parse(text)
    FusePass(**options).apply(make_context(), module)
    module.verify()
    return str(module)


def group_names(text: str) -> list[str]:
    return [line.split('name = "')[1].split('"')[0] for line in text.splitlines() if "graph.fused(" in line]


def test_user_pattern_is_applied_first_and_closed(monkeypatch):
    monkeypatch.setitem(PATTERN_SETS, "mine", [])
    register_pattern(FusionPattern("exp_sigmoid", ("graph.exp", "graph.sigmoid"), priority=1), "mine")
    assert group_names(fused(CHAIN, patterns="mine")) == ["fused_exp_sigmoid_0"]
    assert group_names(fused(CHAIN)) == ["fused_exp_sigmoid_neg_0"]


def test_higher_priority_pattern_wins(monkeypatch):
    monkeypatch.setitem(PATTERN_SETS, "mine", [])
    register_pattern(FusionPattern("exp_sigmoid", ("graph.exp", "graph.sigmoid"), priority=1), "mine")
    register_pattern(FusionPattern("sigmoid_neg", ("graph.sigmoid", "graph.neg"), priority=2), "mine")
    assert group_names(fused(CHAIN, patterns="mine")) == ["fused_sigmoid_neg_0"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("options", [{}, {"multi_output": True}, {"patterns": "default", "mode": "fallback"}])
def test_examples_fuse_deterministically_and_equivalently(path, options):
    text = path.read_text()
    first, second = fused(text, **options), fused(text, **options)
    assert first == second
    assert "graph.fused" in first

    original, module = graphopt.parse(text), graphopt.parse(first)
    rng = np.random.default_rng(0)
    main = next(op for op in original.body.block.ops if op.sym_name.data == "main")
    inputs = [rng.standard_normal(t.get_shape()).astype(np.float32) for t in main.function_type.inputs.data]
    for want, got in zip(graphopt.interpret(original, *inputs), graphopt.interpret(module, *inputs), strict=True):
        np.testing.assert_array_equal(got, want)


def test_every_group_has_at_most_one_anchor_or_reduction():
    for path in EXAMPLES:
        module = graphopt.parse(fused(path.read_text()))
        for op in module.walk():
            if isinstance(op, graph.FusedOp):
                heavy = [o for o in op.body.block.ops if graph.category_of(o) in (graph.Category.ANCHOR, graph.Category.REDUCTION)]
                assert len(heavy) <= 1, op.group_name.data


def test_explain_prints_to_stderr(capsys):
    text = CHAIN.replace("%1 = graph.sigmoid %0", "%1 = graph.sigmoid %0 {graph.no_fuse}")
    fused(text, explain=True)
    assert capsys.readouterr().err.splitlines() == [
        "fuse: @main: graph.exp#0 -> graph.sigmoid#1: no_fuse",
        "fuse: @main: graph.sigmoid#1 -> graph.neg#2: no_fuse",
    ]
