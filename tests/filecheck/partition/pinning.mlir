// `graph.backend` on an op pins it: the op runs on that backend, whatever the priorities.

// RUN: graph-opt %s --split-input-file --fuse --partition | filecheck %s
// RUN: graph-opt %s --split-input-file --fuse -p 'partition{search="cost"}' | filecheck %s --check-prefix=COST

// A lone op pinned to blas, a group holding an op pinned to blas: blas claims that op, and the
// rest of the group goes to the first backend accepting it.
// CHECK-LABEL: func.func @pinned
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "blas"}
// CHECK-NEXT:    ^
// CHECK-NEXT:      graph.matmul %{{.*}}, %{{.*}} {graph.backend = "blas", graph.no_fuse}
// CHECK:         %[[N:.*]] = graph.fused(%[[M]], %w) {name = "matmul_1", mode = "compile", backend = "blas"}
// CHECK:         graph.fused(%[[N]], %b) {name = "add_2", mode = "compile", backend = "cpu"}
// COST-LABEL: func.func @pinned
// COST-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {{.*}}backend = "blas"}
// COST:         graph.matmul %{{.*}}, %{{.*}} {graph.backend = "blas", graph.no_fuse}
// COST:         func.return
func.func @pinned(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<8x8xf32> {
  %0 = graph.matmul %x, %w {graph.backend = "blas", graph.no_fuse} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = graph.matmul %0, %w {graph.backend = "blas"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = graph.add %1, %b : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  func.return %2 : tensor<8x8xf32>
}

// -----

// A group goes whole where its pins agree; pins that disagree split it.
// CHECK-LABEL: func.func @split_by_pins
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%x, %w) {name = "fused_matmul_relu_0", mode = "compile", backend = "cpu"}
// CHECK:         graph.fused(%[[G]]) {name = "add_0", mode = "compile", backend = "reference"}
// CHECK-NEXT:    ^
// CHECK-NEXT:      graph.add {{.*}} {graph.backend = "reference"}
// COST-LABEL: func.func @split_by_pins
// COST-NEXT:    graph.fused(%x, %w) {name = "fused_matmul_relu_0", mode = "compile", backend = "cpu"}
// COST:         graph.fused(%{{.*}}) {name = "add_0", mode = "compile", backend = "reference"}
func.func @split_by_pins(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = graph.matmul %x, %w {graph.backend = "cpu"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = graph.relu %0 : tensor<8x8xf32>
  %2 = graph.add %1, %1 {graph.backend = "reference"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %2 : tensor<8x8xf32>
}
