// fuse and partition leave ops of other dialects alone, regions included: a value used inside
// an scf.for body counts as used by the scf.for, and nothing in the loop is grouped.

// RUN: graph-opt %s --fuse | filecheck %s
// RUN: graph-opt %s --fuse --partition | filecheck %s
// RUN: graph-opt %s --fuse --partition=search=cost | filecheck %s

// CHECK-LABEL: func.func @alloca_in_loop
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK-NEXT:    %c1 = arith.constant 1 : index
// CHECK-NEXT:    scf.for %i = %c0 to %n step %c1 {
// CHECK-NEXT:      %buffer = memref.alloca() : memref<16xf32>
// CHECK-NEXT:      %x = memref.load %buffer[%i] : memref<16xf32>
// CHECK-NEXT:      memref.store %x, %buffer[%c0] : memref<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @alloca_in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %buffer = memref.alloca() : memref<16xf32>
    %x = memref.load %buffer[%i] : memref<16xf32>
    memref.store %x, %buffer[%c0] : memref<16xf32>
  }
  func.return
}

// CHECK-LABEL: func.func @graph_ops_around_a_loop
// CHECK:         graph.fused(%a) {name = "fused_neg_exp_0", mode = "compile"
// CHECK:         scf.for
// CHECK:           graph.relu
func.func @graph_ops_around_a_loop(%a: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %0 = graph.neg %a : tensor<4xf32>
  %1 = graph.exp %0 : tensor<4xf32>
  scf.for %i = %c0 to %n step %c1 {
    %2 = graph.relu %1 : tensor<4xf32>
  }
  func.return %1 : tensor<4xf32>
}
