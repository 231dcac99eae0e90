"""Write four transformer models as ONNX files, built the way PyTorch exports them (opset 17).

    python examples/make_transformer_models.py OUT_DIR     # writes OUT_DIR/<name>.onnx

- bert_layer: input_ids and an int64 padding attention_mask [2, seq] -> word and position
  embedding Gathers, LayerNormalization, one post-norm encoder layer (the mask becomes
  (1 - mask) * -10000, added to the scores; GELU in its Erf form).
- gpt2_block: x [1, seq, dim] -> one pre-norm decoder block with a causal mask (Trilu of a
  constant, then Where on the scores) and the tanh GELU.
- vit_stem: an image [1, 3, 224, 224] -> 16x16 patch embedding (Conv stride 16), flatten and
  transpose to tokens, class token Concat, position Add, one pre-norm block.
- whisper_stem: mel features [1, 80, frames] -> two 1-D Convs (kernel 3, the second stride 2)
  with GELU, Transpose, position Add, one pre-norm block.

Every block: MatMul/Add projections, Reshape/Transpose to heads, MatMul, Div by sqrt(head
size), the mask if any, Softmax, MatMul, Transpose/Reshape back, residual Add and
LayerNormalization. Weights are random with a fixed seed per model. Sizes are arguments of
each builder; the defaults are the models tests/test_transformer_models.py checks.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_examples import he_normal, small_normal, xavier_normal
from make_onnx_models import OnnxBuilder, Value, write_models

OPSET = 17
MASKED_SCORE = -10000.0
"""What a masked attention score becomes (as BERT and GPT-2 do), so that softmax gives it ~0 weight."""


class Layers:
    """Transformer layers appended to `b` with weights drawn from `rng`; activations are [batch, seq, dim]."""

    def __init__(self, b: OnnxBuilder, rng: np.random.Generator, dim: int, heads: int):
        self.b, self.rng, self.dim, self.heads = b, rng, dim, heads

    def dense(self, x: Value, fan_in: int, fan_out: int) -> Value:
        """x @ W + bias (MatMul, Add)."""
        weights = self.b.constant(xavier_normal(self.rng, (fan_in, fan_out), fan_in, fan_out))
        return self.b.add(self.b.matmul(x, weights), self.b.constant(small_normal(self.rng, (fan_out,))))

    def layer_norm(self, x: Value) -> Value:
        scale = self.b.constant(small_normal(self.rng, (self.dim,), mean=1.0))
        return self.b.layer_norm(x, scale, self.b.constant(small_normal(self.rng, (self.dim,))), axis=-1)

    def gelu_erf(self, x: Value) -> Value:
        """x * 0.5 * (1 + erf(x / sqrt(2))), as BERT, ViT and Whisper export nn.GELU."""
        b = self.b
        erf = b.node("Erf", b.node("Div", x, b.constant(np.float32(math.sqrt(2.0)))))
        return b.mul(b.mul(x, b.constant(np.float32(0.5))), b.add(erf, b.constant(np.float32(1.0))))

    def gelu_tanh(self, x: Value) -> Value:
        """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), GPT-2's gelu_new."""
        b = self.b
        cubed = b.mul(b.node("Pow", x, b.constant(np.float32(3.0))), b.constant(np.float32(0.044715)))
        inner = b.mul(b.add(x, cubed), b.constant(np.float32(math.sqrt(2.0 / math.pi))))
        return b.mul(b.mul(x, b.constant(np.float32(0.5))), b.add(b.node("Tanh", inner), b.constant(np.float32(1.0))))

    def attention(self, x: Value, batch: int, seq: int, mask=None) -> Value:
        """Multi-head self-attention of x [batch, seq, dim]; `mask` rewrites the scores [batch, heads, seq, seq]."""
        b, dim, heads = self.b, self.dim, self.heads
        head_dim = dim // heads

        def heads_of(x: Value, perm: list[int]) -> Value:
            return b.transpose(b.reshape(x, (batch, seq, heads, head_dim)), perm=perm)

        q = heads_of(self.dense(x, dim, dim), [0, 2, 1, 3])  # [batch, heads, seq, head_dim]
        k_t = heads_of(self.dense(x, dim, dim), [0, 2, 3, 1])  # [batch, heads, head_dim, seq]
        v = heads_of(self.dense(x, dim, dim), [0, 2, 1, 3])
        scores = b.node("Div", b.matmul(q, k_t), b.constant(np.float32(math.sqrt(head_dim))))
        if mask is not None:
            scores = mask(scores)
        attended = b.matmul(b.softmax(scores, axis=-1), v)
        merged = b.reshape(b.transpose(attended, perm=[0, 2, 1, 3]), (batch, seq, dim))
        return self.dense(merged, dim, dim)

    def mlp(self, x: Value, gelu) -> Value:
        hidden = 4 * self.dim
        return self.dense(gelu(self.dense(x, self.dim, hidden)), hidden, self.dim)

    def pre_norm_block(self, x: Value, batch: int, seq: int, gelu, mask=None) -> Value:
        """x + attention(LN(x)), then + mlp(LN(.)): GPT-2, ViT and Whisper."""
        x = self.b.add(x, self.attention(self.layer_norm(x), batch, seq, mask))
        return self.b.add(x, self.mlp(self.layer_norm(x), gelu))

    def post_norm_block(self, x: Value, batch: int, seq: int, gelu, mask=None) -> Value:
        """LN(x + attention(x)), then LN(. + mlp(.)): BERT."""
        x = self.layer_norm(self.b.add(x, self.attention(x, batch, seq, mask)))
        return self.layer_norm(self.b.add(x, self.mlp(x, gelu)))

    def positions(self, seq: int) -> Value:
        """Learned position embeddings [1, seq, dim]."""
        return self.b.constant(small_normal(self.rng, (1, seq, self.dim)))


def bert_layer(batch: int = 2, seq: int = 128, dim: int = 256, heads: int = 4, vocab: int = 1000) -> onnx.ModelProto:
    """input_ids, attention_mask [batch, seq] (int64) -> last hidden state [batch, seq, dim]."""
    b = OnnxBuilder()
    layers = Layers(b, np.random.default_rng(10), dim, heads)
    input_ids = b.input("input_ids", (batch, seq), onnx.TensorProto.INT64)
    attention_mask = b.input("attention_mask", (batch, seq), onnx.TensorProto.INT64)
    words = b.node("Gather", b.constant(small_normal(layers.rng, (vocab, dim))), input_ids, axis=0)
    position_ids = b.node("Unsqueeze", b.node("Range", *(b.constant(np.asarray(v, np.int64)) for v in (0, seq, 1))),
                          b.ints([0]))
    positions = b.node("Gather", b.constant(small_normal(layers.rng, (seq, dim))), position_ids, axis=0)
    x = layers.layer_norm(b.add(words, positions))
    extended = b.node("Cast", b.node("Unsqueeze", attention_mask, b.ints([1, 2])), to=onnx.TensorProto.FLOAT)
    additive = b.mul(b.node("Sub", b.constant(np.float32(1.0)), extended), b.constant(np.float32(MASKED_SCORE)))
    y = layers.post_norm_block(x, batch, seq, layers.gelu_erf, mask=lambda scores: b.add(scores, additive))
    return b.model(y, (batch, seq, dim), opset=OPSET)


def gpt2_block(seq: int = 128, dim: int = 256, heads: int = 4) -> onnx.ModelProto:
    """x [1, seq, dim] -> [1, seq, dim]: a token sees itself and the tokens before it."""
    b = OnnxBuilder()
    layers = Layers(b, np.random.default_rng(11), dim, heads)
    x = b.input("x", (1, seq, dim))
    lower = b.node("Trilu", b.constant(np.ones((seq, seq), np.float32)), upper=0)
    future = b.node("Equal", lower, b.constant(np.float32(0.0)))

    def causal(scores: Value) -> Value:
        return b.node("Where", future, b.constant(np.float32(MASKED_SCORE)), scores)

    return b.model(layers.pre_norm_block(x, 1, seq, layers.gelu_tanh, mask=causal), (1, seq, dim), opset=OPSET)


def vit_stem(dim: int = 64, heads: int = 4, patch: int = 16, image: int = 224) -> onnx.ModelProto:
    """An image [1, 3, image, image] -> tokens [1, 1 + (image / patch)^2, dim] (class token first)."""
    b = OnnxBuilder()
    layers = Layers(b, np.random.default_rng(12), dim, heads)
    x = b.input("image", (1, 3, image, image))
    kernel = he_normal(layers.rng, (dim, 3, patch, patch), 3 * patch * patch)
    patches = b.node("Conv", x, b.constant(kernel), b.constant(small_normal(layers.rng, (dim,))),
                     kernel_shape=[patch, patch], strides=[patch, patch])
    tokens = b.transpose(b.reshape(patches, (1, dim, -1)), perm=[0, 2, 1])  # torch's flatten(2).transpose(1, 2)
    seq = 1 + (image // patch) ** 2
    with_class = b.node("Concat", b.constant(small_normal(layers.rng, (1, 1, dim))), tokens, axis=1)
    y = layers.pre_norm_block(b.add(with_class, layers.positions(seq)), 1, seq, layers.gelu_erf)
    return b.model(y, (1, seq, dim), opset=OPSET)


def whisper_stem(mels: int = 80, frames: int = 200, dim: int = 64, heads: int = 4) -> onnx.ModelProto:
    """Mel features [1, mels, frames] -> [1, frames / 2, dim]."""
    b = OnnxBuilder()
    layers = Layers(b, np.random.default_rng(13), dim, heads)
    x = b.input("mel", (1, mels, frames))

    def conv_gelu(x: Value, in_channels: int, stride: int) -> Value:
        kernel = he_normal(layers.rng, (dim, in_channels, 3), in_channels * 3)
        conv = b.node("Conv", x, b.constant(kernel), b.constant(small_normal(layers.rng, (dim,))),
                      kernel_shape=[3], pads=[1, 1], strides=[stride])
        return layers.gelu_erf(conv)

    features = conv_gelu(conv_gelu(x, mels, 1), dim, 2)
    seq = frames // 2
    tokens = b.add(b.transpose(features, perm=[0, 2, 1]), layers.positions(seq))
    return b.model(layers.pre_norm_block(tokens, 1, seq, layers.gelu_erf), (1, seq, dim), opset=OPSET)


TRANSFORMER_MODELS = {
    "bert_layer": bert_layer,
    "gpt2_block": gpt2_block,
    "vit_stem": vit_stem,
    "whisper_stem": whisper_stem,
}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    for written in write_models(Path(sys.argv[1]), TRANSFORMER_MODELS):
        print(f"wrote {written}")
