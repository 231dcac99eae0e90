// --lower-to-linalg and --lower-to-llvm end the pipeline at a lowering stage (after --fuse and -p)
// of the cpu backend's pipeline (lowering/pipelines.py: row-local kernels are marked as compile marks them);
// -t llvm prints the kernels' LLVM IR after O3, lowering a graph-level module to kernels first.

// RUN: graph-opt %s --fuse --lower-to-linalg | filecheck %s --check-prefix=LINALG
// RUN: graph-opt %s --lower-to-linalg | filecheck %s --check-prefix=UNFUSED
// RUN: graph-opt %s -p fuse --lower-to-llvm | filecheck %s --check-prefix=LLVM
// RUN: graph-opt %s --fuse -t llvm | filecheck %s --check-prefix=IR
// RUN: graph-opt %s --fuse --lower-to-linalg | graph-opt -t llvm | filecheck %s --check-prefix=IR
// RUN: graph-opt %s --fuse --lower-to-llvm | graph-opt -t llvm | filecheck %s --check-prefix=IR
// RUN: not graph-opt %s --lower-to-linalg --lower-to-llvm 2>&1 | filecheck %s --check-prefix=BOTH

func.func @main(%a: tensor<4x1024xf32>, %b: tensor<1024xf32>) -> tensor<4x1024xf32> {
  %sum = graph.add %a, %b : (tensor<4x1024xf32>, tensor<1024xf32>) -> tensor<4x1024xf32>
  %relu = graph.relu %sum : tensor<4x1024xf32>
  func.return %relu : tensor<4x1024xf32>
}

// LINALG:      builtin.module {
// LINALG-NEXT:   func.func @fused_add_relu_0(%0: memref<4x1024xf32>, %1: memref<1024xf32>, %2: memref<4x1024xf32>) attributes {graph.kernel, graph.work = {{[0-9]+}} : i64, graph.row_local} {
// LINALG-NEXT:     linalg.generic
// LINALG:            arith.addf
// LINALG:            arith.maximumf
// LINALG-NOT:  graph.
// LINALG-NOT:  func.func @main

// UNFUSED:     func.func @add_0(
// UNFUSED:     func.func @relu_1(

// LLVM:        llvm.func @fused_add_relu_0(%0: !llvm.ptr {llvm.noalias, llvm.align = 16 : i64}
// LLVM-NOT:    linalg.
// LLVM-NOT:    func.func

// IR:          define void @fused_add_relu_0(ptr noalias
// IR:          fadd <{{[0-9]+}} x float>
// IR:          @llvm.maximum.v{{[0-9]+}}f32

// BOTH:        graph-opt: error: argument --lower-to-llvm: not allowed with argument --lower-to-linalg
