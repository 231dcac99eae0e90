"""A placed function's steps and their kernels: what graphopt.compile, load and the measured
cost search (a whole plan timed, `measure.measure_plans`) build an Executable from.

    steps = placed_steps(function)     # one Step per graph.fused of @main, placed by partition
    compile_kernels(steps, threads=1)  # each step's kernel from its backend
    exe = Executable(module, function, steps, threads=1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Operation

from graphopt.backends import get_backend
from graphopt.dialects import graph
from graphopt.errors import GraphoptError
from graphopt.runtime.executable import Kernel, Step
from graphopt.runtime.saved import SavedKernels
from graphopt.transforms.partition import PLACEMENT_REASON
from graphopt.transforms.work import group_work


def placed_steps(function: FuncOp) -> list[Step]:
    """One step per op of `function`'s block but constants and the return, in order."""
    return [placed_step(op) for op in function.body.block.ops if not isinstance(op, (graph.ConstantOp, ReturnOp))]


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


def compile_kernels(steps: Sequence[Step], threads: int, saved: Mapping[str, SavedKernels] | None = None,
                    compiled: Sequence[Step] = ()) -> None:
    """Give each step its kernel; the steps of one backend are compiled together, or loaded
    from its `saved` kernels (a saved Executable's). A step that one of the `compiled` steps
    (compiled for `threads`: the plans the measured search timed whole) computes the same, on
    the same backend, takes its kernel instead: the plan kept is not compiled again."""
    reused = _reused_kernels(steps, compiled)
    for step in steps:
        step.kernel = reused.get(step.name, step.kernel)
    steps = [s for s in steps if s.name not in reused]
    for name in dict.fromkeys(s.backend for s in steps):
        placed, backend = [s for s in steps if s.backend == name], get_backend(name)
        groups = [s.op for s in placed]
        if saved and name in saved:
            try:
                kernels = backend.load_kernels(groups, saved[name], threads)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
                raise GraphoptError(f"the saved {name} kernels are damaged ({type(e).__name__}: {e})") from None
        else:
            kernels = backend.compile(groups, threads)
        for step, kernel in zip(placed, kernels, strict=True):
            step.kernel = kernel


def _reused_kernels(steps: Sequence[Step], compiled: Sequence[Step]) -> dict[str, Kernel]:
    """The kernel of each step (by name) that a `compiled` step of the same name and backend
    computes the same: the same body, and the same constants where constants are its operands."""
    by_name = {(s.name, s.backend): s for s in compiled}
    reused = {}
    for step in steps:
        twin = by_name.get((step.name, step.backend))
        if twin is not None and twin.kernel is not None and _same_group(step.op, twin.op):
            reused[step.name] = twin.kernel
    return reused


def _same_group(group: Operation, other: Operation) -> bool:
    """Whether two groups compute the same: equal bodies, and constants in the same operand places
    with equal values."""
    if len(group.operands) != len(other.operands) or not group.body.is_structurally_equivalent(other.body):
        return False
    for value, other_value in zip(group.operands, other.operands):
        constant, other_constant = (isinstance(v.owner, graph.ConstantOp) for v in (value, other_value))
        if constant != other_constant or (constant and value.owner.value != other_value.owner.value):
            return False
    return True
