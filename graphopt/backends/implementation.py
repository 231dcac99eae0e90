"""The implementation backend: a group bound to an implementation of its own (Slapo's `.replace`).

    graphopt.register_implementation("my_relu", lambda x: np.maximum(x, 0))

    %r = graph.fused(%x) {name = "relu_0", mode = "fallback", graph.implementation = "my_relu"} : ... { ... }

The attribute `graph.implementation` binds a group (of either mode) to the implementation
registered under that name; partition then puts the group, whole, on this backend
(`RegistryTargets.binding`), and its step calls the implementation. `graphopt.compile(m,
implementations={"relu_0": fn})` sets the attribute on the groups it names. An implementation
is either

- a function on NumPy arrays (a def, a lambda, a method, a functools.partial, a NumPy ufunc):
  called with the group's inputs, it returns its outputs (an array, or a tuple of them), or
- a `Kernel` object (any backend's): called as `kernel(inputs, outputs)`, it fills the outputs.

Implementations are registered with `register_implementation`, or from another package
through an entry point in the `graphopt.implementations` group naming the function or Kernel
object (so graph-opt and graph-run find them too):

    [project.entry-points."graphopt.implementations"]
    my_dense = "mypackage.kernels:dense_relu"

`supports` checks an implementation against the group's signature by calling it once on zeros
of the group's input types: it must return (or write) as many arrays as the group has results,
of their shapes and dtypes, without raising. A native kernel (one with a `native` entry) is not
called there, as it could write past arrays of the wrong size: it must have been compiled for a
group of the same signature. A function's results are checked again on every call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from graphopt.backends import Backend
from graphopt.backends.costs import machine
from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.runtime.arrays import aligned_array
from graphopt.runtime.executable import Kernel

IMPLEMENTATION = "graph.implementation"
"""Discardable attribute of a group: the name of the registered implementation that runs it."""

_implementations: dict[str, Callable] = {}


def register_implementation(name: str, implementation: Callable) -> None:
    """Make `implementation` (a function on NumPy arrays, or a Kernel) the one named `name`
    (replacing one of that name)."""
    if not callable(implementation):
        raise GraphoptError(f"implementation '{name}' must be a function on NumPy arrays or a Kernel, got {type(implementation).__name__}")
    _implementations[name] = implementation


def unregister_implementation(name: str) -> None:
    _implementations.pop(name, None)


def registered_implementation(name: str) -> Callable | None:
    """The implementation registered as `name` (by `register_implementation` or an entry point)."""
    _load_plugins()
    return _implementations.get(name)


_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for entry in entry_points(group="graphopt.implementations"):
            try:
                implementation = entry.load()
            except Exception as e:  # another package's code: say which entry point failed
                raise GraphoptError(f"the graphopt.implementations entry point '{entry.name}' ({entry.value}) "
                                    f"does not load: {type(e).__name__}: {e}") from None
            _implementations.setdefault(entry.name, implementation)


def bound_implementation(group: Operation) -> str | None:
    """The name of the implementation `group` is bound to, if any."""
    attribute = group.attributes.get(IMPLEMENTATION)
    return attribute.data if isinstance(attribute, StringAttr) else None


def _returns_outputs(implementation: Callable) -> bool:
    """Is `implementation` a function on NumPy arrays returning the outputs (rather than a
    Kernel object, called as kernel(inputs, outputs))?"""
    return inspect.isroutine(implementation) or isinstance(implementation, (functools.partial, np.ufunc))


class ImplementationBackend(Backend):
    """Runs each group with the implementation its `graph.implementation` names; accepts only
    groups bound to a registered implementation that fits their signature."""

    name = "implementation"

    def supports(self, group: Operation) -> str | None:
        name = bound_implementation(group) if isinstance(group, graph.FusedOp) else None
        if name is None:
            return f"only a group with {IMPLEMENTATION} runs on an implementation of its own"
        implementation = registered_implementation(name)
        if implementation is None:
            registered = ", ".join(sorted(_implementations)) or "none"
            return f"no implementation named '{name}' is registered (registered: {registered})"
        kernel = _kernel(group, implementation)
        if getattr(kernel, "native", None) is not None:
            return None
        inputs = [aligned_array(np.zeros(shape, dtype)) for shape, dtype in map(_signature, group.operands)]
        outputs = [aligned_array(np.zeros(shape, dtype)) for shape, dtype in map(_signature, group.results)]
        try:
            with np.errstate(all="ignore"):
                kernel(inputs, outputs)
        except GraphoptError as e:
            return str(e)
        except Exception as e:  # the user's code: any failure refuses the group, with its message
            return f"implementation '{name}' fails on inputs of the group's signature ({_describe(group.operands)}): {type(e).__name__}: {e}"
        return None

    def compile(self, groups: Sequence[Operation], threads: int) -> list[Kernel]:
        """Each group's implementation; one no longer registered (a saved Executable loaded in
        another process than the one `compile(implementations=...)` bound it in) is an error."""
        kernels = []
        for group in groups:
            name = bound_implementation(group)
            implementation = registered_implementation(name)
            if implementation is None:
                raise GraphoptError(f"group '{group.group_name.data}' is bound to implementation '{name}', which is not "
                                    "registered in this process (register it with register_implementation before loading "
                                    "a saved Executable that uses it)")
            kernels.append(_kernel(group, implementation))
        return kernels

    def estimate(self, group: Operation) -> float:
        """Unknown code: as NumPy op by op would run the group."""
        return machine().numpy_time(group)


def _kernel(group: graph.FusedOp, implementation: Callable) -> Kernel:
    if _returns_outputs(implementation):
        return FunctionKernel(implementation, bound_implementation(group), group.group_name.data,
                              [_signature(r) for r in group.results])
    return implementation


class FunctionKernel:
    """A function on NumPy arrays as a Kernel: its results, checked against the group's
    signature, are copied into the outputs."""

    def __init__(self, function: Callable, name: str, group: str, results: list[tuple[tuple[int, ...], np.dtype]]):
        self.function = function
        self.name = name
        self.group = group
        self.results = results

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        returned = self.function(*inputs)
        arrays = returned if isinstance(returned, (tuple, list)) else (returned,)
        got = [(tuple(np.shape(a)), np.asarray(a).dtype) for a in arrays]
        if got != self.results:
            raise GraphoptError(f"implementation '{self.name}' of group '{self.group}' returns {_format(got)}; "
                                f"the group's results are {_format(self.results)}")
        for out, array in zip(outputs, arrays):
            np.copyto(out, array)


def _signature(value: SSAValue) -> tuple[tuple[int, ...], np.dtype]:
    return tuple(value.type.get_shape()), np.dtype(numpy_dtype(value.type.get_element_type()))


def _format(signature: Sequence[tuple[tuple[int, ...], np.dtype]]) -> str:
    return "(" + ", ".join(f"{list(shape)} {dtype}" for shape, dtype in signature) + ")"


def _describe(values: Sequence[SSAValue]) -> str:
    return _format([_signature(v) for v in values])
