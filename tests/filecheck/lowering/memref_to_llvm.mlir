// RUN: graph-opt %s -p convert-memref-to-llvm | filecheck %s

// Loads and stores address memory by GEP on the row-major linearized index (no ptrtoint/inttoptr).
func.func @load_store(%a: memref<4x8xf32>, %v: memref<8xi32>, %i: index, %j: index) {
  %x = memref.load %a[%i, %j] : memref<4x8xf32>
  memref.store %x, %a[%j, %i] : memref<4x8xf32>
  %y = memref.load %v[%j] : memref<8xi32>
  memref.store %y, %v[%i] : memref<8xi32>
  func.return
}
// CHECK-LABEL: func.func @load_store
// CHECK-NOT:     ptrtoint
// CHECK:         %[[A:.*]] = builtin.unrealized_conversion_cast %a : memref<4x8xf32> to !llvm.ptr
// CHECK-NEXT:    %[[I:.*]] = builtin.unrealized_conversion_cast %i : index to i64
// CHECK-NEXT:    %[[J:.*]] = builtin.unrealized_conversion_cast %j : index to i64
// CHECK-NEXT:    %[[EIGHT:.*]] = llvm.mlir.constant(8) : i64
// CHECK-NEXT:    %[[ROW:.*]] = llvm.mul %[[I]], %[[EIGHT]] : i64
// CHECK-NEXT:    %[[LINEAR:.*]] = llvm.add %[[ROW]], %[[J]] : i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %[[A]][%[[LINEAR]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[X:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK:         llvm.store %[[X]], %{{.*}} : f32, !llvm.ptr
// CHECK:         llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i32
// CHECK-NOT:     ptrtoint
// CHECK:         func.return

// A memref.alloca inside a loop becomes an llvm.alloca at the top of the function.
func.func @alloca_in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %buffer = memref.alloca() : memref<16xf32>
    %x = memref.load %buffer[%i] : memref<16xf32>
    memref.store %x, %buffer[%c0] : memref<16xf32>
  }
  func.return
}
// CHECK-LABEL: func.func @alloca_in_loop
// CHECK-NEXT:    %[[SIZE:.*]] = llvm.mlir.constant(16) : i64
// CHECK-NEXT:    %[[BUF:.*]] = llvm.alloca %[[SIZE]] x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// CHECK:         scf.for
// CHECK-NOT:     memref.alloca
