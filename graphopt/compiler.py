"""graphopt.compile: canonicalize, cse, fuse, partition, then each group's kernel from its backend.

    exe = graphopt.compile(module)                        # fuse + partition + lower + JIT, once
    exe = graphopt.compile(module, backends=("cpu", "reference"))
    exe = graphopt.compile(module, backends=("cpu", "blas"), search="cost", measure=True)  # Collage
    exe = graphopt.compile(module, implementations={"fused_matmul_add_relu_0": fn})  # replace a group
    exe = graphopt.compile(module, fallback="error")      # no step may run on the interpreter
    (y,) = exe(x)                                         # NumPy arrays in, fresh arrays out
    print(exe.report())                                   # one line per step: where and how it runs
    exe.placement()                                       # the same as data: StepPlacement records
    exe.save("model.gx"); exe = graphopt.load("model.gx")   # saved: no compile on load (same CPU)

compile runs the pipeline `canonicalize,cse,fuse,partition` (graph-opt --canonicalize --cse
--fuse --partition; `exe.pipeline` holds its text with options; with `fuse=False` no fuse, and a
greedy partition makes each op a group of its own). `cse` is xDSL's common subexpression
elimination: equal constants, then equal ops on the same operands (the branches of an
Inception block that read one input through equal weights, as ONNX Runtime's CSE merges them),
become one. Each group of @main, in order, is then one
step: its kernel is compiled by the backend that partitioning put it on (its `backend`
attribute; the steps of one backend are compiled together), and `report()` says why a step is
not on the first backend asked for (its `graph.placement_reason`). The `Executable`
(graphopt/runtime) runs the steps; nothing after partitioning places anything. `threads`
(default: the GRAPHOPT_THREADS environment variable, else the cores this process may run on) is
how many threads a backend may use for one kernel.

`implementations` replaces groups (Slapo's `.replace`): after fusion, each group it names gets
`graph.implementation` bound to its function or Kernel (`graphopt.backends.implementation`),
so partition puts it whole on the `implementation` backend. `fallback="error"` makes a step
that partition left on the reference interpreter an error that says why each backend refused it.

`exe.save(path)` writes the placed module, its constants and the backends' saved kernels
(`graphopt/runtime/saved.py`); `load` builds the steps from the placed module and loads the
kernels (the cpu backend's machine code) without compiling, or compiles them again for a
backend that saves none, or for another host.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.utils.exceptions import PassFailedException

from graphopt.backends import Backend, get_backend
from graphopt.backends.implementation import IMPLEMENTATION, register_implementation, unregister_implementation
from graphopt.backends.measure import default_threads
from graphopt.backends.steps import compile_kernels, placed_steps
from graphopt.backends.targets import RegistryPartitionPass, RegistryTargets
from graphopt.dialects import graph
from graphopt.errors import GraphoptError
from graphopt.parsing import make_context
from graphopt.runtime.executable import Executable, Step, op_kinds
from graphopt.runtime.saved import host_differences, read_saved
from graphopt.transforms.canonicalize import CanonicalizePass
from graphopt.transforms.fuse import FusePass


def compile(
    module: ModuleOp,
    backends: Sequence[str] = ("cpu",),
    fuse: bool = True,
    entry: str = "main",
    threads: int | None = None,
    search: str = "greedy",
    measure: bool = False,
    cost_cache: str | os.PathLike | None = None,
    implementations: Mapping[str, Callable] | None = None,
    fallback: str = "reference",
) -> Executable:
    """Compile `module`'s `entry` function; see the module docstring.

    Fusion (with `fuse`) then the partition pass place groups on `backends`: `search` "greedy"
    (the first backend accepting a group) or "cost" (the cheapest cover, by each backend's
    estimate, or with `measure` by timings cached in `cost_cache`, by default graphopt's
    user cache file; see `graphopt.backends.measure`). Without `fuse` the search is greedy:
    each op stays a kernel of its own.

    `implementations` maps names of groups of the fused module (as `graph-opt --fuse` prints
    them) to what runs each instead: a function on NumPy arrays returning the outputs, or a
    Kernel (`kernel(inputs, outputs)`), checked against the group's signature. `fallback`
    "reference" (default) lets ops no backend accepts run on the interpreter; "error" refuses.
    """
    for name in backends:
        get_backend(name)
    if threads is None:
        threads = default_threads()
    if threads < 1:
        raise GraphoptError(f"threads must be at least 1, got {threads}")
    if fallback not in FALLBACKS:
        raise GraphoptError(f'fallback must be "reference" or "error", got {fallback!r}')
    module = module.clone()
    placing = RegistryPartitionPass(backends=tuple(backends), search=search if fuse else "greedy", measure=measure,
                                    cache=os.fspath(cost_cache or ""), threads=threads)
    before_placing = [CanonicalizePass(), CommonSubexpressionElimination(), *([FusePass()] if fuse else [])]
    ctx = make_context()
    pipeline = ",".join(str(graph_pass.pipeline_pass_spec()) for graph_pass in [*before_placing, placing])
    for graph_pass in before_placing:
        _apply(graph_pass, ctx, module)
    with _implementations_bound(_entry_function(module, entry), implementations or {}):
        _apply(placing, ctx, module)
        function = _entry_function(module, entry)
        steps = placed_steps(function)
        if fallback == "error":
            _refuse_the_fallback(steps, entry)
        compile_kernels(steps, threads, compiled=placing.registry.timed_steps)
    return Executable(module, function, steps, threads, pipeline, _backends_of(steps))


def load(path: str | os.PathLike, recompile: bool = True) -> Executable:
    """The Executable that `exe.save(path)` saved: its steps straight from the placed module
    (nothing is fused or placed again), each backend's kernels loaded from the file (the cpu
    backend's machine code: no LLVM compile) or, for a backend that saves none, compiled.

    Saved on another CPU, or with another graphopt, llvmlite or LLVM version: with `recompile`
    every kernel is compiled again from the module (with a warning), else a GraphoptError says
    what differs."""
    saved = read_saved(path)
    kernels, manifest = saved.kernels, saved.manifest
    differences = host_differences(manifest)
    if differences:
        if not recompile:
            raise GraphoptError(f"{path} was saved for another host: {'; '.join(differences)} (load with recompile=True)")
        warnings.warn(f"{path} was saved for another host ({'; '.join(differences)}): compiling its kernels again",
                      stacklevel=2)
        kernels = {}
    try:
        function = _entry_function(saved.module, manifest["entry"])
        steps = placed_steps(function)
        compile_kernels(steps, manifest["threads"], kernels)
    except GraphoptError as e:
        raise GraphoptError(f"{path}: {e}") from None
    return Executable(saved.module, function, steps, manifest["threads"], manifest["pipeline"], _backends_of(steps))


def _backends_of(steps: Sequence[Step]) -> dict[str, Backend]:
    """The backends the steps run on, by name (what `Executable.save` asks to save their kernels)."""
    return {name: get_backend(name) for name in dict.fromkeys(step.backend for step in steps)}


def _apply(graph_pass: ModulePass, ctx: Context, module: ModuleOp) -> None:
    try:
        graph_pass.apply(ctx, module)
    except PassFailedException as e:
        raise GraphoptError(str(e)) from None


FALLBACKS = ("reference", "error")
"""`compile`'s `fallback`: what becomes of ops no backend asked for accepts."""

_bindings = itertools.count()


@contextmanager
def _implementations_bound(function: FuncOp, implementations: Mapping[str, Callable]) -> Iterator[None]:
    """Bind each named group of `function` to its implementation, registered under a name of
    its own (`<group>#<n>`) for the duration of the `with` (partition and compile)."""
    groups = {op.group_name.data: op for op in function.body.block.ops if isinstance(op, graph.FusedOp)}
    registered = []
    try:
        for group, implementation in implementations.items():
            if group not in groups:
                known = ", ".join(groups) or "none: without fuse, or with no op fused, no group exists before partition"
                raise GraphoptError(f"implementations: no group '{group}' in @{function.sym_name.data} (its groups: {known})")
            name = f"{group}#{next(_bindings)}"
            register_implementation(name, implementation)
            registered.append(name)
            groups[group].attributes[IMPLEMENTATION] = StringAttr(name)
        yield
    finally:
        for name in registered:
            unregister_implementation(name)


def _refuse_the_fallback(steps: Sequence[Step], entry: str) -> None:
    """`fallback="error"`: a GraphoptError naming each step left on the interpreter, and why."""
    refused = [s for s in steps if s.backend == RegistryTargets.fallback]
    if refused:
        lines = [f"  {s.name} ({', '.join(op_kinds(s.op))}): "
                 f"{s.reason or 'it is the first backend allowed (a pin, or the backends asked for)'}" for s in refused]
        raise GraphoptError(f'fallback="error": {len(refused)} step(s) of @{entry} would run on the '
                            f"{RegistryTargets.fallback} interpreter:\n" + "\n".join(lines))
def _entry_function(module: ModuleOp, entry: str) -> FuncOp:
    for op in module.body.block.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == entry and op.body.blocks:
            return op
    raise GraphoptError(f"no function @{entry} in the module")
