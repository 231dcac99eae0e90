// -t llvm on a group the CPU lowering does not support: one error message naming the group and why.

// RUN: not graph-opt %s -t llvm 2>&1 | filecheck %s

func.func @main(%x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = graph.fused(%x) {name = "fused_two_reductions", mode = "compile"} : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = graph.reduce_sum %a {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %2 = graph.reduce_max %1 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    graph.yield %2 : tensor<f32>
  }
  func.return %0 : tensor<f32>
}

// CHECK:     graph-opt: error: convert-graph-to-linalg: fused_two_reductions: the group has 2 anchors or reductions; a kernel holds at most one
// CHECK-NOT: Traceback
