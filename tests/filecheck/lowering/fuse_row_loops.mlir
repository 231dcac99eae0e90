// fuse-row-loops: a graph.row_local kernel's top-level row loops (same constant bounds) become
// ONE loop running the nests one after the other for each row; allocs hoisted above it,
// deallocs below it. Other kernels, and loops of other bounds, keep their loops.

// RUN: graph-opt %s --split-input-file -p convert-linalg-to-loops,fuse-row-loops | filecheck %s

// Softmax (as convert-graph-to-linalg writes it, marked row-local by mark-row-local):
// row max, row sum of exp, normalize, all in one loop over the rows.
// CHECK-LABEL: func.func @softmax_0
// CHECK:         %[[MAX:[0-9]+]] = memref.alloc() : memref<3xf32>
// CHECK-NOT:     scf.for
// CHECK:         %[[SUM:[0-9]+]] = memref.alloc() : memref<3xf32>
// CHECK:         scf.for %[[ROW:[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      arith.constant 0xff800000 : f32
// CHECK-NEXT:      memref.store %{{.*}}, %[[MAX]][%[[ROW]]]
// CHECK-NEXT:      scf.for
// CHECK:             arith.maximumf
// CHECK:           memref.store %{{.*}}, %[[SUM]][%[[ROW]]]
// CHECK-NEXT:      scf.for
// CHECK:             math.exp
// CHECK:             arith.addf
// CHECK:           scf.for
// CHECK:             math.exp
// CHECK:             arith.divf
// CHECK-NEXT:        memref.store %{{.*}}, %{{.*}}[%[[ROW]], %{{.*}}] : memref<3x8xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.dealloc %[[MAX]]
// CHECK-NEXT:    memref.dealloc %[[SUM]]
// CHECK-NEXT:    func.return
func.func @softmax_0(%0: memref<3x8xf32>, %1: memref<3x8xf32>) attributes {graph.kernel, graph.row_local} {
  %2 = memref.alloc() : memref<3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%2 : memref<3xf32>) {
  ^bb0(%3: f32):
    %4 = arith.constant 0xff800000 : f32
    linalg.yield %4 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : memref<3x8xf32>) outs(%2 : memref<3xf32>) {
  ^bb0(%5: f32, %6: f32):
    %7 = arith.maximumf %6, %5 fastmath<reassoc> : f32
    linalg.yield %7 : f32
  }
  %8 = memref.alloc() : memref<3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%8 : memref<3xf32>) {
  ^bb0(%9: f32):
    %10 = arith.constant 0.000000e+00 : f32
    linalg.yield %10 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0, %2 : memref<3x8xf32>, memref<3xf32>) outs(%8 : memref<3xf32>) {
  ^bb0(%11: f32, %12: f32, %13: f32):
    %14 = arith.subf %11, %12 : f32
    %15 = math.exp %14 : f32
    %16 = arith.addf %13, %15 fastmath<reassoc> : f32
    linalg.yield %16 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%8, %0, %2 : memref<3xf32>, memref<3x8xf32>, memref<3xf32>) outs(%1 : memref<3x8xf32>) {
  ^bb0(%17: f32, %18: f32, %19: f32, %20: f32):
    %21 = arith.subf %18, %19 : f32
    %22 = math.exp %21 : f32
    %23 = arith.divf %22, %17 : f32
    linalg.yield %23 : f32
  }
  memref.dealloc %2 : memref<3xf32>
  memref.dealloc %8 : memref<3xf32>
  func.return
}

// -----

// The same kernel not marked row-local keeps its row loops, each after the alloc it fills.
// CHECK-LABEL: func.func @unmarked
// CHECK:         memref.alloc
// CHECK:         scf.for
// CHECK:           memref.store
// CHECK-NEXT:    }
// CHECK:         scf.for
// CHECK:         memref.alloc
// CHECK:         scf.for
// CHECK:           memref.store
// CHECK-NEXT:    }
// CHECK:         scf.for
// CHECK:         scf.for
// CHECK:         memref.dealloc
func.func @unmarked(%0: memref<3x8xf32>, %1: memref<3x8xf32>) attributes {graph.kernel} {
  %2 = memref.alloc() : memref<3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%2 : memref<3xf32>) {
  ^bb0(%3: f32):
    %4 = arith.constant 0xff800000 : f32
    linalg.yield %4 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : memref<3x8xf32>) outs(%2 : memref<3xf32>) {
  ^bb0(%5: f32, %6: f32):
    %7 = arith.maximumf %6, %5 fastmath<reassoc> : f32
    linalg.yield %7 : f32
  }
  %8 = memref.alloc() : memref<3xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%8 : memref<3xf32>) {
  ^bb0(%9: f32):
    %10 = arith.constant 0.000000e+00 : f32
    linalg.yield %10 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0, %2 : memref<3x8xf32>, memref<3xf32>) outs(%8 : memref<3xf32>) {
  ^bb0(%11: f32, %12: f32, %13: f32):
    %14 = arith.subf %11, %12 : f32
    %15 = math.exp %14 : f32
    %16 = arith.addf %13, %15 fastmath<reassoc> : f32
    linalg.yield %16 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%8, %0, %2 : memref<3xf32>, memref<3x8xf32>, memref<3xf32>) outs(%1 : memref<3x8xf32>) {
  ^bb0(%17: f32, %18: f32, %19: f32, %20: f32):
    %21 = arith.subf %18, %19 : f32
    %22 = math.exp %21 : f32
    %23 = arith.divf %22, %17 : f32
    linalg.yield %23 : f32
  }
  memref.dealloc %2 : memref<3xf32>
  memref.dealloc %8 : memref<3xf32>
  func.return
}

// -----

// Loops over different rows (3, then 4) are not merged, even in a marked kernel.
// CHECK-LABEL: func.func @other_bounds
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}} : memref<3xf32>
// CHECK-NEXT:    }
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}} : memref<4xf32>
// CHECK-NEXT:    }
func.func @other_bounds(%a: memref<3xf32>, %b: memref<4xf32>) attributes {graph.kernel, graph.row_local} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%a : memref<3xf32>) {
  ^bb0(%x: f32):
    %c = arith.constant 1.0 : f32
    linalg.yield %c : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%b : memref<4xf32>) {
  ^bb0(%y: f32):
    %c = arith.constant 2.0 : f32
    linalg.yield %c : f32
  }
  func.return
}
