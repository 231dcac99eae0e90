// `graph.implementation` binds a group to an implementation registered by name
// (graphopt.register_implementation, or an entry point in `graphopt.implementations`); partition
// puts the group whole on the `implementation` backend. One that is not registered is an error
// naming the group, the binding and the reason.

// RUN: not graph-opt %s --partition 2>&1 | filecheck %s
// RUN: not graph-opt %s --partition=search=cost 2>&1 | filecheck %s
// RUN: not graph-run %s 2>&1 | filecheck %s --check-prefix=TOOL

// CHECK: graph-opt: error: partition: @main: group 'my_group' is bound to backend 'implementation' (graph.implementation = "no_such_kernel"), which refuses it: no implementation named 'no_such_kernel' is registered
// CHECK-NOT: Traceback
// TOOL: graph-run: error: partition: @main: group 'my_group' is bound to backend 'implementation'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.fused(%x) {name = "my_group", mode = "fallback", graph.implementation = "no_such_kernel"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = graph.exp %a : tensor<4xf32>
    graph.yield %1 : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}
