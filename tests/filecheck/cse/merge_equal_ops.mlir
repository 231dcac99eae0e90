// cse (xDSL's common subexpression elimination, the compile pipeline's second pass): equal
// constants become one, then ops of the same name, attributes and operands (an Inception block's
// branches that read one input through equal weights); ops that differ in any of these stay.

// RUN: graph-opt %s --split-input-file -p cse | filecheck %s

// Two branches: equal weights, a conv of each, a relu of each: one of each is left, both users read it.
// CHECK-LABEL: func.func @equal_branches
// CHECK-NEXT:    %w = graph.constant dense<2.000000e-02> : tensor<4x2x1x1xf32>
// CHECK-NEXT:    %a = graph.conv2d %x, %w
// CHECK-NEXT:    %ra = graph.relu %a
// CHECK-NEXT:    %y = graph.add %ra, %ra
// CHECK-NEXT:    func.return %y
func.func @equal_branches(%x: tensor<1x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %w = graph.constant dense<0.02> : tensor<4x2x1x1xf32>
  %v = graph.constant dense<0.02> : tensor<4x2x1x1xf32>
  %a = graph.conv2d %x, %w : (tensor<1x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x3x3xf32>
  %b = graph.conv2d %x, %v : (tensor<1x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x3x3xf32>
  %ra = graph.relu %a : tensor<1x4x3x3xf32>
  %rb = graph.relu %b : tensor<1x4x3x3xf32>
  %y = graph.add %ra, %rb : (tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  func.return %y : tensor<1x4x3x3xf32>
}

// -----

// Refused: other weights, another input, other attributes (the pools' windows): every op stays.
// CHECK-LABEL: func.func @different_convs
// CHECK-NEXT:    %w = graph.constant dense<2.000000e-02>
// CHECK-NEXT:    %v = graph.constant dense<3.000000e-02>
// CHECK-NEXT:    %a = graph.conv2d %x, %w :
// CHECK-NEXT:    %b = graph.conv2d %x, %v :
// CHECK-NEXT:    %d = graph.conv2d %z, %w :
// CHECK-NEXT:    %p = graph.max_pool2d %x {kernel = array<i64: 3, 3>
// CHECK-NEXT:    %q = graph.max_pool2d %x {kernel = array<i64: 1, 1>
func.func @different_convs(%x: tensor<1x2x3x3xf32>, %z: tensor<1x2x3x3xf32>) -> (tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) {
  %w = graph.constant dense<0.02> : tensor<4x2x1x1xf32>
  %v = graph.constant dense<0.03> : tensor<4x2x1x1xf32>
  %a = graph.conv2d %x, %w : (tensor<1x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x3x3xf32>
  %b = graph.conv2d %x, %v : (tensor<1x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x3x3xf32>
  %d = graph.conv2d %z, %w : (tensor<1x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x3x3xf32>
  %p = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %q = graph.max_pool2d %x {kernel = array<i64: 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  func.return %a, %b, %d, %p, %q : tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
}

// -----

// Groups are not merged: a graph.fused region is not pure (its body decides), so two equal ones stay.
// CHECK-LABEL: func.func @fused_groups
// CHECK:         graph.fused
// CHECK:         graph.fused
func.func @fused_groups(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = graph.fused(%x) {name = "g0"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%in: tensor<4xf32>):
    %r = graph.relu %in : tensor<4xf32>
    graph.yield %r : tensor<4xf32>
  }
  %b = graph.fused(%x) {name = "g1"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%in: tensor<4xf32>):
    %r = graph.relu %in : tensor<4xf32>
    graph.yield %r : tensor<4xf32>
  }
  func.return %a, %b : tensor<4xf32>, tensor<4xf32>
}
