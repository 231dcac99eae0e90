// --partition-report (or the pass's report option) prints one row per group on stderr: its
// ops, the backend chosen and its cost, the best other backend and its cost.

// RUN: graph-opt %s --fuse --partition-report -o /dev/null 2>&1 | filecheck %s
// RUN: graph-opt %s --fuse --partition=backends=blas,cpu --partition-report -o /dev/null 2>&1 | filecheck %s --check-prefix=BLAS
// RUN: graph-opt %s -p 'fuse,partition{search="cost" report=true}' -o /dev/null 2>&1 | filecheck %s --check-prefix=COST

// Costs depend on this machine's measured rates: only the layout and the names are checked.
// CHECK:      partition @main (search=greedy, costs estimated):
// CHECK-NEXT:   group {{ +}} ops  backend {{ +}} cost  alternative {{ +}} cost
// CHECK-NEXT:   fused_matmul_add_relu_0    3  cpu {{ +[0-9]+\.[0-9]}}us  {{(blas|reference) +[0-9]+\.[0-9]}}us
// CHECK-NEXT:   softmax_0 {{ +}} 1  cpu {{ +[0-9]+\.[0-9]}}us  reference {{ +[0-9]+\.[0-9]}}us
// CHECK-NOT:  {{.}}

// BLAS:      matmul_0 {{ +}} 1  blas {{ +[0-9]+\.[0-9]}}us  {{(cpu|reference) +[0-9]+\.[0-9]}}us
// BLAS-NEXT: fused_add_relu_0 {{ +}} 2  cpu {{ +[0-9]+\.[0-9]}}us  reference {{ +[0-9]+\.[0-9]}}us
// BLAS-NEXT: softmax_1 {{ +}} 1  cpu {{ +[0-9]+\.[0-9]}}us  reference {{ +[0-9]+\.[0-9]}}us

// The cost search reports the groups it chose.
// COST:      partition @main (search=cost, costs estimated):
// COST-NEXT:   group
// COST-NEXT:   {{[a-z_0-9]+ +[1-4]  (cpu|blas) +[0-9]+\.[0-9]us  [a-z]+ +[0-9]+\.[0-9]us}}
func.func @main(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<64x64xf32> {
  %0 = graph.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = graph.add %0, %b : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  %2 = graph.relu %1 : tensor<64x64xf32>
  %3 = graph.softmax %2 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %3 : tensor<64x64xf32>
}
