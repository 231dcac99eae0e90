// An f32 conv2d of one group whose window is 1x1, or whose output rows have at most 8 columns, or
// a grouped 1x1, calls the packed GEMM ukernel with b row-major (`graphopt_sgemm_rowmajor`): per
// image (and group), out [O, OH * OW] = w [O, C * KH * KW] @ b. A 1x1 of stride 1 passes x itself as b (no copy);
// other convs copy x, zero-padded when the conv pads, into an im2col buffer [N, C, KH, KW, OH, OW].
// The tail that the tile can apply (bias, relu) is the ukernel's epilogue, its per-channel
// operands per row of the GEMM.

// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | filecheck %s
// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | graph-opt --split-input-file -p 'split-rows{threads=2 min-work=0}' | filecheck %s --check-prefix=SPLIT

// A 1x1 conv: the call reads x, w and the bias; nothing else runs in the kernel.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x9x5x7xf32>, %1: memref<13x9x1x1xf32>, %2: memref<13x1x1xf32>, %3: memref<1x13x5x7xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x9x5x7_13x9x1x1_13x1x1_1x13x5x7(%0, %1, %2, %3) : (memref<1x9x5x7xf32>, memref<13x9x1x1xf32>, memref<13x1x1xf32>, memref<1x13x5x7xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK:       func.func private @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x9x5x7_13x9x1x1_13x1x1_1x13x5x7({{.*}}) -> () attributes {graph.ukernel}

// At 2 threads one image splits by output channels, chunks starting at multiples of 4 (16-byte
// alignment of out's 140-byte channels; not of the GEMM's 6-row tiles, which made 12 and 1):
// 8 and 5; x is read whole.
// SPLIT-LABEL: func.func @fused_conv2d_add_relu_0(
// SPLIT-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows8", 0 : i64], ["fused_conv2d_add_relu_0_rows5", 8 : i64]]
// SPLIT-SAME:    graph.row_bytes = array<i64: 0, 36, 4, 140>
// SPLIT:       func.func @fused_conv2d_add_relu_0_rows5(%0: memref<1x9x5x7xf32>, %1: memref<5x9x1x1xf32>, %2: memref<5x1x1xf32>, %3: memref<1x5x5x7xf32>)
// SPLIT-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x9x5x7_5x9x1x1_5x1x1_1x5x5x7(%0, %1, %2, %3)
func.func @main(%x: tensor<1x9x5x7xf32>, %w: tensor<13x9x1x1xf32>, %b: tensor<13x1x1xf32>) -> tensor<1x13x5x7xf32> {
  %0 = graph.conv2d %x, %w : (tensor<1x9x5x7xf32>, tensor<13x9x1x1xf32>) -> tensor<1x13x5x7xf32>
  %1 = graph.add %0, %b : (tensor<1x13x5x7xf32>, tensor<13x1x1xf32>) -> tensor<1x13x5x7xf32>
  %2 = graph.relu %1 : tensor<1x13x5x7xf32>
  func.return %2 : tensor<1x13x5x7xf32>
}

// -----

// A padded 3x3 of stride 2 with a 4-column output, two images: x zero-padded (a fill, then x
// copied in), then the im2col buffer; one GEMM per image in the ukernel. At 2 threads each
// chunk is one image, its padded copy and im2col buffer cut to that image.
// CHECK-LABEL: func.func @conv2d_0(%0: memref<2x4x7x7xf32>, %1: memref<8x4x3x3xf32>, %2: memref<2x8x4x4xf32>)
// CHECK:         %[[PADDED:.*]] = memref.alloc() : memref<2x4x9x9xf32>
// CHECK:         linalg.generic {{.*}} ins(%0 : memref<2x4x7x7xf32>) outs(%[[PADDED]] : memref<2x4x9x9xf32>)
// CHECK:         %[[COLUMNS:.*]] = memref.alloc() : memref<2x4x3x3x4x4xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d4 * 2) + d2), ((d5 * 2) + d3))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>]{{.*}} ins(%[[PADDED]] : memref<2x4x9x9xf32>) outs(%[[COLUMNS]] : memref<2x4x3x3x4x4xf32>)
// CHECK:         func.call @graphopt_sgemm_rowmajor_2x4x3x3x4x4_8x4x3x3_2x8x4x4(%[[COLUMNS]], %1, %2)
// SPLIT-LABEL: func.func @conv2d_0(
// SPLIT-SAME:    graph.row_chunks = {{\[}}["conv2d_0_rows1", 0 : i64], ["conv2d_0_rows1", 1 : i64]]
// SPLIT:       func.func @conv2d_0_rows1(%0: memref<1x4x7x7xf32>, %1: memref<8x4x3x3xf32>, %2: memref<1x8x4x4xf32>)
// SPLIT:         func.call @graphopt_sgemm_rowmajor_1x4x3x3x4x4_8x4x3x3_1x8x4x4(
func.func @main(%x: tensor<2x4x7x7xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<2x8x4x4xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x7x7xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x4x4xf32>
  func.return %0 : tensor<2x8x4x4xf32>
}

// -----

// A 1x1 of stride 2 copies x's even rows and columns (no padding: no fill); a 3x3 with 9-column
// output rows, and a grouped 3x3, keep the direct ukernel.
// CHECK-LABEL: func.func @conv2d_0(%0: memref<1x6x6x6xf32>, %1: memref<5x6x1x1xf32>, %2: memref<1x5x3x3xf32>)
// CHECK-NEXT:    %[[COLUMNS:.*]] = memref.alloc() : memref<1x6x1x1x3x3xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%0 : memref<1x6x6x6xf32>) outs(%[[COLUMNS]] : memref<1x6x1x1x3x3xf32>)
// CHECK:         func.call @graphopt_sgemm_rowmajor_1x6x1x1x3x3_5x6x1x1_1x5x3x3(%[[COLUMNS]], %1, %2)
// CHECK-LABEL: func.func @conv2d_1(
// CHECK:         func.call @graphopt_sconv_direct_
// CHECK-LABEL: func.func @conv2d_2(
// CHECK:         func.call @graphopt_sconv_direct_
func.func @main(%x: tensor<1x6x6x6xf32>, %w: tensor<5x6x1x1xf32>, %y: tensor<1x6x6x11xf32>, %v: tensor<5x6x3x3xf32>, %u: tensor<4x3x3x3xf32>) -> (tensor<1x5x3x3xf32>, tensor<1x5x4x9xf32>, tensor<1x4x6x6xf32>) {
  %0 = graph.conv2d %x, %w {strides = array<i64: 2, 2>} : (tensor<1x6x6x6xf32>, tensor<5x6x1x1xf32>) -> tensor<1x5x3x3xf32>
  %1 = graph.conv2d %y, %v : (tensor<1x6x6x11xf32>, tensor<5x6x3x3xf32>) -> tensor<1x5x4x9xf32>
  %2 = graph.conv2d %x, %u {groups = 2 : i64, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x6x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0, %1, %2 : tensor<1x5x3x3xf32>, tensor<1x5x4x9xf32>, tensor<1x4x6x6xf32>
}

// -----

// A grouped 1x1 (4 groups of 2 input and 4 output channels) is one GEMM per group in the
// ukernel: the name is a one-group conv's, the groups are x's channels over w's. At 2 threads
// one image splits by groups (2 and 2), each chunk on its groups' channels of x, w, the bias and out.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x8x5x8xf32>, %1: memref<16x2x1x1xf32>, %2: memref<16x1x1xf32>, %3: memref<1x16x5x8xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x8x5x8_16x2x1x1_16x1x1_1x16x5x8(%0, %1, %2, %3)
// CHECK-NEXT:    func.return
// SPLIT-LABEL: func.func @fused_conv2d_add_relu_0(
// SPLIT-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows2", 0 : i64], ["fused_conv2d_add_relu_0_rows2", 2 : i64]]
// SPLIT-SAME:    graph.row_bytes = array<i64: 320, 32, 16, 640>
// SPLIT:       func.func @fused_conv2d_add_relu_0_rows2(%0: memref<1x4x5x8xf32>, %1: memref<8x2x1x1xf32>, %2: memref<8x1x1xf32>, %3: memref<1x8x5x8xf32>)
// SPLIT-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x4x5x8_8x2x1x1_8x1x1_1x8x5x8(%0, %1, %2, %3)
func.func @main(%x: tensor<1x8x5x8xf32>, %w: tensor<16x2x1x1xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x5x8xf32> {
  %0 = graph.conv2d %x, %w {groups = 4 : i64} : (tensor<1x8x5x8xf32>, tensor<16x2x1x1xf32>) -> tensor<1x16x5x8xf32>
  %1 = graph.add %0, %b : (tensor<1x16x5x8xf32>, tensor<16x1x1xf32>) -> tensor<1x16x5x8xf32>
  %2 = graph.relu %1 : tensor<1x16x5x8xf32>
  func.return %2 : tensor<1x16x5x8xf32>
}

// -----

// A conv whose epilogue adds a residual of out's shape (%r, an input of the group) may write out
// over it (`graph.may_overwrite`: argument 4, out, over argument 3, %r): the GEMM's tiles read the
// residual's lines before storing out's where k runs in one block, as 9 here. So may the chunks.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x9x5x7xf32>, %1: memref<13x9x1x1xf32>, %2: memref<13x1x1xf32>, %3: memref<1x13x5x7xf32>, %4: memref<1x13x5x7xf32>)
// CHECK-SAME:    graph.may_overwrite = array<i64: 4, 3>
// CHECK-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.addS0R.maxS1C00000000_1x9x5x7_13x9x1x1_13x1x1_1x13x5x7_1x13x5x7(%0, %1, %2, %3, %4)
// SPLIT-LABEL: func.func @fused_conv2d_add_relu_0_rows5(
// SPLIT-SAME:    graph.may_overwrite = array<i64: 4, 3>
func.func @main(%x: tensor<1x9x5x7xf32>, %r: tensor<1x13x5x7xf32>, %w: tensor<13x9x1x1xf32>, %b: tensor<13x1x1xf32>) -> tensor<1x13x5x7xf32> {
  %0 = graph.conv2d %x, %w : (tensor<1x9x5x7xf32>, tensor<13x9x1x1xf32>) -> tensor<1x13x5x7xf32>
  %1 = graph.add %0, %b : (tensor<1x13x5x7xf32>, tensor<13x1x1xf32>) -> tensor<1x13x5x7xf32>
  %2 = graph.add %1, %r : (tensor<1x13x5x7xf32>, tensor<1x13x5x7xf32>) -> tensor<1x13x5x7xf32>
  %3 = graph.relu %2 : tensor<1x13x5x7xf32>
  func.return %3 : tensor<1x13x5x7xf32>
}

// -----

// With k of 300, more than one block of 256 (`packed_gemm.DEPTH`), out holds partial sums before
// the last block reads the residual: no graph.may_overwrite. Nor where the conv reads the
// residual too (x is %r: a 1x1 of stride 1 reads x in place).
// CHECK-LABEL: func.func @fused_conv2d_add_0(%0: memref<1x300x2x3xf32>, %1: memref<4x300x1x1xf32>, %2: memref<1x4x2x3xf32>, %3: memref<1x4x2x3xf32>)
// CHECK-NOT:     graph.may_overwrite
// CHECK-SAME:    {
// CHECK-LABEL: func.func @fused_conv2d_add_1(%0: memref<1x4x2x3xf32>, %1: memref<4x4x1x1xf32>, %2: memref<1x4x2x3xf32>)
// CHECK-NOT:     graph.may_overwrite
// CHECK-SAME:    {
func.func @main(%x: tensor<1x300x2x3xf32>, %w: tensor<4x300x1x1xf32>, %r: tensor<1x4x2x3xf32>, %v: tensor<4x4x1x1xf32>) -> (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x300x2x3xf32>, tensor<4x300x1x1xf32>) -> tensor<1x4x2x3xf32>
  %1 = graph.add %0, %r : (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>) -> tensor<1x4x2x3xf32>
  %2 = graph.conv2d %r, %v : (tensor<1x4x2x3xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x2x3xf32>
  %3 = graph.add %2, %r : (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>) -> tensor<1x4x2x3xf32>
  func.return %1, %3 : tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>
}
