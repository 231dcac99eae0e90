// Output view: reshapes and transposes that take a matmul's result (b computed) into a strided
// view of their own result with contiguous rows join the matmul's group, which the batched GEMM
// writes through the view (attention's head merge after P @ V). Nothing joins after the view;
// a transpose that moves the columns of the matmul's rows stays alone.

// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s
// RUN: graph-opt %s --split-input-file -p 'fuse{explain=true}' -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN

// V's heads (operand b), P @ V and the head merge are one group; the O projection is not.
// CHECK-LABEL: func.func @head_merge
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%v, %p) {name = "fused_reshape_transpose_matmul_0", mode = "compile"}
// CHECK:           graph.matmul
// CHECK-NEXT:      graph.transpose
// CHECK-NEXT:      graph.reshape
// CHECK-NEXT:      graph.yield
// CHECK:         graph.matmul %[[M]], %w
// EXPLAIN:     fuse: @head_merge: graph.reshape#4 -> graph.matmul#5: anchor into anchor
// EXPLAIN-NOT: fuse: @head_merge
func.func @head_merge(%p: tensor<4x16x16xf32>, %v: tensor<16x32xf32>, %w: tensor<32x32xf32>) -> tensor<16x32xf32> {
  %0 = graph.reshape %v : (tensor<16x32xf32>) -> tensor<16x4x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<16x4x8xf32>) -> tensor<4x16x8xf32>
  %2 = graph.matmul %p, %1 : (tensor<4x16x16xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0, 2>} : (tensor<4x16x8xf32>) -> tensor<16x4x8xf32>
  %4 = graph.reshape %3 : (tensor<16x4x8xf32>) -> tensor<16x32xf32>
  %5 = graph.matmul %4, %w : (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  func.return %5 : tensor<16x32xf32>
}

// -----

// An elementwise consumer of the view stays out of the group.
// CHECK-LABEL: func.func @view_then_add
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%p, %v) {name = "fused_matmul_transpose_reshape_0", mode = "compile"}
// CHECK:         graph.add %[[M]], %r
// EXPLAIN:     fuse: @view_then_add: graph.reshape#2 -> graph.add#3: an output view ends its group
func.func @view_then_add(%p: tensor<4x16x16xf32>, %v: tensor<4x16x8xf32>, %r: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %0 = graph.matmul %p, %v : (tensor<4x16x16xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<4x16x8xf32>) -> tensor<16x4x8xf32>
  %2 = graph.reshape %1 : (tensor<16x4x8xf32>) -> tensor<16x32xf32>
  %3 = graph.add %2, %r : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  func.return %3 : tensor<16x32xf32>
}

// -----

// A transpose of the last two dims is no view with contiguous rows: it stays alone.
// CHECK-LABEL: func.func @columns_moved
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %p, %v
// CHECK-NEXT:    graph.transpose %[[M]]
// EXPLAIN:     fuse: @columns_moved: graph.matmul#0 -> graph.transpose#1: anchor into injective
func.func @columns_moved(%p: tensor<4x16x16xf32>, %v: tensor<4x16x8xf32>) -> tensor<4x8x16xf32> {
  %0 = graph.matmul %p, %v : (tensor<4x16x16xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 0, 2, 1>} : (tensor<4x16x8xf32>) -> tensor<4x8x16xf32>
  func.return %1 : tensor<4x8x16xf32>
}

// -----

// The head merge after a matmul whose b is a constant stays alone.
// CHECK-LABEL: func.func @view_with_constant_b
// CHECK-NEXT:    graph.constant
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %p, %w
// CHECK-NEXT:    graph.fused(%[[M]]) {name = "fused_transpose_reshape_0", mode = "compile"}
// EXPLAIN:     fuse: @view_with_constant_b: graph.matmul#1 -> graph.transpose#2: anchor into injective
func.func @view_with_constant_b(%p: tensor<4x16x16xf32>) -> tensor<16x32xf32> {
  %w = graph.constant dense<0.5> : tensor<4x16x8xf32>
  %0 = graph.matmul %p, %w : (tensor<4x16x16xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<4x16x8xf32>) -> tensor<16x4x8xf32>
  %2 = graph.reshape %1 : (tensor<16x4x8xf32>) -> tensor<16x32xf32>
  func.return %2 : tensor<16x32xf32>
}
