// An f32 conv2d that is not depthwise (at least 2 input channels per group) and that the cpu
// schedule does not run as a GEMM (conv_gemm.mlir: 1x1s, outputs of at most 8 columns) copies
// x, zero-padded, into its stride phases and calls the direct convolution ukernel on them; the
// module declares the ukernel. f64 convs stay linalg loops.

// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s

// Depth 8 * 3 * 3 = 72, strides (2, 1), dilations (1, 2), padding 1. Padded x is 9 x 13: rows of
// R = ceil(13 / 1) = 13 floats in 2 x 1 phases, and a 4 x 9 output ((9 - 3) / 2 + 1 rows,
// 13 - ((3 - 1) * 2 + 1) + 1 columns). The window reaches (3 - 1) * 1 // 2 = 1 row of R and
// (3 - 1) * 2 // 1 = 4 columns past an output's first tap: 17 floats. A phase holds
// max(OH * R + reach, ceil((7 + 1) / 2) * R) + SLACK = max(52 + 17, 52) + 16 = 85 floats (SLACK:
// a row's last vector of 16 reads up to 15 floats past its last output column).
// The add of a per-channel bias is the ukernel's tile epilogue (`_eaddAP0`: the accumulator
// plus per-channel operand 0, the bias, passed before out); nothing runs after the call.
// CHECK-LABEL: func.func @fused_conv2d_add_0(%0: memref<1x8x7x11xf32>, %1: memref<4x8x3x3xf32>, %2: memref<4x1x1xf32>, %3: memref<1x4x4x9xf32>)
// CHECK-NEXT:    %[[PHASES:.*]] = memref.alloc() : memref<1x8x2x1x85xf32>
// CHECK:         func.call @graphopt_sconv_direct_r13_d1x2_eaddAP0_1x8x2x1x85_4x8x3x3_4x1x1_1x4x4x9(%[[PHASES]], %1, %2, %3) : (memref<1x8x2x1x85xf32>, memref<4x8x3x3xf32>, memref<4x1x1xf32>, memref<1x4x4x9xf32>) -> ()
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_direct_r13_d1x2_eaddAP0_1x8x2x1x85_4x8x3x3_4x1x1_1x4x4x9(memref<1x8x2x1x85xf32>, memref<4x8x3x3xf32>, memref<4x1x1xf32>, memref<1x4x4x9xf32>) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<1x8x7x11xf32>, %w: tensor<4x8x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<1x4x4x9xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>} : (tensor<1x8x7x11xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x4x9xf32>
  %1 = graph.add %0, %b : (tensor<1x4x4x9xf32>, tensor<4x1x1xf32>) -> tensor<1x4x4x9xf32>
  func.return %1 : tensor<1x4x4x9xf32>
}

// -----

// A tail that is not an epilogue (exp) runs as a loop nest over the stored conv result.
// CHECK-LABEL: func.func @fused_conv2d_exp_0
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_1x7x1x1x{{[0-9]+}}_4x7x3x3_1x4x4x9(
// CHECK:         linalg.generic
// CHECK:           math.exp
// CHECK:         func.return
func.func @main(%x: tensor<1x7x6x11xf32>, %w: tensor<4x7x3x3xf32>) -> tensor<1x4x4x9xf32> {
  %0 = graph.conv2d %x, %w : (tensor<1x7x6x11xf32>, tensor<4x7x3x3xf32>) -> tensor<1x4x4x9xf32>
  %1 = graph.exp %0 : tensor<1x4x4x9xf32>
  func.return %1 : tensor<1x4x4x9xf32>
}

// -----

// A 7-channel 3x3 and two groups of 16 channels: the ukernel (the grouped one's w has a
// group's 16 channels, its phases all 32 of x's); f64: loops.
// CHECK-LABEL: func.func @conv2d_0
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_1x7x1x1x{{[0-9]+}}_4x7x3x3_1x4x4x9(
// CHECK:         func.return
// CHECK-LABEL: func.func @conv2d_1
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_1x32x1x1x{{[0-9]+}}_4x16x3x3_1x4x4x9(
// CHECK:         func.return
// CHECK-LABEL: func.func @conv2d_2
// CHECK-NOT:     func.call
// CHECK:         arith.mulf
// CHECK-NOT:     func.call
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_direct_r11_d1x1_1x7x1x1x{{[0-9]+}}_4x7x3x3_1x4x4x9({{.*}}) -> () attributes {graph.ukernel}
// CHECK:       func.func private @graphopt_sconv_direct_r11_d1x1_1x32x1x1x{{[0-9]+}}_4x16x3x3_1x4x4x9({{.*}}) -> () attributes {graph.ukernel}
// CHECK-NOT:   graph.ukernel
func.func @main(%x: tensor<1x7x6x11xf32>, %w: tensor<4x7x3x3xf32>, %y: tensor<1x32x6x11xf32>, %v: tensor<4x16x3x3xf32>, %z: tensor<1x16x6x6xf64>, %u: tensor<4x16x3x3xf64>) -> (tensor<1x4x4x9xf32>, tensor<1x4x4x9xf32>, tensor<1x4x4x4xf64>) {
  %0 = graph.conv2d %x, %w : (tensor<1x7x6x11xf32>, tensor<4x7x3x3xf32>) -> tensor<1x4x4x9xf32>
  %1 = graph.conv2d %y, %v {groups = 2 : i64} : (tensor<1x32x6x11xf32>, tensor<4x16x3x3xf32>) -> tensor<1x4x4x9xf32>
  %2 = graph.conv2d %z, %u : (tensor<1x16x6x6xf64>, tensor<4x16x3x3xf64>) -> tensor<1x4x4x4xf64>
  func.return %0, %1, %2 : tensor<1x4x4x9xf32>, tensor<1x4x4x9xf32>, tensor<1x4x4x4xf64>
}
