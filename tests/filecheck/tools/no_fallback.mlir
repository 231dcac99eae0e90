// graph-run --no-fallback (graphopt.compile(..., fallback="error")): a step that would run on the
// reference interpreter is an error naming it, its ops and why each backend refused it; without
// the flag the same module runs (its cast from an f16 argument on the reference).

// RUN: not graph-run %s --no-fallback 2>&1 | filecheck %s
// RUN: graph-run %s --report | filecheck %s --check-prefix=REPORT
// RUN: not graph-run %s --no-fallback --backend reference 2>&1 | filecheck %s --check-prefix=USAGE

// CHECK:      graph-run: error: fallback="error": 1 step(s) of @main would run on the reference interpreter:
// CHECK-NEXT:   cast_0 (cast): cpu: kernels cannot take or return f16
// CHECK-NOT:  Traceback

// REPORT:     cast_0 {{ *}} reference  (cpu: kernels cannot take or return f16)
// REPORT:     result_0: shape (4,) float32

// USAGE:      --no-fallback refuses the reference interpreter; it needs the cpu or cuda backend
func.func @main(%x: tensor<4xf16>) -> tensor<4xf32> {
  %0 = graph.cast %x : (tensor<4xf16>) -> tensor<4xf32>
  %1 = graph.relu %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
