"""Differential tester: graphopt.compile against graphopt.interpret (issue 15).

Builds random valid modules with graphopt.GraphBuilder (unary, binary with broadcasting,
reductions, softmax-like, transpose, matmul), feeds them inputs holding NaN, inf and +-1e30, and
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
REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], np.float32)
# Sums over +-1e30 and ordinary values depend on the summation order: not for reductions.
SPECIAL_FOR_REDUCTIONS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)


def random_module(rng: random.Random):
    """A random module of 1 to 5 ops on one or two inputs; (module, input shapes, exact?, op count)."""
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
    for _ in range(rng.randint(1, 5)):
        kind = rng.choice(("unary", "unary", "binary", "binary", "reduce", "softmax", "transpose", "matmul", "clip"))
        v = rng.choice(values)
        shape = tuple(v.type.get_shape())
        if kind == "unary":
            v = getattr(b, rng.choice(UNARY))(v) if rng.random() < 0.9 else b.leaky_relu(v, alpha=0.1)
        elif kind == "binary":
            other = y if len(shape) == 2 and shape == (rows, cols) else rng.choice(values)
            try:
                np.broadcast_shapes(shape, tuple(other.type.get_shape()))
            except ValueError:
                other = v
            v = getattr(b, rng.choice(BINARY))(v, other) if rng.random() < 0.5 else getattr(b, rng.choice(BINARY))(other, v)
        elif kind == "reduce" and len(shape) >= 1:
            v = getattr(b, rng.choice(REDUCTIONS))(v, axes=[rng.randrange(-len(shape), len(shape))])
            exact = False
        elif kind == "softmax" and len(shape) >= 1:
            v = getattr(b, rng.choice(("softmax", "log_softmax")))(v, axis=-1)
            exact = False
        elif kind == "transpose" and len(shape) == 2:
            v = b.transpose(v, perm=[1, 0])
        elif kind == "matmul" and len(shape) == 2 and shape[1] <= 1025:
            w = b.input(f"w{len(shapes)}", (shape[1], rng.choice(SIZES[:4])))
            shapes.append(tuple(w.type.get_shape()))
            v = b.matmul(v, w)
            exact = False
        elif kind == "clip":
            v = b.clip(v, min=-1.0, max=1.0) if rng.random() < 0.5 else v
        values.append(v)
    return b.finish(values[-1]), shapes, exact, len(values) - 1


def random_inputs(rng: random.Random, shapes, special: np.ndarray) -> list[np.ndarray]:
    generator = np.random.default_rng(rng.randrange(2**32))
    arrays = []
    for shape in shapes:
        a = generator.standard_normal(shape).astype(np.float32)
        if rng.random() < 0.5 and a.size:
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
    module, shapes, exact, ops = random_module(rng)
    inputs = random_inputs(rng, shapes, SPECIAL if exact else SPECIAL_FOR_REDUCTIONS)
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
