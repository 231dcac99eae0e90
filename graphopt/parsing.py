"""Parsing and verification of graph-dialect modules with source locations in errors."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    ComplexType,
    IndexType,
    IntegerType,
    ModuleOp,
    RankedStructure,
    StringAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.irdl import base
from xdsl.irdl.dominance import DominanceInfo
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Input, Location, Span
from xdsl.utils.mlir_lexer import MLIRLexer

from graphopt.dialects.attributes import BACKEND_PIN
from graphopt.dialects.graph import Graph
from graphopt.errors import GraphoptError

MAX_CONSTANT_ELEMENTS = 2**28
"""The most elements a dense literal may have (1 GiB of f32); larger ones are refused while parsing."""
DENSE_LITERAL_TYPE = base(RankedStructure[IntegerType | IndexType | AnyFloat | ComplexType])
"""The types a dense literal may have (xDSL's `_parse_dense_literal_type`)."""

PARSER_FAILURES: dict[type[BaseException], str] = {
    OverflowError: "number out of range",
    ZeroDivisionError: "unsupported attribute",
    NotImplementedError: "unsupported attribute",
    ValueError: "malformed value",
    VerifyException: "invalid attribute",
    RecursionError: "nesting too deep",
    MemoryError: "value too large",
    AssertionError: "malformed operation",
    KeyError: "a name defined twice",
}
"""What xDSL's parser raises on some bad input besides ParseError (an op's custom parser asserts
its syntax; a block label defined twice after a use is a KeyError), and how we name it."""


def make_context() -> Context:
    """A context with the graph dialect and all of xDSL's dialects (loaded lazily)."""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    ctx.register_dialect("graph", lambda: Graph)
    return ctx


class LinearStringLexer(MLIRLexer):
    """xDSL's lexer with a string-literal pattern that fails in linear time.

    xDSL's pattern nests `+` in `*` (`"(?:[^"...]+|escape)*"`), which backtracks
    exponentially on an unterminated literal; matching one character per repetition
    accepts the same strings with one way to match each.
    """

    _unescaped_characters_regex = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')


class LocatedParser(Parser):
    """An xDSL parser that remembers where each operation started in the source, refuses
    dense literals over MAX_CONSTANT_ELEMENTS, and reports every failure as a ParseError
    (the PARSER_FAILURES at the start of the operation being parsed)."""

    def __init__(self, ctx: Context, text: str, name: str = "<input>"):
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(LinearStringLexer(Input(text, name)))
        self.locations: dict[Operation, Location] = {}
        self._unfinished: list[Span] = []
        """Where each operation being parsed started, outermost first."""

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        try:
            return super().parse_module(allow_implicit_module)
        except tuple(PARSER_FAILURES) as e:
            kind = next(name for failure, name in PARSER_FAILURES.items() if isinstance(e, failure))
            where = self._unfinished[-1] if self._unfinished else self._current_token.span
            raise ParseError(where, f"{kind}: {e}") from None

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        self._unfinished.append(start)
        op = super().parse_operation()
        self._unfinished.pop()
        self.locations[op] = start.get_location()
        return op

    def _parse_dense_literal_type(self):
        """xDSL's check of a dense literal's type, with its constraint built once (xDSL builds
        it for every literal: half the time of parsing a saved ResNet-50), and a size limit."""
        start = self.pos
        shaped_type = self.expect(self.parse_optional_type, "Dense attribute must be typed!")
        if not DENSE_LITERAL_TYPE.verifies(shaped_type):
            self.raise_error("Expected memref, vector or tensor type of integer, index, float, or complex type", start,
                             self.pos)
        if any(dim == DYNAMIC_INDEX for dim in shaped_type.get_shape()):
            self.raise_error("Dense literal attribute should have a static shape.", start, self.pos)
        elements = math.prod(shaped_type.get_shape())
        if elements > MAX_CONSTANT_ELEMENTS:
            self.raise_error(
                f"dense literal of {elements} elements is over the limit of {MAX_CONSTANT_ELEMENTS} elements", start, self.pos
            )
        return shaped_type


def verify_located(module: Operation, locations: dict[Operation, Location]) -> None:
    """Verify op by op; the first failure raises GraphoptError at its location.

    First every use must be dominated by its definition and every `graph.backend` pin must be
    a string, then each op's own verifier runs, innermost first.
    """

    def fail(op: Operation, message: str) -> None:
        message = message if message.startswith(op.name) else f"{op.name}: {message}"
        where = locations.get(op)
        prefix = f"{where}: " if where else f"in {op.name}: "
        raise GraphoptError(f"{prefix}error: {message}") from None

    for op, message in _structural_errors(module):
        fail(op, message)
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            fail(op, str(e))


def _structural_errors(op: Operation, enclosing: tuple[set[SSAValue], ...] = ()):
    """(op, message), in source order, for each non-string `graph.backend` pin and each
    operand in the regions of `op` that is not defined before its use in the same block, in
    a block that dominates it, or in a block enclosing the region (`enclosing`)."""
    for region in op.regions:
        defined = {block: _block_definitions(block) for block in region.blocks}
        dominance = DominanceInfo(region) if len(region.blocks) > 1 else None
        for block in region.blocks:
            seen = set(block.args)
            if dominance:
                seen.update(*(defined[b] for b in region.blocks if dominance.strictly_dominates(b, block)))
            for user in block.ops:
                if BACKEND_PIN in user.attributes and not isinstance(user.attributes[BACKEND_PIN], StringAttr):
                    yield user, f"{BACKEND_PIN} must be a string naming a backend, got {user.attributes[BACKEND_PIN]}"
                for i, value in enumerate(user.operands):
                    if value not in seen and not any(value in scope for scope in enclosing):
                        yield user, _undominated_message(user, i, value)
                yield from _structural_errors(user, (*enclosing, seen))
                seen.update(user.results)


def _block_definitions(block: Block) -> set[SSAValue]:
    return {*block.args, *(r for op in block.ops for r in op.results)}


def _undominated_message(user: Operation, index: int, value: SSAValue) -> str:
    operand = f"operand #{index}" + (f" (%{value.name_hint})" if value.name_hint else "")
    if isinstance(value.owner, Operation) and value.owner.is_ancestor(user):
        return f"{operand} is a result of the op itself"
    defining_block = value.owner.parent_block() if isinstance(value.owner, Operation) else value.owner
    if defining_block is user.parent_block():
        return f"{operand} is used before it is defined"
    return f"{operand} is defined in a block that does not dominate this use"


def decode_source(data: bytes, name: str, line_offset: int = 0) -> str:
    """`data` as UTF-8 text; undecodable bytes raise GraphoptError at `name:line:col` (lines
    counted from `line_offset` + 1) with the byte offset in `data`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = line_offset + data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise GraphoptError(
            f"{name}:{line}:{col}: error: the input is not UTF-8 text: byte 0x{data[e.start]:02x} at byte offset {e.start}"
        ) from None


def parse_text(text: str, name: str = "<input>", ctx: Context | None = None) -> ModuleOp:
    """Parse and verify MLIR text; errors become one GraphoptError with file:line:col."""
    try:
        parser = LocatedParser(ctx or make_context(), text, name)
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
    attributes, shape errors, uses before definitions and bytes that are not UTF-8, and
    for a path that does not exist.
    """
    if isinstance(text_or_path, os.PathLike) or _looks_like_path(text_or_path):
        path = Path(text_or_path)
        if not path.is_file():
            raise GraphoptError(f"{path}: no such file")
        return parse_text(decode_source(path.read_bytes(), str(path)), str(path))
    return parse_text(text_or_path)


def _looks_like_path(text: str) -> bool:
    if "\n" in text or "{" in text:
        return False
    try:
        return text.endswith(".mlir") or Path(text).is_file()
    except OSError:  # a name too long to be a path
        return False
