"""graphopt's command-line tools: graph-opt, graph-run and graph-import (console scripts).

A tool mixes graphopt's kernel threads with OpenBLAS's (the blas backend, NumPy). By default an
OpenBLAS worker spins for about 2^28 cycles after each GEMM, holding a core that a row chunk of
the next cpu kernel needs: at 2 threads a cpu GEMM measured after a blas one took 6.1 ms instead
of 3.3 ms, and the cost search chose blas for it. 2^4 cycles puts the workers to sleep at once.
OpenBLAS reads the setting when it loads, so it is made here, before any tool imports NumPy,
and only as a default. A program using the Python API sets OPENBLAS_THREAD_TIMEOUT=4 itself,
before importing NumPy (docs/cpu-codegen.md).
"""

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
