"""Device runs of the Executable (graphopt/runtime/device_run.py) on a device made of host memory:
what is copied in and out, which values stay on the device, how its buffers are reused. The
kernels are the cpu backend's, launched on the device's buffers; the CUDA ones run in
tests/test_cuda_ptx.py (marker `gpu`)."""

import dataclasses
import gc
import time

import numpy as np
import pytest

import graphopt
from graphopt.runtime.arrays import aligned_empty
from graphopt.runtime.buffer_plan import value_dtype
from graphopt.runtime.device_run import DeviceRun
from graphopt.runtime.executable import Executable


class HostMemoryDevice:
    """A `Device` whose memory is host arrays, counting what a run asks of it."""

    def __init__(self):
        self.memory: dict[int, np.ndarray] = {}
        self.copies_in: list[int] = []
        self.copies_out: list[int] = []
        self.freed: list[int] = []
        self.released: list[object] = []

    def activate(self):
        pass

    def allocate(self, nbytes):
        buffer = aligned_empty(max(nbytes, 1), np.uint8, alignment=64)
        self.memory[buffer.ctypes.data] = buffer
        return buffer.ctypes.data

    def free(self, pointers):
        self.freed += pointers

    def view(self, pointer, value):
        dtype, shape = value_dtype(value), value.type.get_shape()
        return self.memory[pointer][: int(np.prod(shape)) * dtype.itemsize].view(dtype).reshape(shape)

    def stream(self):
        return object()

    def copy_in(self, pointer, array, stream=None):
        self.copies_in.append(pointer)
        self.memory[pointer][: array.nbytes] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)

    def copy_out(self, array, pointer, stream=None):
        self.copies_out.append(pointer)
        np.copyto(array, self.memory[pointer][: array.nbytes].view(array.dtype).reshape(array.shape))

    def synchronize(self, stream=None):
        pass

    def event(self):
        return [0.0]

    def release(self, handles):
        self.released += handles

    def record(self, event, stream=None):
        event[0] = time.perf_counter()

    def seconds_between(self, start, end):
        return end[0] - start[0]


class OnDevice:
    """A cpu kernel as a `DeviceKernel` of `device`: it computes on the device's buffers."""

    def __init__(self, kernel, device, step):
        self.kernel, self.device, self.step = kernel, device, step

    def bind(self, pointers):
        inputs = [self.device.view(p, v) for p, v in zip(pointers, self.step.inputs)]
        outputs = [self.device.view(p, v) for p, v in zip(pointers[len(inputs):], self.step.outputs)]
        return lambda stream: self.kernel(inputs, outputs)


def executable(text: str, on_device: set[str]) -> tuple[Executable, HostMemoryDevice]:
    """The module compiled one op per step on cpu, the steps named in `on_device` moved to a device."""
    compiled = graphopt.compile(graphopt.parse(text), backends=("cpu",), fuse=False)
    device = HostMemoryDevice()
    steps = []
    for step in compiled.steps:
        step = dataclasses.replace(step, native_run=None)
        if step.name in on_device:
            step.kernel, step.backend = OnDevice(step.kernel, device, step), "device"
        steps.append(step)
    return Executable(compiled.module, compiled.function, steps), device


CHAIN = """func.func @main(%x: tensor<5x7xf32>, %w: tensor<7xf32>) -> tensor<5x7xf32> {
  %0 = graph.mul %x, %w : (tensor<5x7xf32>, tensor<7xf32>) -> tensor<5x7xf32>
  %1 = graph.add %0, %x : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
  %2 = graph.relu %1 : tensor<5x7xf32>
  %3 = graph.neg %2 : tensor<5x7xf32>
  func.return %3 : tensor<5x7xf32>
}"""
CHAIN_STEPS = {"mul_0", "add_1", "relu_2", "neg_3"}


def arrays(rng, *shapes):
    values = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    values[0].flat[:3] = [np.nan, np.inf, -np.inf]
    return values


def test_a_chain_on_one_device_copies_its_inputs_in_once_and_its_result_out_once():
    exe, device = executable(CHAIN, CHAIN_STEPS)
    assert sorted(step.device_run for step in exe.steps) == [0] * 4 and len(exe.runs) == 1
    assert exe.buffer_of == {}  # no intermediate value gets a host buffer
    # x and w, the result, and two planned buffers for the three intermediates (relu's reuses mul's)
    assert len(device.memory) == 2 + 1 + 2
    rng = np.random.default_rng(0)
    for call in range(2):
        x, w = arrays(rng, (5, 7), (7,))
        expected = graphopt.interpret(exe.module, x, w)
        np.testing.assert_array_equal(exe(x, w)[0], expected[0])
        assert (len(device.copies_in), len(device.copies_out)) == (2 * (call + 1), call + 1)
    assert "[device run 0]" in exe.report()


def test_only_values_read_after_the_run_or_returned_are_copied_out():
    text = """func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %0 = graph.exp %x : tensor<6xf32>
  %1 = graph.neg %0 : tensor<6xf32>
  %2 = graph.relu %1 : tensor<6xf32>
  %3 = graph.add %1, %x : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  func.return %3, %0 : tensor<6xf32>, tensor<6xf32>
}"""
    # exp, neg and relu on the device; the host's add reads neg's value
    exe, device = executable(text, {"exp_0", "neg_1", "relu_2"})
    (x,) = arrays(np.random.default_rng(1), (6,))
    expected = graphopt.interpret(exe.module, x)
    for got, want in zip(exe(x), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(device.copies_out) == 2  # exp's (returned) and neg's (read by add); relu's stays
    relu = exe.steps[2].outputs[0]
    assert relu not in exe.buffer_of


def test_a_device_run_after_a_host_step_copies_in_what_the_host_made():
    exe, device = executable(CHAIN, {"add_1", "relu_2"})
    assert [step.device_run for step in exe.steps] == [None, 1, 1, None]
    x, w = arrays(np.random.default_rng(2), (5, 7), (7,))
    np.testing.assert_array_equal(exe(x, w)[0], graphopt.interpret(exe.module, x, w)[0])
    assert (len(device.copies_in), len(device.copies_out)) == (2, 1)  # mul's result and x in; relu's out


def test_constants_outside_groups_are_copied_once():
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<[1.0, -2.0, 3.0, -4.0]> : tensor<4xf32>
  %0 = graph.mul %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}"""
    exe, device = executable(text, {"mul_0"})
    constant = next(iter(exe.constants))
    run = exe.runs[0]
    assert isinstance(run, DeviceRun)
    x = np.arange(4, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(exe(x)[0], x * np.array([1, -2, 3, -4], np.float32))
    assert constant in exe.steps[0].inputs  # an operand of the group, not folded into it
    assert len(device.copies_in) == 1 + 3


def test_profile_times_device_steps_on_the_device():
    exe, device = executable(CHAIN, CHAIN_STEPS)
    x, w = arrays(np.random.default_rng(3), (5, 7), (7,))
    profile = exe.profile(x, w, repeat=3)
    assert [row.name for row in profile.steps] == [step.name for step in exe.steps]
    assert all(row.seconds > 0 for row in profile.steps)
    assert len(device.copies_in) == 2 * (1 + 1 + 3)  # the first call, the profile's one copy in, 3 calls


def test_the_device_buffers_stream_and_events_are_freed_with_the_executable():
    exe, device = executable(CHAIN, CHAIN_STEPS)
    allocated = set(device.memory)
    del exe
    gc.collect()
    assert set(device.freed) == allocated
    assert len(device.released) == 1 + 5  # the stream, and an event before and after each of the 4 launches


@pytest.mark.parametrize("threads", [1, 2])
def test_calls_from_several_threads_take_turns(threads):
    from concurrent.futures import ThreadPoolExecutor

    exe, _ = executable(CHAIN, CHAIN_STEPS)
    rng = np.random.default_rng(4)
    inputs = [arrays(rng, (5, 7), (7,)) for _ in range(8)]
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda args: exe(*args)[0], inputs))
    for (x, w), got in zip(inputs, results):
        np.testing.assert_array_equal(got, graphopt.interpret(exe.module, x, w)[0])
