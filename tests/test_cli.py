"""graph-opt and graph-run as a user runs them: subprocesses, files, exit codes, messages."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.tools import graph_opt, graph_run

BIN = Path(sys.executable).parent

ADD_RELU = """\
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %sum = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %relu = graph.relu %sum : tensor<4x8xf32>
  func.return %relu : tensor<4x8xf32>
}
"""


def run_tool(tool: str, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / tool, *map(str, args)], input=stdin, capture_output=True, text=True)


def assert_fails_with(run: subprocess.CompletedProcess, tool: str, *fragments: str) -> None:
    """Exit code 1 and one message on stderr, naming `fragments`, without a traceback."""
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith(f"{tool}: "), run.stderr
    assert run.stderr.count(f"{tool}: ") == 1, run.stderr
    assert "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in run.stderr


def run_in_process(main, *args, capsys) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a tool's `main` called in this process (faster than a subprocess)."""
    try:
        main([*map(str, args)])
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def add_relu(tmp_path: Path) -> Path:
    path = tmp_path / "add_relu.mlir"
    path.write_text(ADD_RELU)
    return path


# ---------------------------------------------------------------------------- graph-opt


def test_graph_opt_prints_verified_module(add_relu: Path):
    run = run_tool("graph-opt", add_relu)
    assert run.returncode == 0, run.stderr
    assert "%relu = graph.relu %sum : tensor<4x8xf32>" in run.stdout


@pytest.mark.parametrize("stdin_args", [[], ["-"]])
def test_graph_opt_reads_stdin(stdin_args):
    run = run_tool("graph-opt", *stdin_args, "--print-op-generic", stdin=ADD_RELU)
    assert run.returncode == 0, run.stderr
    assert '"graph.relu"(%sum)' in run.stdout


def test_graph_opt_writes_output_file(add_relu: Path, tmp_path: Path):
    out = tmp_path / "out.mlir"
    run = run_tool("graph-opt", add_relu, "-o", out)
    assert run.returncode == 0 and run.stdout == ""
    assert "graph.add %a, %b" in out.read_text()


def test_graph_opt_split_input_file(tmp_path: Path):
    path = tmp_path / "two.mlir"
    path.write_text(ADD_RELU + "// -----\n" + ADD_RELU.replace("@main", "@other"))
    run = run_tool("graph-opt", path, "--split-input-file")
    first, second = run.stdout.split("// -----\n")
    assert "@main" in first and "@other" in second


BAD_OPS = {
    "malformed": ("%y = graph.relu %x : tensor<4x8xf32", 3, 3, "Expected '>'"),
    "unknown op": ("%y = graph.frobnicate %x : tensor<4x8xf32>", 2, 25, "graph.frobnicate is not registered"),
    "bad attribute": ('%y = graph.gelu %x {approximate = "fast"} : tensor<4x8xf32>', 2, 3, "graph.gelu: approximate"),
    "shape mismatch": ("%y = graph.reshape %x : (tensor<4x8xf32>) -> tensor<33xf32>", 2, 3, "cannot reshape [4, 8]"),
    "dynamic dims": ("%y = graph.reshape %x : (tensor<4x8xf32>) -> tensor<?x8xf32>", 2, 3, "dynamic dimension"),
}


@pytest.mark.parametrize("op_line, line, col, message", BAD_OPS.values(), ids=BAD_OPS.keys())
def test_graph_opt_reports_bad_input_at_its_location(tmp_path: Path, op_line, line, col, message):
    path = tmp_path / "bad.mlir"
    path.write_text(f"func.func @main(%x: tensor<4x8xf32>) {{\n  {op_line}\n  func.return\n}}\n")
    assert_fails_with(run_tool("graph-opt", path), "graph-opt", f"{path}:{line}:{col}: error:", message)


def test_graph_opt_verify_diagnostics_prints_on_stdout(tmp_path: Path):
    path = tmp_path / "bad.mlir"
    path.write_text(ADD_RELU.replace("tensor<8xf32>", "tensor<7xf32>"))
    run = run_tool("graph-opt", path, "--verify-diagnostics")
    assert run.returncode == 0
    assert f"{path}:2:3: error: graph.add: operands 'a' [4, 8], 'b' [7]" in run.stdout


@pytest.mark.parametrize(
    "args, message",
    [(["-p", "no-such-pass"], "no-such-pass"), (["-p", "cse{bogus=1}"], "bogus")],
)
def test_graph_opt_reports_bad_arguments(add_relu: Path, args, message):
    assert_fails_with(run_tool("graph-opt", add_relu, *args), "graph-opt", message)


def test_graph_opt_reports_missing_file(tmp_path: Path):
    missing = tmp_path / "missing.mlir"
    assert_fails_with(run_tool("graph-opt", missing), "graph-opt", f"{missing}: No such file or directory")


def test_shorthand_flags_prepend_passes_in_order(add_relu: Path, monkeypatch):
    monkeypatch.setitem(graph_opt.PASS_FLAGS, "cse", "common subexpressions")
    monkeypatch.setitem(graph_opt.PASS_FLAGS, "canonicalize", "canonical forms")
    tool = graph_opt.GraphOptMain([str(add_relu), "--canonicalize", "--cse", "-p", "dce"])
    assert tool.args.passes == "canonicalize,cse,dce"


def test_shorthand_flag_options():
    assert graph_opt.shorthand_pass_spec("fuse", "") == "fuse"
    assert graph_opt.shorthand_pass_spec("fuse", "max-ops=8,sizes=1,2,mode=x") == "fuse{max-ops=8 sizes=1,2 mode=x}"


def test_shorthand_flag_of_missing_pass_fails_only_when_used(add_relu: Path, monkeypatch, capsys):
    monkeypatch.setitem(graph_opt.PASS_FLAGS, "not-yet-written", "a pass still to come")
    graph_opt.main([str(add_relu)])
    with pytest.raises(SystemExit) as exit_info:
        graph_opt.main([str(add_relu), "--not-yet-written=level=2"])
    assert exit_info.value.code == 1
    assert "not-yet-written" in capsys.readouterr().err


def test_stage_flag_ends_the_pipeline(add_relu: Path):
    tool = graph_opt.GraphOptMain([str(add_relu), "--lower-to-linalg", "-p", "cse", "--fuse"])
    assert tool.args.passes == "fuse,cse,convert-graph-to-linalg{backend=cpu},pack-weights,linalg-generalize-named-ops,share-kernel-code,mark-row-local,split-rows{threads=1 min-work=131072}"
    tool = graph_opt.GraphOptMain([str(add_relu), "--lower-to-llvm"])
    assert tool.args.passes.startswith("convert-graph-to-linalg{backend=cpu},pack-weights,linalg-generalize-named-ops,share-kernel-code,mark-row-local,split-rows{threads=1 min-work=131072},convert-linalg-to-loops,")
    assert tool.args.passes.endswith(",reconcile-unrealized-casts")


@pytest.mark.parametrize("stage", [[], ["--lower-to-linalg"], ["--lower-to-llvm"]])
def test_graph_opt_llvm_target_from_every_stage(add_relu: Path, stage, capsys):
    code, out, err = run_in_process(graph_opt.main, add_relu, "--fuse", *stage, "-t", "llvm", capsys=capsys)
    assert code == 0, err
    assert "define void @fused_add_relu_0(" in out
    assert " x float>" in out


def test_graph_opt_llvm_target_reports_unsupported_group(tmp_path: Path, capsys):
    path = tmp_path / "two_reductions.mlir"
    path.write_text(
        "func.func @main(%x: tensor<4x8xf32>) -> tensor<f32> {\n"
        '  %0 = graph.fused(%x) {name = "two", mode = "compile"} : (tensor<4x8xf32>) -> tensor<f32> {\n'
        "  ^bb0(%a: tensor<4x8xf32>):\n"
        "    %1 = graph.reduce_sum %a {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>\n"
        "    %2 = graph.reduce_max %1 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>\n"
        "    graph.yield %2 : tensor<f32>\n  }\n"
        "  func.return %0 : tensor<f32>\n}\n"
    )
    code, _, err = run_in_process(graph_opt.main, path, "-t", "llvm", capsys=capsys)
    assert code == 1
    assert err.startswith("graph-opt: error: convert-graph-to-linalg: two: the group has 2 anchors or reductions")
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------- graph-run


def test_graph_run_random_inputs_follow_the_seed(add_relu: Path):
    first, again, other = (run_tool("graph-run", add_relu, "--seed", seed) for seed in (1, 1, 2))
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout != other.stdout
    assert first.stdout.startswith("result_0: shape (4, 8) float32  min ")
    assert run_tool("graph-run", add_relu).stdout == run_tool("graph-run", add_relu, "--seed", 0).stdout


def test_graph_run_random_inputs_match_argument_types(tmp_path: Path):
    path = tmp_path / "types.mlir"
    types = "tensor<3xi32>, tensor<2xi1>, tensor<2xf16>"
    path.write_text(
        f"func.func @main(%i: tensor<3xi32>, %c: tensor<2xi1>, %h: tensor<2xf16>) -> ({types}) {{\n"
        f"  func.return %i, %c, %h : {types}\n}}\n"
    )
    out = tmp_path / "out.npz"
    run = run_tool("graph-run", path, "-o", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as results:
        assert [results[f"result_{i}"].dtype for i in range(3)] == [np.int32, np.bool_, np.float16]
        assert results["result_0"].min() >= 0


def test_graph_run_npy_inputs_and_output_file(add_relu: Path, tmp_path: Path):
    a = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    b = np.arange(8, dtype=np.float32) - 4
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "out.npz"
    run = run_tool("graph-run", add_relu, "--inputs", tmp_path / "a.npy", tmp_path / "b.npy", "-o", out)
    assert run.returncode == 0, run.stderr
    expected = np.maximum(a + b, 0)
    assert f"max {expected.max():.6g}" in run.stdout
    with np.load(out) as results:
        np.testing.assert_allclose(results["result_0"], expected)


def test_graph_run_npz_inputs_by_name_then_position(add_relu: Path, tmp_path: Path):
    a = -np.ones((4, 8), np.float32)
    b = np.arange(8, dtype=np.float32)
    np.savez(tmp_path / "in.npz", b=b, arr_0=a)
    out = tmp_path / "out.npz"
    run = run_tool("graph-run", add_relu, "--inputs", tmp_path / "in.npz", "-o", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as results:
        np.testing.assert_allclose(results["result_0"], np.maximum(a + b, 0))


def test_graph_run_entry(add_relu: Path, tmp_path: Path):
    path = tmp_path / "two.mlir"
    path.write_text(ADD_RELU + ADD_RELU.replace("@main", "@other").replace("graph.relu", "graph.neg"))
    np.savez(tmp_path / "in.npz", np.ones((4, 8), np.float32), np.ones(8, np.float32))
    run = run_tool("graph-run", path, "--entry", "other", "--inputs", tmp_path / "in.npz")
    assert run.returncode == 0, run.stderr
    assert "min -2 max -2" in run.stdout


def test_graph_run_bad_inputs(add_relu: Path, tmp_path: Path):
    np.save(tmp_path / "a.npy", np.ones((4, 8), np.float32))
    np.save(tmp_path / "b.npy", np.ones(7, np.float32))
    np.savez(tmp_path / "in.npz", q=np.ones(3))
    a, b, npz = tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "in.npz"
    assert_fails_with(run_tool("graph-run", add_relu, "--inputs", a, b), "graph-run", "argument #1 ('b')", "[7]")
    assert_fails_with(run_tool("graph-run", add_relu, "--inputs", a), "graph-run", "expects 2 arguments")
    assert_fails_with(run_tool("graph-run", add_relu, "--inputs", npz), "graph-run", "no array 'a' or 'arr_0'")
    assert_fails_with(run_tool("graph-run", add_relu, "--inputs", a, tmp_path / "none.npy"), "graph-run", "none.npy")
    assert_fails_with(run_tool("graph-run", add_relu, "--inputs", a, add_relu), "graph-run", "not a NumPy")
    assert_fails_with(run_tool("graph-run", add_relu, "--entry", "nope"), "graph-run", "@nope")


def test_graph_run_bad_module(tmp_path: Path):
    path = tmp_path / "bad.mlir"
    path.write_text(ADD_RELU.replace("tensor<8xf32>", "tensor<7xf32>"))
    assert_fails_with(run_tool("graph-run", path), "graph-run", f"{path}:2:3: error: graph.add")
    assert_fails_with(run_tool("graph-run", tmp_path / "missing.mlir"), "graph-run", "missing.mlir")


def test_graph_run_backends_agree_and_report(add_relu: Path, capsys):
    compiled = run_in_process(graph_run.main, add_relu, capsys=capsys)
    assert compiled == run_in_process(graph_run.main, add_relu, "--backend", "reference", capsys=capsys)
    _, fused, _ = run_in_process(graph_run.main, add_relu, "--report", capsys=capsys)
    _, unfused, _ = run_in_process(graph_run.main, add_relu, "--report", "--no-fuse", capsys=capsys)
    assert fused.splitlines()[:1] == [f"{'fused_add_relu_0':<40} cpu  [native run 0]"]
    assert [line.split()[:2] for line in unfused.splitlines()[:2]] == [["add_0", "cpu"], ["relu_1", "cpu"]]
    assert all(line.endswith("[native run 0]") for line in unfused.splitlines()[:2])  # one call for both


def test_graph_run_print_llvm_is_graph_opt_llvm_target(add_relu: Path, capsys, monkeypatch):
    monkeypatch.setenv("GRAPHOPT_THREADS", "1")
    code, printed, err = run_in_process(graph_opt.main, add_relu, "--fuse", "--partition=backends=cpu", "-t", "llvm", capsys=capsys)
    assert code == 0, err
    code, jitted, err = run_in_process(graph_run.main, add_relu, "--print-llvm", capsys=capsys)
    assert code == 0, err
    assert jitted == printed and "define void @fused_add_relu_0(" in jitted
    code, unfused, _ = run_in_process(graph_run.main, add_relu, "--print-llvm", "--no-fuse", capsys=capsys)
    assert "define void @add_0(" in unfused and "define void @relu_1(" in unfused


@pytest.mark.parametrize("other", [["--backend", "reference"], ["--check"]])
def test_graph_run_print_llvm_needs_the_cpu_backend_alone(add_relu: Path, other):
    run = run_tool("graph-run", add_relu, "--print-llvm", *other)
    assert run.returncode == 2  # a usage error, as argparse reports them
    assert run.stderr.endswith("graph-run: error: --print-llvm shows a compiled module; it needs the cpu backend, without --check\n")


def test_graph_run_check(add_relu: Path):
    run = run_tool("graph-run", add_relu, "--check", "--no-fuse")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "result_0: max abs diff 0  max rel diff 0  ok"


def test_graph_run_check_fails_on_a_mismatch(add_relu: Path, monkeypatch, capsys):
    def off_by_a_little(module, **options):
        executable = compile_for_real(module, **options)
        return lambda *inputs: tuple(r * np.float32(1.001) for r in executable(*inputs))

    compile_for_real = graphopt.compile
    monkeypatch.setattr(graphopt, "compile", off_by_a_little)
    code, out, err = run_in_process(graph_run.main, add_relu, "--check", "--seed", 3, capsys=capsys)
    assert code == 1
    assert "max rel diff 0.001  MISMATCH" in out
    assert err == "graph-run: error: out of tolerance against the reference interpreter: result_0\n"


@pytest.mark.parametrize(
    "actual, expected, ok",
    [
        ([1.0, np.nan, np.inf, -np.inf], [1.0, np.nan, np.inf, -np.inf], True),
        ([1.00009, 0.0], [1.0, 1e-6], True),
        ([1.0002], [1.0], False),
        ([np.nan], [1.0], False),
        ([np.inf], [-np.inf], False),
    ],
)
def test_graph_run_check_tolerance(actual, expected, ok):
    assert graph_run.differences(np.array(actual, np.float32), np.array(expected, np.float32))[2] == ok


@pytest.mark.parametrize(
    "args, message",
    [
        (["--check", "--backend", "reference"], "--check compares a compiled module with the interpreter"),
        (["--backend", "reference", "--report"], "--report"),
    ],
)
def test_graph_run_conflicting_options(add_relu: Path, args, message, capsys):
    code, _, err = run_in_process(graph_run.main, add_relu, *args, capsys=capsys)
    assert code == 2 and message in err


def test_a_reader_that_stops_early_gets_no_error_message():
    """`graph-opt x.mlir | head`: the closed pipe ends graph-opt quietly, without a traceback."""
    source = Path(__file__).parent / "filecheck" / "partition" / "greedy.mlir"
    tool = subprocess.Popen([sys.executable, "-m", "graphopt.tools.graph_opt", str(source), "--split-input-file", "--fuse"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tool.stdout.read(10)
    tool.stdout.close()
    assert tool.stderr.read() == b"" and tool.wait() in (0, 1)
