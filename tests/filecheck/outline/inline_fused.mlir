// inline-fused: calls to functions marked graph.primitive become graph.fused groups named
// after the callee, with mode and backend restored; the inlined kernels are erased.
// Calls to other functions, and primitive functions nobody calls, are left alone.

// RUN: graph-opt %s -p inline-fused | filecheck %s

func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @kernel(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @kernel(%0, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = func.call @plain(%1) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
func.func private @kernel(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive, graph.backend = "blas"} {
  %z = graph.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.abs %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive} {
  func.return %x : tensor<4xf32>
}

// CHECK-LABEL: func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %0 = graph.fused(%a, %b) {name = "kernel", backend = "blas"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// CHECK-NEXT:      %z = graph.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      graph.yield %z : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %1 = graph.fused(%0, %b) {name = "kernel", backend = "blas"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// CHECK-NEXT:      %z = graph.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      graph.yield %z : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %2 = func.call @plain(%1) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %2 : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   @kernel
// CHECK-NEXT:  func.func @plain(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %y = graph.abs %x : tensor<4xf32>
// CHECK-NEXT:    func.return %y : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive} {
