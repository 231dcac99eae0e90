// graph-opt --fuse --partition -t llvm prints the LLVM IR that graphopt.compile JIT-compiles
// (graph-run --print-llvm): both run the cpu pipeline of lowering/pipelines.py, kernels named alike.
// A 64x128 softmax: mark-row-local lets fuse-row-loops run its three loop nests in one row loop.

// RUN: graph-opt %s --fuse --partition=backends=cpu -t llvm > %t.opt.ll
// RUN: env GRAPHOPT_THREADS=1 graph-run %s --print-llvm > %t.run.ll
// RUN: diff %t.opt.ll %t.run.ll
// RUN: filecheck %s < %t.run.ll

func.func @main(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %y = graph.softmax %x : (tensor<64x128xf32>) -> tensor<64x128xf32>
  func.return %y : tensor<64x128xf32>
}

// CHECK:     define void @softmax_0(ptr noalias
// CHECK-NOT: define
