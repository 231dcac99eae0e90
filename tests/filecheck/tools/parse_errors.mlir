// Parse errors name file:line:col; graph-opt reports the first one on stderr and fails.

// RUN: graph-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// RUN: not graph-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// STDERR:      graph-opt: {{.*}}parse_errors.mlir:[[# @LINE + 7]]:25: error: Operation graph.frobnicate is not registered
// STDERR-NEXT:   %0 = graph.frobnicate %x : tensor<4xf32>
// STDERR-NEXT:                         ^
// STDERR-NOT:  Traceback

func.func @unknown_op(%x: tensor<4xf32>) {
  // CHECK: parse_errors.mlir:[[# @LINE + 1]]:25
  %0 = graph.frobnicate %x : tensor<4xf32>
  // CHECK: Operation graph.frobnicate is not registered
  func.return
}

// -----

func.func @malformed_type(%x: tensor<4xf32>) {
  %0 = graph.relu %x : tensor<4xf32
  // CHECK: parse_errors.mlir:[[# @LINE + 1]]:3
  func.return
  // CHECK: Expected '>' after builtin parameter list
}

// -----

func.func @malformed_attribute(%x: tensor<2x3xf32>) {
  // CHECK: parse_errors.mlir:[[# @LINE + 1]]:50
  %0 = graph.transpose %x {perm = array<i64: 1, 0} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // CHECK: '>' expected in dense array
  func.return
}

// -----

func.func @constant_not_dense() {
  // CHECK: parse_errors.mlir:[[# @LINE + 1]]:23
  %0 = graph.constant 1.0 : f32
  // CHECK: graph.constant expects dense elements
  func.return
}
