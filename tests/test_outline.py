"""outline, inline-fused and unfuse: the round trip is exact and no pass changes what a module computes."""

from pathlib import Path

import numpy as np
import pytest
from test_examples import EXAMPLE_FILES, entry_function, random_inputs
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

import graphopt
from graphopt import GraphoptError
from graphopt.dialects.graph import FusedOp
from graphopt.parsing import make_context
from graphopt.transforms.fuse import FusePass
from graphopt.transforms.outline import PRIMITIVE, InlineFusedPass, OutlinePass, UnfusePass

LIT_DIR = Path(__file__).resolve().parent / "filecheck" / "outline"
HAND_WRITTEN = [LIT_DIR / "outline.mlir", LIT_DIR / "roundtrip.mlir", LIT_DIR / "unfuse.mlir"]
"""The lit inputs with groups: single and multi-result, with and without mode and backend."""

FUSIONS = {"fuse": FusePass(), "fuse-multi-output-fallback": FusePass(multi_output=True, mode="fallback")}


def apply(module: ModuleOp, *passes: ModulePass) -> ModuleOp:
    for module_pass in passes:
        module_pass.apply(make_context(), module)
    module.verify()
    return module


def has_groups(module: ModuleOp) -> bool:
    return any(isinstance(op, FusedOp) for op in module.walk())


def grouped_modules() -> list:
    """Hand-written grouped modules and the examples as `fuse` groups them."""
    hand_written = [pytest.param(lambda path=path: graphopt.parse(path), id=path.name) for path in HAND_WRITTEN]
    fused_examples = [
        pytest.param(lambda path=path, fuse=fuse: apply(graphopt.parse(path), fuse), id=f"{path.stem}-{fuse_id}")
        for path in EXAMPLE_FILES
        for fuse_id, fuse in FUSIONS.items()
    ]
    return hand_written + fused_examples


@pytest.mark.parametrize("make_module", grouped_modules())
def test_outline_then_inline_fused_prints_the_same_module(make_module):
    original = str(make_module())
    outlined = apply(make_module(), OutlinePass())
    assert not has_groups(outlined)
    assert any(PRIMITIVE in op.attributes for op in outlined.ops)
    assert str(apply(outlined, InlineFusedPass())) == original


def runnable_modules() -> list:
    return [p for p in grouped_modules() if p.id != "outline.mlir"]  # outline.mlir has no @main


@pytest.mark.parametrize("make_module", runnable_modules())
@pytest.mark.parametrize("transform", [OutlinePass(), UnfusePass()], ids=["outline", "unfuse"])
def test_pass_keeps_the_results(make_module, transform):
    module = make_module()
    inputs = random_inputs(entry_function(module), seed=0)
    expected = graphopt.interpret(module, *inputs)
    transformed = apply(module, transform)
    assert not has_groups(transformed)
    for actual, wanted in zip(graphopt.interpret(transformed, *inputs), expected, strict=True):
        np.testing.assert_array_equal(actual, wanted)


def test_outline_refuses_a_taken_name():
    module = graphopt.parse(LIT_DIR / "name_clash.mlir")
    with pytest.raises(GraphoptError, match='graph.fused "helper": the module already has a symbol @helper'):
        apply(module, OutlinePass())
