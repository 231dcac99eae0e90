// A fallback group (`fuse{mode=fallback}`) runs compiled, op by op: each of its ops becomes a
// one-op group `<group>.<op>_<n>` on the first backend accepting it (cost search: its cheapest),
// so a matmul lands on cpu (or blas), never on the reference for being in a fallback group.
// Ops of one fallback group are never merged into one kernel, with each other or with others.

// RUN: graph-opt %s --fuse=mode=fallback --partition | filecheck %s
// RUN: graph-opt %s --fuse=mode=fallback --partition=backends=blas,cpu | filecheck %s --check-prefix=BLAS
// RUN: graph-opt %s --fuse=mode=fallback --partition=search=cost | filecheck %s --check-prefix=COST
// RUN: graph-opt %S/../../../examples/mlp.mlir --fuse=mode=fallback --partition | filecheck %s --check-prefix=MLP

// examples/mlp.mlir: both matmuls on cpu, none of its steps on the reference.
// MLP-NOT:  backend = "reference"
// MLP:      {name = "fused_matmul_add_relu_0.matmul_0", mode = "compile", backend = "cpu"}
// MLP-NOT:  backend = "reference"
// MLP:      {name = "fused_matmul_add_1.matmul_0", mode = "compile", backend = "cpu"}
// MLP-NOT:  backend = "reference"

// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {name = "fused_matmul_add_relu_0.matmul_0", mode = "compile", backend = "cpu"}
// CHECK-NEXT:    ^
// CHECK-NEXT:      graph.matmul
// CHECK-NEXT:      graph.yield
// CHECK:         %[[A:.*]] = graph.fused(%[[M]], %b) {name = "fused_matmul_add_relu_0.add_1", mode = "compile", backend = "cpu"}
// CHECK:         %[[R:.*]] = graph.fused(%[[A]]) {name = "fused_matmul_add_relu_0.relu_2", mode = "compile", backend = "cpu"}
// CHECK:         %[[S:.*]] = graph.fused(%[[R]]) {name = "softmax_0", mode = "compile", backend = "cpu"}
// CHECK:         func.return %[[S]]
// CHECK-NOT:     reference

// BLAS:          graph.fused(%x, %w) {name = "fused_matmul_add_relu_0.matmul_0", mode = "compile", backend = "blas"}
// BLAS:          graph.fused({{.*}}, %b) {name = "fused_matmul_add_relu_0.add_1", mode = "compile", backend = "cpu", graph.placement_reason = "blas: {{.*}}"}

// COST-COUNT-4:  graph.fused
// COST-NOT:      graph.fused
// COST-NOT:      reference
func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = graph.add %0, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %2 = graph.relu %1 : tensor<8x16xf32>
  %3 = graph.softmax %2 {axis = -1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %3 : tensor<8x16xf32>
}
