// A constant with no elements is cheap like any small constant: fuse and the kernel lowering
// handle it (xDSL's is_splat failed on it with an IndexError; found by the fuzzer, seed 777001).

// RUN: graph-opt %s --fuse | filecheck %s
// RUN: graph-opt %s --fuse --partition --lower-to-llvm | filecheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @main
// CHECK:         graph.fused(%x) {name = "fused_concat_relu_0", mode = "compile"}
// CHECK:           graph.constant dense<> : tensor<0xf32>
// LLVM:          llvm.func @fused_concat_relu_0
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.constant dense<> : tensor<0xf32>
  %1 = graph.concat %x, %0 {axis = 0 : i64} : (tensor<4xf32>, tensor<0xf32>) -> tensor<4xf32>
  %2 = graph.relu %1 : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
