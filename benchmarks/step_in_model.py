"""A model's slowest convs inside the model against the same conv alone, graphopt's step and ONNX
Runtime's node, one thread (issue 17, "in_model").

    python benchmarks/step_in_model.py [--models squeezenet,resnet50] [--top 4] [--repeat 15]
                                       [--match 'w[1024, 256, 1, 1]'] [--placements]

graphopt, per conv step: its median in `Executable.profile` (in plan order: its operands as the
steps before left them), its one-step run repeated on the model's buffers ("warm"), the same
after reading `FLUSH_BYTES` each time ("cold": operands and packed w from memory), and repeated
on copies of its operands whose starts are `STAGGER` bytes apart modulo 4 KB ("moved": another
placement). ONNX Runtime: the conv's node in the model's per-node profile
(`model_categories.ort_node_seconds`, matched by (w, x) shape), and a model of the conv alone
(Conv with bias, then the step's residual Add and Relu when it has them): its conv node, and
its whole run, which adds the NCHWc reorders of its input and output (and an Add, Relu that ORT
does not fuse there). Prints one Markdown row per conv (the `top` slowest whose label contains
`match`), microseconds.

--placements: instead, whole calls (interleaved medians, `repeat` blocks) of the model compiled
three times, its buffers allocated as the Executable does ("as is"), each at the start of a page
("page": the same L1 sets for all), and the i-th i * STAGGER bytes past a page ("staggered"),
with ONNX Runtime, and their ratios.
"""

from __future__ import annotations

import argparse
import itertools
from unittest import mock

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphopt
from graphopt.dialects import graph
from graphopt.runtime.arrays import aligned_empty
from graphopt.runtime.executable import Frame
from end_to_end import graphopt_runner, onnxruntime_runner
from model_categories import ort_node_seconds, step_category
from models import BACKENDS, load_model, model_inputs
from timing import interleaved_medians, median_seconds

FLUSH_BYTES = 32 << 20
"""Read before each "cold" call: four times the L3 of a Zen 1 CCX."""
STAGGER = 7 * 64
"""Bytes between the "moved" operands' starts modulo 4 KB: 64 distinct line offsets."""
ORT_CONV_NODES = ("Conv", "FusedConv")


def moved_frame(exe: graphopt.Executable, frame: Frame, step) -> tuple[Frame, list[np.ndarray]]:
    """A frame with the model's constants and copies of the step's operands, the k-th starting
    k * STAGGER bytes past a page; the arrays that hold them."""
    moved, held = Frame(len(exe.slots)), []
    for value, array in exe.constants.items():
        moved.bind(exe.slots[value], array)
    for k, value in enumerate((*step.inputs, *step.outputs)):
        if value in exe.constants:
            continue
        original = frame.arrays[exe.slots[value]]
        start = k * STAGGER % 4096
        page = aligned_empty(original.nbytes + 4096, np.uint8, alignment=4096)
        copy = page[start : start + original.nbytes].view(original.dtype).reshape(original.shape)
        copy[...] = original
        held.append(page)
        moved.bind(exe.slots[value], copy)
    return moved, held


def conv_alone(conv: graph.Conv2dOp, residual: bool, relu: bool) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """An ONNX model of `conv` with bias (then + residual, relu), and its inputs."""
    rng = np.random.default_rng(0)
    x_shape, w_shape = conv.x.type.get_shape(), conv.w.type.get_shape()
    y_shape = conv.result.type.get_shape()
    w = numpy_helper.from_array((rng.standard_normal(w_shape) * 0.05).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], strides=list(conv.get("strides")),
                              dilations=list(conv.get("dilations")), pads=list(conv.get("padding")), group=conv.get("groups"))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    arrays = [rng.standard_normal(x_shape).astype(np.float32)]
    last = "conv"
    if residual:
        inputs.append(helper.make_tensor_value_info("residual", TensorProto.FLOAT, y_shape))
        arrays.append(rng.standard_normal(y_shape).astype(np.float32))
        nodes.append(helper.make_node("Add", [last, "residual"], ["sum"]))
        last = "sum"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["relu"]))
        last = "relu"
    output = helper.make_tensor_value_info(last, TensorProto.FLOAT, y_shape)
    model = helper.make_model(helper.make_graph(nodes, "conv", inputs, [output], [w, b]),
                              opset_imports=[helper.make_opsetid("", 17)])
    return model, arrays


def compare(name: str, top: int, repeat: int, match: str = "") -> None:
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    exe = graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=1)
    profile = exe.profile(*inputs, repeat=repeat)
    frame, runs = exe._frame(), exe._single_step_runs()
    nodes, _ = ort_node_seconds(model, inputs, 1, repeat)
    ort_in_model: dict[tuple, list[float]] = {}
    for args, seconds in nodes.values():
        if args["op_name"] in ORT_CONV_NODES:
            x, w = ([*shape.values()][0] for shape in args["input_type_shape"][:2])
            ort_in_model.setdefault((tuple(w), tuple(x)), []).append(seconds)
    flush = np.ones(FLUSH_BYTES, np.uint8)
    rows = []
    for index in sorted(range(len(exe.steps)), key=lambda i: profile.steps[i].seconds, reverse=True):
        step, run = exe.steps[index], runs[index]
        _, conv = step_category(step)
        key = conv and (tuple(conv.w.type.get_shape()), tuple(conv.x.type.get_shape()))
        if conv is None or run is None or not ort_in_model.get(key):
            continue
        kinds = profile.steps[index].ops
        label = f"{'+'.join(kinds)} w{list(key[0])} x{list(key[1])[1:]}"
        if match not in label:
            continue
        residual = sum(v not in exe.constants for v in step.inputs) > 1
        moved, _held = moved_frame(exe, frame, step)
        warm = median_seconds(lambda: run(frame), repeat)
        cold = median_seconds(lambda: run(frame), repeat, before=flush.sum)
        placed = median_seconds(lambda: run(moved), repeat)
        alone, alone_inputs = conv_alone(conv, residual, "relu" in kinds)
        alone_nodes, alone_run = ort_node_seconds(alone, alone_inputs, 1, repeat)
        alone_conv = sum(s for args, s in alone_nodes.values() if args["op_name"] in ORT_CONV_NODES)
        ort_node = ort_in_model[key].pop(0)
        rows.append((label, profile.steps[index].seconds, warm, cold,
                     placed, ort_node, alone_conv, alone_run))
        if len(rows) == top:
            break
    print(f"\n{name}, 1 thread, us: graphopt step (in model, warm, cold, moved), ORT node (in model), ORT alone (conv node, whole run)")
    print("| conv | in model | warm | cold | moved | ORT in model | ORT alone node | ORT alone run | in model / ORT | warm / ORT alone node |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, ours, warm, cold, placed, ort_node, alone_conv, alone_run in rows:
        print(f"| {label} | {ours * 1e6:.0f} | {warm * 1e6:.0f} | {cold * 1e6:.0f} | {placed * 1e6:.0f} | {ort_node * 1e6:.0f} | "
              f"{alone_conv * 1e6:.0f} | {alone_run * 1e6:.0f} | {ours / ort_node:.2f} | {warm / alone_conv:.2f} |")


def placed_buffers(offset_of_buffer):
    """A stand-in for the Executable's `aligned_empty(size, np.uint8, alignment=CACHE_LINE)` of its
    buffers: the i-th starts offset_of_buffer(i) bytes past a page."""
    count = itertools.count()

    def allocate(size: int, dtype, alignment: int) -> np.ndarray:
        start = offset_of_buffer(next(count))
        return aligned_empty(size + 4096, np.uint8, alignment=4096)[start : start + size]
    return allocate


def compare_placements(name: str, repeat: int) -> None:
    model = load_model(name)
    inputs = model_inputs(model, np.random.default_rng(0))
    rules = {"as is": None, "page": lambda i: 0, "staggered": lambda i: i * STAGGER % 4096}
    calls = {}
    for label, rule in rules.items():
        run = graphopt_runner(graphopt.compile(graphopt.from_onnx(model), backends=BACKENDS, threads=1), inputs)
        with mock.patch("graphopt.runtime.executable.aligned_empty", placed_buffers(rule) if rule else aligned_empty):
            run()  # the first call allocates the buffers
        calls[label] = run
    calls["ORT"] = onnxruntime_runner(model, inputs, 1)
    expected = calls["ORT"]()
    for label in rules:
        np.testing.assert_allclose(calls[label](), expected, rtol=1e-3, atol=1e-3)
    seconds = interleaved_medians(calls, 0.0, repeat)
    print(f"| {name} | " + " | ".join(f"{seconds[label] * 1e3:.2f}" for label in calls) + " | "
          + " | ".join(f"{seconds[label] / seconds['ORT']:.3f}" for label in rules) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet,resnet50")
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--match", default="", help="only convs whose row label contains this")
    parser.add_argument("--placements", action="store_true", help="whole calls with the buffers placed three ways")
    arguments = parser.parse_args()
    if arguments.placements:
        print("| model | as is ms | page ms | staggered ms | ORT ms | as is / ORT | page / ORT | staggered / ORT |")
        print("|---|---|---|---|---|---|---|---|")
    for name in arguments.models.split(","):
        if arguments.placements:
            compare_placements(name, arguments.repeat)
        else:
            compare(name, arguments.top, arguments.repeat, arguments.match)


if __name__ == "__main__":
    main()
