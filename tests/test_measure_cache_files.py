"""The cost cache on paths that are not plain cache files, on hostile JSON, and with two
processes writing into one file (issue 15)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest

from graphopt.backends import measure as measuring
from graphopt.backends.measure import CostCache


def loaded_with_warnings(path) -> tuple[CostCache, list[str]]:
    """The cache at `path`, then one put into it, with every warning they gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = CostCache(path)
        cache.put({"k": 1e-3})
        cache.put({"l": 2e-3})
    return cache, [str(w.message) for w in caught]


def test_a_fifo_is_neither_opened_nor_replaced(tmp_path):
    path = tmp_path / "costs.json"
    os.mkfifo(path)
    cache, messages = loaded_with_warnings(path)  # would block forever on opening the FIFO
    assert len(messages) == 1 and "not a regular file" in messages[0] and "kept for this process only" in messages[0]
    assert cache.get("k") == 1e-3 and cache.get("l") == 2e-3
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_socket_or_directory_is_not_replaced(tmp_path):
    directory = tmp_path / "directory"
    directory.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "socket"))
    try:
        for path, still in ((directory, stat.S_ISDIR), (tmp_path / "socket", stat.S_ISSOCK)):
            cache, messages = loaded_with_warnings(path)
            assert len(messages) == 1 and "not a regular file" in messages[0]
            assert cache.get("l") == 2e-3 and still(os.lstat(path).st_mode)
    finally:
        listener.close()


def test_a_device_node_is_not_replaced(tmp_path):
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # another /dev/null, in tmp_path
    except PermissionError:
        pytest.skip("creating a device node needs root")
    cache, messages = loaded_with_warnings(path)
    assert len(messages) == 1 and "not a regular file" in messages[0]
    assert cache.get("k") == 1e-3 and stat.S_ISCHR(os.lstat(path).st_mode)


def test_a_nul_in_the_path_keeps_costs_in_memory_with_one_warning():
    cache, messages = loaded_with_warnings("costs\0.json")
    assert len(messages) == 1 and "not a usable path" in messages[0]
    assert cache.get("l") == 2e-3


@pytest.mark.parametrize(
    "costs, problem",
    [
        ("1" + "0" * 400, "int too large"),
        ("[" * 100_000 + "]" * 100_000, "recursion"),
        ("NaN", "not a number of seconds"),
        ('"fast"', "not a number of seconds"),
    ],
)
def test_hostile_json_is_ignored_with_one_warning_then_rewritten(tmp_path, costs, problem):
    path = tmp_path / "costs.json"
    cpu = json.dumps(measuring.cpu_model())
    path.write_text(f'{{"format": {measuring.FORMAT_VERSION}, "cpu": {cpu}, "costs": {{"k": {costs}}}}}')
    cache, messages = loaded_with_warnings(path)
    assert len(messages) == 1 and "ignoring the cost cache" in messages[0] and problem in messages[0].lower()
    assert json.loads(path.read_text())["costs"] == {"k": 1e-3, "l": 2e-3}


def test_two_processes_writing_one_cache_keep_each_others_entries(tmp_path):
    path = tmp_path / "costs.json"
    writer = textwrap.dedent(
        """
        import sys
        from graphopt.backends.measure import CostCache
        cache = CostCache(sys.argv[1])
        for i in range(60):
            cache.put({f"{sys.argv[2]}{i}": i * 1e-6})
        """
    )
    processes = [subprocess.Popen([sys.executable, "-c", writer, str(path), name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    costs = json.loads(path.read_text())["costs"]
    assert sorted(costs) == sorted(f"{name}{i}" for name in "ab" for i in range(60))
    assert [p.name for p in tmp_path.iterdir()] == ["costs.json"]
