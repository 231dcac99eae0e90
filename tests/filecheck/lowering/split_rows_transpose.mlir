// split-rows on transposes: an argument indexed by the row loop in a later dim is passed to each
// chunk offset by the chunk's first row, whole in type (strided), read or written; in the chunk,
// its index that is the row loop alone becomes `d floordiv 1`, so that linalg takes the loop's
// bound from the sliced buffer. A temporary read transposed does not split, nor does a nest
// whose row loop no sliced buffer bounds.

// RUN: graph-opt %s -p 'split-rows{threads=2 min-work=0}' | filecheck %s

// NHWC to NCHW, loops over out (n, c, h, w): rows of out's channels (96 bytes); x strided, one
// float a channel, so chunks start at multiples of 4 channels (16 bytes).
// CHECK-LABEL: func.func @to_nchw_0(
// CHECK-SAME:    graph.row_chunks = {{\[}}["to_nchw_0_rows4", 0 : i64], ["to_nchw_0_rows4", 4 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 4, 96>
// CHECK:       func.func @to_nchw_0_rows4(%{{.*}}: memref<1x4x6x8xf32>, %{{.*}}: memref<1x4x4x6xf32>)
// CHECK:         affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, (d1 floordiv 1))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @to_nchw_0(%x: memref<1x4x6x8xf32>, %out: memref<1x8x4x6xf32>) attributes {graph.kernel, graph.work = 192 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<1x4x6x8xf32>) outs(%out : memref<1x8x4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  func.return
}

// NHWC to NCHW with loops over x (n, h, w, c): x by rows of h (192 bytes); out written strided,
// a row of h 6 floats (24 bytes) on, so chunks start at multiples of 2 rows.
// CHECK-LABEL: func.func @to_nchw_by_x_rows_0(
// CHECK-SAME:    graph.row_chunks = {{\[}}["to_nchw_by_x_rows_0_rows2", 0 : i64], ["to_nchw_by_x_rows_0_rows2", 2 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 192, 24>
// CHECK:       func.func @to_nchw_by_x_rows_0_rows2(%{{.*}}: memref<1x2x6x8xf32>, %{{.*}}: memref<1x8x4x6xf32>)
// CHECK:         affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, (d1 floordiv 1), d2)>
func.func @to_nchw_by_x_rows_0(%x: memref<1x4x6x8xf32>, %out: memref<1x8x4x6xf32>) attributes {graph.kernel, graph.work = 192 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<1x4x6x8xf32>) outs(%out : memref<1x8x4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  func.return
}

// A temporary written by rows and read by columns: row i of out needs every row of it.
// CHECK-LABEL: func.func @transposed_temporary_0(
// CHECK-NOT:     graph.row_chunks
// CHECK:         func.return
func.func @transposed_temporary_0(%x: memref<8x8xf32>, %out: memref<8x8xf32>) attributes {graph.kernel, graph.work = 128 : i64} {
  %t = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<8x8xf32>) outs(%t : memref<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : memref<8x8xf32>) outs(%out : memref<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %t : memref<8x8xf32>
  func.return
}

// Loops whose row loop indexes only the buffers' later dims: no sliced buffer would bound it in a chunk.
// CHECK-LABEL: func.func @columns_only_0(
// CHECK-NOT:     graph.row_chunks
// CHECK:         func.return
func.func @columns_only_0(%x: memref<8x8xf32>, %out: memref<8x8xf32>) attributes {graph.kernel, graph.work = 128 : i64} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<8x8xf32>) outs(%out : memref<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  }
  func.return
}
