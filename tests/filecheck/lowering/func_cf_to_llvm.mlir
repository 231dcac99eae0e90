// RUN: graph-opt %s -p convert-func-to-llvm,convert-cf-to-llvm | filecheck %s
// RUN: graph-opt %s -p 'convert-func-to-llvm{alignment=0}' | filecheck %s --check-prefix=NOALIGN
// RUN: graph-opt %s -p convert-func-to-llvm,convert-cf-to-llvm,convert-arith-to-llvm,convert-memref-to-llvm,reconcile-unrealized-casts | filecheck %s --check-prefix=CHAIN

// Kernels become external llvm.funcs (no linkage keyword); memref arguments noalias, aligned pointers; index i64.
func.func @kernel(%a: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  cf.br ^loop(%c0 : index)
^loop(%i: index):
  %more = arith.cmpi slt, %i, %n : index
  cf.cond_br %more, ^body, ^exit
^body:
  %x = memref.load %a[%i] : memref<8xf32>
  %y = arith.addf %x, %x : f32
  memref.store %y, %a[%i] : memref<8xf32>
  %next = arith.addi %i, %c1 : index
  cf.br ^loop(%next : index)
^exit:
  func.return
}
// CHECK:       llvm.func @kernel(%a: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64}, %n: i64) {
// CHECK-NEXT:    %{{.*}} = builtin.unrealized_conversion_cast %n : i64 to index
// CHECK-NEXT:    %{{.*}} = builtin.unrealized_conversion_cast %a : !llvm.ptr to memref<8xf32>
// CHECK:         llvm.br ^{{.*}}(%{{.*}} : i64)
// CHECK:       ^{{.*}}(%[[I:.*]]: i64):
// CHECK-NEXT:    builtin.unrealized_conversion_cast %[[I]] : i64 to index
// CHECK:         llvm.cond_br
// CHECK:         llvm.return

// NOALIGN:     llvm.func @kernel(%a: !llvm.ptr {llvm.noalias}, %n: i64)

// A result and the input it may be written over (`graph.may_overwrite`: out, then r) are not noalias.
func.func @overwriting(%s: memref<4xf32>, %r: memref<4xf32>, %out: memref<4xf32>) attributes {graph.may_overwrite = array<i64: 2, 1>} {
  func.return
}
// CHECK:       llvm.func @overwriting(%s: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64}, %r: !llvm.ptr {llvm.align = 64 : i64}, %out: !llvm.ptr {llvm.align = 64 : i64})
// NOALIGN:     llvm.func @overwriting(%s: !llvm.ptr {llvm.noalias}, %r: !llvm.ptr, %out: !llvm.ptr)

// CHAIN-NOT:   unrealized_conversion_cast
// CHAIN:       llvm.func @kernel(%a: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64}, %n: i64)
// CHAIN:         %[[P:.*]] = llvm.getelementptr inbounds %a[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHAIN-NEXT:    %{{.*}} = llvm.load %[[P]] : !llvm.ptr -> f32
// CHAIN-NOT:   unrealized_conversion_cast
