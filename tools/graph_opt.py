"""graph-opt: parse, verify, transform and print graph-dialect IR (xdsl-opt with graphopt's dialect and passes).

    graph-opt in.mlir                          # verify and print
    graph-opt in.mlir -p 'cse,dce' -o out.mlir
    cat in.mlir | graph-opt - --print-op-generic
    graph-opt tests.mlir --split-input-file --verify-diagnostics

    graph-opt in.mlir --fuse --lower-to-linalg     # the kernels (func + linalg on memrefs)
    graph-opt in.mlir --fuse --lower-to-llvm       # the kernels in the llvm dialect
    graph-opt in.mlir --fuse -t llvm               # the kernels' LLVM IR after O3 for this CPU
    graph-opt in.mlir --canonicalize --cse --fuse --partition=backends=cpu -t llvm   # what compile JIT-compiles (1 thread)
    graph-opt in.mlir --fuse --partition -t dot -o groups.svg   # groups coloured by backend (Graphviz)
    graph-opt in.mlir --fuse --partition=backends=cuda -t ptx   # the CUDA kernels' PTX (-t 'ptx{arch=sm_90}')

Every pass in `PASS_FLAGS` also has a flag that runs it before the `-p` pipeline:
`--NAME` is `-p NAME`, `--NAME=opt=val,opt2=val` is `-p 'NAME{opt=val opt2=val}'`.
A flag of `STAGE_FLAGS` ends the pipeline (after `-p`) at that lowering stage. The stages,
`-t llvm` and `-t ptx` run the pipelines that compile runs, declared once in
`lowering/pipelines.py`.
Bad input (malformed text, failed verification, unknown pass, missing file) gives one
`graph-opt: file:line:col: error: ...` message on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import subprocess
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.passes import PassPipeline
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from graphopt.dialects import graph
from graphopt.dialects.cuda import Cuda
from graphopt.dialects.graph import Graph
from graphopt.errors import GraphoptError
from graphopt.lowering import get_all_passes as get_lowering_passes
from graphopt.lowering.pipelines import CPU, CUDA
from graphopt.parsing import LocatedParser, decode_source, format_parse_error, verify_located
from graphopt.runtime.arrays import ALIGNMENT
from graphopt.transforms import get_all_passes
from graphopt.transforms.partition import Dataflow, PartitionPass

PASS_FLAGS: dict[str, str] = {
    "canonicalize": ("fold graph-level patterns (a zero pad into its conv, pow by 1-4 into products, a leading"
                     " unit batch dim out of a function) and xDSL's canonicalizations"),
    "cse": "merge equal ops on the same operands, equal constants first (xDSL's common subexpression elimination)",
    "fuse": "group ops into graph.fused regions (options as for -p fuse{...})",
    "partition": "put every group on a backend (options as for -p partition{...}, e.g. backends=cpu,blas,search=cost)",
}
"""Passes that get a shorthand flag `--NAME[=opt=val,...]`, by pass name, with the flag's help."""

STAGE_FLAGS: dict[str, tuple[str, str]] = {
    "lower-to-linalg": (
        CPU.spec("to-kernels", "weights", "kernels"),
        "stop at the kernels: one func.func on memrefs (linalg) per group, as compile builds them",
    ),
    "lower-to-llvm": (
        CPU.spec("to-kernels", "weights", "kernels", "llvm", alignment=ALIGNMENT),
        "stop at the kernels in the llvm dialect, as compile lowers them",
    ),
}
"""Flags `--NAME` that end the pipeline at a lowering stage of the cpu backend's pipeline
(`lowering/pipelines.py`): flag name -> (pipeline, help)."""

OPTION_SEPARATOR = re.compile(r",(?=[\w-]+=)")

TOOL_ERRORS = (GraphoptError, DiagnosticException, ParseError, ArgSpecParseError, ValueError, OSError)
"""What bad input raises; a tool reports it in one message instead of a traceback."""


@contextmanager
def exit_on_error(tool: str) -> Iterator[None]:
    """Turn bad input raised in the block into `<tool>: <message>` on stderr and exit code 1,
    and warnings into `<tool>: warning: <message>` lines."""

    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{tool}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        try:
            yield
        except BrokenPipeError:  # the reader of our output stopped (`graph-opt x.mlir | head`)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            sys.exit(1)
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


def attached_pass_options(args: Sequence[str]) -> list[str]:
    """`args` with each bare pass flag `--NAME` written `--NAME=`: a pass flag takes options only
    attached (`--partition=backends=cpu`), so `graph-opt --fuse --partition in.mlir` reads in.mlir."""
    flags = {f"--{name}" for name in PASS_FLAGS}
    return [f"{arg}=" if arg in flags else arg for arg in args]


def registry_partition_pass() -> type[PartitionPass]:
    """The partition pass over the registered backends, imported when a pipeline asks for it:
    graph-opt starts without the backends, the runtime and the JIT (0.6 s instead of 1.1 s)."""
    from graphopt.backends.targets import RegistryPartitionPass

    return RegistryPartitionPass


def with_partition_report(pipeline: PassPipeline) -> PassPipeline:
    """`pipeline` with `report=true` on its partition passes, or with `partition{report=true}`
    after its graph-level passes when it has none."""
    passes = [dataclasses.replace(p, report=True) if isinstance(p, PartitionPass) else p for p in pipeline.passes]
    if not any(isinstance(p, PartitionPass) for p in passes):
        graph_level = [i for i, p in enumerate(passes) if p.name in get_all_passes()]
        passes.insert(graph_level[-1] + 1 if graph_level else 0, registry_partition_pass()(report=True))
    return dataclasses.replace(pipeline, passes=tuple(passes))


class PrependPass(argparse.Action):
    """`--NAME[=options]`: queue pass NAME, in command-line order, before the `-p` pipeline."""

    def __call__(self, parser, namespace, values, option_string=None):
        spec = shorthand_pass_spec(self.dest, values or "")
        namespace.shorthand_passes = [*namespace.shorthand_passes, spec]


@dataclass(frozen=True)
class OptimizedLLVMTarget(Target):
    """`-t llvm`: the LLVM IR of the module's kernels after O3 for this CPU, as graphopt.compile runs them.

    A module still at graph level is lowered to kernels first (the CPU pipeline's `to-kernels`
    and `kernels` stages), then all of it through the `llvm` stage (`lowering/pipelines.py`).
    """

    name = "llvm"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from graphopt.lowering.llvm_module import optimized_llvm_ir  # llvmlite, at use: graph-opt's start

        if any(op.dialect_name() == Graph.name for op in module.walk()):
            CPU.apply(module, "to-kernels", "weights", "kernels")
        output.write(optimized_llvm_ir(module, ALIGNMENT))


@dataclass(frozen=True)
class PTXTarget(Target):
    """`-t ptx` (or `-t 'ptx{arch=sm_90}'`): the PTX of the module's CUDA kernels.

    A module still at graph level is lowered to kernels first (the CUDA pipeline's `to-kernels`
    stage, convert-graph-to-cuda: every compile-mode group and single op of @main not
    partitioned to another backend), then its kernels through the `nvvm` stage.
    """

    name = "ptx"

    arch: str | None = None
    """None: `lowering.ptx.DEFAULT_ARCH`."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from graphopt.lowering.ptx import DEFAULT_ARCH, ptx  # llvmlite, at use: graph-opt's start

        if any(op.dialect_name() == Graph.name for op in module.walk()):
            CUDA.apply(module, "to-kernels")
        output.write(ptx(module, self.arch or DEFAULT_ARCH))


BACKEND_COLOURS: dict[str | None, str] = {
    "cpu": "#cfe2ff", "blas": "#d1e7dd", "cuda": "#fff3cd", "reference": "#e2e3e5", None: "#ffffff",
}
"""Fill colour of a group's cluster by its backend (None: not placed); other backends get OTHER_COLOUR."""
OTHER_COLOUR = "#f8d7da"
PICTURE_FORMATS = (".svg", ".png")
"""Output suffixes that `-t dot` renders with Graphviz's `dot` instead of writing DOT text."""


def module_to_dot(module: ModuleOp) -> str:
    """Graphviz DOT of each function: ops as boxes, every group a cluster coloured by its
    backend, arguments and results as ellipses, dataflow edges (seen through the groups)."""
    lines = ["digraph graphopt {", '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="monospace"];']
    for function in (f for f in module.walk() if isinstance(f, FuncOp) and f.body.blocks):
        name = function.sym_name.data
        flow = Dataflow(function.body.block)
        ids = {v: f"{name}_arg{i}" for i, v in enumerate(function.body.block.args)}
        ids.update((r, f"{name}_op{i}") for i, op in enumerate(flow.nodes) for r in op.results)
        lines.append(f'  subgraph "cluster_{name}" {{ label="@{name}";')
        lines += [f'    {ids[v]} [shape=ellipse, label="%{v.name_hint or i}"];' for i, v in enumerate(function.body.block.args)]
        for unit in flow.units:
            box = [f'      {name}_op{i} [label="{flow.nodes[i].name.removeprefix("graph.")}"];' for i in sorted(unit.nodes)]
            if isinstance(unit.top, graph.FusedOp):
                backend = unit.top.backend.data if unit.top.backend else None
                label = unit.top.group_name.data + (f" ({backend})" if backend else "")
                colour = BACKEND_COLOURS.get(backend, OTHER_COLOUR)
                cluster = f"cluster_{name}_{unit.top.group_name.data}"
                box = [f'    subgraph "{cluster}" {{ label="{label}"; style=filled; fillcolor="{colour}";', *box, "    }"]
            lines += box
        lines.append(f'    {name}_return [shape=ellipse, label="return"];')
        lines.append("  }")
        for i, op in enumerate(flow.nodes):
            sources = dict.fromkeys(ids[v] for v in map(flow.flat, op.operands) if v in ids)
            lines += [f"  {source} -> {name}_op{i};" for source in sources]
        lines += [f"  {ids[v]} -> {name}_return;" for v in dict.fromkeys(flow.returned) if v in ids]
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GraphvizTarget(Target):
    """`-t dot`: the module as a Graphviz graph (`module_to_dot`); `-o out.svg` or `out.png`
    renders it with Graphviz's `dot`, which must then be on PATH."""

    name = "dot"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(module_to_dot(module))


def render_picture(path: str) -> None:
    """Replace the DOT text in `path` (.svg or .png) by the picture Graphviz draws of it."""
    dot = Path(path).read_text()
    subprocess.run([shutil.which("dot"), f"-T{Path(path).suffix[1:]}", "-o", path], input=dot.encode(), check=True)


class GraphOptMain(xDSLOptMain):
    """xdsl-opt with the graph dialect, graphopt's passes and located verifier errors."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description=__doc__.splitlines()[0], args=attached_pass_options(sys.argv[1:] if args is None else args))
        if self.args.input_file == "-":
            self.args.input_file = None

    def register_all_dialects(self):
        super().register_all_dialects()
        self.ctx.register_dialect(Graph.name, lambda: Graph)
        self.ctx.register_dialect(Cuda.name, lambda: Cuda)

    def register_all_passes(self):
        super().register_all_passes()
        passes = {**get_all_passes(), **get_lowering_passes(), PartitionPass.name: registry_partition_pass}
        for pass_name, pass_factory in passes.items():
            self.register_pass(pass_name, pass_factory)

    def register_all_targets(self):
        """xDSL's targets, but `llvm` is graphopt's (xDSL's prints llvm-dialect modules unoptimized)."""
        self.available_targets[OptimizedLLVMTarget.name] = lambda: OptimizedLLVMTarget
        self.available_targets[GraphvizTarget.name] = lambda: GraphvizTarget
        self.available_targets[PTXTarget.name] = lambda: PTXTarget
        super().register_all_targets()

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.set_defaults(shorthand_passes=[])
        for pass_name, help_text in PASS_FLAGS.items():
            arg_parser.add_argument(
                f"--{pass_name}", dest=pass_name, nargs="?", metavar="OPT=VAL,...", action=PrependPass, help=help_text
            )
        arg_parser.add_argument(
            "--partition-report", action="store_true",
            help="print the partition table on stderr (runs partition with its defaults if no pass does)",
        )
        stages = arg_parser.add_mutually_exclusive_group()
        for flag, (pipeline, help_text) in STAGE_FLAGS.items():
            stages.add_argument(f"--{flag}", dest="stage", action="store_const", const=pipeline, help=help_text)

    def setup_pipeline(self):
        specs = [*self.args.shorthand_passes, self.args.passes, self.args.stage]
        self.args.passes = ",".join(spec for spec in specs if spec)
        super().setup_pipeline()
        if self.args.partition_report:
            self.pipeline = with_partition_report(self.pipeline)

    def run(self):
        """As xdsl-opt; `-t dot -o out.svg` (or .png) then renders the DOT text written."""
        picture = self.args.target == GraphvizTarget.name and Path(self.args.output_file or "").suffix in PICTURE_FORMATS
        if picture and shutil.which("dot") is None:
            raise GraphoptError(f"rendering {self.args.output_file} needs Graphviz's `dot` on PATH; write a .dot file instead")
        super().run()
        if picture:
            render_picture(self.args.output_file)

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """Parse with source locations and verify op by op, so verifier errors name file:line:col."""
        text = decode_source(chunk.read(), self.get_input_name(), start_offset)
        parser = LocatedParser(self.ctx, text, self.get_input_name())
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
