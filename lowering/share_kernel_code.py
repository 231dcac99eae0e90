"""share-kernel-code: one function for kernels with the same code; the others become its aliases.

A network repeats blocks: ResNet-50's 16 bottlenecks lower to a few distinct kernels, which
differ only in the weights they are given as constant arguments. A kernel whose type, argument
kinds (constant or not; the values may differ) and body equal an earlier kernel's is erased,
and the earlier one lists its name in `graph.aliases`, so it is lowered to LLVM and compiled
once; the runtime calls the shared code with each kernel's own constants.

    func.func @fused_conv2d_add_relu_3(%x: memref<...>, %w: memref<...> {graph.constant = dense<...>}, ...) {...}
    func.func @fused_conv2d_add_relu_7(%x: memref<...>, %w: memref<...> {graph.constant = dense<...>}, ...) {...}   (same body)

becomes

    func.func @fused_conv2d_add_relu_3(...) attributes {graph.aliases = ["fused_conv2d_add_relu_7"], ...} {...}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass

ALIASES_ATTR = "graph.aliases"
"""Array of the names of the kernels erased because their code is this kernel's."""


@dataclass(frozen=True)
class ShareKernelCodePass(ModulePass):
    """Erase each kernel (a func.func with a body) whose code equals an earlier kernel's, and
    name it in that kernel's `graph.aliases`."""

    name = "share-kernel-code"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        buckets: dict[tuple, list[func.FuncOp]] = {}
        for kernel in list(op.ops):
            if not (isinstance(kernel, func.FuncOp) and kernel.body.blocks):
                continue
            argument_kinds = tuple(tuple(sorted(a.data)) for a in kernel.arg_attrs.data) if kernel.arg_attrs else ()
            bucket = buckets.setdefault((kernel.function_type, argument_kinds, sum(1 for _ in kernel.walk())), [])
            first = next((k for k in bucket if k.body.is_structurally_equivalent(kernel.body)), None)
            if first is None:
                bucket.append(kernel)
                continue
            aliases = first.attributes.get(ALIASES_ATTR, ArrayAttr([]))
            first.attributes[ALIASES_ATTR] = ArrayAttr([*aliases.data, StringAttr(kernel.sym_name.data)])
            op.body.block.erase_op(kernel)


def code_names(module: ModuleOp) -> dict[str, str]:
    """Each kernel alias in `module`, and the name of the kernel whose code it uses."""
    return {
        alias.data: kernel.sym_name.data
        for kernel in module.ops
        if isinstance(kernel, func.FuncOp) and ALIASES_ATTR in kernel.attributes
        for alias in kernel.attributes[ALIASES_ATTR].data
    }
