// Input that makes xDSL's parser fail other than with a parse error (an overflow, an
// unsupported element width, a huge literal, a digit int() refuses) is one message at the
// file:line:col of the op being parsed, and graph-opt fails.

// RUN: graph-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// RUN: not graph-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// STDERR:      graph-opt: {{.*}}parse_failures.mlir:[[# @LINE + 5]]:3: error: number out of range: int too big to convert
// STDERR-NOT:  Traceback

func.func @hex_float_wider_than_its_type() {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  %0 = arith.constant 0xff800000 : f16
  // CHECK: number out of range: int too big to convert
  func.return
}

// -----

func.func @zero_width_array(%x: tensor<2x3xf32>) {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  %0 = graph.transpose %x {perm = array<i0: 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // CHECK: unsupported attribute: integer modulo by zero
  func.return
}

// -----

func.func @i128_array(%x: tensor<2x3xf32>) {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  %0 = graph.transpose %x {perm = array<i128: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // CHECK: unsupported attribute: Format not implemented for i128
  func.return
}

// -----

func.func @huge_constant() {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:36
  %0 = graph.constant dense<1.5> : tensor<2147483648xf32>
  // CHECK: dense literal of 2147483648 elements is over the limit of 268435456 elements
  func.return
}

// -----

func.func @dimension_over_index_range() {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:36
  %0 = graph.constant dense<1.5> : tensor<18446744073709551616xf32>
  // CHECK: dense literal of 18446744073709551616 elements is over the limit of 268435456 elements
  func.return
}

// -----

func.func @integer_over_its_type() {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  %0 = arith.constant 18446744073709551616 : i64
  // CHECK: invalid attribute: Integer value 18446744073709551616 is out of range for type i64
  func.return
}

// -----

// CHECK: parse_failures.mlir:[[# @LINE + 1]]:1
func.func @superscript_digit(%x: tensor<²xf32>) {
// CHECK: malformed value: invalid literal for int() with base 10: '²'
  func.return
}

// -----

func.func @custom_syntax_that_asserts(%0: memref<3xf32>) {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = 99} outs(%0 : memref<3xf32>) {
  ^bb0(%3: f32):
    linalg.yield %3 : f32
  }
  // CHECK: malformed operation
  func.return
}

// -----

func.func @integer_width_of_2_to_the_64(%x: tensor<4xf32>) -> tensor<f32> {
  // CHECK: parse_failures.mlir:[[# @LINE + 1]]:3
  %0 = graph.reduce_sum %x {axes = array<i18446744073709551616: 0>} : (tensor<4xf32>) -> tensor<f32>
  // CHECK: value too large
  func.return %0 : tensor<f32>
}

// -----

func.func @block_label_defined_twice(%c: i1) {
  // CHECK: parse_failures.mlir:[[# @LINE - 1]]:1
  cf.cond_br %c, ^left, ^join
^left:
  cf.br ^join
^join:
^join:
  func.return
}
// CHECK: a name defined twice: 'join'
