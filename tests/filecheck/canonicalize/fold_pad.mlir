// canonicalize: a graph.pad of H and W folds into the padding of the conv2d (value 0) or the
// max_pool2d (value -inf) that is its one user; anything else stays as it is.

// RUN: graph-opt %s --split-input-file -p canonicalize | filecheck %s

// A zero pad of H and W before a conv2d adds to its padding.
// CHECK-LABEL: func.func @conv
// CHECK-NEXT:    %y = graph.conv2d %x, %w {padding = array<i64: 2, 1, 3, 1>} : (tensor<1x2x3x3xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x3xf32>
// CHECK-NEXT:    func.return %y
func.func @conv(%x: tensor<1x2x3x3xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 0, 0, 0, 2, 1>, value = 0.0 : f64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x6x4xf32>
  %y = graph.conv2d %p, %w {padding = array<i64: 1, 1, 1, 0>} : (tensor<1x2x6x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x3xf32>
  func.return %y : tensor<1x4x6x3xf32>
}

// -----

// value left out: the default 0.0.
// CHECK-LABEL: func.func @default_value
// CHECK-NEXT:    %y = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT:    func.return %y
func.func @default_value(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  %y = graph.conv2d %p, %w : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}

// -----

// A -inf pad before a max_pool2d: padded positions never win.
// CHECK-LABEL: func.func @max_pool
// CHECK-NEXT:    %y = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
// CHECK-NEXT:    func.return %y
func.func @max_pool(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x6x6xf32>
  %y = graph.max_pool2d %p {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>} : (tensor<1x1x6x6xf32>) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}

// -----

// Refused: a non-zero value before a conv2d.
// CHECK-LABEL: func.func @nonzero_value
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.conv2d %p, %w
func.func @nonzero_value(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 1.0 : f64} : (tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  %y = graph.conv2d %p, %w : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}

// -----

// Refused: -0.0 is not the zero a conv pads with.
// CHECK-LABEL: func.func @negative_zero
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.conv2d %p, %w
func.func @negative_zero(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = -0.0 : f64} : (tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  %y = graph.conv2d %p, %w : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}

// -----

// Refused: the batch dim is padded.
// CHECK-LABEL: func.func @padded_batch
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.conv2d %p, %w
func.func @padded_batch(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<2x1x1x1xf32> {
  %p = graph.pad %x {pads = array<i64: 1, 0, 0, 0, 0, 0, 0, 0>, value = 0.0 : f64} : (tensor<1x1x3x3xf32>) -> tensor<2x1x3x3xf32>
  %y = graph.conv2d %p, %w : (tensor<2x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<2x1x1x1xf32>
  func.return %y : tensor<2x1x1x1xf32>
}

// -----

// Refused: the channel dim is padded.
// CHECK-LABEL: func.func @padded_channels
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.conv2d %p, %w
func.func @padded_channels(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> tensor<1x1x1x1xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 0, 0, 0, 1, 0, 0>, value = 0.0 : f64} : (tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = graph.conv2d %p, %w : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x1x1x1xf32>
  func.return %y : tensor<1x1x1x1xf32>
}

// -----

// Refused: the pad has another user, which still needs it.
// CHECK-LABEL: func.func @other_user
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.conv2d %p, %w
// CHECK-NEXT:    %z = graph.relu %p
func.func @other_user(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, tensor<1x1x5x5xf32>) {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x1x3x3xf32>) -> tensor<1x1x5x5xf32>
  %y = graph.conv2d %p, %w : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  %z = graph.relu %p : tensor<1x1x5x5xf32>
  func.return %y, %z : tensor<1x1x3x3xf32>, tensor<1x1x5x5xf32>
}

// -----

// Refused: the pad is the conv's weights, not its x.
// CHECK-LABEL: func.func @padded_weights
// CHECK-NEXT:    %p = graph.pad %w
// CHECK-NEXT:    %y = graph.conv2d %x, %p
func.func @padded_weights(%x: tensor<1x1x5x5xf32>, %w: tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32> {
  %p = graph.pad %w {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %y = graph.conv2d %x, %p : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}

// -----

// Refused: a zero pad before a max_pool2d (0 may win over negative elements).
// CHECK-LABEL: func.func @max_pool_zero
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.max_pool2d %p
func.func @max_pool_zero(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, value = 0.0 : f64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x6x6xf32>
  %y = graph.max_pool2d %p {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>} : (tensor<1x1x6x6xf32>) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}

// -----

// Refused: the folded pool padding would not be smaller than the kernel.
// CHECK-LABEL: func.func @max_pool_wide_pad
// CHECK-NEXT:    %p = graph.pad %x
// CHECK-NEXT:    %y = graph.max_pool2d %p
func.func @max_pool_wide_pad(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 2, 2, 0, 0, 0, 0>, value = 0xFFF0000000000000 : f64} : (tensor<1x1x4x4xf32>) -> tensor<1x1x6x6xf32>
  %y = graph.max_pool2d %p {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x1x6x6xf32>) -> tensor<1x1x3x3xf32>
  func.return %y : tensor<1x1x3x3xf32>
}

// -----

// xDSL's canonicalization runs too: an arith op with constant operands folds, an unused op goes.
// CHECK-LABEL: func.func @xdsl_patterns
// CHECK-NEXT:    %{{.*}} = arith.constant 5 : i64
// CHECK-NEXT:    func.return %{{.*}} : i64
func.func @xdsl_patterns(%x: tensor<4xf32>) -> i64 {
  %unused = graph.relu %x : tensor<4xf32>
  %a = arith.constant 2 : i64
  %b = arith.constant 3 : i64
  %c = arith.addi %a, %b : i64
  func.return %c : i64
}
