// outline: each graph.fused becomes a private primitive function after its own function,
// in the order of the groups, and a func.call to it.

// RUN: graph-opt %s -p outline | filecheck %s
// RUN: graph-opt %s -p outline | graph-opt | filecheck %s

func.func @single(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = graph.fused(%a) {name = "relu_0", mode = "compile"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @single(%a: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %r = func.call @relu_0(%a) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %r : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @relu_0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive, graph.mode = "compile"} {
// CHECK-NEXT:    %y = graph.relu %x : tensor<4xf32>
// CHECK-NEXT:    func.return %y : tensor<4xf32>
// CHECK-NEXT:  }

func.func @multi_result(%a: tensor<4xf32>, %b: tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = graph.fused(%a, %b) {name = "add_relu_1", mode = "fallback", backend = "cpu"} : (tensor<4xf32>, tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>, %y: tensor<1xf32>):
    %s = graph.add %x, %y : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
    %t = graph.relu %s : tensor<4xf32>
    graph.yield %s, %t : tensor<4xf32>, tensor<4xf32>
  }
  func.return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @multi_result(%a: tensor<4xf32>, %b: tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    %r, %r_1 = func.call @add_relu_1(%a, %b) : (tensor<4xf32>, tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    func.return %r, %r_1 : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @add_relu_1(%x: tensor<4xf32>, %y: tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {graph.primitive, graph.mode = "fallback", graph.backend = "cpu"} {
// CHECK-NEXT:    %s = graph.add %x, %y : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %t = graph.relu %s : tensor<4xf32>
// CHECK-NEXT:    func.return %s, %t : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }

// Two groups in one function: both kernels follow it, in the order of the groups; a group
// without mode or backend gives a function with graph.primitive only.
func.func @two_groups(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.fused(%a) {name = "exp_2"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.exp %x : tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  %1 = graph.reduce_sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  %2 = graph.fused(%1, %a) {name = "mul_3", backend = "reference"} : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<f32>, %y: tensor<4xf32>):
    %z = graph.mul %x, %y : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
    graph.yield %z : tensor<4xf32>
  }
  func.return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @two_groups(%a: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    %0 = func.call @exp_2(%a) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = graph.reduce_sum %0 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT:    %2 = func.call @mul_3(%1, %a) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %2 : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @exp_2(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive} {
// CHECK-NEXT:    %y = graph.exp %x : tensor<4xf32>
// CHECK-NEXT:    func.return %y : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @mul_3(%x: tensor<f32>, %y: tensor<4xf32>) -> tensor<4xf32> attributes {graph.primitive, graph.backend = "reference"} {
// CHECK-NEXT:    %z = graph.mul %x, %y : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    func.return %z : tensor<4xf32>
// CHECK-NEXT:  }

// A group that passes an input through unchanged, in a function without other ops.
func.func @pass_through(%a: tensor<2xi64>) -> tensor<2xi64> {
  %0 = graph.fused(%a) {name = "identity_4", mode = "fallback"} : (tensor<2xi64>) -> tensor<2xi64> {
  ^bb0(%x: tensor<2xi64>):
    graph.yield %x : tensor<2xi64>
  }
  func.return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @pass_through(%a: tensor<2xi64>) -> tensor<2xi64> {
// CHECK-NEXT:    %0 = func.call @identity_4(%a) : (tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT:    func.return %0 : tensor<2xi64>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @identity_4(%x: tensor<2xi64>) -> tensor<2xi64> attributes {graph.primitive, graph.mode = "fallback"} {
// CHECK-NEXT:    func.return %x : tensor<2xi64>
// CHECK-NEXT:  }
// CHECK-NEXT: }
