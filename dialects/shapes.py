"""Shape rules of the graph dialect, shared by op verifiers and the graph builder.

Every function works on plain tuples of ints and raises `ShapeError` with a message
that names the offending operand or attribute; the op verifier prefixes the op name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape or attribute rule of the graph dialect is violated."""


def fmt(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into [0, rank)."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    normalized = tuple(normalize_axis(a, rank, "axis") for a in axes)
    if len(set(normalized)) != len(normalized):
        raise ShapeError(f"axes {list(axes)} repeat an axis")
    return tuple(sorted(normalized))


def broadcast(*shapes: Sequence[int], names: Sequence[str] | None = None) -> Shape:
    """NumPy broadcasting of any number of shapes."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            labels = names or [f"#{k}" for k in range(len(shapes))]
            described = ", ".join(f"'{n}' {fmt(s)}" for n, s in zip(labels, shapes))
            raise ShapeError(f"operands {described} are not broadcast-compatible")
        result.append(dims.pop() if dims else 1)
    return tuple(result)


def broadcast_to(shape: Shape, target: Shape) -> Shape:
    """NumPy's broadcast_to: aligned right, each dim of `shape` is 1 or the target's."""
    leading = len(target) - len(shape)
    if leading < 0 or any(d not in (1, t) for d, t in zip(shape, target[leading:])):
        raise ShapeError(f"input {fmt(shape)} cannot be broadcast to {fmt(target)}")
    return tuple(target)


def reshape(shape: Shape, target: Shape) -> Shape:
    if _count(shape) != _count(target):
        raise ShapeError(
            f"cannot reshape {fmt(shape)} ({_count(shape)} elements) "
            f"to {fmt(target)} ({_count(target)} elements)"
        )
    return tuple(target)


def transpose(shape: Shape, perm: Sequence[int]) -> Shape:
    if sorted(perm) != list(range(len(shape))):
        raise ShapeError(f"perm {list(perm)} is not a permutation of {len(shape)} axes")
    return tuple(shape[p] for p in perm)


def slice_(shape: Shape, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int]) -> Shape:
    """Python slicing per axis: negative starts/ends count from the end, clamped."""
    for label, values in (("starts", starts), ("ends", ends), ("steps", steps)):
        if len(values) != len(shape):
            raise ShapeError(f"{label} has {len(values)} entries, input has rank {len(shape)}")
    if any(s <= 0 for s in steps):
        raise ShapeError(f"steps {list(steps)} must be positive")
    return tuple(len(range(*slice(b, e, s).indices(d))) for d, b, e, s in zip(shape, starts, ends, steps))


def concat(shapes: Sequence[Shape], axis: int) -> Shape:
    if not shapes:
        raise ShapeError("needs at least one input")
    rank = len(shapes[0])
    axis = normalize_axis(axis, rank)
    for i, s in enumerate(shapes):
        if len(s) != rank or any(s[d] != shapes[0][d] for d in range(rank) if d != axis):
            raise ShapeError(
                f"input #{i} {fmt(s)} does not match input #0 {fmt(shapes[0])} outside axis {axis}"
            )
    return shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1 :]


def pad(shape: Shape, pads: Sequence[int]) -> Shape:
    rank = len(shape)
    if len(pads) != 2 * rank:
        raise ShapeError(f"pads has {len(pads)} entries, expected {2 * rank} (begins then ends)")
    if any(p < 0 for p in pads):
        raise ShapeError(f"pads {list(pads)} must be non-negative")
    return tuple(d + pads[i] + pads[rank + i] for i, d in enumerate(shape))


def gather(data: Shape, indices: Shape, axis: int) -> Shape:
    axis = normalize_axis(axis, len(data))
    if data[axis] == 0 and math.prod(indices) > 0:
        raise ShapeError(f"cannot take indices from axis {axis} of size 0")
    return data[:axis] + tuple(indices) + data[axis + 1 :]


def reduce(shape: Shape, axes: Sequence[int], keepdims: bool) -> Shape:
    reduced = normalize_axes(axes, len(shape))
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


def matmul(a: Shape, b: Shape) -> Shape:
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"operands must have rank >= 2, got 'a' {fmt(a)} and 'b' {fmt(b)}")
    if a[-1] != b[-2]:
        raise ShapeError(f"contraction mismatch: 'a' {fmt(a)} has K={a[-1]}, 'b' {fmt(b)} has K={b[-2]}")
    batch = broadcast(a[:-2], b[:-2], names=("a batch", "b batch"))
    return batch + (a[-2], b[-1])


def window_output(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int) -> int:
    """Output length of a convolution/pooling window along one axis (floor mode)."""
    span = dilation * (kernel - 1) + 1
    padded = size + pad_begin + pad_end
    if padded < span:
        raise ShapeError(f"window of extent {span} does not fit input of size {size} padded to {padded}")
    return (padded - span) // stride + 1


def _check_pairs(label: str, values: Sequence[int], count: int, minimum: int) -> None:
    if len(values) != count:
        raise ShapeError(f"{label} has {len(values)} entries, expected {count}")
    if any(v < minimum for v in values):
        raise ShapeError(f"{label} {list(values)} must be >= {minimum}")


def conv2d(x: Shape, w: Shape, strides: Sequence[int], dilations: Sequence[int],
           padding: Sequence[int], groups: int) -> Shape:
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"expects 'x' [N, C, H, W] and 'w' [O, C/groups, KH, KW], got {fmt(x)} and {fmt(w)}")
    _check_pairs("strides", strides, 2, 1)
    _check_pairs("dilations", dilations, 2, 1)
    _check_pairs("padding", padding, 4, 0)
    if groups < 1 or x[1] % groups or w[0] % groups:
        raise ShapeError(f"groups={groups} must divide input channels {x[1]} and output channels {w[0]}")
    if w[1] * groups != x[1]:
        raise ShapeError(f"'w' {fmt(w)} expects {w[1] * groups} input channels, 'x' {fmt(x)} has {x[1]}")
    h = window_output(x[2], w[2], strides[0], dilations[0], padding[0], padding[2])
    wd = window_output(x[3], w[3], strides[1], dilations[1], padding[1], padding[3])
    return (x[0], w[0], h, wd)


def pool2d(x: Shape, kernel: Sequence[int], strides: Sequence[int], padding: Sequence[int]) -> Shape:
    if len(x) != 4:
        raise ShapeError(f"expects 'x' [N, C, H, W], got {fmt(x)}")
    _check_pairs("kernel", kernel, 2, 1)
    _check_pairs("strides", strides, 2, 1)
    _check_pairs("padding", padding, 4, 0)
    if padding[0] >= kernel[0] or padding[2] >= kernel[0] or padding[1] >= kernel[1] or padding[3] >= kernel[1]:
        raise ShapeError(f"padding {list(padding)} must be smaller than kernel {list(kernel)}")
    h = window_output(x[2], kernel[0], strides[0], 1, padding[0], padding[2])
    w = window_output(x[3], kernel[1], strides[1], 1, padding[1], padding[3])
    return (x[0], x[1], h, w)


def _count(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
