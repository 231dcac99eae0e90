"""Mutation fuzzer for graph-opt and graph-run (issue 15).

Takes the .mlir files of examples/ and tests/filecheck/ (RUN/CHECK lines stripped, split on
`// -----`), mutates them, and runs each case in process through the tools' `main()` with a flag set
a user would pass. A case fails on a traceback (an exception other than SystemExit), on exit 0 with
"error" printed, on a run over the time limit, or on a crash of the process (an LLVM abort).

Cases run in batches in a forked child; the child reports each case as it finishes, so when it dies
the case it was running is named and the batch goes on in a fresh child.

    python tests/fuzzing/mlir_fuzzer.py --seed 123 --cases 20000
    python tests/fuzzing/mlir_fuzzer.py --long --seconds 3600

Written without hypothesis/atheris: the cases must run in a forked child that an LLVM abort may
kill, and the mutations are textual; a seeded random.Random keeps every case reproducible from
(seed, index), which is all the CI needs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FLAG_SETS = (
    ("graph-opt",),
    ("graph-opt", "--fuse"),
    ("graph-opt", "--fuse", "--partition"),
    ("graph-opt", "--fuse", "--partition=search=cost"),
    ("graph-opt", "-p", "fuse{mode=fallback}"),
    ("graph-opt", "--lower-to-linalg"),
    ("graph-opt", "--fuse", "--lower-to-llvm"),
    ("graph-run", "--check"),
)
EDGE_NUMBERS = ("0", "-1", "1", "2147483648", "18446744073709551616", "1e308", "-1e308",
                "0x7FC00000", "nan", "99999999999999999999999", "-0")
NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]?\d+)?")
SHAPE = re.compile(r"(?<=<)[0-9x?]+(?=x?[a-z])")
ATTRIBUTE = re.compile(r"\b(\w+)\s*=\s*([^,}\s]+)")  # \b: linear on a long hex constant, not quadratic
TOKEN = re.compile(r"%?[\w.]+|\S")


def seed_texts() -> list[str]:
    """The seed modules: each .mlir file's chunks, without RUN and CHECK lines."""
    texts = []
    for path in sorted([*ROOT.glob("examples/*.mlir"), *ROOT.glob("tests/filecheck/**/*.mlir")]):
        kept = [line for line in path.read_text().splitlines()
                if not re.match(r"\s*//\s*(RUN|CHECK)", line)]
        for chunk in "\n".join(kept).split("// -----"):
            if "func" in chunk or "graph." in chunk:
                texts.append(chunk.strip() + "\n")
    return texts


def mutate(text: str, rng: random.Random) -> str:
    """One to three random mutations of `text`."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng) or text
    return text


def _flip_char(text, rng):
    i = rng.randrange(len(text))
    return text[:i] + rng.choice("0123456789x<>(){}[]%:,=\"-. \nf") + text[i + 1:]


def _tokens_edit(text, rng):
    tokens = [m.span() for m in TOKEN.finditer(text)]
    if len(tokens) < 2:
        return None
    (a, b), (c, d) = sorted(rng.sample(tokens, 2))
    kind = rng.choice(("delete", "duplicate", "swap"))
    if kind == "delete":
        return text[:a] + text[b:]
    if kind == "duplicate":
        return text[:b] + " " + text[a:b] + text[b:]
    return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]


def _edge_number(text, rng):
    found = list(NUMBER.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    return text[:m.start()] + rng.choice(EDGE_NUMBERS) + text[m.end():]


def _shape(text, rng):
    found = list(SHAPE.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    dims = [rng.choice(("0", "1", "2", "3", "7", "65", "2147483648", "?")) for _ in range(rng.randint(0, 4))]
    return text[:m.start()] + "x".join(dims) + text[m.end():]


def _attribute(text, rng):
    found = list(ATTRIBUTE.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    value = rng.choice(("[]", "[0]", "[-1]", "[5, 5]", "[0, 0, 0, 0]", "-1", "0", "99", "true",
                        '"x"', "1.0 : f32", "array<i64: 1, 0>", "dense<1.0> : tensor<f32>"))
    return text[:m.start(2)] + value + text[m.end(2):]


def _lines(text, rng):
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    if rng.random() < 0.5:
        return "".join(lines[:i] + lines[i + 1:])
    return "".join(lines[:i + 1] + lines[i:])


def _truncate(text, rng):
    return text[:rng.randrange(len(text))]


MUTATIONS = (_flip_char, _tokens_edit, _tokens_edit, _edge_number, _edge_number, _shape, _shape,
             _attribute, _attribute, _lines, _truncate)


@dataclass
class Case:
    index: int
    text: str
    flags: tuple[str, ...]


def make_case(seed: int, index: int, seeds: list[str]) -> Case:
    rng = random.Random(f"{seed}:{index}")
    return Case(index, mutate(rng.choice(seeds), rng), rng.choice(FLAG_SETS))


class CaseTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise CaseTimeout()


def run_case(case: Case, timeout: int) -> str | None:
    """Run `case` in this process; None when it passes, else what went wrong."""
    from graphopt.tools import graph_opt, graph_run

    tool, *flags = case.flags
    main = graph_opt.main if tool == "graph-opt" else graph_run.main
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as file:
        file.write(case.text)
        file.flush()
        output, errors = io.StringIO(), io.StringIO()
        code = 0
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(timeout)
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(errors):
                main([file.name, *flags] if tool == "graph-run" else [*flags, file.name])
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except CaseTimeout:
            return f"timeout: over {timeout} s"
        except BaseException:
            return "traceback:\n" + traceback.format_exc()
        finally:
            signal.alarm(0)
    text = output.getvalue() + errors.getvalue()
    if "Traceback (most recent call last)" in text:
        return "traceback printed:\n" + text[-3000:]
    complaints = [line for line in errors.getvalue().splitlines()
                  if re.search(rf"\berror\b|^{tool}: ", line, re.IGNORECASE) and "warning:" not in line]
    if code == 0 and complaints:
        return "exit 0 with an error printed:\n" + "\n".join(complaints[-20:])
    return None


def _child(cases: list[Case], timeout: int, connection) -> None:
    for case in cases:
        connection.send((case.index, run_case(case, timeout)))
    connection.close()


def run_batch(cases: list[Case], timeout: int) -> dict[int, str]:
    """Run `cases` in forked children; the failures by case index, a crash named by its case."""
    context = multiprocessing.get_context("fork")
    failures: dict[int, str] = {}
    while cases:
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(cases, timeout, sender))
        child.start()
        sender.close()
        done = 0
        try:
            while done < len(cases):
                index, failure = receiver.recv()
                if failure:
                    failures[index] = failure
                done += 1
        except EOFError:
            child.join()
            failures[cases[done].index] = f"crash: the process died (exit code {child.exitcode})"
            done += 1
        child.join()
        cases = cases[done:]
    return failures


def write_reproducer(folder: Path, seed: int, case: Case, failure: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"seed{seed}_case{case.index}"
    stem.with_suffix(".mlir").write_text(case.text)
    tool, *flags = case.flags
    stem.with_suffix(".txt").write_text(
        f"command: {tool} {' '.join(flags)} {stem.with_suffix('.mlir').name}\n\n{failure}\n")


def failure_signature(failure: str) -> str:
    """One line naming a failure: its kind and the last line of its traceback."""
    lines = [line for line in failure.splitlines() if line.strip()]
    return lines[0].rstrip(":") + (" " + lines[-1].strip()[:160] if len(lines) > 1 else "")


def fuzz(seed: int, cases: int | None, seconds: float | None, timeout: int = 20,
         batch: int = 50, reproducers: Path | None = None, log=print) -> dict[int, tuple[Case, str]]:
    """Run cases from `seed` until `cases` ran or `seconds` passed; the failing cases by index."""
    seeds = seed_texts()
    start = time.monotonic()
    failures: dict[int, tuple[Case, str]] = {}
    index = 0
    while (cases is None or index < cases) and (seconds is None or time.monotonic() - start < seconds):
        count = batch if cases is None else min(batch, cases - index)
        batch_cases = [make_case(seed, i, seeds) for i in range(index, index + count)]
        for i, failure in run_batch(batch_cases, timeout).items():
            case = batch_cases[i - index]
            failures[i] = (case, failure)
            if reproducers:
                write_reproducer(reproducers, seed, case, failure)
            log(f"case {i} {' '.join(case.flags)}: {failure_signature(failure)}")
        index += count
    log(f"{index} cases in {time.monotonic() - start:.0f} s, {len(failures)} failures")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--long", action="store_true", help="run for --seconds, however many cases")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--timeout", type=int, default=20, help="seconds per case")
    parser.add_argument("--reproducers", type=Path, default=Path("fuzz-reproducers"))
    options = parser.parse_args(argv)
    cases = None if options.long else options.cases
    failures = fuzz(options.seed, cases, options.seconds, options.timeout, reproducers=options.reproducers)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
