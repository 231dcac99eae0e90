// split-rows on kernels of one row: a dense layer at batch 1 (the packed GEMM on one row of a)
// runs by chunks of out's columns, each starting at a panel of b, and reads all of a; where b's
// last panel is padded, the last chunk (`_last`) takes the rest of b and out. A kernel whose
// loop nests cannot split by d0 (one image) splits by each nest's first loop of more than one
// iteration.

// RUN: graph-opt %s --split-input-file --canonicalize --fuse --lower-to-linalg | graph-opt --split-input-file -p 'split-rows{threads=2 min-work=0}' | filecheck %s

// 250 columns of 3 floats of b each: 128 (b's first 384 floats), then 122 of the padded 256
// (its other 384 floats). Bytes per column: b 12, out 4; a whole.
// CHECK-LABEL: func.func @fused_matmul_relu_0(%0: memref<1x3xf32>, %1: memref<768xf32> {{.*}}, %2: memref<1x250xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_matmul_relu_0_rows128", 0 : i64], ["fused_matmul_relu_0_rows122_last", 128 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 12, 4>
// CHECK:       func.func @fused_matmul_relu_0_rows122_last(%0: memref<1x3xf32>, %1: memref<384xf32>, %2: memref<1x122xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_packed_1x3x122(%0, %1, %2)
// CHECK:       func.func @fused_matmul_relu_0_rows128(%0: memref<1x3xf32>, %1: memref<384xf32>, %2: memref<1x128xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_packed_1x3x128(%0, %1, %2)
func.func @main(%x: tensor<1x3xf32>) -> tensor<1x250xf32> {
  %w = graph.constant dense<0.5> : tensor<3x250xf32>
  %0 = graph.matmul %x, %w : (tensor<1x3xf32>, tensor<3x250xf32>) -> tensor<1x250xf32>
  %1 = graph.relu %0 : tensor<1x250xf32>
  func.return %1 : tensor<1x250xf32>
}

// -----

// AlexNet's local response normalization: a [24, 24] times x as [1, 24, 63], reshaped back.
// Canonicalized, the GEMM's out is [24, 63], which the reshape's nest reads at (d0 * 24 + d1)
// with d0 iterating once: the split by d0 fails, the split by d1 (a's rows and out's channels)
// does not; b, packed at run time from x, is packed whole in each chunk.
// CHECK-LABEL: func.func @fused_reshape_matmul_0(%0: memref<1x24x7x9xf32>, %1: memref<24x24xf32>, %2: memref<1x24x7x9xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_reshape_matmul_0_rows12", 0 : i64], ["fused_reshape_matmul_0_rows12", 12 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 96, 252>
// CHECK:       func.func @fused_reshape_matmul_0_rows12(%0: memref<1x24x7x9xf32>, %1: memref<12x24xf32>, %2: memref<1x12x7x9xf32>)
// CHECK:         func.call @graphopt_sgemm_packed_12x24x63(%1, %{{.*}}, %{{.*}}) : (memref<12x24xf32>, memref<1536xf32>, memref<12x63xf32>) -> ()
func.func @main(%x: tensor<1x24x7x9xf32>, %a: tensor<24x24xf32>) -> tensor<1x24x7x9xf32> {
  %0 = graph.reshape %x {shape = array<i64: 1, 24, 63>} : (tensor<1x24x7x9xf32>) -> tensor<1x24x63xf32>
  %1 = graph.matmul %a, %0 : (tensor<24x24xf32>, tensor<1x24x63xf32>) -> tensor<1x24x63xf32>
  %2 = graph.reshape %1 {shape = array<i64: 1, 24, 7, 9>} : (tensor<1x24x63xf32>) -> tensor<1x24x7x9xf32>
  func.return %2 : tensor<1x24x7x9xf32>
}
