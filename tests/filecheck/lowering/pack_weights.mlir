// pack-weights: a kernel argument naming the b it packs (graph.pack_panels) gets b's packed
// panels as its constant value (graph.constant): 64-column panels, the last one zero-padded to
// 16 columns; other arguments and attributes are left as they are.

// RUN: graph-opt %s -p pack-weights | filecheck %s

// b is 2x3: one 16-column edge panel of 2 rows, 32 floats, b's rows first then zeros.
// CHECK-LABEL: func.func @matmul_0(
// CHECK-SAME:    %a: memref<4x2xf32>,
// CHECK-SAME:    %p: memref<32xf32> {graph.constant = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 0.000000e+00, {{.*}}, 4.000000e+00, 5.000000e+00, 6.000000e+00, 0.000000e+00{{.*}}> : tensor<32xf32>},
// CHECK-SAME:    %out: memref<4x3xf32>)
// CHECK-NOT:   graph.pack_panels
// CHECK-LABEL: func.func @plain_0(
// CHECK-SAME:    %c: memref<3xf32> {graph.constant = dense<1.000000e+00> : tensor<3xf32>}
func.func @matmul_0(%a: memref<4x2xf32>, %p: memref<32xf32> {graph.pack_panels = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>}, %out: memref<4x3xf32>) attributes {graph.kernel} {
  func.return
}
func.func @plain_0(%x: memref<3xf32>, %c: memref<3xf32> {graph.constant = dense<1.0> : tensor<3xf32>}, %out: memref<3xf32>) attributes {graph.kernel} {
  func.return
}
