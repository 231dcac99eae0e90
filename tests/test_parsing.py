"""graphopt.parse on bad input: one GraphoptError naming file:line:col, never a hang or another exception."""

from __future__ import annotations

import time

import numpy as np
import pytest

import graphopt
from graphopt import GraphoptError
from graphopt.tools import graph_opt, graph_run


def parse_error(text: str) -> str:
    """The first line of the GraphoptError that parsing `text` raises."""
    with pytest.raises(GraphoptError) as error:
        graphopt.parse(text)
    return str(error.value).splitlines()[0]


def test_long_unterminated_string_fails_fast():
    for text in ['"' + "a" * 40, '"' + "a" * 10_000, 'func.func @f() attributes {s = "' + "a" * 10_000 + "\n}"]:
        start = time.perf_counter()
        message = parse_error(text)
        assert time.perf_counter() - start < 2
        assert "error: End of file reached before closing string literal" in message
    assert parse_error('func.func @f() attributes {s = "' + "a" * 10_000 + "\n}").startswith("<input>:1:32:")


def test_string_literals_with_escapes_still_parse():
    module = graphopt.parse('func.func @f() attributes {s = "a\\nb\\"c\\0a\\\\"} {\n func.return\n}')
    assert 's = "a\\0Ab\\22c\\0A\\\\"' in str(module)


def main(signature: str, body: str) -> str:
    return f"func.func @main({signature}) {{\n{body}\n  func.return\n}}"


@pytest.mark.parametrize(
    "text, expected",
    [
        (main("", "  %0 = arith.constant 0xff800000 : f16"), "<input>:2:3: error: number out of range"),
        (main("%x: tensor<2xf32>", "  %0 = graph.transpose %x {perm = array<i0: 0>} : (tensor<2xf32>) -> tensor<2xf32>"),
         "<input>:2:3: error: unsupported attribute"),
        (main("%x: tensor<2xf32>", "  %0 = graph.transpose %x {perm = array<i128: 0>} : (tensor<2xf32>) -> tensor<2xf32>"),
         "<input>:2:3: error: unsupported attribute"),
        (main("", "  %0 = graph.constant dense<1.5> : tensor<2147483648xf32>"),
         "<input>:2:36: error: dense literal of 2147483648 elements is over the limit of 268435456 elements"),
        (main("", "  %0 = graph.constant dense<1.5> : tensor<18446744073709551616xf32>"),
         "<input>:2:36: error: dense literal of 18446744073709551616 elements is over the limit"),
        (main("", "  %0 = arith.constant 18446744073709551616 : i64"), "<input>:2:3: error: invalid attribute: Integer value"),
        (main("", '  "test.op"() {a = ' + "[" * 20_000 + "} : () -> ()"), "<input>:2:3: error: nesting too deep"),
        (main("%x: tensor<²xf32>", ""), "<input>:1:1: error: malformed value"),
    ],
    ids=["f16_hex_overflow", "i0_array", "i128_array", "huge_constant", "dimension_over_index", "integer_over_type",
         "deep_nesting", "superscript_digit"],
)  # fmt: skip
def test_parser_failures_are_located(text, expected):
    assert parse_error(text).startswith(expected)


def test_input_that_is_not_utf8_names_line_column_and_byte_offset(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_bytes(b"func.func @main() {\n  func.return // \xff\n}\n")
    message = parse_error(str(path))
    assert message == f"{path}:2:18: error: the input is not UTF-8 text: byte 0xff at byte offset 37"


@pytest.mark.parametrize(
    "body, expected",
    [
        ("  %1 = graph.neg %0 : tensor<4xf32>\n  %0 = graph.neg %x : tensor<4xf32>",
         "<input>:2:3: error: graph.neg: operand #0 is used before it is defined"),
        ("  %0 = graph.neg %0 : tensor<4xf32>", "<input>:2:3: error: graph.neg: operand #0 is a result of the op itself"),
        ("  %0 = graph.neg %x {graph.backend = 1 : i32} : tensor<4xf32>",
         "<input>:2:3: error: graph.neg: graph.backend must be a string naming a backend, got 1 : i32"),
    ],
    ids=["use_before_def", "self_use", "backend_pin_not_string"],
)  # fmt: skip
def test_structural_errors_are_located(body, expected):
    assert parse_error(main("%x: tensor<4xf32>", body)) == expected


# ----------------------------------------------------------------------------------------
# graph.gather's indices
# ----------------------------------------------------------------------------------------

GATHER = """func.func @main(%x: tensor<3x2xf32>, %i: tensor<6xi64>) -> tensor<6x2xf32> {
  %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<3x2xf32>, tensor<6xi64>) -> tensor<6x2xf32>
  func.return %0 : tensor<6x2xf32>
}"""


def test_constant_gather_index_out_of_range_is_a_verifier_error():
    text = GATHER.replace(", %i: tensor<6xi64>) -> tensor<6x2xf32> {", ") -> tensor<6x2xf32> {\n  %i = graph.constant dense<7> : tensor<6xi64>")
    assert parse_error(text) == "<input>:3:3: error: graph.gather: constant index 7 is out of range [-3, 3) for axis 0"


@pytest.mark.parametrize("fuse", [True, False])
def test_run_time_gather_indices_wrap_then_clamp_alike_compiled_and_interpreted(fuse):
    module = graphopt.parse(GATHER)
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    indices = np.array([3, 99, -1, -3, -4, -99], np.int64)
    expected = data[[2, 2, 2, 0, 0, 0]]
    (interpreted,) = graphopt.interpret(module, data, indices)
    (compiled,) = graphopt.compile(module, backends=("cpu",), fuse=fuse)(data, indices)
    np.testing.assert_array_equal(interpreted, expected)
    np.testing.assert_array_equal(compiled, expected)


# ----------------------------------------------------------------------------------------
# graph-opt reads through the same parser
# ----------------------------------------------------------------------------------------


def graph_opt_error(path, *args, capsys) -> str:
    """graph-opt's one-line message on stderr for `path`, after checking it exits with code 1."""
    with pytest.raises(SystemExit) as exit_info:
        graph_opt.main([str(path), *args])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()[0]


@pytest.mark.parametrize("split", [False, True])
def test_graph_opt_names_the_line_of_bytes_that_are_not_utf8(tmp_path, split, capsys):
    path = tmp_path / "bad.mlir"
    valid = b"func.func @f() {\n  func.return\n}\n// -----\n" if split else b""
    path.write_bytes(valid + b"func.func @main() {\n  func.return // \xff\n}\n")
    message = graph_opt_error(path, *(["--split-input-file"] if split else []), capsys=capsys)
    assert message.startswith(f"graph-opt: {path}:{6 if split else 2}:18: error: the input is not UTF-8 text: byte 0xff")


def test_graph_run_names_the_line_of_bytes_that_are_not_utf8(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_bytes(b"func.func @main() {\n  func.return // \xff\n}\n")
    with pytest.raises(SystemExit) as exit_info:
        graph_run.main([str(path)])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith(f"graph-run: {path}:2:18: error: the input is not UTF-8 text: byte 0xff")


def test_graph_opt_long_unterminated_string_fails_fast(tmp_path, capsys):
    path = tmp_path / "string.mlir"
    path.write_text('func.func @f() attributes {s = "' + "a" * 10_000 + "\n}\n")
    start = time.perf_counter()
    message = graph_opt_error(path, capsys=capsys)
    assert time.perf_counter() - start < 2
    assert message == f"graph-opt: {path}:1:32: error: End of file reached before closing string literal."
