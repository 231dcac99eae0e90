// One case per verifier error of the cuda dialect, at the op's file:line:col.

// RUN: graph-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @host_code() {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.thread_id: must be inside a func.func marked cuda.kernel (device code)
  %t = cuda.thread_id x
  func.return
}

// -----

func.func @bad_dimension() attributes {cuda.kernel} {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.block_id: dimension must be x, y or z, not 'w'
  %b = cuda.block_id w
  func.return
}

// -----

func.func @global_memory_is_not_shared() attributes {cuda.kernel} {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.shared_alloc: memref<16xf32> must be in memory space 3 (shared)
  %s = cuda.shared_alloc : memref<16xf32>
  func.return
}

// -----

func.func @wide_shuffle(%v: f64, %o: i32) attributes {cuda.kernel} {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.shuffle_down: shuffles move 32-bit values (f32 or i32), not f64
  %s = cuda.shuffle_down %v, %o : f64
  func.return
}

// -----

func.func @k(%x: memref<8xf32>) attributes {cuda.kernel} {
  func.return
}
func.func @too_many_threads(%x: memref<8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.launch: a block has at most 1024 threads, got 2048
  cuda.launch @k grid [1, 1, 1] block [32, 64, 1] (%x) : memref<8xf32>
  func.return
}

// -----

func.func @k(%x: memref<8xf32>) attributes {cuda.kernel} {
  func.return
}
func.func @wrong_arguments(%x: memref<4xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.launch: @k takes (memref<8xf32>), given (memref<4xf32>)
  cuda.launch @k grid [1, 1, 1] block [32, 1, 1] (%x) : memref<4xf32>
  func.return
}

// -----

func.func @not_a_kernel(%x: memref<8xf32>) {
  func.return
}
func.func @launches_a_host_function(%x: memref<8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.launch: @not_a_kernel is not a func.func marked cuda.kernel
  cuda.launch @not_a_kernel grid [1, 1, 1] block [32, 1, 1] (%x) : memref<8xf32>
  func.return
}

// -----

func.func @k(%x: memref<8xf32>) attributes {cuda.kernel} {
  func.return
}
func.func @two_sizes(%x: memref<8xf32>) {
  // CHECK: diagnostics.mlir:[[# @LINE + 1]]:3: error: cuda.launch: grid must be three positive sizes (x, y, z), got [1, 1]
  cuda.launch @k grid [1, 1] block [32, 1, 1] (%x) : memref<8xf32>
  func.return
}
