// RUN: graph-opt %s -p convert-math-to-llvm | filecheck %s

// Intrinsics where LLVM has one; libm calls (declared once) where it has none; rsqrt as 1/sqrt.
func.func @math(%x: f32, %y: f64, %z: f64) -> (f32, f64, f64, f64, f32, f32, f32) {
  %e = math.exp2 %x : f32
  %p = math.powf %y, %z : f64
  %r = math.erf %y : f64
  %r2 = math.erf %z : f64
  %s = math.rsqrt %e : f32
  %l = math.log1p %s : f32
  %f = math.fma %s, %l, %x : f32
  func.return %e, %p, %r, %r2, %s, %l, %f : f32, f64, f64, f64, f32, f32, f32
}
// CHECK:        llvm.func @log1pf(f32) -> f32
// CHECK-NEXT:   llvm.func @erf(f64) -> f64
// CHECK-LABEL:  func.func @math
// CHECK-NEXT:     %e = llvm.call_intrinsic "llvm.exp2.f32"(%x) : (f32) -> f32
// CHECK-NEXT:     %p = llvm.call_intrinsic "llvm.pow.f64"(%y, %z) : (f64, f64) -> f64
// CHECK-NEXT:     %r = llvm.call @erf(%y) : (f64) -> f64
// CHECK-NEXT:     %r2 = llvm.call @erf(%z) : (f64) -> f64
// CHECK-NEXT:     %s = llvm.call_intrinsic "llvm.sqrt.f32"(%e) : (f32) -> f32
// CHECK-NEXT:     %s_1 = llvm.mlir.constant(1.000000e+00 : f32) : f32
// CHECK-NEXT:     %s_2 = llvm.fdiv %s_1, %s : f32
// CHECK-NEXT:     %l = llvm.call @log1pf(%s_2) : (f32) -> f32
// CHECK-NEXT:     %f = llvm.call_intrinsic "llvm.fma.f32"(%s_2, %l, %x) : (f32, f32, f32) -> f32

// f32 tanh and erf expand inline: clamp by ordered compares (NaN passes), x * P(x^2) / Q(x^2) with fma.
func.func @tanh_erf(%x: f32) -> (f32, f32) {
  %t = math.tanh %x : f32
  %e = math.erf %x : f32
  func.return %t, %e : f32, f32
}
// CHECK-LABEL:  func.func @tanh_erf
// CHECK-NOT:      llvm.call @
// CHECK:          llvm.fcmp "ogt" %x
// CHECK:          llvm.intr.fma
// CHECK:          llvm.fdiv
// CHECK:          %[[ABS:.*]] = llvm.call_intrinsic "llvm.fabs.f32"(%x)
// CHECK:          %[[TINY:.*]] = llvm.fcmp "olt" %[[ABS]]
// CHECK-NEXT:     %[[TANH:.*]] = llvm.select %[[TINY]], %x,
// CHECK:          llvm.mlir.constant(4.000000e+00 : f32)
// CHECK:          %[[ERF:.*]] = llvm.fdiv
// CHECK-NEXT:     func.return %[[TANH]], %[[ERF]] : f32, f32

// f32 exp: clamp to [-104, 89], n = round(x log2 e) by the 1.5 * 2^23 shift, Cody-Waite r, a
// polynomial, 2^n as two halves put in the exponent bits (bitcast, shl). f64 exp stays an intrinsic.
func.func @exp(%x: f32, %y: f64) -> (f32, f64) {
  %e = math.exp %x : f32
  %d = math.exp %y : f64
  func.return %e, %d : f32, f64
}
// CHECK-LABEL:  func.func @exp
// CHECK-NOT:      llvm.call
// CHECK:          llvm.mlir.constant(8.900000e+01 : f32)
// CHECK:          llvm.mlir.constant(-1.040000e+02 : f32)
// CHECK:          %[[SHIFTED:.*]] = llvm.intr.fma(%{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32) -> f32
// CHECK:          llvm.bitcast %[[SHIFTED]] : f32 to i32
// CHECK:          llvm.ashr
// CHECK:          llvm.shl
// CHECK:          llvm.bitcast %{{.*}} : i32 to f32
// CHECK:          llvm.shl
// CHECK:          llvm.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:     %[[EXP:.*]] = llvm.fmul
// CHECK-NEXT:     %d = llvm.call_intrinsic "llvm.exp.f64"(%y) : (f64) -> f64
// CHECK-NEXT:     func.return %[[EXP]], %d : f32, f64

// f32 log: subnormals scaled by 2^23, exponent and mantissa split on the bits, a polynomial,
// then inf, 0 and negative/NaN inputs by selects.
func.func @log(%x: f32) -> f32 {
  %l = math.log %x : f32
  func.return %l : f32
}
// CHECK-LABEL:  func.func @log
// CHECK-NOT:      llvm.call
// CHECK:          %[[SUBNORMAL:.*]] = llvm.fcmp "olt" %x
// CHECK:          llvm.select %[[SUBNORMAL]]
// CHECK:          llvm.bitcast %{{.*}} : f32 to i32
// CHECK:          llvm.ashr
// CHECK:          llvm.sitofp %{{.*}} : i32 to f32
// CHECK:          llvm.mlir.constant(0x7f800000 : f32)
// CHECK-NEXT:     llvm.fcmp "oeq" %x
// CHECK:          llvm.mlir.constant(0xff800000 : f32)
// CHECK:          llvm.fcmp "ult" %x
// CHECK-NEXT:     llvm.mlir.constant(0x7fc00000 : f32)
// CHECK-NEXT:     %[[LOG:.*]] = llvm.select
// CHECK-NEXT:     func.return %[[LOG]] : f32

// Fast-math flags reach libm calls; intrinsic calls drop them (xDSL cannot emit them there).
func.func @fastmath(%x: f64, %y: f32) -> (f64, f32) {
  %e = math.erf %x fastmath<fast> : f64
  %s = math.sqrt %y fastmath<afn> : f32
  func.return %e, %s : f64, f32
}
// CHECK-LABEL:  func.func @fastmath
// CHECK-NEXT:     %e = llvm.call @erf(%x) {fastmathFlags = #llvm.fastmath<fast>} : (f64) -> f64
// CHECK-NEXT:     %s = llvm.call_intrinsic "llvm.sqrt.f32"(%y) : (f32) -> f32

// f32 pow: e^(y log|x|) inline (no call), then powf's cases by selects: the sign for an odd whole
// y (floor(y / 2) != y / 2), NaN for a finite negative x to a fractional y, 1 for y = 0 or x = 1.
func.func @pow(%x: f32, %y: f32) -> f32 {
  %p = math.powf %x, %y : f32
  func.return %p : f32
}
// CHECK-LABEL:  func.func @pow
// CHECK-NOT:      llvm.call @
// CHECK-NOT:      llvm.pow
// CHECK:          llvm.call_intrinsic "llvm.fabs.f32"(%x)
// CHECK:          llvm.call_intrinsic "llvm.floor.f32"(%y)
// CHECK:          llvm.fneg
// CHECK:          llvm.select
// CHECK:          func.return %{{.*}} : f32

// f32 sigmoid, 1 / (1 + exp(-x)) with each step used once: x clamped to [-89, 86], the exp's
// reduction on -x (no negation left), 2^n by one shift and add (no ashr: no ldexp halves),
// 1 + 2^n e^r as one fma, one division. A division that is not 1 / (1 + exp(-y)) stays exp.
func.func @sigmoid(%x: f32, %y: f32) -> (f32, f32, f32) {
  %one = llvm.mlir.constant(1.000000e+00 : f32) : f32
  %n = llvm.fneg %x : f32
  %e = math.exp %n : f32
  %d = llvm.fadd %one, %e : f32
  %s = llvm.fdiv %one, %d : f32
  %m = llvm.fneg %y : f32
  %f = math.exp %m : f32
  %g = llvm.fadd %f, %one : f32
  %t = llvm.fdiv %f, %g : f32
  func.return %s, %t, %f : f32, f32, f32
}
// CHECK-LABEL:  func.func @sigmoid
// CHECK-NOT:      llvm.fneg %x
// CHECK:          llvm.mlir.constant(8.600000e+01 : f32)
// CHECK:          llvm.mlir.constant(-8.900000e+01 : f32)
// CHECK:          llvm.mlir.constant(-1.44269502 : f32)
// CHECK-NOT:      llvm.ashr
// CHECK:          llvm.shl
// CHECK:          llvm.mlir.constant(1065353216 : i32)
// CHECK:          %[[DENOMINATOR:.*]] = llvm.intr.fma
// CHECK-NEXT:     llvm.mlir.constant(1.000000e+00 : f32)
// CHECK-NEXT:     %[[SIGMOID:.*]] = llvm.fdiv %{{.*}}, %[[DENOMINATOR]] : f32
// CHECK:          llvm.mlir.constant(-1.040000e+02 : f32)
// CHECK:          llvm.ashr
// CHECK:          %[[T:.*]] = llvm.fdiv %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:     func.return %[[SIGMOID]], %[[T]], %{{.*}} : f32, f32, f32
