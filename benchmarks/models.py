"""CNN latency of graphopt against ONNX Runtime on whole models, at 1 and 2 threads (issue 17).

    python benchmarks/models.py [--models resnet50,mobilenet_v2_ish] [--threads 1,2] [--repeat 10]
                                [--quick] [--profile] [--json out.json] [--png out.png]

Needs onnx and onnxruntime (`pip install -e ".[onnx]"`; matplotlib, `.[plot]`, for --png). Models:

- the ONNX light zoo's CNNs, which ship inside the onnx package
  (`onnx/backend/test/data/light/light_<name>.onnx`, batch 1, 3x224x224): resnet50,
  inception_v1, inception_v2, shufflenet, squeezenet, vgg19, densenet121, bvlc_alexnet, zfnet512;
- built here, with examples/make_onnx_models.py's builder (batch 1, 3x224x224, 1000 classes):
  mobilenet_v2_ish, MobileNet-v2 at width 1.0 (inverted residual blocks: 1x1 expand, depthwise
  3x3, 1x1 project, each with BatchNormalization, relu6 as Clip, residual adds), and
  efficientnet_ish, EfficientNet-B0's stack (the same blocks with 3x3 and 5x5 depthwise convs,
  SiLU as x*Sigmoid(x), and squeeze-and-excitation: global pool, 1x1, SiLU, 1x1, Sigmoid, Mul);
  and torchvision's architectures as PyTorch exports them at opset 17 (convs padded kernel // 2 on
  every side, as Conv2d's padding): resnet18_ish (7x7/2 stem, 3x3/2 max pool, basic blocks of two
  3x3s with batch norm, residual adds), regnet_y_400mf_ish (RegNetY-400MF: 3x3/2 stem of 32, stages
  of 48, 104, 208 and 440 channels, 1, 3, 6 and 6 blocks, the first of each at stride 2: 1x1, 3x3 in
  groups of 8 channels, squeeze-and-excitation to a quarter of the block's input channels with
  relu, 1x1, residual add), convnext_tiny_ish (4x4/4 stem, stages of 3, 3, 9 and 3 blocks at
  96, 192, 384 and 768 channels, 2x2/2 downsampling: 7x7 depthwise conv, Transpose to NHWC,
  LayerNormalization over the channels, MatMul + Add to 4x the channels, GELU as PyTorch writes it
  at opset 17 (x * (Erf(x / sqrt 2) + 1) * 0.5), MatMul + Add back, Transpose to NCHW, times the
  layer scale, residual add; LayerNorm2d, in the stem, before each downsampling conv and in the
  head, is Transpose, LayerNormalization, Transpose, as torchvision's Permute, layer_norm, Permute
  export), shufflenet_v2_ish (ShuffleNet-v2 x1.0: 3x3/2 stem of 24, 3x3/2 max pool, stages of 116,
  232 and 464 channels in 4, 8 and 4 blocks, the first of each at stride 2; a block splits its
  channels in halves (Split), runs one half through 1x1, 3x3 depthwise and 1x1 convs, concatenates
  and shuffles the channels (Reshape, Transpose, Reshape); 1x1 to 1024, ReduceMean over H and W)
  and squeezenet1_1_ish (SqueezeNet 1.1: unpadded 3x3/2 stem of 64, max pools in ceil mode, eight
  Fire modules of a 1x1 squeeze and 1x1 and 3x3 expands concatenated, a 1x1 conv to 1000 classes,
  global average pool).

One child process per thread count, with end_to_end.py's environment (timing.thread_environment).
In it, per model: `graphopt.compile(graphopt.from_onnx(model), backends=("cpu", "blas"))` and an
ONNX Runtime session (end_to_end.onnxruntime_runner: ORT_ENABLE_ALL, I/O binding, no spinning),
their outputs compared (a warning beyond rtol = atol = 1e-3), then timed interleaved
(timing.interleaved_medians: alternating blocks of 4 calls, --repeat blocks each); the ratio is
graphopt's median over ONNX Runtime's. The parent prints one Markdown table per thread count
with the geometric mean of the ratios.

--quick: 2 blocks per model instead of --repeat, and unless --models is given only QUICK_MODELS
(30 s for 1 and 2 threads on a 2-core machine with a warm kernel cache, about 2 minutes cold). --profile: the five slowest steps of
each model (`Executable.profile`: op kinds, median, share, GFLOP/s, GB/s). --json saves every
median, ratio and profile row; --png draws the ratios, one bar group per thread count.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

import graphopt

from end_to_end import environment, graphopt_runner, onnxruntime_runner
from timing import (
    child_thread_count,
    interleaved_medians,
    parse_model_arguments,
    pyplot,
    results_per_thread_count,
    write_child_result,
    write_json,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from make_examples import he_normal, small_normal, xavier_normal
from make_onnx_models import OnnxBuilder, Value, conv_bn

ZOO_MODELS = ("resnet50", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19", "densenet121",
              "bvlc_alexnet", "zfnet512")
QUICK_MODELS = ("resnet50", "inception_v2", "squeezenet", "shufflenet", "mobilenet_v2_ish", "efficientnet_ish")
QUICK_ROUNDS = 2
TOP_STEPS = 5
PROFILE_REPEAT = 5
BACKENDS = ("cpu", "blas")
OPSET = 17

MOBILENET_V2_STAGES = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3),
                       (6, 160, 3, 2, 3), (6, 320, 1, 1, 3))
"""(expansion, output channels, blocks, stride of the first block, depthwise kernel) per stage."""
EFFICIENTNET_B0_STAGES = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
                          (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))
RESNET18_STAGES = ((64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2))
"""(output channels, basic blocks, stride of the first block) per stage."""
REGNET_Y_400MF_STAGES = ((48, 1), (104, 3), (208, 6), (440, 6))
"""(output channels, blocks) per stage; the first block of each has stride 2."""
REGNET_GROUP_WIDTH = 8
REGNET_SE_RATIO = 0.25
CONVNEXT_TINY_STAGES = ((96, 3), (192, 3), (384, 9), (768, 3))
"""(channels, blocks) per stage."""
SHUFFLENET_V2_STAGES = ((116, 4), (232, 8), (464, 4))
"""(output channels, blocks) per stage of shufflenet_v2_x1_0; the first block of each has stride 2."""
SQUEEZENET1_1_LAYERS = ((16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool", (48, 192), (48, 192), (64, 256),
                        (64, 256))
"""squeezenet1_1's features after its stem and first pool: fire modules as (squeeze, expand) channels, and
3x3/2 max pools."""


# ----------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------


def relu6(b: OnnxBuilder, x: Value) -> Value:
    return b.node("Clip", x, b.constant(np.float32(0.0)), b.constant(np.float32(6.0)))


def silu(b: OnnxBuilder, x: Value) -> Value:
    return b.mul(x, b.node("Sigmoid", x))


def relu(b: OnnxBuilder, x: Value) -> Value:
    return b.node("Relu", x)


def squeeze_excite(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int, squeezed: int,
                   activation: Callable) -> Value:
    """x * sigmoid(1x1(activation(1x1(global average pool of x)))), the 1x1 convs with biases."""
    def conv1x1(y: Value, out_channels: int, in_channels: int) -> Value:
        weights = xavier_normal(rng, (out_channels, in_channels, 1, 1), in_channels, out_channels)
        return b.node("Conv", y, b.constant(weights), b.constant(small_normal(rng, (out_channels,))))

    scale = conv1x1(activation(b, conv1x1(b.node("GlobalAveragePool", x), squeezed, channels)), channels, squeezed)
    return b.mul(x, b.node("Sigmoid", scale))


def linear(b: OnnxBuilder, rng: np.random.Generator, x: Value, features: tuple[int, int]) -> Value:
    """x @ W^T + bias over x's last axis, as PyTorch exports nn.Linear on a tensor of rank > 2:
    MatMul with the transposed weights, then Add."""
    out_features, in_features = features
    weights = xavier_normal(rng, (in_features, out_features), in_features, out_features)
    return b.add(b.matmul(x, b.constant(weights)), b.constant(small_normal(rng, (out_features,))))


def classifier(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int) -> Value:
    """Flattened to [1, channels], then a linear layer (Gemm, transB) -> logits[1,1000]."""
    weights, bias = xavier_normal(rng, (1000, channels), channels, 1000), small_normal(rng, (1000,))
    return b.node("Gemm", b.node("Flatten", x, axis=1), b.constant(weights), b.constant(bias), transB=1)


def inverted_residual(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], expansion: int,
                      stride: int, kernel: int, activation: Callable, squeeze: bool) -> Value:
    """MobileNet-v2's block (EfficientNet's MBConv with `squeeze`): 1x1 expand, depthwise conv,
    [squeeze-and-excitation,] 1x1 project; the input added back when the shapes agree."""
    out_channels, in_channels = channels
    hidden = in_channels * expansion
    y = x if expansion == 1 else activation(b, conv_bn(b, rng, x, (hidden, in_channels), 1))
    y = activation(b, conv_bn(b, rng, y, (hidden, hidden), kernel, stride, groups=hidden))
    if squeeze:
        y = squeeze_excite(b, rng, y, hidden, max(1, in_channels // 4), activation)
    y = conv_bn(b, rng, y, (out_channels, hidden), 1)
    return b.add(x, y) if stride == 1 and in_channels == out_channels else y


def inverted_residual_net(seed: int, stages: tuple, activation: Callable, squeeze: bool) -> onnx.ModelProto:
    """x[1,3,224,224] -> a 3x3 stride-2 stem (32 channels), `stages` of inverted residual blocks,
    a 1x1 conv to 1280 channels, global average pool and a linear layer -> logits[1,1000]."""
    rng = np.random.default_rng(seed)
    b = OnnxBuilder()
    y = activation(b, conv_bn(b, rng, b.input("x", (1, 3, 224, 224)), (32, 3), 3, stride=2))
    channels = 32
    for expansion, out_channels, blocks, stride, kernel in stages:
        for block in range(blocks):
            y = inverted_residual(b, rng, y, (out_channels, channels), expansion, stride if block == 0 else 1, kernel,
                                  activation, squeeze)
            channels = out_channels
    y = activation(b, conv_bn(b, rng, y, (1280, channels), 1))
    return b.model(classifier(b, rng, b.node("GlobalAveragePool", y), 1280), (1, 1000), opset=OPSET)


def basic_block(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], stride: int) -> Value:
    """ResNet's basic block: relu(shortcut + bn(3x3(relu(bn(3x3/stride(x)))))), the shortcut a 1x1/stride
    conv with batch norm where the shape changes."""
    out_channels, in_channels = channels
    y = relu(b, conv_bn(b, rng, x, channels, 3, stride, symmetric_pads=True))
    y = conv_bn(b, rng, y, (out_channels, out_channels), 3, symmetric_pads=True)
    shortcut = x if stride == 1 and in_channels == out_channels else conv_bn(b, rng, x, channels, 1, stride)
    return relu(b, b.add(shortcut, y))


def resnet18_ish() -> onnx.ModelProto:
    """torchvision's resnet18: x[1,3,224,224] -> 7x7/2 conv (64) with batch norm and relu, 3x3/2
    max pool, RESNET18_STAGES of basic blocks, global average pool, linear -> logits[1,1000]."""
    rng = np.random.default_rng(8)
    b = OnnxBuilder()
    y = relu(b, conv_bn(b, rng, b.input("x", (1, 3, 224, 224)), (64, 3), 7, stride=2, symmetric_pads=True))
    y = b.node("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 64
    for out_channels, blocks, stride in RESNET18_STAGES:
        for block in range(blocks):
            y = basic_block(b, rng, y, (out_channels, channels), stride if block == 0 else 1)
            channels = out_channels
    return b.model(classifier(b, rng, b.node("GlobalAveragePool", y), channels), (1, 1000), opset=OPSET)


def regnet_y_block(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int],
                   stride: int) -> Value:
    """torchvision's ResBottleneckBlock with bottleneck ratio 1: 1x1, 3x3/stride in groups of
    REGNET_GROUP_WIDTH channels, squeeze-and-excitation to REGNET_SE_RATIO of the block's input
    channels (relu inside), 1x1 without activation; relu(shortcut + that), the shortcut a 1x1/stride
    conv with batch norm where the shape changes."""
    out_channels, in_channels = channels
    y = relu(b, conv_bn(b, rng, x, channels, 1))
    y = relu(b, conv_bn(b, rng, y, (out_channels, out_channels), 3, stride, groups=out_channels // REGNET_GROUP_WIDTH,
                        symmetric_pads=True))
    y = squeeze_excite(b, rng, y, out_channels, round(REGNET_SE_RATIO * in_channels), relu)
    y = conv_bn(b, rng, y, (out_channels, out_channels), 1)
    shortcut = x if stride == 1 and in_channels == out_channels else conv_bn(b, rng, x, channels, 1, stride)
    return relu(b, b.add(shortcut, y))


def regnet_y_400mf_ish() -> onnx.ModelProto:
    """torchvision's regnet_y_400mf: x[1,3,224,224] -> 3x3/2 conv (32) with batch norm and relu,
    REGNET_Y_400MF_STAGES of regnet_y_blocks (the first of each at stride 2), global average pool,
    linear -> logits[1,1000]."""
    rng = np.random.default_rng(9)
    b = OnnxBuilder()
    y = relu(b, conv_bn(b, rng, b.input("x", (1, 3, 224, 224)), (32, 3), 3, stride=2, symmetric_pads=True))
    channels = 32
    for out_channels, blocks in REGNET_Y_400MF_STAGES:
        for block in range(blocks):
            y = regnet_y_block(b, rng, y, (out_channels, channels), 2 if block == 0 else 1)
            channels = out_channels
    return b.model(classifier(b, rng, b.node("GlobalAveragePool", y), channels), (1, 1000), opset=OPSET)


def gelu_like_pytorch(b: OnnxBuilder, x: Value) -> Value:
    """nn.GELU() as PyTorch exports it at opset 17: x * (erf(x / sqrt(2)) + 1) * 0.5."""
    erf = b.node("Erf", b.node("Div", x, b.constant(np.float32(np.sqrt(2.0)))))
    return b.mul(b.mul(x, b.add(erf, b.constant(np.float32(1.0)))), b.constant(np.float32(0.5)))


def layer_norm_nhwc(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int) -> Value:
    """LayerNormalization over the last axis (eps 1e-6), random scale and bias."""
    scale, bias = small_normal(rng, (channels,), mean=1.0), small_normal(rng, (channels,))
    return b.layer_norm(x, b.constant(scale), b.constant(bias), axis=-1)


def layer_norm_2d(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int) -> Value:
    """torchvision convnext's LayerNorm2d on NCHW x: Transpose to NHWC, LayerNormalization over the
    channels, Transpose back (its Permute, layer_norm, Permute)."""
    return b.transpose(layer_norm_nhwc(b, rng, b.transpose(x, [0, 2, 3, 1]), channels), [0, 3, 1, 2])


def conv_with_bias(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], kernel: int,
                   stride: int = 1, groups: int = 1) -> Value:
    """Conv with a bias, padded kernel // 2 on every side at stride 1 and not at all otherwise."""
    out_channels, in_channels = channels
    weights = he_normal(rng, (out_channels, in_channels // groups, kernel, kernel), in_channels // groups * kernel ** 2)
    pads = [kernel // 2] * 4 if stride == 1 else [0] * 4
    return b.node("Conv", x, b.constant(weights), b.constant(small_normal(rng, (out_channels,))), pads=pads,
                  kernel_shape=[kernel, kernel], strides=[stride, stride], group=groups)


def convnext_block(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: int) -> Value:
    """torchvision's CNBlock: 7x7 depthwise conv, Transpose to NHWC, LayerNormalization, linear to
    4 x channels, GELU, linear back, Transpose to NCHW, times the layer scale, plus x."""
    y = b.transpose(conv_with_bias(b, rng, x, (channels, channels), 7, groups=channels), [0, 2, 3, 1])
    y = linear(b, rng, gelu_like_pytorch(b, linear(b, rng, layer_norm_nhwc(b, rng, y, channels), (4 * channels, channels))),
               (channels, 4 * channels))
    layer_scale = b.constant(small_normal(rng, (channels, 1, 1), mean=0.5))
    return b.add(x, b.mul(layer_scale, b.transpose(y, [0, 3, 1, 2])))


def convnext_tiny_ish() -> onnx.ModelProto:
    """torchvision's convnext_tiny: x[1,3,224,224] -> 4x4/4 conv (96) and LayerNorm2d, CONVNEXT_TINY_STAGES
    of convnext_blocks, each stage after the first opened by LayerNorm2d and a 2x2/2 conv doubling the
    channels; global average pool, LayerNorm2d, linear -> logits[1,1000]."""
    rng = np.random.default_rng(10)
    b = OnnxBuilder()
    y = layer_norm_2d(b, rng, conv_with_bias(b, rng, b.input("x", (1, 3, 224, 224)), (96, 3), 4, stride=4), 96)
    channels = 96
    for out_channels, blocks in CONVNEXT_TINY_STAGES:
        if out_channels != channels:
            y = conv_with_bias(b, rng, layer_norm_2d(b, rng, y, channels), (out_channels, channels), 2, stride=2)
            channels = out_channels
        for _ in range(blocks):
            y = convnext_block(b, rng, y, channels)
    pooled = layer_norm_2d(b, rng, b.node("GlobalAveragePool", y), channels)
    return b.model(classifier(b, rng, pooled, channels), (1, 1000), opset=OPSET)


def channel_shuffle(b: OnnxBuilder, x: Value, channels: int, size: int) -> Value:
    """torchvision's channel_shuffle in 2 groups: Reshape to [1, 2, C / 2, H, W], Transpose the two
    channel axes, Reshape back to [1, C, H, W]."""
    grouped = b.reshape(x, (1, 2, channels // 2, size, size))
    return b.reshape(b.transpose(grouped, [0, 2, 1, 3, 4]), (1, channels, size, size))


def shuffle_block(b: OnnxBuilder, rng: np.random.Generator, x: Value, channels: tuple[int, int], stride: int,
                  size: int) -> Value:
    """torchvision's ShuffleNet-v2 InvertedResidual, out at `size` x `size`: at stride 1, x split in two
    halves of its channels (Split), the second through 1x1, 3x3 depthwise, 1x1; at stride 2, x whole
    through both that branch and one of 3x3/2 depthwise, 1x1; the halves concatenated, then
    channel_shuffle. Each conv has batch norm, the 1x1s relu."""
    out_channels, in_channels = channels
    half = out_channels // 2

    def branch(y: Value, inputs: int) -> Value:
        y = relu(b, conv_bn(b, rng, y, (half, inputs), 1))
        y = conv_bn(b, rng, y, (half, half), 3, stride, groups=half, symmetric_pads=True)
        return relu(b, conv_bn(b, rng, y, (half, half), 1))

    if stride == 1:
        kept, passed = b.split(x, [half, half], axis=1)
        halves = kept, branch(passed, half)
    else:
        depthwise = conv_bn(b, rng, x, (in_channels, in_channels), 3, stride, groups=in_channels, symmetric_pads=True)
        halves = relu(b, conv_bn(b, rng, depthwise, (half, in_channels), 1)), branch(x, in_channels)
    return channel_shuffle(b, b.node("Concat", *halves, axis=1), out_channels, size)


def shufflenet_v2_ish() -> onnx.ModelProto:
    """torchvision's shufflenet_v2_x1_0: x[1,3,224,224] -> 3x3/2 conv (24) with batch norm and relu,
    3x3/2 max pool, SHUFFLENET_V2_STAGES of shuffle_blocks, 1x1 conv to 1024 with batch norm and
    relu, the mean over H and W (ReduceMean, as x.mean([2, 3]) exports), linear -> logits[1,1000]."""
    rng = np.random.default_rng(11)
    b = OnnxBuilder()
    y = relu(b, conv_bn(b, rng, b.input("x", (1, 3, 224, 224)), (24, 3), 3, stride=2, symmetric_pads=True))
    y = b.node("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels, size = 24, 56
    for out_channels, blocks in SHUFFLENET_V2_STAGES:
        for block in range(blocks):
            stride = 2 if block == 0 else 1
            size //= stride
            y = shuffle_block(b, rng, y, (out_channels, channels), stride, size)
            channels = out_channels
    y = relu(b, conv_bn(b, rng, y, (1024, channels), 1))
    return b.model(classifier(b, rng, b.node("ReduceMean", y, axes=[2, 3], keepdims=0), 1024), (1, 1000), opset=OPSET)


def fire(b: OnnxBuilder, rng: np.random.Generator, x: Value, in_channels: int, squeeze: int, expand: int) -> Value:
    """SqueezeNet's Fire module: a 1x1 squeeze, then a 1x1 and a 3x3 expand side by side (Concat),
    each conv with a bias and relu."""
    squeezed = relu(b, conv_with_bias(b, rng, x, (squeeze, in_channels), 1))
    expanded = (relu(b, conv_with_bias(b, rng, squeezed, (expand, squeeze), kernel)) for kernel in (1, 3))
    return b.node("Concat", *expanded, axis=1)


def squeezenet1_1_ish() -> onnx.ModelProto:
    """torchvision's squeezenet1_1: x[1,3,224,224] -> 3x3/2 conv (64, unpadded) and relu, 3x3/2 max
    pool (ceil_mode, which rounds none of its sizes up), SQUEEZENET1_1_LAYERS, a 1x1 conv to 1000
    classes and relu, global average pool, Flatten -> logits[1,1000]."""
    rng = np.random.default_rng(12)
    b = OnnxBuilder()

    def pool(y: Value) -> Value:
        return b.node("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    y = pool(relu(b, conv_with_bias(b, rng, b.input("x", (1, 3, 224, 224)), (64, 3), 3, stride=2)))
    channels = 64
    for layer in SQUEEZENET1_1_LAYERS:
        if layer == "pool":
            y = pool(y)
        else:
            squeeze, expand = layer
            y = fire(b, rng, y, channels, squeeze, expand)
            channels = 2 * expand
    logits = relu(b, conv_with_bias(b, rng, y, (1000, channels), 1))
    return b.model(b.node("Flatten", b.node("GlobalAveragePool", logits), axis=1), (1, 1000), opset=OPSET)


BUILT_MODELS = {
    "mobilenet_v2_ish": lambda: inverted_residual_net(6, MOBILENET_V2_STAGES, relu6, squeeze=False),
    "efficientnet_ish": lambda: inverted_residual_net(7, EFFICIENTNET_B0_STAGES, silu, squeeze=True),
    "resnet18_ish": resnet18_ish,
    "regnet_y_400mf_ish": regnet_y_400mf_ish,
    "convnext_tiny_ish": convnext_tiny_ish,
    "shufflenet_v2_ish": shufflenet_v2_ish,
    "squeezenet1_1_ish": squeezenet1_1_ish,
}
MODELS = (*ZOO_MODELS, *BUILT_MODELS)


def load_model(name: str) -> onnx.ModelProto:
    if name in BUILT_MODELS:
        return BUILT_MODELS[name]()
    return onnx.load(str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"))


def model_inputs(model: onnx.ModelProto, rng: np.random.Generator) -> list[np.ndarray]:
    """An array per graph input that is not an initializer: standard normal float32, or for an
    int64 input (token ids, an attention mask) zeros and ones."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    arrays = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            arrays.append(rng.integers(0, 2, dims, dtype=np.int64))
        else:
            arrays.append(rng.standard_normal(dims).astype(np.float32))
    return arrays


# ----------------------------------------------------------------------------------------
# Measuring (in the child process of one thread count)
# ----------------------------------------------------------------------------------------


def measure_model(name: str, threads: int, rounds: int, profile: bool) -> dict:
    """Medians of graphopt and ONNX Runtime on model `name`, their ratio, and with `profile`
    graphopt's slowest steps."""
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    exe = graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=threads)
    systems = {"graphopt": graphopt_runner(exe, inputs), "ONNX Runtime": onnxruntime_runner(model, inputs, threads)}
    expected, actual = np.array(systems["ONNX Runtime"]()), systems["graphopt"]()
    if not np.allclose(actual, expected, rtol=1e-3, atol=1e-3):
        print(f"WARNING: {name}: graphopt differs from ONNX Runtime by up to {np.max(np.abs(actual - expected)):.3g}")
    seconds = interleaved_medians(systems, 0.0, rounds)
    row = {"seconds": seconds, "ratio": seconds["graphopt"] / seconds["ONNX Runtime"], "steps": len(exe.steps)}
    print(f"{name:<18} graphopt {seconds['graphopt'] * 1e3:8.2f} ms  ONNX Runtime {seconds['ONNX Runtime'] * 1e3:8.2f} ms"
          f"  {row['ratio']:5.2f}x  ({len(exe.steps)} steps)", flush=True)
    if profile:
        report = exe.profile(*inputs, repeat=PROFILE_REPEAT)
        print(report.table(report.top(TOP_STEPS)), flush=True)
        row["top_steps"] = [
            {"name": s.name, "backend": s.backend, "ops": list(s.ops), "seconds": s.seconds, "share": s.share,
             "gflops_per_second": s.gflops_per_second, "gbytes_per_second": s.gbytes_per_second}
            for s in report.top(TOP_STEPS)
        ]
    return row


# ----------------------------------------------------------------------------------------
# Reporting (in the parent)
# ----------------------------------------------------------------------------------------


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown_table(rows: dict[str, dict], threads: str) -> str:
    lines = [f"{threads} thread(s):", "", "| model | graphopt | ONNX Runtime | graphopt / ORT |", "|---|---|---|---|"]
    for name, row in rows.items():
        ours, theirs = row["seconds"]["graphopt"], row["seconds"]["ONNX Runtime"]
        lines.append(f"| {name} | {ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms | {row['ratio']:.2f}x |")
    lines.append(f"| geomean | | | {geomean([row['ratio'] for row in rows.values()]):.2f}x |")
    return "\n".join(lines)


def plot(results: dict, path: str) -> None:
    """graphopt / ORT per model, one bar per thread count, a line at 1."""
    plt = pyplot(path)
    if plt is None:
        return

    tables = results["threads"]
    names = list(next(iter(tables.values())))
    width = 0.8 / len(tables)
    figure, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names)), 4.5))
    for i, (threads, rows) in enumerate(tables.items()):
        ratios = [rows[name]["ratio"] for name in names]
        ax.bar(np.arange(len(names)) + (i - len(tables) / 2 + 0.5) * width, ratios, width,
               label=f"{threads} thread(s), geomean {geomean(ratios):.2f}x")
    ax.axhline(1, color="black", linewidth=0.5)
    ax.set_xticks(np.arange(len(names)), names, fontsize=8, rotation=30, ha="right")
    ax.set_ylabel("graphopt / ONNX Runtime (lower is better)")
    ax.set_title(results["machine"]["cpu"])
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def parse_arguments() -> argparse.Namespace:
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--profile", action="store_true", help=f"print the {TOP_STEPS} slowest steps of each model")
        parser.add_argument("--png", help="write a bar chart of the ratios here")

    return parse_model_arguments(__doc__.splitlines()[0], MODELS, MODELS, QUICK_MODELS, QUICK_ROUNDS, add_options)


def main() -> None:
    args = parse_arguments()
    threads = child_thread_count()
    if threads is not None:
        write_child_result({name: measure_model(name, threads, args.repeat, args.profile) for name in args.models.split(",")})
        return
    results = {**environment(), "repeat": args.repeat, "threads": {}}
    with tempfile.TemporaryDirectory() as scratch:
        arguments = ["--models", args.models, "--repeat", str(args.repeat), *(["--profile"] if args.profile else [])]
        results["threads"] = results_per_thread_count(args.threads.split(","), arguments, scratch)
    for threads, rows in results["threads"].items():
        print(markdown_table(rows, threads) + "\n")
    write_json(args.json, results)
    if args.png:
        plot(results, args.png)


if __name__ == "__main__":
    main()
