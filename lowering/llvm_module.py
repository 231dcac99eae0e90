"""Kernel modules to optimized LLVM IR for the host CPU: the `llvm` stage of `pipelines.CPU`,
xDSL's conversion to LLVM IR, the ukernels linked in, then LLVM's O3.

    llvm_module, lowered = optimized_llvm_module(kernels, alignment=16)   # llvmlite ModuleRef
    print(optimized_llvm_ir(kernels))                                     # what graph-opt -t llvm prints

Declarations marked `graph.ukernel` get their bodies from the ukernel's generator
(`ukernels.ukernel_ir`), linked in before O3. The runtime's JIT (`graphopt.runtime.jit`)
compiles exactly this module to machine code.
"""

import llvmlite.binding as llvm_binding
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp

from graphopt.lowering.pipelines import CPU
from graphopt.lowering.ukernels import UKERNEL_ATTR, ukernel_ir
from graphopt.parsing import parse_text


def host_target_machine() -> llvm_binding.TargetMachine:
    """A target machine for this CPU (its name and features), at O3, for JIT use."""
    llvm_binding.initialize_native_target()
    llvm_binding.initialize_native_asmprinter()
    target = llvm_binding.Target.from_triple(llvm_binding.get_process_triple())
    return target.create_target_machine(
        cpu=llvm_binding.get_host_cpu_name(),
        features=llvm_binding.get_host_cpu_features().flatten(),
        opt=3,
        jit=True,
    )


def optimize(llvm_module: llvm_binding.ModuleRef, target_machine: llvm_binding.TargetMachine,
             interleaved_accesses: bool = True) -> None:
    """Run LLVM's O3 pipeline (with loop and SLP vectorization) for the target, in place.

    `interleaved_accesses` False keeps the loop vectorizer from grouping strided accesses: LLVM
    22's vectorizer aborts the process on some such groups (see `interleaving_is_safe`). LLVM
    reads the setting as a process-wide option, so it is set for every module optimized."""
    llvm_binding.set_option("", f"-enable-interleaved-mem-accesses={str(interleaved_accesses).lower()}")
    tuning = llvm_binding.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    pass_builder = llvm_binding.create_pass_builder(target_machine, tuning)
    pass_builder.getModulePassManager().run(llvm_module, pass_builder)


def optimized_llvm_module(module: ModuleOp, alignment: int = 64,
                          target_machine: llvm_binding.TargetMachine | None = None) -> tuple[llvm_binding.ModuleRef, ModuleOp]:
    """`module`'s kernels (left unchanged) as an LLVM module after O3 for `target_machine` (default:
    this CPU), and the llvm-dialect module it was converted from. `alignment`: bytes of alignment
    promised for array arguments."""
    target_machine = target_machine or host_target_machine()
    ukernels = [op for op in module.ops if isinstance(op, func.FuncOp) and UKERNEL_ATTR in op.attributes]
    lowered = CPU.apply(module.clone(), "llvm", alignment=alignment)
    ir_module = convert_module(lowered, fallback_target_triple=target_machine.triple)
    ir_module.data_layout = str(target_machine.target_data)
    llvm_module = llvm_binding.parse_assembly(str(ir_module))
    for ukernel in ukernels:
        llvm_module.link_in(llvm_binding.parse_assembly(ukernel_ir(ukernel.sym_name.data, ukernel.function_type.inputs.data)))
    llvm_module.verify()
    optimize(llvm_module, target_machine, interleaving_is_safe(module))
    return llvm_module, lowered


SHORT_ROW = 16
"""Elements of a row shorter than one AVX-512 vector of f32."""


def interleaving_is_safe(module: ModuleOp) -> bool:
    """False for kernels with a loop nest that runs a reduction outside a short parallel loop
    (under SHORT_ROW elements): a softmax or log_softmax along a non-last axis of few columns.
    Their row loops read with a small stride, and on some (4 columns: 16x4, 17x4 and 65x4 along
    axis 0, 4x17x4 along axis 1) LLVM 22's loop vectorizer asserts that its "VPlan cost model and
    legacy cost model disagreed" and aborts the process; without interleaved access groups it
    does not. Long rows (a conv's output columns) keep interleaving."""
    for op in module.walk():
        if isinstance(op, GenericOp):
            kinds = [str(kind.data) for kind in op.iterator_types.data]
            ranges = op.get_static_loop_ranges()
            if "reduction" in kinds[:-1] and kinds[-1] == "parallel" and ranges[-1] < SHORT_ROW:
                return False
    return True


def optimized_llvm_ir(module: ModuleOp | str, alignment: int = 64) -> str:
    """The LLVM IR of a kernel module after O3 for the host CPU (what the runtime's JIT compiles)."""
    if isinstance(module, str):
        module = parse_text(module)
    return str(optimized_llvm_module(module, alignment)[0])
