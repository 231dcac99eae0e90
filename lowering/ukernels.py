"""Ukernels: functions the JIT generates as LLVM IR for the shapes they are called with.

A kernel calls a ukernel like any function, destination-passing (it writes its last
argument), on (rows in, data read whole, rows out): the first and last arguments' leading dim
counts rows (a row chunk of the kernel calls the ukernel on its rows), the middle one is read
whole. A direct convolution with a tile epilogue (`tile_epilogue.py`) also takes the
epilogue's operands before out; row splitting does not take such calls (`calls_take_rows`). The lowering declares each callee `func.func private` with `graph.ukernel`; the JIT
links in the IR that the callee's kind writes from its name and argument types:

    func.call @graphopt_sgemm_packed_128x768x3072(%a, %b_panels, %out) : (...) -> ()
    func.func private @graphopt_sgemm_packed_128x768x3072(...) attributes {graph.ukernel}

Kinds, by the prefix of their names: the packed GEMM (`packed_gemm.py`), the direct
convolution (`direct_conv.py`) and the depthwise convolution (`depthwise_conv.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, UnitAttr
from xdsl.ir import SSAValue

from graphopt.lowering import depthwise_conv, direct_conv, packed_gemm

UKERNEL_ATTR = "graph.ukernel"
"""Marks a declaration (`func.func private`) whose body the JIT generates (`ukernel_ir`)."""

_KINDS = {packed_gemm.PREFIX: packed_gemm, direct_conv.PREFIX: direct_conv, depthwise_conv.PREFIX: depthwise_conv}


def call(name: str, operands: Sequence[SSAValue]) -> func.CallOp:
    return func.CallOp(name, operands, [])


def chunk_call(ukernel_call: func.CallOp, operands: Sequence[SSAValue]) -> func.CallOp:
    """`ukernel_call` on `operands` of other sizes (a row chunk's), calling the ukernel for them."""
    name = ukernel_call.callee.string_value()
    return call(_kind(name).chunk_name(name, [v.type for v in operands]), operands)


def calls_take_rows(kernel: func.FuncOp) -> bool:
    """Whether each ukernel call of `kernel` has operands (rows in, data read whole, rows out),
    the calls row splitting (`row_split.py`) takes."""
    return all(len(op.arguments) == 3 for op in kernel.walk() if isinstance(op, func.CallOp))


def declarations(kernels: Sequence[func.FuncOp]) -> list[func.FuncOp]:
    """The declaration of each ukernel that `kernels` call (kernels call nothing else), once."""
    calls = {op.callee.string_value(): op for kernel in kernels for op in kernel.walk() if isinstance(op, func.CallOp)}
    declared = []
    for name, ukernel_call in calls.items():
        declaration = func.FuncOp.external(name, [v.type for v in ukernel_call.arguments], [])
        declaration.attributes[UKERNEL_ATTR] = UnitAttr()
        declared.append(declaration)
    return declared


def ukernel_ir(name: str, types: Sequence[MemRefType]) -> str:
    """LLVM IR defining the ukernel `name` on arguments of these memref types."""
    return _kind(name).ukernel_ir(name, types)


def _kind(name: str):
    return next(kind for prefix, kind in _KINDS.items() if name.startswith(f"{prefix}_"))
