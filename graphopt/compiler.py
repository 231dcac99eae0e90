"""graphopt.compile: fuse, lower each group to one CPU kernel, JIT it, and run whole modules.

    exe = graphopt.compile(module)                # fuse + lower + JIT, once
    (y,) = exe(x)                                 # NumPy arrays in, fresh NumPy arrays out
    print(exe.report())                           # one line per step: kernel or reference

The plan is a list of steps in @main's order. A step is a compiled kernel (a `graph.fused`
group, or one op when `fuse=False` or when it was left alone by fusion) or, for a group the
CPU lowering does not support yet, the reference interpreter; `report()` says which and why.
Constants are materialized once at compile time. Intermediate buffers are planned at compile
time (a buffer is reused once the last step reading its value has run) and allocated once
per calling thread, so calls from several threads are safe. Kernels are called through
ctypes, which releases the GIL while they run: a large kernel that is one parallel loop nest
over rows (`lowering/row_split.py`) runs as `threads` row chunks at once (default: the
GRAPHOPT_THREADS environment variable, else the number of CPUs).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.interpreter import check_arguments, evaluate
from graphopt.lowering.graph_to_linalg import CONSTANT_ARG_ATTR, Unsupported, lower_group, single_op_kernel_name
from graphopt.lowering.jit import ArgumentSpec, KernelArgumentError, aligned_array, aligned_empty, compile_module
from graphopt.lowering.row_split import RowSplit, row_chunk_kernel, row_split
from graphopt.parsing import make_context
from graphopt.transforms.fuse import FusePass

ALIGNMENT = 16
"""Kernel arguments are assumed 16-byte aligned: what NumPy's allocator gives every array."""

BACKENDS = ("cpu", "reference")

PARALLEL_MIN_ELEMENTS = 1 << 16
"""Smaller kernels run on one thread: splitting them costs more than it saves."""


@dataclass
class Step:
    """One kernel launch (or reference evaluation) of the plan."""

    name: str
    op: Operation
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    backend: str
    reason: str | None = None
    """Why the step runs on the reference interpreter."""
    constants: list[np.ndarray] = field(default_factory=list)
    """Extra kernel arguments: the group's non-splat constants."""
    kernel: object = None
    split: RowSplit | None = None
    chunks: list[tuple[str, int]] = field(default_factory=list)
    """Row chunks run in parallel: (kernel name, then the kernel; first row)."""


def compile(
    module: ModuleOp,
    backends: Sequence[str] = ("cpu",),
    fuse: bool = True,
    entry: str = "main",
    threads: int | None = None,
) -> Executable:
    """Compile `module`'s `entry` function for the CPU; see the module docstring."""
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise GraphoptError(f"unknown backend {unknown[0]!r}; available: {', '.join(BACKENDS)}")
    module = module.clone()
    if fuse:
        FusePass().apply(make_context(), module)
    if threads is None:
        threads = int(os.environ.get("GRAPHOPT_THREADS", os.cpu_count() or 1))
    if threads < 1:
        raise GraphoptError(f"threads must be at least 1, got {threads}")
    return Executable(module, entry, use_cpu="cpu" in backends, threads=threads)


class Executable:
    """A compiled module: call it with NumPy arrays, one per argument of the entry function."""

    def __init__(self, module: ModuleOp, entry: str, use_cpu: bool, threads: int = 1):
        self.module = module
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads - 1) if threads > 1 else None
        self.function = _entry_function(module, entry)
        self.constants: dict[SSAValue, np.ndarray] = {}
        self.steps: list[Step] = []
        for op in self.function.body.block.ops:
            if isinstance(op, graph.ConstantOp):
                self.constants[op.result] = aligned_array(dense_to_numpy(op.value), alignment=ALIGNMENT)
            elif not isinstance(op, ReturnOp):
                self.steps.append(self._step(op, use_cpu))
        self.results = list(self.function.body.block.last_op.operands)
        self.produced = {v for step in self.steps for v in step.outputs}
        self._compile_kernels()
        self._plan_buffers()
        self._workspaces = threading.local()

    # -- planning ------------------------------------------------------------------------

    def _step(self, op: Operation, use_cpu: bool) -> Step:
        if isinstance(op, graph.FusedOp):
            name = op.group_name.data
        else:
            name = single_op_kernel_name(op, sum(not isinstance(s.op, graph.FusedOp) for s in self.steps))
        step = Step(name, op, list(op.operands), list(op.results), "reference")
        if not use_cpu:
            step.reason = "cpu backend not selected"
        elif isinstance(op, graph.FusedOp) and op.mode_name == "fallback":
            step.reason = "fallback group"
        elif not isinstance(op, (graph.FusedOp, graph.GraphOp)):
            step.reason = f"{op.name} is not a graph op"
        else:
            try:
                kernel = lower_group(op, name)
                for type_ in kernel.function_type.inputs.data:
                    ArgumentSpec.of(type_)
                step.kernel, step.backend = kernel, "cpu"
            except (Unsupported, KernelArgumentError) as e:
                step.reason = str(e)
        return step

    def _compile_kernels(self) -> None:
        kernel_steps = [s for s in self.steps if s.backend == "cpu"]
        if not kernel_steps:
            return
        for step in kernel_steps:
            step.constants = [
                aligned_array(dense_to_numpy(attrs.data[CONSTANT_ARG_ATTR]), alignment=ALIGNMENT)
                for attrs in (step.kernel.arg_attrs.data if step.kernel.arg_attrs else [])
                if CONSTANT_ARG_ATTR in attrs.data
            ]
        functions = [s.kernel for s in kernel_steps]
        for step in kernel_steps:
            functions += self._row_chunks(step)
        compiled = compile_module(ModuleOp(functions), alignment=ALIGNMENT)
        for step in kernel_steps:
            step.kernel = compiled[step.name]
            step.chunks = [(compiled[name], begin) for name, begin in step.chunks]

    def _row_chunks(self, step: Step) -> list:
        """Kernels for `threads` row chunks of a large row-parallel step (recorded in step.chunks)."""
        split = row_split(step.kernel)
        outputs = sum(int(np.prod(v.type.get_shape())) for v in step.outputs)
        if self.threads == 1 or split is None or outputs < PARALLEL_MIN_ELEMENTS or split.rows < self.threads:
            return []
        step.split = split
        base, extra = divmod(split.rows, self.threads)
        sizes = [base + (i < extra) for i in range(self.threads)]
        names = {size: f"{step.name}_rows{size}" for size in sorted(set(sizes))}
        step.chunks = [(names[size], sum(sizes[:i])) for i, size in enumerate(sizes)]
        return [row_chunk_kernel(step.kernel, split, size, name) for size, name in names.items()]

    def _plan_buffers(self) -> None:
        """Give every intermediate value a slot in a reusable byte buffer (by liveness)."""
        last_use: dict[SSAValue, int] = {}
        for index, step in enumerate(self.steps):
            for value in step.inputs:
                last_use[value] = index
        returned = set(self.results)
        free: list[int] = []
        self.buffer_sizes: list[int] = []
        self.slot_of: dict[SSAValue, int] = {}
        for index, step in enumerate(self.steps):
            for value in step.outputs:
                if value in returned:
                    continue
                size = _nbytes(value)
                fitting = [b for b in free if self.buffer_sizes[b] >= size]
                if fitting:
                    slot = min(fitting, key=self.buffer_sizes.__getitem__)
                    free.remove(slot)
                else:
                    slot = len(self.buffer_sizes)
                    self.buffer_sizes.append(size)
                self.slot_of[value] = slot
            for value in step.inputs:
                if last_use.get(value) == index and value in self.slot_of and value not in step.outputs:
                    free.append(self.slot_of[value])

    # -- running -------------------------------------------------------------------------

    def __call__(self, *arrays, out: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
        """Run on `arrays`; results are fresh arrays, or written into `out` (one per result)."""
        values: dict[SSAValue, np.ndarray] = dict(self.constants)
        args = check_arguments(self.function, arrays)
        values.update(zip(self.function.body.block.args, (_kernel_ready(a) for a in args)))
        values.update(self._workspace())
        results = self._result_arrays(out)
        values.update((v, a) for v, a in zip(self.results, results) if v in self.produced)
        for step in self.steps:
            operands = [values[v] for v in step.inputs]
            if step.backend == "cpu":
                outputs = [values[v] for v in step.outputs]
                addresses = [a.ctypes.data for a in (*operands, *step.constants, *outputs)]
                if step.chunks:
                    self._run_chunks(step, addresses)
                else:
                    step.kernel.unchecked(*addresses)
            else:
                with np.errstate(all="ignore"):
                    for value, result in zip(step.outputs, evaluate(self.module, step.op, operands), strict=True):
                        np.copyto(values[value], result)
        for value, array in zip(self.results, results):
            if values[value] is not array:  # an argument, a constant, or a value returned twice
                np.copyto(array, values[value])
        return results

    def _run_chunks(self, step: Step, addresses: list[int]) -> None:
        """Run the step's row chunks on the pool and this thread; wait for all of them."""
        calls = [
            (kernel.unchecked, [a + begin * stride for a, stride in zip(addresses, step.split.row_bytes, strict=True)])
            for kernel, begin in step.chunks
        ]
        pending = [self._pool.submit(function, *args) for function, args in calls[1:]]
        calls[0][0](*calls[0][1])
        for future in pending:
            future.result()

    def _result_arrays(self, out: Sequence[np.ndarray] | None) -> tuple[np.ndarray, ...]:
        if out is None:
            return tuple(aligned_empty(v.type.get_shape(), _dtype(v), alignment=64) for v in self.results)
        if len(out) != len(self.results):
            raise GraphoptError(f"out= needs {len(self.results)} arrays, got {len(out)}")
        for index, (value, array) in enumerate(zip(self.results, out)):
            shape, dtype = tuple(value.type.get_shape()), _dtype(value)
            if not (isinstance(array, np.ndarray) and array.shape == shape and array.dtype == dtype
                    and array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % ALIGNMENT == 0):
                raise GraphoptError(
                    f"out[{index}] must be a writeable, C-contiguous, {ALIGNMENT}-byte aligned "
                    f"{dtype} array of shape {list(shape)}"
                )
        return tuple(out)

    def _workspace(self) -> dict[SSAValue, np.ndarray]:
        """This thread's views of the planned intermediate buffers, made on its first call."""
        views = getattr(self._workspaces, "views", None)
        if views is None:
            buffers = [aligned_empty(size, np.uint8, alignment=64) for size in self.buffer_sizes]
            views = {
                value: buffers[slot][: _nbytes(value)].view(_dtype(value)).reshape(value.type.get_shape())
                for value, slot in self.slot_of.items()
            }
            self._workspaces.views = views
        return views

    def report(self) -> str:
        """One line per step: its name, where it runs and, for the reference, why."""
        lines = []
        for step in self.steps:
            why = f"  ({step.reason})" if step.reason else ""
            lines.append(f"{step.name:<40} {step.backend}{why}")
        return "\n".join(lines)


def _entry_function(module: ModuleOp, entry: str) -> FuncOp:
    for op in module.body.block.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == entry and op.body.blocks:
            return op
    raise GraphoptError(f"no function @{entry} in the module")


def _dtype(value: SSAValue) -> np.dtype:
    return numpy_dtype(value.type.get_element_type())


def _nbytes(value: SSAValue) -> int:
    return int(np.prod(value.type.get_shape(), dtype=np.int64)) * _dtype(value).itemsize


def _kernel_ready(array: np.ndarray) -> np.ndarray:
    """The array itself when a kernel can read it in place, else an aligned contiguous copy."""
    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
        return array
    return aligned_array(array, alignment=ALIGNMENT)

