"""Saved Executables (issue 20): exe.save(path) and graphopt.load(path) give the same results,
in a fresh process and without compiling; a file for another host or a damaged one is refused."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import graphopt
from graphopt.backends.measure import random_arrays
from graphopt.builder import GraphBuilder
from graphopt.runtime import arrays
from graphopt.runtime.saved import FORMAT_VERSION
from graphopt.runtime.thread_pool import usable_cores

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.mlir"))

LOAD_AND_RUN = """
import sys, numpy as np, graphopt
import graphopt.runtime.jit as jit

def no_compile(*args, **kwargs):
    raise AssertionError("load compiled a kernel module")

jit._machine_code = no_compile
for saved, inputs, outputs in zip(*[iter(sys.argv[1:])] * 3):
    exe = graphopt.load(saved, recompile=False)
    with np.load(inputs) as arrays:
        results = exe(*[arrays[f"arr_{i}"] for i in range(len(arrays.files))])
    np.savez(outputs, *results)
"""
"""Loads each saved file in a new process whose JIT cannot compile, runs it, saves the results."""


def inputs_of(exe: graphopt.Executable) -> list[np.ndarray]:
    return random_arrays([a.type for a in exe.function.body.block.args], seed=1)


def resnet_ish():
    """examples/make_onnx_models.py's small residual CNN (batch norms, residual adds, strides), from ONNX."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from make_onnx_models import resnet_ish as model
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return graphopt.from_onnx(model(), shapes={"x": (1, 3, 32, 32)})


def wide_rows():
    """One kernel big enough for split-rows to make row chunks at 2 threads."""
    b = GraphBuilder()
    x, w = b.input("x", (1024, 64)), b.input("w", (64,))
    return b.finish(b.mul(b.relu(b.add(x, w)), b.constant(np.float32(0.5))))


def test_round_trip_in_a_fresh_process_without_compiling(tmp_path):
    modules = {path.stem: graphopt.parse(str(path)) for path in EXAMPLES} | {"resnet_ish": resnet_ish()}
    arguments, expected = [], {}
    for name, module in modules.items():
        exe = graphopt.compile(module)
        inputs = inputs_of(exe)
        expected[name] = exe(*inputs)
        exe.save(tmp_path / f"{name}.gx")
        np.savez(tmp_path / f"{name}-inputs.npz", *inputs)
        arguments += [str(tmp_path / f"{name}{suffix}") for suffix in (".gx", "-inputs.npz", "-outputs.npz")]
    environment = dict(os.environ, GRAPHOPT_KERNEL_CACHE="off")
    done = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, *arguments], env=environment, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    for name, results in expected.items():
        with np.load(tmp_path / f"{name}-outputs.npz") as loaded:
            assert len(loaded.files) == len(results)
            for index, result in enumerate(results):
                np.testing.assert_array_equal(loaded[f"arr_{index}"], result, err_msg=name)


def test_the_loaded_module_is_the_placed_one(tmp_path):
    exe = graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mnist_cnn.mlir")))
    exe.save(tmp_path / "cnn.gx")
    loaded = graphopt.load(tmp_path / "cnn.gx")
    assert str(loaded.module) == str(exe.module)  # constants restored, placement kept
    assert loaded.report() == exe.report()
    assert loaded.pipeline == exe.pipeline and loaded.threads == exe.threads


@pytest.mark.skipif(usable_cores() < 2, reason="row chunks need two usable cores")
def test_row_chunks_survive(tmp_path):
    exe = graphopt.compile(wide_rows(), threads=2)
    (step,) = exe.steps
    assert step.kernel.chunks
    exe.save(tmp_path / "rows.gx")
    loaded = graphopt.load(tmp_path / "rows.gx")
    assert loaded.steps[0].kernel.chunks == step.kernel.chunks
    inputs = inputs_of(exe)
    np.testing.assert_array_equal(loaded(*inputs)[0], exe(*inputs)[0])


def test_a_backend_without_saved_kernels_compiles_again(tmp_path):
    exe = graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mlp.mlir")), backends=("blas", "reference"))
    exe.save(tmp_path / "mlp.gx")
    with zipfile.ZipFile(tmp_path / "mlp.gx") as archive:
        assert not [name for name in archive.namelist() if name.startswith("backends/")]
    loaded = graphopt.load(tmp_path / "mlp.gx")
    assert [s.backend for s in loaded.steps] == [s.backend for s in exe.steps]
    inputs = inputs_of(exe)
    np.testing.assert_array_equal(loaded(*inputs)[0], exe(*inputs)[0])


def test_constants_of_every_width_and_shape_survive(tmp_path):
    b = GraphBuilder()
    x = b.input("x", (4, 3))
    mask = b.constant(np.array([[True, False, True]] * 4))
    integers = b.constant(np.arange(12, dtype=np.int64).reshape(4, 3))
    y = b.select(mask, b.mul(x, b.constant(np.float32(2.5))), b.cast(integers, "f32"))
    exe = graphopt.compile(b.finish(y))
    exe.save(tmp_path / "widths.gx")
    loaded = graphopt.load(tmp_path / "widths.gx")
    assert str(loaded.module) == str(exe.module)
    inputs = inputs_of(exe)
    np.testing.assert_array_equal(loaded(*inputs)[0], exe(*inputs)[0])


def test_a_module_without_constants(tmp_path):
    b = GraphBuilder()
    x = b.input("x", (8,))
    exe = graphopt.compile(b.finish(b.relu(x)))
    exe.save(tmp_path / "relu.gx")
    inputs = inputs_of(exe)
    np.testing.assert_array_equal(graphopt.load(tmp_path / "relu.gx")(*inputs)[0], exe(*inputs)[0])


def rewrite_manifest(path: Path, **fields) -> None:
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["manifest.json"] = json.dumps(json.loads(members["manifest.json"]) | fields).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_another_cpu_is_refused_or_recompiled(tmp_path):
    exe = graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mlp.mlir")))
    path = tmp_path / "mlp.gx"
    exe.save(path)
    rewrite_manifest(path, cpu="another-cpu")
    with pytest.raises(graphopt.GraphoptError, match="cpu 'another-cpu', here"):
        graphopt.load(path, recompile=False)
    with pytest.warns(UserWarning, match="compiling its kernels again"):
        loaded = graphopt.load(path)
    inputs = inputs_of(exe)
    np.testing.assert_array_equal(loaded(*inputs)[0], exe(*inputs)[0])


def test_another_format_version_is_refused(tmp_path):
    path = tmp_path / "mlp.gx"
    graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mlp.mlir"))).save(path)
    rewrite_manifest(path, version=99)
    with pytest.raises(graphopt.GraphoptError, match="format version 99"):
        graphopt.load(path)
    rewrite_manifest(path, version=FORMAT_VERSION, threads=0)
    with pytest.raises(graphopt.GraphoptError, match="threads"):
        graphopt.load(path)


def damaged_files(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.gx"
    graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mlp.mlir"))).save(good)
    data = good.read_bytes()
    files = {"truncated": data[: len(data) // 2], "text": b"func.func @main() {}\n", "empty": b""}
    foreign = tmp_path / "foreign.gx"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("hello.txt", "hi")
    files["foreign zip"] = foreign.read_bytes()
    with zipfile.ZipFile(good) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    for name, member, replacement in [("bad constants", "constants.npz", b"not an npz"),
                                      ("bad module", "module.mlir", b"%x = graph.nonsense"),
                                      ("bad manifest", "manifest.json", b"{"),
                                      ("no machine code", "backends/cpu.npz", members["constants.npz"]),
                                      ("unknown function", "backends/cpu.json",
                                       members["backends/cpu.json"].replace(b'"functions": {"', b'"functions": {"nowhere_'))]:
        path = tmp_path / f"{name}.gx"
        with zipfile.ZipFile(path, "w") as archive:
            for other, content in members.items():
                archive.writestr(other, replacement if other == member else content)
        files[name] = path.read_bytes()
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name.replace(' ', '_')}-damaged.gx"
        paths[name].write_bytes(content)
    return paths


def test_damaged_files_give_one_error(tmp_path):
    for name, path in damaged_files(tmp_path).items():
        with pytest.raises(graphopt.GraphoptError) as error:
            graphopt.load(path)
        assert str(path) in str(error.value), name
    with pytest.raises(graphopt.GraphoptError, match="no such file"):
        graphopt.load(tmp_path / "missing.gx")
    with pytest.raises(graphopt.GraphoptError, match="cannot write"):
        graphopt.compile(graphopt.parse(str(ROOT / "examples" / "mlp.mlir"))).save(tmp_path / "no-folder" / "mlp.gx")


def test_graph_run_saves_and_runs(tmp_path):
    from graphopt.tools.graph_run import main

    saved = tmp_path / "cnn.gx"
    main([str(ROOT / "examples" / "mnist_cnn.mlir"), "--save", str(saved), "-o", str(tmp_path / "compiled.npz")])
    main([str(saved), "-o", str(tmp_path / "loaded.npz")])
    with np.load(tmp_path / "compiled.npz") as compiled, np.load(tmp_path / "loaded.npz") as loaded:
        np.testing.assert_array_equal(loaded["result_0"], compiled["result_0"])
    (tmp_path / "damaged.gx").write_bytes(saved.read_bytes()[:100])
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "damaged.gx")])
    assert exit_.value.code == 1


def test_an_implementation_bound_by_compile_is_named_when_missing_on_load(tmp_path):
    module = graphopt.parse(str(ROOT / "examples" / "mlp.mlir"))
    exe = graphopt.compile(module, implementations={"fused_matmul_add_1": lambda x, w: x @ w})
    assert "implementation" in [s.backend for s in exe.steps]
    exe.save(tmp_path / "bound.gx")
    with pytest.raises(graphopt.GraphoptError, match="implementation 'fused_matmul_add_1#[0-9]+', which is not registered"):
        graphopt.load(tmp_path / "bound.gx")


def test_constants_and_packed_weights_start_on_cache_lines(tmp_path):
    """Every constant the Executable and its kernels hold (the conv's weights packed at compile
    time, the bias), compiled and loaded from a saved file, starts on a 64-byte line
    (`arrays.CACHE_LINE`): a 64-byte vector load from them never splits a line."""
    g = GraphBuilder()
    w = g.constant(np.full((32, 8, 3, 3), 0.5, np.float32))
    y = g.conv2d(g.input("x", (1, 8, 14, 14)), w, padding=(1, 1, 1, 1))
    module = g.finish(g.relu(g.add(y, g.constant(np.ones((32, 1, 1), np.float32)))))
    executable = graphopt.compile(module, backends=("cpu",))
    path = tmp_path / "conv.graphopt"
    executable.save(path)
    for exe in (executable, graphopt.load(path)):
        constants = [a for step in exe.steps for a in step.kernel.constants] + list(exe.constants.values())
        assert constants and all(a.ctypes.data % arrays.CACHE_LINE == 0 for a in constants)
