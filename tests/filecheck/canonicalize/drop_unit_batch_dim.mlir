// canonicalize: a function whose values of rank 3 or more have a leading dim of 1 computes
// without it (so row splitting has rows to split), reshaped on entry and back at the return,
// when every op touching them can; otherwise it stays as it is.

// RUN: graph-opt %s --split-input-file -p canonicalize | filecheck %s
// RUN: graph-opt %s --split-input-file -p canonicalize,canonicalize | filecheck %s

// Attention at batch 1: axes and perms shift down by one; a constant loses its dim.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT:    %x_1 = graph.reshape %x : (tensor<1x4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %c = graph.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:    %m = graph.matmul %x_1, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %a = graph.add %m, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %h = graph.reshape %a : (tensor<4x8xf32>) -> tensor<4x2x4xf32>
// CHECK-NEXT:    %t = graph.transpose %h {perm = array<i64: 1, 0, 2>} : (tensor<4x2x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:    %s = graph.softmax %t {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:    %n = graph.layer_norm %a, %g, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %0 = graph.reshape %s : (tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %1 = graph.reshape %n : (tensor<4x8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT:    func.return %0, %1
func.func @attention(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x4x8xf32>) {
  %c = graph.constant dense<1.0> : tensor<1x4x8xf32>
  %m = graph.matmul %x, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %a = graph.add %m, %c : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %h = graph.reshape %a : (tensor<1x4x8xf32>) -> tensor<1x4x2x4xf32>
  %t = graph.transpose %h {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %s = graph.softmax %t {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %n = graph.layer_norm %a, %g, %b {axis = 2 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  func.return %s, %n : tensor<1x2x4x4xf32>, tensor<1x4x8xf32>
}

// -----

// A transpose that moves dim 0 keeps the function as it is.
// CHECK-LABEL: func.func @moves_dim_0
// CHECK-NEXT:    %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<1x4x8xf32>) -> tensor<4x1x8xf32>
// CHECK-NEXT:    %y = graph.relu %t : tensor<4x1x8xf32>
func.func @moves_dim_0(%x: tensor<1x4x8xf32>) -> tensor<4x1x8xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<1x4x8xf32>) -> tensor<4x1x8xf32>
  %y = graph.relu %t : tensor<4x1x8xf32>
  func.return %y : tensor<4x1x8xf32>
}

// -----

// So does a conv2d (its layout needs dim 0), and a softmax over dim 0.
// CHECK-LABEL: func.func @conv
// CHECK-NEXT:    %y = graph.conv2d %x, %w
// CHECK-NEXT:    %r = graph.relu %y : tensor<1x1x3x3xf32>
func.func @conv(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x1x3x3xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %r = graph.relu %y : tensor<1x1x3x3xf32>
  func.return %r : tensor<1x1x3x3xf32>
}

// -----

// CHECK-LABEL: func.func @softmax_over_dim_0
// CHECK-NEXT:    %y = graph.softmax %x {axis = 0 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
func.func @softmax_over_dim_0(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %y = graph.softmax %x {axis = 0 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  func.return %y : tensor<1x4x8xf32>
}
