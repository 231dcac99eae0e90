// Operand prologue (XLA's operand fusion): a group of reshape, transpose and broadcast_to whose
// results are used only as operands of matmuls in one anchor group merges into that group, so
// the matmul reads them where they live: as b (attention's K, transposed to heads), or as a
// when a is a strided view with contiguous rows (Q's heads) and b is computed (the batched
// GEMM reads a through the view). Used elsewhere too, or as another a, it stays a group of
// its own (`explain` says why).

// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s
// RUN: graph-opt %s --split-input-file -p 'fuse{explain=true}' -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN

// Q's and K's reshapes and transposes join the scores matmul and its epilogue.
// CHECK-LABEL: func.func @attention_scores
// CHECK-NEXT:    graph.fused(%q, %k) {name = "fused_reshape_transpose_matmul_div_0", mode = "compile"}
// CHECK:           graph.reshape
// CHECK-NEXT:      graph.transpose
// CHECK-NEXT:      graph.reshape
// CHECK-NEXT:      graph.transpose
// CHECK-NEXT:      graph.matmul
// CHECK-NEXT:      graph.constant
// CHECK-NEXT:      graph.div
// CHECK-NEXT:      graph.yield
// EXPLAIN-NOT: fuse: @attention_scores
func.func @attention_scores(%q: tensor<16x32xf32>, %k: tensor<16x32xf32>) -> tensor<4x16x16xf32> {
  %0 = graph.reshape %q : (tensor<16x32xf32>) -> tensor<16x4x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<16x4x8xf32>) -> tensor<4x16x8xf32>
  %2 = graph.reshape %k : (tensor<16x32xf32>) -> tensor<16x4x8xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 2, 0>} : (tensor<16x4x8xf32>) -> tensor<4x8x16xf32>
  %4 = graph.matmul %1, %3 : (tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
  %s = graph.constant dense<0.35> : tensor<f32>
  %5 = graph.div %4, %s : (tensor<4x16x16xf32>, tensor<f32>) -> tensor<4x16x16xf32>
  func.return %5 : tensor<4x16x16xf32>
}

// -----

// The transpose is also returned: it stays alone, and the matmul reads its result.
// CHECK-LABEL: func.func @transpose_used_elsewhere
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %k
// CHECK-NEXT:    graph.matmul %x, %[[T]]
// CHECK-NEXT:    func.return
// EXPLAIN:     fuse: @transpose_used_elsewhere: graph.transpose#0 -> graph.matmul#1: injective into anchor
// EXPLAIN-NOT: fuse: @transpose_used_elsewhere
func.func @transpose_used_elsewhere(%x: tensor<4x8xf32>, %k: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<8x16xf32>) {
  %0 = graph.transpose %k {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %1 = graph.matmul %x, %0 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %1, %0 : tensor<4x16xf32>, tensor<8x16xf32>
}

// -----

// A prologue of any other op (here a slice) stays alone.
// CHECK-LABEL: func.func @slice_is_no_prologue
// CHECK-NEXT:    %[[S:.*]] = graph.slice %k
// CHECK-NEXT:    graph.matmul %x, %[[S]]
func.func @slice_is_no_prologue(%x: tensor<4x8xf32>, %k: tensor<9x16xf32>) -> tensor<4x16xf32> {
  %0 = graph.slice %k {starts = array<i64: 0, 0>, ends = array<i64: 8, 16>, steps = array<i64: 1, 1>} : (tensor<9x16xf32>) -> tensor<8x16xf32>
  %1 = graph.matmul %x, %0 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %1 : tensor<4x16xf32>
}

// -----

// Operand a of a matmul whose b is a constant stays alone (the packed GEMM of a constant b
// would copy it).
// CHECK-LABEL: func.func @a_with_constant_b
// CHECK:         %[[Q:.*]] = graph.fused(%q) {name = "fused_reshape_transpose_0", mode = "compile"}
// CHECK:         graph.matmul %[[Q]], %w
// EXPLAIN:     fuse: @a_with_constant_b: graph.transpose#2 -> graph.matmul#3: injective into anchor
func.func @a_with_constant_b(%q: tensor<16x32xf32>) -> tensor<4x16x8xf32> {
  %w = graph.constant dense<0.5> : tensor<4x8x8xf32>
  %0 = graph.reshape %q : (tensor<16x32xf32>) -> tensor<16x4x8xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<16x4x8xf32>) -> tensor<4x16x8xf32>
  %2 = graph.matmul %1, %w : (tensor<4x16x8xf32>, tensor<4x8x8xf32>) -> tensor<4x16x8xf32>
  func.return %2 : tensor<4x16x8xf32>
}

// -----

// An a whose rows are not contiguous in its buffer (q's last two dims swapped) stays alone.
// CHECK-LABEL: func.func @a_rows_strided
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %q
// CHECK-NEXT:    graph.matmul %[[T]], %k
// EXPLAIN:     fuse: @a_rows_strided: graph.transpose#0 -> graph.matmul#1: injective into anchor
func.func @a_rows_strided(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>) -> tensor<4x16x16xf32> {
  %0 = graph.transpose %q {perm = array<i64: 0, 2, 1>} : (tensor<4x8x16xf32>) -> tensor<4x16x8xf32>
  %1 = graph.matmul %0, %k : (tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
  func.return %1 : tensor<4x16x16xf32>
}
