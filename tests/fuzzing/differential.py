"""Differential tester: graphopt.compile against graphopt.interpret (issue 15).

Builds random valid modules with graphopt.GraphBuilder from every graph op: [rows, cols] modules
(pointwise ops with broadcasting, cmp and select, casts, reductions, softmax, layer_norm, matmul,
and the injective ops) and NCHW modules (conv2d with strides, dilations, padding and groups,
pooling, batch_norm), feeds them inputs holding NaN, inf and +-1e30, and
compares every configuration in CONFIGURATIONS with the interpreter: f32 rtol (and atol) 1e-5
pointwise, 1e-4 when a reduction or contraction is in the module, times the number of ops (each
op's rounding compounds); NaN positions must be equal. Modules with a reduction get no +-1e30
inputs (their sums depend on the order of summation).

    python tests/fuzzing/differential.py --seed 5 --modules 500
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import traceback

import numpy as np

import graphopt

SIZES = (1, 3, 7, 17, 65, 1025)
CONFIGURATIONS = (
    dict(backends=("cpu",), threads=1),
    dict(backends=("cpu",), threads=2),
    dict(backends=("cpu", "blas"), threads=1),
    dict(backends=("cpu", "blas"), threads=2),
    dict(backends=("cpu",), threads=1, fuse=False),
)
UNARY = ("neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid",
         "erf", "sin", "cos", "floor", "ceil", "gelu")
BINARY = ("add", "sub", "mul", "div", "pow", "max", "min")
PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], np.float32)
# Sums over +-1e30 and ordinary values depend on the summation order: not for reductions.
SPECIAL_FOR_REDUCTIONS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)


def random_module(rng: random.Random):
    """A random module: (module, input shapes, exact?, op count, inputs that get no NaN/inf)."""
    if rng.random() < 0.3:
        return random_image_module(rng)
    return random_matrix_module(rng)


def random_matrix_module(rng: random.Random):
    """1 to 5 ops on a [rows, cols] input and a second input that broadcasts against it."""
    rows, cols = rng.choice(SIZES[:5]), rng.choice(SIZES)
    if rows * cols > 20000:
        rows = 1
    b = graphopt.GraphBuilder()
    shapes = [(rows, cols)]
    x = b.input("x", (rows, cols))
    second_shape = rng.choice(((rows, cols), (1, cols), (rows, 1), (cols,), (1, 1)))
    shapes.append(second_shape)
    y = b.input("y", second_shape)
    values, exact = [x], True

    def new_input(shape):
        shapes.append(tuple(shape))
        return b.input(f"in{len(shapes)}", shape)

    for _ in range(rng.randint(1, 5)):
        kind = rng.choice(("unary", "unary", "binary", "binary", "reduce", "softmax", "layer_norm",
                           "transpose", "matmul", "clip", "select", "cast", "reshape", "broadcast_to",
                           "slice", "concat", "pad", "gather"))
        v = rng.choice(values)
        shape = tuple(v.type.get_shape())
        if kind == "unary":
            v = getattr(b, rng.choice(UNARY))(v) if rng.random() < 0.9 else b.leaky_relu(v, alpha=0.1)
        elif kind in ("binary", "select"):
            other = y if shape == (rows, cols) else rng.choice(values)
            try:
                np.broadcast_shapes(shape, tuple(other.type.get_shape()))
            except ValueError:
                other = v
            first, second = (v, other) if rng.random() < 0.5 else (other, v)
            if kind == "binary":
                v = getattr(b, rng.choice(BINARY))(first, second)
            else:
                condition = b.cmp(first, second, predicate=rng.choice(PREDICATES))
                v = b.select(condition, first, second)
        elif kind == "reduce" and shape:
            v = getattr(b, rng.choice(REDUCTIONS))(v, axes=[rng.randrange(-len(shape), len(shape))])
            exact = False
        elif kind == "softmax" and shape:
            v = getattr(b, rng.choice(("softmax", "log_softmax")))(v, axis=-1)
            exact = False
        elif kind == "layer_norm" and shape:
            v = b.layer_norm(v, new_input(shape[-1:]), new_input(shape[-1:]), axis=-1, epsilon=1e-5)
            exact = False
        elif kind == "transpose" and len(shape) == 2:
            v = b.transpose(v, perm=[1, 0])
        elif kind == "matmul" and len(shape) == 2 and shape[1] <= 1025:
            v = b.matmul(v, new_input((shape[1], rng.choice(SIZES[:4]))))
            exact = False
        elif kind == "clip":
            v = b.clip(v, min=-1.0, max=1.0)
        elif kind == "cast":
            v = b.cast(b.cast(v, "f16"), "f32")
        elif kind == "reshape":
            v = b.reshape(v, (int(np.prod(shape)),) if len(shape) != 1 else (1, shape[0]))
        elif kind == "broadcast_to":
            v = b.broadcast_to(v, (2, *shape))
        elif kind == "slice" and shape:
            starts = [rng.randrange(n) if n else 0 for n in shape]
            steps = [rng.choice((1, 1, 2, 3)) for _ in shape]
            v = b.slice(v, starts=starts, ends=list(shape), steps=steps)
        elif kind == "concat" and shape:
            v = b.concat([v, v], axis=rng.randrange(len(shape)))
        elif kind == "pad" and shape:
            pads = [rng.choice((0, 0, 1, 2)) for _ in range(2 * len(shape))]
            v = b.pad(v, pads=pads, value=rng.choice((0.0, -1.5)))
        elif kind == "gather" and shape and shape[0]:
            indices = [rng.randrange(-shape[0], shape[0]) for _ in range(rng.randint(1, 4))]
            v = b.gather(v, b.constant(np.array(indices, np.int64)), axis=0)
        values.append(v)
    return b.finish(values[-1]), shapes, exact, len(values) - 1, ()


def random_image_module(rng: random.Random):
    """An NCHW input through conv2d, pooling, batch_norm and pointwise ops (1 to 4 ops)."""
    channels, height, width = rng.choice((1, 2, 3, 4)), rng.choice(SIZES[:4]), rng.choice(SIZES[:4])
    b = graphopt.GraphBuilder()
    shapes, finite = [(1, channels, height, width)], []
    v = b.input("x", shapes[0])
    ops = 0

    def new_input(shape, allow_special=True):
        if not allow_special:
            finite.append(len(shapes))
        shapes.append(tuple(shape))
        return b.input(f"in{len(shapes)}", shape)

    for _ in range(rng.randint(1, 4)):
        _, c, h, w = v.type.get_shape()
        kind = rng.choice(("conv2d", "conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "unary", "add"))
        kernel = [rng.randint(1, min(3, h)), rng.randint(1, min(3, w))]
        padding = [rng.randint(0, k - 1) for k in kernel * 2]
        strides = [rng.choice((1, 1, 2)), rng.choice((1, 1, 2))]
        if kind == "conv2d":
            groups = rng.choice([g for g in (1, 2, c) if c % g == 0])
            out_channels = groups * rng.randint(1, 3)
            dilations = [rng.choice((1, 1, 2)), rng.choice((1, 1, 2))]
            extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
            if h + padding[0] + padding[2] < extent[0] or w + padding[1] + padding[3] < extent[1]:
                dilations = [1, 1]
            # Weights are finite: 0 * inf on a padded position is NaN in im2col and absent in a
            # direct convolution, and ONNX leaves that case open.
            weights = new_input((out_channels, c // groups, *kernel), allow_special=False)
            v = b.conv2d(v, weights, strides=strides, dilations=dilations, padding=padding,
                         groups=groups)
        elif kind in ("max_pool2d", "avg_pool2d"):
            attributes = dict(kernel=kernel, strides=strides, padding=padding)
            if kind == "avg_pool2d":
                attributes["count_include_pad"] = rng.random() < 0.5
            v = getattr(b, kind)(v, **attributes)
        elif kind == "batch_norm":
            parameters = [new_input((c,), allow_special=False) for _ in range(3)]
            variance = b.abs(new_input((c,), allow_special=False))
            v = b.batch_norm(v, *parameters, variance, epsilon=1e-5)
        elif kind == "unary":
            v = getattr(b, rng.choice(UNARY))(v)
        else:
            v = b.add(v, new_input((1, c, 1, 1)))
        ops += 1
    return b.finish(v), shapes, False, ops, tuple(finite)


def random_inputs(rng: random.Random, shapes, special: np.ndarray, finite=()) -> list[np.ndarray]:
    """Normal inputs; about half of them (not those in `finite`) get 10% `special` values."""
    generator = np.random.default_rng(rng.randrange(2**32))
    arrays = []
    for index, shape in enumerate(shapes):
        a = generator.standard_normal(shape).astype(np.float32)
        if rng.random() < 0.5 and a.size and index not in finite:
            flat = a.reshape(-1)
            where = generator.integers(0, flat.size, size=max(1, flat.size // 10))
            flat[where] = generator.choice(special, size=where.size)
        arrays.append(a)
    return arrays


def compare(expected: np.ndarray, actual: np.ndarray, rtol: float) -> str | None:
    """None when equal within `rtol` (NaN where NaN, inf where the same inf), else why not."""
    if expected.shape != actual.shape:
        return f"shape {actual.shape} != {expected.shape}"
    e, a = expected.astype(np.float64), np.asarray(actual, np.float64)
    if not np.array_equal(np.isnan(e), np.isnan(a)):
        return f"NaN positions differ: {int(np.isnan(a).sum())} vs {int(np.isnan(e).sum())} expected"
    finite = np.isfinite(e)
    if not np.array_equal(e[~finite & ~np.isnan(e)], a[~finite & ~np.isnan(e)]):
        return "infinities differ"
    close = np.isclose(a[finite], e[finite], rtol=rtol, atol=rtol)
    if not close.all():
        i = int(np.argmin(close))
        return f"{int((~close).sum())} values differ, e.g. {a[finite][i]!r} vs {e[finite][i]!r}"
    return None


def check_module(seed: int, index: int) -> list[str]:
    """Build module `index` of `seed`, run every configuration; the failures found."""
    rng = random.Random(f"{seed}:{index}")
    module, shapes, exact, ops, finite = random_module(rng)
    inputs = random_inputs(rng, shapes, SPECIAL if exact else SPECIAL_FOR_REDUCTIONS, finite)
    expected = graphopt.interpret(module, *inputs)
    # Each op may round differently from numpy (exp, log, tanh...); a chain compounds it.
    rtol = (1e-5 if exact else 1e-4) * ops
    failures = []
    for configuration in CONFIGURATIONS:
        try:
            actual = graphopt.compile(module, **configuration)(*inputs)
            for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
                problem = compare(e, a, rtol)
                if problem:
                    failures.append(f"{configuration}: result {i}: {problem}")
        except Exception:
            failures.append(f"{configuration}: {traceback.format_exc(limit=-3)}")
    return [f"module {index}:\n{module}\n{failure}" for failure in failures]


def run(seed: int, modules: int, log=print) -> list[str]:
    start, failures = time.monotonic(), []
    for index in range(modules):
        found = check_module(seed, index)
        for failure in found:
            log(failure)
        failures += found
        if (index + 1) % 25 == 0:
            log(f"{index + 1} modules, {len(failures)} failures", flush=True)
    log(f"{modules} modules in {time.monotonic() - start:.0f} s, {len(failures)} failures")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", type=int, default=100)
    options = parser.parse_args(argv)
    return 1 if run(options.seed, options.modules) else 0


if __name__ == "__main__":
    sys.exit(main())
