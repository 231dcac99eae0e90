// Diamonds fuse only when every path between their ends stays inside the group.

// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s

// Both branches reconverge: the whole diamond is one group.
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    graph.fused(%x) {name = "fused_exp_neg_abs_add_0", mode = "compile"}
// CHECK-NOT:     graph.fused
func.func @diamond(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.exp %x : tensor<8xf32>
  %1 = graph.neg %0 : tensor<8xf32>
  %2 = graph.abs %0 : tensor<8xf32>
  %3 = graph.add %1, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %3 : tensor<8xf32>
}

// -----

// One branch goes through a reduction, which nothing follows into a group: the fork stays
// outside, since a group {exp, add} would have a path leaving it and coming back.
// CHECK-LABEL: func.func @diamond_through_reduction
// CHECK-NEXT:    %[[E:.*]] = graph.exp %x
// CHECK-NEXT:    %[[R:.*]] = graph.fused(%[[E]]) {name = "fused_neg_reduce_sum_0", mode = "compile"}
// CHECK:         graph.add %[[E]], %[[R]]
func.func @diamond_through_reduction(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.exp %x : tensor<4x8xf32>
  %1 = graph.neg %0 : tensor<4x8xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %3 = graph.add %0, %2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// A value also returned from the function is not fused into one of its consumers
// (without multi-output), while the consumers still fuse with each other.
// CHECK-LABEL: func.func @multiple_consumers
// CHECK-NEXT:    %[[E:.*]] = graph.exp %x
// CHECK-NEXT:    graph.fused(%[[E]]) {name = "fused_neg_abs_add_0", mode = "compile"}
func.func @multiple_consumers(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = graph.exp %x : tensor<8xf32>
  %1 = graph.neg %0 : tensor<8xf32>
  %2 = graph.abs %0 : tensor<8xf32>
  %3 = graph.add %1, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %3, %0 : tensor<8xf32>, tensor<8xf32>
}
