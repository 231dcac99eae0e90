// What the fuse pass refuses: bad options give one message and a non-zero exit.

// RUN: not graph-opt %s -p 'fuse{patterns="nonesuch"}' 2>&1 | filecheck %s --check-prefix=PATTERNS
// RUN: not graph-opt %s -p 'fuse{mode="eager"}' 2>&1 | filecheck %s --check-prefix=MODE

// PATTERNS: fuse: unknown pattern set 'nonesuch' (known: default)
// PATTERNS-NOT: Traceback
// MODE: fuse: mode must be "compile" or "fallback", got "eager"
// MODE-NOT: Traceback

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}
