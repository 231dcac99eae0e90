"""convert-func-to-llvm: func.func/return/call become llvm.func/return/call.

    func.func @k(%a: memref<8xf32>, %n: index) {      llvm.func @k(%a: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64},
      ...                                       ->               %n: i64) {
      func.return                                       ...
    }                                                   llvm.return
                                                      }

Functions keep their names and get external linkage, so the JIT can find them. Pointer
(memref) arguments are marked `noalias` and aligned to `alignment` bytes (0: no alignment
claim): callers must pass non-overlapping buffers aligned that much, which the JIT checks. The
arguments paired in a kernel's `graph.may_overwrite` (a result and the input it may be written
over, `linalg/abi.py`) are not `noalias`: the runtime may pass them one buffer.
"""

from dataclasses import dataclass

from graphopt.lowering.linalg.abi import overwrites
from graphopt.lowering.llvm_types import (
    convert_block_arguments,
    llvm_operands,
    llvm_type,
    replace_with_llvm,
)
from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import DiagnosticException


def result_type(types: tuple[Attribute, ...], where: str) -> Attribute:
    """The llvm result type of a function with results `types` (void, or the single one)."""
    if len(types) > 1:
        raise DiagnosticException(f"{where}: functions with several results are not supported")
    return llvm_type(types[0]) if types else llvm.LLVMVoidType()


@dataclass(frozen=True)
class LowerFunc(RewritePattern):
    alignment: int

    def argument_attributes(self, type_: Attribute, shared: bool) -> DictionaryAttr:
        if not isinstance(type_, MemRefType):
            return DictionaryAttr({})
        attributes: dict[str, Attribute] = {} if shared else {"llvm.noalias": UnitAttr()}
        if self.alignment:
            attributes["llvm.align"] = IntegerAttr(self.alignment, i64)
        return DictionaryAttr(attributes)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter, /):
        inputs = op.function_type.inputs.data
        signature = llvm.LLVMFunctionType(
            [llvm_type(t) for t in inputs], result_type(op.function_type.outputs.data, op.sym_name.data)
        )
        shared = {position for pair in overwrites(op) for position in pair}
        body = rewriter.move_region_contents_to_new_regions(op.body)
        if body.blocks:
            convert_block_arguments(body.blocks.first)
        new_op = llvm.FuncOp(
            op.sym_name,
            signature,
            linkage=llvm.LinkageAttr("external"),
            body=body,
            other_props={"arg_attrs": ArrayAttr([self.argument_attributes(t, i in shared) for i, t in enumerate(inputs)])},
        )
        rewriter.replace(op, new_op)


class LowerReturn(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter, /):
        values = llvm_operands(rewriter, op.arguments)
        if len(values) > 1:
            raise DiagnosticException("func.return of several values is not supported")
        replace_with_llvm(rewriter, op, [llvm.ReturnOp(*values)], None)


class LowerCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter, /):
        returns = result_type(tuple(r.type for r in op.results), op.callee.string_value())
        call = llvm.CallOp(
            op.callee,
            *llvm_operands(rewriter, op.arguments),
            return_type=None if isinstance(returns, llvm.LLVMVoidType) else returns,
        )
        replace_with_llvm(rewriter, op, [call], call.returned)


@dataclass(frozen=True)
class ConvertFuncToLLVMPass(ModulePass):
    """Lower func ops to llvm.func/return/call, memref arguments to noalias aligned pointers."""

    name = "convert-func-to-llvm"

    alignment: int = 64
    """Alignment in bytes promised for pointer arguments; 0 promises none."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [LowerFunc(self.alignment), LowerReturn(), LowerCall()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
