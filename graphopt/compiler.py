"""graphopt.compile: fuse, partition, compile each group on its backend, and run whole modules.

    exe = graphopt.compile(module)                        # fuse + partition + lower + JIT, once
    exe = graphopt.compile(module, backends=("cpu", "reference"))
    (y,) = exe(x)                                         # NumPy arrays in, fresh arrays out
    print(exe.report())                                   # one line per step: where it runs

The plan is a list of steps in @main's order: each `graph.fused` group, and each op left
outside any group, runs as one kernel of a backend (`graphopt.backends`). A group whose
`backend` attribute is set (by the partition pass) runs there; any other step runs on the
first of `backends` that supports it, else on the reference interpreter, and `report()`
says why. Constants are materialized once at compile time. Intermediate buffers are planned
at compile time (a buffer is reused once the last step reading its value has run) and
allocated once per calling thread, so calls from several threads are safe. `threads`
(default: the GRAPHOPT_THREADS environment variable, else the number of CPUs) is how many
threads a backend may use for one kernel.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from graphopt.backends import Kernel, get_backend
from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.interpreter import check_arguments
from graphopt.lowering.graph_to_linalg import single_op_kernel_name
from graphopt.lowering.jit import aligned_array, aligned_empty
from graphopt.parsing import make_context
from graphopt.transforms.fuse import FusePass
from graphopt.transforms.partition import PartitionPass

ALIGNMENT = 16
"""Arrays handed to kernels are C-contiguous and 16-byte aligned (NumPy's allocator gives it)."""


@dataclass
class Step:
    """One kernel launch of the plan."""

    name: str
    op: Operation
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    backend: str
    reason: str | None = None
    """Why the step does not run on the first backend asked for."""
    kernel: Kernel | None = None


def compile(
    module: ModuleOp,
    backends: Sequence[str] = ("cpu",),
    fuse: bool = True,
    entry: str = "main",
    threads: int | None = None,
    search: str = "greedy",
) -> Executable:
    """Compile `module`'s `entry` function; see the module docstring."""
    for name in backends:
        get_backend(name)
    module = module.clone()
    if fuse:
        FusePass().apply(make_context(), module)
        PartitionPass(backends=tuple(backends), search=search).apply(make_context(), module)
    if threads is None:
        threads = int(os.environ.get("GRAPHOPT_THREADS", os.cpu_count() or 1))
    if threads < 1:
        raise GraphoptError(f"threads must be at least 1, got {threads}")
    return Executable(module, entry, list(backends), threads)


class Executable:
    """A compiled module: call it with NumPy arrays, one per argument of the entry function."""

    def __init__(self, module: ModuleOp, entry: str, backends: list[str], threads: int = 1):
        self.module = module
        self.backends = backends
        self.threads = threads
        self.function = _entry_function(module, entry)
        self.constants: dict[SSAValue, np.ndarray] = {}
        self.steps: list[Step] = []
        for op in self.function.body.block.ops:
            if isinstance(op, graph.ConstantOp):
                self.constants[op.result] = aligned_array(dense_to_numpy(op.value), alignment=ALIGNMENT)
            elif not isinstance(op, ReturnOp):
                self.steps.append(self._step(op))
        self.results = list(self.function.body.block.last_op.operands)
        self.produced = {v for step in self.steps for v in step.outputs}
        self._compile_kernels()
        self._plan_buffers()
        self._workspaces = threading.local()

    # -- planning ------------------------------------------------------------------------

    def _step(self, op: Operation) -> Step:
        if isinstance(op, graph.FusedOp):
            name = op.group_name.data
        else:
            name = single_op_kernel_name(op, sum(not isinstance(s.op, graph.FusedOp) for s in self.steps))
        step = Step(name, op, list(op.operands), list(op.results), "reference")
        pinned = op.backend.data if isinstance(op, graph.FusedOp) and op.backend is not None else None
        reasons = []
        for backend in [pinned] if pinned else self.backends:
            reason = get_backend(backend).supports(op)
            if reason is None:
                step.backend = backend
                break
            reasons.append(f"{backend}: {reason}")
        if pinned and reasons:
            raise GraphoptError(f"group '{name}' is placed on backend {pinned!r}, which refuses it: {reasons[0]}")
        step.reason = "; ".join(reasons) or None
        return step

    def _compile_kernels(self) -> None:
        """Compile each backend's steps together."""
        for backend in dict.fromkeys(s.backend for s in self.steps):
            steps = [s for s in self.steps if s.backend == backend]
            kernels = get_backend(backend).compile([s.op for s in steps], self.threads)
            for step, kernel in zip(steps, kernels, strict=True):
                step.kernel = kernel

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
            step.kernel([values[v] for v in step.inputs], [values[v] for v in step.outputs])
        for value, array in zip(self.results, results):
            if values[value] is not array:  # an argument, a constant, or a value returned twice
                np.copyto(array, values[value])
        return results

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

