// multi-output: a group may yield intermediates used outside it, and sibling consumers of
// one value fuse.

// RUN: graph-opt %s --split-input-file -p 'fuse{multi-output=true}' | filecheck %s
// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s --check-prefix=SINGLE

// The exp is returned and also feeds the chain: one group yields both.
// CHECK-LABEL: func.func @intermediate_used_outside
// CHECK-NEXT:    %[[G0:.*]], %[[G1:.*]] = graph.fused(%x) {name = "fused_exp_neg_abs_0", mode = "compile"}
// CHECK-SAME:      -> (tensor<8xf32>, tensor<8xf32>)
// CHECK:           graph.yield %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>
// CHECK:         func.return %[[G1]], %[[G0]]
// SINGLE-LABEL: func.func @intermediate_used_outside
// SINGLE-NEXT:    graph.exp %x
// SINGLE-NEXT:    graph.fused
func.func @intermediate_used_outside(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = graph.exp %x : tensor<8xf32>
  %1 = graph.neg %0 : tensor<8xf32>
  %2 = graph.abs %1 : tensor<8xf32>
  func.return %2, %0 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Two independent consumers of %x are siblings: they fuse and read %x once.
// CHECK-LABEL: func.func @siblings
// CHECK-NEXT:    %[[G0:.*]], %[[G1:.*]] = graph.fused(%x) {name = "fused_neg_abs_0", mode = "compile"}
// CHECK:         func.return %[[G0]], %[[G1]]
// SINGLE-LABEL: func.func @siblings
// SINGLE-NOT:     graph.fused
func.func @siblings(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = graph.neg %x : tensor<8xf32>
  %1 = graph.abs %x : tensor<8xf32>
  func.return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Multi-output never makes a cycle: {neg, add} would have a path out through the
// reduction and back, so the neg's group does not take the add.
// CHECK-LABEL: func.func @no_cycle
// CHECK:         %[[N0:.*]], %[[N1:.*]] = graph.fused(%x) {name = "fused_neg_reduce_sum_0"
// CHECK:         graph.add %[[N0]], %[[N1]]
func.func @no_cycle(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.neg %x : tensor<4x8xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %2 = graph.add %0, %1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}
