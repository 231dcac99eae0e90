"""The persistent kernel cache: machine code of compiled kernel modules, kept on disk across processes.

    cache = active_kernel_cache()                  # None when turned off
    key = kernel_key(kernel_module_text, options)  # also covers CPU, features, versions, compiler sources
    entry = cache.load(key)                        # a CacheEntry, or None (miss, corrupt or foreign entry)
    cache.store(key, CacheEntry(object_code, {"llvm_ir": optimized_ir}))

Where it lives: `$GRAPHOPT_KERNEL_CACHE` if set (`off`, `0`, `false` or `no` turn it off), else
`$XDG_CACHE_HOME/graphopt/kernels/`, else `~/.cache/graphopt/kernels/`; `configure_kernel_cache`
does the same from Python. Size limit: `$GRAPHOPT_KERNEL_CACHE_SIZE` bytes (suffix K, M or G
allowed), 512M by default; a hit touches its entry, a store evicts the least recently used ones.

An entry is `<key>.kernel`: a header line `graphopt-kernel-cache 1 <key> <sha256 of payload>
<machine code bytes> <payload bytes>`, then the payload: the machine code, then its metadata
(JSON). It is written to a temporary file and renamed into place, so concurrent writers of one key
each leave a whole entry. An entry whose header, key or checksum does not match is ignored with
one warning; a path that is not a regular file (a link, a FIFO, a directory) is never opened,
replaced or evicted.
"""

import functools
import hashlib
import json
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import NamedTuple

import llvmlite
import llvmlite.binding as llvm_binding

from graphopt.errors import GraphoptError

MAGIC = b"graphopt-kernel-cache 1"
SUFFIX = ".kernel"
DEFAULT_SIZE_LIMIT = 512 * 1024 * 1024
SIZE_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


class KernelCacheWarning(UserWarning):
    """A cache entry was ignored (corrupt, foreign or unreadable) or could not be written."""


class CacheEntry(NamedTuple):
    """What the cache holds for one kernel module: its object code, and what its user needs to
    know of it without compiling it again (JSON values)."""

    machine_code: bytes
    metadata: dict


def kernel_key(source: str, options: str) -> str:
    """The hex digest naming the machine code of `source` compiled with `options` on this host:
    it covers the CPU model and features, the llvmlite, LLVM, xDSL and graphopt versions, and the
    compiler's own sources (`compiler_digest`), so an edited lowering never reuses old code."""
    parts = [
        llvm_binding.get_host_cpu_name(),
        llvm_binding.get_host_cpu_features().flatten(),
        llvm_binding.get_process_triple(),
        llvmlite.__version__,
        ".".join(map(str, llvm_binding.llvm_version_info)),
        version("xdsl"),
        version("graphopt"),
        compiler_digest(),
        options,
        source,
    ]
    digest = hashlib.sha256()
    for part in parts:
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "little") + encoded)
    return digest.hexdigest()


@functools.cache
def compiler_digest() -> str:
    """A digest of the Python sources that turn a kernel module into machine code: the packages
    of graphopt's dialects, transforms and lowering (subpackages included), and this module's own
    package (the runtime)."""
    folders = {Path(__file__).parent}
    for package in ("graphopt.dialects", "graphopt.transforms", "graphopt.lowering"):
        folders.update(map(Path, find_spec(package).submodule_search_locations))
    digest = hashlib.sha256()
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")):  # lowering/linalg/ too
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass
class KernelCache:
    """Entries in `directory`, at most `size_limit` bytes in all; counts its hits, misses and stores."""

    directory: Path
    size_limit: int = DEFAULT_SIZE_LIMIT
    hits: int = 0
    misses: int = 0
    stores: int = 0

    def entry_path(self, key: str) -> Path:
        return self.directory / f"{key}{SUFFIX}"

    def load(self, key: str) -> CacheEntry | None:
        """The entry stored under `key`, or None; a hit marks the entry as recently used."""
        path = self.entry_path(key)
        data = _read_regular_file(path)
        entry = None if data is None else _entry(path, key, data)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            os.utime(path)
        except OSError:  # evicted meanwhile, or a read-only cache: the entry is still good
            pass
        return entry

    def store(self, key: str, entry: CacheEntry) -> None:
        """Write the entry atomically (unless a non-regular file holds its path), then evict."""
        path = self.entry_path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if path.is_symlink() or (path.exists() and not path.is_file()):
                return
            payload = entry.machine_code + json.dumps(entry.metadata).encode()
            checksum = hashlib.sha256(payload).hexdigest().encode()
            header = b"%s %s %s %d %d\n" % (MAGIC, key.encode(), checksum, len(entry.machine_code), len(payload))
            descriptor, temporary = tempfile.mkstemp(dir=self.directory, prefix=".writing-", suffix=SUFFIX)
            try:
                with os.fdopen(descriptor, "wb") as file:
                    file.write(header + payload)
                os.replace(temporary, path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError as error:
            warnings.warn(f"graphopt kernel cache: cannot write {path}: {error}", KernelCacheWarning, stacklevel=2)
            return
        self.stores += 1
        self.evict(keep=path)

    def evict(self, keep: Path) -> None:
        """Remove the least recently used entries (oldest modification time) until the total size
        fits the limit; `keep`, the entry just written, stays."""
        entries = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            try:
                status = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(status.st_mode) and not path.name.startswith("."):
                entries.append((status.st_mtime_ns, status.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.size_limit:
                break
            if path == keep:
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            total -= size


def _read_regular_file(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file (not followed through a link, and a FIFO is not
    waited on), else None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    with os.fdopen(descriptor, "rb") as file:
        return file.read()


def _entry(path: Path, key: str, data: bytes) -> CacheEntry | None:
    """The entry in a file's bytes, or None with a warning if the file is not what we wrote for `key`."""
    header, newline, payload = data.partition(b"\n")
    fields = header.split(b" ")
    reason = None
    if not newline or len(fields) != 6 or b" ".join(fields[:2]) != MAGIC or not (fields[4] + fields[5]).isdigit():
        reason = "bad header"
    elif fields[2].decode(errors="replace") != key:
        reason = "the entry is for another key"
    elif int(fields[5]) != len(payload) or int(fields[4]) > len(payload):
        reason = "truncated"
    elif hashlib.sha256(payload).hexdigest().encode() != fields[3]:
        reason = "checksum mismatch"
    if reason is not None:
        warnings.warn(f"graphopt kernel cache: ignoring {path}: {reason}", KernelCacheWarning, stacklevel=3)
        return None
    code_size = int(fields[4])
    return CacheEntry(payload[:code_size], json.loads(payload[code_size:]))


OFF = frozenset({"off", "0", "false", "no"})
"""Settings (any case) that turn the cache off: `off`, and the usual spellings of false, which
would otherwise name a directory in the working directory."""
_configured: str | os.PathLike | None = None
_caches: dict[tuple[Path, int], KernelCache] = {}


def configure_kernel_cache(location: str | os.PathLike | None) -> None:
    """Set the cache from Python, over the environment: a directory, "off" (or another of
    `OFF`), or None (back to `$GRAPHOPT_KERNEL_CACHE` and the default)."""
    global _configured
    _configured = location


def active_kernel_cache() -> KernelCache | None:
    """The cache the settings select now (one object per directory and limit), or None when off."""
    location = _configured if _configured is not None else os.environ.get("GRAPHOPT_KERNEL_CACHE", "")
    if str(location).strip().lower() in OFF:
        return None
    directory = Path(location) if str(location) else default_directory()
    key = (directory, size_limit())
    if key not in _caches:
        _caches[key] = KernelCache(*key)
    return _caches[key]


def default_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "graphopt" / "kernels"


def size_limit() -> int:
    """`$GRAPHOPT_KERNEL_CACHE_SIZE` in bytes (a K, M or G suffix multiplies), or the default."""
    text = os.environ.get("GRAPHOPT_KERNEL_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE_LIMIT
    number, unit = (text[:-1], SIZE_UNITS[text[-1].upper()]) if text[-1].upper() in SIZE_UNITS else (text, 1)
    if not number.isdigit():
        raise GraphoptError(f"GRAPHOPT_KERNEL_CACHE_SIZE must be a number of bytes (suffix K, M or G allowed), got {text!r}")
    return int(number) * unit
