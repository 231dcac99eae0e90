"""The reference backend: the interpreter runs the group; accepts anything, the fallback."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation

from graphopt.backends import Backend
from graphopt.backends.costs import machine
from graphopt.interpreter import evaluate
from graphopt.runtime.executable import Kernel


class ReferenceBackend(Backend):
    name = "reference"

    def supports(self, group: Operation) -> str | None:
        return None

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        return [ReferenceKernel(group) for group in groups]

    def estimate(self, group: Operation) -> float:
        """NumPy op by op: every op reads and writes whole tensors, plus per-op overhead."""
        return machine().numpy_time(group)


class ReferenceKernel:
    def __init__(self, group: Operation):
        self.group = group
        self.module = group.get_toplevel_object()

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        with np.errstate(all="ignore"):
            for out, result in zip(outputs, evaluate(self.module, self.group, list(inputs)), strict=True):
                np.copyto(out, result)
