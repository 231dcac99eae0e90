"""Property test: fusing random DAGs mixing every category keeps them valid and equivalent."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block

import graphopt
from graphopt.builder import GraphBuilder
from graphopt.dialects import graph
from graphopt.parsing import make_context, parse_text
from graphopt.transforms.fuse import FusePass

N = 3
UNARY = ["neg", "abs", "relu", "exp", "tanh", "sigmoid"]
BINARY = ["add", "sub", "mul", "max"]
KINDS = ["unary", "binary", "transpose", "slice_pad", "reduce", "softmax", "matmul", "constant", "broadcast"]


def build(steps, outputs, no_fuse) -> ModuleOp:
    """A random DAG over N x N tensors: each step applies one op kind to earlier values."""
    b = GraphBuilder()
    values = [b.input("x", (N, N)), b.input("y", (N, N))]
    for kind, picks, variant in steps:
        a, c = (values[p % len(values)] for p in picks)
        if kind == "unary":
            v = getattr(b, UNARY[variant % len(UNARY)])(a)
        elif kind == "binary":
            v = getattr(b, BINARY[variant % len(BINARY)])(a, c)
        elif kind == "transpose":
            v = b.transpose(a, perm=[1, 0])
        elif kind == "slice_pad":
            v = b.pad(b.slice(a, starts=[1, 0], ends=[N, N], steps=[1, 1]), pads=[1, 0, 0, 0])
        elif kind == "reduce":
            v = b.add(a, b.broadcast_to(b.reduce_sum(a, axes=[1], keepdims=True), (N, N)))
        elif kind == "softmax":
            v = b.softmax(a, axis=variant % 2 - 2)
        elif kind == "matmul":
            v = b.matmul(a, c)
        elif kind == "constant":
            v = b.mul(a, b.constant(np.full((N, N), 0.5 + variant, np.float32)))
        else:
            v = b.add(a, b.broadcast_to(b.constant(np.float32(variant)), (N, N)))
        values.append(v)
    for index in no_fuse:
        owner = values[2 + index % (len(values) - 2)].owner
        owner.attributes["graph.no_fuse"] = UnitAttr()
    results = [values[-1]] + [values[2 + o % (len(values) - 2)] for o in outputs]
    return b.finish(*dict.fromkeys(results))


step = st.tuples(st.sampled_from(KINDS), st.tuples(st.integers(0, 40), st.integers(0, 40)), st.integers(0, 5))
options = st.fixed_dictionaries(
    {
        "multi_output": st.booleans(),
        "max_ops": st.sampled_from([2, 4, 64]),
        "duplicate": st.booleans(),
        "rounds": st.sampled_from([0, 1]),
        "patterns": st.sampled_from(["", "default"]),
        "mode": st.sampled_from(["compile", "fallback"]),
    }
)


def defined_before_use(block: Block) -> bool:
    defined = set(block.args)
    for op in block.ops:
        if any(v not in defined for v in op.operands):
            return False
        defined.update(op.results)
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, min_size=1, max_size=14),
    outputs=st.lists(st.integers(0, 40), max_size=2),
    no_fuse=st.lists(st.integers(0, 40), max_size=1),
    opts=options,
)
def test_fusion_keeps_random_dags_valid_and_equivalent(steps, outputs, no_fuse, opts):
    module = build(steps, outputs, no_fuse)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((N, N)).astype(np.float32) for _ in range(2)]
    expected = graphopt.interpret(module, *inputs)

    FusePass(**opts).apply(make_context(), module)
    module.verify()
    func_block = module.body.block.first_op.body.block
    assert defined_before_use(func_block)
    groups = [op for op in func_block.ops if isinstance(op, graph.FusedOp)]
    assert all(len(g.body.block.ops) - 1 <= opts["max_ops"] + 8 for g in groups)  # +cloned cheap producers
    assert all(g.mode_name == opts["mode"] for g in groups)

    reparsed = parse_text(str(module))
    for got, want in zip(graphopt.interpret(reparsed, *inputs), expected, strict=True):
        np.testing.assert_array_equal(got, want)
