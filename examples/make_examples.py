"""Write the example models (mlp, mnist_cnn, transformer_block) as graph-dialect .mlir files.

    python examples/make_examples.py            # into examples/, next to this script
    python examples/make_examples.py OUT_DIR    # anywhere else

Weights are float32 from `np.random.default_rng` with a fixed seed per model, so running
the script twice gives byte-identical files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from graphopt import GraphBuilder


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """Weights for a layer followed by relu: N(0, 2 / fan_in)."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def xavier_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int) -> np.ndarray:
    """Weights for a linear layer: N(0, 2 / (fan_in + fan_out))."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / (fan_in + fan_out))).astype(np.float32)


def small_normal(rng: np.random.Generator, shape: tuple[int, ...], mean: float = 0.0) -> np.ndarray:
    """Biases and norm parameters: normal around mean with standard deviation 0.1."""
    return (mean + 0.1 * rng.standard_normal(shape)).astype(np.float32)


def build_mlp() -> ModuleOp:
    """x[8,64] -> dense 128 + relu -> dense 10 -> softmax."""
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (8, 64))
    hidden = b.relu(b.add(b.matmul(x, b.constant(he_normal(rng, (64, 128), 64))), b.constant(small_normal(rng, (128,)))))
    logits = b.add(b.matmul(hidden, b.constant(xavier_normal(rng, (128, 10), 128, 10))), b.constant(small_normal(rng, (10,))))
    return b.finish(b.softmax(logits, axis=-1))


def build_mnist_cnn() -> ModuleOp:
    """The MNIST model of the Collage RFC (TVM RFC 62) at batch 1: logits[1,10]."""
    rng = np.random.default_rng(2)
    b = GraphBuilder()
    x = b.input("x", (1, 1, 28, 28))

    def conv_relu_pool(x, out_channels: int, in_channels: int, pool: int):
        padded = b.pad(x, pads=[0, 0, 2, 2, 0, 0, 2, 2])
        weights = he_normal(rng, (out_channels, in_channels, 5, 5), in_channels * 25)
        conv = b.conv2d(padded, b.constant(weights))
        activated = b.relu(b.add(conv, b.constant(small_normal(rng, (out_channels, 1, 1)))))
        return b.max_pool2d(activated, kernel=[pool, pool], strides=[pool, pool])

    features = conv_relu_pool(conv_relu_pool(x, 8, 1, pool=2), 16, 8, pool=3)
    flat = b.reshape(features, (1, 256))
    logits = b.add(b.matmul(flat, b.constant(xavier_normal(rng, (256, 10), 256, 10))), b.constant(small_normal(rng, (1, 10))))
    return b.finish(logits)


def transformer_block(b: GraphBuilder, x, rng: np.random.Generator, heads: int = 2, hidden: int = 64):
    """Append one post-norm transformer encoder block to b: x[seq,dim] -> y[seq,dim]."""
    seq, dim = x.type.get_shape()
    head_dim = dim // heads

    def dense(x, fan_in: int, fan_out: int):
        weights = xavier_normal(rng, (fan_in, fan_out), fan_in, fan_out)
        return b.add(b.matmul(x, b.constant(weights)), b.constant(small_normal(rng, (fan_out,))))

    def split_heads(x, perm: list[int]):
        return b.transpose(b.reshape(x, (seq, heads, head_dim)), perm=perm)

    q = split_heads(dense(x, dim, dim), perm=[1, 0, 2])  # [heads, seq, head_dim]
    k_t = split_heads(dense(x, dim, dim), perm=[1, 2, 0])  # [heads, head_dim, seq]
    v = split_heads(dense(x, dim, dim), perm=[1, 0, 2])
    scores = b.mul(b.matmul(q, k_t), b.constant(np.float32(1.0 / np.sqrt(head_dim))))
    attended = b.matmul(b.softmax(scores, axis=-1), v)
    merged = b.reshape(b.transpose(attended, perm=[1, 0, 2]), (seq, dim))

    def layer_norm(x):
        scale = b.constant(small_normal(rng, (dim,), mean=1.0))
        return b.layer_norm(x, scale, b.constant(small_normal(rng, (dim,))), axis=-1)

    attention_out = layer_norm(b.add(x, dense(merged, dim, dim)))
    mlp_out = dense(b.gelu(dense(attention_out, dim, hidden)), hidden, dim)
    return layer_norm(b.add(attention_out, mlp_out))


def build_transformer_block(seq: int = 16, dim: int = 32) -> ModuleOp:
    """One post-norm transformer encoder block: x[seq,dim] -> y[seq,dim]."""
    b = GraphBuilder()
    return b.finish(transformer_block(b, b.input("x", (seq, dim)), np.random.default_rng(3)))


EXAMPLES = {
    "mlp": build_mlp,
    "mnist_cnn": build_mnist_cnn,
    "transformer_block": build_transformer_block,
}


def write_examples(out_dir: Path) -> list[Path]:
    """Write `<name>.mlir` for every example into out_dir; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in EXAMPLES.items():
        path = out_dir / f"{name}.mlir"
        path.write_text(str(build()) + "\n")
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for written in write_examples(target):
        print(f"wrote {written}")
