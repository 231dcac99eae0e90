"""The persistent kernel cache (graphopt/runtime/kernel_cache.py) and the JIT's use of it."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from graphopt.errors import GraphoptError
from graphopt.runtime import kernel_cache
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.runtime.jit import compile_kernel
from graphopt.runtime.kernel_cache import (
    CacheEntry,
    KernelCache,
    KernelCacheWarning,
    active_kernel_cache,
    configure_kernel_cache,
    kernel_key,
)

SCALE_KERNEL = """func.func @scale(%a: memref<8xf32>, %b: memref<8xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %factor = arith.constant {factor} : f32
  scf.for %i = %c0 to %c8 step %c1 {{
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.mulf %x, %factor : f32
    memref.store %y, %b[%i] : memref<8xf32>
  }}
  func.return
}}"""

RUN_KERNEL = f"""
import json, warnings
import numpy as np
from graphopt.runtime.arrays import aligned_array, aligned_empty
from graphopt.runtime.jit import compile_kernel
from graphopt.runtime.kernel_cache import active_kernel_cache
warnings.simplefilter("default")
kernel = compile_kernel('''{SCALE_KERNEL.format(factor="3.5")}''')
out = aligned_empty(8)
kernel(aligned_array(np.arange(8, dtype=np.float32)), out)
cache = active_kernel_cache()
print(json.dumps({{"out": out.tolist(), "hits": cache.hits, "misses": cache.misses, "stores": cache.stores}}))
"""


def run_in_new_process(cache_dir) -> subprocess.Popen:
    environment = dict(os.environ, GRAPHOPT_KERNEL_CACHE=str(cache_dir))
    return subprocess.Popen([sys.executable, "-c", RUN_KERNEL], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(process: subprocess.Popen) -> tuple[dict, str]:
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    return json.loads(stdout), stderr


def entries(directory) -> list:
    return sorted(directory.glob("*.kernel"))


@pytest.fixture
def cache(tmp_path) -> KernelCache:
    return KernelCache(tmp_path / "kernels")


def entry(size: int = 16) -> CacheEntry:
    return CacheEntry(bytes(i % 256 for i in range(size)), {"llvm_ir": "define void @f() {\n  ret void\n}\n"})


def scale_in_process(factor: str) -> np.ndarray:
    """Compile a kernel this process has not compiled (a new factor) and run it."""
    out = aligned_empty(8)
    compile_kernel(SCALE_KERNEL.format(factor=factor))(aligned_array(np.arange(8, dtype=np.float32)), out)
    return out


def test_second_process_reuses_the_entry(tmp_path):
    first, _ = result(run_in_new_process(tmp_path))
    assert (first["hits"], first["misses"], first["stores"]) == (0, 1, 1)
    (path,) = entries(tmp_path)
    os.utime(path, ns=(0, 0))
    second, _ = result(run_in_new_process(tmp_path))
    assert (second["hits"], second["misses"], second["stores"]) == (1, 0, 0)
    assert second["out"] == first["out"] == [3.5 * i for i in range(8)]
    assert path.stat().st_mtime_ns > 0, "a hit marks the entry as recently used"


@pytest.mark.parametrize("corrupt", ["truncate", "flip a payload byte", "bad header"])
def test_corrupt_entry_is_ignored_with_one_warning_and_replaced(tmp_path, corrupt):
    result(run_in_new_process(tmp_path))
    (path,) = entries(tmp_path)
    data = path.read_bytes()
    if corrupt == "truncate":
        data = data[: len(data) - 10]
    elif corrupt == "flip a payload byte":
        data = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
    else:
        data = b"not a cache entry" + data
    path.write_bytes(data)
    recompiled, stderr = result(run_in_new_process(tmp_path))
    assert stderr.count("KernelCacheWarning") == 1 and "ignoring" in stderr
    assert (recompiled["hits"], recompiled["misses"], recompiled["stores"]) == (0, 1, 1)
    assert recompiled["out"] == [3.5 * i for i in range(8)]
    reused, stderr = result(run_in_new_process(tmp_path))
    assert reused["hits"] == 1 and "KernelCacheWarning" not in stderr


def test_entry_for_another_key_is_ignored(cache):
    key, other = kernel_key("a", ""), kernel_key("b", "")
    cache.store(key, entry())
    cache.entry_path(key).rename(cache.entry_path(other))
    with pytest.warns(KernelCacheWarning, match="another key"):
        assert cache.load(other) is None
    assert cache.misses == 1


def test_round_trip_and_key_covers_source_and_options(cache):
    key = kernel_key("ir", "O3")
    assert kernel_key("ir", "O2") != key and kernel_key("ir2", "O3") != key
    assert cache.load(key) is None
    cache.store(key, entry(1000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.load(key) == entry(1000)
    assert (cache.hits, cache.misses, cache.stores) == (1, 1, 1)


@pytest.mark.parametrize("setting", ["off", "OFF", "0", "false", "no "])
def test_turned_off_by_environment(tmp_path, monkeypatch, setting):
    """`off` and the spellings of false turn it off; none of them becomes a directory."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", setting)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert active_kernel_cache() is None
    assert scale_in_process("5.0").tolist() == [5.0 * i for i in range(8)]
    assert not list(tmp_path.rglob("*"))


def test_moved_by_environment_and_by_configure(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", str(tmp_path / "moved"))
    scale_in_process("6.0")
    assert len(entries(tmp_path / "moved")) == 1
    try:
        configure_kernel_cache(tmp_path / "configured")
        scale_in_process("7.0")
        assert len(entries(tmp_path / "configured")) == 1
        configure_kernel_cache("off")
        assert active_kernel_cache() is None
    finally:
        configure_kernel_cache(None)
    assert active_kernel_cache().directory == tmp_path / "moved"


def test_default_location_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHOPT_KERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert active_kernel_cache().directory == tmp_path / "graphopt" / "kernels"


def test_size_limit_from_environment(monkeypatch):
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE_SIZE", "3K")
    assert kernel_cache.size_limit() == 3072
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE_SIZE", "lots")
    with pytest.raises(GraphoptError, match="GRAPHOPT_KERNEL_CACHE_SIZE"):
        kernel_cache.size_limit()


def test_least_recently_used_entries_are_evicted(tmp_path):
    cache = KernelCache(tmp_path, size_limit=3 * 1300)
    keys = [kernel_key(str(i), "") for i in range(4)]
    for age, key in enumerate(keys[:3]):
        cache.store(key, entry(1000))
        os.utime(cache.entry_path(key), ns=(age * 10**9, age * 10**9))
    assert cache.load(keys[0]) is not None  # now the most recently used
    cache.store(keys[3], entry(1000))
    assert [cache.entry_path(k).exists() for k in keys] == [True, False, True, True]


def test_concurrent_writers_both_succeed(tmp_path):
    first, second = run_in_new_process(tmp_path), run_in_new_process(tmp_path)
    outputs = [result(first)[0], result(second)[0]]
    assert outputs[0]["out"] == outputs[1]["out"] == [3.5 * i for i in range(8)]
    assert len(entries(tmp_path)) == 1 and not list(tmp_path.glob(".writing-*"))
    reused, stderr = result(run_in_new_process(tmp_path))
    assert reused["hits"] == 1 and "KernelCacheWarning" not in stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink"])
def test_non_regular_file_at_an_entry_path_is_left_alone(cache, kind):
    key = kernel_key("x", "")
    cache.directory.mkdir(parents=True)
    path = cache.entry_path(key)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        target = cache.directory / "elsewhere"
        KernelCache(target).store(key, entry())
        path.symlink_to(KernelCache(target).entry_path(key))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.load(key) is None
        cache.store(key, entry())
    assert path.is_symlink() if kind == "symlink" else (path.is_fifo() if kind == "fifo" else path.is_dir())
    cache.store(kernel_key("y", ""), entry())
    cache.size_limit = 0
    cache.evict(keep=cache.entry_path(kernel_key("z", "")))
    assert path.is_symlink() or path.exists(), "eviction leaves it alone too"
