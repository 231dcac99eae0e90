// canonicalize: a graph.batch_norm with constant parameters becomes x * a + b (a and b per
// channel, computed in f64, kept only when finite), and a per-channel multiply after a conv with
// constant weights scales the weights instead; adds of per-channel constants merge into one.
// A conv result used twice, weights that are not constants and non-finite factors stay.

// RUN: graph-opt %s --split-input-file -p canonicalize | filecheck %s

// conv + batch_norm: the weights scaled by scale / sqrt(var) = [2, 0.25], one add of
// bias - mean * factor = [1, -1.5].
// CHECK-LABEL: func.func @conv_batch_norm
// CHECK-NEXT:    %[[SHIFT:.*]] = graph.constant dense<{{\[\[\[}}1.000000e+00]], {{\[\[}}-1.500000e+00]]]> : tensor<2x1x1xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<{{\[\[\[\[}}2.000000e+00]], {{\[\[}}4.000000e+00]]], {{\[\[\[}}7.500000e-01]], {{\[\[}}1.000000e+00]]]]> : tensor<2x2x1x1xf32>
// CHECK-NEXT:    %[[CONV:.*]] = graph.conv2d %x, %[[W]]
// CHECK-NEXT:    %[[SUM:.*]] = graph.add %[[CONV]], %[[SHIFT]]
// CHECK-NEXT:    func.return %[[SUM]]
func.func @conv_batch_norm(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]]]> : tensor<2x2x1x1xf32>
  %s = graph.constant dense<[2.0, 0.5]> : tensor<2xf32>
  %b = graph.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %m = graph.constant dense<[0.0, 2.0]> : tensor<2xf32>
  %v = graph.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %y = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %z = graph.batch_norm %y, %s, %b, %m, %v {epsilon = 0.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %z : tensor<1x2x4x4xf32>
}

// -----

// A batch_norm of anything else: a multiply and an add by per-channel constants.
// CHECK-LABEL: func.func @batch_norm_alone
// CHECK-DAG:     %[[FACTOR:.*]] = graph.constant dense<{{\[\[}}2.000000e+00], [2.500000e-01]]> : tensor<2x1xf32>
// CHECK-DAG:     %[[SHIFT:.*]] = graph.constant dense<{{\[\[}}1.000000e+00], [-1.500000e+00]]> : tensor<2x1xf32>
// CHECK:         %[[PRODUCT:.*]] = graph.mul %x, %[[FACTOR]]
// CHECK-NEXT:    %[[SUM:.*]] = graph.add %[[PRODUCT]], %[[SHIFT]]
// CHECK-NEXT:    func.return %[[SUM]]
// CHECK-NOT:     graph.batch_norm
func.func @batch_norm_alone(%x: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %s = graph.constant dense<[2.0, 0.5]> : tensor<2xf32>
  %b = graph.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %m = graph.constant dense<[0.0, 2.0]> : tensor<2xf32>
  %v = graph.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %z = graph.batch_norm %x, %s, %b, %m, %v {epsilon = 0.0 : f64} : (tensor<2x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2x3xf32>
  func.return %z : tensor<2x2x3xf32>
}

// -----

// A zero variance with epsilon 0 gives an infinite factor: the batch_norm stays.
// CHECK-LABEL: func.func @zero_variance
// CHECK:         graph.batch_norm
func.func @zero_variance(%x: tensor<2x2x3xf32>) -> tensor<2x2x3xf32> {
  %s = graph.constant dense<[2.0, 0.5]> : tensor<2xf32>
  %b = graph.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %m = graph.constant dense<[0.0, 2.0]> : tensor<2xf32>
  %v = graph.constant dense<[0.0, 4.0]> : tensor<2xf32>
  %z = graph.batch_norm %x, %s, %b, %m, %v {epsilon = 0.0 : f64} : (tensor<2x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2x3xf32>
  func.return %z : tensor<2x2x3xf32>
}

// -----

// The conv's result is also returned: the multiply stays and the weights are not scaled.
// CHECK-LABEL: func.func @conv_used_twice
// CHECK:         %[[CONV:.*]] = graph.conv2d %x, %w
// CHECK-NEXT:    graph.mul %[[CONV]], %a
func.func @conv_used_twice(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %w = graph.constant dense<1.0> : tensor<2x2x1x1xf32>
  %a = graph.constant dense<[[[2.0]], [[3.0]]]> : tensor<2x1x1xf32>
  %y = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %z = graph.mul %y, %a : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %y, %z : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Weights that are an argument: nothing to scale at compile time.
// CHECK-LABEL: func.func @runtime_weights
// CHECK:         %[[CONV:.*]] = graph.conv2d %x, %w
// CHECK-NEXT:    graph.mul %[[CONV]], %a
func.func @runtime_weights(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32> {
  %a = graph.constant dense<[[[2.0]], [[3.0]]]> : tensor<2x1x1xf32>
  %y = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %z = graph.mul %y, %a : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %z : tensor<1x2x4x4xf32>
}

// -----

// ONNX's scale and shift after a bias add: mul(add(y, b), a) -> add(mul(y, a), b * a), then the
// multiply goes into the weights and the two adds of constants merge: one add of b * a + c.
// CHECK-LABEL: func.func @bias_scale_shift
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<{{\[\[\[\[}}2.000000e+00]], {{\[\[}}2.000000e+00]]], {{\[\[\[}}3.000000e+00]], {{\[\[}}3.000000e+00]]]]> : tensor<2x2x1x1xf32>
// CHECK-NEXT:    %[[CONV:.*]] = graph.conv2d %x, %[[W]]
// CHECK-NEXT:    %[[SHIFT:.*]] = graph.constant dense<{{\[\[\[}}3.000000e+00]], {{\[\[}}7.000000e+00]]]> : tensor<2x1x1xf32>
// CHECK-NEXT:    %[[SUM:.*]] = graph.add %[[CONV]], %[[SHIFT]]
// CHECK-NEXT:    func.return %[[SUM]]
func.func @bias_scale_shift(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant dense<1.0> : tensor<2x2x1x1xf32>
  %b = graph.constant dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %a = graph.constant dense<[[[2.0]], [[3.0]]]> : tensor<2x1x1xf32>
  %c = graph.constant dense<[[[1.0]], [[1.0]]]> : tensor<2x1x1xf32>
  %y = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.add %y, %b : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %q = graph.mul %p, %a : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %r = graph.add %q, %c : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %r : tensor<1x2x4x4xf32>
}
