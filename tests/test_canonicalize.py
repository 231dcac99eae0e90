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


@pytest.mark.parametrize("exponent", [1.0, 2.0, 3.0, 4.0, 5.0])
def test_pow_by_a_constant_matches_the_interpreter(exponent):
    """x^n for whole n up to 4 becomes a product of x (checked on the IR), on NaN, +-inf, +-0, an
    overflowing cube and an odd size; other exponents stay a pow; both agree with the interpreter."""
    b = GraphBuilder()
    x = b.input("x", (3, 37))
    module = b.finish(b.tanh(b.pow(x, b.constant(np.float32(exponent)))))
    arrays = [with_specials((3, 37), seed=int(exponent * 2))]
    (expected,) = graphopt.interpret(module, *arrays)

    canonical = module.clone()
    CanonicalizePass().apply(make_context(), canonical)
    expanded = exponent in (1.0, 2.0, 3.0, 4.0)
    assert any(isinstance(op, graph.PowOp) for op in canonical.walk()) != expanded
    (interpreted,) = graphopt.interpret(canonical, *arrays)
    (compiled,) = graphopt.compile(module, backends=("cpu",))(*arrays)
    for actual in (interpreted, compiled):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
