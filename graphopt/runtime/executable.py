"""The Executable: a compiled function's steps run on NumPy arrays, with planned buffers.

    exe = Executable(module, function, steps, threads)     # graphopt.compile builds it
    (y,) = exe(x)                                          # NumPy arrays in, fresh arrays out
    exe(x, out=(y,))                                       # or into preallocated arrays
    print(exe.report())                                    # each step: where it runs, and why
    print(exe.profile(x, repeat=20))                       # each step's median time, GFLOP/s, GB/s
    exe.save("model.gx")                                   # graphopt.load("model.gx") runs it again

Each step is one kernel launch, given with its backend and its compiled `Kernel`. Constants are
materialized once. Intermediate buffers are planned once (a buffer is reused once the last step
reading its value has run) and allocated once per calling thread, so calls from several threads
are safe. Consecutive steps whose kernels are native functions (`NativeEntry`) run as one
generated native function that calls them in turn, reading array addresses from the calling
thread's table: a whole cpu-only module is one call from Python. Consecutive steps whose
kernels run on one device (`DeviceKernel`, the cuda backend's) are one device run
(`runtime/device_run.py`): inputs copied in once, every kernel launched on one stream, only
what is read after the run copied out; its other values never leave the device.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy
from graphopt.errors import GraphoptError
from graphopt.interpreter import check_arguments
from graphopt.runtime.arrays import ALIGNMENT, CACHE_LINE, aligned_array, aligned_empty
from graphopt.runtime.buffer_plan import in_place_concats, plan_buffers, value_dtype, value_nbytes
from graphopt.runtime.device_run import Device, DeviceRun
from graphopt.runtime.jit import CallSequence, NativeCall
from graphopt.runtime.profile import Profile, StepProfile
from graphopt.runtime.saved import SavedKernels, write_saved
from graphopt.runtime.thread_pool import workers_awake


class Kernel(Protocol):
    """What a backend's `compile` returns for a group, and all the Executable knows of it. A
    kernel that is one native function says so with a `native` attribute (a `NativeEntry`); one
    that may write a result over an input's buffer, with a `may_overwrite` attribute ({result
    index: input index}; the buffer plan takes it where the input dies: `plan_buffers`)."""

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """Compute the group's outputs into `outputs` (C-contiguous, 16-byte aligned arrays)."""


@dataclass(frozen=True)
class NativeEntry:
    """A kernel as the C function `void f(void *...)` at `address`, called with the data
    addresses of the group's inputs, then of `constants`, then of the group's outputs."""

    address: int
    constants: tuple[np.ndarray, ...]


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
    native_run: int | None = None
    """The run (index in `Executable.runs`) that calls this step's kernel from native code."""
    device_run: int | None = None
    """The run (index in `Executable.runs`) that launches this step's kernel on its device."""
    flops: int = 0
    """Floating-point operations the step computes, as compile counts them (`profile` reads it)."""
    bytes_moved: int = 0
    """Bytes of the step's inputs, outputs and the constants inside it, as compile counts them
    (`profile` reads it)."""


@dataclass(frozen=True)
class StepPlacement:
    """Where one step runs and why (`Executable.placement`)."""

    step: str
    """The step's name: its group's (`<group>.<op>_<n>` for an op of a fallback group)."""
    ops: tuple[str, ...]
    """The kinds of graph ops it computes, each once, in order, without `graph.`."""
    backend: str
    reason: str | None
    """Why it is not on the first backend asked for (each earlier backend's refusal), or why it
    is bound to its backend; None when it is on the first."""


class Executable:
    """A compiled module: call it with NumPy arrays, one per argument of the entry function.

    It is given its steps, each with its backend and compiled kernel (graphopt.compile makes
    them), and plans buffers and native runs; it places nothing and rewrites no IR."""

    def __init__(self, module: ModuleOp, function: FuncOp, steps: list[Step], threads: int = 1, pipeline: str = "",
                 backends: Mapping[str, KernelSaver] | None = None):
        self.module = module
        self.function = function
        self.steps = steps
        self.threads = threads
        self.pipeline = pipeline
        """The graph-level passes that made `module`, as `graph-opt -p` text."""
        self.backends = dict(backends or {})
        """The backends of the steps, by name, for `save` (graphopt.compile gives them)."""
        self.constants: dict[SSAValue, np.ndarray] = {
            op.result: aligned_array(dense_to_numpy(op.value), alignment=CACHE_LINE, huge_pages=True)
            for op in function.body.block.ops if isinstance(op, graph.ConstantOp)
        }
        self.results = list(function.body.block.last_op.operands)
        self._plan_runs()
        self.argument_types = [(tuple(a.type.get_shape()), value_dtype(a)) for a in self.function.body.block.args]
        self.argument_slots = [self.slots[a] for a in self.function.body.block.args]
        self._argument_bytes = [(self.slots[a], value_nbytes(a)) for a in self.function.body.block.args]
        self.result_types = [(tuple(v.type.get_shape()), value_dtype(v)) for v in self.results]
        produced = {v for step in self.steps for v in step.outputs}
        self.result_slots = [
            self.slots[v] if v in produced and self.results.index(v) == i else None for i, v in enumerate(self.results)
        ]
        self._result_bytes = [value_nbytes(v) for v in self.results]
        self._copied_results = None in self.result_slots
        self._frames = threading.local()
        self._step_runs: list[Callable[[Frame], None] | None] | None = None

    # -- planning ------------------------------------------------------------------------

    def _plan_runs(self) -> None:
        """Make the steps into runs, give every value a slot in a per-thread frame, and plan the
        host buffers: each maximal sequence of native kernels is one native call, each maximal
        sequence of kernels on one device one device run (its values stay there unless read
        after it), every other step one Python call."""
        values = [*self.function.body.block.args, *self.constants, *(v for step in self.steps for v in step.outputs)]
        self.slots = {value: slot for slot, value in enumerate(dict.fromkeys(values))}
        sequences = [list(steps) for _, steps in itertools.groupby(self.steps, key=_run_kind)]
        last_read = {value: index for index, step in enumerate(self.steps) for value in step.inputs}
        returned, end = set(self.results), 0
        exports: dict[int, list[SSAValue]] = {}  # per device run (by sequence): values read after it, or returned
        for index, steps in enumerate(sequences):
            end += len(steps)
            if _device(steps[0]) is not None:
                exports[index] = [value for step in steps for value in step.outputs
                                  if value in returned or last_read.get(value, -1) >= end]
        on_device = {value for index, exported in exports.items() for step in sequences[index]
                     for value in step.outputs if value not in exported}
        in_place = {index for index in in_place_concats(self.steps, returned | on_device)
                    if _native(self.steps[index]) is not None}
        overwrites = {index: step.kernel.may_overwrite for index, step in enumerate(self.steps)
                      if getattr(step.kernel, "may_overwrite", None)}
        plan = plan_buffers(self.steps, unplanned=returned | on_device, in_place=in_place, overwrites=overwrites)
        self.buffer_sizes, self.buffer_of, self.offset_of = plan.sizes, plan.buffer_of, plan.offset_of
        self.overwritten = plan.overwritten
        """Each result its step writes over one of its inputs (`plan_buffers`), with that input."""
        self.in_place_steps = {self.steps[index].name for index in in_place}
        """The names of the concats whose producers write their result in place
        (`in_place_concats`): they are never run."""
        self.runs: list[Callable[[Frame], None]] = []
        for index, steps in enumerate(sequences):
            if _native(steps[0]) is not None:
                steps = [step for step in steps if step.name not in self.in_place_steps]
                if steps:
                    self.runs.append(self._native_run(steps))
            elif index in exports:
                self.runs.append(self._device_run(steps, exports[index]))
            else:
                self.runs += [self._python_run(step) for step in steps]

    def _native_run(self, steps: list[Step]) -> Callable[[Frame], None]:
        """The next run: the steps' kernels called from one generated native function."""
        for step in steps:
            step.native_run = len(self.runs)
        return self._call_sequence(steps)

    def _device_run(self, steps: list[Step], exports: list[SSAValue]) -> DeviceRun:
        """The next run: the steps' kernels launched on their device, their values kept there
        but the `exports`."""
        for step in steps:
            step.device_run = len(self.runs)
        return DeviceRun(steps, _device(steps[0]), self.slots, set(self.constants), exports)

    def _call_sequence(self, steps: list[Step]) -> Callable[[Frame], None]:
        """One generated native function calling the steps' kernels with addresses from the frame."""
        sequence = CallSequence([self._native_call(step) for step in steps])
        return lambda frame: sequence.function(frame.table)

    def _native_call(self, step: Step) -> NativeCall:
        native = _native(step)
        inputs = [self.slots[v] for v in step.inputs]
        constants = [(c.ctypes.data,) for c in native.constants]  # fixed addresses
        outputs = [self.slots[v] for v in step.outputs]
        return NativeCall(native.address, (*inputs, *constants, *outputs))

    def _python_run(self, step: Step) -> Callable[[Frame], None]:
        kernel, inputs, outputs = step.kernel, [self.slots[v] for v in step.inputs], [self.slots[v] for v in step.outputs]
        return lambda frame: kernel([frame.arrays[i] for i in inputs], [frame.arrays[o] for o in outputs])

    # -- running -------------------------------------------------------------------------

    def __call__(self, *arrays, out: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
        """Run on `arrays`; results are fresh arrays, or written into `out` (one per result). An
        `out` array that shares memory with an argument (`exe(x, out=[x])`) gets its result
        copied in after the run, as NumPy's `out=` does; `out` arrays sharing memory with each
        other are refused."""
        frame = self._frame()
        for slot, array in zip(self.argument_slots, self._arguments(arrays)):
            if frame.bind(slot, array) % ALIGNMENT or not array.flags.c_contiguous:
                frame.bind(slot, aligned_array(array, alignment=ALIGNMENT))  # a copy kernels can read
        results = self._result_arrays(out)
        targets = None
        written = self._bind_results(frame, results)
        if out is not None and (frame.binds != frame.unshared_at or self._copied_results):  # else last call's arrays
            if self._shares_memory(frame, written):
                targets, results = results, self._result_arrays(None)
                self._bind_results(frame, results)
            else:
                frame.unshared_at = frame.binds
        for run in self.runs:
            run(frame)
        for value, slot, array in zip(self.results, self.result_slots, results):
            if slot is None:  # an argument, a constant, or a value returned twice
                np.copyto(array, frame.arrays[self.slots[value]])
        if targets is not None:
            for target, result in zip(targets, results):
                np.copyto(target, result)
            return targets
        return results

    def _bind_results(self, frame: Frame, results: Sequence[np.ndarray]) -> list[int]:
        """Bind the result arrays; returns their data addresses."""
        addresses = []
        for index, (slot, array) in enumerate(zip(self.result_slots, results)):
            address = frame.bind(slot, array) if slot is not None else array.ctypes.data
            if address % ALIGNMENT:
                raise GraphoptError(self._bad_out_message(index))
            addresses.append(address)
        return addresses

    def _shares_memory(self, frame: Frame, written: list[int]) -> bool:
        """Whether a result array (at `written` addresses) shares bytes with an argument as the
        kernels read it (the caller's array, or the aligned copy made of it); result arrays sharing
        bytes with each other are an error."""
        shared = False
        for index, (start, size) in enumerate(zip(written, self._result_bytes)):
            for other in range(index):
                if _bytes_meet(start, size, written[other], self._result_bytes[other]):
                    raise GraphoptError(f"out[{other}] and out[{index}] share memory: each result needs its own array")
            for slot, argument_size in self._argument_bytes:
                shared = shared or _bytes_meet(start, size, frame.addresses[slot], argument_size)
        return shared

    def profile(self, *arrays, repeat: int = 10) -> Profile:
        """Each step's median time on `arrays`, with the median time of `repeat` whole calls;
        printing the result gives one row per step (`runtime/profile.py`). A host step runs alone
        (one native call, or one Python call) in plan order, `repeat` times after one untimed
        call, the thread pools' workers spinning between steps as they do inside a call
        (`thread_pool.workers_awake`); a step of a device run is timed on the device, by events
        around its launch, over `repeat` launches of its run with the inputs already there (no
        copies)."""
        if repeat < 1:
            raise GraphoptError(f"profile needs repeat of at least 1, got {repeat}")
        self(*arrays)  # binds the arguments, constants and buffers of this thread's frame
        frame = self._frame()
        times: list[list[float]] = [[] for _ in self.steps]
        host_runs = self._single_step_runs()
        with workers_awake():  # as inside a call, a step's chunks start without waking a worker
            for _ in range(repeat):
                for run, samples in zip(host_runs, times):
                    if run is not None:
                        start = time.perf_counter()
                        run(frame)
                        samples.append(time.perf_counter() - start)
        for run in self.runs:
            if isinstance(run, DeviceRun):
                first = next(index for index, step in enumerate(self.steps) if step is run.steps[0])
                for samples, seconds in zip(times[first:], run.step_seconds(frame, repeat)):
                    samples.append(seconds)
        calls = []
        for _ in range(repeat):
            start = time.perf_counter()
            self(*arrays)
            calls.append(time.perf_counter() - start)
        medians = [statistics.median(samples) for samples in times]
        total = sum(medians) or 1.0  # no steps: a module that returns its arguments or constants
        rows = tuple(
            StepProfile(step.name, step.backend, op_kinds(step.op), seconds, seconds / total, step.flops, step.bytes_moved)
            for step, seconds in zip(self.steps, medians)
        )
        return Profile(rows, statistics.median(calls), repeat)

    def _single_step_runs(self) -> list[Callable[[Frame], None] | None]:
        """One run per host step, made on the first profile: a native step as a call sequence of
        its one call, any other as its Python call; None for a step of a device run."""
        if self._step_runs is None:
            self._step_runs = [
                None if step.device_run is not None
                else _nothing if step.name in self.in_place_steps
                else self._call_sequence([step]) if _native(step) is not None
                else self._python_run(step)
                for step in self.steps
            ]
        return self._step_runs

    def _arguments(self, arrays: Sequence[object]) -> Sequence[np.ndarray]:
        """The arrays themselves when they have the argument types, else converted (or an error)."""
        if len(arrays) == len(self.argument_types) and all(
            isinstance(a, np.ndarray) and a.shape == shape and a.dtype == dtype
            for a, (shape, dtype) in zip(arrays, self.argument_types)
        ):
            return arrays
        return check_arguments(self.function, arrays)

    def _result_arrays(self, out: Sequence[np.ndarray] | None) -> Sequence[np.ndarray]:
        if out is None:
            return tuple(aligned_empty(shape, dtype, alignment=CACHE_LINE) for shape, dtype in self.result_types)
        if len(out) != len(self.results):
            raise GraphoptError(f"out= needs {len(self.results)} arrays, got {len(out)}")
        for index, (array, (shape, dtype)) in enumerate(zip(out, self.result_types)):
            if not (isinstance(array, np.ndarray) and array.shape == shape and array.dtype == dtype
                    and array.flags.c_contiguous and array.flags.writeable):
                raise GraphoptError(self._bad_out_message(index))
        return out

    def _bad_out_message(self, index: int) -> str:
        shape, dtype = self.result_types[index]
        return f"out[{index}] must be a writeable, C-contiguous, {ALIGNMENT}-byte aligned {dtype} array of shape {list(shape)}"

    def _frame(self) -> Frame:
        """This thread's frame: constants and its own intermediate buffers bound on its first call."""
        frame = getattr(self._frames, "frame", None)
        if frame is None:
            frame = self._frames.frame = Frame(len(self.slots))
            for value, array in self.constants.items():
                frame.bind(self.slots[value], array)
            buffers = [aligned_empty(size, np.uint8, alignment=CACHE_LINE, huge_pages=True) for size in self.buffer_sizes]
            for value, buffer in self.buffer_of.items():
                start = self.offset_of.get(value, 0)
                view = buffers[buffer][start : start + value_nbytes(value)].view(value_dtype(value))
                frame.bind(self.slots[value], view.reshape(value.type.get_shape()))
        return frame

    def save(self, path: str | os.PathLike) -> None:
        """Write the placed module, its constants and each backend's saved kernels to one file
        (`runtime/saved.py`) that `graphopt.load` runs without compiling on this host."""
        kernels = {}
        for name in dict.fromkeys(step.backend for step in self.steps):
            backend = self.backends.get(name)
            saved = backend.save_kernels([s.kernel for s in self.steps if s.backend == name]) if backend else None
            if saved is not None:
                kernels[name] = saved
        write_saved(path, self.module, self.function.sym_name.data, self.threads, self.pipeline, kernels)

    def llvm_ir(self) -> list[str]:
        """The LLVM IR of each module JIT-compiled for the steps (kernels with an `llvm_ir`,
        the cpu backend's), once each, in step order: what `graph-opt -t llvm` prints."""
        return list(dict.fromkeys(s.kernel.llvm_ir for s in self.steps if hasattr(s.kernel, "llvm_ir")))

    def placement(self) -> list[StepPlacement]:
        """Where each step runs and why, in plan order, as data (what `report` prints).

            [StepPlacement(step="fused_matmul_add_relu_0", ops=("matmul", "add", "relu"), backend="cpu", reason=None), ...]
        """
        return [StepPlacement(step.name, op_kinds(step.op), step.backend, step.reason) for step in self.steps]

    def report(self) -> str:
        """One line per step: its name, where it runs, the native run that calls it (or that it
        is a concat planned in place), the inputs it writes its results over, and for a step
        not on the first backend asked for, why."""
        lines = []
        for step, placed in zip(self.steps, self.placement()):
            run = ("  [in place: its inputs' producers write it]" if step.name in self.in_place_steps
                   else f"  [native run {step.native_run}]" if step.native_run is not None
                   else f"  [device run {step.device_run}]" if step.device_run is not None else "")
            over = "".join(f"  [result {i} over input {step.inputs.index(self.overwritten[v])}]"
                           for i, v in enumerate(step.outputs) if v in self.overwritten)
            why = f"  ({placed.reason})" if placed.reason else ""
            lines.append(f"{placed.step:<40} {placed.backend}{run}{over}{why}")
        return "\n".join(lines)


class KernelSaver(Protocol):
    """What `save` asks of a backend (`graphopt.backends.Backend.save_kernels`)."""

    def save_kernels(self, kernels: Sequence[Kernel]) -> SavedKernels | None: ...


class Frame:
    """One thread's arrays, one per value slot, and their data addresses: the table native runs read.

    A frame keeps the arrays of the last call bound, so an array passed again (the same object)
    costs no new address lookup; holding it also keeps its data where it is.
    """

    def __init__(self, slots: int):
        self.arrays: list[np.ndarray | None] = [None] * slots
        self.addresses = (ctypes.c_int64 * slots)()
        self.table = ctypes.addressof(self.addresses)
        self.binds = 0
        """Arrays bound so far that were not bound already: unchanged, the addresses are."""
        self.unshared_at = -1
        """`binds` when the bound out arrays were last found to share no memory with the arguments."""

    def bind(self, slot: int, array: np.ndarray) -> int:
        """Bind `array` to `slot`; returns its data address."""
        if self.arrays[slot] is not array:
            self.arrays[slot] = array
            self.addresses[slot] = array.ctypes.data
            self.binds += 1
        return self.addresses[slot]


def _bytes_meet(start: int, size: int, other_start: int, other_size: int) -> bool:
    """Whether the `size` bytes at `start` and the `other_size` bytes at `other_start` overlap."""
    return start < other_start + other_size and other_start < start + size


def _nothing(frame: Frame) -> None:
    """The profile's run of a step with nothing to do (a concat planned in place)."""


def _native(step: Step) -> NativeEntry | None:
    """The step's kernel as a native function, when its backend offers one (`Kernel.native`)."""
    return getattr(step.kernel, "native", None)


def _device(step: Step) -> Device | None:
    """The device the step's kernel runs on, when its backend's kernels run on one (`DeviceKernel`)."""
    return getattr(step.kernel, "device", None)


def _run_kind(step: Step) -> object:
    """Steps of one kind in a row make one run: native ones, ones on the same device; each other
    step is its own (a Python call)."""
    if _native(step) is not None:
        return "native"
    device = _device(step)
    return device if device is not None else step


def op_kinds(group: Operation) -> tuple[str, ...]:
    """The kinds of graph ops a step's group computes, each once, in order, without `graph.`."""
    return tuple(dict.fromkeys(op.name.removeprefix("graph.") for op in graph.computed_ops(group)))


