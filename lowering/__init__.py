"""Lowering passes (one per file), registered here under their pass names."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _convert_graph_to_linalg() -> type[ModulePass]:
    from graphopt.lowering.graph_to_linalg import ConvertGraphToLinalgPass

    return ConvertGraphToLinalgPass


def _convert_arith_to_llvm() -> type[ModulePass]:
    from graphopt.lowering.convert_arith_to_llvm import ConvertArithToLLVMPass

    return ConvertArithToLLVMPass


def _convert_math_to_llvm() -> type[ModulePass]:
    from graphopt.lowering.convert_math_to_llvm import ConvertMathToLLVMPass

    return ConvertMathToLLVMPass


def _convert_memref_to_llvm() -> type[ModulePass]:
    from graphopt.lowering.convert_memref_to_llvm import ConvertMemRefToLLVMPass

    return ConvertMemRefToLLVMPass


def _convert_func_to_llvm() -> type[ModulePass]:
    from graphopt.lowering.convert_func_to_llvm import ConvertFuncToLLVMPass

    return ConvertFuncToLLVMPass


def _convert_cf_to_llvm() -> type[ModulePass]:
    from graphopt.lowering.convert_cf_to_llvm import ConvertCfToLLVMPass

    return ConvertCfToLLVMPass


def _fuse_row_loops() -> type[ModulePass]:
    from graphopt.lowering.fuse_row_loops import FuseRowLoopsPass

    return FuseRowLoopsPass


def _convert_graph_to_cuda() -> type[ModulePass]:
    from graphopt.lowering.graph_to_cuda import ConvertGraphToCudaPass

    return ConvertGraphToCudaPass


def _convert_cuda_to_nvvm() -> type[ModulePass]:
    from graphopt.lowering.convert_cuda_to_nvvm import ConvertCudaToNVVMPass

    return ConvertCudaToNVVMPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """graphopt's lowering passes by name, imported lazily (as xDSL does for its own)."""
    return {
        "convert-graph-to-linalg": _convert_graph_to_linalg,
        "fuse-row-loops": _fuse_row_loops,
        "convert-arith-to-llvm": _convert_arith_to_llvm,
        "convert-math-to-llvm": _convert_math_to_llvm,
        "convert-memref-to-llvm": _convert_memref_to_llvm,
        "convert-func-to-llvm": _convert_func_to_llvm,
        "convert-cf-to-llvm": _convert_cf_to_llvm,
        "convert-graph-to-cuda": _convert_graph_to_cuda,
        "convert-cuda-to-nvvm": _convert_cuda_to_nvvm,
    }
