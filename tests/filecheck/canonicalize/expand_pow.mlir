// canonicalize: a graph.pow by a splat constant whole exponent from 1 to 4 becomes that many
// factors of x (a vectorizable product instead of a libm call per element); anything else stays.

// RUN: graph-opt %s --split-input-file -p canonicalize | filecheck %s

// x^3, as GPT-2's tanh GELU writes it: two muls, and the constant goes.
// CHECK-LABEL: func.func @cube
// CHECK-NEXT:    %[[SQUARE:.*]] = graph.mul %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[CUBE:.*]] = graph.mul %[[SQUARE]], %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[CUBE]]
func.func @cube(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = graph.constant dense<3.0> : tensor<f32>
  %y = graph.pow %x, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}

// -----

// A splat of the operand's own shape, exponent 2 (RMSNorm's square): one mul.
// CHECK-LABEL: func.func @square
// CHECK-NEXT:    %y = graph.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %y
func.func @square(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<2.0> : tensor<4xf32>
  %y = graph.pow %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// Exponent 1: x itself.
// CHECK-LABEL: func.func @first
// CHECK-NEXT:    func.return %x
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<1.0> : tensor<f32>
  %y = graph.pow %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// A constant used elsewhere too stays for that use.
// CHECK-LABEL: func.func @shared_constant
// CHECK-NEXT:    %c = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %y = graph.mul %x, %x
// CHECK-NEXT:    %z = graph.add %y, %c
func.func @shared_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<2.0> : tensor<f32>
  %y = graph.pow %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %z = graph.add %y, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}

// -----

// Not expanded: a fractional exponent, one above 4, zero, a negative one, a non-splat
// exponent, an exponent that is not a constant, and one that widens x's shape.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-7: graph.pow
// CHECK-NOT:     graph.mul
func.func @kept(%x: tensor<4xf32>, %e: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %half = graph.constant dense<0.5> : tensor<f32>
  %five = graph.constant dense<5.0> : tensor<f32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %minus_two = graph.constant dense<-2.0> : tensor<f32>
  %mixed = graph.constant dense<[2.0, 3.0, 2.0, 2.0]> : tensor<4xf32>
  %wide = graph.constant dense<2.0> : tensor<2x4xf32>
  %a = graph.pow %x, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = graph.pow %x, %five : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c = graph.pow %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d = graph.pow %x, %minus_two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e2 = graph.pow %x, %mixed : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %f = graph.pow %x, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g = graph.pow %x, %wide : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %a, %b, %c, %d, %e2, %f, %g : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>
}
