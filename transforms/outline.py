"""Move `graph.fused` groups in and out of functions: `outline`, `inline-fused`, `unfuse`.

An outlined group is a private `func.func` named after the group and marked as a primitive
kernel (`graph.primitive`); its `mode` and `backend` become `graph.mode` and `graph.backend`.
"""

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from graphopt.dialects.graph import FusedOp, YieldOp
from graphopt.errors import GraphoptError

PRIMITIVE = "graph.primitive"
"""Unit attribute that marks a function as an outlined group (a primitive kernel)."""

CARRIED_ATTRIBUTES = ("mode", "backend")
"""Optional `graph.fused` attributes an outlined function keeps as `graph.<name>`, in this order."""


def kernel_attribute(group_attribute: str) -> str:
    return f"graph.{group_attribute}"


def module_level_ancestor(op: Operation) -> Operation:
    """The op directly in the module that contains `op` (usually its function)."""
    while not isinstance(parent := op.parent_op(), ModuleOp):
        op = parent
    return op


class OutlineGroup(RewritePattern):
    """Replace a `graph.fused` by a call to a new primitive function placed after its own function."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, group: FusedOp, rewriter: PatternRewriter):
        name = group.group_name.data
        input_types = [value.type for value in group.inputs]
        output_types = [value.type for value in group.outputs]
        kernel = FuncOp(
            name,
            (input_types, output_types),
            rewriter.move_region_contents_to_new_regions(group.body),
            "private",
        )
        kernel.attributes[PRIMITIVE] = UnitAttr()
        for attribute in CARRIED_ATTRIBUTES:
            if attribute in group.attributes:
                kernel.attributes[kernel_attribute(attribute)] = group.attributes[attribute]
        rewriter.insert(kernel, InsertPoint.after(module_level_ancestor(group)))
        group_yield = kernel.body.block.last_op
        assert isinstance(group_yield, YieldOp)
        rewriter.replace(group_yield, ReturnOp(*group_yield.values))
        rewriter.replace(group, CallOp(name, group.inputs, output_types))


@dataclass(frozen=True)
class OutlinePass(ModulePass):
    """Outline each `graph.fused` into a private primitive function and call it.

        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
          %r = graph.fused(%a) {name = "relu_0", mode = "fallback"} : (tensor<4xf32>) -> tensor<4xf32> {
          ^bb0(%x: tensor<4xf32>):
            %y = graph.relu %x : tensor<4xf32>
            graph.yield %y : tensor<4xf32>
          }
          func.return %r : tensor<4xf32>
        }

    becomes

        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
          %r = func.call @relu_0(%a) : (tensor<4xf32>) -> tensor<4xf32>
          func.return %r : tensor<4xf32>
        }
        func.func private @relu_0(%x: tensor<4xf32>) -> tensor<4xf32>
            attributes {graph.primitive, graph.mode = "fallback"} {
          %y = graph.relu %x : tensor<4xf32>
          func.return %y : tensor<4xf32>
        }

    Kernels follow the function they came from, in the order of their groups. A group
    whose name is already a symbol of the module is an error.
    """

    name = "outline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_group_names_are_free(op)
        # Walking backwards and inserting each kernel right after its function leaves
        # the kernels in the order of their groups.
        PatternRewriteWalker(OutlineGroup(), walk_reverse=True, apply_recursively=False).rewrite_module(op)


def check_group_names_are_free(module: ModuleOp) -> None:
    """Raise GraphoptError if a group's name is taken by a symbol of `module` or another group."""
    taken: set[str] = set()
    for group in module.walk():
        if not isinstance(group, FusedOp):
            continue
        name = group.group_name.data
        if name in taken or SymbolTable.lookup_symbol(module, name) is not None:
            raise GraphoptError(
                f'outline: cannot outline graph.fused "{name}": the module already has a symbol @{name}'
            )
        taken.add(name)


@dataclass
class InlinePrimitiveCall(RewritePattern):
    """Replace a `func.call` to a primitive function by a `graph.fused` holding a copy of its body."""

    inlined_kernels: set[str] = field(default_factory=set)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, call: CallOp, rewriter: PatternRewriter):
        kernel = SymbolTable.lookup_symbol(call, call.callee)
        if not isinstance(kernel, FuncOp) or PRIMITIVE not in kernel.attributes:
            return
        name = kernel.sym_name.data
        attributes: dict[str, Attribute] = {"name": StringAttr(name)}
        for attribute in CARRIED_ATTRIBUTES:
            if kernel_attribute(attribute) in kernel.attributes:
                attributes[attribute] = kernel.attributes[kernel_attribute(attribute)]
        group = FusedOp.create(
            operands=call.arguments,
            result_types=[result.type for result in call.res],
            attributes=attributes,
            regions=[kernel.body.clone()],
        )
        rewriter.replace(call, group)
        kernel_return = group.body.block.last_op
        assert isinstance(kernel_return, ReturnOp)
        rewriter.replace(kernel_return, YieldOp(kernel_return.arguments))
        self.inlined_kernels.add(name)


@dataclass(frozen=True)
class InlineFusedPass(ModulePass):
    """Turn calls to primitive functions back into `graph.fused` groups (the inverse of `outline`).

        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
          %r = func.call @relu_0(%a) : (tensor<4xf32>) -> tensor<4xf32>
          func.return %r : tensor<4xf32>
        }
        func.func private @relu_0(%x: tensor<4xf32>) -> tensor<4xf32>
            attributes {graph.primitive, graph.mode = "fallback"} {
          %y = graph.relu %x : tensor<4xf32>
          func.return %y : tensor<4xf32>
        }

    becomes

        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
          %r = graph.fused(%a) {name = "relu_0", mode = "fallback"} : (tensor<4xf32>) -> tensor<4xf32> {
          ^bb0(%x: tensor<4xf32>):
            %y = graph.relu %x : tensor<4xf32>
            graph.yield %y : tensor<4xf32>
          }
          func.return %r : tensor<4xf32>
        }

    Primitive functions whose calls were all inlined are erased; calls to other functions stay.
    """

    name = "inline-fused"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline_calls = InlinePrimitiveCall()
        PatternRewriteWalker(inline_calls).rewrite_module(op)
        inlined = inline_calls.inlined_kernels
        for kernel in [f for f in op.ops if isinstance(f, FuncOp) and f.sym_name.data in inlined]:
            Rewriter.erase_op(kernel)


class InlineGroupBody(RewritePattern):
    """Replace a `graph.fused` by its body; its results become the yielded values."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, group: FusedOp, rewriter: PatternRewriter):
        rewriter.inline_block(group.body.block, InsertPoint.before(group), group.inputs)
        group_yield = group.prev_op
        assert isinstance(group_yield, YieldOp)
        rewriter.replace(group, [], group_yield.values)
        rewriter.erase(group_yield)


@dataclass(frozen=True)
class UnfusePass(ModulePass):
    """Dissolve every `graph.fused` into the block around it: the module without grouping.

        %r = graph.fused(%a) {name = "relu_0"} : (tensor<4xf32>) -> tensor<4xf32> {
        ^bb0(%x: tensor<4xf32>):
          %y = graph.relu %x : tensor<4xf32>
          graph.yield %y : tensor<4xf32>
        }
        func.return %r : tensor<4xf32>

    becomes

        %y = graph.relu %a : tensor<4xf32>
        func.return %y : tensor<4xf32>
    """

    name = "unfuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(InlineGroupBody()).rewrite_module(op)
