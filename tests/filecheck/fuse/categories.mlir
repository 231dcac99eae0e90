// Category rules (TVM FuseOps semantics): what fuses with what, and what never does.

// RUN: graph-opt %s --split-input-file -p fuse | filecheck %s

// An elementwise chain becomes one group named after its ops.
// CHECK-LABEL: func.func @elementwise_chain
// CHECK-NEXT:    %{{.*}} = graph.fused(%x, %y) {name = "fused_add_relu_mul_0", mode = "compile"}
// CHECK:           graph.add
// CHECK-NEXT:      graph.relu
// CHECK-NEXT:      graph.mul
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
func.func @elementwise_chain(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = graph.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.relu %0 : tensor<4x8xf32>
  %2 = graph.mul %1, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----

// Elementwise and injective ops mix freely.
// CHECK-LABEL: func.func @injective_chain
// CHECK-NEXT:    graph.fused(%x) {name = "fused_exp_transpose_reshape_neg_0", mode = "compile"}
// CHECK-NOT:     graph.fused
func.func @injective_chain(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = graph.exp %x : tensor<2x3xf32>
  %1 = graph.transpose %0 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = graph.reshape %1 : (tensor<3x2xf32>) -> tensor<6xf32>
  %3 = graph.neg %2 : tensor<6xf32>
  func.return %3 : tensor<6xf32>
}

// -----

// An anchor absorbs its elementwise epilogue, but not an injective consumer after it.
// CHECK-LABEL: func.func @anchor_epilogue
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%x, %w, %b) {name = "fused_matmul_add_relu_0", mode = "compile"}
// CHECK:         graph.transpose %[[G]]
func.func @anchor_epilogue(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<16x4xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.relu %1 : tensor<4x16xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  func.return %3 : tensor<16x4xf32>
}

// -----

// A reshape that only inserts unit dims (ONNX Unsqueeze) moves no element: it counts as
// elementwise, so an attention mask computed from [batch, seq] joins the scores' epilogue.
// CHECK-LABEL: func.func @unsqueeze_in_epilogue
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%m, %q, %k) {name = "fused_reshape_sub_matmul_add_0", mode = "compile"}
// CHECK:           graph.reshape
// CHECK:           graph.matmul
// CHECK:           graph.add
// CHECK-NEXT:      graph.yield
// CHECK:         graph.softmax %[[G]]
func.func @unsqueeze_in_epilogue(%m: tensor<2x8xf32>, %q: tensor<2x3x8x4xf32>, %k: tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %0 = graph.reshape %m : (tensor<2x8xf32>) -> tensor<2x1x1x8xf32>
  %1 = graph.sub %one, %0 : (tensor<f32>, tensor<2x1x1x8xf32>) -> tensor<2x1x1x8xf32>
  %2 = graph.matmul %q, %k : (tensor<2x3x8x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32>
  %3 = graph.add %2, %1 : (tensor<2x3x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x3x8x8xf32>
  %4 = graph.softmax %3 {axis = 3 : i64} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  func.return %4 : tensor<2x3x8x8xf32>
}

// -----

// A reshape that regroups elements stays injective: the add joins it, not the matmul's epilogue.
// CHECK-LABEL: func.func @regrouping_reshape_not_in_epilogue
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %q, %k
// CHECK-NEXT:    graph.fused(%m, %[[M]]) {name = "fused_reshape_sub_add_0", mode = "compile"}
func.func @regrouping_reshape_not_in_epilogue(%m: tensor<8x2xf32>, %q: tensor<4x8x4xf32>, %k: tensor<4x4x16xf32>) -> tensor<4x8x16xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %0 = graph.reshape %m : (tensor<8x2xf32>) -> tensor<16xf32>
  %1 = graph.sub %one, %0 : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %2 = graph.matmul %q, %k : (tensor<4x8x4xf32>, tensor<4x4x16xf32>) -> tensor<4x8x16xf32>
  %3 = graph.add %2, %1 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  func.return %3 : tensor<4x8x16xf32>
}

// -----

// Elementwise producers fuse into a reduction; the reduction ends the group.
// CHECK-LABEL: func.func @into_reduction
// CHECK-NEXT:    %[[G:.*]] = graph.fused(%x) {name = "fused_mul_exp_softmax_0", mode = "compile"}
// CHECK:         graph.neg %[[G]]
func.func @into_reduction(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = graph.exp %0 : tensor<4x8xf32>
  %2 = graph.softmax %1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = graph.neg %2 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// Elementwise ops do not fuse into an anchor (no prologues), and an anchor or a reduction
// never fuses into another anchor or reduction.
// CHECK-LABEL: func.func @heavy_stay_apart
// CHECK-NOT:     graph.fused
// CHECK:         func.return
func.func @heavy_stay_apart(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = graph.relu %x : tensor<8x8xf32>
  %1 = graph.matmul %0, %0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = graph.matmul %1, %1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = graph.softmax %2 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %4 = graph.layer_norm %3, %x, %x {axis = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %4 : tensor<8x8xf32>
}

// -----

// Ops of other dialects are opaque: nothing fuses across a func.call.
// CHECK-LABEL: func.func @opaque
// CHECK-NOT:     graph.fused
func.func @opaque(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.neg %x : tensor<4xf32>
  %1 = func.call @id(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = graph.abs %1 : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
func.func private @id(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
