"""The transformer models of examples/make_transformer_models.py against ONNX Runtime.

Each model is written to disk, imported, and checked on the interpreter and compiled with
("cpu",) and ("cpu", "blas") against ONNX Runtime; the masks are checked to mask.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.backends import backend_names

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))
from make_onnx_models import write_models  # noqa: E402
from make_transformer_models import TRANSFORMER_MODELS  # noqa: E402

TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}
BACKEND_SETS = [s for s in (("cpu",), ("cpu", "blas")) if set(s) <= set(backend_names())]
PADDING = 40
"""How many tokens at the end of BERT's second sequence are padding."""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("transformer_models")
    write_models(out_dir, TRANSFORMER_MODELS)
    return out_dir


def model_inputs(model: onnx.ModelProto) -> list[np.ndarray]:
    """Seeded inputs: normal floats; token ids below 1000; an attention mask that pads the second sequence."""
    rng = np.random.default_rng(7)
    arrays = []
    for graph_input in model.graph.input:
        dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        if graph_input.name == "attention_mask":
            mask = np.ones(dims, np.int64)
            mask[1, -PADDING:] = 0
            arrays.append(mask)
        elif graph_input.name == "input_ids":
            arrays.append(rng.integers(0, 1000, dims).astype(np.int64))
        else:
            arrays.append(rng.standard_normal(dims).astype(np.float32))
    return arrays


def onnx_runtime(model: onnx.ModelProto, arrays: list[np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {i.name: a for i, a in zip(model.graph.input, arrays)})
    return result


@functools.cache
def loaded(model_dir: Path, name: str) -> tuple[onnx.ModelProto, list[np.ndarray], np.ndarray]:
    """The model, its inputs and ONNX Runtime's result."""
    model = onnx.load(model_dir / f"{name}.onnx")
    arrays = model_inputs(model)
    return model, arrays, onnx_runtime(model, arrays)


def test_every_model_is_written(model_dir: Path):
    assert sorted(p.stem for p in model_dir.glob("*.onnx")) == sorted(TRANSFORMER_MODELS)


@pytest.mark.parametrize("backends", [None, *BACKEND_SETS], ids=lambda b: "+".join(b) if b else "interpreter")
@pytest.mark.parametrize("name", TRANSFORMER_MODELS)
def test_model_matches_onnxruntime(model_dir: Path, name: str, backends):
    model, arrays, expected = loaded(model_dir, name)
    module = graphopt.from_onnx(model)
    if backends is None:
        (actual,) = graphopt.interpret(module, *arrays)
    else:
        (actual,) = graphopt.compile(module, backends=backends)(*arrays)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, **TOLERANCE)


def test_bert_padding_is_masked(model_dir: Path):
    """Changing padded tokens leaves the real tokens' states alone; unmasking them changes them."""
    model, (input_ids, mask), expected = loaded(model_dir, "bert_layer")
    module = graphopt.from_onnx(model)
    other_ids = input_ids.copy()
    other_ids[1, -PADDING:] = (other_ids[1, -PADDING:] + 1) % 1000
    (changed,) = graphopt.interpret(module, other_ids, mask)
    np.testing.assert_allclose(changed[:, :-PADDING], expected[:, :-PADDING], **TOLERANCE)
    (unmasked,) = graphopt.interpret(module, input_ids, np.ones_like(mask))
    np.testing.assert_allclose(unmasked[0], expected[0], **TOLERANCE)
    assert not np.allclose(unmasked[1, :-PADDING], expected[1, :-PADDING], **TOLERANCE)


def test_gpt2_attention_is_causal(model_dir: Path):
    """A change to the last token changes only the last position's output."""
    model, (x,), expected = loaded(model_dir, "gpt2_block")
    changed_x = x.copy()
    changed_x[0, -1] += 1.0
    (changed,) = graphopt.interpret(graphopt.from_onnx(model), changed_x)
    np.testing.assert_allclose(changed[0, :-1], expected[0, :-1], **TOLERANCE)
    assert not np.allclose(changed[0, -1], expected[0, -1], **TOLERANCE)


@pytest.mark.parametrize("name", ["bert_layer", "gpt2_block"])
def test_attention_splits_by_heads_at_two_threads(model_dir: Path, name: str):
    """Q @ K^T and P @ V, with K's and V's head split in their steps (read by b's run-time
    pack, by heads), run in two chunks and still match ONNX Runtime."""
    model, arrays, expected = loaded(model_dir, name)
    exe = graphopt.compile(graphopt.from_onnx(model), backends=("cpu",), threads=2)
    attention = [step for step in exe.steps if {"graph.matmul", "graph.transpose"} <= {op.name for op in step.op.walk()}]
    assert len(attention) == 2 and all(len(step.kernel.chunks) == 2 for step in attention)
    (actual,) = exe(*arrays)
    np.testing.assert_allclose(actual, expected, **TOLERANCE)
