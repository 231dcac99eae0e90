// RUN: graph-opt %s | filecheck %s
// RUN: graph-opt %s --print-op-generic | graph-opt - | filecheck %s

// Every cuda op in its custom syntax survives printing, and the generic form parses back.
func.func @kernel(%x: memref<1024xf32>, %out: memref<1024xf32>) attributes {cuda.kernel} {
  %tid = cuda.thread_id x
  %bid = cuda.block_id y
  %dim = cuda.block_dim z
  %grid = cuda.grid_dim x
  %tile = cuda.shared_alloc : memref<16x16xf32, 3>
  %offset = arith.constant 16 : i32
  %v = memref.load %x[%tid] : memref<1024xf32>
  %s = cuda.shuffle_down %v, %offset : f32
  cuda.barrier
  func.return
}
func.func @launch_kernel(%x: memref<1024xf32>, %out: memref<1024xf32>) {
  cuda.launch @kernel grid [4, 1, 1] block [256, 1, 1] (%x, %out) : memref<1024xf32>, memref<1024xf32>
  func.return
}

// CHECK-LABEL: func.func @kernel(%x: memref<1024xf32>, %out: memref<1024xf32>) attributes {cuda.kernel} {
// CHECK-NEXT:    %tid = cuda.thread_id x
// CHECK-NEXT:    %bid = cuda.block_id y
// CHECK-NEXT:    %dim = cuda.block_dim z
// CHECK-NEXT:    %grid = cuda.grid_dim x
// CHECK-NEXT:    %tile = cuda.shared_alloc : memref<16x16xf32, 3 : i64>
// CHECK:         %s = cuda.shuffle_down %v, %offset : f32
// CHECK-NEXT:    cuda.barrier
// CHECK-LABEL: func.func @launch_kernel
// CHECK-NEXT:    cuda.launch @kernel grid [4, 1, 1] block [256, 1, 1] (%x, %out) : memref<1024xf32>, memref<1024xf32>
