// A matmul whose b is an f32 constant calls the packed GEMM ukernel on b's panels (packed at
// compile time, by pack-weights), and the module declares the ukernel; other matmuls stay
// linalg loops or pack b at run time (the last test). The lowering alone names b in the panel argument; pack-weights packs it.

// RUN: graph-opt %s --split-input-file --fuse -p convert-graph-to-linalg,pack-weights | filecheck %s
// RUN: graph-opt %s --split-input-file --fuse -p convert-graph-to-linalg | filecheck %s --check-prefix=UNPACKED

// UNPACKED-LABEL: func.func @fused_matmul_add_relu_0(%0: memref<2x3xf32>, %1: memref<70xf32>, %2: memref<240xf32> {graph.pack_panels = dense<5.000000e-01> : tensor<3x70xf32>}, %3: memref<2x70xf32>)

// b (3x70, a constant fusion copies into the group) packs into one 64-column panel and one
// 16-column edge panel: 3 x 80 floats, a constant argument after the inputs.
// CHECK-LABEL: func.func @fused_matmul_add_relu_0(%0: memref<2x3xf32>, %1: memref<70xf32>, %2: memref<240xf32> {graph.constant = dense<{{.*}}> : tensor<240xf32>}, %3: memref<2x70xf32>) attributes {graph.kernel, graph.work = {{[0-9]+}} : i64} {
// CHECK-NEXT:    func.call @graphopt_sgemm_packed_2x3x70(%0, %2, %3) : (memref<2x3xf32>, memref<240xf32>, memref<2x70xf32>) -> ()
// CHECK-NEXT:    linalg.generic
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:         func.return
// CHECK:       func.func private @graphopt_sgemm_packed_2x3x70(memref<2x3xf32>, memref<240xf32>, memref<2x70xf32>) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<2x3xf32>, %bias: tensor<70xf32>) -> tensor<2x70xf32> {
  %w = graph.constant dense<0.5> : tensor<3x70xf32>
  %0 = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x70xf32>) -> tensor<2x70xf32>
  %1 = graph.add %0, %bias : (tensor<2x70xf32>, tensor<70xf32>) -> tensor<2x70xf32>
  %2 = graph.relu %1 : tensor<2x70xf32>
  func.return %2 : tensor<2x70xf32>
}

// -----

// a's leading dims are rows of the ukernel: 2 x 4 rows. A constant outside the group: the
// kernel still takes b (unused) where the op does, then its panels, then the output.
// CHECK-LABEL: func.func @matmul_0(%0: memref<2x4x2xf32>, %1: memref<2x3xf32>, %2: memref<32xf32> {graph.constant = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 0.000000e+00{{.*}}> : tensor<32xf32>}, %3: memref<2x4x3xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_packed_2x4x2x3(%0, %{{.*}}, %{{.*}}) : (memref<2x4x2xf32>, memref<32xf32>, memref<2x4x3xf32>) -> ()
func.func @main(%x: tensor<2x4x2xf32>) -> tensor<2x4x3xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0 = graph.matmul %x, %w : (tensor<2x4x2xf32>, tensor<2x3xf32>) -> tensor<2x4x3xf32>
  func.return %0 : tensor<2x4x3xf32>
}

// -----

// Not packed at compile time: b known only at run time, or not f32, or with batch dims; these
// have fewer rows than a register tile, so they keep the loop nest too (next test).
// CHECK-LABEL: func.func @matmul_0
// CHECK-NOT:     func.call
// CHECK:         linalg.generic
// CHECK-LABEL: func.func @matmul_1
// CHECK-NOT:     func.call
// CHECK:         linalg.generic
// CHECK-LABEL: func.func @matmul_2
// CHECK-NOT:     func.call
// CHECK:         linalg.generic
// CHECK-NOT:   graph.ukernel
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %y: tensor<4x8xf64>, %z: tensor<2x4x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf64>, tensor<2x4x16xf32>) {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %wd = graph.constant dense<1.0> : tensor<8x16xf64>
  %1 = graph.matmul %y, %wd : (tensor<4x8xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>
  %wb = graph.constant dense<1.0> : tensor<2x8x16xf32>
  %2 = graph.matmul %z, %wb : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  func.return %0, %1, %2 : tensor<4x16xf32>, tensor<4x16xf64>, tensor<2x4x16xf32>
}

// -----

// b computed in the group (K [70, 32] reshaped and transposed to 2 heads, as attention's K^T):
// packed at run time, one run of 1280 floats per head, by loop nests that read K where it
// lives: the full panels (one of 64 columns with AVX-512, four of 16 on other hosts:
// packed_gemm.PANEL), the edge panel's 6 columns of b, and its 10 columns of zeros; then
// the batched GEMM ukernel.
// CHECK-LABEL: func.func @fused_reshape_transpose_matmul_0(%0: memref<70x32xf32>, %1: memref<2x6x16xf32>, %2: memref<2x6x70xf32>)
// CHECK:         %[[P:.*]] = memref.alloc() : memref<2x1280xf32>
// CHECK:         linalg.generic {{.*}} affine_map<(d0, d1, d2, d3) -> (((d1 * [[PANEL:64|16]]) + d3), ((d0 * 16) + d2))>, affine_map<(d0, d1, d2, d3) -> (d0, (((d1 * {{1024|256}}) + (d2 * [[PANEL]])) + d3))>]
// CHECK-SAME:      outs(%[[P]] : memref<2x1280xf32>)
// CHECK:         linalg.generic {{.*}} affine_map<(d0, d1, d2) -> ((d2 + 64), ((d0 * 16) + d1))>, affine_map<(d0, d1, d2) -> (d0, (((d1 * 16) + d2) + 1024))>]
// CHECK:         linalg.generic {{.*}} affine_map<(d0, d1, d2) -> (d0, (((d1 * 16) + d2) + 1030))>]
// CHECK:         func.call @graphopt_sgemm_batched_2x6x16_2x6x70(%1, %[[P]], %2) : (memref<2x6x16xf32>, memref<2x1280xf32>, memref<2x6x70xf32>) -> ()
// CHECK-NOT:     linalg.generic
// CHECK:       func.func private @graphopt_sgemm_batched_2x6x16_2x6x70(memref<2x6x16xf32>, memref<2x1280xf32>, memref<2x6x70xf32>) -> () attributes {graph.ukernel}
func.func @main(%q: tensor<2x6x16xf32>, %k: tensor<70x32xf32>) -> tensor<2x6x70xf32> {
  %0 = graph.reshape %k : (tensor<70x32xf32>) -> tensor<70x2x16xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 2, 0>} : (tensor<70x2x16xf32>) -> tensor<2x16x70xf32>
  %2 = graph.matmul %q, %1 : (tensor<2x6x16xf32>, tensor<2x16x70xf32>) -> tensor<2x6x70xf32>
  func.return %2 : tensor<2x6x70xf32>
}
