"""The cuda backend: each group becomes a CUDA kernel (lowering/graph_to_cuda.py), PTX for the
device's architecture (lowering/ptx.py), loaded and launched through the CUDA driver API of
the optional `cuda-bindings` package (`pip install "graphopt[cuda]"`).

    backend = get_backend("cuda")
    backend.supports(group)                  # pure: no driver, no GPU needed
    (kernel,) = backend.compile([group], threads=1)   # GraphoptError without driver/GPU/cuda-bindings
    kernel([x, w], [out])                    # host arrays: copied in, launched, copied out

In an Executable, consecutive cuda steps are one device run (graphopt/runtime/device_run.py):
inputs copied in once, kernels launched on one stream, results copied out once; values made and
used inside the run stay on the GPU. `estimate` times the group with CUDA events
when a GPU is there, and otherwise from bytes and flops at H100-like rates.
"""

from __future__ import annotations

import ctypes
import statistics
import weakref
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from graphopt.backends import Backend
from graphopt.backends.costs import MachineRates
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.lowering.convert_graph_to_linalg import kernel_names
from graphopt.lowering.graph_to_cuda import CudaKernel, lower_group_to_cuda
from graphopt.lowering.graph_to_cuda import supports as cuda_supports
from graphopt.lowering.linalg.abi import CONSTANT_ARG_ATTR
from graphopt.lowering.ptx import ptx
from graphopt.runtime.executable import Kernel

H100_RATES = MachineRates(bandwidth=3.0e12, blas_flops=60e12, vector_flops=30e12, kernel_overhead=5e-6)
"""About an H100 SXM: HBM3 bandwidth reached by a copy, FP32 (non-tensor-core) flop rates, launch cost."""
TILED_MATMUL_SHARE = 0.15
"""A 16x16 shared-memory tiled matmul reaches a small share of the FP32 peak (an estimate, not measured)."""
TIMING_REPEATS = 10


class CudaUnavailable(GraphoptError):
    """No CUDA driver, no GPU, or no cuda-bindings package."""


def _unavailable(reason: str) -> CudaUnavailable:
    return CudaUnavailable(
        f'backend "cuda" cannot run: {reason}. It needs an NVIDIA GPU, its driver and the cuda-bindings '
        f'package (pip install "graphopt[cuda]"); use backend "cpu" instead, e.g. graphopt.compile(m, backends=("cpu",))'
    )


class Device:
    """One GPU's primary context, through `cuda.bindings.driver`; raises CudaUnavailable where
    there is none. It is the `Device` a device run uses (graphopt/runtime/device_run.py)."""

    def __init__(self, ordinal: int = 0):
        try:
            from cuda.bindings import driver
        except ImportError:
            raise _unavailable("the cuda-bindings package is not installed") from None
        self.driver = driver
        try:
            self.check(driver.cuInit(0))
        except RuntimeError as e:  # cuda-bindings raises (a RuntimeError subclass) when there is no driver
            raise _unavailable(f"no CUDA driver ({e})") from None
        if self.check(driver.cuDeviceGetCount()) == 0:
            raise _unavailable("no GPU found")
        self.device = self.check(driver.cuDeviceGet(ordinal))
        attribute = driver.CUdevice_attribute
        major = self.check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device))
        minor = self.check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device))
        self.arch = f"sm_{major}{minor}"
        self.name = self.check(driver.cuDeviceGetName(256, self.device)).split(b"\0")[0].decode()
        self.context = self.check(driver.cuDevicePrimaryCtxRetain(self.device))
        self.activate()

    def check(self, result: tuple):
        """The values of a driver call's `(error, *values)` result; raises GraphoptError on an error."""
        error, *values = result
        if error != self.driver.CUresult.CUDA_SUCCESS:
            _, name = self.driver.cuGetErrorName(error)
            raise GraphoptError(f"CUDA driver error {name.decode() if isinstance(name, bytes) else name}")
        return values[0] if len(values) == 1 else tuple(values) or None

    def activate(self) -> None:
        """Make the context current on the calling thread (a thread starts with none)."""
        self.check(self.driver.cuCtxSetCurrent(self.context))

    def allocate(self, nbytes: int) -> int:
        return int(self.check(self.driver.cuMemAlloc(max(nbytes, 1))))

    def free(self, pointers: Sequence[int]) -> None:
        for pointer in pointers:
            self.driver.cuMemFree(pointer)

    def stream(self):
        return self.check(self.driver.cuStreamCreate(int(self.driver.CUstream_flags.CU_STREAM_NON_BLOCKING)))

    def copy_in(self, pointer: int, array: np.ndarray, stream=0) -> None:
        if array.nbytes:
            self.check(self.driver.cuMemcpyHtoDAsync(pointer, np.ascontiguousarray(array).ctypes.data, array.nbytes, stream))

    def copy_out(self, array: np.ndarray, pointer: int, stream=0) -> None:
        if array.nbytes:
            self.check(self.driver.cuMemcpyDtoHAsync(array.ctypes.data, pointer, array.nbytes, stream))

    def synchronize(self, stream=0) -> None:
        self.check(self.driver.cuStreamSynchronize(stream))

    def event(self):
        return self.check(self.driver.cuEventCreate(int(self.driver.CUevent_flags.CU_EVENT_DEFAULT)))

    def release(self, handles: Sequence) -> None:
        """Destroy streams and events (what `stream` and `event` made)."""
        for handle in handles:
            destroy = self.driver.cuStreamDestroy if isinstance(handle, self.driver.CUstream) else self.driver.cuEventDestroy
            self.check(destroy(handle))

    def record(self, event, stream=0) -> None:
        self.check(self.driver.cuEventRecord(event, stream))

    def seconds_between(self, start, end) -> float:
        self.check(self.driver.cuEventSynchronize(end))
        return self.check(self.driver.cuEventElapsedTime(start, end)) / 1e3

    def load(self, ptx_text: str):
        return self.check(self.driver.cuModuleLoadData(ptx_text.encode() + b"\0"))


class LaunchArguments:
    """Device pointers as the `void **kernelParams` that cuLaunchKernel reads: an array of
    pointers, each to one argument's value (both arrays live as long as this object)."""

    def __init__(self, pointers: Sequence[int]):
        self.values = (ctypes.c_void_p * len(pointers))(*pointers)
        first, size = ctypes.addressof(self.values), ctypes.sizeof(ctypes.c_void_p)
        self.slots = (ctypes.c_void_p * len(pointers))(*(first + i * size for i in range(len(pointers))))
        self.address = ctypes.addressof(self.slots)


class DeviceKernel:
    """A loaded kernel with its launch configuration and its constant arguments on the device.

    In an Executable it runs in a device run (`bind`: the run's buffers); called on host arrays
    (`kernel(inputs, outputs)`, as measurement does) it copies them in and out of buffers of its own.
    """

    def __init__(self, device: Device, module, kernel: CudaKernel):
        self.device = device
        self.module = module  # keeps the loaded module alive
        self.function = device.check(device.driver.cuModuleGetFunction(module, kernel.name.encode()))
        self.grid, self.block = kernel.grid, kernel.block
        arg_types = kernel.function.function_type.inputs.data
        attrs = kernel.function.arg_attrs.data if kernel.function.arg_attrs else [None] * len(arg_types)
        constants = {
            position: dense_to_numpy(a.data[CONSTANT_ARG_ATTR])
            for position, a in enumerate(attrs)
            if a is not None and CONSTANT_ARG_ATTR in a.data
        }
        self.constant_pointers = {position: device.allocate(value.nbytes) for position, value in constants.items()}
        weakref.finalize(self, device.free, list(self.constant_pointers.values()))
        for position, value in constants.items():
            device.copy_in(self.constant_pointers[position], value)
        device.synchronize()
        self.arity = len(arg_types) - len(constants)
        """The group's inputs and outputs: the buffers `bind` takes."""
        self.sizes = [int(np.prod(t.get_shape())) * numpy_dtype(t.get_element_type()).itemsize
                      for position, t in enumerate(arg_types) if position not in constants]
        self._own: tuple[list[int], Callable] | None = None

    def bind(self, pointers: Sequence[int]) -> Callable[[object], None]:
        """The launch on `pointers` (the group's inputs, then its outputs): called with a stream,
        it enqueues the kernel there."""
        if len(pointers) != self.arity:
            raise GraphoptError(f"kernel takes {self.arity} buffers, got {len(pointers)}")
        given = iter(pointers)
        arguments = LaunchArguments([self.constant_pointers.get(position) or next(given)
                                     for position in range(self.arity + len(self.constant_pointers))])
        driver, check, function, grid, block = self.device.driver, self.device.check, self.function, self.grid, self.block

        def launch(stream) -> None:
            check(driver.cuLaunchKernel(function, *grid, *block, 0, stream, arguments.address, 0))

        return launch

    def _own_buffers(self) -> tuple[list[int], Callable[[object], None]]:
        """Buffers of the kernel's own for calls on host arrays, allocated on the first."""
        if self._own is None:
            pointers = [self.device.allocate(size) for size in self.sizes]
            weakref.finalize(self, self.device.free, pointers)
            self._own = pointers, self.bind(pointers)
        return self._own

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        pointers, launch = self._own_buffers()
        self.device.activate()
        for pointer, array in zip(pointers, inputs):
            self.device.copy_in(pointer, array)
        launch(0)
        for pointer, array in zip(pointers[len(inputs):], outputs):
            self.device.copy_out(array, pointer)
        self.device.synchronize()

    def seconds(self, inputs: Sequence[np.ndarray]) -> float:
        """Median time of one launch on the GPU, by CUDA events (inputs copied in once)."""
        pointers, launch = self._own_buffers()
        device = self.device
        device.activate()
        for pointer, array in zip(pointers, inputs):
            device.copy_in(pointer, array)
        start, end = device.event(), device.event()
        launch(0)
        times = []
        for _ in range(TIMING_REPEATS):
            device.record(start)
            launch(0)
            device.record(end)
            times.append(device.seconds_between(start, end))
        device.release([start, end])
        return statistics.median(times)


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, arch: str | None = None):
        self.arch = arch
        """PTX architecture (sm_80, sm_90, ...); default: the device's own."""
        self._device: Device | CudaUnavailable | None = None
        self._measured: dict[str, float] = {}

    def device(self) -> Device:
        """The GPU, opened once; raises CudaUnavailable (the same each time) where there is none."""
        if self._device is None:
            try:
                self._device = Device()
            except CudaUnavailable as e:
                self._device = e
        if isinstance(self._device, CudaUnavailable):
            raise self._device
        return self._device

    def supports(self, group: Operation) -> str | None:
        return cuda_supports(group)

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        device = self.device()
        kernels = [lower_group_to_cuda(group, name) for group, name in zip(groups, kernel_names(groups))]
        module = device.load(ptx(ModuleOp([k.function for k in kernels]), self.arch or device.arch))
        return [DeviceKernel(device, module, kernel) for kernel in kernels]

    def estimate(self, group: Operation) -> float:
        """Seconds of one run: timed with CUDA events on a GPU, else from bytes and flops at H100 rates."""
        try:
            self.device()
        except CudaUnavailable:
            return H100_RATES.kernel_time(group, TILED_MATMUL_SHARE * H100_RATES.blas_flops)
        key = str(group)
        if key not in self._measured:
            (kernel,) = self.compile([group], 1)
            rng = np.random.default_rng(0)
            inputs = [rng.standard_normal(v.type.get_shape()).astype(numpy_dtype(v.type.get_element_type()))
                      for v in group.operands]
            self._measured[key] = kernel.seconds(inputs)
        return self._measured[key]
