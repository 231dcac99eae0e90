"""Consecutive steps on one device (a GPU) as one run of the Executable, their buffers on the device.

    run = DeviceRun(steps, device, slots, constants, exports)   # the Executable makes it
    run(frame)          # copy in, launch every kernel on one stream, copy out, wait once

A run copies in, once per call, each value it reads that none of its steps produces (arguments,
host results); constants outside the groups are copied once, on the first call. It copies out
only the values read after it or returned. Values made and used inside the run stay on the
device, in buffers planned like the host's (`plan_buffers`), and never get a host buffer. The
copies and launches of one call go on one stream, in order, with one wait at the end.

A backend's kernel runs in a device run when it has a `device` attribute (a `Device`) and
`bind` (see `DeviceKernel`); graphopt/backends/cuda.py implements both on the CUDA driver.
"""

from __future__ import annotations

import statistics
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Protocol

import numpy as np
from xdsl.ir import SSAValue

from graphopt.runtime.buffer_plan import PlannedStep, plan_buffers, value_nbytes


class Device(Protocol):
    """An accelerator as a device run uses it. Pointers are device addresses (ints)."""

    def activate(self) -> None:
        """Make the device current on the calling thread."""

    def allocate(self, nbytes: int) -> int: ...

    def free(self, pointers: Sequence[int]) -> None: ...

    def stream(self) -> object:
        """A new stream: work on it runs in the order it was enqueued."""

    def copy_in(self, pointer: int, array: np.ndarray, stream: object) -> None: ...

    def copy_out(self, array: np.ndarray, pointer: int, stream: object) -> None: ...

    def synchronize(self, stream: object) -> None:
        """Wait until everything enqueued on `stream` has run."""

    def event(self) -> object: ...

    def release(self, handles: Sequence[object]) -> None:
        """Destroy streams and events."""

    def record(self, event: object, stream: object) -> None: ...

    def seconds_between(self, start: object, end: object) -> float:
        """Seconds between two recorded events (waits for `end`)."""


class DeviceKernel(Protocol):
    """A kernel that runs on a device: `bind` fixes its buffers and returns its launch."""

    device: Device

    def bind(self, pointers: Sequence[int]) -> Callable[[object], None]:
        """The launch of the kernel on the device buffers of the group's inputs, then outputs;
        called with a stream, it enqueues the kernel there."""


class DeviceStep(PlannedStep, Protocol):
    kernel: DeviceKernel


class DeviceRun:
    """Steps whose kernels run on one device, run as one: see the module's docstring."""

    def __init__(self, steps: Sequence[DeviceStep], device: Device, slots: Mapping[SSAValue, int],
                 constants: Set[SSAValue], exports: Sequence[SSAValue]):
        """`slots`: each value's slot in the Executable's frames; `constants`: values that are
        the same on every call; `exports`: the values the steps make that are read after the
        run or returned (copied out)."""
        self.steps = list(steps)
        self.device = device
        device.activate()
        produced = {v for step in steps for v in step.outputs}
        imports = list(dict.fromkeys(v for step in steps for v in step.inputs if v not in produced))
        plan = plan_buffers(steps, unplanned=set(exports))
        own = {value: device.allocate(value_nbytes(value)) for value in [*imports, *exports]}
        planned = [device.allocate(size) for size in plan.sizes]
        weakref.finalize(self, device.free, [*own.values(), *planned])
        pointer_of = {**own, **{value: planned[buffer] for value, buffer in plan.buffer_of.items()}}
        self.launches = [step.kernel.bind([pointer_of[v] for v in (*step.inputs, *step.outputs)]) for step in steps]
        self.constant_copies = [(slots[v], pointer_of[v]) for v in imports if v in constants]
        self.copies_in = [(slots[v], pointer_of[v]) for v in imports if v not in constants]
        self.copies_out = [(slots[v], pointer_of[v]) for v in exports]
        self._stream = device.stream()
        self._marks = [device.event() for _ in range(len(self.launches) + 1)]
        weakref.finalize(self, device.release, [self._stream, *self._marks])
        self._constants_copied = False
        self._lock = threading.Lock()  # one set of device buffers: calls from several threads take turns

    def __call__(self, frame) -> None:
        with self._lock:
            self._copy_in(frame)
            for launch in self.launches:
                launch(self._stream)
            for slot, pointer in self.copies_out:
                self.device.copy_out(frame.arrays[slot], pointer, self._stream)
            self.device.synchronize(self._stream)

    def step_seconds(self, frame, repeat: int) -> list[float]:
        """Each step's median time on the device over `repeat` launches of the whole run, timed by
        events around its launch, with the inputs copied in once (what `Executable.profile` shows)."""
        device, stream = self.device, self._stream
        with self._lock:
            self._copy_in(frame)
            marks = self._marks
            samples: list[list[float]] = [[] for _ in self.launches]
            for _ in range(repeat):
                device.record(marks[0], stream)
                for launch, mark in zip(self.launches, marks[1:]):
                    launch(stream)
                    device.record(mark, stream)
                device.synchronize(stream)
                for index, times in enumerate(samples):
                    times.append(device.seconds_between(marks[index], marks[index + 1]))
        return [statistics.median(times) for times in samples]

    def _copy_in(self, frame) -> None:
        self.device.activate()
        if not self._constants_copied:
            for slot, pointer in self.constant_copies:
                self.device.copy_in(pointer, frame.arrays[slot], self._stream)
            self._constants_copied = True
        for slot, pointer in self.copies_in:
            self.device.copy_in(pointer, frame.arrays[slot], self._stream)
