"""The ort backend: each group runs as a small ONNX model in an ONNX Runtime InferenceSession.

    backend = get_backend("ort")
    backend.supports(group)                   # None, or why not (no onnxruntime, no ONNX op, ...)
    (kernel,) = backend.compile([group], threads=2)
    kernel([x, w], [out])                     # ORT reads x, w and writes out in place: no copies

A group (a `graph.fused`, or a single graph op) becomes a function of its own (the measured
groups' `standalone`: constant operands become constants of the function), then an ONNX model
(`graphopt.onnx_export.to_onnx`; constants become initializers, which ORT may prepack), then an
InferenceSession with `threads` intra-op threads. Its kernel binds the data pointers of the
Executable's input and output arrays with ORT's I/O binding (bound again only when an address
changes, once per calling thread) and runs the session on them. It keeps the arrays it bound:
called again with the same array objects (the Executable's frame, a measurement loop) it
reads no address (a `ctypes.data` costs about 0.7 us per array).

`onnxruntime` is optional (`pip install "graphopt[onnx]"`): without it the backend is still
registered, refuses every group with that reason, and `compile` raises GraphoptError.
`supports` exports the group and builds a session for it (about 0.2 ms), so it also refuses
groups that ONNX Runtime has no kernel for (an op on an element type it does not implement);
verdicts are cached by model. ORT's threads do not spin between runs: its runs alternate with
the other backends' kernels, which need the cores.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from types import ModuleType

import numpy as np
from xdsl.ir import Operation

from graphopt.backends import Backend
from graphopt.backends.costs import machine
from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.onnx_export import to_onnx
from graphopt.transforms.subgraph import standalone
from graphopt.runtime.executable import Kernel

SESSION_RUN_SECONDS = 2e-6
"""What one run of a session with bound buffers costs beyond its nodes (measured: about 1.7 us)."""
NODE_SECONDS = 1e-6
"""What each node of a session costs beyond its work (an estimate)."""


def _import_onnxruntime() -> ModuleType:
    """The onnxruntime package; GraphoptError saying how to install it when it is missing."""
    try:
        import onnxruntime
    except ImportError:
        raise GraphoptError(
            'backend "ort" cannot run: the onnxruntime package is not installed (pip install "graphopt[onnx]")'
        ) from None
    return onnxruntime


def _serialized_model(group: Operation) -> bytes:
    """The ONNX model of `group` alone (constant operands as initializers), serialized."""
    return to_onnx(standalone(group)).SerializeToString()


def _ort_errors() -> tuple[type[Exception], ...]:
    """The exception types ONNX Runtime raises (its own: Fail, InvalidGraph, NotImplemented, ...)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return tuple(t for t in vars(state).values() if isinstance(t, type) and issubclass(t, Exception))


def _session(model: bytes, threads: int, where: str):
    """An InferenceSession of `model`; GraphoptError naming `where` when ONNX Runtime cannot run it."""
    ort = _import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except _ort_errors() as e:
        raise GraphoptError(f"ONNX Runtime cannot run {where}: {str(e).splitlines()[0]}") from None


_refusals: dict[str, str | None] = {}
"""Why ONNX Runtime cannot load a model (or None), by the model's SHA-256."""


def _refusal(model: bytes) -> str | None:
    digest = hashlib.sha256(model).hexdigest()
    if digest not in _refusals:
        try:
            _session(model, 1, "the group")
            _refusals[digest] = None
        except GraphoptError as e:
            _refusals[digest] = str(e)
    return _refusals[digest]


def _where(group: Operation) -> str:
    return f"group '{group.group_name.data}'" if isinstance(group, graph.FusedOp) else f"'{group.name}'"


class OrtBackend(Backend):
    name = "ort"

    def supports(self, group: Operation) -> str | None:
        try:
            _import_onnxruntime()
        except GraphoptError as e:
            return str(e)
        if isinstance(group, graph.FusedOp) and group.mode_name == "fallback":
            return "a fallback group is not compiled as one kernel"
        try:
            model = _serialized_model(group)
        except GraphoptError as e:
            return str(e)
        return _refusal(model)

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        return [OrtKernel(group, threads) for group in groups]

    def estimate(self, group: Operation) -> float:
        """Node by node, each moving its own operands and results (MLAS at the BLAS rate)."""
        return machine().op_by_op_time(group, NODE_SECONDS, machine().vector_flops) + SESSION_RUN_SECONDS


class OrtKernel:
    """One InferenceSession; called with the group's input arrays and its output arrays."""

    def __init__(self, group: Operation, threads: int):
        self.where = _where(group)
        operands = list(group.operands)
        arguments = [v for v in dict.fromkeys(operands) if not isinstance(v.owner, graph.ConstantOp)]
        self.positions = [operands.index(v) for v in arguments]
        """Which of the kernel's inputs each model input is (constants are in the model)."""
        self.session = _session(_serialized_model(group), threads, self.where)
        self.names = [v.name for v in (*self.session.get_inputs(), *self.session.get_outputs())]
        self.types = [(numpy_dtype(v.type.get_element_type()), list(v.type.get_shape()))
                      for v in (*arguments, *group.results)]
        self.inputs = len(arguments)
        self.local = threading.local()

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        arrays = [*(inputs[p] for p in self.positions), *outputs]
        binding = getattr(self.local, "binding", None)
        if binding is None or any(a is not b for a, b in zip(arrays, self.local.arrays)):
            addresses = [array.ctypes.data for array in arrays]
            if binding is None or self.local.addresses != addresses:
                binding = self.local.binding = self._bind(arrays)
                self.local.addresses = addresses
            self.local.arrays = arrays
        try:
            self.session.run_with_iobinding(binding)
        except _ort_errors() as e:
            raise GraphoptError(f"ONNX Runtime failed on {self.where}: {e}") from None

    def _bind(self, arrays: Sequence[np.ndarray]):
        """An I/O binding of `arrays` (inputs, then outputs) by their data pointers."""
        binding = self.session.io_binding()
        for index, (name, array, (dtype, shape)) in enumerate(zip(self.names, arrays, self.types)):
            bind = binding.bind_input if index < self.inputs else binding.bind_output
            bind(name, "cpu", 0, dtype, shape, array.ctypes.data)
        return binding
