"""convert-arith-to-llvm: arith ops on scalars become llvm-dialect ops; `index` becomes i64.

    %c = arith.constant 2 : index                 %0 = "llvm.mlir.constant"() <{value = 2 : i64}> : () -> i64
    %s = arith.addf %a, %b : f32          ->      %s = llvm.fadd %a, %b : f32
    %m = arith.maximumf %s, %a : f32              %m = llvm.call_intrinsic "llvm.maximum.f32"(%s, %a) : (f32, f32) -> f32

maximumf/minimumf propagate NaN like NumPy's maximum/minimum (`llvm.maximum`); fptosi and
fptoui saturate (`llvm.fptosi.sat`), so NaN gives 0 and out-of-range values clamp.

addf/subf/mulf/divf/negf keep their fast-math flags (`arith.addf %a, %b fastmath<reassoc> : f32`
-> `llvm.fadd %a, %b {fastmathFlags = #llvm.fastmath<reassoc>} : f32`), so LLVM vectorizes
reductions marked `reassoc`. Ops that become intrinsic calls drop them: xDSL's LLVM IR
converter cannot emit flags on `llvm.call_intrinsic` (LLVM vectorizes `llvm.maximum`
reductions without them); cmpf drops them too (`llvm.fcmp` here has none).
"""

from dataclasses import dataclass

from graphopt.lowering.llvm_types import (
    fastmath_flags,
    intrinsic_call,
    intrinsic_suffix,
    llvm_operands,
    llvm_type,
    replace_with_llvm,
)
from xdsl.context import Context
from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    i1,
    i64,
)
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import DiagnosticException

FLOAT_BINARY_OPS: dict[type[Operation], type[llvm.AbstractFloatArithOp]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}

INTEGER_BINARY_OPS: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
}

CAST_OPS: dict[type[Operation], type[Operation]] = {
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.ExtSIOp: llvm.SExtOp,
    arith.ExtUIOp: llvm.ZExtOp,
    arith.TruncIOp: llvm.TruncOp,
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.BitcastOp: llvm.BitcastOp,
}

INTRINSIC_OPS: dict[type[Operation], str] = {
    arith.MaximumfOp: "maximum",
    arith.MinimumfOp: "minimum",
    arith.MaxnumfOp: "maxnum",
    arith.MinnumfOp: "minnum",
    arith.MaxSIOp: "smax",
    arith.MinSIOp: "smin",
    arith.MaxUIOp: "umax",
    arith.MinUIOp: "umin",
}
"""Ops that are one LLVM intrinsic overloaded on the result type."""

FLOAT_TO_INT_OPS: dict[type[Operation], str] = {arith.FPToSIOp: "fptosi.sat", arith.FPToUIOp: "fptoui.sat"}
"""Saturating conversions: the xDSL llvm dialect has no fptosi/fptoui op."""


class LowerFloatBinaryOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (llvm_op := FLOAT_BINARY_OPS.get(type(op))) is None:
            return
        new_op = llvm_op(*op.operands, fast_math=fastmath_flags(op))
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerIntegerBinaryOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (llvm_op := INTEGER_BINARY_OPS.get(type(op))) is None:
            return
        new_op = llvm_op(*llvm_operands(rewriter, op.operands))
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerCastOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (llvm_op := CAST_OPS.get(type(op))) is None:
            return
        new_op = llvm_op(*llvm_operands(rewriter, op.operands), llvm_type(op.results[0].type))
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerIntrinsicOp(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (name := INTRINSIC_OPS.get(type(op))) is None:
            return
        result_type = llvm_type(op.results[0].type)
        args = llvm_operands(rewriter, op.operands)
        new_op = intrinsic_call(name, args, result_type)
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerFloatToInt(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (name := FLOAT_TO_INT_OPS.get(type(op))) is None:
            return
        (arg,) = op.operands
        result_type = llvm_type(op.results[0].type)
        intrinsic = f"llvm.{name}.{intrinsic_suffix(result_type)}.{intrinsic_suffix(arg.type)}"
        new_op = llvm.CallIntrinsicOp(intrinsic, [arg], [result_type])
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerUIToFP(RewritePattern):
    """uitofp as zext to i64 then sitofp (exact below 64 bits; the dialect has no uitofp)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.UIToFPOp, rewriter: PatternRewriter, /):
        (arg,) = llvm_operands(rewriter, op.operands)
        assert isinstance(arg.type, IntegerType)
        if arg.type.width.data >= 64:
            raise DiagnosticException(f"arith.uitofp from {arg.type} is not supported")
        widened = llvm.ZExtOp(arg, i64)
        new_op = llvm.SIToFPOp(widened, op.result.type)
        replace_with_llvm(rewriter, op, [widened, new_op], new_op.results[0])


class LowerIndexCast(RewritePattern):
    """index_cast: sign-extend or truncate between the integer type and i64."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.IndexCastOp, rewriter: PatternRewriter, /):
        (arg,) = llvm_operands(rewriter, op.operands)
        result_type = llvm_type(op.result.type)
        assert isinstance(arg.type, IntegerType) and isinstance(result_type, IntegerType)
        source_width, result_width = arg.type.width.data, result_type.width.data
        if source_width == result_width:
            replace_with_llvm(rewriter, op, [], arg)
            return
        new_op = (llvm.SExtOp if source_width < result_width else llvm.TruncOp)(arg, result_type)
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerConstant(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter, /):
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(value.type, IndexType):
            value = IntegerAttr(value.value.data, i64)
        if not isinstance(value, IntegerAttr | FloatAttr):
            raise DiagnosticException(f"arith.constant of {value} is not supported (scalars only)")
        new_op = llvm.ConstantOp(value, value.type)
        replace_with_llvm(rewriter, op, [new_op], new_op.result)


class LowerCmpf(RewritePattern):
    """cmpf keeps its predicate (arith and llvm number them alike); `false`/`true` become constants."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpfOp, rewriter: PatternRewriter, /):
        predicate = list(llvm.FCmpPredicateFlag)[op.predicate.value.data]
        if predicate in (llvm.FCmpPredicateFlag.FALSE, llvm.FCmpPredicateFlag.TRUE):
            new_op = llvm.ConstantOp(IntegerAttr(int(predicate == llvm.FCmpPredicateFlag.TRUE), i1), i1)
        else:
            new_op = llvm.FCmpOp(op.lhs, op.rhs, predicate.value)
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerCmpi(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter, /):
        lhs, rhs = llvm_operands(rewriter, op.operands)
        new_op = llvm.ICmpOp(lhs, rhs, op.predicate)
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerSelect(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter, /):
        new_op = llvm.SelectOp(*llvm_operands(rewriter, op.operands))
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


class LowerNegf(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter, /):
        new_op = llvm.FNegOp(op.operand, fastmath_flags(op))
        replace_with_llvm(rewriter, op, [new_op], new_op.results[0])


def icmp_predicate(flag: llvm.ICmpPredicateFlag) -> IntegerAttr:
    """The predicate attribute `llvm.icmp` takes."""
    return IntegerAttr(flag.to_int(), i64)


class LowerFloorDivSI(RewritePattern):
    """floordivsi (from affine floordiv): q = a sdiv b, minus one where the remainder is
    non-zero and has the other sign than b (rounding toward -inf instead of zero)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.FloorDivSIOp, rewriter: PatternRewriter, /):
        lhs, rhs = llvm_operands(rewriter, op.operands)
        quotient = llvm.SDivOp(lhs, rhs)
        remainder = llvm.SRemOp(lhs, rhs)
        zero = llvm.ConstantOp(IntegerAttr(0, lhs.type), lhs.type)
        inexact = llvm.ICmpOp(remainder.res, zero.result, icmp_predicate(llvm.ICmpPredicateFlag.NE))
        signs = llvm.XOrOp(remainder.res, rhs)
        opposite = llvm.ICmpOp(signs.res, zero.result, icmp_predicate(llvm.ICmpPredicateFlag.SLT))
        adjust = llvm.AndOp(inexact.res, opposite.res)
        step = llvm.ZExtOp(adjust.res, lhs.type)
        result = llvm.SubOp(quotient.res, step.res)
        ops = [quotient, remainder, zero, inexact, signs, opposite, adjust, step, result]
        replace_with_llvm(rewriter, op, ops, result.res)


@dataclass(frozen=True)
class ConvertArithToLLVMPass(ModulePass):
    """Lower the scalar arith ops of kernels to the llvm dialect."""

    name = "convert-arith-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [
            LowerFloatBinaryOp(),
            LowerIntegerBinaryOp(),
            LowerCastOp(),
            LowerIntrinsicOp(),
            LowerFloatToInt(),
            LowerUIToFP(),
            LowerIndexCast(),
            LowerConstant(),
            LowerCmpf(),
            LowerCmpi(),
            LowerSelect(),
            LowerNegf(),
            LowerFloorDivSI(),
        ]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
