"""Write example models as ONNX files: the MNIST CNN and transformer block of make_examples.py, and two larger CNNs.

    python examples/make_onnx_models.py OUT_DIR     # writes OUT_DIR/<name>.onnx

mnist_cnn and transformer_block are make_examples.py's graphs with the same weights (the same
seeded draws, in the same order); importing them with graphopt.from_onnx gives the functions
of examples/*.mlir. resnet_ish and vgg_ish cover BatchNormalization, residual adds, strided and
SAME-padded convolutions, pools, LRN, Concat, Flatten, Gemm and Dropout. The CNNs take a
dynamic batch dimension "N" (import them with shapes={"x": (batch, ...)}).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from xdsl.dialects.builtin import TensorType

from graphopt.dialects.attributes import tensor_type

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_examples import he_normal, small_normal, transformer_block, xavier_normal


@dataclass(frozen=True)
class Value:
    """An ONNX value by name; inputs of static shape carry `type`, which make_examples' functions read."""

    name: str
    type: TensorType | None = None


class OnnxBuilder:
    """Appends ONNX nodes; the methods named like GraphBuilder's let make_examples' functions export as they are."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []

    def input(self, name: str, dims: tuple[int | str, ...], elem_type: int = onnx.TensorProto.FLOAT) -> Value:
        """A graph input (float32 unless `elem_type` says otherwise); string dims are symbolic (dynamic)."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(dims)))
        static = all(isinstance(d, int) for d in dims) and elem_type == onnx.TensorProto.FLOAT
        return Value(name, tensor_type(dims) if static else None)

    def constant(self, value) -> Value:
        """An initializer (a Python scalar becomes float32, as in GraphBuilder)."""
        name = f"c{len(self.initializers)}"
        array = value if isinstance(value, np.ndarray) else np.asarray(value, np.float32)
        self.initializers.append(numpy_helper.from_array(array, name))
        return Value(name)

    def node(self, op_type: str, *inputs: Value, **attributes) -> Value:
        name = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, [i.name for i in inputs], [name], name=name, **attributes))
        return Value(name)

    def split(self, x: Value, sizes: list[int], axis: int) -> list[Value]:
        """x cut along `axis` into parts of `sizes` (one Split node, the sizes an input as from opset 13)."""
        name = f"split_{len(self.nodes)}"
        outputs = [f"{name}_{i}" for i in range(len(sizes))]
        self.nodes.append(helper.make_node("Split", [x.name, self.ints(sizes).name], outputs, name=name, axis=axis))
        return [Value(output) for output in outputs]

    def ints(self, values) -> Value:
        return self.constant(np.asarray(values, np.int64))

    def model(self, output: Value, dims: tuple[int | str, ...], opset: int) -> onnx.ModelProto:
        """The checked model whose one float32 output has shape `dims`."""
        opsets = [helper.make_opsetid("", opset)]
        outputs = [helper.make_tensor_value_info(output.name, onnx.TensorProto.FLOAT, list(dims))]
        graph = helper.make_graph(self.nodes, "graph", self.inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
        onnx.checker.check_model(model, full_check=True)
        return model

    # GraphBuilder's names, for make_examples.transformer_block
    def matmul(self, a: Value, b: Value) -> Value:
        return self.node("MatMul", a, b)

    def add(self, a: Value, b: Value) -> Value:
        return self.node("Add", a, b)

    def mul(self, a: Value, b: Value) -> Value:
        return self.node("Mul", a, b)

    def gelu(self, x: Value) -> Value:
        return self.node("Gelu", x)

    def softmax(self, x: Value, axis: int) -> Value:
        return self.node("Softmax", x, axis=axis)

    def layer_norm(self, x: Value, scale: Value, bias: Value, axis: int) -> Value:
        return self.node("LayerNormalization", x, scale, bias, axis=axis)

    def transpose(self, x: Value, perm: list[int]) -> Value:
        return self.node("Transpose", x, perm=perm)

    def reshape(self, x: Value, shape: tuple[int, ...]) -> Value:
        return self.node("Reshape", x, self.ints(shape))


def flatten_like_pytorch(b: OnnxBuilder, x: Value) -> Value:
    """x.view(x.size(0), -1) as PyTorch exports it: Shape, Gather, Unsqueeze, Concat, Reshape."""
    batch = b.node("Gather", b.node("Shape", x), b.constant(np.asarray(0, np.int64)), axis=0)
    shape = b.node("Concat", b.node("Unsqueeze", batch, b.ints([0])), b.ints([-1]), axis=0)
    return b.node("Reshape", x, shape)


def mnist_cnn() -> onnx.ModelProto:
    """make_examples.build_mnist_cnn with a dynamic batch: x[N,1,28,28] -> logits[N,10]."""
    rng = np.random.default_rng(2)
    b = OnnxBuilder()
    x = b.input("x", ("N", 1, 28, 28))

    def conv_relu_pool(x: Value, out_channels: int, in_channels: int, pool: int) -> Value:
        padded = b.node("Pad", x, b.ints([0, 0, 2, 2, 0, 0, 2, 2]))
        weights = he_normal(rng, (out_channels, in_channels, 5, 5), in_channels * 25)
        conv = b.node("Conv", padded, b.constant(weights), kernel_shape=[5, 5])
        activated = b.node("Relu", b.add(conv, b.constant(small_normal(rng, (out_channels, 1, 1)))))
        return b.node("MaxPool", activated, kernel_shape=[pool, pool], strides=[pool, pool])

    features = conv_relu_pool(conv_relu_pool(x, 8, 1, pool=2), 16, 8, pool=3)
    flat = flatten_like_pytorch(b, features)
    weights = b.constant(xavier_normal(rng, (256, 10), 256, 10))
    logits = b.add(b.matmul(flat, weights), b.constant(small_normal(rng, (1, 10))))
    return b.model(logits, ("N", 10), opset=13)


def transformer_block_model() -> onnx.ModelProto:
    """make_examples.build_transformer_block: x[16,32] -> y[16,32] (Gelu and LayerNormalization: opset 20)."""
    b = OnnxBuilder()
    return b.model(transformer_block(b, b.input("x", (16, 32)), np.random.default_rng(3)), (16, 32), opset=20)


def conv_bn(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], kernel: int,
            stride: int = 1, groups: int = 1, symmetric_pads: bool = False) -> Value:
    """Conv (no bias, `groups` channel groups: depthwise when it is the channel count) followed by
    BatchNormalization. Padded SAME_UPPER, or with `symmetric_pads` kernel // 2 on every side as
    PyTorch's Conv2d(padding=kernel // 2) exports it (at stride 2 SAME_UPPER pads only the end)."""
    out_channels, in_channels = channels
    fan_in = in_channels // groups * kernel * kernel
    weights = b.constant(he_normal(rng, (out_channels, in_channels // groups, kernel, kernel), fan_in))
    padding = {"pads": [kernel // 2] * 4} if symmetric_pads else {"auto_pad": "SAME_UPPER"}
    conv = b.node("Conv", x, weights, strides=[stride, stride], group=groups, **padding)
    scale, bias, mean = (small_normal(rng, (out_channels,), mean=m) for m in (1.0, 0.0, 0.0))
    variance = np.abs(small_normal(rng, (out_channels,), mean=1.0))
    return b.node("BatchNormalization", conv, *map(b.constant, (scale, bias, mean, variance)), epsilon=1e-5)


def resnet_ish() -> onnx.ModelProto:
    """x[N,3,32,32] -> stem, two residual blocks, a strided block with a projection shortcut -> probabilities[N,10]."""
    rng = np.random.default_rng(4)
    b = OnnxBuilder()
    x = b.input("x", ("N", 3, 32, 32))
    y = b.node("Relu", conv_bn(b, rng, x, (16, 3), 3))
    for _ in range(2):
        residual = conv_bn(b, rng, b.node("Relu", conv_bn(b, rng, y, (16, 16), 3)), (16, 16), 3)
        y = b.node("Relu", b.add(y, residual))
    shortcut = conv_bn(b, rng, y, (32, 16), 1, stride=2)
    residual = conv_bn(b, rng, b.node("Relu", conv_bn(b, rng, y, (32, 16), 3, stride=2)), (32, 32), 3)
    y = b.node("Relu", b.add(shortcut, residual))
    pooled = b.node("Flatten", b.node("GlobalAveragePool", y), axis=1)
    weights, bias = xavier_normal(rng, (10, 32), 32, 10), small_normal(rng, (10,))
    logits = b.node("Gemm", pooled, b.constant(weights), b.constant(bias), transB=1)
    return b.model(b.softmax(logits, axis=1), ("N", 10), opset=17)


def vgg_ish() -> onnx.ModelProto:
    """x[N,3,32,32] -> conv/LRN/pool stages, an inception-style concat, a Dropout classifier -> log-probabilities[N,10]."""
    rng = np.random.default_rng(5)
    b = OnnxBuilder()

    def conv_relu(x: Value, out_channels: int, in_channels: int, kernel: int = 3) -> Value:
        weights = he_normal(rng, (out_channels, in_channels, kernel, kernel), in_channels * kernel * kernel)
        pad = kernel // 2
        conv = b.node("Conv", x, b.constant(weights), b.constant(small_normal(rng, (out_channels,))), pads=[pad] * 4)
        return b.node("Relu", conv)

    x = b.input("x", ("N", 3, 32, 32))
    y = b.node("LRN", conv_relu(x, 16, 3), size=5, alpha=1e-3, beta=0.75, bias=2.0)
    y = b.node("MaxPool", conv_relu(y, 16, 16), kernel_shape=[2, 2], strides=[2, 2])
    branches = [conv_relu(y, 16, 16, kernel=1), conv_relu(y, 16, 16, kernel=3),
                conv_relu(b.node("AveragePool", y, kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 8, 16, kernel=1)]
    y = b.node("MaxPool", b.node("Concat", *branches, axis=1), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.node("Clip", conv_relu(y, 32, 40), b.constant(np.float32(0.0)), b.constant(np.float32(6.0)))
    flat = b.node("Flatten", b.node("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2]), axis=1)
    weights, bias = b.constant(he_normal(rng, (512, 64), 512)), b.constant(small_normal(rng, (64,)))
    hidden = b.node("Relu", b.node("Gemm", flat, weights, bias))
    hidden = b.node("Dropout", hidden, b.constant(np.float32(0.5)))
    logits = b.node("Gemm", hidden, b.constant(xavier_normal(rng, (10, 64), 64, 10)), b.constant(small_normal(rng, (10,))),
                    transB=1, alpha=0.5, beta=2.0)
    return b.model(b.node("LogSoftmax", logits, axis=-1), ("N", 10), opset=17)


ONNX_MODELS = {
    "mnist_cnn": mnist_cnn,
    "transformer_block": transformer_block_model,
    "resnet_ish": resnet_ish,
    "vgg_ish": vgg_ish,
}


def write_models(out_dir: Path, models: dict[str, Callable[[], onnx.ModelProto]] = ONNX_MODELS) -> list[Path]:
    """Write `<name>.onnx` for every model (its builder's defaults) into out_dir; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in models.items():
        path = out_dir / f"{name}.onnx"
        onnx.save(build(), path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    for written in write_models(Path(sys.argv[1])):
        print(f"wrote {written}")
