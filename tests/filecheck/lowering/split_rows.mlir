// split-rows: a row-parallel kernel whose graph.work reaches min-work gets up to `threads` row
// chunks (16-byte aligned starts), listed in graph.row_chunks with graph.row_bytes; a kernel
// below min-work, one that cannot split by rows, and every kernel at one thread are left alone.

// RUN: graph-opt %s -p 'split-rows{threads=2 min-work=1000}' | filecheck %s
// RUN: graph-opt %s -p 'split-rows{threads=3 min-work=1000}' | filecheck %s --check-prefix=THREE
// RUN: graph-opt %s -p 'split-rows{threads=1 min-work=0}' | filecheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @relu_0(
// CHECK-SAME:    graph.row_chunks = {{\[}}["relu_0_rows6", 0 : i64], ["relu_0_rows6", 6 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 32, 32>
// CHECK:       func.func @relu_0_rows6(%{{.*}}: memref<6x8xf32>, %{{.*}}: memref<6x8xf32>)
// CHECK-NOT:     graph.work
// A leading dim of one (d0 iterates once): the kernel splits by the next loop, d1, and its
// buffers along their first dim of more than one element.
// CHECK-LABEL: func.func @unit_batch_add_0(
// CHECK-SAME:    graph.row_chunks = {{\[}}["unit_batch_add_0_rows6", 0 : i64], ["unit_batch_add_0_rows6", 6 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 32, 0, 32>
// CHECK:       func.func @unit_batch_add_0_rows6(%{{.*}}: memref<1x6x8xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: memref<1x6x8xf32>)
// CHECK-LABEL: func.func @small_0(
// CHECK-NOT:     graph.row_chunks
// CHECK-LABEL: func.func @column_sum_0(
// CHECK-NOT:     graph.row_chunks

// Three threads: 12 rows of 32 bytes (each row start stays 16-byte aligned) in three chunks of 4.
// THREE:       graph.row_chunks = {{\[}}["relu_0_rows4", 0 : i64], ["relu_0_rows4", 4 : i64], ["relu_0_rows4", 8 : i64]]

// ONE-NOT:     graph.row_chunks
func.func @relu_0(%x: memref<12x8xf32>, %out: memref<12x8xf32>) attributes {graph.kernel, graph.work = 4096 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<12x8xf32>) outs(%out : memref<12x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %0 = arith.maximumf %a, %zero : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @unit_batch_add_0(%x: memref<1x12x8xf32>, %b: memref<8xf32>, %out: memref<1x12x8xf32>) attributes {graph.kernel, graph.work = 4096 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %b : memref<1x12x8xf32>, memref<8xf32>) outs(%out : memref<1x12x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %0 = arith.addf %a, %c : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @small_0(%x: memref<12x8xf32>, %out: memref<12x8xf32>) attributes {graph.kernel, graph.work = 96 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<12x8xf32>) outs(%out : memref<12x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  func.return
}
func.func @column_sum_0(%x: memref<12x8xf32>, %out: memref<8xf32>) attributes {graph.kernel, graph.work = 4096 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<12x8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %o, %a : f32
    linalg.yield %0 : f32
  }
  func.return
}
