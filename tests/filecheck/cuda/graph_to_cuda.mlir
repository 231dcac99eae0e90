// RUN: graph-opt %s --split-input-file -p convert-graph-to-cuda | filecheck %s

// Elementwise: one thread per element, a grid-stride loop; the scalar body is the linalg lowering's.
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @add_0(%0: memref<4x8xf32>, %1: memref<8xf32>, %2: memref<4x8xf32>) attributes {graph.work = {{[0-9]+}} : i64, cuda.kernel} {
// CHECK:         %[[DIM:.*]] = cuda.block_dim x
// CHECK:         %[[BID:.*]] = cuda.block_id x
// CHECK:         %[[TID:.*]] = cuda.thread_id x
// CHECK:         %[[FIRST:.*]] = arith.addi %{{.*}}, %[[TID]] : index
// CHECK:         %[[GRID:.*]] = cuda.grid_dim x
// CHECK:         %[[STRIDE:.*]] = arith.muli %[[GRID]], %[[DIM]] : index
// CHECK:         %[[COUNT:.*]] = arith.constant 32 : index
// CHECK:         scf.for %[[I:.*]] = %[[FIRST]] to %[[COUNT]] step %[[STRIDE]] {
// CHECK:           arith.addf
// CHECK:           memref.store
// CHECK-NOT:     cuda.barrier
// CHECK-LABEL: func.func @launch_add_0
// CHECK-NEXT:    cuda.launch @add_0 grid [1, 1, 1] block [256, 1, 1] (%0, %1, %2) : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>

// -----

// Softmax: a block per row; row statistics in shared memory; warp shuffles, then shared memory across warps.
func.func @main(%x: tensor<4x1000xf32>) -> tensor<4x1000xf32> {
  %0 = graph.softmax %x : (tensor<4x1000xf32>) -> tensor<4x1000xf32>
  func.return %0 : tensor<4x1000xf32>
}
// CHECK-LABEL: func.func @softmax_0
// CHECK:         %[[PARTIALS:.*]] = cuda.shared_alloc : memref<8xf32, 3 : i64>
// CHECK:         %[[TID:.*]] = cuda.thread_id x
// CHECK:         %[[ROW_MAX:.*]] = cuda.shared_alloc : memref<1xf32, 3 : i64>
// CHECK:         scf.if
// CHECK:         cuda.barrier
// CHECK:         scf.for %{{.*}} = %[[TID]] to %{{.*}} step %{{.*}} iter_args
// CHECK:           arith.maximumf
// CHECK:         cuda.shuffle_down %{{.*}}, %{{.*}} : f32
// CHECK:         memref.store %{{.*}}, %[[PARTIALS]]
// CHECK:         cuda.barrier
// CHECK:         math.exp
// CHECK-LABEL: func.func @launch_softmax_0
// CHECK-NEXT:    cuda.launch @softmax_0 grid [4, 1, 1] block [256, 1, 1]

// -----

// Matmul: 16x16 tiles of A and B in shared memory, a barrier after loading and after using them;
// the K step unrolled, its multiply-adds `contract` (FMAs). 40x20 outputs: one per thread.
func.func @main(%a: tensor<40x24xf32>, %b: tensor<24x20xf32>) -> tensor<40x20xf32> {
  %0 = graph.matmul %a, %b : (tensor<40x24xf32>, tensor<24x20xf32>) -> tensor<40x20xf32>
  func.return %0 : tensor<40x20xf32>
}
// CHECK-LABEL: func.func @matmul_0
// CHECK:         cuda.shared_alloc : memref<16x16xf32, 3 : i64>
// CHECK:         cuda.shared_alloc : memref<16x16xf32, 3 : i64>
// CHECK:         scf.for
// CHECK:           cuda.barrier
// CHECK-NOT:       scf.for
// CHECK:           arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT:      arith.addf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK:           cuda.barrier
// CHECK-NEXT:      scf.yield
// CHECK-LABEL: func.func @launch_matmul_0
// CHECK-NEXT:    cuda.launch @matmul_0 grid [2, 3, 1] block [16, 16, 1]

// -----

// Matmul with 2x2 outputs per thread: 40 x (2 x 4) blocks of 32x32 outputs reach two blocks per
// SM (64x64 tiles would be 40 x 2 blocks); A tiles 32x16 and B tiles 16x32; four accumulators.
func.func @main(%a: tensor<40x40x24xf32>, %b: tensor<24x100xf32>) -> tensor<40x40x100xf32> {
  %0 = graph.matmul %a, %b : (tensor<40x40x24xf32>, tensor<24x100xf32>) -> tensor<40x40x100xf32>
  func.return %0 : tensor<40x40x100xf32>
}
// CHECK-LABEL: func.func @matmul_0
// CHECK:         affine.apply affine_map<(d0, d1) -> (((d0 * 32) + d1))>
// CHECK:         affine.apply affine_map<(d0, d1) -> ((((d0 * 32) + d1) + 16))>
// CHECK:         cuda.shared_alloc : memref<32x16xf32, 3 : i64>
// CHECK:         cuda.shared_alloc : memref<16x32xf32, 3 : i64>
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32, f32, f32)
// CHECK-COUNT-4: memref.store {{.*}} : memref<40x40x100xf32>
// CHECK-LABEL: func.func @launch_matmul_0
// CHECK-NEXT:    cuda.launch @matmul_0 grid [4, 2, 40] block [16, 16, 1]
