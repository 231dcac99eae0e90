// Without --verify-diagnostics a verifier error is one message on stderr and exit code 1.

// RUN: not graph-opt %s 2>&1 | filecheck %s

// CHECK-NOT: Traceback
func.func @main(%a: tensor<4x8xf32>, %b: tensor<7x16xf32>) -> tensor<4x16xf32> {
  // CHECK: graph-opt: {{.*}}verify_error.mlir:[[# @LINE + 1]]:3: error: graph.matmul: contraction mismatch: 'a' [4, 8] has K=8, 'b' [7, 16] has K=7
  %0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<7x16xf32>) -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}
// CHECK-NOT: Traceback
