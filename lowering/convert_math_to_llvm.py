"""convert-math-to-llvm: math ops become LLVM intrinsics, libm calls or inline expansions.

    %e = math.exp %x : f64     ->   %e = llvm.call_intrinsic "llvm.exp.f64"(%x) : (f64) -> f64
    %t = math.tanh %x : f32    ->   clamp, two polynomials in x*x (llvm.intr.fma), llvm.fdiv, llvm.select
    %r = math.erf %x : f64     ->   %r = llvm.call @erf(%x) : (f64) -> f64   (plus `llvm.func @erf(f64) -> f64`)

f32 exp, log, pow, tanh and erf expand inline (a few ulp, no branches, no calls), so loops around
them vectorize; an intrinsic such as `llvm.exp.f32` is scalarized into one libm call per
element, and a call per element stops vectorization. exp and log reduce the argument with
integer ops on the float's bits (Cephes polynomials), tanh and erf are Eigen's rational
approximations. f64 tanh/erf and the functions LLVM has no intrinsic for call libm, which MCJIT
resolves in-process. libm calls keep the op's fast-math flags; intrinsic calls (xDSL's LLVM IR
converter cannot emit flags on them) and the inline expansions (written for IEEE semantics;
`reassoc` would let LLVM undo their rounding tricks) drop them.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graphopt.lowering.llvm_types import (
    declare_function,
    fastmath_flags,
    intrinsic_call,
    replace_with_llvm,
)
from xdsl.context import Context
from xdsl.dialects import llvm, math
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

INTRINSIC_OPS: dict[type[Operation], str] = {
    math.AbsFOp: "fabs",
    math.CeilOp: "ceil",
    math.FloorOp: "floor",
    math.RoundOp: "round",
    math.RoundEvenOp: "roundeven",
    math.TruncOp: "trunc",
    math.SqrtOp: "sqrt",
    math.ExpOp: "exp",
    math.Exp2Op: "exp2",
    math.LogOp: "log",
    math.Log2Op: "log2",
    math.Log10Op: "log10",
    math.SinOp: "sin",
    math.CosOp: "cos",
    math.TanOp: "tan",
    math.AsinOp: "asin",
    math.AcosOp: "acos",
    math.AtanOp: "atan",
    math.Atan2Op: "atan2",
    math.SinhOp: "sinh",
    math.CoshOp: "cosh",
    math.PowFOp: "pow",
    math.CopySignOp: "copysign",
    math.FmaOp: "fma",
}
"""Ops that are one LLVM intrinsic overloaded on the result type."""

LIBM_OPS: dict[type[Operation], str] = {
    math.TanhOp: "tanh",
    math.ErfOp: "erf",
    math.ExpM1Op: "expm1",
    math.Log1pOp: "log1p",
    math.CbrtOp: "cbrt",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.AtanhOp: "atanh",
}
"""Ops that call libm: the f64 name, with an `f` suffix for f32."""


class FloatExpression:
    """Builds a scalar float expression, and integer ops on the float's bits, as a list of llvm ops.

    Arithmetic helpers take SSA values or Python numbers (made constants of the float type, or of
    the same-width integer type for the integer helpers)."""

    def __init__(self, type_: Attribute):
        self.type = type_
        self.bits_type = IntegerType(type_.bitwidth)
        self.ops: list[Operation] = []

    def emit(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def constant(self, value: float) -> SSAValue:
        return self.emit(llvm.ConstantOp(FloatAttr(value, self.type), self.type))

    def float_value(self, value: SSAValue | float) -> SSAValue:
        return value if isinstance(value, SSAValue) else self.constant(value)

    def int_value(self, value: SSAValue | int) -> SSAValue:
        return value if isinstance(value, SSAValue) else self.emit(llvm.ConstantOp(IntegerAttr(value, self.bits_type), self.bits_type))

    def add(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.emit(llvm.FAddOp(self.float_value(a), self.float_value(b)))

    def sub(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.emit(llvm.FSubOp(self.float_value(a), self.float_value(b)))

    def mul(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.emit(llvm.FMulOp(self.float_value(a), self.float_value(b)))

    def div(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.emit(llvm.FDivOp(self.float_value(a), self.float_value(b)))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.emit(llvm.FNegOp(a))

    def fma(self, a: SSAValue | float, b: SSAValue | float, c: SSAValue | float) -> SSAValue:
        """a * b + c, rounded once."""
        return self.emit(llvm.FMAOp(self.float_value(a), self.float_value(b), self.float_value(c)))

    def compare(self, predicate: str, lhs: SSAValue, rhs: SSAValue | float) -> SSAValue:
        """`lhs <predicate> rhs` for an llvm.fcmp predicate (`olt`, `ult`, ...)."""
        return self.emit(llvm.FCmpOp(lhs, self.float_value(rhs), predicate))

    def select(self, condition: SSAValue, if_true: SSAValue | float, if_false: SSAValue | float) -> SSAValue:
        return self.emit(llvm.SelectOp(condition, self.float_value(if_true), self.float_value(if_false)))

    def to_bits(self, x: SSAValue) -> SSAValue:
        return self.emit(llvm.BitcastOp(x, self.bits_type))

    def from_bits(self, bits: SSAValue) -> SSAValue:
        return self.emit(llvm.BitcastOp(bits, self.type))

    def int_add(self, a: SSAValue | int, b: SSAValue | int) -> SSAValue:
        return self.emit(llvm.AddOp(self.int_value(a), self.int_value(b)))

    def int_sub(self, a: SSAValue | int, b: SSAValue | int) -> SSAValue:
        return self.emit(llvm.SubOp(self.int_value(a), self.int_value(b)))

    def shift_left(self, a: SSAValue, bits: int) -> SSAValue:
        return self.emit(llvm.ShlOp(a, self.int_value(bits)))

    def shift_right_signed(self, a: SSAValue, bits: int) -> SSAValue:
        return self.emit(llvm.AShrOp(a, self.int_value(bits)))

    def polynomial(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's scheme with fma, highest-degree coefficient first."""
        result = self.constant(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.fma(x, result, coefficient)
        return result

    def clamp(self, x: SSAValue, lower: float, upper: float) -> SSAValue:
        """x clamped to [lower, upper] by ordered compares, so NaN passes through."""
        upper_value, lower_value = self.constant(upper), self.constant(lower)
        x = self.select(self.compare("ogt", x, upper_value), upper_value, x)
        return self.select(self.compare("olt", x, lower_value), lower_value, x)

    def odd_rational(self, x: SSAValue, numerator: Sequence[float], denominator: Sequence[float]) -> SSAValue:
        """x * P(x^2) / Q(x^2)."""
        x2 = self.mul(x, x)
        p = self.mul(x, self.polynomial(x2, numerator))
        return self.div(p, self.polynomial(x2, denominator))


def expand_tanh_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """Eigen's tanh for float: x * P(x^2) / Q(x^2) on [-7.905, 7.905], exactly ±1 beyond (where
    f32 tanh rounds to ±1: the rational alone stops 2^-23 short, and gelu's x * (1 + tanh) would
    not be 0 for large negative x), x near 0 as is."""
    bound = 7.90531110763549805
    x = expr.clamp(a, -bound, bound)
    approx = expr.odd_rational(
        x,
        [
            -2.76076847742355e-16,
            2.00018790482477e-13,
            -8.60467152213735e-11,
            5.12229709037114e-08,
            1.48572235717979e-05,
            6.37261928875436e-04,
            4.89352455891786e-03,
        ],
        [1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03],
    )
    magnitude = expr.emit(intrinsic_call("fabs", [a], expr.type))
    saturated = expr.emit(intrinsic_call("copysign", [expr.constant(1.0), a], expr.type))
    approx = expr.select(expr.compare("oge", magnitude, bound), saturated, approx)
    return expr.select(expr.compare("olt", magnitude, 0.0004), a, approx)


def expand_erf_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """Eigen's erf for float: x * P(x^2) / Q(x^2) on [-4, 4] (±1 beyond)."""
    return expr.odd_rational(
        expr.clamp(a, -4.0, 4.0),
        [
            -2.72614225801306e-10,
            2.77068142495902e-08,
            -2.10102402082508e-06,
            -5.69250639462346e-05,
            -7.34990630326855e-04,
            -2.95459980854025e-03,
            -1.60960333262415e-02,
        ],
        [
            -1.45660718464996e-05,
            -2.13374055278905e-04,
            -1.68282697438203e-03,
            -7.37332916720468e-03,
            -1.42647390514189e-02,
        ],
    )


F32_MANTISSA_BITS = 23
F32_EXPONENT_BIAS = 127
LN2_HIGH, LN2_LOW = 0.693359375, -2.12194440e-4
"""ln 2 = LN2_HIGH + LN2_LOW; LN2_HIGH has 9 significant bits, so k * LN2_HIGH is exact for |k| < 2^15."""


def power_of_two_f32(expr: FloatExpression, k: SSAValue) -> SSAValue:
    """2^k for an i32 k in [-126, 127], built in the exponent bits."""
    return expr.from_bits(expr.shift_left(expr.int_add(k, F32_EXPONENT_BIAS), F32_MANTISSA_BITS))


def ldexp_f32(expr: FloatExpression, x: SSAValue, k: SSAValue) -> SSAValue:
    """x 2^k for an integer k (of the float's width) in [-253, 255], as 2^(k/2) 2^(k - k/2), so
    that a subnormal result rounds once and a large one overflows to inf: two multiplications
    and integer ops, which every vector ISA has (AVX2 has no vector ldexp: LLVM calls libm's
    ldexpf per lane there)."""
    half_k = expr.shift_right_signed(k, 1)
    scaled = expr.mul(x, power_of_two_f32(expr, half_k))
    return expr.mul(scaled, power_of_two_f32(expr, expr.int_sub(k, half_k)))


EXP_COEFFICIENTS = (1.3843607157468796e-3, 8.374195545911789e-3, 4.166800528764725e-2, 1.6666430234909058e-1,
                    4.999999403953552e-1, 1.0)
"""Q(r), highest degree first, with e^r = 1 + r Q(r) on |r| <= ln2 / 2: a weighted least-squares
fit (Lawson's iteration towards the minimax) of the relative error of e^r, rounded to f32. In
f32 with fma it is within 1.2 ulp (7.2e-8) of e^r, as Cephes expf's 1 + r + r^2 P(r) is (1.16 ulp),
in two operations fewer (measured on 200001 points of the interval)."""


SIGMOID_EXP_COEFFICIENTS = (8.290297351777554e-3, 4.1897911578416824e-2, 1.666763573884964e-1, 4.999915063381195e-1,
                            9.999997019767761e-1)
"""EXP_COEFFICIENTS' Q(r) one degree lower (fitted here the same way): within 2.5 ulp (1.5e-7) of
e^r in f32 with fma on 400001 points of the interval, in one fma fewer. Too coarse for exp's
subnormal results (1.3 ulp of 2^-149 off near 2^-126), enough for sigmoid's e^-x, which is never
one: its results stay within 3e-7 relative of float64."""


LOG2_E = 1.4426950408889634
ROUNDING_SHIFT = 1.5 * 2**F32_MANTISSA_BITS
"""Added to a float of magnitude below 2^22, rounds it to an integer n held in the low mantissa bits."""


def reduced_exp_f32(expr: FloatExpression, x: SSAValue, sign: float = 1.0,
                    coefficients: Sequence[float] = EXP_COEFFICIENTS) -> tuple[SSAValue, SSAValue]:
    """e^(sign x) = 2^n e^r for sign = ±1 (e^-x without a negation of its own: LLVM folds it into
    an fma): n = round(sign x / ln 2) by adding ROUNDING_SHIFT, r = sign x - n ln 2 in two fma
    steps (Cody-Waite, |r| <= ln2 / 2), e^r = 1 + r Q(r) by Horner's scheme (Q's `coefficients`,
    EXP_COEFFICIENTS: six fma in all). Returns n + ROUNDING_SHIFT, whose bits are n plus those of
    ROUNDING_SHIFT, and e^r."""
    shifted = expr.fma(x, sign * LOG2_E, ROUNDING_SHIFT)
    n = expr.sub(shifted, ROUNDING_SHIFT)
    r = expr.fma(n, -LN2_LOW, expr.fma(n, -LN2_HIGH, x if sign > 0 else expr.neg(x)))
    return shifted, expr.fma(expr.polynomial(r, coefficients), r, 1.0)


def expand_exp_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """e^x = 2^n e^r (`reduced_exp_f32`) times 2^n by `ldexp_f32` (subnormal results round once,
    large ones overflow to inf). x is clamped to [-104, 89] first, beyond which e^x rounds to 0
    or inf; NaN passes through."""
    shifted, exp_r = reduced_exp_f32(expr, expr.clamp(a, -104.0, 89.0))
    n_int = expr.int_sub(expr.to_bits(shifted), 0x4B400000)  # the bits of ROUNDING_SHIFT
    return ldexp_f32(expr, exp_r, n_int)


def expand_sigmoid_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """1 / (1 + 2^n e^r) for e^-x = 2^n e^r (`reduced_exp_f32` with SIGMOID_EXP_COEFFICIENTS), x
    clamped to [-89, 86] (beyond, sigmoid is 0 or 1 all the same: 1 + e^-86 rounds to 1), so n
    is in [-124, 128] and 2^n is one shift and add on the bits of n + ROUNDING_SHIFT (whose bits
    above n's shift out), n = 128 giving inf; 1 + 2^n e^r is one fma. No ldexp: its halves
    cover subnormal exp results, which 1 + e^-x never needs. Within 3e-7 relative of float64
    where the result is a normal float; subnormal results for x in [-88.38, -87.33], 0 below
    (where they would be under 4.2e-39); 15 vector operations where `1 / (1 +
    expand_exp_f32(-x))` took 24. NaN passes through."""
    shifted, exp_r = reduced_exp_f32(expr, expr.clamp(a, -89.0, 86.0), sign=-1.0, coefficients=SIGMOID_EXP_COEFFICIENTS)
    power = expr.from_bits(expr.int_add(expr.shift_left(expr.to_bits(shifted), F32_MANTISSA_BITS),
                                        F32_EXPONENT_BIAS << F32_MANTISSA_BITS))
    return expr.div(1.0, expr.fma(exp_r, power, 1.0))


def expand_log_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """log x = k ln 2 + log(1 + f) for x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), read off the
    bits (subnormals scaled by 2^23 first); log(1 + f) = f - f^2/2 + f^3 P(f) with Cephes logf's
    degree-8 P. log 0 = -inf, log inf = inf, log of a negative or NaN = NaN, as in NumPy."""
    subnormal = expr.compare("olt", a, 2.0**-126)
    x = expr.select(subnormal, expr.mul(a, 2.0**F32_MANTISSA_BITS), a)
    subnormal_shift = expr.select(subnormal, -float(F32_MANTISSA_BITS), 0.0)
    bits = expr.to_bits(x)
    k_int = expr.shift_right_signed(expr.int_sub(bits, 0x3F3504F3), F32_MANTISSA_BITS)  # 0x3F3504F3: sqrt(1/2)
    f = expr.sub(expr.from_bits(expr.int_sub(bits, expr.shift_left(k_int, F32_MANTISSA_BITS))), 1.0)
    k = expr.add(expr.emit(llvm.SIToFPOp(k_int, expr.type)), subnormal_shift)
    f2 = expr.mul(f, f)
    p = expr.polynomial(
        f,
        [
            7.0376836292e-2,
            -1.1514610310e-1,
            1.1676998740e-1,
            -1.2420140846e-1,
            1.4249322787e-1,
            -1.6668057665e-1,
            2.0000714765e-1,
            -2.4999993993e-1,
            3.3333331174e-1,
        ],
    )
    tail = expr.fma(f2, -0.5, expr.fma(k, LN2_LOW, expr.mul(expr.mul(f2, f), p)))
    log_x = expr.fma(k, LN2_HIGH, expr.add(f, tail))
    log_x = expr.select(expr.compare("oeq", a, float("inf")), a, log_x)
    log_x = expr.select(expr.compare("oeq", a, 0.0), float("-inf"), log_x)
    return expr.select(expr.compare("ult", a, 0.0), float("nan"), log_x)


def expand_pow_f32(expr: FloatExpression, x: SSAValue, y: SSAValue) -> SSAValue:
    """x^y = e^(y log |x|) with the inline exp and log (relative error about |y log x| 2^-24,
    under 1e-5 for results in float range), then C's powf cases, which NumPy follows:
    - the sign: x with its sign bit set (-0 and -inf included) to an odd whole y is negated;
    - NaN for a finite x < 0 to a y that is not whole (+inf counts as whole and even);
    - 1 for y = ±0 (even for a NaN x), for x = 1 (even for a NaN y), and for x = -1 to ±inf.
    The rest falls out of exp and log: 0 to y > 0 is 0, to y < 0 inf; inf to y > 0 is inf, to
    y < 0 is 0; a NaN operand gives NaN."""

    def call(name: str, *args: SSAValue) -> SSAValue:
        return expr.emit(intrinsic_call(name, list(args), expr.type))

    def both(a: SSAValue, b: SSAValue) -> SSAValue:
        return expr.emit(llvm.AndOp(a, b))

    def either(a: SSAValue, b: SSAValue) -> SSAValue:
        return expr.emit(llvm.OrOp(a, b))

    power = expand_exp_f32(expr, expr.mul(y, expand_log_f32(expr, call("fabs", x))))
    y_floor = call("floor", y)
    whole = expr.compare("oeq", y_floor, y)
    half = expr.mul(y, 0.5)
    odd = both(whole, expr.compare("une", call("floor", half), half))
    sign_set = expr.compare("olt", call("copysign", expr.constant(1.0), x), 0.0)
    power = expr.select(both(odd, sign_set), expr.emit(llvm.FNegOp(power)), power)
    negative_finite = both(expr.compare("olt", x, 0.0), expr.compare("ogt", x, float("-inf")))
    power = expr.select(both(negative_finite, expr.compare("une", y_floor, y)), float("nan"), power)
    minus_one_to_inf = both(expr.compare("oeq", x, -1.0), expr.compare("oeq", call("fabs", y), float("inf")))
    one = either(either(expr.compare("oeq", y, 0.0), expr.compare("oeq", x, 1.0)), minus_one_to_inf)
    return expr.select(one, 1.0, power)


F32_EXPANSIONS: dict[type[Operation], Callable[..., SSAValue]] = {
    math.ExpOp: expand_exp_f32,
    math.LogOp: expand_log_f32,
    math.TanhOp: expand_tanh_f32,
    math.ErfOp: expand_erf_f32,
    math.PowFOp: expand_pow_f32,
}
"""f32 ops expanded inline (their operands in order)."""


def libm_function(op: Operation) -> str | None:
    """The libm function `op` calls, or None where it is an intrinsic or expanded inline."""
    if type(op) not in LIBM_OPS:
        return None
    if isinstance(op.results[0].type, Float32Type):
        return None if type(op) in F32_EXPANSIONS else LIBM_OPS[type(op)] + "f"
    return LIBM_OPS[type(op)]


def _is_one(value: SSAValue) -> bool:
    return (isinstance(value.owner, llvm.ConstantOp) and isinstance(value.owner.value, FloatAttr)
            and value.owner.value.value.data == 1.0)


class ExpandSigmoid(RewritePattern):
    """`1 / (1 + math.exp(-x))` on f32, each step's result used once (the loop nests' sigmoid,
    `scalar._sigmoid`, after convert-arith-to-llvm), becomes `expand_sigmoid_f32(x)`, as in the
    ukernels' epilogues."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.ExpOp, rewriter: PatternRewriter, /):
        negation = op.operand.owner
        if not isinstance(op.result.type, Float32Type) or not isinstance(negation, llvm.FNegOp):
            return
        add = op.result.get_user_of_unique_use()
        if not isinstance(add, llvm.FAddOp) or not _is_one(add.lhs if add.rhs is op.result else add.rhs):
            return
        divide = add.res.get_user_of_unique_use()
        if not isinstance(divide, llvm.FDivOp) or divide.rhs is not add.res or not _is_one(divide.lhs):
            return
        expr = FloatExpression(op.result.type)
        result = expand_sigmoid_f32(expr, negation.arg)
        rewriter.insert(expr.ops, InsertPoint.before(op))
        rewriter.replace(divide, [], [result])
        rewriter.erase(add)
        rewriter.erase(op)
        if negation.res.first_use is None:
            rewriter.erase(negation)


class LowerIntrinsicOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (name := INTRINSIC_OPS.get(type(op))) is None:
            return
        new_op = intrinsic_call(name, op.operands, op.results[0].type)
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class ExpandF32Op(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        expand = F32_EXPANSIONS.get(type(op))
        if expand is None or not isinstance(op.results[0].type, Float32Type):
            return
        expr = FloatExpression(op.results[0].type)
        result = expand(expr, *op.operands)
        replace_with_llvm(rewriter, op, expr.ops, result)


class LowerLibmOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (function := libm_function(op)) is None:
            return
        new_op = llvm.CallOp(function, *op.operands, return_type=op.results[0].type, fastmath=fastmath_flags(op))
        replace_with_llvm(rewriter, op, [new_op], new_op.returned)


class LowerRsqrt(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.RsqrtOp, rewriter: PatternRewriter, /):
        expr = FloatExpression(op.result.type)
        root = expr.emit(intrinsic_call("sqrt", [op.operand], expr.type))
        result = expr.emit(llvm.FDivOp(expr.constant(1.0), root))
        replace_with_llvm(rewriter, op, expr.ops, result)


class LowerAbsI(RewritePattern):
    """absi: `llvm.abs` with is_int_min_poison = false, so abs(INT_MIN) = INT_MIN as in NumPy."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: math.AbsIOp, rewriter: PatternRewriter, /):
        int_min_is_poison = llvm.ConstantOp(IntegerAttr(0, i1), i1)
        new_op = intrinsic_call("abs", [op.operand, int_min_is_poison.result], op.result.type)
        replace_with_llvm(rewriter, op, [int_min_is_poison, new_op], new_op.results[0])


def declare_libm_functions(module: ModuleOp) -> None:
    """Declare `llvm.func @erf(f64) -> f64` etc. for the libm functions the module's ops call."""
    for op in list(module.walk()):
        function = libm_function(op)
        if function is not None:
            signature = llvm.LLVMFunctionType([operand.type for operand in op.operands], op.results[0].type)
            declare_function(module, function, signature)


@dataclass(frozen=True)
class ConvertMathToLLVMPass(ModulePass):
    """Lower math ops to LLVM intrinsics, libm calls and inline f32 exp/log/pow/tanh/erf (and sigmoid)."""

    name = "convert-math-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declare_libm_functions(op)
        patterns = [ExpandSigmoid(), ExpandF32Op(), LowerIntrinsicOp(), LowerLibmOp(), LowerRsqrt(), LowerAbsI()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
