"""convert-math-to-llvm: math ops become LLVM intrinsics, libm calls or inline expansions.

    %e = math.exp %x : f32     ->   %e = llvm.call_intrinsic "llvm.exp.f32"(%x) : (f32) -> f32
    %t = math.tanh %x : f32    ->   clamp, two polynomials in x*x (llvm.intr.fma), llvm.fdiv, llvm.select
    %r = math.erf %x : f64     ->   %r = llvm.call @erf(%x) : (f64) -> f64   (plus `llvm.func @erf(f64) -> f64`)

f32 tanh and erf use Eigen's rational approximations (max error a few ulp, no branches, no
calls), so loops around them still vectorize; a libm call per element would stop that. f64
tanh/erf and the functions LLVM has no intrinsic for call libm, which MCJIT resolves in-process.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graphopt.lowering.llvm_types import declare_function, intrinsic_call, replace_with_llvm
from xdsl.context import Context
from xdsl.dialects import llvm, math
from xdsl.dialects.builtin import Float32Type, FloatAttr, IntegerAttr, ModuleOp, i1
from xdsl.ir import Attribute, Operation, SSAValue
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
    """Builds a scalar float expression as a list of llvm ops."""

    def __init__(self, type_: Attribute):
        self.type = type_
        self.ops: list[Operation] = []

    def emit(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def constant(self, value: float) -> SSAValue:
        return self.emit(llvm.ConstantOp(FloatAttr(value, self.type), self.type))

    def polynomial(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's scheme with fma, highest-degree coefficient first."""
        result = self.constant(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.emit(llvm.FMAOp(x, result, self.constant(coefficient)))
        return result

    def clamp(self, x: SSAValue, bound: float) -> SSAValue:
        """x clamped to [-bound, bound] by ordered compares, so NaN passes through."""
        upper, lower = self.constant(bound), self.constant(-bound)
        x = self.emit(llvm.SelectOp(self.emit(llvm.FCmpOp(x, upper, "ogt")), upper, x))
        return self.emit(llvm.SelectOp(self.emit(llvm.FCmpOp(x, lower, "olt")), lower, x))

    def odd_rational(self, x: SSAValue, numerator: Sequence[float], denominator: Sequence[float]) -> SSAValue:
        """x * P(x^2) / Q(x^2)."""
        x2 = self.emit(llvm.FMulOp(x, x))
        p = self.emit(llvm.FMulOp(x, self.polynomial(x2, numerator)))
        return self.emit(llvm.FDivOp(p, self.polynomial(x2, denominator)))


def expand_tanh_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """Eigen's tanh for float: x * P(x^2) / Q(x^2) on [-7.905, 7.905] (±1 beyond), x near 0 as is."""
    x = expr.clamp(a, 7.90531110763549805)
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
    tiny = expr.emit(llvm.FCmpOp(expr.emit(intrinsic_call("fabs", [a], expr.type)), expr.constant(0.0004), "olt"))
    return expr.emit(llvm.SelectOp(tiny, a, approx))


def expand_erf_f32(expr: FloatExpression, a: SSAValue) -> SSAValue:
    """Eigen's erf for float: x * P(x^2) / Q(x^2) on [-4, 4] (±1 beyond)."""
    return expr.odd_rational(
        expr.clamp(a, 4.0),
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


F32_EXPANSIONS: dict[type[Operation], Callable[[FloatExpression, SSAValue], SSAValue]] = {
    math.TanhOp: expand_tanh_f32,
    math.ErfOp: expand_erf_f32,
}


def libm_function(op: Operation) -> str | None:
    """The libm function `op` calls, or None where it is an intrinsic or expanded inline."""
    if type(op) not in LIBM_OPS:
        return None
    if isinstance(op.results[0].type, Float32Type):
        return None if type(op) in F32_EXPANSIONS else LIBM_OPS[type(op)] + "f"
    return LIBM_OPS[type(op)]


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
        result = expand(expr, op.operands[0])
        replace_with_llvm(rewriter, op, expr.ops, result)


class LowerLibmOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (function := libm_function(op)) is None:
            return
        new_op = llvm.CallOp(function, *op.operands, return_type=op.results[0].type)
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
    """Lower math ops to LLVM intrinsics, libm calls and inline f32 tanh/erf."""

    name = "convert-math-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declare_libm_functions(op)
        patterns = [LowerIntrinsicOp(), ExpandF32Op(), LowerLibmOp(), LowerRsqrt(), LowerAbsI()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
