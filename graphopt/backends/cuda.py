"""The cuda backend: each group becomes a CUDA kernel (lowering/graph_to_cuda.py), PTX for the
device's architecture (lowering/ptx.py), loaded and launched through the CUDA driver API of
the optional `cuda-bindings` package (`pip install "graphopt[cuda]"`).

    backend = get_backend("cuda")
    backend.supports(group)                  # pure: no driver, no GPU needed
    (kernel,) = backend.compile([group], threads=1)   # GraphoptError without driver/GPU/cuda-bindings
    kernel([x, w], [out])                    # host arrays: copied in, launched, copied out

A kernel keeps its device buffers between calls. Intermediate results go back to the host
after each kernel (the runtime owns host buffers). `estimate` times the group with CUDA events
when a GPU is there, and otherwise from bytes and flops at H100-like rates.
"""

from __future__ import annotations

import statistics
import weakref
from collections.abc import Sequence

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
    """One GPU's primary context, through `cuda.bindings.driver`; raises CudaUnavailable where there is none."""

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
        self.context = self.check(driver.cuDevicePrimaryCtxRetain(self.device))
        self.check(driver.cuCtxSetCurrent(self.context))

    def check(self, result: tuple):
        """The values of a driver call's `(error, *values)` result; raises GraphoptError on an error."""
        error, *values = result
        if error != self.driver.CUresult.CUDA_SUCCESS:
            _, name = self.driver.cuGetErrorName(error)
            raise GraphoptError(f"CUDA driver error {name.decode() if isinstance(name, bytes) else name}")
        return values[0] if len(values) == 1 else tuple(values) or None

    def allocate(self, nbytes: int):
        return self.check(self.driver.cuMemAlloc(max(nbytes, 1)))

    def free(self, pointers: Sequence) -> None:
        for pointer in pointers:
            self.driver.cuMemFree(pointer)

    def to_device(self, pointer, array: np.ndarray) -> None:
        self.check(self.driver.cuMemcpyHtoD(pointer, np.ascontiguousarray(array), array.nbytes))

    def to_host(self, array: np.ndarray, pointer) -> None:
        self.check(self.driver.cuMemcpyDtoH(array, pointer, array.nbytes))

    def load(self, ptx_text: str):
        return self.check(self.driver.cuModuleLoadData(ptx_text.encode() + b"\0"))


class DeviceKernel:
    """A loaded kernel with its launch configuration, device buffers and constant arguments."""

    def __init__(self, device: Device, module, kernel: CudaKernel):
        self.device = device
        self.module = module  # keeps the loaded module alive
        self.function = device.check(device.driver.cuModuleGetFunction(module, kernel.name.encode()))
        self.grid, self.block = kernel.grid, kernel.block
        arg_types = kernel.function.function_type.inputs.data
        self.buffers = [
            device.allocate(int(np.prod(t.get_shape())) * numpy_dtype(t.get_element_type()).itemsize) for t in arg_types
        ]
        weakref.finalize(self, device.free, list(self.buffers))
        attrs = kernel.function.arg_attrs.data if kernel.function.arg_attrs else [None] * len(arg_types)
        self.constants = {
            position: dense_to_numpy(a.data[CONSTANT_ARG_ATTR])
            for position, a in enumerate(attrs)
            if a is not None and CONSTANT_ARG_ATTR in a.data
        }
        for position, value in self.constants.items():
            device.to_device(self.buffers[position], value)

    def launch(self) -> None:
        params = (tuple(self.buffers), (None,) * len(self.buffers))
        self.device.check(self.device.driver.cuLaunchKernel(self.function, *self.grid, *self.block, 0, 0, params, 0))

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out_start = len(self.buffers) - len(outputs)
        for pointer, array in zip(self.buffers, inputs):
            self.device.to_device(pointer, array)
        self.launch()
        for pointer, array in zip(self.buffers[out_start:], outputs):
            self.device.to_host(array, pointer)

    def seconds(self, inputs: Sequence[np.ndarray]) -> float:
        """Median time of one launch on the GPU, by CUDA events (inputs copied in once)."""
        driver, check = self.device.driver, self.device.check
        for pointer, array in zip(self.buffers, inputs):
            self.device.to_device(pointer, array)
        start, end = check(driver.cuEventCreate(0)), check(driver.cuEventCreate(0))
        self.launch()
        times = []
        for _ in range(TIMING_REPEATS):
            check(driver.cuEventRecord(start, 0))
            self.launch()
            check(driver.cuEventRecord(end, 0))
            check(driver.cuEventSynchronize(end))
            times.append(check(driver.cuEventElapsedTime(start, end)) / 1e3)
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
