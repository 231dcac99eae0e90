// RUN: graph-opt %s --fuse --partition=backends=cuda -t ptx | filecheck %s
// RUN: graph-opt %s -t 'ptx{arch=sm_90}' | filecheck %s --check-prefix=HOPPER

// Every kernel of @main in one PTX module: global loads, and barriers and shared memory where
// threads of a block share data.
func.func @main(%x: tensor<8x300xf32>, %b: tensor<300xf32>, %w: tensor<300x32xf32>) -> (tensor<8x300xf32>, tensor<8x32xf32>) {
  %0 = graph.add %x, %b : (tensor<8x300xf32>, tensor<300xf32>) -> tensor<8x300xf32>
  %1 = graph.relu %0 : tensor<8x300xf32>
  %2 = graph.softmax %1 : (tensor<8x300xf32>) -> tensor<8x300xf32>
  %3 = graph.matmul %x, %w : (tensor<8x300xf32>, tensor<300x32xf32>) -> tensor<8x32xf32>
  func.return %2, %3 : tensor<8x300xf32>, tensor<8x32xf32>
}
// CHECK:       .target sm_80
// CHECK:       .shared .align 16 .b8 cuda_shared_memory
// CHECK:       .visible .entry fused_add_relu_softmax_0(
// CHECK:       ld.global
// CHECK:       shfl.sync.down.b32
// CHECK:       st.shared
// CHECK:       bar.sync 0
// CHECK:       .visible .entry matmul_0(
// CHECK:       ld.global
// CHECK:       st.shared
// CHECK:       bar.sync 0
// CHECK:       ld.shared

// Without fusion, each op is a kernel; elementwise kernels need no barrier.
// HOPPER:      .target sm_90
// HOPPER:      .visible .entry add_0(
// HOPPER-NOT:  bar.sync
// HOPPER:      .visible .entry relu_1(
// HOPPER-NOT:  bar.sync
// HOPPER: .visible .entry softmax_2(
// HOPPER: .visible .entry matmul_3(
