// A group no backend accepts whole, or that an earlier backend accepts ops of alone, is split,
// in dataflow order, into maximal pieces, each on the first backend accepting its first op;
// a fallback group is an outline: its ops are placed one by one (fallback.mlir).

// RUN: graph-opt %s --split-input-file --partition | filecheck %s
// RUN: graph-opt %s --split-input-file --partition=backends=blas,cpu | filecheck %s --check-prefix=BLAS

// Two anchors in one group: no kernel holds both. cpu takes each matmul with what follows it.
// CHECK-LABEL: func.func @two_anchors
// CHECK-NEXT:    %[[P:.*]] = graph.fused(%x, %w) {name = "fused_matmul_add_0", mode = "compile", backend = "cpu"}
// CHECK:           graph.matmul
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.yield
// CHECK:         %[[Q:.*]] = graph.fused(%[[P]], %w) {name = "fused_matmul_relu_1", mode = "compile", backend = "cpu"}
// CHECK:           graph.matmul
// CHECK-NEXT:      graph.relu
// CHECK-NEXT:      graph.yield
// CHECK:         func.return %[[Q]]

// blas first: it claims each matmul alone; each epilogue is a piece of its own on cpu.
// BLAS-LABEL: func.func @two_anchors
// BLAS-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "blas"}
// BLAS:         %[[A:.*]] = graph.fused(%[[M]], %x) {name = "add_1", mode = "compile", backend = "cpu"
// BLAS:         %[[N:.*]] = graph.fused(%[[A]], %w) {name = "matmul_2", mode = "compile", backend = "blas"}
// BLAS:         graph.fused(%[[N]]) {name = "relu_3", mode = "compile", backend = "cpu"
func.func @two_anchors(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = graph.fused(%x, %w) {name = "two", mode = "compile"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %0 = graph.matmul %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = graph.add %0, %a : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %2 = graph.matmul %1, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = graph.relu %2 : tensor<8x8xf32>
    graph.yield %3 : tensor<8x8xf32>
  }
  func.return %r : tensor<8x8xf32>
}

// -----

// A piece takes only ops whose other producers are placed, and no kernel with an anchor
// yields two values: the first matmul and the exp go alone, the add joins the second matmul.
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    %[[M:.*]] = graph.fused(%x, %w) {name = "matmul_0", mode = "compile", backend = "cpu"}
// CHECK:         %[[E:.*]] = graph.fused(%[[M]]) {name = "exp_1", mode = "compile", backend = "cpu"}
// CHECK:         graph.fused(%[[M]], %w, %[[E]]) {name = "fused_matmul_add_0", mode = "compile", backend = "cpu"}
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8x8xf32>, %[[C:.*]]: tensor<8x8xf32>):
// CHECK-NEXT:      %[[P:.*]] = graph.matmul %[[A]], %[[B]]
// CHECK-NEXT:      %[[S:.*]] = graph.add %[[P]], %[[C]]
// CHECK-NEXT:      graph.yield %[[S]]
func.func @diamond(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = graph.fused(%x, %w) {name = "diamond", mode = "compile"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %0 = graph.matmul %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = graph.exp %0 : tensor<8x8xf32>
    %2 = graph.matmul %0, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = graph.add %2, %1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    graph.yield %3 : tensor<8x8xf32>
  }
  func.return %r : tensor<8x8xf32>
}

// -----

// A fallback group asks for no single kernel: it stays an outline, its ops placed one by one
// (each on the first backend accepting it), named after it; a pin still pins.
// CHECK-LABEL: func.func @fallback
// CHECK-NEXT:    %[[N:.*]] = graph.fused(%x) {name = "kept.neg_0", mode = "compile", backend = "cpu"}
// CHECK-NEXT:    ^
// CHECK-NEXT:      graph.neg
// CHECK-NEXT:      graph.yield
// CHECK:         %[[E:.*]] = graph.fused(%[[N]]) {name = "kept.exp_1", mode = "compile", backend = "reference"}
// CHECK-NEXT:    ^
// CHECK-NEXT:      graph.exp {{.*}} {graph.backend = "reference"}
// CHECK-NEXT:      graph.yield
// CHECK:         func.return %[[E]]
func.func @fallback(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = graph.fused(%x) {name = "kept", mode = "fallback"} : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %0 = graph.neg %a : tensor<8xf32>
    %1 = graph.exp %0 {graph.backend = "reference"} : tensor<8xf32>
    graph.yield %1 : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
