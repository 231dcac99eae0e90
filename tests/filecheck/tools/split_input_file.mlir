// --split-input-file handles each chunk between separator lines as its own module; the output keeps the separators.

// RUN: graph-opt %s --split-input-file | filecheck %s
// RUN: graph-opt %s --split-input-file --print-op-generic | graph-opt --split-input-file | filecheck %s

// CHECK:      func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:   %0 = graph.relu %x : tensor<4xf32>
// CHECK:      // {{-----$}}
// CHECK:      func.func @second(%x: tensor<4xf16>) -> tensor<4xf16> {
// CHECK-NEXT:   %0 = graph.tanh %x : tensor<4xf16>

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.relu %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @second(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = graph.tanh %x : tensor<4xf16>
  func.return %0 : tensor<4xf16>
}
