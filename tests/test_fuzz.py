"""CI entries of the fuzz suite (issue 15): the mutation fuzzer on 200 cases at a fixed seed, and
the differential tester on 60 modules. See docs/fuzzing.md.

Any failure fails the test: a traceback, an exception other than SystemExit, exit 0 with an error
message, a case over its time limit, a crash of the process, or a compiled result that differs
from the interpreter's.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fuzzing"))

import differential  # noqa: E402
import mlir_fuzzer  # noqa: E402

FUZZ_SEED = 0
FUZZ_CASES = 200
DIFFERENTIAL_SEED = 0
DIFFERENTIAL_MODULES = 60

def test_mutation_fuzzer_finds_no_defect(tmp_path):
    failures = mlir_fuzzer.fuzz(FUZZ_SEED, FUZZ_CASES, None, timeout=10, batch=10, reproducers=tmp_path)
    signatures = [mlir_fuzzer.failure_signature(failure) for _, failure in failures.values()]
    assert not signatures, f"defects (reproducers in {tmp_path}):\n" + "\n".join(signatures)


def test_differential_compile_matches_interpreter():
    failures = differential.run(DIFFERENTIAL_SEED, DIFFERENTIAL_MODULES)
    assert not failures, "\n\n".join(failures)
