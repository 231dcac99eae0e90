"""convert-memref-to-llvm: statically shaped memrefs become bare pointers addressed by GEP.

    %v = memref.load %a[%i, %j] : memref<4x8xf32>
  ->
    %p = builtin.unrealized_conversion_cast %a : memref<4x8xf32> to !llvm.ptr
    %r = llvm.mul %i, %c8 : i64                     (row-major strides of the type)
    %k = llvm.add %r, %j : i64
    %q = llvm.getelementptr inbounds %p[%k] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %v = llvm.load %q : !llvm.ptr -> f32

The address is a GEP on the linearized index, not ptrtoint/add/inttoptr, so LLVM can see
consecutive accesses and vectorize. An i1 element (a mask, as NumPy's bool: one byte) is
loaded as an i8 and truncated, and stored zero-extended: LLVM loads a vector of i1 from memory
one element at a time, which had made GPT-2's masked scores step 1.6x slower. `memref.alloca` becomes an `llvm.alloca` hoisted to the
function's entry block (its size is static), so an alloca inside a loop does not grow the stack.
`memref.alloc`/`memref.dealloc` (row buffers of reductions) call libc's `aligned_alloc`/`free`.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from graphopt.lowering.llvm_types import declare_function, llvm_operands, replace_with_llvm
from xdsl.context import Context
from xdsl.dialects import llvm, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, i1, i8, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException

ALLOCA_ALIGNMENT = 64


def static_layout(type_: MemRefType) -> tuple[Sequence[int], int]:
    """The strides and offset, in elements, of a memref type whose layout is fully static."""
    strides, offset = type_.get_strides(), type_.get_offset()
    if strides is None or offset is None or None in strides or any(d < 0 for d in type_.get_shape()):
        raise DiagnosticException(f"{type_} is not statically shaped and strided")
    return strides, offset


def element_pointer(
    rewriter: PatternRewriter, memref_value: SSAValue, indices: Sequence[SSAValue]
) -> tuple[list[Operation], SSAValue]:
    """Ops computing the address of `memref_value[indices]`, and that address."""
    type_ = memref_value.type
    assert isinstance(type_, MemRefType)
    strides, offset = static_layout(type_)
    pointer, *indices = llvm_operands(rewriter, [memref_value, *indices])
    ops: list[Operation] = []

    def constant(value: int) -> SSAValue:
        ops.append(op := llvm.ConstantOp(IntegerAttr(value, i64), i64))
        return op.result

    linear: SSAValue | None = constant(offset) if offset else None
    for index, stride in zip(indices, strides, strict=True):
        if stride != 1:
            ops.append(scaled := llvm.MulOp(index, constant(stride)))
            index = scaled.res
        if linear is not None:
            ops.append(summed := llvm.AddOp(linear, index))
            index = summed.res
        linear = index
    if linear is None:
        return ops, pointer
    ops.append(gep := llvm.GEPOp(pointer, [llvm.GEP_USE_SSA_VAL], _stored_type(type_.element_type), [linear], inbounds=True))
    return ops, gep.result


def _stored_type(element_type):
    """The type an element is loaded and stored as: i8 for i1 (one byte each, as NumPy's bool)."""
    return i8 if element_type == i1 else element_type


class LowerLoad(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.LoadOp, rewriter: PatternRewriter, /):
        ops, address = element_pointer(rewriter, op.memref, op.indices)
        ops.append(load := llvm.LoadOp(address, _stored_type(op.res.type)))
        if op.res.type == i1:
            ops.append(llvm.TruncOp(load.dereferenced_value, i1))
        replace_with_llvm(rewriter, op, ops, ops[-1].results[0])


class LowerStore(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.StoreOp, rewriter: PatternRewriter, /):
        ops, address = element_pointer(rewriter, op.memref, op.indices)
        (value,) = llvm_operands(rewriter, [op.value])
        if op.value.type == i1:
            ops.append(widened := llvm.ZExtOp(value, i8))
            value = widened.res
        replace_with_llvm(rewriter, op, [*ops, llvm.StoreOp(value, address)], None)


def static_memref_type(value: SSAValue) -> MemRefType:
    """The type of a statically shaped and strided memref value (else an error)."""
    type_ = value.type
    assert isinstance(type_, MemRefType)
    static_layout(type_)
    return type_


class LowerAlloca(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocaOp, rewriter: PatternRewriter, /):
        type_ = static_memref_type(op.memref)
        function: Operation = op
        while not isinstance(parent := function.parent_op(), ModuleOp):
            assert parent is not None
            function = parent
        size = llvm.ConstantOp(IntegerAttr(type_.element_count(), i64), i64)
        alloca = llvm.AllocaOp(size, type_.element_type, alignment=ALLOCA_ALIGNMENT)
        rewriter.insert([size, alloca], InsertPoint.at_start(function.regions[0].blocks.first))
        replace_with_llvm(rewriter, op, [], alloca.res)


class LowerAlloc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter, /):
        type_ = static_memref_type(op.memref)
        element_bytes = type_.element_type.compile_time_size
        size = -(-type_.element_count() * element_bytes // ALLOCA_ALIGNMENT) * ALLOCA_ALIGNMENT
        alignment = llvm.ConstantOp(IntegerAttr(ALLOCA_ALIGNMENT, i64), i64)
        byte_count = llvm.ConstantOp(IntegerAttr(max(size, ALLOCA_ALIGNMENT), i64), i64)
        call = llvm.CallOp("aligned_alloc", alignment, byte_count, return_type=llvm.LLVMPointerType())
        replace_with_llvm(rewriter, op, [alignment, byte_count, call], call.returned)


class LowerDealloc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DeallocOp, rewriter: PatternRewriter, /):
        (pointer,) = llvm_operands(rewriter, [op.memref])
        replace_with_llvm(rewriter, op, [llvm.CallOp("free", pointer)], None)


def declare_allocation_functions(module: ModuleOp) -> None:
    ops = list(module.walk())
    pointer = llvm.LLVMPointerType()
    if any(isinstance(op, memref.AllocOp) for op in ops):
        declare_function(module, "aligned_alloc", llvm.LLVMFunctionType([i64, i64], pointer))
    if any(isinstance(op, memref.DeallocOp) for op in ops):
        declare_function(module, "free", llvm.LLVMFunctionType([pointer]))


@dataclass(frozen=True)
class ConvertMemRefToLLVMPass(ModulePass):
    """Lower memref.load/store/alloca on static memrefs to GEP-addressed llvm ops."""

    name = "convert-memref-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        declare_allocation_functions(op)
        patterns = [LowerLoad(), LowerStore(), LowerAlloca(), LowerAlloc(), LowerDealloc()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
