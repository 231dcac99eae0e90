// convert-graph-to-linalg refuses what it cannot lower and says why.

// RUN: not graph-opt %s -p convert-graph-to-linalg 2>&1 | filecheck %s

// CHECK: convert-graph-to-linalg: pad_0: 'graph.pad' is not supported by the linalg lowering
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %0 = graph.pad %x {pads = array<i64: 0, 1, 0, 1>} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}
