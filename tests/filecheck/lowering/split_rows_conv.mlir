// split-rows on convolutions of one image: a conv ukernel call and its epilogue run as chunks
// of output channels (a kernel of one image has one row). A conv of one group on the direct
// ukernel runs by output rows where it has two of the ukernel's row tiles or more (the first
// case), else by output channels: it slices w, out and the epilogue's operands by output
// channel, chunks starting at multiples of 8 (the direct ukernel's register tile), and each chunk
// copies all of x into its own phases (conv_gemm.mlir: the convs that run as the GEMM); a grouped
// conv slices by groups, x (through its phases) too; a depthwise one by input channels; the
// lanes conv of one register tile of output channels or whose x outweighs half its w, and the
// Winograd conv of many positions per output channel, run by output rows too (the last cases).

// RUN: graph-opt %s --split-input-file --fuse --lower-to-linalg | graph-opt --split-input-file -p 'split-rows{threads=2 min-work=0}' | filecheck %s

// 8->12 channels at 7 x 9, on the direct ukernel: by output rows, from a multiple of its row
// tiles (3 rows of one vector with AVX-512, one row without: 6 + 1 or 4 + 3). Each chunk is a
// function of its own, pads the rows of x its output rows read into its own phases and calls the
// ukernel for its rows (_oh<first>to<end>) with all 12 channels, every argument passed whole.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x8x7x9xf32>, %1: memref<12x8x3x3xf32>, %2: memref<12x1x1xf32>, %3: memref<1x12x7x9xf32>, %4: memref<1x12x7x9xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_oh0to[[END:[0-9]+]]", 0 : i64], ["fused_conv2d_add_relu_0_oh[[END]]to7", [[END]] : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 0, 0, 0, 0>
// CHECK:       func.func @fused_conv2d_add_relu_0_oh0to[[END]](%0: memref<1x8x7x9xf32>, %1: memref<12x8x3x3xf32>, %2: memref<12x1x1xf32>, %3: memref<1x12x7x9xf32>, %4: memref<1x12x7x9xf32>)
// CHECK-NEXT:    %[[PHASES:.*]] = memref.alloc() : memref<1x8x1x1x117xf32>
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_eaddAP0.addS0R.maxS1C00000000_1x8x1x1x117_12x8x3x3_12x1x1_1x12x7x9_1x12x7x9_oh0to[[END]](%[[PHASES]], %1, %2, %3, %4)
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func @fused_conv2d_add_relu_0_oh[[END]]to7(
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_eaddAP0.addS0R.maxS1C00000000_1x8x1x1x117_12x8x3x3_12x1x1_1x12x7x9_1x12x7x9_oh[[END]]to7(
func.func @main(%x: tensor<1x8x7x9xf32>, %w: tensor<12x8x3x3xf32>, %b: tensor<12x1x1xf32>, %r: tensor<1x12x7x9xf32>) -> tensor<1x12x7x9xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x7x9xf32>, tensor<12x8x3x3xf32>) -> tensor<1x12x7x9xf32>
  %1 = graph.add %0, %b : (tensor<1x12x7x9xf32>, tensor<12x1x1xf32>) -> tensor<1x12x7x9xf32>
  %2 = graph.add %1, %r : (tensor<1x12x7x9xf32>, tensor<1x12x7x9xf32>) -> tensor<1x12x7x9xf32>
  %3 = graph.relu %2 : tensor<1x12x7x9xf32>
  func.return %3 : tensor<1x12x7x9xf32>
}

// -----

// The same at one output row (1 x 9), less than two row tiles on any host: by output channels,
// 8 and 4. Bytes per channel: w 8 * 3 * 3 * 4 = 288, bias 4, residual and out 9 * 4 = 36.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x8x1x9xf32>, %1: memref<12x8x3x3xf32>, %2: memref<12x1x1xf32>, %3: memref<1x12x1x9xf32>, %4: memref<1x12x1x9xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows8", 0 : i64], ["fused_conv2d_add_relu_0_rows4", 8 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 288, 4, 36, 36>
// CHECK:       func.func @fused_conv2d_add_relu_0_rows4(%0: memref<1x8x1x9xf32>, %1: memref<4x8x3x3xf32>, %2: memref<4x1x1xf32>, %3: memref<1x4x1x9xf32>, %4: memref<1x4x1x9xf32>)
// CHECK-NEXT:    %[[PHASES:.*]] = memref.alloc() : memref<1x8x1x1x[[LENGTH:[0-9]+]]xf32>
// The bias and residual are the tile epilogue's operands, sliced with w and out (no loop nest after the call).
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_eaddAP0.addS0R.maxS1C00000000_1x8x1x1x[[LENGTH]]_4x8x3x3_4x1x1_1x4x1x9_1x4x1x9(%[[PHASES]], %1, %2, %3, %4)
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// CHECK:       func.func @fused_conv2d_add_relu_0_rows8(%0: memref<1x8x1x9xf32>, %1: memref<8x8x3x3xf32>, %2: memref<8x1x1xf32>, %3: memref<1x8x1x9xf32>, %4: memref<1x8x1x9xf32>)
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_eaddAP0.addS0R.maxS1C00000000_1x8x1x1x[[LENGTH]]_8x8x3x3_8x1x1_1x8x1x9_1x8x1x9(
func.func @main(%x: tensor<1x8x1x9xf32>, %w: tensor<12x8x3x3xf32>, %b: tensor<12x1x1xf32>, %r: tensor<1x12x1x9xf32>) -> tensor<1x12x1x9xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x1x9xf32>, tensor<12x8x3x3xf32>) -> tensor<1x12x1x9xf32>
  %1 = graph.add %0, %b : (tensor<1x12x1x9xf32>, tensor<12x1x1xf32>) -> tensor<1x12x1x9xf32>
  %2 = graph.add %1, %r : (tensor<1x12x1x9xf32>, tensor<1x12x1x9xf32>) -> tensor<1x12x1x9xf32>
  %3 = graph.relu %2 : tensor<1x12x1x9xf32>
  func.return %3 : tensor<1x12x1x9xf32>
}

// -----

// 4 groups of 4 input and 2 output channels: chunks of 2 groups; x's 4 channels of a group
// (4 * 8 * 8 * 4 bytes) go into the chunk's phases.
// CHECK-LABEL: func.func @conv2d_0(%0: memref<1x16x8x8xf32>, %1: memref<8x4x3x3xf32>, %2: memref<1x8x8x8xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["conv2d_0_rows2", 0 : i64], ["conv2d_0_rows2", 2 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 1024, 288, 512>
// CHECK:       func.func @conv2d_0_rows2(%0: memref<1x8x8x8xf32>, %1: memref<4x4x3x3xf32>, %2: memref<1x4x8x8xf32>)
// CHECK-NEXT:    memref.alloc() : memref<1x8x1x1x{{[0-9]+}}xf32>
// CHECK:         func.call @graphopt_sconv_direct_r10_d1x1_1x8x1x1x{{[0-9]+}}_4x4x3x3_1x4x8x8(
func.func @main(%x: tensor<1x16x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x16x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
  func.return %0 : tensor<1x8x8x8xf32>
}

// -----

// Depthwise, channel multiplier 2, stride 2: chunks of 4 of x's 8 channels (no copy of x).
// CHECK-LABEL: func.func @conv2d_0(%0: memref<1x8x10x12xf32>, %1: memref<16x1x3x3xf32>, %2: memref<1x16x5x6xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["conv2d_0_rows4", 0 : i64], ["conv2d_0_rows4", 4 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 480, 72, 240>
// CHECK:       func.func @conv2d_0_rows4(%0: memref<1x4x10x12xf32>, %1: memref<8x1x3x3xf32>, %2: memref<1x8x5x6xf32>)
// CHECK-NEXT:    func.call @graphopt_sconv_depthwise_s2x2_d1x1_p1x1_1x4x10x12_8x1x3x3_1x8x5x6(%0, %1, %2)
func.func @main(%x: tensor<1x8x10x12xf32>, %w: tensor<16x1x3x3xf32>) -> tensor<1x16x5x6xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 8 : i64} : (tensor<1x8x10x12xf32>, tensor<16x1x3x3xf32>) -> tensor<1x16x5x6xf32>
  func.return %0 : tensor<1x16x5x6xf32>
}

// -----

// An f64 conv (a loop nest, no ukernel) of one image stays whole.
// CHECK-LABEL: func.func @conv2d_0(
// CHECK-NOT:     graph.row_chunks
// CHECK:         func.return
func.func @main(%x: tensor<1x8x10x12xf64>, %w: tensor<16x8x3x3xf64>) -> tensor<1x16x8x10xf64> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x10x12xf64>, tensor<16x8x3x3xf64>) -> tensor<1x16x8x10xf64>
  func.return %0 : tensor<1x16x8x10xf64>
}

// -----

// Two images split by rows with the same tile epilogue: x (through its phases), the residual and
// out are sliced by image (8 * 7 * 9 * 4 and 12 * 7 * 9 * 4 bytes), w and the bias read whole.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<2x8x7x9xf32>, %1: memref<12x8x3x3xf32>, %2: memref<12x1x1xf32>, %3: memref<2x12x7x9xf32>, %4: memref<2x12x7x9xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows1", 0 : i64], ["fused_conv2d_add_relu_0_rows1", 1 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 2016, 0, 0, 3024, 3024>
// CHECK:       func.func @fused_conv2d_add_relu_0_rows1(%0: memref<1x8x7x9xf32>, %1: memref<12x8x3x3xf32>, %2: memref<12x1x1xf32>, %3: memref<1x12x7x9xf32>, %4: memref<1x12x7x9xf32>)
// CHECK:         func.call @graphopt_sconv_direct_r11_d1x1_eaddAP0.addS0R.maxS1C00000000_1x8x1x1x117_12x8x3x3_12x1x1_1x12x7x9_1x12x7x9(%{{.*}}, %1, %2, %3, %4)
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
func.func @main(%x: tensor<2x8x7x9xf32>, %w: tensor<12x8x3x3xf32>, %b: tensor<12x1x1xf32>, %r: tensor<2x12x7x9xf32>) -> tensor<2x12x7x9xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x8x7x9xf32>, tensor<12x8x3x3xf32>) -> tensor<2x12x7x9xf32>
  %1 = graph.add %0, %b : (tensor<2x12x7x9xf32>, tensor<12x1x1xf32>) -> tensor<2x12x7x9xf32>
  %2 = graph.add %1, %r : (tensor<2x12x7x9xf32>, tensor<2x12x7x9xf32>) -> tensor<2x12x7x9xf32>
  %3 = graph.relu %2 : tensor<2x12x7x9xf32>
  func.return %3 : tensor<2x12x7x9xf32>
}

// -----

// A 1x1 of 16 output channels (at most ukernels.POSITION_SPLIT_CHANNELS) run as the GEMM, on
// 24 x 24 = 576 positions: chunks of output positions, each from a multiple of packed_gemm.PANEL
// (288 + 288 with panels of 16, 320 + 256 with 64). x and out are passed from the chunk's first
// position (4 bytes a position), whole in type; w and the bias whole; the ukernel is called for
// the chunk's columns (its name ends in _n<columns>).
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x32x24x24xf32>, %1: memref<16x32x1x1xf32>, %2: memref<16x1x1xf32>, %3: memref<1x16x24x24xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows[[FIRST:[0-9]+]]", 0 : i64], ["fused_conv2d_add_relu_0_rows{{[0-9]+}}", [[FIRST]] : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 4, 0, 0, 4>
// CHECK:       func.func @fused_conv2d_add_relu_0_rows[[FIRST]](%0: memref<1x32x24x24xf32>, %1: memref<16x32x1x1xf32>, %2: memref<16x1x1xf32>, %3: memref<1x16x24x24xf32>)
// CHECK-NEXT:    func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x32x24x24_16x32x1x1_16x1x1_1x16x24x24_n[[FIRST]](%0, %1, %2, %3)
func.func @main(%x: tensor<1x32x24x24xf32>, %w: tensor<16x32x1x1xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x24x24xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x24x24xf32>, tensor<16x32x1x1xf32>) -> tensor<1x16x24x24xf32>
  %1 = graph.add %0, %b : (tensor<1x16x24x24xf32>, tensor<16x1x1xf32>) -> tensor<1x16x24x24xf32>
  %2 = graph.relu %1 : tensor<1x16x24x24xf32>
  func.return %2 : tensor<1x16x24x24xf32>
}

// -----

// The same with 24 output channels and 16 input channels, fewer than
// ukernels.POSITION_SPLIT_ANY_CHANNELS_DEPTH (from which AVX-512 hosts split any count of
// output channels by positions): by output channels (12 + 12), each chunk reading all of x.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x16x24x24xf32>, %1: memref<24x16x1x1xf32>, %2: memref<24x1x1xf32>, %3: memref<1x24x24x24xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows12", 0 : i64], ["fused_conv2d_add_relu_0_rows12", 12 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 64, 4, 2304>
func.func @main(%x: tensor<1x16x24x24xf32>, %w: tensor<24x16x1x1xf32>, %b: tensor<24x1x1xf32>) -> tensor<1x24x24x24xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x16x24x24xf32>, tensor<24x16x1x1xf32>) -> tensor<1x24x24x24xf32>
  %1 = graph.add %0, %b : (tensor<1x24x24x24xf32>, tensor<24x1x1xf32>) -> tensor<1x24x24x24xf32>
  %2 = graph.relu %1 : tensor<1x24x24x24xf32>
  func.return %2 : tensor<1x24x24x24xf32>
}

// -----

// A stem run as the GEMM on an im2col copy (3->64 3x3/2 at 67, no padding: 33 x 33 positions,
// 17 a channel, at least ukernels.ROW_SPLIT_POSITIONS_PER_CHANNEL): chunks of whole output rows,
// 20 + 13 (from multiples of 4 rows: x's rows of a unit are 2 * 67 * 4 = 536 bytes, out's 132).
// x and out are passed from the chunk's first row, whole in type; w and the bias whole. Each
// chunk copies the im2col columns of its rows only, into its own copy, and calls the ukernel
// for them, all 64 channels (_n<rows x 33>).
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x3x67x67xf32>, %1: memref<64x3x3x3xf32>, %2: memref<64x1x1xf32>, %3: memref<1x64x33x33xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows20", 0 : i64], ["fused_conv2d_add_relu_0_rows13", 20 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 536, 0, 0, 132>
// CHECK:       func.func @fused_conv2d_add_relu_0_rows13(%0: memref<1x3x67x67xf32>, %1: memref<64x3x3x3xf32>, %2: memref<64x1x1xf32>, %3: memref<1x64x33x33xf32>)
// CHECK-NEXT:    %[[COLUMNS:.*]] = memref.alloc() : memref<1x3x3x3x13x33xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d4 * 2) + d2), ((d5 * 2) + d3))>, {{.*}}} ins(%0 : memref<1x3x67x67xf32>) outs(%[[COLUMNS]] : memref<1x3x3x3x13x33xf32>)
// CHECK:         func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x3x3x3x33x33_64x3x3x3_64x1x1_1x64x33x33_n429(%[[COLUMNS]], %1, %2, %3)
// CHECK:       func.func @fused_conv2d_add_relu_0_rows20(
// CHECK-NEXT:    %[[COLUMNS:.*]] = memref.alloc() : memref<1x3x3x3x20x33xf32>
// CHECK:         func.call @graphopt_sgemm_rowmajor_eaddAP0.maxS0C00000000_1x3x3x3x33x33_64x3x3x3_64x1x1_1x64x33x33_n660(%[[COLUMNS]], %1, %2, %3)
func.func @main(%x: tensor<1x3x67x67xf32>, %w: tensor<64x3x3x3xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x33x33xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : (tensor<1x3x67x67xf32>, tensor<64x3x3x3xf32>) -> tensor<1x64x33x33xf32>
  %1 = graph.add %0, %b : (tensor<1x64x33x33xf32>, tensor<64x1x1xf32>) -> tensor<1x64x33x33xf32>
  %2 = graph.relu %1 : tensor<1x64x33x33xf32>
  func.return %2 : tensor<1x64x33x33xf32>
}

// -----

// The same stem at 37 with padding: its im2col copy reads a padded copy of x (a temporary), not
// x: by output channels (32 + 32), each chunk copying all of the im2col buffer.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x3x37x37xf32>, %1: memref<64x3x3x3xf32>, %2: memref<64x1x1xf32>, %3: memref<1x64x19x19xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows32", 0 : i64], ["fused_conv2d_add_relu_0_rows32", 32 : i64]]
func.func @main(%x: tensor<1x3x37x37xf32>, %w: tensor<64x3x3x3xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x19x19xf32> {
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>} : (tensor<1x3x37x37xf32>, tensor<64x3x3x3xf32>) -> tensor<1x64x19x19xf32>
  %1 = graph.add %0, %b : (tensor<1x64x19x19xf32>, tensor<64x1x1xf32>) -> tensor<1x64x19x19xf32>
  %2 = graph.relu %1 : tensor<1x64x19x19xf32>
  func.return %2 : tensor<1x64x19x19xf32>
}

// -----

// The lanes conv of one register tile of output channels (16: BLOCKS blocks of 16 hold them on
// any host) runs by output rows, 3 + 3 (super-tiles of one row of 28): each chunk is a function
// of its own, pads the rows of x that its output rows read into its own phases and calls the
// ukernel for its rows (the name ends in _oh<first>to<end>) on every argument passed whole.
// Rows 3 to 5 read padded rows 3 to 7, x's rows 2 to 5: the copy's loop over x's rows runs 4
// times from row 2 (an extent of 4 bounds d2), and of the fills around x the
// one above x's first row is left out.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x4x6x28xf32>, %1: memref<16x1x1xf32>, %2: memref<1x4x3x3x16xf32> {{.*}}, %3: memref<1x16x6x28xf32>)
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_oh0to3", 0 : i64], ["fused_conv2d_add_relu_0_oh3to6", 3 : i64]]
// CHECK-SAME:    graph.row_bytes = array<i64: 0, 0, 0, 0>
// CHECK:       func.func @fused_conv2d_add_relu_0_oh0to3(%0: memref<1x4x6x28xf32>, %1: memref<16x1x1xf32>, %2: memref<1x4x3x3x16xf32>, %3: memref<1x16x6x28xf32>)
// CHECK-NEXT:    %[[PHASES:.*]] = memref.alloc() : memref<1x4x1x1x{{[0-9]+}}xf32>
// CHECK:         func.call @graphopt_sconv_lanes_r30_d1x1_{{.*}}_1x16x6x28_oh0to3(%[[PHASES]], %2, %1, %3)
// CHECK:       func.func @fused_conv2d_add_relu_0_oh3to6(
// CHECK-COUNT-2: linalg.generic {{.*}} outs(%[[PHASES:.*]] : memref<1x4x1x1x{{[0-9]+}}xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         %[[EXTENT:.*]] = memref.alloc() : memref<4xi64>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 2), d3)>, affine_map<(d0, d1, d2, d3) -> (d2)>, {{.*}} ins(%0, %[[EXTENT]] : memref<1x4x6x28xf32>, memref<4xi64>) outs(%[[PHASES]]
// CHECK:         func.call @graphopt_sconv_lanes_r30_d1x1_{{.*}}_1x16x6x28_oh3to6(
func.func @main(%x: tensor<1x4x6x28xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x6x28xf32> {
  %w = graph.constant dense<0.5> : tensor<16x4x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x6x28xf32>, tensor<16x4x3x3xf32>) -> tensor<1x16x6x28xf32>
  %1 = graph.add %0, %b : (tensor<1x16x6x28xf32>, tensor<16x1x1xf32>) -> tensor<1x16x6x28xf32>
  %2 = graph.relu %1 : tensor<1x16x6x28xf32>
  func.return %2 : tensor<1x16x6x28xf32>
}

// -----

// A Winograd conv of many output positions per output channel (32 x 32 = 1024 for 64 channels:
// ukernels.WINOGRAD_ROW_SPLIT_POSITIONS_PER_CHANNEL) runs by output rows too, 16 + 16: each chunk
// zeroes and fills the rows of the padded x (35 x 35) that its tiles read and has a scratch
// buffer of its own. Rows 0 to 15 read padded rows 0 to 18 (their tiles' 0 to 17, and 1 that
// the last vectors load into): 19 rows zeroed (the fill runs over them flat: 665 elements)
// and x's rows 0 to 17 copied; rows 16 to 31 padded rows 16 to 34: x's rows 15 to 31.
// CHECK-LABEL: func.func @fused_conv2d_relu_0(
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_relu_0_oh0to16", 0 : i64], ["fused_conv2d_relu_0_oh16to32", 16 : i64]]
// CHECK:       func.func @fused_conv2d_relu_0_oh0to16(
// CHECK:         memref.alloc() : memref<665xi64>
// CHECK:         affine_map<(d0, d1, d2) -> (d0, d1, ((d2 floordiv 1) floordiv 35), ((d2 floordiv 1) mod 35))>
// CHECK:         memref.alloc() : memref<18xi64>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 floordiv 1), d3)>
// CHECK:         func.call @graphopt_sconv_wino_{{.*}}_1x64x32x32_oh0to16(
// CHECK:       func.func @fused_conv2d_relu_0_oh16to32(
// CHECK:         memref.alloc() : memref<665xi64>
// CHECK:         affine_map<(d0, d1, d2) -> (d0, d1, ((d2 + 560) floordiv 35), ((d2 + 560) mod 35))>
// CHECK:         memref.alloc() : memref<17xi64>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 15), d3)>
// CHECK:         func.call @graphopt_sconv_wino_{{.*}}_1x64x32x32_oh16to32(
func.func @main(%x: tensor<1x32x32x32xf32>) -> tensor<1x64x32x32xf32> {
  %w = graph.constant dense<0.5> : tensor<64x32x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x32x32x32xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x32x32xf32>
  %1 = graph.relu %0 : tensor<1x64x32x32xf32>
  func.return %1 : tensor<1x64x32x32xf32>
}

// -----

// A lanes conv of more register tiles of output channels (64) whose phases hold more floats than
// half its packed w (ukernels.LANES_ROW_SPLIT_X_OVER_W: 2 x 14 x 30 against 64 x 2 x 9 / 2) runs by
// output rows too, 6 + 6: a chunk of rows reads its share of x and all of w.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x2x12x28xf32>,
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_oh0to6", 0 : i64], ["fused_conv2d_add_relu_0_oh6to12", 6 : i64]]
// CHECK:         func.call @graphopt_sconv_lanes_r30_d1x1_{{.*}}_1x64x12x28_oh0to6(
// CHECK:         func.call @graphopt_sconv_lanes_r30_d1x1_{{.*}}_1x64x12x28_oh6to12(
func.func @main(%x: tensor<1x2x12x28xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x12x28xf32> {
  %w = graph.constant dense<0.5> : tensor<64x2x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x12x28xf32>, tensor<64x2x3x3xf32>) -> tensor<1x64x12x28xf32>
  %1 = graph.add %0, %b : (tensor<1x64x12x28xf32>, tensor<64x1x1xf32>) -> tensor<1x64x12x28xf32>
  %2 = graph.relu %1 : tensor<1x64x12x28xf32>
  func.return %2 : tensor<1x64x12x28xf32>
}

// -----

// The same with 8 input channels at 6 rows: the phases (8 x 8 x 30) hold fewer floats than half
// of w (64 x 8 x 9 / 2), so by output channels, 32 + 32, each chunk on all of x and half of w.
// CHECK-LABEL: func.func @fused_conv2d_add_relu_0(%0: memref<1x8x6x28xf32>,
// CHECK-SAME:    graph.row_chunks = {{\[}}["fused_conv2d_add_relu_0_rows32", 0 : i64], ["fused_conv2d_add_relu_0_rows32", 32 : i64]]
// CHECK-NOT:     _oh
func.func @main(%x: tensor<1x8x6x28xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x6x28xf32> {
  %w = graph.constant dense<0.5> : tensor<64x8x3x3xf32>
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x8x6x28xf32>, tensor<64x8x3x3xf32>) -> tensor<1x64x6x28xf32>
  %1 = graph.add %0, %b : (tensor<1x64x6x28xf32>, tensor<64x1x1xf32>) -> tensor<1x64x6x28xf32>
  %2 = graph.relu %1 : tensor<1x64x6x28xf32>
  func.return %2 : tensor<1x64x6x28xf32>
}
