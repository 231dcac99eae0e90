// cuda first, cpu for what it refuses (graph-run --backend cuda, ONNX Runtime's CUDA provider with
// its CPU fallback): partition needs no GPU to ask the cuda backend what it accepts. Each refused
// group says why, once prefixed by the backend that refused it.

// RUN: graph-opt %s --fuse --partition=backends=cuda,cpu | filecheck %s

// CHECK:     graph.fused(%x, %w) {name = "conv2d_0", mode = "compile", backend = "cpu", graph.placement_reason = "cuda: convolution and pooling are not lowered to CUDA yet"}
// CHECK:     graph.fused(%{{.*}}) {name = "max_pool2d_1", mode = "compile", backend = "cpu", graph.placement_reason = "cuda: convolution and pooling are not lowered to CUDA yet"}
// CHECK:     graph.fused(%{{.*}}) {name = "softmax_2", mode = "compile", backend = "cuda"}
// CHECK-NOT: cuda: cuda:
func.func @main(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> {
  %0 = graph.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 1 : i64} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %1 = graph.max_pool2d %0 {kernel = array<i64: 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %2 = graph.softmax %1 : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  func.return %2 : tensor<1x3x4x4xf32>
}
