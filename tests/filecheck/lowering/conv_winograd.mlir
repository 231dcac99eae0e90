// An f32 3x3 conv2d of stride 1 and one group with a constant, finite w and at least 16 input
// and output channels (CpuSchedule.winograd_conv; AVX-512 hosts ask for more:
// conv_winograd_avx512.mlir) copies x zero-padded (one more column on the right, rows below for the vectors that
// read past a row: conv_winograd.padding) and calls the Winograd F(2x2, 3x3) ukernel
// (conv_winograd.py) on it, on U = G w G^T transformed at compile time ([O, 16, C], a constant
// argument), on w itself (the direct conv for a non-finite x) and on a scratch buffer
// [16, C + O, R] of V and M for a band of tile rows; the module declares the ukernel.

// UNSUPPORTED: avx512
// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s

// 6 x 8 outputs: 3 x 4 tiles in one band (R = 12 tiles + 16 of slack, + 1 so that the 16 rows
// of a channel spread over L1's sets); the bias add is the tile epilogue.
// CHECK-LABEL: func.func @fused_conv2d_add_0(%0: memref<1x16x6x8xf32>, %1: memref<16x1x1xf32>, %2: memref<16x16x3x3xf32> {graph.constant = dense<5.000000e-01> : tensor<16x16x3x3xf32>}, %3: memref<16x16x16xf32> {graph.constant = {{.*}} : tensor<16x16x16xf32>}, %4: memref<1x16x6x8xf32>)
// CHECK-NEXT:    %[[PADDED:.*]] = memref.alloc() : memref<1x16x11x11xf32>
// CHECK:         %[[SCRATCH:.*]] = memref.alloc() : memref<16x32x29xf32>
// CHECK-NEXT:    func.call @graphopt_sconv_wino_eaddAP0_1x16x11x11_16x16x16_16x16x3x3_16x32x29_16x1x1_1x16x6x8(%[[PADDED]], %3, %2, %[[SCRATCH]], %1, %4) : (memref<1x16x11x11xf32>, memref<16x16x16xf32>, memref<16x16x3x3xf32>, memref<16x32x29xf32>, memref<16x1x1xf32>, memref<1x16x6x8xf32>) -> ()
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_wino_eaddAP0_1x16x11x11_16x16x16_16x16x3x3_16x32x29_16x1x1_1x16x6x8({{.*}}) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<1x16x6x8xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x6x8xf32> {
  %w = graph.constant dense<0.5> : tensor<16x16x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x6x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x6x8xf32>
  %1 = graph.add %0, %b : (tensor<1x16x6x8xf32>, tensor<16x1x1xf32>) -> tensor<1x16x6x8xf32>
  func.return %1 : tensor<1x16x6x8xf32>
}

// -----

// 7 x 7 outputs (odd): 4 x 4 tiles, the last row and column of them half-empty; x's copy has one
// more row below (14 = 7 + 2 + 1 + 4 rows, 10 = 7 + 2 + 1 columns).
// CHECK-LABEL: func.func @conv2d_0
// CHECK-NEXT:    %[[PADDED:.*]] = memref.alloc() : memref<1x16x14x10xf32>
// CHECK:         %[[SCRATCH:.*]] = memref.alloc() : memref<16x32x33xf32>
// CHECK-NEXT:    func.call @graphopt_sconv_wino_1x16x14x10_16x16x16_16x16x3x3_16x32x33_1x16x7x7(%[[PADDED]], {{.*}}, %[[SCRATCH]], {{.*}})
func.func @main(%x: tensor<1x16x7x7xf32>) -> tensor<1x16x7x7xf32> {
  %w = graph.constant dense<0.5> : tensor<16x16x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x7x7xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x7x7xf32>
  func.return %0 : tensor<1x16x7x7xf32>
}

// -----

// Stride 2, 8 input channels or w an input: not Winograd.
// CHECK-LABEL: func.func @conv2d_0
// CHECK-NOT:     graphopt_sconv_wino
// CHECK-LABEL: func.func @conv2d_1
// CHECK-NOT:     graphopt_sconv_wino
// CHECK-LABEL: func.func @conv2d_2
// CHECK-NOT:     graphopt_sconv_wino
func.func @main(%x: tensor<1x16x7x8xf32>, %x8: tensor<1x8x6x8xf32>, %w: tensor<16x16x3x3xf32>) -> (tensor<1x16x3x4xf32>, tensor<1x16x6x8xf32>, tensor<1x16x7x8xf32>) {
  %w16 = graph.constant dense<0.5> : tensor<16x16x3x3xf32>
  %w8 = graph.constant dense<0.5> : tensor<16x8x3x3xf32>
  %0 = graph.conv2d %x, %w16 {padding = array<i64: 0, 1, 1, 0>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : (tensor<1x16x7x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x3x4xf32>
  %1 = graph.conv2d %x8, %w8 {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x8xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x6x8xf32>
  %2 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x7x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x7x8xf32>
  func.return %0, %1, %2 : tensor<1x16x3x4xf32>, tensor<1x16x6x8xf32>, tensor<1x16x7x8xf32>
}
