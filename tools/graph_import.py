"""graph-import: convert an ONNX model (opsets 9 to 23) into a graph-dialect module.

    graph-import model.onnx                            # print the module
    graph-import model.onnx -o model.mlir
    graph-import model.onnx --shape input=1,3,224,224  # sizes of an input's dynamic dimensions

Bad input (missing file, unsupported op or attribute, a dynamic dimension without --shape)
gives one `graph-import: error: ...` message on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import graphopt
from graphopt.tools.graph_opt import exit_on_error


def shape_option(text: str) -> tuple[str, tuple[int, ...]]:
    """`name=1,3,224,224` -> ("name", (1, 3, 224, 224)); from_onnx checks the sizes (positive, not too large)."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        shape = None
    if not name or shape is None:
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,... with integer sizes, got {text!r}")
    return name, shape


def parse_arguments(args: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="graph-import", description=__doc__.splitlines()[0])
    parser.add_argument("input_file", help="the .onnx model")
    parser.add_argument("-o", "--output-file", help="write the module here (default: stdout)")
    parser.add_argument(
        "--shape", type=shape_option, action="append", default=[], metavar="NAME=D0,D1,...",
        help="the full shape of input NAME, for inputs with dynamic dimensions (repeatable)",
    )
    return parser.parse_args(args)


def main(args: Sequence[str] | None = None) -> None:
    options = parse_arguments(args)
    with exit_on_error("graph-import"):
        text = str(graphopt.from_onnx(options.input_file, shapes=dict(options.shape))) + "\n"
        if options.output_file:
            Path(options.output_file).write_text(text)
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
