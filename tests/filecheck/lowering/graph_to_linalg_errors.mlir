// convert-graph-to-linalg refuses what it cannot lower and says why.

// RUN: not graph-opt %s -p convert-graph-to-linalg 2>&1 | filecheck %s

// CHECK: convert-graph-to-linalg: two_anchors: the group has 2 anchors or reductions; a kernel holds at most one
func.func @main(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = graph.fused(%x) {name = "two_anchors", mode = "compile"} : (tensor<3x3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<3x3xf32>):
    %m = graph.matmul %a, %a : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %s = graph.softmax %m : (tensor<3x3xf32>) -> tensor<3x3xf32>
    graph.yield %s : tensor<3x3xf32>
  }
  func.return %0 : tensor<3x3xf32>
}
