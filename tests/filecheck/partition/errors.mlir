// What the partition pass refuses: one message each, no traceback, a non-zero exit.

// RUN: not graph-opt %s -p 'partition{backends=cpu,nonesuch}' 2>&1 | filecheck %s --check-prefix=BACKEND
// RUN: not graph-opt %s -p 'partition{search="best"}' 2>&1 | filecheck %s --check-prefix=SEARCH
// RUN: not graph-opt %s -p 'partition{max-depth=0}' 2>&1 | filecheck %s --check-prefix=DEPTH
// RUN: not graph-opt %s -p 'partition{launch-penalty=-1.0}' 2>&1 | filecheck %s --check-prefix=PENALTY
// RUN: not graph-opt %s -p 'partition{threads=-2}' 2>&1 | filecheck %s --check-prefix=THREADS
// RUN: not graph-opt %s --split-input-file --partition 2>&1 | filecheck %s --check-prefix=PIN

// BACKEND: graph-opt: error: partition: unknown backend 'nonesuch' (registered: {{.*}}cpu{{.*}})
// SEARCH: graph-opt: error: partition: search must be "greedy" or "cost", got "best"
// DEPTH: graph-opt: error: partition: max-depth must be at least 1, got 0
// PENALTY: graph-opt: error: partition: launch-penalty must not be negative, got -1.0
// THREADS: graph-opt: error: partition: threads must not be negative, got -2
// PIN: graph-opt: error: partition: @refused: graph.relu (op 1, in group 'g') is pinned to backend 'blas', which refuses it: {{.+}}
// CHECK-NOT: Traceback

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

func.func @refused(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = graph.fused(%x) {name = "g", mode = "compile"} : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %0 = graph.neg %a : tensor<8xf32>
    %1 = graph.relu %0 {graph.backend = "blas"} : tensor<8xf32>
    graph.yield %1 : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
