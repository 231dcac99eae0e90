"""Parsing and verification of graph-dialect modules with source locations in errors."""

from __future__ import annotations

import os
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Location

from graphopt.dialects.graph import Graph
from graphopt.errors import GraphoptError


def make_context() -> Context:
    """A context with the graph dialect and all of xDSL's dialects (loaded lazily)."""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    ctx.register_dialect("graph", lambda: Graph)
    return ctx


class LocatedParser(Parser):
    """An xDSL parser that remembers where each operation started in the source."""

    def __init__(self, ctx: Context, text: str, name: str = "<input>"):
        super().__init__(ctx, text, name)
        self.locations: dict[Operation, Location] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        op = super().parse_operation()
        self.locations[op] = start.get_location()
        return op


def verify_located(module: Operation, locations: dict[Operation, Location]) -> None:
    """Verify op by op, innermost first; the first failure raises GraphoptError at its location."""
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            message = str(e) if str(e).startswith(op.name) else f"{op.name}: {e}"
            where = locations.get(op)
            prefix = f"{where}: " if where else f"in {op.name}: "
            raise GraphoptError(f"{prefix}error: {message}") from None


def parse_text(text: str, name: str = "<input>", ctx: Context | None = None) -> ModuleOp:
    """Parse and verify MLIR text; errors become one GraphoptError with file:line:col."""
    parser = LocatedParser(ctx or make_context(), text, name)
    try:
        module = parser.parse_module()
    except ParseError as e:
        raise GraphoptError(format_parse_error(e)) from None
    verify_located(module, parser.locations)
    return module


def format_parse_error(error: ParseError) -> str:
    """`file:line:col: error: message`, then the source line and a caret."""
    location = error.span.get_location()
    source_line = str(error).strip().splitlines()[1:2]
    caret = " " * (location.col - 1) + "^"
    return "\n".join([f"{location}: error: {error.msg}", *source_line, caret])


def parse(text_or_path: str | os.PathLike) -> ModuleOp:
    """Parse a module from MLIR text or from a path to a .mlir file, verified.

    Raises GraphoptError with `file:line:col` for malformed text, unknown ops, bad
    attributes and shape errors, and for a path that does not exist.
    """
    if isinstance(text_or_path, os.PathLike) or _looks_like_path(text_or_path):
        path = Path(text_or_path)
        if not path.is_file():
            raise GraphoptError(f"{path}: no such file")
        return parse_text(path.read_text(), str(path))
    return parse_text(text_or_path)


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and "{" not in text and (text.endswith(".mlir") or Path(text).is_file())
