// The generic form of graph ops parses (the contract's guarantee) and prints in custom form.

// RUN: graph-opt %s | filecheck %s

"func.func"() <{sym_name = "main", function_type = (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<3x2xf32>, tensor<2x3xi1>)}> ({
^bb0(%0: tensor<2x3xf32>, %1: tensor<3xf32>):
  %2 = "graph.transpose"(%0) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %3 = "graph.softmax"(%2) : (tensor<3x2xf32>) -> tensor<3x2xf32>
  %4 = "graph.cmp"(%0, %1) {predicate = "ge"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %5:2 = "graph.fused"(%3, %4) ({
  ^bb0(%6: tensor<3x2xf32>, %7: tensor<2x3xi1>):
    %8 = "graph.relu"(%6) : (tensor<3x2xf32>) -> tensor<3x2xf32>
    "graph.yield"(%8, %7) : (tensor<3x2xf32>, tensor<2x3xi1>) -> ()
  }) {name = "group"} : (tensor<3x2xf32>, tensor<2x3xi1>) -> (tensor<3x2xf32>, tensor<2x3xi1>)
  "func.return"(%5#0, %5#1) : (tensor<3x2xf32>, tensor<2x3xi1>) -> ()
}) : () -> ()

// CHECK:      func.func @main(%0: tensor<2x3xf32>, %1: tensor<3xf32>) -> (tensor<3x2xf32>, tensor<2x3xi1>) {
// CHECK-NEXT:   %2 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:   %3 = graph.softmax %2 : (tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:   %4 = graph.cmp %0, %1 {predicate = "ge"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:   %5, %6 = graph.fused(%3, %4) {name = "group"} : (tensor<3x2xf32>, tensor<2x3xi1>) -> (tensor<3x2xf32>, tensor<2x3xi1>) {
// CHECK-NEXT:   ^bb0(%7: tensor<3x2xf32>, %8: tensor<2x3xi1>):
// CHECK-NEXT:     %9 = graph.relu %7 : tensor<3x2xf32>
// CHECK-NEXT:     graph.yield %9, %8 : tensor<3x2xf32>, tensor<2x3xi1>
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return %5, %6 : tensor<3x2xf32>, tensor<2x3xi1>
