// explain=true prints one stable line per producer->consumer edge left unfused, naming
// both ops (with their position in the block) and the rule that refused the edge.

// RUN: graph-opt %s -p 'fuse{explain=true max-ops=3}' -o /dev/null 2>&1 | filecheck %s

// CHECK:      fuse: @main: graph.matmul#0 -> graph.matmul#1: anchor into anchor
// CHECK-NEXT: fuse: @main: graph.matmul#1 -> graph.softmax#2: anchor into reduction
// CHECK-NEXT: fuse: @main: graph.softmax#2 -> graph.exp#3: reduction into elementwise
// CHECK-NEXT: fuse: @main: graph.exp#3 -> graph.neg#4: would duplicate an expensive op
// CHECK-NEXT: fuse: @main: graph.exp#3 -> graph.abs#5: would duplicate an expensive op
// CHECK-NEXT: fuse: @main: graph.exp#3 -> graph.add#7: would duplicate an expensive op
// CHECK-NEXT: fuse: @main: graph.abs#5 -> graph.tanh#6: no_fuse
// CHECK-NEXT: fuse: @main: graph.relu#8 -> graph.sub#9: value is used outside the group (multi-output is off)
// CHECK-NEXT: fuse: @main: graph.relu#8 -> graph.matmul#10: elementwise into anchor
// CHECK-NEXT: fuse: @main: graph.cos#14 -> graph.floor#15: max-ops reached
// CHECK-NOT:  fuse:
func.func @main(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = graph.matmul %x, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = graph.matmul %0, %0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = graph.softmax %1 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = graph.exp %2 : tensor<8x8xf32>
  %4 = graph.neg %3 : tensor<8x8xf32>
  %5 = graph.abs %3 : tensor<8x8xf32>
  %6 = graph.tanh %5 {graph.no_fuse} : tensor<8x8xf32>
  %7 = graph.add %4, %3 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %8 = graph.relu %x : tensor<8x8xf32>
  %9 = graph.sub %8, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %10 = graph.matmul %8, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %11 = graph.sqrt %9 : tensor<8x8xf32>
  %12 = graph.ceil %x : tensor<8x8xf32>
  %13 = graph.sin %12 : tensor<8x8xf32>
  %14 = graph.cos %13 : tensor<8x8xf32>
  %15 = graph.floor %14 : tensor<8x8xf32>
  func.return %6, %7, %10, %11, %15 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
