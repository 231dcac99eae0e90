// One case per verifier error of the graph dialect: each names the op, the operand or
// attribute and the shapes, at the op's file:line:col.

// RUN: graph-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @broadcast(%a: tensor<4x8xf32>, %b: tensor<7xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.add: operands 'a' [4, 8], 'b' [7] are not broadcast-compatible
  %0 = graph.add %a, %b : (tensor<4x8xf32>, tensor<7xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @element_mismatch(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.mul: operand 'b' tensor<4xf64> has element type f64, expected f32
  %0 = graph.mul %a, %b : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  func.return
}

// -----

func.func @wrong_result_type(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.sub: result type tensor<8xf32> does not match the inferred tensor<4x8xf32>
  %0 = graph.sub %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return
}

// -----

func.func @unary_result_type(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 2]]:3: error: graph.neg: result 'result' at position 0 does not verify:
  // CHECK-NEXT: attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf64>
  %0 = "graph.neg"(%x) : (tensor<4xf32>) -> tensor<4xf64>
  func.return
}

// -----

func.func @not_a_tensor(%x: f32) {
  // CHECK: diagnostics.mlir:[[# @LINE + 2]]:3: error: graph.add: operand 'a' at position 0 does not verify:
  // CHECK-NEXT: f32 should be of base attribute tensor
  %0 = "graph.add"(%x, %x) : (f32, f32) -> f32
  func.return
}

// -----

func.func @dynamic_dim(%x: tensor<?x4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.relu: operand #0 tensor<?x4xf32> has a dynamic dimension; graph ops need static shapes
  %0 = graph.relu %x : tensor<?x4xf32>
  func.return
}

// -----

func.func @unsupported_element(%x: tensor<4xbf16>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.abs: operand #0 tensor<4xbf16> has unsupported element type bf16
  %0 = graph.abs %x : tensor<4xbf16>
  func.return
}

// -----

func.func @unsupported_result_element(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.cast: result tensor<4xi8> has unsupported element type i8
  %0 = graph.cast %x : (tensor<4xf32>) -> tensor<4xi8>
  func.return
}

// -----

func.func @float_only_unary(%x: tensor<4xi32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.exp: operand 'x' tensor<4xi32>: expects a float element type
  %0 = graph.exp %x : tensor<4xi32>
  func.return
}

// -----

func.func @float_only_binary(%a: tensor<4xi64>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.div: operand 'a' tensor<4xi64>: expects a float element type
  %0 = graph.div %a, %a : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return
}

// -----

func.func @float_only_reduction(%x: tensor<4xi32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.reduce_mean: operand 'x' tensor<4xi32>: expects a float element type
  %0 = graph.reduce_mean %x {axes = array<i64: 0>} : (tensor<4xi32>) -> tensor<i32>
  func.return
}

// -----

func.func @i1_operand(%x: tensor<4xi1>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.relu: operand 'x' tensor<4xi1>: i1 is not supported (use graph.cast first)
  %0 = graph.relu %x : tensor<4xi1>
  func.return
}

// -----

func.func @missing_attribute(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.leaky_relu: attribute 'alpha' expected in operation 'graph.leaky_relu'
  %0 = graph.leaky_relu %x : tensor<4xf32>
  func.return
}

// -----

func.func @attribute_type(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gelu: 1 : i64 should be of base attribute string
  %0 = graph.gelu %x {approximate = 1} : tensor<4xf32>
  func.return
}

// -----

func.func @gelu_approximate(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gelu: approximate must be "none" or "tanh"
  %0 = graph.gelu %x {approximate = "fast"} : tensor<4xf32>
  func.return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.cast: result tensor<2x2xi32> must have the shape of 'x' tensor<4xf32>
  %0 = graph.cast %x : (tensor<4xf32>) -> tensor<2x2xi32>
  func.return
}

// -----

func.func @cmp_predicate(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.cmp: predicate must be one of eq, ne, lt, le, gt, ge
  %0 = graph.cmp %a, %a {predicate = "less"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return
}

// -----

func.func @select_cond(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.select: operand 'cond' tensor<4xf32> must have element type i1
  %0 = graph.select %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @select_broadcast(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.select: operands 'cond' [3], 'a' [4], 'b' [4] are not broadcast-compatible
  %0 = graph.select %c, %a, %a : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @batch_norm_params(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %bad: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.batch_norm: operand 'mean' tensor<4xf32> must have shape [3] (the channels of 'x')
  %0 = graph.batch_norm %x, %c, %c, %bad, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return
}

// -----

func.func @batch_norm_rank(%x: tensor<3xf32>, %c: tensor<3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.batch_norm: operand 'x' tensor<3xf32> must have rank >= 2 (N, C, ...)
  %0 = graph.batch_norm %x, %c, %c, %c, %c : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.reshape: cannot reshape [2, 3] (6 elements) to [7] (7 elements)
  %0 = graph.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  func.return
}

// -----

func.func @reshape_element(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.reshape: result tensor<6xf64> must keep the element type of tensor<2x3xf32>
  %0 = graph.reshape %x : (tensor<2x3xf32>) -> tensor<6xf64>
  func.return
}

// -----

func.func @broadcast_to(%x: tensor<3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.broadcast_to: input [3] cannot be broadcast to [4, 2]
  %0 = graph.broadcast_to %x : (tensor<3xf32>) -> tensor<4x2xf32>
  func.return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.transpose: perm [1, 1] is not a permutation of 2 axes
  %0 = graph.transpose %x {perm = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  func.return
}

// -----

func.func @slice_arity(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.slice: starts has 1 entries, input has rank 2
  %0 = graph.slice %x {starts = array<i64: 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @slice_steps(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.slice: steps [1, 0] must be positive
  %0 = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.concat: input #1 [3, 3] does not match input #0 [2, 3] outside axis 1
  %0 = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  func.return
}

// -----

func.func @concat_elements(%a: tensor<2x3xf32>, %b: tensor<2x3xi32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.concat: operand '#1' tensor<2x3xi32> has element type i32, expected f32
  %0 = graph.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.concat: axis 2 is out of range for rank 2
  %0 = graph.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  func.return
}

// -----

func.func @pad_arity(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.pad: pads has 2 entries, expected 4 (begins then ends)
  %0 = graph.pad %x {pads = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @pad_negative(%x: tensor<2x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.pad: pads [0, -1, 0, 0] must be non-negative
  %0 = graph.pad %x {pads = array<i64: 0, -1, 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  func.return
}

// -----

func.func @gather_index_type(%x: tensor<5x3xf32>, %i: tensor<2xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gather: operand 'indices' tensor<2xf32> must have element type i32 or i64
  %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @gather_axis(%x: tensor<5x3xf32>, %i: tensor<2xi64>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gather: axis -3 is out of range for rank 2
  %0 = graph.gather %x, %i {axis = -3 : i64} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @reduce_axis_range(%x: tensor<4x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.reduce_sum: axis 2 is out of range for rank 2
  %0 = graph.reduce_sum %x {axes = array<i64: 2>} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @reduce_axis_repeat(%x: tensor<4x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.reduce_max: axes [1, -1] repeat an axis
  %0 = graph.reduce_max %x {axes = array<i64: 1, -1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.softmax: axis 2 is out of range for rank 2
  %0 = graph.softmax %x {axis = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @layer_norm_params(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.layer_norm: operand 'scale' tensor<4xf32> must have the normalized shape [8]
  %0 = graph.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @matmul_contraction(%a: tensor<4x8xf32>, %b: tensor<7x16xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.matmul: contraction mismatch: 'a' [4, 8] has K=8, 'b' [7, 16] has K=7
  %0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<7x16xf32>) -> tensor<4x16xf32>
  func.return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x16xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.matmul: operands must have rank >= 2, got 'a' [8] and 'b' [8, 16]
  %0 = graph.matmul %a, %b : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<16xf32>
  func.return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.matmul: operands 'a batch' [2], 'b batch' [3] are not broadcast-compatible
  %0 = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>
  func.return
}

// -----

func.func @conv2d_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: 'w' [6, 3, 3, 3] expects 3 input channels, 'x' [1, 4, 8, 8] has 4
  %0 = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}

// -----

func.func @conv2d_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: groups=3 must divide input channels 4 and output channels 6
  %0 = graph.conv2d %x, %w {groups = 3 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}

// -----

func.func @conv2d_rank(%x: tensor<4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: expects 'x' [N, C, H, W] and 'w' [O, C/groups, KH, KW], got [4, 8, 8] and [6, 4, 3, 3]
  %0 = graph.conv2d %x, %w : (tensor<4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<6x6x6xf32>
  func.return
}

// -----

func.func @conv2d_strides(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: strides has 1 entries, expected 2
  %0 = graph.conv2d %x, %w {strides = array<i64: 2>} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  func.return
}

// -----

func.func @conv2d_padding(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: padding [1, 1, -1, 1] must be >= 0
  %0 = graph.conv2d %x, %w {padding = array<i64: 1, 1, -1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x8xf32>
  func.return
}

// -----

func.func @conv2d_window(%x: tensor<1x4x2x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.conv2d: window of extent 3 does not fit input of size 2 padded to 2
  %0 = graph.conv2d %x, %w : (tensor<1x4x2x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x0x6xf32>
  func.return
}

// -----

func.func @pool_kernel(%x: tensor<1x4x8x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.max_pool2d: kernel has 3 entries, expected 2
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
  func.return
}

// -----

func.func @pool_padding(%x: tensor<1x4x8x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.avg_pool2d: padding [2, 0, 0, 0] must be smaller than kernel [2, 2]
  %0 = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, padding = array<i64: 2, 0, 0, 0>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x9x7xf32>
  func.return
}

// -----

func.func @pool_rank(%x: tensor<4x8x8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.max_pool2d: expects 'x' [N, C, H, W], got [4, 8, 8]
  %0 = graph.max_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<4x8x8xf32>) -> tensor<4x7x7xf32>
  func.return
}

// -----

func.func @fused_block_args(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.fused 'g': block arguments (tensor<8xf32>) must match the inputs (tensor<4xf32>)
  %0 = graph.fused(%a) {name = "g"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<8xf32>):
    %y = graph.relu %x : tensor<8xf32>
    graph.yield %y : tensor<8xf32>
  }
  func.return
}

// -----

func.func @fused_yield(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.fused 'g': yields (tensor<4xf32>) but returns (tensor<4xf64>)
  %0 = graph.fused(%a) {name = "g"} : (tensor<4xf32>) -> tensor<4xf64> {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : tensor<4xf32>
    graph.yield %y : tensor<4xf32>
  }
  func.return
}

// -----

func.func @fused_mode(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.fused 'g': mode must be "compile" or "fallback"
  %0 = graph.fused(%a) {name = "g", mode = "eager"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @fused_no_results(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.fused 'g': must return at least one value
  graph.fused(%a) {name = "g"} : (tensor<4xf32>) -> () {
  ^bb0(%x: tensor<4xf32>):
    graph.yield : 
  }
  func.return
}

// -----

func.func @fused_terminator(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.fused 'g': body must end with graph.yield
  %0 = graph.fused(%a) {name = "g"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = graph.relu %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @yield_outside_fused(%a: tensor<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.yield: 'graph.yield' expects parent op 'graph.fused'
  graph.yield %a : tensor<4xf32>
}

// -----

func.func @gather_constant_index_out_of_range(%x: tensor<3x2xf32>) {
  %i = graph.constant dense<[1, 7]> : tensor<2xi64>
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gather: constant index 7 is out of range [-3, 3) for axis 0
  %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  func.return
}

// -----

func.func @gather_constant_negative_index_out_of_range(%x: tensor<3x2xf32>) {
  %i = graph.constant dense<-3> : tensor<i32>
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gather: constant index -3 is out of range [-2, 2) for axis -1
  %0 = graph.gather %x, %i {axis = -1 : i64} : (tensor<3x2xf32>, tensor<i32>) -> tensor<3xf32>
  func.return
}

// -----

func.func @gather_from_empty_axis(%x: tensor<0x2xf32>, %i: tensor<4xi64>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.gather: cannot take indices from axis 0 of size 0
  %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<0x2xf32>, tensor<4xi64>) -> tensor<4x2xf32>
  func.return
}

// -----

func.func @more_elements_than_i64_indexes(%x: tensor<18446744073709551616xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: graph.neg: operand #0 tensor<18446744073709551616xf32> has more than 2^63 - 1 elements (compiled code indexes with i64)
  %0 = graph.neg %x : tensor<18446744073709551616xf32>
  func.return
}
