// graph-opt reads a file, stdin or `-`, writes stdout or -o, and runs -p pipelines.

// RUN: graph-opt %s | filecheck %s
// RUN: graph-opt < %s | filecheck %s
// RUN: graph-opt - < %s | filecheck %s
// RUN: graph-opt %s -o %t && filecheck %s --input-file %t
// RUN: graph-opt %s -p cse | filecheck %s --check-prefix=CSE
// RUN: not graph-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not graph-opt %s -p 'cse{no-such-option=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not graph-opt %t.missing.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not graph-opt %s -p 'cse{' 2>&1 | filecheck %s --check-prefix=PIPELINE
// A bare pass flag takes no options, so the file may follow it; options attach with '='.
// RUN: graph-opt --fuse --partition %s | filecheck %s --check-prefix=FLAGS
// RUN: graph-opt --fuse=mode=fallback --partition %s | filecheck %s --check-prefix=FALLBACK

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
// PIPELINE:   graph-opt: error: Error parsing pass pipeline specification:
// PIPELINE:   cse{
// FLAGS:      graph.fused
// FLAGS-SAME: mode = "compile", backend = "cpu"
// FALLBACK:   graph.fused(%x) {name = "fused_exp_add_0.exp_0", mode = "compile", backend = "cpu"}
// PASS-NOT:   Traceback
// PIPELINE-NOT: Traceback
// OPTION-NOT: Traceback
// MISSING-NOT: Traceback
