// share-kernel-code: a kernel whose type, argument kinds and body equal an earlier kernel's is
// erased and named in the earlier one's graph.aliases; constant values may differ, but a
// constant argument against a plain one, another body or another type keeps its own kernel.

// RUN: graph-opt %s -p share-kernel-code | filecheck %s

// CHECK-LABEL: func.func @scale_0(
// CHECK-SAME:    attributes {graph.kernel, graph.aliases = ["scale_1"]}
// CHECK-NOT:   func.func @scale_1(
// CHECK-LABEL: func.func @scale_plain(
// CHECK-NOT:     graph.aliases
// CHECK-LABEL: func.func @add_0(
// CHECK-NOT:     graph.aliases
// CHECK-LABEL: func.func @scale_wide(
// CHECK-NOT:     graph.aliases
// CHECK-LABEL: func.func private @ukernel(
func.func @scale_0(%x: memref<4xf32>, %w: memref<4xf32> {graph.constant = dense<2.0> : tensor<4xf32>}, %out: memref<4xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %w : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @scale_1(%y: memref<4xf32>, %v: memref<4xf32> {graph.constant = dense<3.0> : tensor<4xf32>}, %out: memref<4xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%y, %v : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @scale_plain(%x: memref<4xf32>, %w: memref<4xf32>, %out: memref<4xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %w : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @add_0(%x: memref<4xf32>, %w: memref<4xf32> {graph.constant = dense<2.0> : tensor<4xf32>}, %out: memref<4xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %w : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func @scale_wide(%x: memref<8xf32>, %w: memref<8xf32> {graph.constant = dense<2.0> : tensor<8xf32>}, %out: memref<8xf32>) attributes {graph.kernel} {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x, %w : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  func.return
}
func.func private @ukernel(memref<4xf32>)
