// An f32 conv2d of one group with a constant w, a window larger than 1x1 and output channels a
// multiple of 16 (CpuSchedule.lanes_conv) copies x, zero-padded, into its stride phases and calls
// the ukernel with output channels on the lanes (conv_lanes.py) on them and on w packed at compile
// time into [O/16, C, KH, KW, 16] (a constant argument); the module declares the ukernel.

// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s

// 3x3, padding 1: padded x is 8 x 9, rows of R = 9 floats in one phase; the window reaches
// 2 rows of R and 2 columns past an output's first tap, so a phase holds OH * R + 20 = 74 floats
// (the ukernel reads x one float at a time: no slack). The bias add is the tile epilogue.
// CHECK-LABEL: func.func @fused_conv2d_add_0(%0: memref<1x4x6x7xf32>, %1: memref<16x1x1xf32>, %2: memref<1x4x3x3x16xf32> {graph.constant = dense<5.000000e-01> : tensor<1x4x3x3x16xf32>}, %3: memref<1x16x6x7xf32>)
// CHECK-NEXT:    %[[PHASES:.*]] = memref.alloc() : memref<1x4x1x1x74xf32>
// CHECK:         func.call @graphopt_sconv_lanes_r9_d1x1_eaddAP0_1x4x1x1x74_1x4x3x3x16_16x1x1_1x16x6x7(%[[PHASES]], %2, %1, %3) : (memref<1x4x1x1x74xf32>, memref<1x4x3x3x16xf32>, memref<16x1x1xf32>, memref<1x16x6x7xf32>) -> ()
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sconv_lanes_r9_d1x1_eaddAP0_1x4x1x1x74_1x4x3x3x16_16x1x1_1x16x6x7({{.*}}) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<1x4x6x7xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x6x7xf32> {
  %w = graph.constant dense<0.5> : tensor<16x4x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x7xf32>, tensor<16x4x3x3xf32>) -> tensor<1x16x6x7xf32>
  %1 = graph.add %0, %b : (tensor<1x16x6x7xf32>, tensor<16x1x1xf32>) -> tensor<1x16x6x7xf32>
  func.return %1 : tensor<1x16x6x7xf32>
}

// -----

// w an input (not packed at compile time) or 24 output channels: the direct ukernel.
// CHECK-LABEL: func.func @conv2d_0
// CHECK:         func.call @graphopt_sconv_direct_
// CHECK-LABEL: func.func @conv2d_1
// CHECK:         func.call @graphopt_sconv_direct_
func.func @main(%x: tensor<1x4x6x20xf32>, %w: tensor<16x4x3x3xf32>) -> (tensor<1x16x4x18xf32>, tensor<1x24x4x18xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x4x6x20xf32>, tensor<16x4x3x3xf32>) -> tensor<1x16x4x18xf32>
  %w24 = graph.constant dense<0.5> : tensor<24x4x3x3xf32>
  %1 = graph.conv2d %x, %w24 : (tensor<1x4x6x20xf32>, tensor<24x4x3x3xf32>) -> tensor<1x24x4x18xf32>
  func.return %0, %1 : tensor<1x16x4x18xf32>, tensor<1x24x4x18xf32>
}
