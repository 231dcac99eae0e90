"""The native thread pool (graphopt/runtime/thread_pool.py): chunks run on the workers and the caller,
concurrent callers and stopped or forked pools run them alone, idle workers go to sleep."""

import ctypes
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from graphopt.runtime.jit import native_module
from graphopt.runtime.thread_pool import SLEEPERS, ChunkedEntries, ChunkedKernel, ThreadPool, workers_awake

MARK_IR = """
declare i64 @pthread_self()
define void @mark(ptr %in, ptr %out) {
  %v = load i64, ptr %in, align 8
  %w = add i64 %v, 1
  atomicrmw add ptr %out, i64 %w seq_cst
  %thread = call i64 @pthread_self()
  %thread.at = getelementptr i64, ptr %out, i64 1
  store i64 %thread, ptr %thread.at, align 8
  ret void
}
"""
"""One row per chunk: out[row] = (out[row] + in[row] + 1, the thread that ran it): a chunk run
twice shows."""

_mark = native_module(MARK_IR)


def marking_entry(pool: ThreadPool, chunks: int):
    """`mark` over `chunks` rows, one row per chunk: the entry's function and its engine."""
    address = _mark.get_function_address("mark")
    entries = ChunkedEntries(pool, [ChunkedKernel("marks", row_bytes=(8, 16), chunks=tuple((address, c) for c in range(chunks)))])
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(entries.address("marks")), entries


def run_marks(function, chunks: int, seed: int = 0):
    values = np.arange(seed, seed + chunks, dtype=np.int64)
    out = np.zeros((chunks, 2), dtype=np.int64)
    function(values.ctypes.data, out.ctypes.data)
    np.testing.assert_array_equal(out[:, 0], values + 1)
    return out[:, 1].astype(np.uint64)


@pytest.fixture
def private_pool():
    """A pool of 3 threads of this test's own (stopped at the end), not the process's shared one."""
    pool = ThreadPool(3)
    yield pool
    pool.stop()


@pytest.mark.parametrize("chunks", [1, 2, 3])
def test_each_chunk_runs_once_on_the_caller_or_a_worker(private_pool, chunks):
    """Whichever thread claims a chunk first runs it: the caller (pthread_self() is its
    threading.get_ident()) or a worker; the workers take part."""
    function, _ = marking_entry(private_pool, chunks)
    pool_threads = {threading.get_ident(), *(handle.value for handle in private_pool.handles)}
    seen: set[int] = set()
    deadline = time.monotonic() + 5
    seed = 0
    while (seed < 50 or len(seen) < 2) and time.monotonic() < deadline:
        threads = run_marks(function, chunks, seed)
        assert set(threads) <= pool_threads
        seen.update(threads)
        seed += 1
    assert len(seen) > 1


def test_more_chunks_than_threads_is_refused(private_pool):
    with pytest.raises(ValueError, match="4 chunks on a pool of 3 threads"):
        marking_entry(private_pool, 4)


def test_idle_workers_sleep_and_wake_for_the_next_job(private_pool):
    function, _ = marking_entry(private_pool, 3)
    run_marks(function, 3)
    deadline = time.monotonic() + 5
    while private_pool.state[SLEEPERS // 8] != 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert private_pool.state[SLEEPERS // 8] == 2  # both workers stopped spinning
    run_marks(function, 3, seed=7)  # the caller runs what the waking workers are late for
    threads: set[int] = set()
    while len(threads) < 3 and time.monotonic() < deadline + 5:
        threads.update(run_marks(function, 3, seed=8))
    assert len(threads) == 3  # woken, both workers take chunks again


def sleepers_after(pool: ThreadPool, seconds: float, until: int | None = None) -> int:
    """The pool's workers asleep once they have had `seconds` to go to sleep (or, with `until`,
    to reach that many sleepers)."""
    deadline = time.monotonic() + seconds
    target = len(pool.handles) if until is None else until
    while pool.state[SLEEPERS // 8] != target and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(pool.state[SLEEPERS // 8])


def test_workers_awake_keeps_workers_spinning_between_jobs_until_left(private_pool):
    """Inside `workers_awake` (a profile's steps) the workers spin between jobs instead of going
    to sleep; once it is left they sleep again after their usual spin. The job wakes the workers
    asleep since the pool started; on a loaded machine they may take a while to get a core."""
    function, _ = marking_entry(private_pool, 3)
    with workers_awake():
        with workers_awake():  # nested, as profiles on two Python threads
            run_marks(function, 3)
        assert sleepers_after(private_pool, 5, until=0) == 0  # woken by the job
        assert sleepers_after(private_pool, 0.3) == 0  # and spinning, not asleep again
    assert sleepers_after(private_pool, 5) == 2
    run_marks(function, 3, seed=3)


def test_a_stopped_pool_runs_chunks_on_the_caller(private_pool):
    function, _ = marking_entry(private_pool, 3)
    private_pool.stop()
    assert set(run_marks(function, 3)) == {threading.get_ident()}


def test_concurrent_callers_each_get_all_their_chunks(private_pool):
    """A caller that finds the pool busy runs its chunks alone; every call still completes."""
    function, _ = marking_entry(private_pool, 3)
    start = threading.Barrier(4)
    errors = []

    def call_repeatedly(seed):
        start.wait()
        try:
            for i in range(300):
                run_marks(function, 3, seed * 1000 + i)
        except AssertionError as e:
            errors.append(e)

    callers = [threading.Thread(target=call_repeatedly, args=(seed,)) for seed in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert not errors


def test_a_forked_child_and_exit_with_live_workers():
    """The child has no workers (it runs chunks alone); both processes exit cleanly, the parent
    with its workers spinning or asleep."""
    script = textwrap.dedent("""
        import os, numpy as np, graphopt
        from graphopt.builder import GraphBuilder
        b = GraphBuilder()
        x = b.input("x", (4096, 256))
        module = b.finish(b.relu(b.add(x, x)))
        exe = graphopt.compile(module, threads=2)
        assert exe.steps[0].kernel.chunks
        x = np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32)
        want = np.maximum(x + x, 0)
        assert np.array_equal(exe(x)[0], want)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if np.array_equal(exe(x)[0], want) else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert np.array_equal(exe(x)[0], want)
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
