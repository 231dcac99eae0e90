"""Concats planned in place (`buffer_plan.in_place_concats`): their inputs' producers write the
concat's result, the concat step never runs, and every result matches the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_to_linalg import sample

import graphopt
from graphopt.builder import GraphBuilder


def concat_module(batch=1, first_channels=8, return_first=False, read_first_again=False, return_concat=False):
    """Two convs of x (a 3x3 and a 1x1) concatenated along the channels, then a 1x1 conv of the
    concat (SqueezeNet's fire module), with the variants that keep the concat a copy."""
    g = GraphBuilder()
    x = g.input("x", (batch, 3, 9, 11))
    a = g.conv2d(x, g.constant(sample((first_channels, 3, 3, 3), seed=1, specials=False)), padding=(1, 1, 1, 1))
    b = g.conv2d(x, g.constant(sample((5, 3, 1, 1), seed=2, specials=False)))
    y = g.concat(a, b, axis=1)
    z = g.conv2d(y, g.constant(sample((4, first_channels + 5, 1, 1), seed=3, specials=False)))
    results = [z]
    if return_first:
        results.append(a)
    if read_first_again:
        results.append(g.relu(a))
    if return_concat:
        results.append(y)
    return g.finish(*results)


@pytest.mark.parametrize(
    "variant, in_place",
    [
        ({}, True),
        ({"return_first": True}, False),  # an input returned: the caller's array
        ({"read_first_again": True}, False),  # an input read by another step too
        ({"return_concat": True}, False),  # the result returned
        ({"batch": 2}, False),  # inputs interleaved along the images
        ({"first_channels": 1}, False),  # the second input would start 396 bytes in: unaligned
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_in_place_concats_match_interpreter(variant, in_place, threads):
    module = concat_module(**variant)
    x = sample((variant.get("batch", 1), 3, 9, 11))  # NaN, inf and signed zeros first
    expected = graphopt.interpret(module, x)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    assert bool(executable.in_place_steps) == in_place
    for _ in range(2):  # the second call reuses the planned buffers
        for e, a in zip(expected, executable(x), strict=True):
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True)
    if in_place:
        (step,) = [s for s in executable.steps if s.name in executable.in_place_steps]
        first, second = (executable.offset_of.get(v, 0) for v in step.inputs)
        assert executable.buffer_of[step.inputs[0]] == executable.buffer_of[step.outputs[0]]
        assert (first, second) == (0, 8 * 9 * 11 * 4)
        assert "in place" in executable.report()
        profile = executable.profile(x, repeat=2)
        assert profile.steps[executable.steps.index(step)].seconds < 1e-3
