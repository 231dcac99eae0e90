"""Measured costs: a group timed alone on a backend, the medians cached on disk.

    cache = CostCache()                                   # ~/.cache/graphopt/costs.json
    costs = measure_all([(cpu, g1), (blas, g1), (cpu, g2)], cache)
    # the missing ones measured together, then cached; a progress bar on a terminal

A cache entry is keyed by the group's canonical text (the group printed alone with its shapes,
without SSA names or its own name), the backend's name and the thread count, in a file written
for one CPU model and format version. Each new measurement rewrites the file atomically (a
temporary file, then os.replace). A corrupt file, or one written for another CPU or format,
is ignored with one warning and rewritten at the next measurement. Without measuring, the
partitioner takes each backend's analytic `estimate` instead.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import io
import json
import math
import os
import platform
import stat
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.printer import Printer

from graphopt.backends import Backend
from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_to_numpy, numpy_dtype
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.backends.steps import compile_kernels, placed_steps
from graphopt.runtime.executable import Executable, Kernel, Step
from graphopt.runtime.thread_pool import usable_cores
from graphopt.transforms.subgraph import group_of, standalone

FORMAT_VERSION = 2
"""2 since 2026-11-25: kernels timed as a plan runs them (`measure`); costs of format 1 are ignored."""
REPEAT = 10
"""Samples per measured kernel; its cost is their median."""
PLAN_REPEAT = 30
"""Rounds of samples of the plans timed whole (`measure_plans`): few plans, each a whole
function, and they decide between plans a few percent apart."""
MIN_SAMPLE_SECONDS = 2e-4
"""A sample runs its kernel at least this long, so the timer's resolution and the Python call
around a short kernel weigh little."""
BATCH = 256
"""Kernels `measure_all` measures together (round-robin) and then caches: an interrupted search
keeps what it measured. The partitioner asks for a group's backends one after another, so they
fall in one batch and see the same load."""
PYTHON_CALL_IN_PLAN_SECONDS = 10e-6
"""What a kernel called from Python (one with no native entry: an ONNX Runtime session) costs
more in a plan than timed alone, added to its measured cost: called again and again alone, its
state stays in the caches; in a plan it runs once between other kernels. On shufflenet at one
thread (2026-11-25) each of 75 ORT sessions took a median 11 us more in the plan than alone,
the plan 8 to 12 us per session more than their sum."""
SMALL_INT_BOUND = 4
"""Random integer inputs lie in [0, SMALL_INT_BOUND), valid as indices of most axes."""


# ----------------------------------------------------------------------------------------
# A group alone
# ----------------------------------------------------------------------------------------


def canonical_text(group: Operation) -> str:
    """`group` printed alone with its shapes; the same for groups that differ only in SSA names,
    group name and the values of constant operands (costs do not depend on them).

        %3 = graph.relu %x : tensor<4xf32>    and    %y = graph.relu %0 : tensor<4xf32>
        both print as  func.func @group(%0 : tensor<4xf32>) -> tensor<4xf32> { %1 = graph.relu %0 ... }

    A constant prints as one zero with its type as an attribute, `graph.constant dense<0.0> :
    tensor<1xf32> {type = tensor<512x512x3x3xf32>}`: a splat of its own shape would be built and
    read back element by element (0.4 s for that weight, most of a ResNet-50 search's time).
    """
    function = standalone(group)
    for op in function.walk():
        if isinstance(op, graph.ConstantOp):
            op.attributes["type"] = op.result.type
            op.attributes["value"] = DenseIntOrFPElementsAttr.from_list(TensorType(op.result.type.get_element_type(), [1]), [0])
    stream = io.StringIO()
    Printer(stream=stream).print_op(function)
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
    """Threads a kernel may use, as graphopt.compile chooses them by default: GRAPHOPT_THREADS,
    else the cores this process may run on (the most the cpu backend splits a kernel into)."""
    from graphopt.errors import GraphoptError

    text = os.environ.get("GRAPHOPT_THREADS")
    if text is None:
        return usable_cores()
    if not text.strip().isdecimal() or int(text) < 1:
        raise GraphoptError(f"GRAPHOPT_THREADS={text!r}: expected a positive number of threads")
    return int(text)


def measure(pairs: Sequence[tuple[Backend, Operation]], repeat: int = REPEAT, threads: int | None = None,
            on_sample: Callable[[], object] | None = None) -> list[float]:
    """Median seconds of one run of each group, compiled alone on its backend, on random inputs.

        seconds = measure([(get_backend("blas"), group), (get_backend("cpu"), group)])

    The groups of one backend are compiled together, for `threads` (default: `default_threads()`). Each sample runs a kernel for at least
    MIN_SAMPLE_SECONDS (as many calls as that takes), and samples go round-robin over all the
    kernels, so a change of load on the machine falls on all of them alike rather than on the
    one measured at that moment. `on_sample` is called after each sample. A kernel is timed as
    a plan runs it: a native one called at its address (`_kernel_call`), each sample after one
    untimed call where a call is shorter than a sample (in a plan its inputs were just written
    by the kernel before it), any other
    through its Python call, its samples cold, plus PYTHON_CALL_IN_PLAN_SECONDS. On shufflenet
    at one thread (2026-11-25) the sum of the cpu kernels alone came to 1.02 and 1.07 of the
    plan run whole (0.72 to 0.98 with cold samples, 0.74 before, through the Python call and
    with 3 us charged per kernel), the ORT sessions' to 0.98 (0.86 before; 1.25 with warm samples).
    """
    runs = _compiled_runs(pairs, threads or default_threads())
    native = [is_native for _, is_native in runs]
    # a short kernel's inputs fill the caches in a large part of its call: warm them, as the
    # kernel before it in a plan does; a long one is timed cold (its warm call would double its time)
    warm = [is_native and _seconds_per_call(run, 1) < MIN_SAMPLE_SECONDS for run, is_native in runs]
    samples = _round_robin_samples([run for run, _ in runs], repeat, on_sample, warm=warm)
    return [statistics.median(times) + (0.0 if is_native else PYTHON_CALL_IN_PLAN_SECONDS)
            for times, is_native in zip(samples, native)]


def measure_plans(functions: Sequence[FuncOp], threads: int | None = None, quiet: bool = False,
                  compiled: list[Step] | None = None) -> list[float]:
    """Median seconds of one run of each placed function (every op of its block a group with a
    `backend`, as partition leaves it), compiled whole into an Executable and called on random
    inputs: what a plan costs as it will run, its kernels in sequence, native runs joined.

        seconds = measure_plans([placed_function_1, placed_function_2], threads=1)

    PLAN_REPEAT rounds of one sample of each plan, each round in another order (rotated), each
    sample after one untimed call of its plan (so the caches hold the plan's own data, as when
    it runs again and again, not the plan timed before). A plan's seconds are paired with the
    first plan's: the first's median times the median, over the rounds, of the plan's sample
    over the first's in that round, so a change of load between rounds cancels out of the
    comparison. The plans' kernels are compiled together (a kernel several plans share compiles
    once) and, with `compiled`, their steps appended to it (graphopt.compile takes the kept
    plan's kernels from them); no timing is cached. A tqdm progress bar counts the samples when
    stderr is a terminal, unless `quiet`."""
    threads = threads or default_threads()
    plans = [placed_steps(function) for function in functions]
    every_step = [step for steps in plans for step in steps]
    compile_kernels(every_step, threads)
    if compiled is not None:
        compiled += every_step
    runs = []
    for function, steps in zip(functions, plans):
        executable = Executable(function.parent_op(), function, steps, threads)
        inputs = [aligned_array(a) for a in random_arrays([a.type for a in function.body.block.args])]
        outputs = tuple(aligned_empty(v.type.get_shape(), numpy_dtype(v.type.get_element_type()))
                        for v in executable.results)
        run = functools.partial(executable, *inputs, out=outputs)
        run()  # warm up: buffers, sessions, page faults
        runs.append(run)
    show = not quiet and sys.stderr.isatty()
    with tqdm(total=PLAN_REPEAT * len(runs), desc="timing whole plans", unit="sample", disable=not show) as bar:
        samples = _round_robin_samples(runs, PLAN_REPEAT, bar.update, warm=[True] * len(runs))
    first = statistics.median(samples[0])
    return [first * statistics.median(s / f for s, f in zip(times, samples[0])) for times in samples]


def _round_robin_samples(runs: Sequence[Callable[[], object]], repeat: int,
                         on_sample: Callable[[], object] | None, warm: Sequence[bool]) -> list[list[float]]:
    """Seconds of one call of each run, `repeat` samples each: round-robin, round r starting at
    run r (so no run always follows the same one), a sample being as many calls as take
    MIN_SAMPLE_SECONDS (where `warm[i]`, after one untimed call); samples[i][r] is run i's in round r."""
    calls = [max(1, math.ceil(MIN_SAMPLE_SECONDS / _seconds_per_call(run, 1))) for run in runs]
    samples: list[list[float]] = [[] for _ in runs]
    for round_ in range(repeat):
        for step in range(len(runs)):
            index = (round_ + step) % len(runs)
            if warm[index]:
                runs[index]()
            samples[index].append(_seconds_per_call(runs[index], calls[index]))
            if on_sample is not None:
                on_sample()
    return samples


def _compiled_runs(pairs: Sequence[tuple[Backend, Operation]], threads: int) -> list[tuple[Callable[[], object], bool]]:
    """For each pair, a call of its kernel on random inputs into preallocated outputs, run once,
    and whether the kernel is native (`Kernel.native`)."""
    functions = [standalone(group) for _, group in pairs]
    kernels: list[Kernel | None] = [None] * len(pairs)
    for backend in {id(b): b for b, _ in pairs}.values():
        positions = [i for i, (b, _) in enumerate(pairs) if b is backend]
        compiled = backend.compile([group_of(functions[i]) for i in positions], threads)
        for position, kernel in zip(positions, compiled, strict=True):
            kernels[position] = kernel
    runs = []
    for function, kernel in zip(functions, kernels):
        arguments = function.body.block.args
        arrays = dict(zip(arguments, random_arrays([a.type for a in arguments])))
        group = group_of(function)
        results = group.results
        inputs = [aligned_array(arrays[v] if v in arrays else dense_to_numpy(v.owner.value)) for v in group.operands]
        outputs = [aligned_empty(r.type.get_shape(), numpy_dtype(r.type.get_element_type())) for r in results]
        run = _kernel_call(kernel, inputs, outputs)
        run()  # warm up: page faults, lazy initialization
        runs.append((run, getattr(kernel, "native", None) is not None))
    return runs


def _kernel_call(kernel: Kernel, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Callable[[], object]:
    """A call of `kernel` on these arrays. A native kernel (`Kernel.native`) is called at its
    address with the arrays' addresses fixed, as the Executable calls consecutive native
    kernels from native code: its Python call reads every array's address again (about 2 us
    on a small kernel that takes 0.4 us in a plan, shufflenet 2026-11-25)."""
    native = getattr(kernel, "native", None)
    if native is None:
        return functools.partial(kernel, inputs, outputs)
    arrays = (*inputs, *native.constants, *outputs)
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(arrays))(native.address)
    call = functools.partial(function, *[a.ctypes.data for a in arrays])
    call.owners = (kernel, arrays)  # its code and its arrays live while the call does
    return call


def _seconds_per_call(run: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


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


class NotARegularFile(OSError):
    """A cache path naming something that is not a regular file (a FIFO, a device, a directory)
    or that no file can have (a NUL in it): never opened for reading, never replaced."""


def _read_regular(path: Path) -> str | None:
    """The text of the regular file at `path`, None when there is none. Anything else there is
    refused (NotARegularFile) before it is opened, so a FIFO cannot block us and a device is not
    touched, and again after (with O_NONBLOCK), in case it was swapped in between."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError as e:
        raise NotARegularFile(f"not a usable path ({e})") from None
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        return stream.read().decode()


class CostCache:
    """Measured seconds in a JSON file, for this CPU model.

        cache = CostCache()                          # default_cache_path()
        cache = CostCache("build/costs.json")
        key = cache.key("blas", group)
        cache.get(key)                               # None until measured
        cache.put({key: 1.2e-3})                     # the file is rewritten atomically

    The file: {"format": 1, "cpu": "<model name>", "costs": {"<sha256 of the key text>": seconds}}.
    Only a regular file is read or replaced: at a path naming anything else the costs stay in
    memory, with one warning. Writers merge: each write locks the cache's directory
    (fcntl.flock), re-reads the file, adds its entries and replaces the file, so processes
    measuring into one file keep each other's entries.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.cpu = cpu_model()
        self.unwritable = False
        self.costs = self._load()

    @staticmethod
    def key(backend_name: str, group: Operation, threads: int | None = None) -> str:
        """The entry of `group` run on backend `backend_name` with `threads` (default: `default_threads()`)."""
        text = f"{backend_name}\n{threads or default_threads()} threads\n{canonical_text(group)}"
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> float | None:
        return self.costs.get(key)

    def put(self, seconds: dict[str, float]) -> None:
        """Add these entries (key: seconds) and rewrite the file, merged with what is on disk."""
        self.costs.update(seconds)
        self._save()

    def _load(self) -> dict[str, float]:
        try:
            text = _read_regular(self.path)
            return {} if text is None else self._parse(text)
        except NotARegularFile as e:
            warnings.warn(f"cannot use the cost cache {self.path}: {e}; costs are kept for this process only",
                          stacklevel=3)
            self.unwritable = True
        except (OSError, ValueError, OverflowError, RecursionError, UnusableCache) as e:
            warnings.warn(f"ignoring the cost cache {self.path}: {e}; it will be rewritten", stacklevel=3)
        return {}

    def _parse(self, text: str) -> dict[str, float]:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("costs"), dict):
            raise UnusableCache("not a cost cache")
        if data.get("format") != FORMAT_VERSION:
            raise UnusableCache(f"format {data.get('format')!r}, expected {FORMAT_VERSION}")
        if data.get("cpu") != self.cpu:
            raise UnusableCache(f"measured on another CPU ({data.get('cpu')!r}, this is {self.cpu!r})")
        costs = {key: float(seconds) for key, seconds in data["costs"].items() if isinstance(seconds, (int, float))}
        if len(costs) != len(data["costs"]) or not all(math.isfinite(s) and s >= 0 for s in costs.values()):
            raise UnusableCache("a cost is not a number of seconds")
        return costs

    def _on_disk(self, path: Path) -> dict[str, float]:
        """The entries of the cache file now (none if it is missing or unusable); refuses
        (NotARegularFile) a path naming something other than a regular file."""
        text = _read_regular(path)
        try:
            return {} if text is None else self._parse(text)
        except (ValueError, OverflowError, RecursionError, UnusableCache):
            return {}

    def _save(self) -> None:
        """Under a lock on the cache's directory, merge the file's entries into ours, write the
        whole cache to a temporary file next to it, then rename it over the cache. A cache that
        cannot be written (a read-only directory, a full disk, a path naming no regular file)
        keeps its costs in memory, with one warning: measuring still works, it is only not
        remembered."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            target = Path(os.path.realpath(self.path))
            lock = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.costs = {**self._on_disk(target), **self.costs}
                descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
                try:
                    with os.fdopen(descriptor, "w") as stream:
                        json.dump({"format": FORMAT_VERSION, "cpu": self.cpu, "costs": self.costs}, stream, indent=1)
                    os.replace(temporary, target)
                except BaseException:
                    os.unlink(temporary)
                    raise
            finally:
                os.close(lock)
        except (OSError, ValueError) as e:
            if not self.unwritable:
                warnings.warn(f"cannot write the cost cache {self.path}: {e}; costs are kept for this process only",
                              stacklevel=4)
            self.unwritable = True


# ----------------------------------------------------------------------------------------
# Costs for the partitioner
# ----------------------------------------------------------------------------------------


def measure_all(pairs: Sequence[tuple[Backend, Operation]], cache: CostCache, quiet: bool = False,
                threads: int | None = None) -> list[float]:
    """Seconds of each (backend, group): cached, else measured (the missing ones together, in
    batches of BATCH, each cached when measured). A tqdm progress bar counts the samples when
    stderr is a terminal, unless `quiet`."""
    keys = [cache.key(backend.name, group, threads) for backend, group in pairs]
    missing = list({key: pair for key, pair in zip(keys, pairs) if cache.get(key) is None}.items())
    if missing:
        show = not quiet and sys.stderr.isatty()
        with tqdm(total=REPEAT * len(missing), desc="measuring kernels", unit="sample", disable=not show) as bar:
            for start in range(0, len(missing), BATCH):
                batch = missing[start : start + BATCH]
                seconds = measure([pair for _, pair in batch], REPEAT, threads, on_sample=bar.update)
                cache.put({key: s for (key, _), s in zip(batch, seconds)})
    return [cache.get(key) for key in keys]
