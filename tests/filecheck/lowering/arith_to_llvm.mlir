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

// Fast-math flags carry over to the llvm float ops; intrinsic calls and compares drop them.
func.func @fastmath(%a: f32, %b: f32) -> (f32, f32, f32, f32) {
  %s = arith.addf %a, %b fastmath<reassoc,contract> : f32
  %p = arith.mulf %s, %b fastmath<fast> : f32
  %n = arith.negf %p fastmath<nnan> : f32
  %m = arith.maximumf %n, %a fastmath<reassoc> : f32
  %d = arith.divf %m, %b : f32
  func.return %s, %p, %n, %d : f32, f32, f32, f32
}
// CHECK-LABEL: func.func @fastmath
// CHECK-NEXT:    %s = llvm.fadd %a, %b {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
// CHECK-NEXT:    %p = llvm.fmul %s, %b {fastmathFlags = #llvm.fastmath<fast>} : f32
// CHECK-NEXT:    %n = llvm.fneg %p {fastmathFlags = #llvm.fastmath<nnan>} : f32
// CHECK-NEXT:    %m = llvm.call_intrinsic "llvm.maximum.f32"(%n, %a) : (f32, f32) -> f32
// CHECK-NEXT:    %d = llvm.fdiv %m, %b : f32

// floordivsi: sdiv, then minus one where the remainder is non-zero and its sign differs from the divisor's.
func.func @floordiv(%a: i32, %b: i32) -> i32 {
  %q = arith.floordivsi %a, %b : i32
  func.return %q : i32
}
// CHECK-LABEL: func.func @floordiv
// CHECK-NEXT:    %q = llvm.sdiv %a, %b : i32
// CHECK-NEXT:    %q_1 = llvm.srem %a, %b : i32
// CHECK-NEXT:    %q_2 = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT:    %q_3 = llvm.icmp "ne" %q_1, %q_2 : i32
// CHECK-NEXT:    %q_4 = llvm.xor %q_1, %b : i32
// CHECK-NEXT:    %q_5 = llvm.icmp "slt" %q_4, %q_2 : i32
// CHECK-NEXT:    %q_6 = llvm.and %q_3, %q_5 : i1
// CHECK-NEXT:    %q_7 = llvm.zext %q_6 : i1 to i32
// CHECK-NEXT:    %q_8 = llvm.sub %q, %q_7 : i32
// CHECK-NEXT:    func.return %q_8 : i32
