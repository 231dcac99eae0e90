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
        ({"read_first_again": True}, True),  # an input read by another step too: it reads the slice
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


def dense_block_module(layers=3, read_input_last=False):
    """A DenseNet block: each layer a relu and a 3x3 conv of the concat so far, concatenated to
    it (`%c_k = concat(%c_k-1, %a_k)`), then a 1x1 conv of the last concat; optionally the
    block's first slice is read again two convs later (the buffer must outlive the concats)."""
    g = GraphBuilder()
    x = g.input("x", (1, 4, 7, 9))
    first = g.conv2d(x, g.constant(sample((4, 4, 1, 1), seed=1, specials=False)))
    concat, channels = first, 4
    for layer in range(layers):
        w = g.constant(sample((4, channels, 3, 3), seed=2 + layer, specials=False))
        concat, channels = g.concat(concat, g.conv2d(g.relu(concat), w, padding=(1, 1, 1, 1)), axis=1), channels + 4
    out = g.conv2d(concat, g.constant(sample((3, channels, 1, 1), seed=9, specials=False)))
    if read_input_last:  # a value as large as the block's buffer comes first: it takes a buffer freed early
        wide = g.conv2d(out, g.constant(sample((channels, 3, 1, 1), seed=10, specials=False)))
        out = g.add(g.conv2d(wide, g.constant(sample((4, channels, 1, 1), seed=11, specials=False))), first)
    return g.finish(out)


@pytest.mark.parametrize("read_input_last", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_nested_concats_share_one_buffer(read_input_last, threads):
    module = dense_block_module(read_input_last=read_input_last)
    x = sample((1, 4, 7, 9))
    expected = graphopt.interpret(module, x)
    executable = graphopt.compile(module, backends=("cpu",), threads=threads)
    concats = [s for s in executable.steps if s.name in executable.in_place_steps]
    assert len(concats) == 3
    last = concats[-1].outputs[0]
    first = concats[0].inputs[0]
    assert {executable.buffer_of[v] for s in concats for v in (*s.inputs, *s.outputs)} == {executable.buffer_of[last]}
    assert [executable.offset_of.get(s.inputs[1], 0) for s in concats] == [4 * 7 * 9 * 4 * k for k in (1, 2, 3)]
    assert executable.offset_of.get(first, 0) == 0
    for _ in range(2):
        (result,) = executable(x)
        np.testing.assert_allclose(result, expected[0], rtol=1e-4, atol=1e-4, equal_nan=True)


def test_an_input_of_two_concats_is_a_slice_of_one():
    """`%a` concatenated with `%b` and with `%c`: only the first concat can hold it in place."""
    g = GraphBuilder()
    x = g.input("x", (1, 3, 9, 11))
    a, b, c = (g.conv2d(x, g.constant(sample((4, 3, 1, 1), seed=s, specials=False))) for s in (1, 2, 3))
    first, second = g.concat(a, b, axis=1), g.concat(a, c, axis=1)
    w = g.constant(sample((2, 8, 1, 1), seed=4, specials=False))
    module = g.finish(g.conv2d(first, w), g.conv2d(second, w))
    x_value = sample((1, 3, 9, 11))
    executable = graphopt.compile(module, backends=("cpu",))
    (step,) = [s for s in executable.steps if s.name in executable.in_place_steps]
    assert executable.buffer_of[step.inputs[0]] == executable.buffer_of[step.outputs[0]]
    for e, actual in zip(graphopt.interpret(module, x_value), executable(x_value), strict=True):
        np.testing.assert_allclose(actual, e, rtol=1e-4, atol=1e-4, equal_nan=True)
