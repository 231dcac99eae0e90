// Every use must be dominated by its definition, and a graph.backend pin must be a string;
// each violation is one message at the op's file:line:col, and graph-opt fails.

// RUN: graph-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not graph-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// STDERR:      graph-opt: {{.*}}verify_ssa.mlir:[[# @LINE + 5]]:3: error: graph.neg: operand #0 is used before it is defined
// STDERR-NOT:  Traceback

func.func @use_before_def(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: verify_ssa.mlir:[[# @LINE + 1]]:3: error: graph.neg: operand #0 is used before it is defined
  %1 = graph.neg %0 : tensor<4xf32>
  %0 = graph.neg %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

func.func @self_use(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: verify_ssa.mlir:[[# @LINE + 1]]:3: error: graph.neg: operand #0 is a result of the op itself
  %0 = graph.neg %0 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @use_in_a_block_not_dominated(%c: i1, %x: tensor<4xf32>) -> tensor<4xf32> {
  cf.cond_br %c, ^left, ^right
^left:
  %0 = graph.neg %x : tensor<4xf32>
  cf.br ^join
^right:
  cf.br ^join
^join:
  // CHECK: verify_ssa.mlir:[[# @LINE + 1]]:3: error: func.return: operand #0 is defined in a block that does not dominate this use
  func.return %0 : tensor<4xf32>
}

// -----

// A use in a dominated block, or in a region nested in one, is valid: the module is printed.
// CHECK: func.func @dominated_uses
func.func @dominated_uses(%c: i1, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.neg %x : tensor<4xf32>
  cf.cond_br %c, ^left, ^join
^left:
  %1 = scf.execute_region -> tensor<4xf32> {
    %2 = graph.relu %0 : tensor<4xf32>
    scf.yield %2 : tensor<4xf32>
  }
  cf.br ^join
^join:
  func.return %0 : tensor<4xf32>
}

// -----

func.func @backend_pin_not_a_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: verify_ssa.mlir:[[# @LINE + 1]]:3: error: graph.neg: graph.backend must be a string naming a backend, got 1 : i32
  %0 = graph.neg %x {graph.backend = 1 : i32} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
