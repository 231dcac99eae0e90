"""The saved-Executable file: one zip holding what `graphopt.load` needs to run a compiled module.

    write_saved(path, module, entry, threads, pipeline, {"cpu": saved_kernels})
    saved = read_saved(path)                       # manifest, placed module, backend states
    host_differences(saved.manifest)               # what differs from this host, or []

The zip holds:

- `manifest.json`: the format version, graphopt's, llvmlite's and LLVM's versions, the host CPU
  (name, features and process triple, as the kernel cache keys them), the threads and the entry
  function (`host_manifest`, plus the module's own fields);
- `module.mlir`: the placed module (after partition: every group has its backend) with each
  `graph.constant`'s value a zero splat written in hex (parsed without building the elements);
- `constants.npz`: each `graph.constant`'s value, in walk order (`arr_0`, `arr_1`, ...);
- `backends/<name>.json` and `backends/<name>.npz`: a backend's `SavedKernels`, when it saves some.

Nothing is pickled: a saved file may come from elsewhere. A file that is not one of ours, or is
damaged, gives one `GraphoptError`.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from importlib.metadata import version

import llvmlite
import llvmlite.binding as llvm_binding
import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, ModuleOp

from graphopt.dialects import graph
from graphopt.dialects.attributes import dense_from_numpy, dense_to_numpy, numpy_dtype
from graphopt.errors import GraphoptError
from graphopt.parsing import parse_text

FORMAT = "graphopt-executable"
FORMAT_VERSION = 2
"""2 since 2026-11-28: the cpu kernels' plans carry `may_overwrite`; a version-1 file's kernels
were compiled with the residual and out `noalias`, so they may not be handed one buffer."""
ZIP_MAGIC = b"PK"
"""How a zip (so an .npz, and a saved Executable) starts: a member's header, or an empty zip's end record."""
HOST_FIELDS = ("graphopt", "llvmlite", "llvm", "cpu", "cpu_features", "triple")
"""Manifest fields that must match this host for the saved machine code to be used."""
MANIFEST_FIELDS = {"entry": str, "threads": int, "pipeline": str, "kernels": list}
"""The manifest's own fields (besides the format and the host's) and their JSON types."""
PLACEHOLDER = re.compile(r"graph\.constant dense<[^>\"]*>")
"""A zero splat as xDSL prints it after `graph.constant` (`dense<0.000000e+00>`, `dense<false>`)."""


@dataclass
class SavedKernels:
    """A backend's compiled kernels as a saved file holds them: JSON values and named arrays
    (machine code as uint8 arrays)."""

    info: dict
    arrays: dict[str, np.ndarray]


@dataclass
class SavedModule:
    """What `read_saved` found: the manifest, the placed module with its constants, and each
    saving backend's kernels."""

    manifest: dict
    module: ModuleOp
    kernels: dict[str, SavedKernels]


def is_saved_file(path: str | os.PathLike) -> bool:
    """Does the file start as a zip does (as a saved Executable, whole or damaged)?"""
    try:
        with open(path, "rb") as file:
            return file.read(len(ZIP_MAGIC)) == ZIP_MAGIC
    except OSError:
        return False


def host_manifest() -> dict:
    """This host's fields of a manifest (`HOST_FIELDS`)."""
    return {
        "graphopt": version("graphopt"),
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm_binding.llvm_version_info)),
        "cpu": llvm_binding.get_host_cpu_name(),
        "cpu_features": llvm_binding.get_host_cpu_features().flatten(),
        "triple": llvm_binding.get_process_triple(),
    }


def host_differences(manifest: dict) -> list[str]:
    """`<field> <saved> here <this host's>` for each host field of `manifest` that differs."""
    here = host_manifest()
    return [f"{field} {manifest.get(field)!r}, here {here[field]!r}" for field in HOST_FIELDS
            if manifest.get(field) != here[field]]


def write_saved(path: str | os.PathLike, module: ModuleOp, entry: str, threads: int, pipeline: str,
                kernels: dict[str, SavedKernels]) -> None:
    """Write the file (see the module docstring); `module` is left unchanged."""
    module = module.clone()
    constants = [op for op in module.walk() if isinstance(op, graph.ConstantOp)]
    values = [dense_to_numpy(op.value) for op in constants]
    for op in constants:
        op.value = DenseIntOrFPElementsAttr(op.value.type, BytesAttr(bytes(numpy_dtype(op.value.get_element_type()).itemsize)))
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, **host_manifest(), "threads": threads, "entry": entry,
                "pipeline": pipeline, "kernels": sorted(kernels)}
    text = _hex_placeholders(str(module), values)
    try:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("manifest.json", json.dumps(manifest, indent=1))
            archive.writestr("module.mlir", text)
            archive.writestr("constants.npz", _npz(dict(zip((f"arr_{i}" for i in range(len(values))), values))))
            for name, saved in kernels.items():
                archive.writestr(f"backends/{name}.json", json.dumps(saved.info))
                archive.writestr(f"backends/{name}.npz", _npz(saved.arrays))
    except OSError as e:
        raise GraphoptError(f"{path}: cannot write the saved Executable: {e.strerror or e}") from None


def read_saved(path: str | os.PathLike) -> SavedModule:
    """The file's contents, its constants restored; a GraphoptError for anything else."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read("manifest.json"))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise GraphoptError(f"{path}: not a saved graphopt Executable (no {FORMAT} manifest)")
            if manifest.get("version") != FORMAT_VERSION:
                raise GraphoptError(f"{path}: saved in format version {manifest.get('version')}; "
                                    f"this graphopt reads version {FORMAT_VERSION} (compile and save the model again)")
            for field, kind in MANIFEST_FIELDS.items():
                if not isinstance(manifest.get(field), kind):
                    raise GraphoptError(f"{path}: the manifest's {field!r} is not a {kind.__name__}")
            if manifest["threads"] < 1:
                raise GraphoptError(f"{path}: the manifest's threads must be at least 1, got {manifest['threads']}")
            module = parse_text(archive.read("module.mlir").decode(), f"{path}:module.mlir")
            constants = _arrays(archive.read("constants.npz"))
            kernels = {
                name: SavedKernels(json.loads(archive.read(f"backends/{name}.json")), _arrays(archive.read(f"backends/{name}.npz")))
                for name in manifest["kernels"]
            }
    except FileNotFoundError:
        raise GraphoptError(f"{path}: no such file") from None
    except (OSError, zipfile.BadZipFile, zlib.error, KeyError, TypeError, ValueError, EOFError) as e:
        raise GraphoptError(f"{path}: not a saved graphopt Executable, or damaged ({type(e).__name__}: {e})") from None
    _restore_constants(path, module, constants)
    return SavedModule(manifest, module, kernels)


def _hex_placeholders(text: str, values: list[np.ndarray]) -> str:
    """`text` with the i-th zero splat after `graph.constant` written as one hex element of the
    i-th value's width: xDSL parses that by repeating bytes, not by building a list of elements."""
    if len(PLACEHOLDER.findall(text)) != len(values):
        raise GraphoptError("internal error: the printed module's graph.constant ops are not its zero splats")
    widths = iter([value.dtype.itemsize for value in values])
    return PLACEHOLDER.sub(lambda match: f'graph.constant dense<"0x{"00" * next(widths)}">', text)


def _restore_constants(path, module: ModuleOp, arrays: dict[str, np.ndarray]) -> None:
    constants = [op for op in module.walk() if isinstance(op, graph.ConstantOp)]
    if len(constants) != len(arrays):
        raise GraphoptError(f"{path}: {len(arrays)} constant values for {len(constants)} graph.constant ops")
    for index, op in enumerate(constants):
        value = arrays.get(f"arr_{index}")
        if value is None:
            raise GraphoptError(f"{path}: constants.npz has no arr_{index} for graph.constant #{index}")
        if value.shape != tuple(op.value.type.get_shape()) or value.dtype != numpy_dtype(op.value.get_element_type()):
            raise GraphoptError(f"{path}: constant #{index} is a {value.dtype}{list(value.shape)} array "
                                f"for a graph.constant of type {op.value.type}")
        op.value = dense_from_numpy(value)


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _arrays(data: bytes) -> dict[str, np.ndarray]:
    if not data.startswith(ZIP_MAGIC):
        raise ValueError("an array member is not an .npz")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}
