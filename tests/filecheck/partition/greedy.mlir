// Greedy partitioning: every group goes to the first backend (in priority order) that
// accepts it whole, unless an earlier backend accepts some of its ops alone: then it is split;
// an op left alone by fusion becomes a one-op group; groups keep their names.

// RUN: graph-opt %s --split-input-file --fuse --partition | filecheck %s
// RUN: graph-opt %s --split-input-file -p 'fuse,partition{backends="blas,cpu"}' | filecheck %s --check-prefix=BLAS
// RUN: graph-opt %s --split-input-file -p 'partition{backends="cpu"}' | filecheck %s --check-prefix=UNFUSED

// CHECK-LABEL: func.func @mlp
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%x, %w, %b) {name = "fused_matmul_add_relu_0", mode = "compile", backend = "cpu"}
// CHECK:         %[[S:.*]] = graph.fused(%[[G]]) {name = "softmax_0", mode = "compile", backend = "cpu"} : (tensor<4x16xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: tensor<4x16xf32>):
// CHECK-NEXT:      %[[R:.*]] = graph.softmax %[[A]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:      graph.yield %[[R]] : tensor<4x16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[S]]

// blas first: it claims the matmul of the fused group, which is split; the epilogue and the
// softmax, which blas refuses, go to cpu.
// BLAS-LABEL: func.func @mlp
// BLAS-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "blas"}
// BLAS:         %[[E:.*]] = graph.fused(%[[M]], %b) {name = "fused_add_relu_0", mode = "compile", backend = "cpu", graph.placement_reason = "blas: a blas group holds exactly one matmul or conv2d, this one holds 0"}
// BLAS:         graph.fused(%[[E]]) {name = "softmax_1", mode = "compile", backend = "cpu", graph.placement_reason = "blas: a blas group holds exactly one matmul or conv2d, this one holds 0"}

// Without fusion every op is its own group, named as graphopt.compile names single-op kernels.
// UNFUSED-LABEL: func.func @mlp
// UNFUSED-NEXT:    graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "cpu"}
// UNFUSED:         graph.fused(%{{.*}}, %b) {name = "add_1", mode = "compile", backend = "cpu"}
// UNFUSED:         graph.fused(%{{.*}}) {name = "relu_2", mode = "compile", backend = "cpu"}
// UNFUSED:         graph.fused(%{{.*}}) {name = "softmax_3", mode = "compile", backend = "cpu"}
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.relu %1 : tensor<4x16xf32>
  %3 = graph.softmax %2 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %3 : tensor<4x16xf32>
}

// -----

// Constants of the function stay data: an op left alone that reads one gets it as an input.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT:    %[[C:.*]] = graph.constant
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%x, %[[C]]) {name = "mul_0", mode = "compile", backend = "cpu"}
// CHECK:         graph.fused(%[[M]]) {name = "exp_1", mode = "compile", backend = "cpu"}
func.func @constants(%x: tensor<4x80xf32>) -> tensor<4x80xf32> {
  %c = graph.constant dense<1.5> : tensor<80xf32>
  %0 = graph.mul %x, %c {graph.no_fuse} : (tensor<4x80xf32>, tensor<80xf32>) -> tensor<4x80xf32>
  %1 = graph.exp %0 : tensor<4x80xf32>
  func.return %1 : tensor<4x80xf32>
}
