// graph-opt --fuse --partition -t llvm prints the LLVM IR that graphopt.compile JIT-compiles
// (graph-run --print-llvm). A small MLP layer with constant weights: the packed GEMM ukernel
// path (its IR linked into the module) with the bias and relu epilogue.

// RUN: graph-opt %s --fuse --partition=backends=cpu -t llvm > %t.opt.ll
// RUN: env GRAPHOPT_THREADS=1 graph-run %s --print-llvm > %t.run.ll
// RUN: diff %t.opt.ll %t.run.ll
// RUN: filecheck %s < %t.run.ll

func.func @main(%x: tensor<64x32xf32>) -> tensor<64x16xf32> {
  %w = graph.constant dense<0.25> : tensor<32x16xf32>
  %b = graph.constant dense<0.5> : tensor<16xf32>
  %m = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  %a = graph.add %m, %b : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
  %r = graph.relu %a : tensor<64x16xf32>
  func.return %r : tensor<64x16xf32>
}

// CHECK-DAG: define void @fused_matmul_add_relu_0(ptr noalias
// CHECK-DAG: define {{.*}}@graphopt_sgemm_packed_64x32x16(
