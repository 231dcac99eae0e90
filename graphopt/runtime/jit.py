"""The CPU JIT: kernel modules -> optimized LLVM IR (`lowering/llvm_module.py`) -> MCJIT, and the
calls into the machine code.

    kernels = compile_module(module)               # module: ModuleOp or MLIR text of func kernels
    kernels["fused_add_relu_0"](a, b, out)         # NumPy arrays, passed by pointer, no copies

A kernel checks its arguments (dtype, shape, C-contiguity, alignment, written buffers that
overlap others) and raises `KernelArgumentError`. Compiled modules are cached for the process
by their printed IR, so an identical kernel compiles once.

A `CallSequence` is one native function that calls several compiled kernels in a
row, reading their array addresses from a table, so a runtime crosses from Python into native
code once for all of them:

    run = CallSequence([NativeCall(k0.address, (0, 1, 2)), NativeCall(k1.address, (2, 3))])
    run.function(table.ctypes.data)                # table: int64 addresses, one per slot
"""

import ctypes
import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import llvmlite.binding as llvm_binding
import numpy as np
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    MemRefType,
    ModuleOp,
    StringAttr,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, OpResult, SSAValue

from graphopt.errors import GraphoptError
from graphopt.lowering.llvm_module import host_target_machine, optimized_llvm_module
from graphopt.runtime.kernel_cache import CacheEntry, active_kernel_cache, kernel_key
from graphopt.parsing import parse_text


class KernelArgumentError(ValueError):
    """A kernel was called with arguments that do not match its signature."""


SCALAR_TYPES: dict[Attribute, tuple[np.dtype, type[ctypes._SimpleCData]]] = {
    f32: (np.dtype(np.float32), ctypes.c_float),
    f64: (np.dtype(np.float64), ctypes.c_double),
    i1: (np.dtype(np.bool_), ctypes.c_bool),
    i8: (np.dtype(np.int8), ctypes.c_int8),
    i16: (np.dtype(np.int16), ctypes.c_int16),
    i32: (np.dtype(np.int32), ctypes.c_int32),
    i64: (np.dtype(np.int64), ctypes.c_int64),
    IndexType(): (np.dtype(np.int64), ctypes.c_int64),
}
"""NumPy dtype and ctypes type of each scalar type kernels take."""

CTYPES_BY_DTYPE = dict(SCALAR_TYPES.values())


def scalar_type(type_: Attribute) -> tuple[np.dtype, type[ctypes._SimpleCData]]:
    try:
        return SCALAR_TYPES[type_]
    except KeyError:
        raise KernelArgumentError(f"kernels cannot take or return {type_}") from None


@dataclass(frozen=True)
class ArgumentSpec:
    """What a kernel expects in one argument position: an array (shape) or a scalar (shape None)."""

    dtype: np.dtype
    shape: tuple[int, ...] | None

    @staticmethod
    def of(type_: Attribute) -> "ArgumentSpec":
        if isinstance(type_, MemRefType):
            return ArgumentSpec(scalar_type(type_.element_type)[0], tuple(type_.get_shape()))
        return ArgumentSpec(scalar_type(type_)[0], None)

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)} array" if self.shape is not None else f"{self.dtype} scalar"


Signature = tuple[tuple[ArgumentSpec, ...], np.dtype | None]
"""A kernel's argument specs and the dtype of its scalar result (None: no result)."""


def signature_of(function_type: FunctionType) -> Signature:
    """The signature of a kernel of this type."""
    results = function_type.outputs.data
    return tuple(ArgumentSpec.of(t) for t in function_type.inputs.data), scalar_type(results[0])[0] if results else None


class Kernel:
    """A compiled kernel, called with NumPy arrays (by pointer) and Python scalars."""

    def __init__(self, name: str, address: int, arguments: tuple[ArgumentSpec, ...], result: np.dtype | None,
                 written: frozenset[int], alignment: int, owner: "CompiledModule"):
        self.name = name
        self.arguments = arguments
        self.result = result
        self.written = written
        self.alignment = alignment
        self._owner = owner  # keeps the execution engine, and so the code, alive
        self.address = address
        argtypes = [ctypes.c_void_p if a.shape is not None else CTYPES_BY_DTYPE[a.dtype] for a in arguments]
        restype = CTYPES_BY_DTYPE[result] if result is not None else None
        self._cfunc = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        self.unchecked = self._cfunc
        """The kernel without argument checks: takes data addresses (ints) and scalars; the
        caller guarantees shapes, dtypes, contiguity, alignment and no overlap of outputs."""

    def __call__(self, *args):
        if len(args) != len(self.arguments):
            raise KernelArgumentError(f"{self.name} takes {len(self.arguments)} arguments, got {len(args)}")
        return self._cfunc(*[self._check(i, arg, args) for i, arg in enumerate(args)])

    def _check(self, index: int, arg, args) -> object:
        spec = self.arguments[index]
        where = f"{self.name} argument {index}"
        if spec.shape is None:
            return arg
        if not isinstance(arg, np.ndarray):
            raise KernelArgumentError(f"{where}: expected a {spec}, got {type(arg).__name__}")
        if arg.dtype != spec.dtype or arg.shape != spec.shape:
            raise KernelArgumentError(f"{where}: expected a {spec}, got a {arg.dtype}{list(arg.shape)} array")
        if not arg.flags.c_contiguous:
            raise KernelArgumentError(f"{where}: array is not C-contiguous (use np.ascontiguousarray)")
        address = arg.ctypes.data
        if self.alignment and address % self.alignment:
            raise KernelArgumentError(
                f"{where}: array data is not {self.alignment}-byte aligned (allocate with graphopt.runtime.arrays.aligned_empty)"
            )
        if index in self.written:
            if not arg.flags.writeable:
                raise KernelArgumentError(f"{where}: the kernel writes it but the array is read-only")
            for other_index, other in enumerate(args):
                if other_index != index and isinstance(other, np.ndarray) and np.may_share_memory(arg, other):
                    raise KernelArgumentError(f"{where}: the kernel writes it and it overlaps argument {other_index}")
        return address

    def __repr__(self) -> str:
        return f"Kernel({self.name}: {', '.join(map(str, self.arguments))})"


def written_arguments(function: llvm.FuncOp) -> frozenset[int]:
    """Positions of the pointer arguments that `function` stores through, or passes last to a
    call (the ukernels it calls are destination-passing: they write their last argument)."""
    entry = function.body.blocks.first
    written: set[int] = set()
    for op in function.walk():
        if isinstance(op, llvm.StoreOp):
            pointer: SSAValue = op.ptr
        elif isinstance(op, llvm.CallOp) and op.args:
            pointer = op.args[-1]
        else:
            continue
        while isinstance(pointer, OpResult) and isinstance(pointer.op, llvm.GEPOp):
            pointer = pointer.op.ptr
        if isinstance(pointer, BlockArgument) and pointer.block is entry:
            written.add(pointer.index)
    return frozenset(written)


class CompiledModule(Mapping[str, Kernel]):
    """The kernels of one module, compiled together into one MCJIT engine, by name."""

    def __init__(self, entry: CacheEntry, signatures: Mapping[str, Signature], alignment: int):
        """The machine code of `entry` (as `_machine_code` makes it, or a saved Executable holds
        it) loaded into a new engine, with no lowering and no optimization; `signatures`: each
        kernel's argument specs and result dtype."""
        self.entry = entry
        self.llvm_ir: str = entry.metadata["llvm_ir"]
        try:
            self._engine = llvm_binding.create_mcjit_compiler(llvm_binding.parse_assembly(""), host_target_machine())
            self._engine.add_object_file(llvm_binding.ObjectFileRef.from_data(entry.machine_code))
            self._engine.finalize_object()
        except RuntimeError as e:  # llvmlite's errors: an object file that does not load
            raise GraphoptError(f"LLVM could not load the kernels {', '.join(signatures)}: {e}") from None
        addresses = {name: self._engine.get_function_address(name) for name in signatures}
        missing = [name for name, address in addresses.items() if not address]
        if missing:
            raise GraphoptError(f"the machine code has no function {', '.join(missing)}")
        self._kernels = MappingProxyType({
            name: Kernel(name, addresses[name], arguments, result, frozenset(entry.metadata["written"][name]), alignment,
                         self)
            for name, (arguments, result) in signatures.items()
        })

    @staticmethod
    def of(module: ModuleOp, alignment: int, cache_key: str) -> "CompiledModule":
        """`module`'s kernels, from the persistent kernel cache under `cache_key`
        (`kernel_cache.kernel_key`) or compiled (and stored there)."""
        signatures = {
            op.sym_name.data: signature_of(op.function_type)
            for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks
        }
        cache = active_kernel_cache()
        entry = cache.load(cache_key) if cache is not None else None
        if entry is None:
            try:
                entry = _machine_code(module, alignment, host_target_machine())
            except RuntimeError as e:  # llvmlite's errors: IR that does not parse or verify, codegen failures
                raise GraphoptError(f"LLVM could not compile the kernels {', '.join(signatures)}: {e}") from None
            if cache is not None:
                cache.store(cache_key, entry)
        return CompiledModule(entry, signatures, alignment)

    def __getitem__(self, name: str) -> Kernel:
        return self._kernels[name]

    def __iter__(self):
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)


JIT_OPTIONS = "O3 loop-vectorize slp-vectorize loop-unroll host-cpu jit"
"""What `optimize` and `host_target_machine` do, in the persistent cache key."""


def _machine_code(module: ModuleOp, alignment: int, target_machine: llvm_binding.TargetMachine) -> CacheEntry:
    """The object code of a kernel module after O3, with its optimized IR and the arguments each
    kernel writes (`written_arguments`, found on the llvm dialect), as the kernel cache holds them."""
    llvm_module, lowered = optimized_llvm_module(module, alignment, target_machine)
    written = {op.sym_name.data: sorted(written_arguments(op)) for op in lowered.ops if isinstance(op, llvm.FuncOp)}
    llvm_ir = str(llvm_module)  # before codegen, which rewrites the module (loop strength reduction, ...)
    return CacheEntry(target_machine.emit_object(llvm_module), {"llvm_ir": llvm_ir, "written": written})


_cache: dict[tuple[str, int], CompiledModule] = {}
_cache_lock = threading.Lock()


def compile_module(module: ModuleOp | str, alignment: int = 64) -> CompiledModule:
    """Compile every func.func of a kernel module (left unchanged), once per process per IR text.

    `alignment`: bytes of alignment promised for array arguments (and checked at each call); 0: none.
    """
    if isinstance(module, str):
        module = parse_text(module)
    key = (_cache_text(module), alignment)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = CompiledModule.of(module, alignment, kernel_key(key[0], f"{JIT_OPTIONS} align={alignment}"))
        return _cache[key]


def _cache_text(module: ModuleOp) -> str:
    """The module's text with each dense argument attribute (a kernel's constant arguments, up to
    megabytes of weights) printed as a digest of its type and bytes: printing the bytes as hex
    took as long as compiling (0.7 s of the GELU block's 1.3 s)."""
    digested = module.clone()
    for function in digested.ops:
        if isinstance(function, func.FuncOp) and function.arg_attrs is not None:
            function.arg_attrs = ArrayAttr([
                DictionaryAttr({name: _digest(value) for name, value in attrs.data.items()}) for attrs in function.arg_attrs
            ])
    return str(digested)


def _digest(attr: Attribute) -> Attribute:
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        return attr
    return StringAttr(f"{attr.type} sha256:{hashlib.sha256(attr.data.data).hexdigest()}")


def compile_kernel(module: ModuleOp | str, name: str | None = None, alignment: int = 64) -> Kernel:
    """The kernel `name` of a module (by default its only function), compiled."""
    kernels = compile_module(module, alignment)
    if name is None:
        if len(kernels) != 1:
            raise KeyError(f"the module has {len(kernels)} functions ({', '.join(kernels)}); name one")
        (name,) = kernels
    return kernels[name]


@dataclass(frozen=True)
class NativeCall:
    """A call of the C function at `address` (`void f(void *, ...)`): each argument is the address
    held in a table slot (an int) or a fixed address (a one-element tuple)."""

    address: int
    arguments: tuple[int | tuple[int], ...]


class CallSequence:
    """`void run(int64_t *table)`: the calls, in order, compiled into one native function."""

    def __init__(self, calls: Sequence[NativeCall]):
        self.llvm_ir = _call_sequence_ir(calls)
        self._engine = native_module(self.llvm_ir)
        self.function = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self._engine.get_function_address("run"))
        """Call with the table's address (an int)."""


def native_module(llvm_ir: str) -> llvm_binding.ExecutionEngine:
    """LLVM IR text compiled for the host CPU (without O3); keep the engine alive while its code runs."""
    llvm_module = llvm_binding.parse_assembly(llvm_ir)
    llvm_module.verify()
    engine = llvm_binding.create_mcjit_compiler(llvm_module, host_target_machine())
    engine.finalize_object()
    return engine


def _call_sequence_ir(calls: Sequence[NativeCall]) -> str:
    slots = sorted({a for call in calls for a in call.arguments if isinstance(a, int)})
    lines = ["define void @run(ptr %table) {"]
    for slot in slots:
        lines.append(f"  %slot{slot}.at = getelementptr inbounds i64, ptr %table, i64 {slot}")
        lines.append(f"  %slot{slot} = load ptr, ptr %slot{slot}.at, align 8")
    for call in calls:
        arguments = ", ".join(
            f"ptr %slot{a}" if isinstance(a, int) else f"ptr inttoptr (i64 {a[0]} to ptr)" for a in call.arguments
        )
        lines.append(f"  call void inttoptr (i64 {call.address} to ptr)({arguments})")
    lines += ["  ret void", "}"]
    return "\n".join(lines) + "\n"
