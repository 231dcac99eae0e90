"""Malformed ONNX models and bad graph-import / graph-run input: one GraphoptError naming what is wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cli import ADD_RELU, run_in_process

import graphopt
from graphopt.backends.measure import default_threads
from graphopt.tools import graph_import, graph_run

onnx = pytest.importorskip("onnx")
helper = pytest.importorskip("onnx.helper")
numpy_helper = pytest.importorskip("onnx.numpy_helper")
TensorProto = onnx.TensorProto


def model(nodes, shape=(2, 3), initializers=(), outputs=("y",), opsets=None) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph(nodes, "g", [x], [helper.make_empty_tensor_value_info(o) for o in outputs],
                              initializer=list(initializers))
    return helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", 17)], ir_version=8)


def ints(name: str, *values: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def raises(source, message: str, **kwargs) -> None:
    with pytest.raises(graphopt.GraphoptError) as error:
        graphopt.from_onnx(source, **kwargs)
    assert message in str(error.value)


AXES = {
    "softmax": (helper.make_node("Softmax", ["x"], ["y"], name="n", axis=7), [], "Softmax node 'n': axis 7 is out of range for rank 2"),
    "log_softmax": (helper.make_node("LogSoftmax", ["x"], ["y"], name="n", axis=-3), [], "axis -3 is out of range for rank 2"),
    "flatten": (helper.make_node("Flatten", ["x"], ["y"], name="n", axis=3), [], "Flatten node 'n': axis 3 is out of range"),
    "concat": (helper.make_node("Concat", ["x", "x"], ["y"], name="n", axis=5), [], "Concat node 'n': axis 5"),
    "gather": (helper.make_node("Gather", ["x", "i"], ["y"], name="n", axis=4), [ints("i", 0)], "Gather node 'n': axis 4"),
    "reduce": (helper.make_node("ReduceSum", ["x", "a"], ["y"], name="n"), [ints("a", 9)], "ReduceSum node 'n': axes [9]: axis 9"),
    "squeeze": (helper.make_node("Squeeze", ["x", "a"], ["y"], name="n"), [ints("a", 9)], "Squeeze node 'n': axes [9]"),
    "unsqueeze": (helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="n"), [ints("a", 9)], "axis 9 is out of range for rank 3"),
    "unsqueeze twice": (helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="n"), [ints("a", 0, 0)], "axes [0, 0] name an axis twice"),
    "layer_norm": (helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="n", axis=5),
                   [numpy_helper.from_array(np.ones(3, np.float32), "s")], "LayerNormalization node 'n': axis 5"),
    "slice": (helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="n"), [ints("s", 0), ints("e", 1), ints("a", 5)],
              "Slice node 'n': axes [5]"),
    "pad": (helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="n"), [ints("p", 1, 1), ints("a", 5)], "Pad node 'n': axes [5]"),
    "transpose": (helper.make_node("Transpose", ["x"], ["y"], name="n", perm=[0, 5]), [], "Transpose node 'n': "),
}  # fmt: skip


@pytest.mark.parametrize("node, initializers, message", AXES.values(), ids=AXES.keys())
def test_out_of_range_axis_names_the_node(node, initializers, message):
    raises(model([node], initializers=initializers), message)


def scalar(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def einsum(equation: str, *inputs: str) -> onnx.NodeProto:
    return helper.make_node("Einsum", list(inputs), ["y"], name="n", equation=equation)


CONSTANT_INPUTS_AND_SHAPES = {
    "einsum diagonal": (einsum("ii->i", "x"), (3, 3), [], "Einsum node 'n': equation 'ii->i' is not supported"),
    "einsum of three": (einsum("ij,jk,kl->il", "x", "x", "x"), (3, 3), [], "equation 'ij,jk,kl->il' is not supported"),
    "einsum one-sided sum": (einsum("ij,jk->k", "x", "x"), (3, 3), [], "equation 'ij,jk->k' is not supported"),
    "einsum reduction": (einsum("ij->i", "x"), (3, 3), [], "equation 'ij->i' is not supported"),
    "einsum sizes": (einsum("ij,jk->ik", "x", "x"), (2, 3), [], "equation 'ij,jk->ik': label 'j' has sizes 3 and 2"),
    "einsum rank": (einsum("ijk->kji", "x"), (2, 3), [], "operand #0 'ijk' does not label the 2 axes of its shape [2, 3]"),
    "einsum operands": (einsum("ij,jk->ik", "x"), (2, 3), [], "equation 'ij,jk->ik' names 2 operands, the node has 1"),
    "expand": (helper.make_node("Expand", ["x", "s"], ["y"], name="n"), (2, 3), [ints("s", 4, 4)],
               "Expand node 'n': shape [4, 4] does not broadcast with the input shape [2, 3]"),
    "expand to a computed shape": (helper.make_node("Expand", ["x", "x"], ["y"], name="n"), (2, 3), [],
                                   "Expand node 'n': input #1 (shape) must be a constant known at import"),
    "range of an input": (helper.make_node("Range", ["x", "x", "x"], ["y"], name="n"), (), [],
                          "Range node 'n': input #0 (start) must be a constant known at import"),
    "range step 0": (helper.make_node("Range", ["a", "b", "d"], ["y"], name="n"), (2,),
                     [scalar("a", 0), scalar("b", 4), scalar("d", 0)], "Range node 'n': delta is 0"),
    "cumsum along an input axis": (helper.make_node("CumSum", ["x", "x"], ["y"], name="n"), (2, 3), [],
                                   "CumSum node 'n': input #1 (axis) must be a constant known at import"),
    "group count": (helper.make_node("GroupNormalization", ["x", "s", "s"], ["y"], name="n", num_groups=4), (2, 6, 3),
                    [numpy_helper.from_array(np.ones(6, np.float32), "s")],
                    "GroupNormalization node 'n': num_groups 4 does not divide the 6 channels of shape [2, 6, 3]"),
    "trilu of a vector": (helper.make_node("Trilu", ["x"], ["y"], name="n"), (3,), [],
                          "Trilu node 'n': the input must have rank 2 or more, got shape [3]"),
    "gather elements rank": (helper.make_node("GatherElements", ["x", "i"], ["y"], name="n"), (2, 3), [ints("i", 0)],
                             "GatherElements node 'n': indices of shape [1] do not fit data of shape [2, 3]"),
    "gather elements size": (helper.make_node("GatherElements", ["x", "i"], ["y"], name="n", axis=1), (2, 3),
                             [numpy_helper.from_array(np.zeros((3, 1), np.int64), "i")],
                             "indices of shape [3, 1] do not fit data of shape [2, 3] (same rank, no larger outside axis 1)"),
    "3-D conv": (helper.make_node("Conv", ["x", "w"], ["y"], name="n"), (1, 1, 2, 2, 2),
                 [numpy_helper.from_array(np.ones((1, 1, 1, 1, 1), np.float32), "w")],
                 "Conv node 'n': only 1-D and 2-D windows (input [N, C, L] or [N, C, H, W]) are supported, "
                 "got shape [1, 1, 2, 2, 2]"),
}  # fmt: skip


@pytest.mark.parametrize("node, shape, initializers, message", CONSTANT_INPUTS_AND_SHAPES.values(),
                         ids=CONSTANT_INPUTS_AND_SHAPES.keys())
def test_unsupported_use_of_a_new_op_names_the_node(node, shape, initializers, message):
    opsets = [helper.make_opsetid("", 21)]
    raises(model([node], shape=shape, initializers=initializers, opsets=opsets), message)


def test_split_axis_out_of_range():
    node = helper.make_node("Split", ["x"], ["y", "z"], name="sp", axis=5)
    raises(model([node], outputs=("y", "z")), "Split node 'sp': axis 5 is out of range for rank 2")


def test_in_range_negative_axis_is_normalized():
    text = str(graphopt.from_onnx(model([helper.make_node("Softmax", ["x"], ["y"], axis=-2)])))
    assert "axis = 0" in text


@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff", model([helper.make_node("Relu", ["x"], ["y"])]).SerializeToString()[:-5]])
def test_corrupt_bytes(data):
    raises(data, "the model bytes: not an ONNX model (protobuf does not decode)")


def test_initializer_not_matching_its_dims_is_named():
    weight = numpy_helper.from_array(np.ones(3, np.float32), "w")
    weight.dims[:] = [4]
    raises(model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[weight]), "initializer 'w' (dims [4]) cannot be read")


def test_missing_external_data_file(tmp_path: Path):
    path = tmp_path / "ext.onnx"
    weight = numpy_helper.from_array(np.ones(3, np.float32), "w")
    onnx.save(model([helper.make_node("Add", ["x", "w"], ["y"])], initializers=[weight]), path,
              save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert graphopt.from_onnx(path) is not None
    (tmp_path / "ext.bin").unlink()
    raises(path, f"initializer 'w': its external data file {tmp_path / 'ext.bin'} does not exist")


@pytest.mark.parametrize("source, kind", [(None, "NoneType"), (123, "int")])
def test_not_a_model(source, kind):
    raises(source, f"from_onnx takes a path, bytes or an onnx.ModelProto, not {kind}")


def test_two_nodes_writing_one_output():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    raises(model(nodes), "Neg node 'b': output 'y' is already defined by Relu node 'a'")


def dynamic_model() -> onnx.ModelProto:
    m = model([helper.make_node("Relu", ["x"], ["y"])])
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    return m


@pytest.mark.parametrize("dims", [(99999999999999999999, 3), (0, 3), (-1, 3)])
def test_input_dimensions_positive_and_bounded(dims):
    raises(dynamic_model(), "input 'x' has shape", shapes={"x": dims})


def test_empty_file_and_model(tmp_path: Path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    raises(path, "empty.onnx: empty ONNX model (no graph)")
    raises(b"", "empty ONNX model (no graph)")


def test_model_without_default_domain_opset():
    m = model([helper.make_node("Relu", ["x"], ["y"])], opsets=[helper.make_opsetid("com.microsoft", 1)])
    raises(m, "imports no opset of the default ONNX domain")


def test_directory(tmp_path: Path):
    raises(tmp_path, "is a directory, not an ONNX model")


# ------------------------------------------------------------------------- the tools


def test_graph_import_refuses_huge_shape(tmp_path: Path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(dynamic_model(), path)
    code, out, err = run_in_process(graph_import.main, path, "--shape", "x=99999999999999999999,3", capsys=capsys)
    assert code == 1 and out == ""
    assert err.startswith("graph-import: error: input 'x' has shape [99999999999999999999, 3]")


def test_graph_import_directory(tmp_path: Path, capsys):
    code, _, err = run_in_process(graph_import.main, tmp_path, capsys=capsys)
    assert code == 1 and "is a directory" in err


@pytest.fixture
def add_relu(tmp_path: Path) -> Path:
    path = tmp_path / "add_relu.mlir"
    path.write_text(ADD_RELU + "func.func private @declared(tensor<4xf32>) -> tensor<4xf32>\n")
    return path


def test_graph_run_corrupt_npz(add_relu: Path, tmp_path: Path, capsys):
    npz = tmp_path / "in.npz"
    np.savez(npz, a=np.ones((4, 8), np.float32), b=np.ones(8, np.float32))
    npz.write_bytes(npz.read_bytes()[:-30])
    code, _, err = run_in_process(graph_run.main, add_relu, "--inputs", npz, capsys=capsys)
    assert code == 1 and err.startswith("graph-run: error: ") and "in.npz" in err and "Traceback" not in err


def test_graph_run_entry_is_a_declaration(add_relu: Path, capsys):
    code, _, err = run_in_process(graph_run.main, add_relu, "--entry", "declared", capsys=capsys)
    assert code == 1 and "@declared is a declaration" in err


def test_bad_graphopt_threads(monkeypatch):
    monkeypatch.setenv("GRAPHOPT_THREADS", "abc")
    with pytest.raises(graphopt.GraphoptError, match="GRAPHOPT_THREADS='abc'"):
        default_threads()
    monkeypatch.setenv("GRAPHOPT_THREADS", "2")
    assert default_threads() == 2
