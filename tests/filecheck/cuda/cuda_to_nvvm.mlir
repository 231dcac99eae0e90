// RUN: graph-opt %s -p convert-cuda-to-nvvm | filecheck %s

// cuda ops become NVVM intrinsics; a kernel's memrefs are global pointers (address space 1)
// made generic at entry; shared memory is a slice of one address-space-3 global.
func.func @kernel(%x: memref<256xf32>) attributes {cuda.kernel} {
  %tid = cuda.thread_id x
  %bid = cuda.block_id y
  %dim = cuda.block_dim z
  %grid = cuda.grid_dim x
  %tile = cuda.shared_alloc : memref<256xf32, 3>
  %offset = arith.constant 16 : i32
  %v = arith.constant 1.0 : f32
  %s = cuda.shuffle_down %v, %offset : f32
  cuda.barrier
  func.return
}
// CHECK:       llvm.mlir.global internal @cuda_shared_memory(dense<0> : tensor<1024xi8>) {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<1024 x i8>
// CHECK:       llvm.func @kernel(%x: !llvm.ptr<1> {llvm.noalias}) attributes {cuda.kernel}
// CHECK:         llvm.call_intrinsic "llvm.nvvm.ptr.global.to.gen.p0.p1"(%{{.*}}) : (!llvm.ptr<1>) -> !llvm.ptr
// CHECK:         llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.tid.x"() : () -> i32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.ctaid.y"() : () -> i32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.ntid.z"() : () -> i32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.nctaid.x"() : () -> i32
// CHECK:         llvm.mlir.addressof @cuda_shared_memory : !llvm.ptr<3>
// CHECK:         llvm.call_intrinsic "llvm.nvvm.ptr.shared.to.gen.p0.p3"
// CHECK:         llvm.call_intrinsic "llvm.nvvm.shfl.sync.down.f32"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, f32, i32, i32) -> f32
// CHECK:         llvm.call_intrinsic "llvm.nvvm.barrier0"() : () -> ()
// CHECK:         llvm.return
