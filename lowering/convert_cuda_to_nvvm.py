"""convert-cuda-to-nvvm: cuda ops become NVVM intrinsic calls; kernels become `llvm.func`s on global pointers.

    %t = cuda.thread_id x          ->  %0 = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.tid.x"() : () -> i32
                                       %t = llvm.zext %0 : i32 to i64
    cuda.barrier                   ->  llvm.call_intrinsic "llvm.nvvm.barrier0"() : () -> ()
    %r = cuda.shuffle_down %v, %o  ->  %r = llvm.call_intrinsic "llvm.nvvm.shfl.sync.down.f32"(%all, %v, %o, %c31)
    %s = cuda.shared_alloc : memref<256xf32, 3>
                                   ->  %p = llvm.mlir.addressof @cuda_shared_memory : !llvm.ptr<3>
                                       %g = llvm.call_intrinsic "llvm.nvvm.ptr.shared.to.gen.p0.p3"(%p) : (!llvm.ptr<3>) -> !llvm.ptr
                                       %s = llvm.getelementptr inbounds %g[%offset] : (!llvm.ptr, i64) -> !llvm.ptr, i8

Shared memory is one module-wide global in address space 3, `@cuda_shared_memory`, sized for
the kernel that needs most; each kernel packs its allocations into it from offset 0. (One
global of one type, because llvmlite declares the cast intrinsic for a single pointee type.)

A `func.func` marked `cuda.kernel` becomes an `llvm.func` (still marked `cuda.kernel`, for the
PTX emitter to give it the `ptx_kernel` calling convention) whose memref arguments are
`!llvm.ptr<1>`, global memory, turned into generic pointers by `llvm.nvvm.ptr.global.to.gen`
at entry. Memory is addressed through generic pointers because xDSL's LLVM IR translation
of a GEP casts its base to address space 0; LLVM's address-space inference then gives
`ld.global` and `ld.shared` back from the casts. Run with the rest of the to-llvm chain
(see `lowering/ptx.py`); the unrealized casts it leaves are reconciled at the end.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    UnitAttr,
    UnrealizedConversionCastOp,
    i8,
    i32,
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
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from graphopt.dialects import cuda
from graphopt.lowering.convert_func_to_llvm import LowerReturn
from graphopt.lowering.llvm_types import (
    convert_block_arguments,
    intrinsic_suffix,
    llvm_operands,
    llvm_type,
    replace_with_llvm,
)

SPECIAL_REGISTERS: dict[type[cuda.DimensionOp], str] = {
    cuda.ThreadIdOp: "tid",
    cuda.BlockIdOp: "ctaid",
    cuda.BlockDimOp: "ntid",
    cuda.GridDimOp: "nctaid",
}
"""Index op -> the PTX special register it reads (`%tid.x` ...)."""

GLOBAL_POINTER = llvm.LLVMPointerType(IntAttr(1))
SHARED_POINTER = llvm.LLVMPointerType(IntAttr(cuda.SHARED_MEMORY_SPACE))
FULL_WARP = -1
"""Shuffle mask: every lane of the warp takes part."""
SHARED_ARENA = "cuda_shared_memory"
"""The module's one shared-memory global (address space 3); every shared allocation is a slice of it."""
SHARED_ALIGNMENT = 16
LAST_LANE = 31
"""Shuffle clamp: lanes shuffle within the whole warp."""


def _i32(value: int) -> llvm.ConstantOp:
    return llvm.ConstantOp(IntegerAttr(value, i32), i32)


class LowerDimension(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if (register := SPECIAL_REGISTERS.get(type(op))) is None:
            return
        read = llvm.CallIntrinsicOp(f"llvm.nvvm.read.ptx.sreg.{register}.{op.dimension.data}", [], [i32])
        widened = llvm.ZExtOp(read.results[0], i64)
        replace_with_llvm(rewriter, op, [read, widened], widened.res)


class LowerBarrier(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cuda.BarrierOp, rewriter: PatternRewriter, /):
        replace_with_llvm(rewriter, op, [llvm.CallIntrinsicOp("llvm.nvvm.barrier0", [], [])], None)


class LowerShuffleDown(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cuda.ShuffleDownOp, rewriter: PatternRewriter, /):
        mask, clamp = _i32(FULL_WARP), _i32(LAST_LANE)
        value, offset = llvm_operands(rewriter, [op.value, op.offset])
        name = f"llvm.nvvm.shfl.sync.down.{intrinsic_suffix(op.value.type)}"
        shuffle = llvm.CallIntrinsicOp(name, [mask.result, value, offset, clamp.result], [op.result.type])
        replace_with_llvm(rewriter, op, [mask, clamp, shuffle], shuffle.results[0])


@dataclass(frozen=True)
class LowerSharedAlloc(RewritePattern):
    """A shared allocation is its byte offset in the module's shared-memory arena."""

    offsets: dict[cuda.SharedAllocOp, int]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cuda.SharedAllocOp, rewriter: PatternRewriter, /):
        address = llvm.AddressOfOp(SHARED_ARENA, SHARED_POINTER)
        arena = llvm.CallIntrinsicOp("llvm.nvvm.ptr.shared.to.gen.p0.p3", [address.result], [llvm.LLVMPointerType()])
        offset = llvm.ConstantOp(IntegerAttr(self.offsets[op], i64), i64)
        start = llvm.GEPOp(arena.results[0], [llvm.GEP_USE_SSA_VAL], i8, [offset.result], inbounds=True)
        replace_with_llvm(rewriter, op, [address, arena, offset, start], start.result)


def shared_layout(module: ModuleOp) -> tuple[dict[cuda.SharedAllocOp, int], int]:
    """Each shared allocation's byte offset in its kernel's part of the arena, and the arena's size:
    allocations are packed per kernel at SHARED_ALIGNMENT; kernels overlay each other."""
    offsets: dict[cuda.SharedAllocOp, int] = {}
    size = 0
    for function in module.ops:
        end = 0
        for op in function.walk():
            if isinstance(op, cuda.SharedAllocOp):
                offsets[op] = end
                bytes_ = op.memref.type.element_count() * op.memref.type.get_element_type().compile_time_size
                end += -(-bytes_ // SHARED_ALIGNMENT) * SHARED_ALIGNMENT
        size = max(size, end)
    return offsets, size


class LowerKernel(RewritePattern):
    """A kernel's memref arguments become `!llvm.ptr<1>` (noalias), cast to generic pointers at entry."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter, /):
        if cuda.KERNEL_ATTR not in op.attributes:
            return
        if op.function_type.outputs.data:
            raise DiagnosticException(f"@{op.sym_name.data}: a kernel returns nothing")
        inputs = op.function_type.inputs.data
        arg_types = [GLOBAL_POINTER if isinstance(t, MemRefType) else llvm_type(t) for t in inputs]
        body = rewriter.move_region_contents_to_new_regions(op.body)
        entry = body.blocks.first
        for arg, old_type, new_type in zip(list(entry.args), inputs, arg_types):
            if new_type is not GLOBAL_POINTER:
                continue
            new_arg = Rewriter.replace_value_with_new_type(arg, new_type)
            generic = llvm.CallIntrinsicOp("llvm.nvvm.ptr.global.to.gen.p0.p1", [new_arg], [llvm.LLVMPointerType()])
            cast = UnrealizedConversionCastOp.get([generic.results[0]], [old_type])
            Rewriter.insert_op([generic, cast], InsertPoint.at_start(entry))
            new_arg.replace_uses_with_if(cast.results[0], lambda use, generic=generic: use.operation is not generic)
        convert_block_arguments(entry)
        no_alias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        kernel = llvm.FuncOp(
            op.sym_name,
            llvm.LLVMFunctionType(arg_types, llvm.LLVMVoidType()),
            linkage=llvm.LinkageAttr("external"),
            body=body,
            other_props={"arg_attrs": ArrayAttr([no_alias if t is GLOBAL_POINTER else DictionaryAttr({}) for t in arg_types])},
            extra_attrs={cuda.KERNEL_ATTR: UnitAttr()},
        )
        rewriter.replace(op, [kernel])


@dataclass(frozen=True)
class ConvertCudaToNVVMPass(ModulePass):
    """Lower cuda ops to NVVM intrinsics, shared memory to address-space-3 globals and kernels to llvm.func."""

    name = "convert-cuda-to-nvvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        offsets, size = shared_layout(op)
        if offsets:
            zeros = DenseIntOrFPElementsAttr.from_list(TensorType(i8, [size]), [0] * size)
            arena = llvm.GlobalOp(llvm.LLVMArrayType(IntAttr(size), i8), SHARED_ARENA, "internal",
                                  cuda.SHARED_MEMORY_SPACE, value=zeros, alignment=SHARED_ALIGNMENT)
            Rewriter.insert_op(arena, InsertPoint.at_start(op.body.block))
        patterns = [LowerDimension(), LowerBarrier(), LowerShuffleDown(), LowerSharedAlloc(offsets), LowerKernel(), LowerReturn()]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=False).rewrite_module(op)
