"""fuse: group graph ops into `graph.fused` regions; decides grouping only, never lowers.

    %1 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %2 = graph.add %1, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %3 = graph.relu %2 : tensor<4x16xf32>

becomes, with `graph-opt --fuse` (or `-p 'fuse{max-ops=8}'`):

    %3 = graph.fused(%x, %w, %b) {name = "fused_matmul_add_relu_0", mode = "compile"}
         : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8x16xf32>, %d: tensor<16xf32>):
      ... matmul, add, relu ...
      graph.yield %r : tensor<4x16xf32>
    }

How groups form, in order:
1. Declared patterns (`FusionPattern`, e.g. conv2d -> add -> relu), highest priority first,
   make closed groups from chains whose intermediates have one use.
2. Category rules with TVM FuseOps semantics, on the post-dominator tree of the group graph:
   a group merges with everything on the paths to its immediate post-dominator when
   - an elementwise group: the paths are elementwise/injective, the end also may be a reduction;
   - an injective group: the paths and the end are elementwise/injective;
   - an anchor group (matmul, conv2d, pooling): the paths and the end are elementwise (epilogue);
   - an operand prologue (XLA's operand fusion): a group of reshape, transpose and broadcast_to
     whose results are used only as operands of matmuls in one anchor group merges into it:
     as b (the matmul's lowering reads b where it lives, as it packs it: K transposed in
     attention), or as a when a is a strided view with contiguous rows (`strided_view.py`)
     of a value from outside the group and b is computed (Q's heads: the batched GEMM reads a
     through the view);
   - an output view: reshapes and transposes that take the result of an anchor group's one
     matmul (b computed; nothing after it in the group but such ops) into a strided view with
     contiguous rows of their own result merge into it (attention's head merge after P @ V:
     the batched GEMM writes through the view); nothing merges after an output view;
   - a reduction group ends fusion (no op is fused after a reduction);
   - at most `max-anchors` anchors/reductions and `max-ops` ops per group; never a cycle.
   A reshape that only inserts or drops unit dims counts as elementwise here (TVM's expand_dims).
3. With `multi-output`, a producer group also merges into one consumer group when its value is
   used elsewhere too (the group yields it), and sibling elementwise/injective groups reading
   one value merge.
Cheap producers (splat or small constants, broadcast_to) are not grouped themselves: they are
cloned into every group that uses them, so they never block fusion; larger constants (weights)
are data and become group inputs. Ops with the unit
attribute `graph.no_fuse`, ops of other dialects and existing `graph.fused` stay alone.
Steps 2-3 repeat until nothing changes, or `rounds` times. Groups of one op stay unwrapped.
With `explain`, one line per producer->consumer edge left unfused says why (on stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from graphopt.dialects import graph
from graphopt.dialects.attributes import is_splat
from graphopt.dialects.graph import Category, category_of
from graphopt.transforms.strided_view import read_view, written_view
from graphopt.transforms.subgraph import GroupNamer, is_convex, outline, sort_block_topologically, topological_order

NO_FUSE = "graph.no_fuse"
SMALL_CONSTANT_ELEMENTS = 64
"""A non-splat constant with at most this many elements is cheap enough to duplicate."""

PROLOGUE_OPS = frozenset({"graph.reshape", "graph.transpose", "graph.broadcast_to"})
"""The ops of a group that may merge into the matmuls reading it (operand prologue)."""
VIEW_OPS = frozenset({"graph.reshape", "graph.transpose"})
"""The ops of a strided view (`strided_view.py`): operand a's prologue, a matmul's output view."""

_LEVEL = {Category.ELEMENTWISE: 0, Category.INJECTIVE: 1, Category.REDUCTION: 2, Category.ANCHOR: 3, Category.OPAQUE: 4}
_HEAVY = (Category.ANCHOR, Category.REDUCTION)


# ----------------------------------------------------------------------------------------
# Patterns
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionPattern:
    """A chain of ops, each consuming the previous one, fused as one closed group.

        FusionPattern("matmul_add_gelu", ("graph.matmul", "graph.add", "graph.gelu"), priority=3)
    """

    name: str
    ops: tuple[str, ...]
    priority: int = 0


PATTERN_SETS: dict[str, list[FusionPattern]] = {
    "default": [
        FusionPattern("matmul_add_gelu", ("graph.matmul", "graph.add", "graph.gelu"), 3),
        FusionPattern("matmul_add_relu", ("graph.matmul", "graph.add", "graph.relu"), 3),
        FusionPattern("conv2d_add_relu", ("graph.conv2d", "graph.add", "graph.relu"), 3),
        FusionPattern("matmul_add", ("graph.matmul", "graph.add"), 2),
        FusionPattern("conv2d_add", ("graph.conv2d", "graph.add"), 2),
    ],
}


def register_pattern(pattern: FusionPattern, pattern_set: str = "user") -> None:
    """Add a pattern to a named set, selectable with `fuse{patterns=<set>}`."""
    PATTERN_SETS.setdefault(pattern_set, []).append(pattern)


# ----------------------------------------------------------------------------------------
# The dataflow graph of one block, and groups over it
# ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class Group:
    """A set of ops that will become one graph.fused (a union-find node)."""

    ops: list[Operation]
    category: Category
    heavy: int
    fixed: str | None = None
    """Why this group never merges ("no_fuse", "opaque op", "pattern group is closed")."""
    parent: Group | None = None

    def root(self) -> Group:
        group = self
        while group.parent is not None:
            group = group.parent
        return group


class FusionGraph:
    """Ops of one block as nodes; cheap producers are transparent (cloned, not grouped) and
    other constants are data, like function arguments (group inputs, never grouped)."""

    def __init__(self, block: Block, duplicate: bool):
        self.block = block
        self.position = {op: i for i, op in enumerate(block.ops)}
        self.duplicable = {op for op in block.ops if duplicate and _is_cheap(op)}
        self.nodes = [
            op
            for op in block.ops
            if op not in self.duplicable and not isinstance(op, graph.ConstantOp) and op is not block.last_op
        ]
        self.successors: dict[Operation, list[Operation]] = {op: [] for op in self.nodes}
        self.escapes: set[Operation] = set()
        for op in self.nodes:
            for user in self._users(op):
                if user in self.successors and user not in self.successors[op]:
                    self.successors[op].append(user)
                elif user not in self.successors:
                    self.escapes.add(op)
        self.group_of = {op: self._singleton(op) for op in self.nodes}

    def _users(self, op: Operation) -> Iterable[Operation]:
        """Ops of the block using op's results (a use nested in an op's region is that op's),
        looking through duplicable producers, in block order."""
        found: list[Operation] = []
        pending = [op]
        while pending:
            for result in pending.pop().results:
                for use in result.uses:
                    user = self.block.find_ancestor_op_in_block(use.operation)
                    if user in self.duplicable:
                        pending.append(user)
                    elif user is not None and user not in found:
                        found.append(user)
        return sorted(found, key=self.position.__getitem__)

    def _singleton(self, op: Operation) -> Group:
        category = _fusion_category(op)
        fixed = None
        if NO_FUSE in op.attributes:
            fixed = "no_fuse"
        elif category is Category.OPAQUE:
            fixed = "opaque op"
        return Group([op], category, int(category in _HEAVY), fixed)

    def group(self, op: Operation) -> Group:
        return self.group_of[op].root()

    def groups(self) -> list[Group]:
        """Current groups, ordered by their first op."""
        seen: dict[Group, None] = {}
        for op in self.nodes:
            seen.setdefault(self.group(op), None)
        return list(seen)

    def merge(self, groups: Sequence[Group]) -> Group:
        target, *others = groups
        for other in others:
            other.parent = target
            target.ops += other.ops
            target.heavy += other.heavy
            target.category = max(target.category, other.category, key=_LEVEL.__getitem__)
        target.ops.sort(key=self.position.__getitem__)
        return target

    def is_convex(self, groups: Sequence[Group]) -> bool:
        """No path leaves the union of groups and comes back: merging makes no cycle."""
        members = {op for g in groups for op in g.ops}
        return is_convex(members, self.successors.__getitem__, self.position.__getitem__)

    def keeps_groups_acyclic(self, groups: Sequence[Group]) -> bool:
        """No path between the groups runs through other groups (group-level, not op-level).

        Needed where groups merge that are not all on paths between a start and an end:
        two unconnected groups A, B with a1 -> b1 and b2 -> a2 are each convex, yet no
        order of them works once A and B are one group each; multi-output and sibling
        merges can make such pairs.
        """
        merged = set(groups)
        seen: set[Group] = set()
        pending = [s for grp in groups for s in self.group_successors(grp) if s not in merged]
        while pending:
            grp = pending.pop()
            if grp in seen:
                continue
            seen.add(grp)
            for s in self.group_successors(grp):
                if s in merged:
                    return False
                pending.append(s)
        return True

    def group_successors(self, group: Group) -> list[Group]:
        found: dict[Group, None] = {}
        for op in group.ops:
            for s in self.successors[op]:
                if self.group(s) is not group:
                    found.setdefault(self.group(s), None)
        return list(found)

    def group_escapes(self, group: Group) -> bool:
        return any(op in self.escapes for op in group.ops)


def _fusion_category(op: Operation) -> Category:
    """op's category for fusion: its declared one, except that a reshape which only inserts or
    drops unit dims (ONNX's Unsqueeze and Squeeze) is elementwise, as TVM counts expand_dims:
    it moves no element, so an epilogue or a reduction's input may take it."""
    if isinstance(op, graph.ReshapeOp) and _non_unit(op.x.type) == _non_unit(op.result.type):
        return Category.ELEMENTWISE
    return category_of(op)


def _non_unit(tensor_type) -> tuple[int, ...]:
    return tuple(size for size in tensor_type.get_shape() if size != 1)


def _is_cheap(op: Operation) -> bool:
    if NO_FUSE in op.attributes:
        return False
    if isinstance(op, graph.BroadcastToOp):
        return True
    if isinstance(op, graph.ConstantOp):
        value = op.value
        return len(value) <= SMALL_CONSTANT_ELEMENTS or is_splat(value)
    return False


# ----------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Form graph.fused regions by declared patterns and op categories (see module docstring)."""

    name = "fuse"

    max_ops: int = 64
    """Most ops in one group."""
    max_anchors: int = 1
    """Most anchors and reductions in one group."""
    multi_output: bool = False
    """Let a group yield intermediates used outside it; fuse sibling consumers of one value."""
    duplicate: bool = True
    """Clone cheap producers (small constants, broadcast_to) into every consuming group."""
    expensive: str = "graph.exp,graph.log,graph.tanh,graph.erf"
    """Ops (besides anchors and reductions) never duplicated; named in explanations."""
    rounds: int = 0
    """Fusion rounds; 0 repeats until nothing changes."""
    patterns: str = ""
    """Comma-separated pattern sets applied first (built in: "default")."""
    mode: str = "compile"
    """Mode of the groups made: "compile" or "fallback" (group without asking for one kernel)."""
    explain: bool = False
    """Print why each producer->consumer edge was left unfused (stderr)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mode not in graph.FUSED_MODES:
            raise PassFailedException(f'fuse: mode must be "compile" or "fallback", got "{self.mode}"')
        patterns = self._patterns()
        names = GroupNamer(op)
        for func in op.walk():
            if isinstance(func, FuncOp) and func.body.blocks:
                fusion = _BlockFusion(self, func.body.block, patterns)
                fusion.run()
                if self.explain:
                    for line in fusion.explanations(func.sym_name.data):
                        print(line, file=sys.stderr)
                fusion.materialize(names)

    def _patterns(self) -> list[FusionPattern]:
        selected: list[FusionPattern] = []
        for set_name in filter(None, (s.strip() for s in self.patterns.split(","))):
            if set_name not in PATTERN_SETS:
                known = ", ".join(sorted(PATTERN_SETS))
                raise PassFailedException(f"fuse: unknown pattern set '{set_name}' (known: {known})")
            selected += PATTERN_SETS[set_name]
        return sorted(selected, key=lambda p: (-p.priority, -len(p.ops), p.name))


class _BlockFusion:
    """Grouping decisions for one block, then their materialization."""

    def __init__(self, options: FusePass, block: Block, patterns: list[FusionPattern]):
        self.options = options
        self.block = block
        self.patterns = patterns
        self.expensive = {n.strip() for n in options.expensive.split(",") if n.strip()}
        self.graph = FusionGraph(block, options.duplicate)

    # -- deciding ------------------------------------------------------------------------

    def run(self) -> None:
        self._apply_patterns()
        round_index = 0
        while self.options.rounds == 0 or round_index < self.options.rounds:
            round_index += 1
            changed = self._fuse_along_post_dominators()
            if self.options.multi_output:
                changed |= self._fuse_multi_output()
            if not changed:
                break

    def _apply_patterns(self) -> None:
        g = self.graph
        for pattern in self.patterns:
            for start in g.nodes:
                chain = self._match(pattern, start)
                if chain is not None:
                    group = g.merge([g.group(op) for op in chain])
                    group.fixed = "pattern group is closed"

    def _match(self, pattern: FusionPattern, start: Operation) -> list[Operation] | None:
        g = self.graph
        chain = [start]
        for _ in pattern.ops[1:]:
            successors = g.successors[chain[-1]]
            if len(successors) != 1 or chain[-1] in g.escapes:
                return None
            chain.append(successors[0])
        for op, name in zip(chain, pattern.ops):
            if op.name != name or len(g.group(op).ops) != 1 or g.group(op).fixed is not None:
                return None
        return chain

    def _fuse_along_post_dominators(self) -> bool:
        g = self.graph
        groups = _topological(g, g.groups())
        ipdom = _post_dominators(g, groups)
        changed = False
        for producer in groups:
            current = producer.root()
            end = ipdom.get(producer)
            if end is None or end.root() is current:
                continue
            path = self._path_groups(current, end.root())
            if path is None:
                continue
            if self.refusal(current, path, end.root()) is None:
                g.merge([current, *path, end.root()])
                changed = True
        return changed

    def _path_groups(self, start: Group, end: Group) -> list[Group] | None:
        """Groups strictly between start and end on dataflow paths; None if a path avoids end."""
        g = self.graph
        found: dict[Group, None] = {}
        pending = list(start.ops)
        seen: set[Operation] = set(start.ops)
        while pending:
            op = pending.pop()
            if op in g.escapes:
                return None
            for s in g.successors[op]:
                if s in seen or g.group(s) is end:
                    continue
                seen.add(s)
                if g.group(s) is not start:
                    found.setdefault(g.group(s), None)
                pending.append(s)
        return sorted(found, key=lambda grp: g.position[grp.ops[0]])

    def _fuse_multi_output(self) -> bool:
        g = self.graph
        changed = False
        for op in g.nodes:
            for consumer in g.successors[op]:
                producer, target = g.group(op), g.group(consumer)
                if producer is target:
                    continue
                if (self.refusal(producer, [], target) or self._acyclic_refusal([producer, target])) is None:
                    g.merge([producer, target])
                    changed = True
        for siblings in self._sibling_sets():
            for group in siblings[1:]:
                first, other = siblings[0].root(), group.root()
                if first is not other and self._sibling_refusal(first, other) is None:
                    g.merge([first, other])
                    changed = True
        return changed

    def _sibling_sets(self) -> list[list[Group]]:
        """Groups reading one value (an argument or a result), for each value read twice."""
        g = self.graph
        readers: dict[SSAValue, list[Group]] = {}
        for op in g.nodes:
            for operand in op.operands:
                groups = readers.setdefault(operand, [])
                if g.group(op) not in groups:
                    groups.append(g.group(op))
        return [groups for groups in readers.values() if len(groups) > 1]

    def _sibling_refusal(self, a: Group, b: Group) -> str | None:
        for group in (a, b):
            if group.fixed is not None:
                return group.fixed
            if _LEVEL[group.category] > _LEVEL[Category.INJECTIVE]:
                return f"{group.category.value} sibling"
        return self._limits([a, b]) or self._acyclic_refusal([a, b])

    def _acyclic_refusal(self, groups: list[Group]) -> str | None:
        return None if self.graph.keeps_groups_acyclic(groups) else "would create a cycle"

    def refusal(self, producer: Group, path: list[Group], end: Group) -> str | None:
        """Why producer, path and end may not become one group, or None if they may."""
        for group in (producer, *path, end):
            if group.fixed is not None:
                return group.fixed
        kind = producer.category
        if path or not (self._is_operand_prologue(producer, end) or self._is_output_view(producer, end)):
            for group in (*path, end):
                if not _may_follow(kind, group.category, is_end=group is end):
                    return f"{kind.value} into {group.category.value}"
            if _view_tail(producer):
                return "an output view ends its group"
        return self._limits([producer, *path, end])

    def _is_operand_prologue(self, producer: Group, end: Group) -> bool:
        """Whether `producer` (reshape, transpose and broadcast_to only) has results used only as
        operands of matmuls in the anchor group `end`: as b, or as a when a is a strided view
        with contiguous rows of a value from outside `producer` and b is computed."""
        g = self.graph
        if end.category is not Category.ANCHOR or any(op.name not in PROLOGUE_OPS for op in producer.ops):
            return False
        for op in producer.ops:
            for use in (use for result in op.results for use in result.uses):
                user = use.operation
                if user in producer.ops:
                    continue
                if not (isinstance(user, graph.MatmulOp) and user in g.group_of and g.group(user) is end):
                    return False
                if use.index == 0 and not _reads_view(user, producer):
                    return False
        return True

    def _is_output_view(self, producer: Group, end: Group) -> bool:
        """Whether `end` (reshapes and transposes) takes the result of the one matmul of
        `producer` (b computed), after the view ops `producer` already ends with, into a strided
        view with contiguous rows of its own result (`strided_view.written_view`)."""
        matmuls = [op for op in producer.ops if isinstance(op, graph.MatmulOp)]
        if len(matmuls) != 1 or _is_constant(matmuls[0].b) or any(op.name not in VIEW_OPS for op in end.ops):
            return False
        (matmul,) = matmuls
        chain = [matmul]
        while chain[-1].results[0].has_one_use():
            user = chain[-1].results[0].first_use.operation
            if user.name not in VIEW_OPS or user not in {*producer.ops, *end.ops}:
                break
            chain.append(user)
        after = {op for op in producer.ops if self.graph.position[op] > self.graph.position[matmul]}
        if {*after, *end.ops} != set(chain[1:]):
            return False
        strides = written_view(matmul.results[0], chain[-1].results[0])
        return strides is not None and strides[-1] == 1

    def _limits(self, groups: list[Group]) -> str | None:
        if sum(grp.heavy for grp in groups) > self.options.max_anchors:
            return f"more than {self.options.max_anchors} anchor/reduction per group"
        if sum(len(grp.ops) for grp in groups) > self.options.max_ops:
            return "max-ops reached"
        if not self.graph.is_convex(groups):
            return "would create a cycle"
        return None

    # -- explaining ----------------------------------------------------------------------

    def explanations(self, function: str) -> list[str]:
        """One stable line per producer->consumer edge between different groups."""
        g = self.graph
        lines = []
        for op in g.nodes:
            for consumer in g.successors[op]:
                producer, target = g.group(op), g.group(consumer)
                if producer is target:
                    continue
                reason = self.refusal(producer, [], target) or self._why_not_merged(op, producer, target)
                lines.append(f"fuse: @{function}: {self._label(op)} -> {self._label(consumer)}: {reason}")
        return lines

    def _why_not_merged(self, op: Operation, producer: Group, target: Group) -> str:
        g = self.graph
        used_elsewhere = g.group_escapes(producer) or any(s is not target for s in g.group_successors(producer))
        if used_elsewhere and not self.options.multi_output:
            if op.name in self.expensive or category_of(op) in _HEAVY:
                return "would duplicate an expensive op"
            return "value is used outside the group (multi-output is off)"
        return "rounds exhausted"

    def _label(self, op: Operation) -> str:
        return f"{op.name}#{self.graph.position[op]}"

    # -- rewriting -----------------------------------------------------------------------

    def materialize(self, names: GroupNamer) -> None:
        """Replace each group of two or more ops by a graph.fused, then erase the originals."""
        g = self.graph
        groups = [grp for grp in g.groups() if len(grp.ops) > 1]
        absorbed = self._absorbed_duplicables({op for grp in groups for op in grp.ops})
        for group in groups:
            self._insert_fused(group, names.next(group.ops), absorbed)
        replaced = [op for grp in groups for op in grp.ops] + list(absorbed)
        for op in sorted(replaced, key=g.position.__getitem__, reverse=True):
            Rewriter.erase_op(op)
        if not sort_block_topologically(self.block, g.position):
            raise PassFailedException("fuse: internal error: the groups formed depend on each other in a cycle")

    def _absorbed_duplicables(self, grouped: set[Operation]) -> set[Operation]:
        """Cheap producers whose every user is grouped (or absorbed): erased after cloning."""
        absorbed: set[Operation] = set()
        for op in sorted(self.graph.duplicable, key=self.graph.position.__getitem__, reverse=True):
            users = [u.operation for r in op.results for u in r.uses]
            if users and all(u in grouped or u in absorbed for u in users):
                absorbed.add(op)
        return absorbed

    def _insert_fused(self, group: Group, name: str, absorbed: set[Operation]) -> None:
        """Insert the graph.fused for group and route outside uses to its results."""
        members = set(group.ops)
        body_ops = sorted([*self._cheap_producers(group.ops), *group.ops], key=self.graph.position.__getitem__)
        outputs = [
            r
            for op in group.ops
            for r in op.results
            if r.first_use is None or _needed_outside(r, members, absorbed)  # unused values stay visible
        ]
        fused, _ = outline(body_ops, outputs, name, self.options.mode)
        Rewriter.insert_op(fused, InsertPoint.before(group.ops[-1]))
        for old, new in zip(outputs, fused.results):
            old.replace_uses_with_if(new, lambda use: use.operation not in members)

    def _cheap_producers(self, ops: list[Operation]) -> list[Operation]:
        """Duplicable producers feeding ops, transitively."""
        found: list[Operation] = []
        pending = list(ops)
        while pending:
            for operand in pending.pop().operands:
                producer = operand.owner
                if isinstance(producer, Operation) and producer in self.graph.duplicable and producer not in found:
                    found.append(producer)
                    pending.append(producer)
        return found


def _needed_outside(value: SSAValue, members: set[Operation], absorbed: set[Operation]) -> bool:
    """Is value used outside members, directly or through cheap producers cloned elsewhere?"""
    for use in value.uses:
        user = use.operation
        if user in absorbed:
            if any(_needed_outside(r, members, absorbed) for r in user.results):
                return True
        elif user not in members:
            return True
    return False


def _reads_view(matmul: graph.MatmulOp, prologue: Group) -> bool:
    """Whether the matmul's a is a strided view with contiguous rows of a value from outside
    `prologue`, with out's batch dims, and its b is computed: the batched GEMM reads a there."""
    view = read_view(matmul.a, lambda value: value.owner not in prologue.ops)
    same_batch = matmul.a.type.get_shape()[:-2] == matmul.result.type.get_shape()[:-2]
    return view is not None and view[1][-1] == 1 and same_batch and not _is_constant(matmul.b)


def _view_tail(group: Group) -> bool:
    """Whether the group's matmul result goes on into a transpose or a reshape that moves
    elements (an output view: nothing may follow it in the group)."""
    return any(
        op.name in VIEW_OPS and _fusion_category(op) is not Category.ELEMENTWISE and isinstance(op.operands[0].owner, graph.MatmulOp)
        and op.operands[0].owner in group.ops
        for op in group.ops
    )


def _is_constant(value: SSAValue) -> bool:
    return isinstance(value.owner, graph.ConstantOp)


def _may_follow(producer: Category, consumer: Category, is_end: bool) -> bool:
    """TVM FuseOps: may a group of kind `producer` absorb a consumer of kind `consumer`?"""
    simple = _LEVEL[consumer] <= _LEVEL[Category.INJECTIVE]
    if producer is Category.ELEMENTWISE:
        return simple or (is_end and consumer is Category.REDUCTION)
    if producer is Category.INJECTIVE:
        return simple
    if producer is Category.ANCHOR:
        return consumer is Category.ELEMENTWISE
    return False


def _topological(g: FusionGraph, groups: list[Group]) -> list[Group]:
    """Groups in dataflow order, ties broken by first op."""
    producers: dict[Group, list[Group]] = {grp: [] for grp in groups}
    for grp in groups:
        for successor in g.group_successors(grp):
            producers[successor].append(grp)
    return topological_order(groups, producers.__getitem__, rank=lambda grp: g.position[grp.ops[0]])


def _post_dominators(g: FusionGraph, order: list[Group]) -> dict[Group, Group]:
    """Immediate post-dominator of each group; groups post-dominated only by the exit are absent."""
    ipdom: dict[Group, Group | None] = {}
    depth: dict[Group | None, int] = {None: 0}
    for grp in reversed(order):
        successors = g.group_successors(grp)
        if g.group_escapes(grp) or not successors:
            dominator = None
        else:
            dominator = successors[0]
            for s in successors[1:]:
                dominator = _common_post_dominator(dominator, s, ipdom, depth)
        ipdom[grp] = dominator
        depth[grp] = depth[dominator] + 1
    return {grp: d for grp, d in ipdom.items() if d is not None}


def _common_post_dominator(a, b, ipdom, depth):
    while a is not b:
        if a is None or b is None:
            return None
        if depth[a] >= depth[b]:
            a = ipdom[a]
        else:
            b = ipdom[b]
    return a
