// RUN: graph-opt %s -p convert-arith-to-llvm | filecheck %s

// Floats: binary ops, NaN-propagating maximum, compares (incl. unordered and constant ones), select, negf.
func.func @floats(%a: f32, %b: f32) -> (f32, i1, i1, f32, f32) {
  %s = arith.addf %a, %b : f32
  %d = arith.divf %s, %b : f32
  %m = arith.maximumf %d, %a : f32
  %n = arith.minimumf %m, %b : f32
  %p = arith.cmpf ult, %n, %b : f32
  %q = arith.cmpf false, %n, %b : f32
  %sel = arith.select %p, %n, %b : f32
  %neg = arith.negf %sel : f32
  func.return %neg, %p, %q, %m, %n : f32, i1, i1, f32, f32
}
// CHECK-LABEL: func.func @floats
// CHECK-NEXT:    %s = llvm.fadd %a, %b : f32
// CHECK-NEXT:    %d = llvm.fdiv %s, %b : f32
// CHECK-NEXT:    %m = llvm.call_intrinsic "llvm.maximum.f32"(%d, %a) : (f32, f32) -> f32
// CHECK-NEXT:    %n = llvm.call_intrinsic "llvm.minimum.f32"(%m, %b) : (f32, f32) -> f32
// CHECK-NEXT:    %p = llvm.fcmp "ult" %n, %b : f32
// CHECK-NEXT:    %q = llvm.mlir.constant(false) : i1
// CHECK-NEXT:    %sel = llvm.select %p, %n, %b : i1, f32
// CHECK-NEXT:    %neg = llvm.fneg %sel : f32
// CHECK-NEXT:    func.return %neg, %p, %q, %m, %n

// index values become i64, bridged to the not-yet-converted func by unrealized casts.
func.func @index(%i: index, %j: i32) -> (index, i32) {
  %c = arith.constant 2 : index
  %k = arith.index_cast %j : i32 to index
  %sum = arith.addi %i, %k : index
  %prod = arith.muli %sum, %c : index
  %back = arith.index_cast %prod : index to i32
  func.return %prod, %back : index, i32
}
// CHECK-LABEL: func.func @index
// CHECK-NEXT:    %c = llvm.mlir.constant(2) : i64
// CHECK-NEXT:    %c_1 = builtin.unrealized_conversion_cast %c : i64 to index
// CHECK-NEXT:    %k = llvm.sext %j : i32 to i64
// CHECK-NEXT:    %k_1 = builtin.unrealized_conversion_cast %k : i64 to index
// CHECK-NEXT:    %0 = builtin.unrealized_conversion_cast %i : index to i64
// CHECK-NEXT:    %1 = builtin.unrealized_conversion_cast %k_1 : index to i64
// CHECK-NEXT:    %sum = llvm.add %0, %1 : i64
// CHECK:         %prod = llvm.mul
// CHECK:         %back = llvm.trunc %{{.*}} : i64 to i32

// Casts: saturating float-to-int intrinsics, uitofp through zext + sitofp, extensions and truncations.
func.func @casts(%f: f32, %b: i1, %i: i32) -> (i32, f32, f64, i64, i16) {
  %t = arith.fptosi %f : f32 to i32
  %u = arith.uitofp %b : i1 to f32
  %e = arith.extf %f : f32 to f64
  %x = arith.extsi %i : i32 to i64
  %n = arith.trunci %i : i32 to i16
  func.return %t, %u, %e, %x, %n : i32, f32, f64, i64, i16
}
// CHECK-LABEL: func.func @casts
// CHECK-NEXT:    %t = llvm.call_intrinsic "llvm.fptosi.sat.i32.f32"(%f) : (f32) -> i32
// CHECK-NEXT:    %u = llvm.zext %b : i1 to i64
// CHECK-NEXT:    %u_1 = llvm.sitofp %u : i64 to f32
// CHECK-NEXT:    %e = llvm.fpext %f : f32 to f64
// CHECK-NEXT:    %x = llvm.sext %i : i32 to i64
// CHECK-NEXT:    %n = llvm.trunc %i : i32 to i16
