"""The cpu backend: each group becomes one kernel through linalg, the llvm dialect and llvmlite.

Each group is lowered to a kernel as convert-graph-to-linalg lowers it, under the same name
(its group's, or `<kind>_<n>` for a single op); the kernels then run the `kernels` stage of
`lowering/pipelines.py`'s CPU target (share-kernel-code: kernels with the same code compile
once; mark-row-local: a row-local kernel's loop nests run row by row in one loop,
`fuse-row-loops`) and, in the JIT, its `llvm` stage. So `graph-opt --fuse
--partition=backends=cpu -t llvm` prints the IR that `compile` JIT-compiles at one thread
(`-p` with `split-rows{threads=2}` shows two threads' chunks).
Kernels of one `compile` call are JIT-compiled together (one LLVM module).

A large kernel that is row-parallel also gets row-chunk variants (`<name>_rows<N>`: the
`kernels` stage's split-rows, given the threads, at most one per usable core) and runs as up
to `threads` chunks at once on the process's native thread pool
(`graphopt/runtime/thread_pool.py`). Every kernel is one native function, split or not.
"""

from __future__ import annotations

import copy
import ctypes
import weakref
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from graphopt.backends import Backend
from graphopt.backends.costs import machine
from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy
from graphopt.errors import GraphoptError
from graphopt.lowering.convert_graph_to_linalg import kernel_names, lower_group
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR, Group, Unsupported, overwrites
from graphopt.lowering.linalg.schedule import packed_matmuls
from graphopt.lowering.pipelines import CPU
from graphopt.lowering.share_kernel_code import code_names
from graphopt.lowering.split_rows import row_chunks
from graphopt.lowering.ukernels import declarations
from graphopt.runtime.arrays import ALIGNMENT, CACHE_LINE, aligned_array
from graphopt.runtime.executable import Kernel, NativeEntry
from graphopt.runtime.jit import ArgumentSpec, CompiledModule, KernelArgumentError, compile_module
from graphopt.runtime.kernel_cache import CacheEntry
from graphopt.runtime.saved import SavedKernels
from graphopt.runtime.thread_pool import ChunkedEntries, ChunkedKernel, ThreadPool, usable_cores

MATMUL_SHARE_OF_BLAS = 0.45
"""Our blocked matmul reaches about this share of NumPy's BLAS rate (39 against 84 GFLOP/s in
benchmarks/cpu_codegen.py)."""
PACKED_GEMM_SHARE_OF_BLAS = 1.15
"""A matmul with a constant b runs as the packed GEMM ukernel (`lowering/packed_gemm.py`): 86-99
against 65-86 GFLOP/s for NumPy's BLAS at 1 thread on the MLP and GELU block shapes
(benchmarks/packed_gemm.py)."""
CONV_SHARE_OF_BLAS = 0.85
"""Our conv2d kernels reach about this share: 58-63 GFLOP/s for the MNIST CNN's first conv (a
loop nest) and 81-86 for its second (the direct convolution ukernel) at 1 thread
(benchmarks/conv_pool.py), where blas pays an im2col copy on top of its GEMM."""


class CpuBackend(Backend):
    """Lowers each group once: the kernel `supports` made is kept (while the group lives) for
    `compile`. Kernels with the same code (a repeated block of a network: same shapes and ops,
    other weights; share-kernel-code) are compiled once and share their machine code, each
    with its own constants."""

    name = "cpu"

    def __init__(self):
        self._lowered: weakref.WeakKeyDictionary[Operation, FuncOp] = weakref.WeakKeyDictionary()

    def supports(self, group: Operation) -> str | None:
        try:
            kernel = self._lower(group, "probe")
            for type_ in kernel.function_type.inputs.data:
                ArgumentSpec.of(type_)
        except (Unsupported, KernelArgumentError) as e:
            return str(e)
        self._lowered[group] = kernel
        return None

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        # more chunks than cores run no faster, and the pool's spinning threads would wait on
        # each other for a core
        threads = min(threads, usable_cores())
        names = kernel_names(groups)
        kernels = [self._kernel(group, name) for group, name in zip(groups, names)]
        module = CPU.apply(ModuleOp(kernels + declarations(kernels)), "weights")
        constants = [_constant_arguments(kernel) for kernel in kernels]  # before share-kernel-code erases aliases
        CPU.apply(module, "kernels", threads=threads)
        code = code_names(module)
        plans: dict[str, KernelPlan] = {}
        for name, kernel, values, group in zip(names, kernels, constants, groups):
            plans[name] = (plans[code[name]].sharing_code_with(name, values) if name in code
                           else KernelPlan.of(kernel, values, len(group.results)))
        return _bind(list(plans.values()), compile_module(module, alignment=ALIGNMENT), threads)

    def save_kernels(self, kernels: Sequence[CpuKernel]) -> SavedKernels | None:
        """The machine code of the kernels' module (the kernel cache's entry: object code, LLVM IR,
        written arguments), each function's signature, and each kernel's plan (code name, row
        chunks, row bytes) and constants (as packed)."""
        compiled, entries = kernels[0].owners
        if any(kernel.owners[0] is not compiled for kernel in kernels):
            return None  # not one compile call's kernels: load compiles them again
        functions = {name: {"arguments": [[str(a.dtype), a.shape] for a in kernel.arguments],
                            "result": None if kernel.result is None else str(kernel.result)}
                     for name, kernel in compiled.items()}
        plans = [{"name": k.plan.name, "code": k.plan.code, "chunks": k.plan.chunks, "row_bytes": k.plan.row_bytes,
                  "constants": len(k.plan.constants), "may_overwrite": list(k.plan.may_overwrite.items())} for k in kernels]
        info = {"metadata": compiled.entry.metadata, "functions": functions, "plans": plans,
                "threads": entries.pool.threads if entries is not None else 1}
        arrays = {"machine_code": np.frombuffer(compiled.entry.machine_code, dtype=np.uint8)}
        for index, kernel in enumerate(kernels):
            arrays.update({f"kernel{index}_constant{i}": c for i, c in enumerate(kernel.plan.constants)})
        return SavedKernels(info, arrays)

    def load_kernels(self, groups: Sequence[Operation], saved: SavedKernels, threads: int) -> list[CpuKernel]:
        """The saved machine code loaded into a new engine: no lowering, no LLVM optimization."""
        info, arrays = saved.info, saved.arrays
        if len(info["plans"]) != len(groups):
            raise GraphoptError(f"the saved cpu kernels are {len(info['plans'])}, for {len(groups)} cpu groups")
        signatures = {
            name: (tuple(ArgumentSpec(np.dtype(dtype), None if shape is None else tuple(shape))
                         for dtype, shape in function["arguments"]),
                   None if function["result"] is None else np.dtype(function["result"]))
            for name, function in info["functions"].items()
        }
        compiled = CompiledModule(CacheEntry(arrays["machine_code"].tobytes(), info["metadata"]), signatures, ALIGNMENT)
        plans = [
            KernelPlan(plan["name"], plan["code"],
                       [aligned_array(arrays[f"kernel{index}_constant{i}"], alignment=CACHE_LINE, huge_pages=True)
                        for i in range(plan["constants"])],
                       [tuple(chunk) for chunk in plan["chunks"]], tuple(plan["row_bytes"]), dict(plan["may_overwrite"]))
            for index, plan in enumerate(info["plans"])
        ]
        return _bind(plans, compiled, info["threads"])

    def estimate(self, group: Operation) -> float:
        rates = machine()
        if any(isinstance(op, graph.Conv2dOp) for op in graph.computed_ops(group)):
            share = CONV_SHARE_OF_BLAS
        elif packed_matmuls(Group.of(group)):
            share = PACKED_GEMM_SHARE_OF_BLAS
        else:
            share = MATMUL_SHARE_OF_BLAS
        return rates.kernel_time(group, share * rates.blas_flops)

    def _kernel(self, group: Operation, name: str) -> FuncOp:
        """`group`'s kernel named `name`: the one `supports` lowered, else a new one."""
        kernel = self._lowered.pop(group, None)
        if kernel is None:
            kernel = self._lower(group, name)
        kernel.sym_name = StringAttr(name)
        return kernel

    @staticmethod
    def _lower(group: Operation, name: str) -> FuncOp:
        if isinstance(group, graph.FusedOp) and group.mode_name == "fallback":
            raise Unsupported("a fallback group is not compiled as one kernel")
        if not isinstance(group, (graph.FusedOp, graph.GraphOp)):
            raise Unsupported(f"{group.name} is not a graph op")
        return lower_group(group, name)


def _bind(plans: Sequence[KernelPlan], compiled: CompiledModule, threads: int) -> list[CpuKernel]:
    """The kernels of `plans`, whose code `compiled` holds; chunked ones run on the pool of `threads`."""
    chunked = [plan.chunked(compiled) for plan in plans if plan.chunks]
    entries = ChunkedEntries(ThreadPool.of(threads), chunked) if chunked else None
    return [plan.bind(compiled, entries) for plan in plans]


class KernelPlan:
    """One kernel after the `kernels` stage: its constant arguments and its row chunks."""

    def __init__(self, name: str, code: str, constants: list[np.ndarray], chunks: list[tuple[str, int]],
                 row_bytes: tuple[int, ...], may_overwrite: dict[int, int]):
        self.name = name
        self.code = code
        """The name of the compiled function holding the kernel's code."""
        self.constants = constants
        self.chunks, self.row_bytes = chunks, row_bytes
        self.may_overwrite = may_overwrite
        """{result index: input index} of each result the kernel may write over an input (`graph.may_overwrite`)."""

    @staticmethod
    def of(kernel: FuncOp, constants: list[np.ndarray], results: int) -> KernelPlan:
        """The plan of `kernel`, the function of a group of `results` results."""
        first_result = len(kernel.function_type.inputs) - results
        may_overwrite = {result - first_result: input_ for result, input_ in overwrites(kernel)}
        return KernelPlan(kernel.sym_name.data, kernel.sym_name.data, constants, *row_chunks(kernel), may_overwrite)

    def sharing_code_with(self, name: str, constants: list[np.ndarray]) -> KernelPlan:
        """The plan of kernel `name`, an alias of this plan's (share-kernel-code): it runs this
        plan's code, and its chunks, with its own `constants`."""
        plan = copy.copy(self)
        plan.name, plan.constants = name, constants
        return plan

    def chunked(self, compiled: CompiledModule) -> ChunkedKernel:
        chunks = tuple((compiled[name].address, begin) for name, begin in self.chunks)
        return ChunkedKernel(self.name, self.row_bytes, chunks)

    def bind(self, compiled: CompiledModule, entries: ChunkedEntries | None) -> CpuKernel:
        kernel = compiled[self.code]
        address = entries.address(self.name) if self.chunks else kernel.address
        return CpuKernel(address, len(kernel.arguments), self, (compiled, entries))


def _constant_arguments(kernel: FuncOp) -> list[np.ndarray]:
    """The values of `kernel`'s constant arguments, aligned, in argument order."""
    return [
        aligned_array(dense_to_numpy(attrs.data[CONSTANT_ARG_ATTR]), alignment=CACHE_LINE, huge_pages=True)
        for attrs in (kernel.arg_attrs.data if kernel.arg_attrs else [])
        if CONSTANT_ARG_ATTR in attrs.data
    ]


class CpuKernel:
    """Calls a JIT-compiled kernel, or the native entry that runs its row chunks on the thread
    pool, on array addresses (the runtime checked shapes and dtypes). Either is `native`: the
    runtime may call it from native code."""

    def __init__(self, address: int, arguments: int, plan: KernelPlan, owners):
        self.owners = owners  # keep the machine code of the kernel, its chunks and its entry alive
        self.llvm_ir = owners[0].llvm_ir
        """The LLVM IR (after O3) of the module JIT-compiled with this kernel."""
        self.plan = plan
        self.constants = plan.constants
        self.chunks = plan.chunks
        """(chunk function, first row unit) of each row chunk (split-rows); none: one call."""
        self.may_overwrite = plan.may_overwrite
        self.native = NativeEntry(address, tuple(plan.constants))
        self.function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * arguments)(address)

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.function(*[a.ctypes.data for a in (*inputs, *self.constants, *outputs)])
