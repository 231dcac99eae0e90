// An f32 conv2d with one input channel per group (groups = x's channels) and a column stride of
// 1 or 2 calls the depthwise convolution ukernel on x itself (no padded copy, no temporary),
// named for its strides, dilations, top and left padding and shapes; the module declares it.
// A column stride of 3 takes the direct convolution ukernel (groups of one channel); f64 stays
// linalg loops.

// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s

// Channel multiplier 2 (6 output channels from 3), stride 2, padding (1, 0, 1, 1), bias epilogue:
// a batch of 2 takes the bias as the tile epilogue too (its calls split by rows like others).
// CHECK-LABEL: func.func @fused_conv2d_add_0(%0: memref<2x3x9x8xf32>, %1: memref<6x1x3x3xf32>, %2: memref<6x1x1xf32>, %3: memref<2x6x5x4xf32>)
// CHECK-NEXT:    func.call @graphopt_sconv_depthwise_s2x2_d1x1_p1x0_eaddAP0_2x3x9x8_6x1x3x3_6x1x1_2x6x5x4(%0, %1, %2, %3) : (memref<2x3x9x8xf32>, memref<6x1x3x3xf32>, memref<6x1x1xf32>, memref<2x6x5x4xf32>) -> ()
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_depthwise_s2x2_d1x1_p1x0_eaddAP0_2x3x9x8_6x1x3x3_6x1x1_2x6x5x4(memref<2x3x9x8xf32>, memref<6x1x3x3xf32>, memref<6x1x1xf32>, memref<2x6x5x4xf32>) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<2x3x9x8xf32>, %w: tensor<6x1x3x3xf32>, %b: tensor<6x1x1xf32>) -> tensor<2x6x5x4xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 0, 1, 1>, strides = array<i64: 2, 2>, groups = 3 : i64} : (tensor<2x3x9x8xf32>, tensor<6x1x3x3xf32>) -> tensor<2x6x5x4xf32>
  %1 = graph.add %0, %b : (tensor<2x6x5x4xf32>, tensor<6x1x1xf32>) -> tensor<2x6x5x4xf32>
  func.return %1 : tensor<2x6x5x4xf32>
}

// -----

// One image: the bias and relu6 are the ukernel's tile epilogue (bias: per-channel operand P0).
// CHECK-LABEL: func.func @fused_conv2d_add_clip_0(%0: memref<1x3x9x8xf32>, %1: memref<3x1x3x3xf32>, %2: memref<3x1x1xf32>, %3: memref<1x3x9x8xf32>)
// CHECK-NEXT:    func.call @graphopt_sconv_depthwise_s1x1_d1x1_p1x1_eaddAP0.maxS0C00000000.minS1C40c00000_1x3x9x8_3x1x3x3_3x1x1_1x3x9x8(%0, %1, %2, %3)
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
func.func @main(%x: tensor<1x3x9x8xf32>, %w: tensor<3x1x3x3xf32>, %b: tensor<3x1x1xf32>) -> tensor<1x3x9x8xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, groups = 3 : i64} : (tensor<1x3x9x8xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x9x8xf32>
  %1 = graph.add %0, %b : (tensor<1x3x9x8xf32>, tensor<3x1x1xf32>) -> tensor<1x3x9x8xf32>
  %2 = graph.clip %1 {min = 0.0 : f64, max = 6.0 : f64} : tensor<1x3x9x8xf32>
  func.return %2 : tensor<1x3x9x8xf32>
}

// -----

// Column stride 3: the direct ukernel on stride phases; f64: loops.
// CHECK-LABEL: func.func @conv2d_0
// CHECK:         func.call @graphopt_sconv_direct_r3_d1x1_1x4x1x3x43_4x1x3x3_1x4x7x3(
// CHECK:         func.return
// CHECK-LABEL: func.func @conv2d_1
// CHECK-NOT:     func.call
// CHECK:         arith.mulf
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_direct_r3_d1x1_1x4x1x3x43_4x1x3x3_1x4x7x3({{.*}}) -> () attributes {graph.ukernel}
// CHECK-NOT:   graph.ukernel
func.func @main(%x: tensor<1x4x9x9xf32>, %w: tensor<4x1x3x3xf32>, %z: tensor<1x4x9x9xf64>, %u: tensor<4x1x3x3xf64>) -> (tensor<1x4x7x3xf32>, tensor<1x4x7x7xf64>) {
  %0 = graph.conv2d %x, %w {strides = array<i64: 1, 3>, groups = 4 : i64} : (tensor<1x4x9x9xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x7x3xf32>
  %1 = graph.conv2d %z, %u {groups = 4 : i64} : (tensor<1x4x9x9xf64>, tensor<4x1x3x3xf64>) -> tensor<1x4x7x7xf64>
  func.return %0, %1 : tensor<1x4x7x3xf32>, tensor<1x4x7x7xf64>
}
