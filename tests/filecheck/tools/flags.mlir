// graph-opt reads a file, stdin or `-`, writes stdout or -o, and runs -p pipelines.

// RUN: graph-opt %s | filecheck %s
// RUN: graph-opt < %s | filecheck %s
// RUN: graph-opt - < %s | filecheck %s
// RUN: graph-opt %s -o %t && filecheck %s --input-file %t
// RUN: graph-opt %s -p cse | filecheck %s --check-prefix=CSE
// RUN: not graph-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not graph-opt %s -p 'cse{no-such-option=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not graph-opt %t.missing.mlir 2>&1 | filecheck %s --check-prefix=MISSING

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.exp %x : tensor<4xf32>
  %b = graph.exp %x : tensor<4xf32>
  %c = graph.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// CHECK:      builtin.module {
// CHECK-NEXT:   func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:     %a = graph.exp %x : tensor<4xf32>
// CHECK-NEXT:     %b = graph.exp %x : tensor<4xf32>
// CHECK-NEXT:     %c = graph.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

// CSE:      %a = graph.exp %x : tensor<4xf32>
// CSE-NEXT: %c = graph.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

// PASS:       graph-opt: error: Unrecognized passes: ['no-such-pass']
// OPTION:     graph-opt: error: Provided arguments ["no_such_option"] not found in expected arguments []
// MISSING:    graph-opt: error: {{.*}}.missing.mlir: No such file or directory
// PASS-NOT:   Traceback
// OPTION-NOT: Traceback
// MISSING-NOT: Traceback
