// outline refuses a group whose name is already taken by a function of the module: one
// error line, no traceback, nothing printed.

// RUN: not graph-opt %s -p outline 2>&1 | filecheck %s

func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.fused(%a) {name = "helper"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %1 = graph.relu %x : tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  %2 = func.call @helper(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// CHECK-NOT: Traceback
// CHECK:     graph-opt: error: outline: cannot outline graph.fused "helper": the module already has a symbol @helper
// CHECK-NOT: {{.}}
