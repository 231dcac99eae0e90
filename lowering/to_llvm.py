"""The whole CPU lowering chain of kernel modules: linalg -> loops -> cf -> llvm dialect."""

from graphopt.lowering.convert_arith_to_llvm import ConvertArithToLLVMPass
from graphopt.lowering.convert_cf_to_llvm import ConvertCfToLLVMPass
from graphopt.lowering.convert_func_to_llvm import ConvertFuncToLLVMPass
from graphopt.lowering.convert_math_to_llvm import ConvertMathToLLVMPass
from graphopt.lowering.convert_memref_to_llvm import ConvertMemRefToLLVMPass
from graphopt.lowering.fuse_row_loops import FuseRowLoopsPass
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.convert_linalg_to_loops import ConvertLinalgToLoopsPass
from xdsl.transforms.convert_scf_to_cf import ConvertScfToCf
from xdsl.transforms.linalg_generalize_named_ops import LinalgGeneralizeNamedOpsPass
from xdsl.transforms.lower_affine import LowerAffinePass
from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPass


def to_llvm_passes(alignment: int = 64) -> list[ModulePass]:
    """The passes of the chain, in order (`alignment`: bytes promised for kernel pointer arguments)."""
    return [
        LinalgGeneralizeNamedOpsPass(),
        ConvertLinalgToLoopsPass(),
        FuseRowLoopsPass(),
        LowerAffinePass(),
        ConvertScfToCf(),
        ConvertArithToLLVMPass(),
        ConvertMathToLLVMPass(),
        ConvertMemRefToLLVMPass(),
        ConvertFuncToLLVMPass(alignment),
        ConvertCfToLLVMPass(),
        ReconcileUnrealizedCastsPass(),
    ]


def lower_to_llvm(module: ModuleOp, alignment: int = 64) -> ModuleOp:
    """Lower a module of kernels (func + linalg/scf/arith/math/memref), in place, to the llvm dialect."""
    ctx = Context()
    for lowering_pass in to_llvm_passes(alignment):
        lowering_pass.apply(ctx, module)
    module.verify()
    return module
