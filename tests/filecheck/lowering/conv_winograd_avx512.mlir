// On AVX-512 hosts an f32 3x3 conv2d of stride 1 and one group with a constant, finite w runs
// as the Winograd F(2x2, 3x3) ukernel from 32 input channels, 64 output channels and 14 output
// rows (schedule.WINOGRAD_MINIMUM there); below any of them it stays conv_lanes. The lowering
// is the same as without AVX-512 (conv_winograd.mlir): a zero-padded copy of x, U = G w G^T
// transformed at compile time, w itself and a scratch buffer [16, C + O, R].

// REQUIRES: avx512
// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s

// 32 -> 64 at 14 x 14: 7 x 7 tiles in one band (R = 49 tiles + 16 of slack); the bias add is
// the tile epilogue.
// CHECK-LABEL: func.func @fused_conv2d_add_0
// CHECK:         %[[PADDED:.*]] = memref.alloc() : memref<1x32x18x17xf32>
// CHECK:         %[[SCRATCH:.*]] = memref.alloc() : memref<16x96x65xf32>
// CHECK-NEXT:    func.call @graphopt_sconv_wino_eaddAP0_1x32x18x17_64x16x32_64x32x3x3_16x96x65_64x1x1_1x64x14x14(%[[PADDED]], {{.*}}, %[[SCRATCH]], {{.*}})
func.func @main(%x: tensor<1x32x14x14xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x14x14xf32> {
  %w = graph.constant dense<0.5> : tensor<64x32x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x14x14xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x14x14xf32>
  %1 = graph.add %0, %b : (tensor<1x64x14x14xf32>, tensor<64x1x1xf32>) -> tensor<1x64x14x14xf32>
  func.return %1 : tensor<1x64x14x14xf32>
}

// -----

// 16 input channels, 63 output channels, 13 output rows: conv_lanes, not Winograd.
// CHECK-LABEL: func.func @conv2d_0
// CHECK-NOT:     graphopt_sconv_wino
// CHECK:         func.call @graphopt_sconv_lanes_
// CHECK-LABEL: func.func @conv2d_1
// CHECK-NOT:     graphopt_sconv_wino
// CHECK:         func.call @graphopt_sconv_lanes_
// CHECK-LABEL: func.func @conv2d_2
// CHECK-NOT:     graphopt_sconv_wino
// CHECK:         func.call @graphopt_sconv_lanes_
func.func @main(%x16: tensor<1x16x14x14xf32>, %x: tensor<1x32x14x14xf32>, %x13: tensor<1x32x13x13xf32>) -> (tensor<1x64x14x14xf32>, tensor<1x63x14x14xf32>, tensor<1x64x13x13xf32>) {
  %w16 = graph.constant dense<0.5> : tensor<64x16x3x3xf32>
  %w63 = graph.constant dense<0.5> : tensor<63x32x3x3xf32>
  %w = graph.constant dense<0.5> : tensor<64x32x3x3xf32>
  %0 = graph.conv2d %x16, %w16 {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x14x14xf32>, tensor<64x16x3x3xf32>) -> tensor<1x64x14x14xf32>
  %1 = graph.conv2d %x, %w63 {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x14x14xf32>, tensor<63x32x3x3xf32>) -> tensor<1x63x14x14xf32>
  %2 = graph.conv2d %x13, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x13x13xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x13x13xf32>
  func.return %0, %1, %2 : tensor<1x64x14x14xf32>, tensor<1x63x14x14xf32>, tensor<1x64x13x13xf32>
}
