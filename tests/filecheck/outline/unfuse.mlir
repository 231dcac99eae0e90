// unfuse: every graph.fused dissolves into the block around it; uses of its results
// become uses of the values it yielded.

// RUN: graph-opt %s -p unfuse | filecheck %s

func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = graph.fused(%a, %b) {name = "add_relu_0", mode = "compile", backend = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %s = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %t = graph.relu %s : tensor<4xf32>
    graph.yield %s, %t : tensor<4xf32>, tensor<4xf32>
  }
  %e = graph.exp %r#1 : tensor<4xf32>
  %n = graph.fused(%e) {name = "neg_1"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %0 = graph.neg %x : tensor<4xf32>
    graph.yield %0 : tensor<4xf32>
  }
  func.return %r#0, %n : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    %s = graph.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %t = graph.relu %s : tensor<4xf32>
// CHECK-NEXT:    %e = graph.exp %t : tensor<4xf32>
// CHECK-NEXT:    %n = graph.neg %e : tensor<4xf32>
// CHECK-NEXT:    func.return %s, %n : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }

// A group that only passes its input through disappears entirely.
func.func @pass_through(%a: tensor<2xi64>) -> tensor<2xi64> {
  %0 = graph.fused(%a) {name = "identity_2", mode = "fallback"} : (tensor<2xi64>) -> tensor<2xi64> {
  ^bb0(%x: tensor<2xi64>):
    graph.yield %x : tensor<2xi64>
  }
  func.return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @pass_through(%a: tensor<2xi64>) -> tensor<2xi64> {
// CHECK-NEXT:    func.return %a : tensor<2xi64>
// CHECK-NEXT:  }
// CHECK-NOT:   graph.fused
