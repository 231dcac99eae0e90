"""graph-run: execute a function of a graph-dialect module on NumPy inputs and summarize its results.

    graph-run model.mlir                              # seeded random inputs (--seed 0)
    graph-run model.mlir --inputs x.npy w.npy         # one .npy per argument, in order
    graph-run model.mlir --inputs inputs.npz -o out.npz --entry main
    graph-run model.mlir --backend reference          # the interpreter instead of graphopt.compile
    graph-run model.mlir --check --report             # compiled vs interpreter, and where each step ran
    graph-run model.mlir --backend cuda --check       # on the GPU (cpu for what cuda refuses) vs interpreter
    graph-run model.mlir --no-fallback                # an error if a step would run on the interpreter
    graph-run model.mlir --print-llvm                 # the LLVM IR compile JIT-compiled (as graph-opt -t llvm)
    graph-run model.mlir --profile                    # each step's median time, GFLOP/s and GB/s
    graph-run model.mlir --save model.gx              # also save the compiled Executable (exe.save)
    graph-run model.gx --inputs x.npy                 # run a saved Executable (graphopt.load: no compile)

An .npz supplies each argument by its name (`%x` -> "x"), else by position (arr_0, arr_1, ...).
Random inputs are standard normal floats, small non-negative integers and fair booleans.
Each result prints as one line (index, shape, dtype, min/max/mean, first values); `-o`
saves them as result_0, result_1, ... `--profile` prints `Executable.profile`'s table
(PROFILE_REPEAT runs of each step) before the results. `--check` also prints each result's largest
difference from the interpreter's and fails (exit code 1) when one is out of tolerance.
A saved Executable (a zip that `--save` or `exe.save` wrote) runs its saved entry function
(`--entry` is not used), and `--check` and `--backend reference` interpret its placed module.
Bad input gives one message and exit code 1.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.traits import SymbolTable

import graphopt
from graphopt.backends.measure import random_arrays
from graphopt.errors import GraphoptError
from graphopt.parsing import decode_source, parse_text
from graphopt.runtime.saved import is_saved_file
from graphopt.tools.graph_opt import exit_on_error


SHOWN_VALUES = 6
"""How many leading values of each result are printed."""

PROFILE_REPEAT = 10
"""`--profile`: timed runs of each step (and of the whole call) whose medians it prints."""

COMPILED_BACKENDS = {"cpu": ("cpu",), "cuda": ("cuda", "cpu")}
"""`--backend`: the backends graphopt.compile is given, in priority order."""

CHECK_TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
"""`--check`: the contract's f32 tolerance for reductions and contractions, which graphs mix."""


def run_module(
    module: ModuleOp,
    inputs: Sequence[np.ndarray],
    entry: str,
    backend: str = "cpu",
    fuse: bool = True,
    report: IO[str] | None = None,
    llvm_ir: IO[str] | None = None,
    profile: IO[str] | None = None,
    fallback: str = "reference",
    executable: graphopt.Executable | None = None,
    save: str | None = None,
) -> tuple[np.ndarray, ...]:
    """Execute function `entry` of `module` on `inputs`: the one place that picks how to run it.

    `backend` "cpu" runs `executable` (a loaded one), else `graphopt.compile(module, fuse=fuse)`
    (its report goes to `report`, and it is saved to `save`); "cuda" compiles for the GPU first
    and cpu for the groups cuda refuses (ONNX Runtime's CUDA provider with its CPU fallback);
    "reference" runs the interpreter;
    `fallback` is compile's ("error": no step may run on the interpreter). The LLVM IR of the
    modules compile JIT-compiled goes to `llvm_ir`, the profile of the compiled module on
    `inputs` (`Executable.profile`) to `profile`.
    """
    if backend == "reference":
        return graphopt.interpret(module, *inputs, entry=entry)
    if executable is None:
        executable = graphopt.compile(module, backends=COMPILED_BACKENDS[backend], fuse=fuse, entry=entry,
                                      fallback=fallback)
    if save is not None:
        executable.save(save)
    if report is not None:
        print(executable.report(), file=report)
    if llvm_ir is not None:
        llvm_ir.write("".join(executable.llvm_ir()))
    results = executable(*inputs)
    if profile is not None:
        print(executable.profile(*inputs, repeat=PROFILE_REPEAT), file=profile)
    return results


def entry_function(module: ModuleOp, entry: str) -> FuncOp:
    func = SymbolTable.lookup_symbol(module, entry)
    if not isinstance(func, FuncOp):
        raise GraphoptError(f"no function @{entry} in the module")
    if func.is_declaration:
        raise GraphoptError(f"@{entry} is a declaration (a func.func without a body); graph-run needs a body")
    return func


def random_inputs(func: FuncOp, seed: int) -> list[np.ndarray]:
    """One random array per argument of `func`, of its shape and element type."""
    return random_arrays([arg.type for arg in func.args], seed)


def load_inputs(func: FuncOp, paths: Sequence[str]) -> list[np.ndarray]:
    """Arrays from one .npz (by argument name, else arr_<i>) or from .npy files in argument order."""
    if len(paths) == 1 and paths[0].endswith(".npz"):
        with load_array_file(paths[0]) as npz:
            try:
                return [npz_entry(npz, paths[0], i, arg.name_hint) for i, arg in enumerate(func.args)]
            except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error):
                raise GraphoptError(f"{paths[0]}: a corrupt .npz file (an array does not read)") from None
    return [load_array_file(path) for path in paths]


def npz_entry(npz: np.lib.npyio.NpzFile, path: str, index: int, name: str | None) -> np.ndarray:
    for key in (name, f"arr_{index}"):
        if key in npz.files:
            return npz[key]
    wanted = f"'{name}' or 'arr_{index}'" if name else f"'arr_{index}'"
    raise GraphoptError(f"{path}: no array {wanted} for argument #{index} (has {', '.join(npz.files) or 'none'})")


def load_array_file(path: str) -> np.ndarray | np.lib.npyio.NpzFile:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile):
        raise GraphoptError(f"{path}: not a NumPy .npy or .npz file") from None


def result_name(index: int) -> str:
    return f"result_{index}"


def summarize(index: int, result: np.ndarray) -> str:
    """`result_0: shape (4, 8) float32  min ... max ... mean ...  [v0, v1, ...]`."""
    line = f"{result_name(index)}: shape {result.shape} {result.dtype}"
    if result.size == 0:
        return line + "  (empty)"
    values = result.ravel()
    shown = ", ".join(str(v) for v in values[:SHOWN_VALUES]) + (", ..." if values.size > SHOWN_VALUES else "")
    as_float = values.astype(np.float64)
    stats = f"min {as_float.min():.6g} max {as_float.max():.6g} mean {as_float.mean():.6g}"
    return f"{line}  {stats}  [{shown}]"


def differences(actual: np.ndarray, expected: np.ndarray) -> tuple[float, float, bool]:
    """Largest absolute and relative difference, and whether all elements are within CHECK_TOLERANCE.

    Equal values (infinities, NaN against NaN) differ by 0; NaN against a number by NaN.
    """
    if actual.shape != expected.shape:
        return np.inf, np.inf, False
    actual, expected = actual.astype(np.float64), expected.astype(np.float64)
    if actual.size == 0:
        return 0.0, 0.0, True
    with np.errstate(all="ignore"):
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        absolute = np.where(same, 0.0, np.abs(actual - expected))
        relative = np.where(same, 0.0, absolute / np.abs(expected))
    close = np.isclose(actual, expected, equal_nan=True, **CHECK_TOLERANCE)
    return float(absolute.max()), float(relative.max()), bool(close.all())


def check_against_reference(results: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> list[str]:
    """Print each result's largest differences from `expected`; the names of those out of tolerance."""
    mismatched = []
    for i, (actual, reference) in enumerate(zip(results, expected, strict=True)):
        max_abs, max_rel, ok = differences(actual, reference)
        print(f"{result_name(i)}: max abs diff {max_abs:.3g}  max rel diff {max_rel:.3g}  {'ok' if ok else 'MISMATCH'}")
        if not ok:
            mismatched.append(result_name(i))
    return mismatched


def parse_arguments(args: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="graph-run", description=__doc__.splitlines()[0])
    parser.add_argument("input_file", help="the .mlir module, or a saved Executable (--save, exe.save)")
    parser.add_argument("--entry", default="main", help="function to run (default: main)")
    parser.add_argument("--inputs", nargs="+", metavar="FILE", help="one .npz, or one .npy per argument")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    parser.add_argument("-o", "--output-file", help="save the results to this .npz")
    parser.add_argument(
        "--backend", choices=[*COMPILED_BACKENDS, "reference"], default="cpu",
        help="cpu: graphopt.compile (default); cuda: on the GPU, cpu for the groups cuda refuses; "
        "reference: the interpreter",
    )
    parser.add_argument(
        "--check", action="store_true",
        help="run compiled (cpu, or --backend cuda) and on the interpreter and compare every result "
        f"(rtol {CHECK_TOLERANCE['rtol']:g}, atol {CHECK_TOLERANCE['atol']:g}); exit code 1 on a mismatch",
    )
    parser.add_argument("--no-fuse", action="store_true", help="compile one kernel per op")
    parser.add_argument(
        "--no-fallback", action="store_true",
        help="fail, naming the op and each backend's refusal, if a step would run on the reference interpreter",
    )
    parser.add_argument("--save", metavar="FILE", help="save the compiled Executable to FILE (graph-run FILE runs it)")
    parser.add_argument("--report", action="store_true", help="print the compile report: where each step runs and why")
    parser.add_argument(
        "--profile", action="store_true",
        help=f"print each step's ops, median time (of {PROFILE_REPEAT} runs), share, GFLOP/s and GB/s",
    )
    parser.add_argument(
        "--print-llvm", action="store_true",
        help="print the LLVM IR that compile JIT-compiled (what graph-opt --fuse --partition=backends=cpu -t llvm prints), "
        "instead of the results",
    )
    options = parser.parse_args(args)
    if options.check and options.backend == "reference":
        parser.error("--check compares a compiled module with the interpreter; it needs the cpu or cuda backend")
    if options.report and options.backend == "reference":
        parser.error("--report describes a compiled module; it needs the cpu or cuda backend")
    if options.profile and options.backend == "reference":
        parser.error("--profile times a compiled module; it needs the cpu or cuda backend")
    if options.no_fallback and options.backend == "reference":
        parser.error("--no-fallback refuses the reference interpreter; it needs the cpu or cuda backend")
    if options.print_llvm and (options.backend != "cpu" or options.check):
        parser.error("--print-llvm shows a compiled module; it needs the cpu backend, without --check")
    if options.save and (options.backend != "cpu" or options.check):
        parser.error("--save saves a compiled module; it needs the cpu backend, without --check")
    return options


def main(args: Sequence[str] | None = None) -> None:
    options = parse_arguments(args)
    with exit_on_error("graph-run"):
        executable = None
        if is_saved_file(options.input_file):
            executable = graphopt.load(options.input_file)
            module, entry = executable.module, executable.function.sym_name.data
        else:
            module = parse_text(decode_source(Path(options.input_file).read_bytes(), options.input_file), options.input_file)
            entry = options.entry
        func = entry_function(module, entry)
        inputs = load_inputs(func, options.inputs) if options.inputs else random_inputs(func, options.seed)
        report = sys.stdout if options.report else None
        llvm_ir = sys.stdout if options.print_llvm else None
        profile = sys.stdout if options.profile else None
        results = run_module(module, inputs, entry, options.backend, not options.no_fuse, report, llvm_ir,
                             profile, "error" if options.no_fallback else "reference", executable, options.save)
        if options.print_llvm:
            return
        for i, result in enumerate(results):
            print(summarize(i, result))
        if options.output_file:
            np.savez(options.output_file, **{result_name(i): r for i, r in enumerate(results)})
        if options.check:
            mismatched = check_against_reference(results, run_module(module, inputs, entry, "reference"))
            if mismatched:
                raise GraphoptError(f"out of tolerance against the reference interpreter: {', '.join(mismatched)}")


if __name__ == "__main__":
    main()
