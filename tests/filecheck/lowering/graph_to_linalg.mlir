// convert-graph-to-linalg: one kernel per group, on memrefs, in destination-passing style.

// RUN: graph-opt %s --split-input-file -p fuse,convert-graph-to-linalg | filecheck %s

// An elementwise chain is ONE linalg.generic; broadcasting is in the indexing maps.
// CHECK-LABEL: func.func @fused_add_relu_mul_0(%0: memref<4x8xf32>, %1: memref<8xf32>, %2: memref<4x1xf32>, %3: memref<4x8xf32>) attributes {graph.kernel, graph.work = {{[0-9]+}} : i64} {
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0, %1, %2 : memref<4x8xf32>, memref<8xf32>, memref<4x1xf32>) outs(%3 : memref<4x8xf32>) {
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:           arith.mulf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// CHECK-NOT:   linalg.generic
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %0 = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.relu %0 : tensor<4x8xf32>
  %2 = graph.mul %1, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----

// Transpose is an indexing map; a float `ne` is unordered-or-not-equal.
// CHECK-LABEL: func.func @fused_transpose_cmp_0
// CHECK:         affine_map<(d0, d1) -> (d1, d0)>
// CHECK:         arith.cmpf une
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3x2xf32>) -> tensor<3x2xi1> {
  %0 = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = graph.cmp %0, %y {predicate = "ne"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xi1>
  func.return %1 : tensor<3x2xi1>
}

// -----

// A reduction with its producer: a linalg.fill of the identity, then one generic with a
// reduction iterator whose accumulation may be reassociated (so LLVM vectorizes it).
// CHECK-LABEL: func.func @fused_exp_reduce_sum_0(%0: memref<4x8xf32>, %1: memref<4xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    linalg.fill ins(%[[ZERO]] : f32) outs(%1 : memref<4xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%0 : memref<4x8xf32>) outs(%1 : memref<4xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:      %{{.*}} = arith.addf %[[ACC]], %[[E]] fastmath<reassoc> : f32
func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4x8xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// Softmax keeps row statistics in row-sized buffers, never a whole-tensor intermediate.
// CHECK-LABEL: func.func @softmax_0
// The row max (maxnumf: NaN still reaches the row sum) and row sum accumulate with reassoc;
// each exp term is then multiplied by the row's 1 / sum (loop-invariant in the row).
// CHECK:         memref.alloc() : memref<4xf32>
// CHECK:         arith.maxnumf {{.*}} fastmath<reassoc>
// CHECK:         memref.alloc() : memref<4xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         math.exp
// CHECK:         arith.addf {{.*}} fastmath<reassoc>
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[RECIPROCAL:.*]] = arith.divf %[[ONE]], %{{.*}} : f32
// CHECK:         arith.mulf %{{.*}}, %[[RECIPROCAL]] : f32
// CHECK:         memref.dealloc
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// Matmul (small: unblocked): a contraction generic over (m, k, n), the contiguous n
// innermost, then the epilogue in place on the output buffer.
// CHECK-LABEL: func.func @fused_matmul_add_relu_0(%0: memref<4x8xf32>, %1: memref<8x16xf32>, %2: memref<16xf32>, %3: memref<4x16xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%0, %1 : memref<4x8xf32>, memref<8x16xf32>) outs(%3 : memref<4x16xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%2 : memref<16xf32>) outs(%3 : memref<4x16xf32>)
// CHECK:           arith.addf
// CHECK:           arith.maximumf
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = graph.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = graph.relu %1 : tensor<4x16xf32>
  func.return %2 : tensor<4x16xf32>
}

// -----

// Blocked matmul (every dim a multiple of its block (32, 128, 256), b more than one block):
// shape-only (blocks, block size) buffers give the loop bounds of (mb, nb, kb, mi, ki, ni).
// (f64: an f32 matmul calls the packed GEMM ukernel, b packed at run time, packed_gemm.mlir.)
// CHECK-LABEL: func.func @fused_matmul_relu_0(%0: memref<32x256xf64>, %1: memref<256x256xf64>, %2: memref<32x256xf64>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d2, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (((d0 * 32) + d3), ((d2 * 128) + d4))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (((d2 * 128) + d4), ((d1 * 256) + d5))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (((d0 * 32) + d3), ((d1 * 256) + d5))>], iterator_types = ["parallel", "parallel", "reduction", "parallel", "reduction", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}}, %0, %1 : memref<1x32xf64>, memref<2x128xf64>, memref<1x256xf64>, memref<32x256xf64>, memref<256x256xf64>) outs(%2 : memref<32x256xf64>)
// CHECK:         outs(%2 : memref<32x256xf64>)
// CHECK:           arith.maximumf
func.func @main(%x: tensor<32x256xf64>, %w: tensor<256x256xf64>) -> tensor<32x256xf64> {
  %0 = graph.matmul %x, %w : (tensor<32x256xf64>, tensor<256x256xf64>) -> tensor<32x256xf64>
  %1 = graph.relu %0 : tensor<32x256xf64>
  func.return %1 : tensor<32x256xf64>
}

// -----

// conv2d: x zero-padded into a buffer of its stride phases [N, C, sh, sw, L] (zeros only where x
// does not land: in phase (0, 0), rows of R = 4, x's rows 1 and 3 and columns 1 and 3 land on
// rows 1-2 and columns 1-2, so the fills cover [0, 5), [7, 9) and [11, 17); then x copied in at
// its phase and flat position: each iteration reads sw = 2 neighbouring columns of x and writes
// one to each column phase, the last column of 5 in a loop of its own), an accumulator over the flat output positions
// [N, O/B, B, OH * R] (R = 4: the phase row), a contraction over (n, o / B, c, kh, p) whose body
// unrolls the window row (kw) and a block of B = 4 output channels (one output each, weights
// read at constant kw), the valid positions copied out, then the epilogue in place. (f64: an
// f32 conv calls a ukernel, direct_conv.mlir and depthwise_conv.mlir.)
// CHECK-LABEL: func.func @fused_conv2d_relu_0(%0: memref<1x2x5x5xf64>, %1: memref<4x2x3x3xf64>, %2: memref<1x4x3x3xf64>)
// CHECK:         %[[PHASES:.*]] = memref.alloc() : memref<1x2x2x2x17xf64>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2)>, affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0, ((d2 * 4) + d3))>]
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : memref<1xi64>, memref<5xi64>) outs(%[[PHASES]] : memref<1x2x2x2x17xf64>)
// CHECK:           arith.constant 0.000000e+00 : f64
// CHECK:         affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0, (((d2 * 4) + d3) + 7))>]
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : memref<1xi64>, memref<2xi64>) outs(%[[PHASES]] : memref<1x2x2x2x17xf64>)
// CHECK:         affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0, (((d2 * 4) + d3) + 11))>]
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : memref<1xi64>, memref<6xi64>) outs(%[[PHASES]] : memref<1x2x2x2x17xf64>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, (d3 * 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, ((d3 * 2) + 1))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 + 1) mod 2), 1, ((((d2 + 1) floordiv 2) * 4) + d3))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 + 1) mod 2), 0, (((((d2 + 1) floordiv 2) * 4) + d3) + 1))>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %0, %0 : memref<2xi64>, memref<1x2x5x5xf64>, memref<1x2x5x5xf64>) outs(%[[PHASES]], %[[PHASES]] : memref<1x2x2x2x17xf64>, memref<1x2x2x2x17xf64>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, ((d3 * 2) + 4))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 + 1) mod 2), 1, ((((d2 + 1) floordiv 2) * 4) + (d3 + 2)))>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %0 : memref<1xi64>, memref<1x2x5x5xf64>) outs(%[[PHASES]] : memref<1x2x2x2x17xf64>)
// CHECK:         %[[ACC:.*]] = memref.alloc() : memref<1x1x4x12xf64>
// CHECK:         outs(%[[ACC]] : memref<1x1x4x12xf64>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, (d3 mod 2), 0, (d4 + ((d3 floordiv 2) * 4)))>, affine_map<(d0, d1, d2, d3, d4) -> ((d1 * 4), d2, d3, 0)>, {{.*}}, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 0, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 3, d4)>], iterator_types = ["parallel", "parallel", "reduction", "reduction", "parallel"]}
// CHECK-SAME:      outs(%[[ACC]], %[[ACC]], %[[ACC]], %[[ACC]] : memref<1x1x4x12xf64>, memref<1x1x4x12xf64>, memref<1x1x4x12xf64>, memref<1x1x4x12xf64>)
// CHECK-COUNT-12:  arith.addf {{.*}} fastmath<reassoc,contract>
// CHECK:           linalg.yield {{.*}} : f64, f64, f64, f64
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, (d1 floordiv 4), (d1 mod 4), ((d2 * 4) + d3))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[ACC]] : memref<1x1x4x12xf64>) outs(%2 : memref<1x4x3x3xf64>)
// CHECK:         outs(%2 : memref<1x4x3x3xf64>)
// CHECK:           arith.maximumf
// CHECK:         memref.dealloc %[[PHASES]]
// CHECK:         memref.dealloc %[[ACC]]
func.func @main(%x: tensor<1x2x5x5xf64>, %w: tensor<4x2x3x3xf64>) -> tensor<1x4x3x3xf64> {
  %0 = graph.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x5xf64>, tensor<4x2x3x3xf64>) -> tensor<1x4x3x3xf64>
  %1 = graph.relu %0 : tensor<1x4x3x3xf64>
  func.return %1 : tensor<1x4x3x3xf64>
}

// -----

// An f32 max_pool2d calls the pooling ukernel on x and out (no copy, no loop nest), named by
// what it computes, its window, strides, top/left padding and shapes.
// CHECK-LABEL: func.func @max_pool2d_0(%0: memref<1x1x4x32xf32>, %1: memref<1x1x2x16xf32>)
// CHECK-NEXT:    func.call @graphopt_spool_max_k3x3_s2x2_p1x1_1x1x4x32_1x1x2x16(%0, %1) : (memref<1x1x4x32xf32>, memref<1x1x2x16xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK:       func.func private @graphopt_spool_max_k3x3_s2x2_p1x1_1x1x4x32_1x1x2x16(memref<1x1x4x32xf32>, memref<1x1x2x16xf32>) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<1x1x4x32xf32>) -> tensor<1x1x2x16xf32> {
  %0 = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 0, 0>} : (tensor<1x1x4x32xf32>) -> tensor<1x1x2x16xf32>
  func.return %0 : tensor<1x1x2x16xf32>
}

// -----

// A global average pool over 7x7 planes: the row-sum ukernel sums each plane (49 floats,
// which the loop nest would reduce in scalar code), then one generic divides out in place.
// CHECK-LABEL: func.func @reduce_mean_0(%0: memref<1x8x7x7xf32>, %1: memref<1x8x1x1xf32>)
// CHECK-NEXT:    func.call @graphopt_srowsum_1x8x7x7_1x8x1x1(%0, %1) : (memref<1x8x7x7xf32>, memref<1x8x1x1xf32>) -> ()
// CHECK-NEXT:    linalg.generic {{.*}} outs(%1 : memref<1x8x1x1xf32>)
// CHECK:           arith.constant 4.900000e+01 : f32
// CHECK-NEXT:      arith.divf
// CHECK:         func.return
// CHECK:       func.func private @graphopt_srowsum_1x8x7x7_1x8x1x1(memref<1x8x7x7xf32>, memref<1x8x1x1xf32>) -> () attributes {graph.ukernel}
func.func @main(%x: tensor<1x8x7x7xf32>) -> tensor<1x8x1x1xf32> {
  %0 = graph.reduce_mean %x {axes = array<i64: 2, 3>, keepdims = true} : (tensor<1x8x7x7xf32>) -> tensor<1x8x1x1xf32>
  func.return %0 : tensor<1x8x1x1xf32>
}

// -----

// An f64 max_pool2d (the pooling ukernel takes f32; output rows of 16, not pooled over stride phases): a -inf-padded copy (a fill,
// then x copied in), then one parallel generic over (n, c, oh, ow) whose body reads the 3x3
// window at constant offsets and takes their max (no accumulation in memory): a select of the
// greater per tap, NaN where an unordered pair finds one.
// CHECK-LABEL: func.func @max_pool2d_0(%0: memref<1x1x4x32xf64>, %1: memref<1x1x2x16xf64>)
// CHECK:         %[[PADDED:.*]] = memref.alloc() : memref<1x1x5x33xf64>
// CHECK:           arith.constant 0xfff0000000000000 : f64
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 + 1))>], {{.*}} ins(%0 : memref<1x1x4x32xf64>) outs(%[[PADDED]] : memref<1x1x5x33xf64>)
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 2), (d3 * 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 2), ((d3 * 2) + 1))>, {{.*}}, affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 2) + 2), ((d3 * 2) + 2))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[PADDED]], {{.*}}) outs(%1 : memref<1x1x2x16xf64>)
// CHECK-COUNT-8:   arith.cmpf ogt
// CHECK-COUNT-5:   arith.cmpf uno
// CHECK-COUNT-4:   arith.ori
// CHECK:           %[[NAN:.*]] = arith.constant 0x7ff8000000000000 : f64
// CHECK-NEXT:      %[[MAX:.*]] = arith.select {{.*}}, %[[NAN]], {{.*}} : f64
// CHECK-NEXT:      linalg.yield %[[MAX]]
func.func @main(%x: tensor<1x1x4x32xf64>) -> tensor<1x1x2x16xf64> {
  %0 = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 0, 0>} : (tensor<1x1x4x32xf64>) -> tensor<1x1x2x16xf64>
  func.return %0 : tensor<1x1x2x16xf64>
}

// -----

// An unpadded f64 max_pool2d with an elementwise prologue and windows that do not overlap: the
// prologue is computed at each window tap, in the pooling generic itself (no temporary).
// CHECK-LABEL: func.func @add_relu_max_pool2d(%0: memref<1x2x4x32xf64>, %1: memref<2x1x1xf64>, %2: memref<1x2x2x16xf64>)
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 * 2), (d3 * 2))>, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0, %1, %0, %0, %0 : {{.*}}) outs(%2 : memref<1x2x2x16xf64>)
// CHECK-COUNT-4:   arith.addf
// CHECK-COUNT-3:   arith.cmpf ogt
// CHECK-COUNT-2:   arith.cmpf uno
// CHECK:           linalg.yield
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
func.func @main(%x: tensor<1x2x4x32xf64>, %b: tensor<2x1x1xf64>) -> tensor<1x2x2x16xf64> {
  %0 = graph.fused(%x, %b) {name = "add_relu_max_pool2d", mode = "compile"} : (tensor<1x2x4x32xf64>, tensor<2x1x1xf64>) -> tensor<1x2x2x16xf64> {
  ^bb0(%a: tensor<1x2x4x32xf64>, %c: tensor<2x1x1xf64>):
    %1 = graph.add %a, %c : (tensor<1x2x4x32xf64>, tensor<2x1x1xf64>) -> tensor<1x2x4x32xf64>
    %2 = graph.relu %1 : tensor<1x2x4x32xf64>
    %3 = graph.max_pool2d %2 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x32xf64>) -> tensor<1x2x2x16xf64>
    graph.yield %3 : tensor<1x2x2x16xf64>
  }
  func.return %0 : tensor<1x2x2x16xf64>
}

// -----

// pad inside an elementwise chain: bounds checks on linalg.index, a load at the clamped
// index, and a select of the pad value; still one generic.
// CHECK-LABEL: func.func @fused_exp_pad_neg_0(%0: memref<3xf32>, %1: memref<6xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%1 : memref<6xf32>)
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           arith.cmpi sge, %[[I]], %{{.*}} : index
// CHECK:           arith.cmpi slt
// CHECK:           arith.minsi
// CHECK:           arith.maxsi
// CHECK:           memref.load %0
// CHECK:           math.exp
// CHECK:           arith.constant 2.500000e+00 : f32
// CHECK:           arith.select
// CHECK:           arith.negf
// CHECK-NOT:     linalg.generic
func.func @main(%x: tensor<3xf32>) -> tensor<6xf32> {
  %0 = graph.exp %x : tensor<3xf32>
  %1 = graph.pad %0 {pads = array<i64: 1, 2>, value = 2.5 : f64} : (tensor<3xf32>) -> tensor<6xf32>
  %2 = graph.neg %1 : tensor<6xf32>
  func.return %2 : tensor<6xf32>
}

// -----

// gather: the position read from the indices (wrapped when negative, clamped), then a load of the data.
// CHECK-LABEL: func.func @fused_gather_exp_0(%0: memref<5x4xf32>, %1: memref<3xi64>, %2: memref<3x4xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%1 : memref<3xi64>) outs(%2 : memref<3x4xf32>)
// CHECK:           arith.index_cast
// CHECK:           arith.cmpi slt
// CHECK:           arith.select
// CHECK:           memref.load %0
// CHECK:           math.exp
func.func @main(%d: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = graph.gather %d, %i {axis = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %1 = graph.exp %0 : tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}
