"""graphopt.compile: canonicalize, fuse, partition, then each group's kernel from its backend.

    exe = graphopt.compile(module)                        # fuse + partition + lower + JIT, once
    exe = graphopt.compile(module, backends=("cpu", "reference"))
    exe = graphopt.compile(module, backends=("cpu", "blas"), search="cost", measure=True)  # Collage
    (y,) = exe(x)                                         # NumPy arrays in, fresh arrays out
    print(exe.report())                                   # one line per step: where and how it runs

compile runs the pipeline `canonicalize,fuse,partition` (graph-opt --canonicalize --fuse
--partition; `exe.pipeline` holds its text with options; with `fuse=False` no fuse, and a
greedy partition makes each op a group of its own). Each group of @main, in order, is then one
step: its kernel is compiled by the backend that partitioning put it on (its `backend`
attribute; the steps of one backend are compiled together), and `report()` says why a step is
not on the first backend asked for (its `graph.placement_reason`). The `Executable`
(graphopt/runtime) runs the steps; nothing after partitioning places anything. `threads`
(default: the GRAPHOPT_THREADS environment variable, else the cores this process may run on) is
how many threads a backend may use for one kernel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from graphopt.backends import get_backend
from graphopt.transforms.work import group_work
from graphopt.backends.measure import default_threads
from graphopt.backends.targets import RegistryPartitionPass
from graphopt.dialects import graph
from graphopt.errors import GraphoptError
from graphopt.parsing import make_context
from graphopt.runtime.executable import Executable, Step
from graphopt.transforms.canonicalize import CanonicalizePass
from graphopt.transforms.fuse import FusePass
from graphopt.transforms.partition import PLACEMENT_REASON


def compile(
    module: ModuleOp,
    backends: Sequence[str] = ("cpu",),
    fuse: bool = True,
    entry: str = "main",
    threads: int | None = None,
    search: str = "greedy",
    measure: bool = False,
    cost_cache: str | os.PathLike | None = None,
) -> Executable:
    """Compile `module`'s `entry` function; see the module docstring.

    Fusion (with `fuse`) then the partition pass place groups on `backends`: `search` "greedy"
    (the first backend accepting a group) or "cost" (the cheapest cover, by each backend's
    estimate, or with `measure` by timings cached in `cost_cache`, by default graphopt's
    user cache file; see `graphopt.backends.measure`). Without `fuse` the search is greedy:
    each op stays a kernel of its own.
    """
    for name in backends:
        get_backend(name)
    if threads is None:
        threads = default_threads()
    if threads < 1:
        raise GraphoptError(f"threads must be at least 1, got {threads}")
    module = module.clone()
    passes = [CanonicalizePass(), *([FusePass()] if fuse else [])]
    passes.append(RegistryPartitionPass(backends=tuple(backends), search=search if fuse else "greedy", measure=measure,
                                        cache=os.fspath(cost_cache or ""), threads=threads))
    ctx = make_context()
    pipeline = ",".join(str(graph_pass.pipeline_pass_spec()) for graph_pass in passes)
    for graph_pass in passes:
        try:
            graph_pass.apply(ctx, module)
        except PassFailedException as e:
            raise GraphoptError(str(e)) from None
    function = _entry_function(module, entry)
    steps = [placed_step(op) for op in function.body.block.ops if not isinstance(op, (graph.ConstantOp, ReturnOp))]
    compile_kernels(steps, threads)
    return Executable(module, function, steps, threads, pipeline)


def placed_step(op: Operation) -> Step:
    """The step of a group that partitioning placed, with its FLOPs and bytes (for `profile`);
    an op of another dialect is refused, and any other unplaced op is an internal error."""
    if not isinstance(op, (graph.GraphOp, graph.FusedOp)):
        callee = f" (a call of @{op.callee.string_value()}: inline it)" if isinstance(op, CallOp) else ""
        raise GraphoptError(f"'{op.name}' in @{op.parent_op().sym_name.data}{callee}: compile runs graph ops only")
    if not (isinstance(op, graph.FusedOp) and op.backend is not None):
        raise GraphoptError(f"internal error: {op.name} in @main is not a group placed on a backend (run the partition pass)")
    reason = op.attributes.get(PLACEMENT_REASON)
    work = group_work(op)
    return Step(op.group_name.data, op, list(op.operands), list(op.results), op.backend.data,
                reason.data if isinstance(reason, StringAttr) else None, flops=work.flops,
                bytes_moved=work.bytes + work.constant_bytes)


def compile_kernels(steps: Sequence[Step], threads: int) -> None:
    """Give each step its kernel; the steps of one backend are compiled together."""
    for backend in dict.fromkeys(s.backend for s in steps):
        placed = [s for s in steps if s.backend == backend]
        for step, kernel in zip(placed, get_backend(backend).compile([s.op for s in placed], threads), strict=True):
            step.kernel = kernel


def _entry_function(module: ModuleOp, entry: str) -> FuncOp:
    for op in module.body.block.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == entry and op.body.blocks:
            return op
    raise GraphoptError(f"no function @{entry} in the module")
