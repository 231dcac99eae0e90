"""What the to-llvm passes share: the llvm type of each builtin type, and the unrealized
casts that bridge old and new types while the passes run one at a time.

`index` becomes i64 and every statically shaped memref a bare `!llvm.ptr`; other types are
already llvm types. A pass converts its ops' operands with `llvm_operands` and hands back
results of the old types with `replace_with_llvm`, so the IR stays valid between passes;
`reconcile-unrealized-casts` removes the cast pairs at the end of the chain.
"""

from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    ModuleOp,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.dialects.utils.fast_math import FastMathAttrBase, FastMathFlag
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import DiagnosticException

FLOAT_SUFFIXES: dict[type[Attribute], str] = {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}


def llvm_type(type_: Attribute) -> Attribute:
    """The type a value of `type_` has in the llvm dialect."""
    if isinstance(type_, IndexType):
        return i64
    if isinstance(type_, MemRefType):
        return llvm.LLVMPointerType()
    return type_


def intrinsic_suffix(type_: Attribute) -> str:
    """`f32`, `f64`, `i32` ...: how LLVM mangles an overloaded intrinsic's type into its name."""
    type_ = llvm_type(type_)
    if isinstance(type_, IntegerType):
        return f"i{type_.width.data}"
    if type(type_) in FLOAT_SUFFIXES:
        return FLOAT_SUFFIXES[type(type_)]
    raise DiagnosticException(f"no llvm intrinsic for type {type_}")


def intrinsic_call(name: str, args: Sequence[SSAValue], result_type: Attribute) -> llvm.CallIntrinsicOp:
    """Call `llvm.<name>` overloaded on `result_type` (e.g. `exp` on f32 calls `llvm.exp.f32`)."""
    return llvm.CallIntrinsicOp(f"llvm.{name}.{intrinsic_suffix(result_type)}", args, [result_type])


def fastmath_flags(op: Operation) -> llvm.FastMathAttr:
    """The fast-math flags of an arith/math op as llvm flags: `#arith.fastmath<reassoc>` -> `#llvm.fastmath<reassoc>`."""
    flags = op.properties.get("fastmath")
    if not isinstance(flags, FastMathAttrBase):
        return llvm.FastMathAttr(None)
    return llvm.FastMathAttr(FastMathFlag(flag) for flag in flags.data)  # flags built from strings hold str


def llvm_operands(rewriter: PatternRewriter, values: Sequence[SSAValue]) -> list[SSAValue]:
    """`values` with llvm types, cast before the matched op where their type is not one yet."""
    converted: list[SSAValue] = []
    for value in values:
        new_type = llvm_type(value.type)
        if new_type != value.type:
            value = rewriter.insert(UnrealizedConversionCastOp.get([value], [new_type])).results[0]
        converted.append(value)
    return converted


def replace_with_llvm(rewriter: PatternRewriter, op: Operation, new_ops: Sequence[Operation], result: SSAValue | None):
    """Replace `op` by `new_ops`, whose `result` (llvm-typed) stands for `op`'s single result, if any."""
    if result is not None and result.type != op.results[0].type:
        cast = UnrealizedConversionCastOp.get([result], [op.results[0].type])
        new_ops, result = [*new_ops, cast], cast.results[0]
    rewriter.replace(op, new_ops, [result] if result is not None else [])


def convert_block_arguments(block: Block) -> None:
    """Give `block`'s arguments llvm types; their old uses read a cast back to the old type."""
    for arg in block.args:
        old_type, new_type = arg.type, llvm_type(arg.type)
        if new_type == old_type:
            continue
        new_arg = Rewriter.replace_value_with_new_type(arg, new_type)
        cast = UnrealizedConversionCastOp.get([new_arg], [old_type])
        Rewriter.insert_op(cast, InsertPoint.at_start(block))
        new_arg.replace_uses_with_if(cast.results[0], lambda use, cast=cast: use.operation is not cast)


def declare_function(module: ModuleOp, name: str, signature: llvm.LLVMFunctionType) -> None:
    """Declare the external `llvm.func @name` (a libc/libm symbol MCJIT resolves) once."""
    if SymbolTable.lookup_symbol(module, name) is None:
        declaration = llvm.FuncOp(name, signature, linkage=llvm.LinkageAttr("external"))
        Rewriter.insert_op(declaration, InsertPoint.at_start(module.body.block))
