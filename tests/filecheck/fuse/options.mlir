// Options of the fuse pass: max-ops, max-anchors, graph.no_fuse, mode=fallback, patterns.

// RUN: graph-opt %s --split-input-file -p 'fuse{max-ops=2}' | filecheck %s --check-prefix=MAXOPS
// RUN: graph-opt %s --split-input-file -p 'fuse{mode="fallback"}' | filecheck %s --check-prefix=FALLBACK
// RUN: graph-opt %s --split-input-file -p 'fuse{patterns="default"}' | filecheck %s --check-prefix=PATTERN
// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s --check-prefix=CATEGORY

// MAXOPS-LABEL: func.func @chain
// MAXOPS-NEXT:    graph.fused(%x) {name = "fused_neg_abs_0"
// MAXOPS:         graph.fused(%{{.*}}) {name = "fused_exp_relu_1"
// FALLBACK-LABEL: func.func @chain
// FALLBACK-NEXT:    graph.fused(%x) {name = "fused_neg_abs_exp_relu_0", mode = "fallback"}
func.func @chain(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x : tensor<8xf32>
  %1 = graph.abs %0 : tensor<8xf32>
  %2 = graph.exp %1 : tensor<8xf32>
  %3 = graph.relu %2 : tensor<8xf32>
  func.return %3 : tensor<8xf32>
}

// -----

// graph.no_fuse keeps an op alone; its neighbours still fuse among themselves.
// CATEGORY-LABEL: func.func @no_fuse
// CATEGORY-NEXT:    %[[G:.*]] = graph.fused(%x) {name = "fused_neg_abs_0"
// CATEGORY:         %[[K:.*]] = graph.exp %[[G]] {graph.no_fuse} : tensor<8xf32>
// CATEGORY-NEXT:    graph.fused(%[[K]]) {name = "fused_relu_sqrt_1"
func.func @no_fuse(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x : tensor<8xf32>
  %1 = graph.abs %0 : tensor<8xf32>
  %2 = graph.exp %1 {graph.no_fuse} : tensor<8xf32>
  %3 = graph.relu %2 : tensor<8xf32>
  %4 = graph.sqrt %3 : tensor<8xf32>
  func.return %4 : tensor<8xf32>
}

// -----

// A declared pattern (matmul -> add -> gelu) forms a closed group before the category
// rules run, so the following elementwise op is not added to it; without patterns the
// category rules take the whole epilogue.
// PATTERN-LABEL: func.func @pattern
// PATTERN-NEXT:    %[[G:.*]] = graph.fused(%x, %w, %b) {name = "fused_matmul_add_gelu_0"
// PATTERN:         graph.mul %[[G]], %[[G]]
// PATTERN-NEXT:    func.return
// CATEGORY-LABEL: func.func @pattern
// CATEGORY-NEXT:    graph.fused(%x, %w, %b) {name = "fused_matmul_add_gelu_mul_0"
func.func @pattern(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.gelu %1 : tensor<4x16xf32>
  %3 = graph.mul %2, %2 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %3 : tensor<4x16xf32>
}
