"""PTX from cuda kernel modules: the llvm dialect with NVVM intrinsics, then llvmlite's NVPTX target.

    module = lower_groups_to_cuda(...)          # func.func kernels marked cuda.kernel (+ host launchers)
    text = ptx(module, arch="sm_90")            # one PTX module holding every kernel (`.entry`)

Only kernels go to the device: host functions (the `launch_` functions) are left out. Kernels
get the `ptx_kernel` calling convention, and globals their alignment, after xDSL's
`convert_module`, which carries neither,
and the module runs LLVM's O3 pipeline for the NVPTX target before assembly is emitted.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm_binding
from xdsl.backend.llvm.convert import convert_module
from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.convert_scf_to_cf import ConvertScfToCf
from xdsl.transforms.lower_affine import LowerAffinePass
from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPass

from graphopt.dialects import cuda
from graphopt.lowering.convert_arith_to_llvm import ConvertArithToLLVMPass
from graphopt.lowering.convert_cf_to_llvm import ConvertCfToLLVMPass
from graphopt.lowering.convert_cuda_to_nvvm import ConvertCudaToNVVMPass
from graphopt.lowering.convert_func_to_llvm import ConvertFuncToLLVMPass
from graphopt.lowering.convert_math_to_llvm import ConvertMathToLLVMPass
from graphopt.lowering.convert_memref_to_llvm import ConvertMemRefToLLVMPass
from graphopt.lowering.jit import optimize

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
"""Ampere (A100); "sm_90" is Hopper (H100)."""
KERNEL_CALLING_CONVENTION = "ptx_kernel"


def to_nvvm_passes() -> list[ModulePass]:
    """The passes from cuda kernels (scf/affine/arith/math/memref/cuda/func) to the llvm dialect, in order."""
    return [
        LowerAffinePass(),
        ConvertScfToCf(),
        ConvertArithToLLVMPass(),
        ConvertMathToLLVMPass(),
        ConvertMemRefToLLVMPass(),
        ConvertCudaToNVVMPass(),
        ConvertFuncToLLVMPass(),
        ConvertCfToLLVMPass(),
        ReconcileUnrealizedCastsPass(),
    ]


def device_module(module: ModuleOp) -> ModuleOp:
    """A copy of `module` holding only its kernels."""
    kernels = [op.clone() for op in module.ops if isinstance(op, func.FuncOp) and cuda.KERNEL_ATTR in op.attributes]
    return ModuleOp(kernels)


def lower_to_nvvm(module: ModuleOp) -> ModuleOp:
    """The kernels of `module` in the llvm dialect (a new module; `module` is left unchanged)."""
    device = device_module(module)
    ctx = Context()
    for lowering_pass in to_nvvm_passes():
        lowering_pass.apply(ctx, device)
    device.verify()
    return device


@functools.cache
def target_machine(arch: str) -> llvm_binding.TargetMachine:
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()
    return llvm_binding.Target.from_triple(NVPTX_TRIPLE).create_target_machine(cpu=arch, opt=3)


def ptx(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of every kernel of `module` for GPU architecture `arch` (sm_80, sm_90, ...)."""
    lowered = lower_to_nvvm(module)
    machine = target_machine(arch)
    ir_module = convert_module(lowered, fallback_target_triple=NVPTX_TRIPLE, data_layout=str(machine.target_data))
    for op in lowered.ops:
        if isinstance(op, llvm.FuncOp) and cuda.KERNEL_ATTR in op.attributes:
            ir_module.get_global(op.sym_name.data).calling_convention = KERNEL_CALLING_CONVENTION
        elif isinstance(op, llvm.GlobalOp) and op.alignment is not None:
            ir_module.get_global(op.sym_name.data).align = op.alignment.value.data
    llvm_module = llvm_binding.parse_assembly(str(ir_module))
    llvm_module.verify()
    optimize(llvm_module, machine)
    return machine.emit_assembly(llvm_module)
