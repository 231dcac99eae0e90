// Every op of the graph dialect, with every element type, parsed and printed back in custom
// form and through the generic form; attributes with defaults are left out and stay out.

// RUN: graph-opt %s | graph-opt | filecheck %s
// RUN: graph-opt %s --print-op-generic | graph-opt | filecheck %s
// RUN: graph-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @elementwise(
// CHECK-NEXT:  %splat = graph.constant dense<1.500000e+00> : tensor<4x8xf32>
// CHECK-NEXT:  %full = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-NEXT:  %bools = graph.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:  %half = graph.constant dense<[5.000000e-01, 2.000000e+00]> : tensor<2xf16>
// CHECK-NEXT:  %neg = graph.neg %x : tensor<4x8xf32>
// CHECK-NEXT:  %abs = graph.abs %j : tensor<3xi32>
// CHECK-NEXT:  %exp = graph.exp %x : tensor<4x8xf32>
// CHECK-NEXT:  %log = graph.log %d : tensor<2xf64>
// CHECK-NEXT:  %sqrt = graph.sqrt %h : tensor<2xf16>
// CHECK-NEXT:  %rsqrt = graph.rsqrt %x : tensor<4x8xf32>
// CHECK-NEXT:  %reciprocal = graph.reciprocal %x : tensor<4x8xf32>
// CHECK-NEXT:  %tanh = graph.tanh %x : tensor<4x8xf32>
// CHECK-NEXT:  %sigmoid = graph.sigmoid %x : tensor<4x8xf32>
// CHECK-NEXT:  %relu = graph.relu %i : tensor<3xi64>
// CHECK-NEXT:  %erf = graph.erf %x : tensor<4x8xf32>
// CHECK-NEXT:  %sin = graph.sin %x : tensor<4x8xf32>
// CHECK-NEXT:  %cos = graph.cos %x : tensor<4x8xf32>
// CHECK-NEXT:  %floor = graph.floor %x : tensor<4x8xf32>
// CHECK-NEXT:  %ceil = graph.ceil %x : tensor<4x8xf32>
// CHECK-NEXT:  %gelu = graph.gelu %x : tensor<4x8xf32>
// CHECK-NEXT:  %gelu_tanh = graph.gelu %x {approximate = "tanh"} : tensor<4x8xf32>
// CHECK-NEXT:  %leaky = graph.leaky_relu %x {alpha = 1.000000e-02 : f64} : tensor<4x8xf32>
// CHECK-NEXT:  %clip = graph.clip %x {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : tensor<4x8xf32>
// CHECK-NEXT:  %clip_min = graph.clip %i {min = 1.000000e+00 : f64} : tensor<3xi64>
// CHECK-NEXT:  %to_i32 = graph.cast %x : (tensor<4x8xf32>) -> tensor<4x8xi32>
// CHECK-NEXT:  %to_f64 = graph.cast %i : (tensor<3xi64>) -> tensor<3xf64>
// CHECK-NEXT:  %to_f16 = graph.cast %bools : (tensor<2xi1>) -> tensor<2xf16>
// CHECK-NEXT:  %add = graph.add %x, %v : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %sub = graph.sub %i, %full : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
// CHECK-NEXT:  %mul = graph.mul %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %div = graph.div %d, %d : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
// CHECK-NEXT:  %pow = graph.pow %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %max = graph.max %j, %j : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
// CHECK-NEXT:  %min = graph.min %h, %half : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
// CHECK-NEXT:  %lt = graph.cmp %x, %v {predicate = "lt"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT:  %select = graph.select %lt, %x, %s : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  func.return %select : tensor<4x8xf32>
// CHECK-NEXT:  }
func.func @elementwise(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %s: tensor<f32>, %d: tensor<2xf64>, %h: tensor<2xf16>, %i: tensor<3xi64>, %j: tensor<3xi32>) -> tensor<4x8xf32> {
  %splat = graph.constant dense<1.5> : tensor<4x8xf32>
  %full = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
  %bools = graph.constant dense<[true, false]> : tensor<2xi1>
  %half = graph.constant dense<[0.5, 2.0]> : tensor<2xf16>
  %neg = graph.neg %x : tensor<4x8xf32>
  %abs = graph.abs %j : tensor<3xi32>
  %exp = graph.exp %x : tensor<4x8xf32>
  %log = graph.log %d : tensor<2xf64>
  %sqrt = graph.sqrt %h : tensor<2xf16>
  %rsqrt = graph.rsqrt %x : tensor<4x8xf32>
  %reciprocal = graph.reciprocal %x : tensor<4x8xf32>
  %tanh = graph.tanh %x : tensor<4x8xf32>
  %sigmoid = graph.sigmoid %x : tensor<4x8xf32>
  %relu = graph.relu %i : tensor<3xi64>
  %erf = graph.erf %x : tensor<4x8xf32>
  %sin = graph.sin %x : tensor<4x8xf32>
  %cos = graph.cos %x : tensor<4x8xf32>
  %floor = graph.floor %x : tensor<4x8xf32>
  %ceil = graph.ceil %x : tensor<4x8xf32>
  %gelu = graph.gelu %x : tensor<4x8xf32>
  %gelu_tanh = graph.gelu %x {approximate = "tanh"} : tensor<4x8xf32>
  %leaky = graph.leaky_relu %x {alpha = 0.01 : f64} : tensor<4x8xf32>
  %clip = graph.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4x8xf32>
  %clip_min = graph.clip %i {min = 1.0 : f64} : tensor<3xi64>
  %to_i32 = graph.cast %x : (tensor<4x8xf32>) -> tensor<4x8xi32>
  %to_f64 = graph.cast %i : (tensor<3xi64>) -> tensor<3xf64>
  %to_f16 = graph.cast %bools : (tensor<2xi1>) -> tensor<2xf16>
  %add = graph.add %x, %v : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sub = graph.sub %i, %full : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %mul = graph.mul %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %div = graph.div %d, %d : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %pow = graph.pow %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %max = graph.max %j, %j : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  %min = graph.min %h, %half : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %lt = graph.cmp %x, %v {predicate = "lt"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %select = graph.select %lt, %x, %s : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %select : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @batch_norm(
// CHECK-NEXT:  %default = graph.batch_norm %x, %c, %c, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
// CHECK-NEXT:  %eps = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.000000e-03 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
// CHECK-NEXT:  func.return %default, %eps : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
// CHECK-NEXT:  }
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) {
  %default = graph.batch_norm %x, %c, %c, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %eps = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 0.001 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %default, %eps : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// CHECK-LABEL: func.func @injective(
// CHECK-NEXT:  %reshape = graph.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT:  %transpose = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:  %broadcast = graph.broadcast_to %v : (tensor<3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:  %slice = graph.slice %y {starts = array<i64: 0, -4>, ends = array<i64: 2, 5>, steps = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:  %concat = graph.concat %x, %y, %x {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
// CHECK-NEXT:  %pad = graph.pad %x {pads = array<i64: 0, 1, 1, 2>} : (tensor<2x3xf32>) -> tensor<3x6xf32>
// CHECK-NEXT:  %pad_value = graph.pad %x {pads = array<i64: 1, 0, 0, 0>, value = -1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT:  %gather = graph.gather %x, %i {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
// CHECK-NEXT:  %gather32 = graph.gather %v, %j {axis = 0 : i64} : (tensor<3xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
// CHECK-NEXT:  func.return %reshape : tensor<6xf32>
// CHECK-NEXT:  }
func.func @injective(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>, %v: tensor<3xf32>, %i: tensor<4xi64>, %j: tensor<2x2xi32>) -> tensor<6xf32> {
  %reshape = graph.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  %transpose = graph.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %broadcast = graph.broadcast_to %v : (tensor<3xf32>) -> tensor<4x2x3xf32>
  %slice = graph.slice %y {starts = array<i64: 0, -4>, ends = array<i64: 2, 5>, steps = array<i64: 1, 2>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
  %concat = graph.concat %x, %y, %x {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
  %pad = graph.pad %x {pads = array<i64: 0, 1, 1, 2>} : (tensor<2x3xf32>) -> tensor<3x6xf32>
  %pad_value = graph.pad %x {pads = array<i64: 1, 0, 0, 0>, value = -1.0 : f64} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  %gather = graph.gather %x, %i {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  %gather32 = graph.gather %v, %j {axis = 0 : i64} : (tensor<3xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
  func.return %reshape : tensor<6xf32>
}

// CHECK-LABEL: func.func @reductions(
// CHECK-NEXT:  %sum = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT:  %mean = graph.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT:  %max = graph.reduce_max %i {axes = array<i64: 0, 1>} : (tensor<4x8xi32>) -> tensor<i32>
// CHECK-NEXT:  %min = graph.reduce_min %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT:  %softmax = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %log_softmax = graph.log_softmax %x {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %layer_norm = graph.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %layer_norm_eps = graph.layer_norm %x, %x, %x {axis = 0 : i64, epsilon = 1.000000e-06 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  func.return %sum : tensor<4xf32>
// CHECK-NEXT:  }
func.func @reductions(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>, %g: tensor<8xf32>) -> tensor<4xf32> {
  %sum = graph.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %mean = graph.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %max = graph.reduce_max %i {axes = array<i64: 0, 1>} : (tensor<4x8xi32>) -> tensor<i32>
  %min = graph.reduce_min %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %softmax = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %log_softmax = graph.log_softmax %x {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %layer_norm = graph.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %layer_norm_eps = graph.layer_norm %x, %x, %x {axis = 0 : i64, epsilon = 1.0e-06 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %sum : tensor<4xf32>
}

// CHECK-LABEL: func.func @anchors(
// CHECK-NEXT:  %matmul = graph.matmul %a, %b : (tensor<2x4x8xf64>, tensor<8x16xf64>) -> tensor<2x4x16xf64>
// CHECK-NEXT:  %conv = graph.conv2d %x, %w {groups = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x7x7xf32>
// CHECK-NEXT:  %conv_strided = graph.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 2, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x5xf32>
// CHECK-NEXT:  %max_pool = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x9x9xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT:  %avg_pool = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x4x9x9xf32>) -> tensor<1x4x9x9xf32>
// CHECK-NEXT:  func.return %matmul : tensor<2x4x16xf64>
// CHECK-NEXT:  }
func.func @anchors(%a: tensor<2x4x8xf64>, %b: tensor<8x16xf64>, %x: tensor<1x4x9x9xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x4x16xf64> {
  %matmul = graph.matmul %a, %b : (tensor<2x4x8xf64>, tensor<8x16xf64>) -> tensor<2x4x16xf64>
  %conv = graph.conv2d %x, %w {groups = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x7x7xf32>
  %conv_strided = graph.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 2, 1>, padding = array<i64: 1, 1, 1, 1>, groups = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x5xf32>
  %max_pool = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x4x9x9xf32>) -> tensor<1x4x4x4xf32>
  %avg_pool = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x4x9x9xf32>) -> tensor<1x4x9x9xf32>
  func.return %matmul : tensor<2x4x16xf64>
}

// CHECK-LABEL: func.func @fused(
// CHECK-NEXT:  %r, %r_1 = graph.fused(%a, %b) {name = "fused_add_relu_0", mode = "compile", backend = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// CHECK-NEXT:  %sum = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:  %relu = graph.relu %sum : tensor<4xf32>
// CHECK-NEXT:  graph.yield %sum, %relu : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %f = graph.fused(%a) {name = "fallback_exp_1", mode = "fallback"} : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:  ^bb0(%x: tensor<4xf32>):
// CHECK-NEXT:  %exp = graph.exp %x : tensor<4xf32>
// CHECK-NEXT:  graph.yield %exp : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %r, %r_1, %f : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }
func.func @fused(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %r:2 = graph.fused(%a, %b) {name = "fused_add_relu_0", mode = "compile", backend = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %sum = graph.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %relu = graph.relu %sum : tensor<4xf32>
    graph.yield %sum, %relu : tensor<4xf32>, tensor<4xf32>
  }
  %f = graph.fused(%a) {name = "fallback_exp_1", mode = "fallback"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %exp = graph.exp %x : tensor<4xf32>
    graph.yield %exp : tensor<4xf32>
  }
  func.return %r#0, %r#1, %f : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// GENERIC: %transpose = "graph.transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// GENERIC: %r, %r_1 = "graph.fused"(%a, %b) ({
// GENERIC-NEXT: ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// GENERIC: "graph.yield"(%sum, %relu) : (tensor<4xf32>, tensor<4xf32>) -> ()
// GENERIC-NEXT: }) {name = "fused_add_relu_0", mode = "compile", backend = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
