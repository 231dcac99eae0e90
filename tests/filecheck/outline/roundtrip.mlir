// outline then inline-fused gives back the module it started from, byte for byte:
// group names, modes, backends, attribute order and value names all survive.

// RUN: graph-opt %s > %t.before
// RUN: graph-opt %s -p outline,inline-fused > %t.after
// RUN: diff %t.before %t.after
// RUN: graph-opt %s -p outline,inline-fused | filecheck %s

func.func @main(%a: tensor<2x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %mm:2 = graph.fused(%a, %w, %b) {name = "matmul_add_relu_0", mode = "compile", backend = "cpu"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  ^bb0(%x: tensor<2x4xf32>, %y: tensor<4x3xf32>, %z: tensor<3xf32>):
    %0 = graph.matmul %x, %y : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %1 = graph.add %0, %z : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %2 = graph.relu %1 : tensor<2x3xf32>
    graph.yield %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>
  }
  %s = graph.softmax %mm#1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %n = graph.fused(%s) {name = "neg_1", mode = "fallback"} : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%x: tensor<2x3xf32>):
    %0 = graph.neg %x : tensor<2x3xf32>
    graph.yield %0 : tensor<2x3xf32>
  }
  func.return %mm#0, %n : tensor<2x3xf32>, tensor<2x3xf32>
}

func.func @helper(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = graph.fused(%a) {name = "exp_2"} : (tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%x: tensor<3xf32>):
    %1 = graph.exp %x : tensor<3xf32>
    graph.yield %1 : tensor<3xf32>
  }
  func.return %0 : tensor<3xf32>
}

// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %mm, %mm_1 = graph.fused(%a, %w, %b) {name = "matmul_add_relu_0", mode = "compile", backend = "cpu"}
// CHECK:         %n = graph.fused(%s) {name = "neg_1", mode = "fallback"}
// CHECK-LABEL: func.func @helper(
// CHECK-NEXT:    %0 = graph.fused(%a) {name = "exp_2"}
// CHECK-NOT:   func.func private
