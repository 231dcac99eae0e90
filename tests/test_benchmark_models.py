"""benchmarks/models.py's torchvision-style ShuffleNet-v2 and SqueezeNet 1.1 compile and match ONNX
Runtime: Split into channel halves, the channel shuffle's 5-D Reshape and Transpose, Concat,
depthwise convs at stride 2, max pools in ceil mode and the ReduceMean head, at 1 and 2 threads."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import graphopt

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from models import BACKENDS, load_model, model_inputs  # noqa: E402


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["shufflenet_v2_ish", "squeezenet1_1_ish"])
def test_built_model_matches_onnxruntime(name: str, threads: int):
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {session.get_inputs()[0].name: inputs[0]})
    (actual,) = graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=threads)(*inputs)
    assert actual.shape == expected.shape == (1, 1000)
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
