"""Measured costs: a group timed alone on a backend, the medians cached on disk.

    cache = CostCache()                                   # ~/.cache/graphopt/costs.json
    seconds = measured_cost(get_backend("blas"), group, cache)        # measured once, then cached
    seconds = measured_cost(get_backend("blas"), group, cache, measure=False)  # backend.estimate
    costs = measure_all([(cpu, g1), (blas, g1), (cpu, g2)], cache)    # progress bar on a terminal

A cache entry is keyed by the group's canonical text (the group printed alone with its shapes,
without SSA names or its own name), the backend's name and the thread count, in a file written
for one CPU model and format version. Each new measurement rewrites the file atomically (a
temporary file, then os.replace). A corrupt file, or one written for another CPU or format,
is ignored with one warning and rewritten at the next measurement.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region
from xdsl.printer import Printer

from graphopt.backends import Backend
from graphopt.dialects import graph
from graphopt.dialects.attributes import numpy_dtype
from graphopt.lowering.jit import aligned_array, aligned_empty

FORMAT_VERSION = 1
SMALL_INT_BOUND = 4
"""Random integer inputs lie in [0, SMALL_INT_BOUND), valid as indices of most axes."""


# ----------------------------------------------------------------------------------------
# A group alone
# ----------------------------------------------------------------------------------------


def standalone(group: Operation) -> FuncOp:
    """A function @group (in a module of its own) whose body is a clone of `group`, reading
    the function's arguments (one per distinct operand) and returning its results; the clone
    keeps no name hints, and a graph.fused clone is named "group" and placed on no backend."""
    sources = list(dict.fromkeys(group.operands))
    block = Block(arg_types=[v.type for v in sources])
    alone = group.clone(dict(zip(sources, block.args)), clone_name_hints=False)
    if isinstance(alone, graph.FusedOp):
        alone.attributes["name"] = StringAttr("group")
        alone.attributes.pop("backend", None)
    block.add_ops([alone, ReturnOp(*alone.results)])
    function = FuncOp("group", ([v.type for v in sources], [r.type for r in alone.results]), Region(block))
    ModuleOp([function])  # backends and the interpreter look the group's module up
    return function


def canonical_text(group: Operation) -> str:
    """`group` printed alone with its shapes; the same for groups that differ only in SSA names
    and group name.

        %3 = graph.relu %x : tensor<4xf32>    and    %y = graph.relu %0 : tensor<4xf32>
        both print as  func.func @group(%0 : tensor<4xf32>) -> tensor<4xf32> { %1 = graph.relu %0 ... }
    """
    stream = io.StringIO()
    Printer(stream=stream).print_op(standalone(group))
    return stream.getvalue()


def random_arrays(types: Sequence[TensorType], seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays of these types (graph-run's inputs too): standard normal floats,
    small non-negative integers, fair booleans."""
    rng = np.random.default_rng(seed)
    arrays = []
    for t in types:
        shape, dtype = t.get_shape(), numpy_dtype(t.get_element_type())
        if dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        elif np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(0, SMALL_INT_BOUND, shape, dtype=dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def default_threads() -> int:
    """Threads a kernel may use, as graphopt.compile chooses them by default."""
    return int(os.environ.get("GRAPHOPT_THREADS", os.cpu_count() or 1))


def measure(backend: Backend, group: Operation, repeat: int = 10) -> float:
    """Median seconds of one run of `group`, compiled alone on `backend`, on random inputs.

        seconds = measure(get_backend("blas"), group)
    """
    function = standalone(group)
    alone = function.body.block.first_op
    (kernel,) = backend.compile([alone], default_threads())
    inputs = [aligned_array(a) for a in random_arrays([a.type for a in function.body.block.args])]
    outputs = [aligned_empty(r.type.get_shape(), numpy_dtype(r.type.get_element_type())) for r in alone.results]
    kernel(inputs, outputs)  # warm up: page faults, lazy initialization
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        kernel(inputs, outputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ----------------------------------------------------------------------------------------
# The cache
# ----------------------------------------------------------------------------------------


def default_cache_path() -> Path:
    """$XDG_CACHE_HOME/graphopt/costs.json, else ~/.cache/graphopt/costs.json."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphopt" / "costs.json"


def cpu_model() -> str:
    """The 'model name' of /proc/cpuinfo, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


class UnusableCache(Exception):
    """A cache file that is valid JSON but not a cost cache of this CPU and format."""


class CostCache:
    """Measured seconds in a JSON file, for this CPU model.

        cache = CostCache()                          # default_cache_path()
        cache = CostCache("build/costs.json")
        key = cache.key("blas", group)
        cache.get(key)                               # None until measured
        cache.put(key, 1.2e-3)                       # the file is rewritten atomically

    The file: {"format": 1, "cpu": "<model name>", "costs": {"<sha256 of the key text>": seconds}}.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.cpu = cpu_model()
        self.costs = self._load()

    @staticmethod
    def key(backend_name: str, group: Operation) -> str:
        """The entry of `group` run on backend `backend_name` with the default thread count."""
        text = f"{backend_name}\n{default_threads()} threads\n{canonical_text(group)}"
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def put(self, key: str, seconds: float) -> None:
        self.costs[key] = seconds
        self._save()

    def _load(self) -> dict[str, float]:
        if not self.path.exists():
            return {}
        try:
            return self._read()
        except (OSError, ValueError, UnusableCache) as e:
            warnings.warn(f"ignoring the cost cache {self.path}: {e}; it will be rewritten", stacklevel=3)
            return {}

    def _read(self) -> dict[str, float]:
        data = json.loads(self.path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("costs"), dict):
            raise UnusableCache("not a cost cache")
        if data.get("format") != FORMAT_VERSION:
            raise UnusableCache(f"format {data.get('format')!r}, expected {FORMAT_VERSION}")
        if data.get("cpu") != self.cpu:
            raise UnusableCache(f"measured on another CPU ({data.get('cpu')!r}, this is {self.cpu!r})")
        if not all(isinstance(v, (int, float)) for v in data["costs"].values()):
            raise UnusableCache("a cost is not a number")
        return {key: float(seconds) for key, seconds in data["costs"].items()}

    def _save(self) -> None:
        """Write the whole cache to a temporary file next to it, then rename it over the cache."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(descriptor, "w") as stream:
                json.dump({"format": FORMAT_VERSION, "cpu": self.cpu, "costs": self.costs}, stream, indent=1)
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise


# ----------------------------------------------------------------------------------------
# Costs for the partitioner
# ----------------------------------------------------------------------------------------


def measure_all(pairs: Sequence[tuple[Backend, Operation]], cache: CostCache, quiet: bool = False) -> list[float]:
    """Seconds of each (backend, group): cached, else measured and cached. A tqdm progress bar
    counts the measurements when stderr is a terminal, unless `quiet`."""
    keys = [cache.key(backend.name, group) for backend, group in pairs]
    missing = {key: pair for key, pair in zip(keys, pairs) if cache.get(key) is None}
    show = not quiet and sys.stderr.isatty()
    for key, (backend, group) in tqdm(missing.items(), desc="measuring kernels", unit="kernel", disable=not show):
        cache.put(key, measure(backend, group))
    return [cache.get(key) for key in keys]


def measured_cost(backend: Backend, group: Operation, cache: CostCache | None, measure: bool = True) -> float:
    """The cached or newly measured median seconds of `group` on `backend`; with
    `measure=False`, the backend's analytic estimate (the cache is not used)."""
    if not measure:
        return backend.estimate(group)
    (seconds,) = measure_all([(backend, group)], cache, quiet=True)
    return seconds
