// convert-graph-to-linalg: one kernel per group, on memrefs, in destination-passing style.

// RUN: graph-opt %s --split-input-file -p fuse,convert-graph-to-linalg | filecheck %s

// An elementwise chain is ONE linalg.generic; broadcasting is in the indexing maps.
// CHECK-LABEL: func.func @fused_add_relu_mul_0(%0: memref<4x8xf32>, %1: memref<8xf32>, %2: memref<4x1xf32>, %3: memref<4x8xf32>) attributes {graph.kernel} {
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0, %1, %2 : memref<4x8xf32>, memref<8xf32>, memref<4x1xf32>) outs(%3 : memref<4x8xf32>) {
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:           arith.mulf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// CHECK-NOT:   linalg.generic
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %0 = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.relu %0 : tensor<4x8xf32>
  %2 = graph.mul %1, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----

// Transpose is an indexing map; a float `ne` is unordered-or-not-equal.
// CHECK-LABEL: func.func @fused_transpose_cmp_0
// CHECK:         affine_map<(d0, d1) -> (d1, d0)>
// CHECK:         arith.cmpf une
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) -> tensor<3x2xi1> {
  %0 = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = graph.cmp %0, %y {predicate = "ne"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xi1>
  func.return %1 : tensor<3x2xi1>
}

// -----

// A reduction with its producer: fill, then one generic with a reduction iterator.
// CHECK-LABEL: func.func @fused_exp_reduce_sum_0(%0: memref<4x8xf32>, %1: memref<4xf32>)
// CHECK:         linalg.generic {{.*}} outs(%1 : memref<4xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : memref<4x8xf32>) outs(%1 : memref<4xf32>)
// CHECK:           math.exp
// CHECK:           arith.addf
func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4x8xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// Softmax keeps row statistics in row-sized buffers, never a whole-tensor intermediate.
// CHECK-LABEL: func.func @softmax_0
// CHECK-COUNT-2: memref.alloc() : memref<4xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         arith.divf
// CHECK:         memref.dealloc
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// Matmul: a contraction generic, then the epilogue in place on the output buffer.
// CHECK-LABEL: func.func @fused_matmul_add_relu_0(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<16xf32>, %3: memref<4x16xf32>)
// CHECK:         iterator_types = ["parallel", "parallel", "reduction"]} ins(%0, %1 : memref<4x8xf32>, memref<8x16xf32>) outs(%3 : memref<4x16xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%2 : memref<16xf32>) outs(%3 : memref<4x16xf32>)
// CHECK:           arith.addf
// CHECK:           arith.maximumf
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.relu %1 : tensor<4x16xf32>
  func.return %2 : tensor<4x16xf32>
}
