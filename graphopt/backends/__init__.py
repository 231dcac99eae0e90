"""Backends: code generators, as graphopt.compile and the partition targets see them.

A backend says which groups it accepts (`supports`), compiles accepted groups into kernels
(`compile`), and estimates a group's cost from bytes and flops (`estimate`). A group is a
`graph.fused` op or a single graph op. A kernel is called with the group's input arrays and
preallocated output arrays, which it fills:

    backend = get_backend("cpu")
    if backend.supports(group) is None:
        (kernel,) = backend.compile([group], threads=2)
        kernel([x, w], [out])

A kernel keeps the runtime's contract (`graphopt.runtime.executable.Kernel`): one that is a
native function says so with a `native` attribute (a `NativeEntry`), and the runtime then calls
it, and its native neighbours, from one generated native function instead of from Python. The
partition pass sees backends only through `graphopt.backends.targets`.

A saved Executable (`exe.save`, `graphopt.load`) keeps a backend's kernels when it has a
`save_kernels`/`load_kernels` pair (the cpu backend keeps its machine code), else compiles its
groups again on load.

New backends register with `register_backend(MyBackend())`, or from another package through
the `graphopt.backends` entry-point group (each entry point names a Backend subclass).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import ClassVar

from xdsl.ir import Operation

from graphopt.errors import GraphoptError
from graphopt.runtime.executable import Kernel
from graphopt.runtime.saved import SavedKernels


class Backend(ABC):
    """A code generator the partitioner can assign groups to."""

    name: ClassVar[str]

    @abstractmethod
    def supports(self, group: Operation) -> str | None:
        """None if this backend can run `group` as one kernel, else the reason it cannot."""

    @abstractmethod
    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        """One kernel per group (all supported), compiled together where that is cheaper."""

    @abstractmethod
    def estimate(self, group: Operation) -> float:
        """Analytic cost of one run of `group`, in seconds."""

    def save_kernels(self, kernels: Sequence[Kernel]) -> SavedKernels | None:
        """What a saved Executable keeps of `kernels` (one `compile` call's) so that
        `load_kernels` rebuilds them without compiling; None (the default): `load` compiles
        the groups again, which is cheap for a backend that generates no code."""
        return None

    def load_kernels(self, groups: Sequence[Operation], saved: SavedKernels, threads: int) -> list[Kernel]:
        """The kernels `save_kernels` saved, for the same `groups`, on this host."""
        raise GraphoptError(f"the {self.name} backend saves no kernels")


_registry: dict[str, Backend] = {}


def register_backend(backend: Backend) -> None:
    """Make `backend` available under `backend.name` (replacing one of that name)."""
    _registry[backend.name] = backend


def get_backend(name: str) -> Backend:
    _load_builtin_and_plugins()
    if name not in _registry:
        raise GraphoptError(f"unknown backend {name!r}; available: {', '.join(backend_names())}")
    return _registry[name]


def backend_names() -> list[str]:
    _load_builtin_and_plugins()
    return list(_registry)


_loaded = False


def _load_builtin_and_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from graphopt.backends.blas import BlasBackend
    from graphopt.backends.cpu import CpuBackend
    from graphopt.backends.cuda import CudaBackend
    from graphopt.backends.implementation import ImplementationBackend
    from graphopt.backends.onnxruntime import OrtBackend
    from graphopt.backends.reference import ReferenceBackend

    for backend in (CpuBackend(), BlasBackend(), CudaBackend(), OrtBackend(), ImplementationBackend(), ReferenceBackend()):
        _registry.setdefault(backend.name, backend)
    for entry in entry_points(group="graphopt.backends"):
        backend = entry.load()()
        _registry.setdefault(backend.name, backend)
