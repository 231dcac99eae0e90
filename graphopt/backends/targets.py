"""graphopt's backend registry as the partition pass sees it (`transforms.partition.PlacementTargets`).

    RegistryPartitionPass(backends=("cpu", "blas"), search="cost").apply(ctx, module)

graphopt.compile and graph-opt run `RegistryPartitionPass`: the partition pass, with the same
name and options, placing on the registered backends (`graphopt.backends`). Costs are each
backend's analytic `estimate`, or with `measure` the timings of `graphopt.backends.measure`,
cached on disk, and its few best plans timed whole (`measure.measure_plans`). The cost search
charges the cost model's launch cost per kernel with estimates, none with measured costs (each
kernel is timed as a plan calls it). The kernels of the plans timed whole are kept
(`timed_steps`): graphopt.compile takes the kept plan's from them instead of compiling again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from graphopt.backends import backend_names, get_backend
from graphopt.backends.costs import KERNEL_LAUNCH_SECONDS
from graphopt.backends.implementation import IMPLEMENTATION, ImplementationBackend, bound_implementation
from graphopt.backends.measure import CostCache, measure_all, measure_plans
from graphopt.runtime.executable import Step
from graphopt.transforms.partition import PartitionPass


class RegistryTargets:
    """The registered backends: `reference` is the last resort, cpu then blas the default
    priority; a group with `graph.implementation` is bound to the `implementation` backend."""

    fallback = "reference"
    defaults = ("cpu", "blas")

    def __init__(self, measure: bool = False, cache: str = "", threads: int = 0):
        self.cache = CostCache(cache or None) if measure else None
        self.launch_cost = 0.0 if measure else KERNEL_LAUNCH_SECONDS
        """Measured costs hold what a kernel's launch costs in a plan (`measure.measure`)."""
        self.threads = threads or None
        self.timed_steps: list[Step] = []
        """The compiled steps of the plans `time_plans` timed (graphopt.compile reuses the kept plan's)."""

    def names(self) -> Sequence[str]:
        return backend_names()

    def supports(self, backend: str, group: Operation) -> str | None:
        return get_backend(backend).supports(group)

    def costs(self, pairs: Sequence[tuple[str, Operation]]) -> list[float]:
        if self.cache is None:
            return [get_backend(backend).estimate(group) for backend, group in pairs]
        return measure_all([(get_backend(backend), group) for backend, group in pairs], self.cache, threads=self.threads)

    def time_plans(self, functions: Sequence[FuncOp]) -> list[float]:
        return measure_plans(functions, threads=self.threads, compiled=self.timed_steps)

    def binding(self, group: Operation) -> tuple[str, str] | None:
        name = bound_implementation(group)
        return None if name is None else (ImplementationBackend.name, f'{IMPLEMENTATION} = "{name}"')


@dataclass(frozen=True)
class RegistryPartitionPass(PartitionPass):
    """`partition` over graphopt's registered backends (see `PartitionPass` for its options).
    Its `registry` is the one RegistryTargets it places on (no option: not in its text)."""

    registry: RegistryTargets = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "registry", RegistryTargets(self.measure, self.cache, self.threads))

    def targets(self) -> RegistryTargets:
        return self.registry
