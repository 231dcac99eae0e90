"""convert-cf-to-llvm: cf.br/cf.cond_br become llvm.br/llvm.cond_br; block arguments get llvm types.

    cf.br ^bb1(%c0 : index)             llvm.br ^bb1(%0 : i64)
  ^bb1(%i: index):              ->    ^bb1(%1: i64):
                                        %i = builtin.unrealized_conversion_cast %1 : i64 to index

Entry-block arguments belong to the function and are converted by convert-func-to-llvm.
"""

from dataclasses import dataclass

from graphopt.lowering.llvm_types import (
    convert_block_arguments,
    llvm_operands,
    replace_with_llvm,
)
from xdsl.context import Context
from xdsl.dialects import cf, llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)


class LowerBranch(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.BranchOp, rewriter: PatternRewriter, /):
        replace_with_llvm(rewriter, op, [llvm.BrOp(op.successor, *llvm_operands(rewriter, op.arguments))], None)


class LowerCondBranch(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter, /):
        new_op = llvm.CondBrOp(
            op.cond,
            op.then_block,
            llvm_operands(rewriter, op.then_arguments),
            op.else_block,
            llvm_operands(rewriter, op.else_arguments),
        )
        replace_with_llvm(rewriter, op, [new_op], None)


@dataclass(frozen=True)
class ConvertCfToLLVMPass(ModulePass):
    """Lower cf branches to llvm branches and give non-entry block arguments llvm types."""

    name = "convert-cf-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for region_op in op.walk():
            for region in region_op.regions:
                for block in list(region.blocks)[1:]:
                    convert_block_arguments(block)
        patterns = [LowerBranch(), LowerCondBranch()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
