"""The pass pipelines graphopt.compile runs for each backend, declared once.

Each stage is xDSL pass-pipeline text, the text `graph-opt -p` takes, parsed against xDSL's
and graphopt's lowering passes (which graph-opt registers too). The cpu backend, the JIT, the cuda backend's PTX and graph-opt's
`--lower-to-linalg`, `--lower-to-llvm`, `-t llvm` and `-t ptx` all run these stages:

    CPU.spec("to-kernels", "weights", "kernels")  # "convert-graph-to-linalg{backend=cpu},pack-weights,linalg-generalize-named-ops,..."
    CPU.apply(module, "llvm", alignment=16)   # kernels -> llvm dialect, in place

CPU stages: `to-kernels` (@main's groups -> one func.func per group on memrefs, linalg),
`weights` (pack the packed GEMM's constant b), `kernels` (named linalg ops such as `linalg.fill` generalized, then what the cpu backend adds to the kernels: one function for kernels with the same
code, row-local marks, and with `threads` > 1 (default 1) row chunks of large kernels), `llvm` (-> llvm dialect; `alignment`:
bytes promised for kernel pointer arguments). The cpu backend lowers the groups it is given
one by one, as `to-kernels` does for @main's, then runs `weights`, `kernels` (with its
threads) and `llvm`.
CUDA stages: `to-kernels` (-> cuda kernels and host launchers), `nvvm` (the device kernels
-> llvm dialect with NVVM intrinsics).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.transforms import get_all_passes as get_xdsl_passes

from graphopt.lowering import get_all_passes

PARALLEL_MIN_WORK = 1 << 17
"""split-rows' `min-work` in the CPU pipeline (its default too): kernels doing less run on one
thread, where splitting them costs more than it saves. Here rather than in split_rows.py, so that
reading the pipelines (graph-opt's start) imports no ukernel generator."""


@dataclass(frozen=True)
class Target:
    """A backend's lowering: named stages of pass-pipeline text (with `{option}` fields, filled
    from the options given, else from `defaults`)."""

    name: str
    stages: dict[str, str]
    defaults: dict[str, object] = field(default_factory=dict)

    def spec(self, *stages: str, **options: object) -> str:
        """The pipeline text of `stages`, in the order given, with `options` filled in."""
        return ",".join(self.stages[stage].format(**{**self.defaults, **options}) for stage in stages)

    def pipeline(self, *stages: str, **options: object) -> PassPipeline:
        return parsed_pipeline(self.spec(*stages, **options))

    def apply(self, module: ModuleOp, *stages: str, **options: object) -> ModuleOp:
        """Run `stages` on `module`, in place, and verify it."""
        self.pipeline(*stages, **options).apply(Context(), module)
        module.verify()
        return module


@functools.cache
def parsed_pipeline(spec: str) -> PassPipeline:
    """`spec` parsed against xDSL's and graphopt's lowering passes (passes are immutable: shared)."""
    return PassPipeline.parse_spec({**get_xdsl_passes(), **get_all_passes()}, spec)


CPU = Target(
    "cpu",
    {
        "to-kernels": "convert-graph-to-linalg{{backend=cpu}}",
        "weights": "pack-weights",
        "kernels": "linalg-generalize-named-ops,share-kernel-code,mark-row-local,split-rows{{threads={threads} min-work={min_work}}}",
        "llvm": ",".join([
            "convert-linalg-to-loops",
            "fuse-row-loops",
            "lower-affine",
            "convert-scf-to-cf",
            "convert-arith-to-llvm",
            "convert-math-to-llvm",
            "convert-memref-to-llvm",
            "convert-func-to-llvm{{alignment={alignment}}}",
            "convert-cf-to-llvm",
            "reconcile-unrealized-casts",
        ]),
    },
    {"threads": 1, "min_work": PARALLEL_MIN_WORK},
)

CUDA = Target(
    "cuda",
    {
        "to-kernels": "convert-graph-to-cuda{{backend=cuda}}",
        "nvvm": ",".join([
            "lower-affine",
            "convert-scf-to-cf",
            "convert-arith-to-llvm",
            "convert-math-to-llvm",
            "convert-memref-to-llvm",
            "convert-cuda-to-nvvm",
            "convert-func-to-llvm",
            "convert-cf-to-llvm",
            "reconcile-unrealized-casts",
        ]),
    },
)
