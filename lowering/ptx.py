"""PTX from cuda kernel modules: the llvm dialect with NVVM intrinsics, then llvmlite's NVPTX target.

    module = lower_groups_to_cuda(...)          # func.func kernels marked cuda.kernel (+ host launchers)
    text = ptx(module, arch="sm_90")            # one PTX module holding every kernel (`.entry`)
    text = nvvm_to_ptx(lower_to_nvvm(module), "sm_90")   # the same in two steps

The kernels go to the llvm dialect through the `nvvm` stage of `pipelines.CUDA`.

Only kernels go to the device: host functions (the `launch_` functions) are left out. Kernels
get the `ptx_kernel` calling convention, and globals their alignment, after xDSL's
`convert_module`, which carries neither,
and the module runs LLVM's O3 pipeline for the NVPTX target before assembly is emitted.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm_binding
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp

from graphopt.dialects import cuda
from graphopt.lowering.llvm_module import optimize
from graphopt.lowering.pipelines import CUDA

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
"""Ampere (A100); "sm_90" is Hopper (H100)."""
KERNEL_CALLING_CONVENTION = "ptx_kernel"


def device_module(module: ModuleOp) -> ModuleOp:
    """A copy of `module` holding only its kernels."""
    kernels = [op.clone() for op in module.ops if isinstance(op, func.FuncOp) and cuda.KERNEL_ATTR in op.attributes]
    return ModuleOp(kernels)


def lower_to_nvvm(module: ModuleOp) -> ModuleOp:
    """The kernels of `module` in the llvm dialect (a new module; `module` is left unchanged)."""
    return CUDA.apply(device_module(module), "nvvm")


@functools.cache
def target_machine(arch: str) -> llvm_binding.TargetMachine:
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()
    return llvm_binding.Target.from_triple(NVPTX_TRIPLE).create_target_machine(cpu=arch, opt=3)


def ptx(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of every kernel of `module` for GPU architecture `arch` (sm_80, sm_90, ...)."""
    return nvvm_to_ptx(lower_to_nvvm(module), arch)


def nvvm_to_ptx(lowered: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of `lower_to_nvvm`'s module for `arch` (lower once, emit for several archs)."""
    machine = target_machine(arch)
    ir_module = convert_module(lowered, fallback_target_triple=NVPTX_TRIPLE, data_layout=str(machine.target_data))
    for op in lowered.ops:
        if isinstance(op, llvm.FuncOp) and cuda.KERNEL_ATTR in op.attributes:
            ir_module.get_global(op.sym_name.data).calling_convention = KERNEL_CALLING_CONVENTION
        elif isinstance(op, llvm.GlobalOp) and op.alignment is not None:
            ir_module.get_global(op.sym_name.data).align = op.alignment.value.data
    llvm_module = llvm_binding.parse_assembly(str(ir_module))
    llvm_module.verify()
    optimize(llvm_module, machine, interleaved_accesses=False)  # NVPTX's own default
    return machine.emit_assembly(llvm_module)
