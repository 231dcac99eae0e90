"""The `cuda` dialect: CUDA's execution model on top of func, scf, arith and memref.

A kernel is a `func.func` marked `cuda.kernel`: the func dialect's syntax, symbols, verifier
and lowering serve device code unchanged, and a kernel is still callable by name. Inside it,
the index ops read CUDA's built-in variables, `cuda.barrier` is `__syncthreads()`,
`cuda.shared_alloc` is a `__shared__` array and `cuda.shuffle_down` is `__shfl_down_sync`.
A host function starts a kernel with `cuda.launch`:

    func.func @scale(%x: memref<1024xf32>, %out: memref<1024xf32>) attributes {cuda.kernel} {
      %tid = cuda.thread_id x
      %bid = cuda.block_id x
      %dim = cuda.block_dim x
      %tile = cuda.shared_alloc : memref<256xf32, 3>
      ...
      cuda.barrier
      func.return
    }
    func.func @launch_scale(%x: memref<1024xf32>, %out: memref<1024xf32>) {
      cuda.launch @scale grid [4, 1, 1] block [256, 1, 1] (%x, %out) : memref<1024xf32>, memref<1024xf32>
      func.return
    }
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    VarConstraint,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import VerifyException

KERNEL_ATTR = "cuda.kernel"
"""Unit attribute of a `func.func` that is a kernel (a `__global__` function)."""

SHARED_MEMORY_SPACE = 3
"""The memref memory space (and NVPTX address space) of shared memory."""

MAX_THREADS_PER_BLOCK = 1024
DIMENSIONS = ("x", "y", "z")


def enclosing_kernel(op: Operation) -> func.FuncOp | None:
    """The kernel function `op` is inside, if any."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent if parent is not None and KERNEL_ATTR in parent.attributes else None


def _check_in_kernel(op: Operation) -> None:
    if enclosing_kernel(op) is None:
        raise VerifyException(f"{op.name}: must be inside a func.func marked {KERNEL_ATTR} (device code)")


class DimensionOp(IRDLOperation, ABC):
    """`%v = cuda.<op> x`: one component (x, y or z) of a CUDA built-in index variable."""

    dimension = prop_def(StringAttr)
    result = result_def(IndexType)

    def __init__(self, dimension: str):
        super().__init__(properties={"dimension": StringAttr(dimension)}, result_types=[IndexType()])

    def verify_(self) -> None:
        if self.dimension.data not in DIMENSIONS:
            raise VerifyException(f"{self.name}: dimension must be x, y or z, not '{self.dimension.data}'")
        _check_in_kernel(self)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.dimension.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> DimensionOp:
        op = cls(parser.parse_identifier())
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class ThreadIdOp(DimensionOp):
    """`%t = cuda.thread_id x`: the thread's index in its block (threadIdx.x)."""

    name = "cuda.thread_id"


@irdl_op_definition
class BlockIdOp(DimensionOp):
    """`%b = cuda.block_id x`: the block's index in the grid (blockIdx.x)."""

    name = "cuda.block_id"


@irdl_op_definition
class BlockDimOp(DimensionOp):
    """`%n = cuda.block_dim x`: threads per block (blockDim.x)."""

    name = "cuda.block_dim"


@irdl_op_definition
class GridDimOp(DimensionOp):
    """`%g = cuda.grid_dim x`: blocks in the grid (gridDim.x)."""

    name = "cuda.grid_dim"


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`cuda.barrier`: wait for every thread of the block; their memory writes are then visible (__syncthreads)."""

    name = "cuda.barrier"

    assembly_format = "attr-dict"

    def verify_(self) -> None:
        _check_in_kernel(self)


@irdl_op_definition
class SharedAllocOp(IRDLOperation):
    """`%s = cuda.shared_alloc : memref<16x16xf32, 3>`: a statically sized array in the block's shared memory."""

    name = "cuda.shared_alloc"

    memref = result_def(MemRefType)

    assembly_format = "attr-dict `:` type($memref)"

    def __init__(self, element_type: Attribute, shape: Sequence[int]):
        space = IntegerAttr(SHARED_MEMORY_SPACE, i64)
        super().__init__(result_types=[MemRefType(element_type, list(shape), memory_space=space)])

    def verify_(self) -> None:
        type_ = self.memref.type
        space = type_.memory_space
        if not (isinstance(space, IntegerAttr) and space.value.data == SHARED_MEMORY_SPACE):
            raise VerifyException(f"{self.name}: {type_} must be in memory space {SHARED_MEMORY_SPACE} (shared)")
        if any(size <= 0 for size in type_.get_shape()) or not isinstance(type_.layout, NoneAttr):
            raise VerifyException(f"{self.name}: {type_} must have a static shape and the default layout")
        _check_in_kernel(self)


@irdl_op_definition
class ShuffleDownOp(IRDLOperation):
    """`%r = cuda.shuffle_down %v, %offset : f32`: `%v` of the lane `%offset` higher in the warp
    (its own where that lane is past the warp's end); every lane of the warp takes part (__shfl_down_sync)."""

    name = "cuda.shuffle_down"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    offset = operand_def(i32)
    result = result_def(T)

    assembly_format = "$value `,` $offset attr-dict `:` type($value)"

    def __init__(self, value: SSAValue, offset: SSAValue):
        super().__init__(operands=[value, offset], result_types=[SSAValue.get(value).type])

    def verify_(self) -> None:
        type_ = self.value.type
        if not (isinstance(type_, Float32Type) or type_ == i32):
            raise VerifyException(f"{self.name}: shuffles move 32-bit values (f32 or i32), not {type_}")
        _check_in_kernel(self)


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """`cuda.launch @k grid [8, 1, 1] block [256, 1, 1] (%a, %out) : memref<2048xf32>, memref<2048xf32>`:
    run kernel @k on a grid of blocks from host code, with the given arguments."""

    name = "cuda.launch"

    kernel = prop_def(SymbolRefAttr)
    grid = prop_def(DenseArrayBase.constr(i64))
    block = prop_def(DenseArrayBase.constr(i64))
    args = var_operand_def()

    def __init__(self, kernel: str, grid: Sequence[int], block: Sequence[int], args: Sequence[SSAValue]):
        super().__init__(
            operands=[list(args)],
            properties={
                "kernel": SymbolRefAttr(kernel),
                "grid": DenseArrayBase.from_list(i64, list(grid)),
                "block": DenseArrayBase.from_list(i64, list(block)),
            },
        )

    @property
    def grid_size(self) -> tuple[int, ...]:
        return tuple(self.grid.get_values())

    @property
    def block_size(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    def verify_(self) -> None:
        for what, sizes in (("grid", self.grid_size), ("block", self.block_size)):
            if len(sizes) != 3 or any(size <= 0 for size in sizes):
                raise VerifyException(f"{self.name}: {what} must be three positive sizes (x, y, z), got {list(sizes)}")
        threads = self.block_size[0] * self.block_size[1] * self.block_size[2]
        if threads > MAX_THREADS_PER_BLOCK:
            raise VerifyException(f"{self.name}: a block has at most {MAX_THREADS_PER_BLOCK} threads, got {threads}")
        if enclosing_kernel(self) is not None:
            raise VerifyException(f"{self.name}: launches a kernel from host code, not from inside a kernel")
        name = self.kernel.string_value()
        kernel = SymbolTable.lookup_symbol(self, self.kernel)
        if not isinstance(kernel, func.FuncOp) or KERNEL_ATTR not in kernel.attributes:
            raise VerifyException(f"{self.name}: @{name} is not a func.func marked {KERNEL_ATTR}")
        expected = list(kernel.function_type.inputs.data)
        given = [a.type for a in self.args]
        if given != expected:
            raise VerifyException(
                f"{self.name}: @{name} takes ({', '.join(map(str, expected))}), given ({', '.join(map(str, given))})"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.kernel)
        for what, sizes in (("grid", self.grid_size), ("block", self.block_size)):
            printer.print_string(f" {what} [{', '.join(map(str, sizes))}]")
        printer.print_string(" (")
        printer.print_list(self.args, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        if self.args:
            printer.print_string(" : ")
            printer.print_list((a.type for a in self.args), printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> LaunchOp:
        kernel = parser.parse_attribute()
        if not isinstance(kernel, SymbolRefAttr):
            parser.raise_error("expected the kernel's symbol, e.g. @my_kernel")
        sizes = {}
        for what in ("grid", "block"):
            parser.parse_keyword(what)
            sizes[what] = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        attributes = parser.parse_optional_attr_dict()
        types = []
        if operands and parser.parse_optional_punctuation(":") is not None:
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != len(operands):
            parser.raise_error(f"expected {len(operands)} argument types, got {len(types)}")
        args = parser.resolve_operands(operands, types, parser.pos)
        op = cls(kernel.string_value(), sizes["grid"], sizes["block"], args)
        op.attributes |= attributes
        return op


Cuda = Dialect(
    "cuda",
    [ThreadIdOp, BlockIdOp, BlockDimOp, GridDimOp, BarrierOp, SharedAllocOp, ShuffleDownOp, LaunchOp],
)
