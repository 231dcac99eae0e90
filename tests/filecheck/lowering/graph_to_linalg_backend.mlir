// convert-graph-to-linalg{backend=cpu} (the CPU target's `to-kernels` stage) lowers the groups
// placed on cpu, and groups not placed at all; a group partitioning put on another backend is
// left out. Without `backend`, every group is lowered.

// RUN: graph-opt %s -p 'convert-graph-to-linalg{backend=cpu}' | filecheck %s
// RUN: graph-opt %s -p 'convert-graph-to-linalg' | filecheck %s --check-prefix=ALL

// CHECK-NOT:   func.func @matmul_0
// CHECK:       func.func @softmax_1
// CHECK:       func.func @unplaced
// CHECK-NOT:   func.func @matmul_0

// ALL:         func.func @matmul_0
// ALL:         func.func @softmax_1
// ALL:         func.func @unplaced
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "blas"} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>):
    %m = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    graph.yield %m : tensor<4x16xf32>
  }
  %1 = graph.fused(%0) {name = "softmax_1", mode = "compile", backend = "cpu"} : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%c: tensor<4x16xf32>):
    %s = graph.softmax %c : (tensor<4x16xf32>) -> tensor<4x16xf32>
    graph.yield %s : tensor<4x16xf32>
  }
  %2 = graph.fused(%1) {name = "unplaced", mode = "compile"} : (tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%d: tensor<4x16xf32>):
    %r = graph.relu %d : tensor<4x16xf32>
    graph.yield %r : tensor<4x16xf32>
  }
  func.return %2 : tensor<4x16xf32>
}
