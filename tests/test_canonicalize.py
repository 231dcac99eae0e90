"""The canonicalize pass's graph patterns, compiled, against the interpreter on the module as written."""

from __future__ import annotations

import numpy as np
import pytest

import graphopt
from graphopt import GraphBuilder
from graphopt.dialects import graph
from graphopt.parsing import make_context
from graphopt.transforms.canonicalize import CanonicalizePass

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e13, -1e-30], np.float32)


def with_specials(shape: tuple[int, ...], seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    x.reshape(-1)[: SPECIALS.size] = SPECIALS
    return x


def canonicalized(module):
    """A copy of `module` after the canonicalize pass (the module itself stays as written)."""
    canonical = module.clone()
    CanonicalizePass().apply(make_context(), canonical)
    return canonical


@pytest.mark.parametrize("exponent", [1.0, 2.0, 3.0, 4.0, 5.0])
def test_pow_by_a_constant_matches_the_interpreter(exponent):
    """x^n for whole n up to 4 becomes a product of x (checked on the IR), on NaN, +-inf, +-0, an
    overflowing cube and an odd size; other exponents stay a pow; both agree with the interpreter."""
    b = GraphBuilder()
    x = b.input("x", (3, 37))
    module = b.finish(b.tanh(b.pow(x, b.constant(np.float32(exponent)))))
    arrays = [with_specials((3, 37), seed=int(exponent * 2))]
    (expected,) = graphopt.interpret(module, *arrays)

    canonical = canonicalized(module)
    expanded = exponent in (1.0, 2.0, 3.0, 4.0)
    assert any(isinstance(op, graph.PowOp) for op in canonical.walk()) != expanded
    (interpreted,) = graphopt.interpret(canonical, *arrays)
    (compiled,) = graphopt.compile(module, backends=("cpu",))(*arrays)
    for actual in (interpreted, compiled):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


def batch_one_attention(b: GraphBuilder, x, mask):
    """One attention head pair at batch 1, as the GPT-2 block: [1, 6, 8] in, [1, 6, 8] out."""
    rng = np.random.default_rng(3)
    w = b.constant(rng.standard_normal((8, 8)).astype(np.float32))
    heads = b.transpose(b.reshape(b.matmul(x, w), (1, 6, 2, 4)), perm=[0, 2, 1, 3])  # [1, 2, 6, 4]
    keys = b.transpose(heads, perm=[0, 1, 3, 2])
    scores = b.div(b.matmul(heads, keys), b.constant(np.float32(2.0)))
    scores = b.select(mask, b.constant(np.float32(-1e4)), scores)
    attended = b.matmul(b.softmax(scores, axis=-1), heads)
    merged = b.reshape(b.transpose(attended, perm=[0, 2, 1, 3]), (1, 6, 8))
    bias = b.constant(rng.standard_normal((1, 1, 8)).astype(np.float32))
    scale, shift = b.constant(np.ones(8, np.float32)), b.constant(np.zeros(8, np.float32))
    return b.layer_norm(b.add(b.add(merged, bias), x), scale, shift, axis=-1)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_one_attention_drops_its_unit_dim_and_matches_the_interpreter(threads):
    """Every value of rank 3 or more but the entry and return loses its leading 1 (checked on
    the IR); compiled (2 threads: steps split by rows), it matches the interpreter on the
    module as written (finite inputs: one NaN would spread to every output through attention)."""
    b = GraphBuilder()
    x = b.input("x", (1, 6, 8))
    mask = b.input("mask", (6, 6), "i1")
    module = b.finish(batch_one_attention(b, x, mask))
    arrays = [np.random.default_rng(4).standard_normal((1, 6, 8)).astype(np.float32), np.triu(np.ones((6, 6), bool), 1)]
    (expected,) = graphopt.interpret(module, *arrays)

    canonical = canonicalized(module)
    unit_batch = [
        op.name for op in canonical.walk() if isinstance(op, graph.GraphOp)
        for r in op.results if len(r.type.get_shape()) >= 3 and r.type.get_shape()[0] == 1
    ]
    assert unit_batch == ["graph.reshape"]  # the one restoring the result's type
    (compiled,) = graphopt.compile(module, backends=("cpu",), threads=threads)(*arrays)
    np.testing.assert_allclose(compiled, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


def batch_norm_module(parameters: list[np.ndarray], constant: bool):
    """conv2d (3x3, 5 -> 7 channels at 9x11) -> batch_norm -> SiLU; the parameters constants or inputs."""
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", (1, 5, 9, 11))
    w = b.constant((rng.standard_normal((7, 5, 3, 3)) / 6).astype(np.float32))
    values = [b.constant(p) if constant else b.input(f"p{i}", p.shape) for i, p in enumerate(parameters)]
    y = b.batch_norm(b.conv2d(x, w, padding=[1, 1, 1, 1]), *values, epsilon=1e-3)
    return b.finish(b.mul(y, b.sigmoid(y)))


def batch_norm_parameters(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    scale, bias, mean = (rng.standard_normal(7).astype(np.float32) for _ in range(3))
    return [scale, bias, mean, rng.uniform(0.1, 2.0, 7).astype(np.float32)]


@pytest.mark.parametrize("threads", [1, 2])
def test_constant_batch_norm_becomes_a_multiply_and_add_that_matches_the_interpreter(threads):
    """Constant batch_norm parameters fold to x * a + b (checked on the IR), on NaN, +-inf, +-0 and
    huge inputs, an odd-sized conv with SiLU after it, compiled at 1 and 2 threads."""
    parameters = batch_norm_parameters(seed=threads)
    module = batch_norm_module(parameters, constant=True)
    x = with_specials((1, 5, 9, 11), seed=threads)
    (expected,) = graphopt.interpret(module, x)

    canonical = canonicalized(module)
    assert not any(isinstance(op, graph.BatchNormOp) for op in canonical.walk())
    (interpreted,) = graphopt.interpret(canonical, x)
    (compiled,) = graphopt.compile(module, backends=("cpu",), threads=threads)(x)
    for actual in (interpreted, compiled):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("case", ["zero variance and epsilon", "parameters are inputs"])
def test_batch_norm_stays_when_its_factor_is_not_finite_or_not_constant(case):
    """A zero var + epsilon (an infinite factor) or parameters that are not constants keep the
    batch_norm; compiled, it still matches the interpreter."""
    parameters = batch_norm_parameters(seed=5)
    module = batch_norm_module(parameters, constant=case != "parameters are inputs")
    if case == "zero variance and epsilon":
        parameters[3][2] = -1e-3
        module = batch_norm_module(parameters, constant=True)
    canonical = canonicalized(module)
    assert any(isinstance(op, graph.BatchNormOp) for op in canonical.walk())
    arrays = [with_specials((1, 5, 9, 11), seed=6)] + ([] if case == "zero variance and epsilon" else parameters)
    (expected,) = graphopt.interpret(module, *arrays)
    (compiled,) = graphopt.compile(module, backends=("cpu",))(*arrays)
    np.testing.assert_allclose(compiled, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


def affine_chain_module(scale: np.ndarray, *, groups: int = 1, shared_conv: bool = False):
    """conv2d (3x3, 6 -> 8 channels at 9x11, `groups`) -> batch_norm -> mul by `scale` -> add ->
    relu, ONNX's scale-and-shift after a batch norm; `shared_conv`: the conv's result also returned."""
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (1, 6, 9, 11))
    w = b.constant((rng.standard_normal((8, 6 // groups, 3, 3)) / 5).astype(np.float32))
    y = b.conv2d(x, w, padding=[1, 1, 1, 1], groups=groups)
    normed = b.batch_norm(y, *(b.constant(rng.uniform(0.5, 1.5, 8).astype(np.float32)) for _ in range(4)))
    shift = b.constant(rng.standard_normal((1, 8, 1, 1)).astype(np.float32))
    out = b.relu(b.add(b.mul(normed, b.constant(scale)), shift))
    return b.finish(out, y) if shared_conv else b.finish(out)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("groups", [1, 2])
def test_channel_affine_chain_folds_into_the_conv_and_matches_the_interpreter(threads, groups):
    """batch_norm, mul and add of per-channel constants after a conv become the conv (its
    weights scaled) and one add (checked on the IR); NaN, +-inf, +-0 in x; 1 and 2 threads."""
    scale = np.random.default_rng(8).uniform(-2, 2, (8, 1, 1)).astype(np.float32)
    module = affine_chain_module(scale, groups=groups)
    x = with_specials((1, 6, 9, 11), seed=threads)
    (expected,) = graphopt.interpret(module, x)
    canonical = canonicalized(module)
    kinds = [op.name for op in canonical.walk() if op.name.startswith("graph.") and op.name != "graph.constant"]
    assert kinds == ["graph.conv2d", "graph.add", "graph.relu"]
    (interpreted,) = graphopt.interpret(canonical, x)
    (compiled,) = graphopt.compile(module, backends=("cpu",), threads=threads)(x)
    for actual in (interpreted, compiled):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("case", ["infinite scale", "conv used twice"])
def test_channel_affine_chain_stays_when_not_finite_or_the_conv_is_shared(case):
    """An infinite scale, or a conv result used elsewhere, keeps the mul; compiled, both match
    the interpreter."""
    scale = np.random.default_rng(9).uniform(0.5, 2, (8, 1, 1)).astype(np.float32)
    if case == "infinite scale":
        scale[3] = np.inf
    module = affine_chain_module(scale, shared_conv=case == "conv used twice")
    canonical = canonicalized(module)
    assert any(isinstance(op, graph.MulOp) for op in canonical.walk())
    x = with_specials((1, 6, 9, 11), seed=4)
    expected = graphopt.interpret(module, x)
    compiled = graphopt.compile(module, backends=("cpu",))(x)
    for actual, wanted in zip(compiled, expected):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-4, equal_nan=True)
