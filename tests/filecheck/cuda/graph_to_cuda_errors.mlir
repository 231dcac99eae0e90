// convert-graph-to-cuda refuses what it cannot map onto threads and says why.

// RUN: not graph-opt %s -p convert-graph-to-cuda 2>&1 | filecheck %s

func.func @main(%x: tensor<6x7xf32>) -> tensor<7xf32> {
  %0 = graph.reduce_sum %x {axes = array<i64: 0>} : (tensor<6x7xf32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}
// CHECK: convert-graph-to-cuda: reduce_sum_0: a reduction over leading or interleaved axes
