// A measured-cost cache that cannot be written is a warning, not an error: the costs are
// measured, kept for this run, and the partition goes ahead.

// RUN: rm -rf %t && touch %t
// RUN: graph-opt %s -p 'fuse,partition{search="cost" measure=true cache="%t/costs.json"}' 2>&1 | filecheck %s

// CHECK: graph-opt: warning: cannot write the cost cache {{.*}}costs.json: {{.+}}; costs are kept for this process only
// CHECK-NOT: Traceback
// CHECK: graph.fused{{.*}}backend = "{{cpu|blas}}"

func.func @main(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %0 = graph.matmul %x, %w : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %1 = graph.relu %0 : tensor<16x16xf32>
  func.return %1 : tensor<16x16xf32>
}
