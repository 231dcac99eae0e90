// A pin naming no registered backend is refused with the op's place.

// RUN: not graph-opt %s --partition 2>&1 | filecheck %s

// CHECK: graph-opt: error: partition: @unknown: graph.neg (op 0) is pinned to unknown backend 'gpu9'
// CHECK-NOT: Traceback
func.func @unknown(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x {graph.backend = "gpu9"} : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}
