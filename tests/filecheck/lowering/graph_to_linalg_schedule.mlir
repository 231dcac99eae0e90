// convert-graph-to-linalg{schedule=...}: the CPU's schedule (default) or plain one-output loop
// nests. For softmax, the CPU's row max is maxnumf and the sum of exps also stores each exp in
// the output (two outputs); the plain schedule keeps maximumf and one output per generic.

// RUN: graph-opt %s -p 'convert-graph-to-linalg{schedule=cpu}' | filecheck %s --check-prefix=CPU
// RUN: graph-opt %s -p convert-graph-to-linalg | filecheck %s --check-prefix=CPU
// RUN: graph-opt %s -p 'convert-graph-to-linalg{schedule=plain}' | filecheck %s --check-prefix=PLAIN
// RUN: not graph-opt %s -p 'convert-graph-to-linalg{schedule=gpu}' 2>&1 | filecheck %s --check-prefix=BAD

// CPU-LABEL: func.func @softmax_0
// CPU:         arith.maxnumf
// CPU:         outs(%{{.*}}, %{{.*}} : memref<4xf32>, memref<4x8xf32>)
// PLAIN-LABEL: func.func @softmax_0
// PLAIN:         arith.maximumf
// PLAIN-NOT:     memref<4xf32>, memref<4x8xf32>)
// BAD: convert-graph-to-linalg: schedule=gpu, expected one of cpu, plain
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.softmax %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
