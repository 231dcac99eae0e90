// Cheap producers (small or splat constants, broadcast_to) are cloned into every group that
// uses them, so they never block fusion; expensive ones never are.

// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s
// RUN: graph-opt %s --split-input-file -p 'fuse{duplicate=false}' | filecheck %s --check-prefix=NODUP

// XLA's const+add+sub case: the constant is used inside and outside the add group; it is
// cloned into the group and stays for its outside user.
// CHECK-LABEL: func.func @const_add_sub
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<2.000000e+00>
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%p) {name = "fused_add_sub_0", mode = "compile"}
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[C2:.*]] = graph.constant dense<2.000000e+00>
// CHECK-NEXT:      %[[S:.*]] = graph.add %[[C2]], %[[A]]
// CHECK-NEXT:      graph.sub %[[S]], %[[C2]]
// CHECK:         func.return %[[G]], %[[C]]
// NODUP-LABEL: func.func @const_add_sub
// NODUP-NEXT:    %[[C:.*]] = graph.constant dense<2.000000e+00>
// NODUP-NEXT:    graph.fused(%[[C]], %p) {name = "fused_add_sub_0", mode = "compile"}
func.func @const_add_sub(%p: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = graph.constant dense<2.0> : tensor<4xf32>
  %0 = graph.add %c, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = graph.sub %0, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %1, %c : tensor<4xf32>, tensor<4xf32>
}

// -----

// A broadcast feeding two groups that cannot merge is cloned into both and then erased.
// CHECK-LABEL: func.func @broadcast_into_two_groups
// CHECK-NOT:     graph.broadcast_to %b
// CHECK:         graph.fused(%b, %x) {name = "fused_add_neg_softmax_0"
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      graph.broadcast_to
// CHECK:         graph.fused(%b, {{.*}}) {name = "fused_mul_abs_1"
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      graph.broadcast_to
// CHECK-NOT:     graph.broadcast_to
// CHECK:         func.return
// NODUP-LABEL: func.func @broadcast_into_two_groups
// NODUP-NEXT:    graph.broadcast_to %b
func.func @broadcast_into_two_groups(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = graph.broadcast_to %b : (tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.add %x, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = graph.neg %1 : tensor<4x8xf32>
  %3 = graph.softmax %2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = graph.mul %3, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = graph.abs %4 : tensor<4x8xf32>
  func.return %5 : tensor<4x8xf32>
}

// -----

// A large non-splat constant (a weight) is not duplicated: it stays outside as an input.
// CHECK-LABEL: func.func @weights_stay_outside
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<{{\[\[}}
// CHECK-NEXT:    graph.fused(%x, %[[W]]) {name = "fused_matmul_relu_0"
func.func @weights_stay_outside(%x: tensor<2x9xf32>) -> tensor<2x9xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0]]> : tensor<9x9xf32>
  %0 = graph.matmul %x, %w : (tensor<2x9xf32>, tensor<9x9xf32>) -> tensor<2x9xf32>
  %1 = graph.relu %0 : tensor<2x9xf32>
  func.return %1 : tensor<2x9xf32>
}
