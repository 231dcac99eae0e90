"""What fuse, partition and the backends share about sets of ops in a block: their order,
convexity, names, and how they become a group or a function of their own.

    order = topological_order(groups, predecessors=lambda g: g.producers, rank=first_op_position)
    is_convex(ops, successors=consumers_of, position=index_of)  # merging them makes no cycle
    sort_block_topologically(block, position)     # every value defined before its use
    group, inputs = outline([matmul, add], [add.result], "fused_matmul_add_0")  # a new graph.fused
    function = standalone(group)                  # the group alone as @group, in a module of its own
    GroupNamer(module).next([matmul, add, relu])  # "fused_matmul_add_relu_0"
    single_op_kernel_name(softmax, 3)             # "softmax_3"

`topological_order` is the one topological sort of graphopt's graph level: Kahn's algorithm,
taking among the items that are ready the one of least rank, so an order that is already valid
is kept, and a cycle is reported (None) rather than broken.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import TypeVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue

from graphopt.dialects import graph

Item = TypeVar("Item", bound=Hashable)


def topological_order(items: Sequence[Item], predecessors: Callable[[Item], Iterable[Item]],
                      rank: Callable[[Item], object]) -> list[Item] | None:
    """`items` ordered so each comes after its `predecessors` (those among `items`; others are
    ignored), ties going to the least `rank`; None when they depend on each other in a cycle.

        topological_order(["b", "a"], predecessors={"b": ["a"], "a": []}.get, rank=str) -> ["a", "b"]
    """
    members = set(items)
    waiting = {item: {p for p in predecessors(item) if p in members and p != item} for item in items}
    successors: dict[Item, list[Item]] = {item: [] for item in items}
    for item, before in waiting.items():
        for predecessor in before:
            successors[predecessor].append(item)
    ready = [item for item in items if not waiting[item]]
    order: list[Item] = []
    while ready:
        ready.sort(key=rank, reverse=True)
        item = ready.pop()
        order.append(item)
        for successor in successors[item]:
            waiting[successor].discard(item)
            if not waiting[successor]:
                ready.append(successor)
    return order if len(order) == len(items) else None


def is_convex(members: Collection[Item], successors: Callable[[Item], Iterable[Item]],
              position: Callable[[Item], int]) -> bool:
    """Does no dataflow path leave `members` and come back? (Then they can become one group
    without a cycle.) `position` is a topological index: a path past the last member cannot
    return, so the walk stops there.

        is_convex({a, c}, successors, position)   # False when a -> b -> c and b is not a member
    """
    last = max(map(position, members))
    pending = [s for m in members for s in successors(m) if s not in members]
    seen: set[Item] = set()
    while pending:
        item = pending.pop()
        if item in members:
            return False
        if item not in seen and position(item) < last:
            seen.add(item)
            pending.extend(successors(item))
    return True


def sort_block_topologically(block: Block, position: dict[Operation, int]) -> bool:
    """Reorder `block`'s ops (its terminator stays last) so every value is defined before its
    use, keeping `position`'s order (else the current one) where the dataflow allows; False,
    and the block unchanged, when its ops depend on each other in a cycle."""
    *body, terminator = block.ops
    produced_by = {result: op for op in body for result in op.results}
    current = {op: i for i, op in enumerate(body)}
    order = topological_order(
        body,
        predecessors=lambda op: [produced_by[v] for v in op.operands if v in produced_by],
        rank=lambda op: position.get(op, current[op]),
    )
    if order is None:
        return False
    if order != body:
        for op in body:
            op.detach()
        block.insert_ops_before(order, terminator)
    return True


def outline(ops: Sequence[Operation], outputs: Sequence[SSAValue], name: str, mode: str = "compile",
            source: Callable[[SSAValue], SSAValue] = lambda value: value,
            outer: Callable[[SSAValue], SSAValue] = lambda value: value) -> tuple[graph.FusedOp, list[SSAValue]]:
    """A new, detached graph.fused whose body is a clone of `ops` (in this order) yielding
    `outputs` (values of `ops`), and its inputs: the values `ops` read but do not define, each
    once, in order of first use. `source` says which value an operand stands for (partition
    sees a group's block argument as the group's operand); the group reads `outer(input)`.

        %0 = graph.matmul %x, %w ...          outline([matmul, add], [add.result], "g") ->
        %1 = graph.add %0, %b ...             %g = graph.fused(%x, %w, %b) {name = "g", ...} {
                                                ^bb0(%a, %c, %d): matmul, add, graph.yield }
    """
    defined = {result for op in ops for result in op.results}
    inputs = list(dict.fromkeys(source(v) for op in ops for v in op.operands if source(v) not in defined))
    block = Block(arg_types=[v.type for v in inputs])
    inside: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    for op in ops:
        clone = op.clone(value_mapper={operand: inside[source(operand)] for operand in op.operands})
        block.add_op(clone)
        inside.update(zip(op.results, clone.results))
    block.add_op(graph.YieldOp([inside[v] for v in outputs]))
    group = graph.FusedOp([outer(v) for v in inputs], [v.type for v in outputs], Region(block), name, mode)
    return group, inputs


def standalone(group: Operation) -> FuncOp:
    """`group` extracted as a function: @group (in a module of its own) whose body is a clone of `group`, reading
    the function's arguments (one per distinct operand) and returning its results; operands
    that a graph.constant defines stay constants (clones), so a kernel may specialize on them
    as it does in the whole module (the cpu backend packs a matmul's constant b). The clone
    keeps no name hints, and a graph.fused clone is named "group" and placed on no backend."""
    sources = list(dict.fromkeys(group.operands))
    arguments = [v for v in sources if not isinstance(v.owner, graph.ConstantOp)]
    block = Block(arg_types=[v.type for v in arguments])
    constants = {v: v.owner.clone(clone_name_hints=False) for v in sources if v not in arguments}
    block.add_ops(constants.values())
    mapping = {**dict(zip(arguments, block.args)), **{v: c.result for v, c in constants.items()}}
    alone = group.clone(mapping, clone_name_hints=False)
    if isinstance(alone, graph.FusedOp):
        alone.attributes["name"] = StringAttr("group")
        alone.attributes.pop("backend", None)
    block.add_ops([alone, ReturnOp(*alone.results)])
    function = FuncOp("group", ([v.type for v in arguments], [r.type for r in alone.results]), Region(block))
    ModuleOp([function])  # backends and the interpreter look the group's module up
    return function


def group_of(function: FuncOp) -> Operation:
    """The group of a `standalone` function: the op its return returns."""
    return function.body.block.last_op.prev_op


def single_op_kernel_name(op: Operation, index: int) -> str:
    """The name of a group of one op: `<kind>_<index among such groups>`."""
    return f"{op.name.removeprefix('graph.')}_{index}"


class GroupNamer:
    """Readable, unique names of new groups: fused_<first op kinds>_<index>."""

    MAX_KINDS = 4

    def __init__(self, module: ModuleOp):
        self.count = 0
        self.taken = {o.group_name.data for o in module.walk() if isinstance(o, graph.FusedOp)}

    def next(self, ops: list[Operation]) -> str:
        kinds = list(dict.fromkeys(op.name.removeprefix("graph.") for op in ops))
        while True:
            name = f"fused_{'_'.join(kinds[: self.MAX_KINDS])}_{self.count}"
            self.count += 1
            if name not in self.taken:
                return name
