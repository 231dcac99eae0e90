// mark-row-local: kernels that split by rows, with one d0 extent and rows indexed by plain d0,
// get graph.row_local; others, and declarations, are left as they are.

// RUN: graph-opt %s -p mark-row-local | filecheck %s

// A row max then a division by it: row i of each nest reads only row i.
// CHECK-LABEL: func.func @row_max_divide(
// CHECK-SAME:    attributes {graph.kernel, graph.row_local}
func.func @row_max_divide(%x: memref<3x8xf32>, %out: memref<3x8xf32>) attributes {graph.kernel} {
  %max = memref.alloc() : memref<3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<3x8xf32>) outs(%max : memref<3xf32>) {
  ^bb0(%a: f32, %m: f32):
    %0 = arith.maxnumf %m, %a : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %max : memref<3x8xf32>, memref<3xf32>) outs(%out : memref<3x8xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %0 = arith.divf %a, %m : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %max : memref<3xf32>
  func.return
}

// d0 indexes the input's columns (it splits by rows, x strided): not row-local.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:    attributes {graph.kernel} {
func.func @transpose(%x: memref<8x3xf32>, %out: memref<3x8xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<8x3xf32>) outs(%out : memref<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  func.return
}

// A temporary written by rows and read by columns: row i of out needs every row of it, not row-local.
// CHECK-LABEL: func.func @transposed_temporary(
// CHECK-SAME:    attributes {graph.kernel} {
func.func @transposed_temporary(%x: memref<3x3xf32>, %out: memref<3x3xf32>) attributes {graph.kernel} {
  %t = memref.alloc() : memref<3x3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<3x3xf32>) outs(%t : memref<3x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%t : memref<3x3xf32>) outs(%out : memref<3x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.dealloc %t : memref<3x3xf32>
  func.return
}

// A reduction over the rows: not row-local.
// CHECK-LABEL: func.func @sum_over_rows(
// CHECK-SAME:    attributes {graph.kernel} {
func.func @sum_over_rows(%x: memref<3x8xf32>, %out: memref<8xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<3x8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %s: f32):
    %0 = arith.addf %s, %a : f32
    linalg.yield %0 : f32
  }
  func.return
}

// Nests over different row counts (d0 over 3, then over 6): not row-local.
// CHECK-LABEL: func.func @two_extents(
// CHECK-SAME:    attributes {graph.kernel} {
func.func @two_extents(%x: memref<3x8xf32>, %y: memref<6x8xf32>, %a_out: memref<3x8xf32>, %b_out: memref<6x8xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<3x8xf32>) outs(%a_out : memref<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y : memref<6x8xf32>) outs(%b_out : memref<6x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  func.return
}

// A declaration has no loops to mark.
// CHECK:       func.func private @graphopt_sgemm_packed_3x8x8(memref<3x8xf32>, memref<64xf32>, memref<3x8xf32>) -> () attributes {graph.ukernel}
func.func private @graphopt_sgemm_packed_3x8x8(memref<3x8xf32>, memref<64xf32>, memref<3x8xf32>) -> () attributes {graph.ukernel}
