"""graph-opt: parse, verify, transform and print graph-dialect IR (xdsl-opt with graphopt's dialect and passes).

    graph-opt in.mlir                          # verify and print
    graph-opt in.mlir -p 'cse,dce' -o out.mlir
    cat in.mlir | graph-opt - --print-op-generic
    graph-opt tests.mlir --split-input-file --verify-diagnostics

    graph-opt in.mlir --fuse --lower-to-linalg     # the kernels (func + linalg on memrefs)
    graph-opt in.mlir --fuse --lower-to-llvm       # the kernels in the llvm dialect
    graph-opt in.mlir --fuse -t llvm               # the kernels' LLVM IR after O3 for this CPU

Every pass in `PASS_FLAGS` also has a flag that runs it before the `-p` pipeline:
`--NAME` is `-p NAME`, `--NAME=opt=val,opt2=val` is `-p 'NAME{opt=val opt2=val}'`.
A flag of `STAGE_FLAGS` ends the pipeline (after `-p`) at that lowering stage.
Bad input (malformed text, failed verification, unknown pass, missing file) gives one
`graph-opt: file:line:col: error: ...` message on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from graphopt.compiler import ALIGNMENT
from graphopt.dialects.graph import Graph
from graphopt.errors import GraphoptError
from graphopt.lowering import get_all_passes as get_lowering_passes
from graphopt.lowering.graph_to_linalg import ConvertGraphToLinalgPass
from graphopt.lowering.jit import optimized_llvm_ir
from graphopt.lowering.to_llvm import to_llvm_passes
from graphopt.parsing import LocatedParser, format_parse_error, verify_located
from graphopt.transforms import get_all_passes

PASS_FLAGS: dict[str, str] = {"fuse": "group ops into graph.fused regions (options as for -p fuse{...})"}
"""Passes that get a shorthand flag `--NAME[=opt=val,...]`, by pass name, with the flag's help."""

TO_KERNELS = ConvertGraphToLinalgPass.name
TO_LLVM = ",".join(str(p.pipeline_pass_spec()) for p in to_llvm_passes(ALIGNMENT))

STAGE_FLAGS: dict[str, tuple[str, str]] = {
    "lower-to-linalg": (TO_KERNELS, "stop at the kernels: one func.func on memrefs (linalg) per group"),
    "lower-to-llvm": (f"{TO_KERNELS},{TO_LLVM}", "stop at the kernels in the llvm dialect"),
}
"""Flags `--NAME` that end the pipeline at a lowering stage: flag name -> (pipeline, help)."""

OPTION_SEPARATOR = re.compile(r",(?=[\w-]+=)")

TOOL_ERRORS = (GraphoptError, DiagnosticException, ParseError, ValueError, OSError)
"""What bad input raises; a tool reports it in one message instead of a traceback."""


@contextmanager
def exit_on_error(tool: str) -> Iterator[None]:
    """Turn bad input raised in the block into `<tool>: <message>` on stderr and exit code 1."""
    try:
        yield
    except TOOL_ERRORS as e:
        print(f"{tool}: {describe_error(e)}", file=sys.stderr)
        sys.exit(1)


def describe_error(error: Exception) -> str:
    """`file:line:col: error: ...` where the error has a location, else `error: ...`."""
    if isinstance(error, ParseError):
        return format_parse_error(error)
    if isinstance(error, OSError) and error.filename is not None:
        return f"error: {error.filename}: {error.strerror}"
    message = str(error)
    return message if "error: " in message.partition("\n")[0] else f"error: {message}"


def shorthand_pass_spec(pass_name: str, options: str) -> str:
    """`fuse` and `a=1,b=2,3` -> `fuse{a=1 b=2,3}` (a comma starts a new option only before `key=`)."""
    if not options:
        return pass_name
    return pass_name + "{" + " ".join(OPTION_SEPARATOR.split(options)) + "}"


class PrependPass(argparse.Action):
    """`--NAME[=options]`: queue pass NAME, in command-line order, before the `-p` pipeline."""

    def __call__(self, parser, namespace, values, option_string=None):
        spec = shorthand_pass_spec(self.dest, values or "")
        namespace.shorthand_passes = [*namespace.shorthand_passes, spec]


@dataclass(frozen=True)
class OptimizedLLVMTarget(Target):
    """`-t llvm`: the LLVM IR of the module's kernels after O3 for this CPU, as graphopt.compile runs them.

    A module still at graph level is lowered to kernels first (convert-graph-to-linalg).
    """

    name = "llvm"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        if any(op.dialect_name() == Graph.name for op in module.walk()):
            ConvertGraphToLinalgPass().apply(ctx, module)
        output.write(optimized_llvm_ir(module, ALIGNMENT))


class GraphOptMain(xDSLOptMain):
    """xdsl-opt with the graph dialect, graphopt's passes and located verifier errors."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description=__doc__.splitlines()[0], args=args)
        if self.args.input_file == "-":
            self.args.input_file = None

    def register_all_dialects(self):
        super().register_all_dialects()
        self.ctx.register_dialect(Graph.name, lambda: Graph)

    def register_all_passes(self):
        super().register_all_passes()
        for pass_name, pass_factory in {**get_all_passes(), **get_lowering_passes()}.items():
            self.register_pass(pass_name, pass_factory)

    def register_all_targets(self):
        """xDSL's targets, but `llvm` is graphopt's (xDSL's prints llvm-dialect modules unoptimized)."""
        self.available_targets[OptimizedLLVMTarget.name] = lambda: OptimizedLLVMTarget
        super().register_all_targets()

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.set_defaults(shorthand_passes=[])
        for pass_name, help_text in PASS_FLAGS.items():
            arg_parser.add_argument(
                f"--{pass_name}", dest=pass_name, nargs="?", metavar="OPT=VAL,...", action=PrependPass, help=help_text
            )
        stages = arg_parser.add_mutually_exclusive_group()
        for flag, (pipeline, help_text) in STAGE_FLAGS.items():
            stages.add_argument(f"--{flag}", dest="stage", action="store_const", const=pipeline, help=help_text)

    def setup_pipeline(self):
        specs = [*self.args.shorthand_passes, self.args.passes, self.args.stage]
        self.args.passes = ",".join(spec for spec in specs if spec)
        super().setup_pipeline()

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """Parse with source locations and verify op by op, so verifier errors name file:line:col."""
        parser = LocatedParser(self.ctx, chunk.read().decode(), self.get_input_name())
        module = parser.parse_module(not self.args.no_implicit_module)
        if not self.args.disable_verify:
            locations = {op: loc._replace(line=loc.line + start_offset) for op, loc in parser.locations.items()}
            verify_located(module, locations)
        return module


def main(args: Sequence[str] | None = None) -> None:
    with exit_on_error("graph-opt"):
        GraphOptMain(args).run()


if __name__ == "__main__":
    main()
