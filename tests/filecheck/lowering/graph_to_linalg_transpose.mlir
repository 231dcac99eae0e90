// convert-graph-to-linalg on the CPU schedule: an elementwise loop that reads a buffer's last
// dim along one of its own outer dims (NHWC to NCHW) runs in transposing tiles: the other dims,
// the last dim's blocks of 16, 8 or 4 columns, that dim, then the columns (`Kernel.transposing_tile`).
// It refuses where no dim lies between that dim and the last (NCHW to NHWC: the natural order
// already reads each line again at the next element), where no block size divides the last
// dim, and on the plain schedule.

// RUN: graph-opt %s --split-input-file --fuse -p convert-graph-to-linalg | filecheck %s
// RUN: graph-opt %s --split-input-file --fuse -p 'convert-graph-to-linalg{schedule=plain}' | filecheck %s --check-prefix=PLAIN

// NHWC [1, 8, 12, 16] to NCHW, times a per-channel scale: loops (n, h, w block, c, w in the block)
// over (1, 8, 3, 16, 4); the columns' extent (4) and the blocks' (3) give their bounds.
// CHECK-LABEL: func.func @fused_transpose_mul_0(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, ((d2 * 4) + d4), d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, 0, 0)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d1, ((d2 * 4) + d4))>]
// CHECK-SAME:    ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<3xi64>, memref<4xi64>, memref<1x8x12x16xf32>, memref<16x1x1xf32>)
// PLAIN-LABEL: func.func @fused_transpose_mul_0(
// PLAIN-NOT:     d4
// PLAIN:         func.return
func.func @main(%x: tensor<1x8x12x16xf32>, %s: tensor<16x1x1xf32>) -> tensor<1x16x8x12xf32> {
  %0 = graph.transpose %x {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x8x12x16xf32>) -> tensor<1x16x8x12xf32>
  %1 = graph.mul %0, %s : (tensor<1x16x8x12xf32>, tensor<16x1x1xf32>) -> tensor<1x16x8x12xf32>
  func.return %1 : tensor<1x16x8x12xf32>
}

// -----

// NCHW to NHWC: x's last dim (w) is read along the loop's w, next to its last (c): plain loops.
// CHECK-LABEL: func.func @transpose_0(
// CHECK-NOT:     d4
// CHECK:         func.return
func.func @main(%x: tensor<1x16x8x12xf32>) -> tensor<1x8x12x16xf32> {
  %0 = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x16x8x12xf32>) -> tensor<1x8x12x16xf32>
  func.return %0 : tensor<1x8x12x16xf32>
}

// -----

// Rows of 7: no block of 16, 8 or 4 columns divides them: plain loops.
// CHECK-LABEL: func.func @transpose_0(
// CHECK-NOT:     d4
// CHECK:         func.return
func.func @main(%x: tensor<1x7x7x32xf32>) -> tensor<1x32x7x7xf32> {
  %0 = graph.transpose %x {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x7x7x32xf32>) -> tensor<1x32x7x7xf32>
  func.return %0 : tensor<1x32x7x7xf32>
}
