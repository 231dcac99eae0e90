"""Lowering passes (one per file), registered here under their pass names."""

from collections.abc import Callable

from xdsl.passes import ModulePass

from graphopt.pass_registry import lazy_passes

PASSES = {
    "convert-graph-to-linalg": ("convert_graph_to_linalg", "ConvertGraphToLinalgPass"),
    "share-kernel-code": ("share_kernel_code", "ShareKernelCodePass"),
    "mark-row-local": ("mark_row_local", "MarkRowLocalPass"),
    "split-rows": ("split_rows", "SplitRowsPass"),
    "fuse-row-loops": ("fuse_row_loops", "FuseRowLoopsPass"),
    "convert-arith-to-llvm": ("convert_arith_to_llvm", "ConvertArithToLLVMPass"),
    "convert-math-to-llvm": ("convert_math_to_llvm", "ConvertMathToLLVMPass"),
    "convert-memref-to-llvm": ("convert_memref_to_llvm", "ConvertMemRefToLLVMPass"),
    "convert-func-to-llvm": ("convert_func_to_llvm", "ConvertFuncToLLVMPass"),
    "convert-cf-to-llvm": ("convert_cf_to_llvm", "ConvertCfToLLVMPass"),
    "convert-graph-to-cuda": ("graph_to_cuda", "ConvertGraphToCudaPass"),
    "convert-cuda-to-nvvm": ("convert_cuda_to_nvvm", "ConvertCudaToNVVMPass"),
}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """graphopt's lowering passes by name, imported lazily."""
    return lazy_passes("graphopt.lowering", PASSES)
