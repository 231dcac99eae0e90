"""The shipped examples: up to date with their script, parseable, round-trippable, runnable."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.printer import Printer

import graphopt
from graphopt.dialects.attributes import numpy_dtype

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_FILES = sorted(EXAMPLES_DIR.glob("*.mlir"))
MAX_EXAMPLE_BYTES = 300_000


def generic_text(module: ModuleOp) -> str:
    stream = io.StringIO()
    Printer(stream=stream, print_generic_format=True).print_op(module)
    return stream.getvalue()


def entry_function(module: ModuleOp) -> FuncOp:
    return next(op for op in module.ops if isinstance(op, FuncOp) and op.sym_name.data == "main")


def random_inputs(func: FuncOp, seed: int) -> list[np.ndarray]:
    """Standard-normal arrays matching the function's argument types."""
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(t.get_shape()).astype(numpy_dtype(t.get_element_type()))
        for t in func.function_type.inputs.data
    ]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("examples")
    subprocess.run([sys.executable, str(EXAMPLES_DIR / "make_examples.py"), str(out_dir)], check=True, capture_output=True)
    return out_dir


def test_examples_are_up_to_date(regenerated: Path):
    generated = sorted(regenerated.glob("*.mlir"))
    assert generated, "make_examples.py wrote no .mlir files"
    assert {p.name for p in generated} <= {p.name for p in EXAMPLE_FILES}, "run examples/make_examples.py"
    for path in generated:
        assert (EXAMPLES_DIR / path.name).read_bytes() == path.read_bytes(), f"{path.name} is stale: run examples/make_examples.py"


def test_make_examples_is_deterministic(regenerated: Path, tmp_path: Path):
    subprocess.run([sys.executable, str(EXAMPLES_DIR / "make_examples.py"), str(tmp_path)], check=True, capture_output=True)
    for path in regenerated.glob("*.mlir"):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_parses_to_its_own_text(path: Path):
    assert path.stat().st_size <= MAX_EXAMPLE_BYTES
    module = graphopt.parse(path)
    assert str(module) + "\n" == path.read_text()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_round_trips_through_generic_form(path: Path):
    module = graphopt.parse(path)
    generic = generic_text(module)
    assert '"graph.' in generic
    assert str(graphopt.parse(generic)) == str(module)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_runs_with_finite_outputs_of_declared_types(path: Path):
    module = graphopt.parse(path)
    func = entry_function(module)
    outputs = graphopt.interpret(module, *random_inputs(func, seed=0))
    result_types = func.function_type.outputs.data
    assert len(outputs) == len(result_types)
    for output, result_type in zip(outputs, result_types):
        assert output.shape == tuple(result_type.get_shape())
        assert output.dtype == numpy_dtype(result_type.get_element_type())
        assert np.all(np.isfinite(output))


def test_mlp_outputs_are_probabilities():
    module = graphopt.parse(EXAMPLES_DIR / "mlp.mlir")
    (probabilities,) = graphopt.interpret(module, *random_inputs(entry_function(module), seed=1))
    assert probabilities.shape == (8, 10)
    assert np.all(probabilities >= 0)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-5)


def test_mnist_logits_are_not_degenerate():
    module = graphopt.parse(EXAMPLES_DIR / "mnist_cnn.mlir")
    (logits,) = graphopt.interpret(module, *random_inputs(entry_function(module), seed=1))
    assert logits.shape == (1, 10)
    assert np.ptp(logits) > 1e-3


def test_transformer_block_output_is_layer_normalized():
    module = graphopt.parse(EXAMPLES_DIR / "transformer_block.mlir")
    (y,) = graphopt.interpret(module, *random_inputs(entry_function(module), seed=1))
    assert y.shape == (16, 32)
    # scale ~ 1 and bias ~ 0 (std 0.1): each row is roughly standardized
    assert np.all(np.abs(y.mean(axis=-1)) < 0.2)
    assert np.all(np.abs(y.std(axis=-1) - 1.0) < 0.2)
