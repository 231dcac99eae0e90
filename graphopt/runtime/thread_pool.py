"""A native thread pool for row chunks (`row_split.py`): kernels split by rows run their chunks on
`threads - 1` worker threads, started once per process, and on the calling thread, handed over
through shared memory instead of through Python.

    pool = ThreadPool.of(threads=2)
    entries = ChunkedEntries(pool, [ChunkedKernel("kernel_3", row_bytes=(256, 0, 256),
                                                  chunks=((rows512.address, 0), (rows512.address, 512)))])
    entries.address("kernel_3")     # void kernel_3(ptr, ptr, ptr): the whole kernel's signature

An entry posts its chunks; it and the workers claim them one at a time (one compare-and-swap on the
job's claim word, `CLAIM_BITS`) and run them; then it spins until every claimed chunk is done. A
worker late for a job (asleep, or waiting for a core of a loaded machine) finds its chunks run by
the caller and claims none: a kernel waits only for chunks that have started. It used to give chunk
i to worker i; on the shared 2-core VM, with another process busy on one core, MobileNet-v2 at
batch 1 (its convs split by channels) then took 46 ms a call at 2 threads against 5 ms at 1, the
caller waiting a scheduler slice for the worker at each kernel. A worker spins on the pool's job
counter for SPIN_ROUNDS pauses after its last job, so the kernels of one model call hand over
without the OS; then it sleeps on a condition variable, and the next job pays an OS wake-up (inside
`workers_awake`, as while `Executable.profile` runs its steps one at a time, they spin until it is
left). Measured on this 2-core VM: an empty two-chunk call took 0.63 µs against 0.55 µs for one
chunk while the worker spun, and 40-150 µs after it slept; Python's ThreadPoolExecutor, used
before, took 87 µs (two OS wake-ups: the worker's, then the caller's).

A pool busy with another caller's kernel (calls from several Python threads at once) makes an
entry run its chunks one after another on its own thread; so does every pool in a forked child,
which has no workers. At exit the workers are stopped and joined before their code is freed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import platform
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.runtime.jit import native_module

SPIN_ROUNDS = 1 << 10
"""Pauses a worker spins for a next job before it sleeps: about 30 us on a Zen 4 host, 10-20 us on
Zen 1, whose `pause` is shorter (docs/cpu-codegen.md, "SqueezeNet on two threads").
It was 2^14 (0.45 ms) until 2026-11-25: with the GPT-2 block's 15 steps split in two, the
worker then spun through the whole call, and with another process on its core the OS took the
core away from it mid-chunk for milliseconds (median 2 threads 4.0-4.3 ms against 1.1 ms at
1 thread, load 2.8); spinning 2^10 pauses, 1.4 ms; not at all, 1.2-1.3 ms. With the core
free, the fastest calls took 0.61, 0.63 and 0.67 ms."""
AWAKE_ROUNDS = 1 << 62
"""A worker's spin inside `workers_awake`: until the spin limit changes back."""
YIELD_AFTER = 1 << 15
"""Pauses (about 0.9 ms) a caller spins for its workers before it yields its core (`sched_yield`) at every
check: a worker still not done may be waiting for that core (the machine is loaded)."""

# The pool's state: one i64 per field, the contended ones on cache lines of their own.
GENERATION, DONE, BUSY, SLEEPERS, CLAIMS = 0, 64, 128, 192, 256
"""Jobs posted so far (workers wait for it to change); chunks of the current job done; 1 while
a caller owns the pool; workers asleep (or about to be) on the condition variable; the current
job's claim word (`CLAIM_BITS`)."""
TASK, ARGUMENTS, STOP, SPIN = 320, 328, 336, 344
"""The current job (`void task(ptr arguments, i64 chunk)`); set to stop the workers; the pauses a
worker spins for a next job before it sleeps (SPIN_ROUNDS, AWAKE_ROUNDS inside `workers_awake`)."""
MUTEX, CONDITION, STATE_BYTES = 384, 512, 640
"""A pthread mutex and condition variable (128 bytes each: more than any libc's)."""
CLAIM_BITS = 12
"""The claim word holds (job's generation << 2 * CLAIM_BITS) | (chunks << CLAIM_BITS) | next
chunk to claim: a thread claims a chunk by one compare-and-swap that also checks the job is
the one it saw posted, so a worker late for a job whose chunks are all taken claims nothing."""


def _runtime_ir(pause: bool) -> str:
    """`worker(ptr pool)`, `run(pool, task, arguments, chunks)`, `stop(pool)`."""
    spin_pause = "  call void @llvm.x86.sse2.pause()\n" if pause else ""
    fields = "".join(
        f"  %{name}.at = getelementptr i8, ptr %pool, i64 {offset}\n"
        for name, offset in [("generation", GENERATION), ("done", DONE), ("busy", BUSY), ("sleepers", SLEEPERS),
                             ("claims", CLAIMS), ("task", TASK), ("arguments", ARGUMENTS), ("stop", STOP),
                             ("spin", SPIN), ("mutex", MUTEX), ("condition", CONDITION)]
    )
    wake = """  call i32 @pthread_mutex_lock(ptr %mutex.at)
  call i32 @pthread_cond_broadcast(ptr %condition.at)
  call i32 @pthread_mutex_unlock(ptr %mutex.at)
"""
    field_mask = (1 << CLAIM_BITS) - 1
    generation_mask = (1 << (64 - 2 * CLAIM_BITS)) - 1
    return f"""
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @sched_yield()
{"declare void @llvm.x86.sse2.pause()" if pause else ""}

define internal void @work(ptr %pool, i64 %generation) {{
entry:
{fields}  %job = and i64 %generation, {generation_mask}
  br label %claim
claim:
  %word = load atomic i64, ptr %claims.at acquire, align 8
  %word.job = lshr i64 %word, {2 * CLAIM_BITS}
  %same.job = icmp eq i64 %word.job, %job
  %word.chunks = lshr i64 %word, {CLAIM_BITS}
  %chunks = and i64 %word.chunks, {field_mask}
  %chunk = and i64 %word, {field_mask}
  %left = icmp ult i64 %chunk, %chunks
  %open = and i1 %same.job, %left
  br i1 %open, label %take, label %exit
take:
  %next = add i64 %word, 1
  %swap = cmpxchg ptr %claims.at, i64 %word, i64 %next acq_rel acquire
  %taken = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %taken, label %call, label %claim
call:
  %task = load ptr, ptr %task.at, align 8
  %arguments = load ptr, ptr %arguments.at, align 8
  call void %task(ptr %arguments, i64 %chunk)
  atomicrmw add ptr %done.at, i64 1 release
  br label %claim
exit:
  ret void
}}

define ptr @worker(ptr %pool) {{
entry:
{fields}  br label %wait
wait:
  %seen = phi i64 [0, %entry], [%posted, %job]
  br label %spin
spin:
  %round = phi i64 [0, %wait], [%round.next, %spin.again]
  %spun.generation = load atomic i64, ptr %generation.at acquire, align 8
  %spun.new = icmp ne i64 %spun.generation, %seen
  br i1 %spun.new, label %job.check, label %spin.again
spin.again:
{spin_pause}  %round.next = add i64 %round, 1
  %spin.limit = load atomic i64, ptr %spin.at monotonic, align 8
  %spun = icmp uge i64 %round.next, %spin.limit
  br i1 %spun, label %sleep, label %spin
sleep:
  call i32 @pthread_mutex_lock(ptr %mutex.at)
  atomicrmw add ptr %sleepers.at, i64 1 seq_cst
  br label %sleep.check
sleep.check:
  %slept.generation = load atomic i64, ptr %generation.at seq_cst, align 8
  %slept.new = icmp ne i64 %slept.generation, %seen
  br i1 %slept.new, label %woken, label %sleep.wait
sleep.wait:
  call i32 @pthread_cond_wait(ptr %condition.at, ptr %mutex.at)
  br label %sleep.check
woken:
  atomicrmw sub ptr %sleepers.at, i64 1 seq_cst
  call i32 @pthread_mutex_unlock(ptr %mutex.at)
  br label %job.check
job.check:
  %posted = phi i64 [%spun.generation, %spin], [%slept.generation, %woken]
  %stop = load atomic i64, ptr %stop.at acquire, align 8
  %stopping = icmp ne i64 %stop, 0
  br i1 %stopping, label %exit, label %job
job:
  call void @work(ptr %pool, i64 %posted)
  br label %wait
exit:
  ret ptr null
}}

define void @run(ptr %pool, ptr %task, ptr %arguments, i64 %chunks) {{
entry:
{fields}  %claim = cmpxchg ptr %busy.at, i64 0, i64 1 acquire monotonic
  %claimed = extractvalue {{ i64, i1 }} %claim, 1
  br i1 %claimed, label %post, label %alone
alone:
  %chunk = phi i64 [0, %entry], [%chunk.next, %alone]
  call void %task(ptr %arguments, i64 %chunk)
  %chunk.next = add i64 %chunk, 1
  %more = icmp ult i64 %chunk.next, %chunks
  br i1 %more, label %alone, label %return
post:
  store ptr %task, ptr %task.at, align 8
  store ptr %arguments, ptr %arguments.at, align 8
  store atomic i64 0, ptr %done.at monotonic, align 8
  %previous = load atomic i64, ptr %generation.at monotonic, align 8
  %generation = add i64 %previous, 1
  %job = and i64 %generation, {generation_mask}
  %job.bits = shl i64 %job, {2 * CLAIM_BITS}
  %chunks.bits = shl i64 %chunks, {CLAIM_BITS}
  %word = or i64 %job.bits, %chunks.bits
  store atomic i64 %word, ptr %claims.at release, align 8
  store atomic i64 %generation, ptr %generation.at seq_cst, align 8
  %sleeping = load atomic i64, ptr %sleepers.at seq_cst, align 8
  %any.sleeping = icmp ne i64 %sleeping, 0
  br i1 %any.sleeping, label %wake, label %own
wake:
{wake}  br label %own
own:
  call void @work(ptr %pool, i64 %generation)
  br label %join
join:
  %join.round = phi i64 [0, %own], [%join.round.next, %join.pausing], [%join.round.next, %join.yielding]
  %done = load atomic i64, ptr %done.at acquire, align 8
  %all.done = icmp eq i64 %done, %chunks
  br i1 %all.done, label %release, label %join.again
join.again:
  %join.round.next = add i64 %join.round, 1
  %join.patient = icmp ult i64 %join.round, {YIELD_AFTER}
  br i1 %join.patient, label %join.pausing, label %join.yielding
join.pausing:
{spin_pause}  br label %join
join.yielding:
  call i32 @sched_yield()
  br label %join
release:
  store atomic i64 0, ptr %busy.at release, align 8
  br label %return
return:
  ret void
}}

define void @stop(ptr %pool) {{
entry:
{fields}  br label %claim
claim:
  %claim.result = cmpxchg ptr %busy.at, i64 0, i64 1 acquire monotonic
  %claimed = extractvalue {{ i64, i1 }} %claim.result, 1
  br i1 %claimed, label %stop, label %claim
stop:
  store atomic i64 1, ptr %stop.at release, align 8
  atomicrmw add ptr %generation.at, i64 1 seq_cst
{wake}  ret void
}}
"""


class _Runtime:
    """The pool's native functions."""

    def __init__(self):
        self.engine = native_module(_runtime_ir(pause=platform.machine() in ("x86_64", "AMD64")))
        self.worker = self.engine.get_function_address("worker")
        self.run = self.engine.get_function_address("run")
        self.stop = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.engine.get_function_address("stop"))


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity where the OS keeps one."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def _runtime() -> _Runtime:
    """The runtime, compiled on first use, once per process."""
    return _Runtime()


_libc = ctypes.CDLL(None)
_pools: dict[int, ThreadPool] = {}
"""The shared pools, by thread count."""
_live: set[ThreadPool] = set()
"""Every pool with workers, shared or not (kept alive while they run): stopped at exit,
forgotten in a forked child."""
_awake_depth = 0
"""`workers_awake` blocks entered and not left (profiles running on several Python threads)."""
_awake_lock = threading.Lock()


class ThreadPool:
    """`threads - 1` native worker threads and the state they share with callers."""

    @staticmethod
    def of(threads: int) -> ThreadPool:
        """The process's pool for kernels split into at most `threads` chunks (created on first use)."""
        if threads not in _pools:
            _pools[threads] = ThreadPool(threads)
        return _pools[threads]

    def __init__(self, threads: int):
        """A pool of its own; `ThreadPool.of` shares one per thread count."""
        self.threads = threads
        self.runtime = _runtime()
        self.state = np.zeros(STATE_BYTES // 8, dtype=np.int64)
        self.state[SPIN // 8] = AWAKE_ROUNDS if _awake_depth else SPIN_ROUNDS
        self.address = self.state.ctypes.data
        for name, offset in (("pthread_mutex_init", MUTEX), ("pthread_cond_init", CONDITION)):
            if getattr(_libc, name)(ctypes.c_void_p(self.address + offset), None) != 0:
                raise OSError(f"{name} failed")
        self.handles = []
        _live.add(self)
        for _ in range(threads - 1):
            handle = ctypes.c_ulong()
            error = _libc.pthread_create(ctypes.byref(handle), None, ctypes.c_void_p(self.runtime.worker),
                                         ctypes.c_void_p(self.address))
            if error:
                self.stop()
                raise OSError(error, f"pthread_create: {os.strerror(error)}")
            self.handles.append(handle)

    def stop(self) -> None:
        """Stop and join the workers. The pool stays claimed: later entries run their chunks alone."""
        if not self.handles:
            return
        self.runtime.stop(self.address)
        for handle in self.handles:
            _libc.pthread_join(handle, None)
        self.handles = []
        _live.discard(self)


@contextlib.contextmanager
def workers_awake() -> Iterator[None]:
    """Inside, every pool's workers spin between jobs instead of sleeping after SPIN_ROUNDS
    pauses, so that kernels run one at a time with Python between them (`Executable.profile`'s
    steps) start as they do inside a whole call, without a worker's wake-up (40-150 us)."""
    global _awake_depth
    with _awake_lock:
        _awake_depth += 1
        _set_spin(AWAKE_ROUNDS)
    try:
        yield
    finally:
        with _awake_lock:
            _awake_depth -= 1
            if not _awake_depth:
                _set_spin(SPIN_ROUNDS)


def _set_spin(rounds: int) -> None:
    for pool in _live:
        pool.state[SPIN // 8] = rounds


def _stop_all() -> None:
    for pool in list(_live):
        pool.stop()


def _forget_workers_in_child() -> None:
    """A forked child has no workers: its pools stay claimed, so entries run chunks alone."""
    for pool in _live:
        pool.handles = []
        pool.state[BUSY // 8] = 1
    _live.clear()


atexit.register(_stop_all)
os.register_at_fork(after_in_child=_forget_workers_in_child)


@dataclass(frozen=True)
class ChunkedKernel:
    """A kernel run as row chunks: chunk i calls the function at `chunks[i][0]` with each
    argument offset by `chunks[i][1] * row_bytes[argument]` bytes."""

    name: str
    row_bytes: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]


class ChunkedEntries:
    """Native entries of chunked kernels on one pool: `void name(ptr...)`, the kernel's arguments."""

    def __init__(self, pool: ThreadPool, kernels: Sequence[ChunkedKernel]):
        for kernel in kernels:
            if len(kernel.chunks) > pool.threads:
                raise ValueError(f"{kernel.name}: {len(kernel.chunks)} chunks on a pool of {pool.threads} threads")
        self.pool = pool  # the entries post to its state and workers
        self.llvm_ir = "".join(_entry_ir(pool, kernel) for kernel in kernels)
        self._engine = native_module(self.llvm_ir)

    def address(self, name: str) -> int:
        return self._engine.get_function_address(name)


def _entry_ir(pool: ThreadPool, kernel: ChunkedKernel) -> str:
    count = len(kernel.row_bytes)
    parameters = ", ".join(f"ptr %a{i}" for i in range(count))
    task = [f'define void @"{kernel.name}.chunk"(ptr %arguments, i64 %chunk) {{', "entry:"]
    for i in range(count):
        task.append(f"  %a{i}.at = getelementptr ptr, ptr %arguments, i64 {i}")
        task.append(f"  %a{i} = load ptr, ptr %a{i}.at, align 8")
    cases = " ".join(f"i64 {c}, label %chunk{c}" for c in range(1, len(kernel.chunks)))
    task.append(f"  switch i64 %chunk, label %chunk0 [ {cases} ]")
    for c, (address, begin) in enumerate(kernel.chunks):
        task.append(f"chunk{c}:")
        for i, row_bytes in enumerate(kernel.row_bytes):
            task.append(f"  %c{c}.a{i} = getelementptr i8, ptr %a{i}, i64 {begin * row_bytes}")
        arguments = ", ".join(f"ptr %c{c}.a{i}" for i in range(count))
        task.append(f"  call void inttoptr (i64 {address} to ptr)({arguments})")
        task.append("  ret void")
    task.append("}")
    entry = [f'define void @"{kernel.name}"({parameters}) {{', "entry:", f"  %arguments = alloca [{count} x ptr], align 8"]
    for i in range(count):
        entry.append(f"  %a{i}.at = getelementptr ptr, ptr %arguments, i64 {i}")
        entry.append(f"  store ptr %a{i}, ptr %a{i}.at, align 8")
    entry.append(
        f"  call void inttoptr (i64 {pool.runtime.run} to ptr)(ptr inttoptr (i64 {pool.address} to ptr), "
        f'ptr @"{kernel.name}.chunk", ptr %arguments, i64 {len(kernel.chunks)})'
    )
    entry += ["  ret void", "}"]
    return "\n".join(task + entry) + "\n"
