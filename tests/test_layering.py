"""The layering rule (docs/design.md), enforced on the import graph of the source tree.

    dialects  <-  transforms  <-  lowering  <-  runtime, backends  <-  API (graphopt/*.py)  <-  tools

A layer imports only layers to its left (and xDSL, NumPy, the standard library): a dialect
never knows a pass, a transform never knows a backend, a lowering, the JIT or the runtime, and
the runtime never rewrites IR. Imports are read from the source with `ast`, so a lazy import
inside a function counts as well.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS = {
    "dialects": "graphopt.dialects",
    "transforms": "graphopt.transforms",
    "lowering": "graphopt.lowering",
    "graphopt/runtime": "graphopt.runtime",
    "graphopt/backends": "graphopt.backends",
    "tools": "graphopt.tools",
}
"""Source folder -> the package it installs as."""

FORBIDDEN = {
    "graphopt.dialects": ("graphopt.transforms", "graphopt.lowering", "graphopt.runtime", "graphopt.backends",
                          "graphopt.compiler", "graphopt.tools", "graphopt.interpreter", "llvmlite", "tqdm"),
    "graphopt.transforms": ("graphopt.lowering", "graphopt.runtime", "graphopt.backends", "graphopt.compiler",
                            "graphopt.tools", "llvmlite", "tqdm"),
    "graphopt.lowering": ("graphopt.runtime", "graphopt.backends", "graphopt.compiler", "graphopt.tools", "tqdm"),
    "graphopt.runtime": ("graphopt.transforms", "graphopt.backends", "graphopt.compiler", "graphopt.tools"),
    "graphopt.backends": ("graphopt.compiler", "graphopt.tools"),
}
"""What each layer must not import (a module or any module under it)."""


def imports_of(path: Path, package: str) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved against `package`)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            imported.add(base)
            imported.update(f"{base}.{alias.name}" for alias in node.names)
    return imported


def layer_modules() -> list[tuple[str, Path, str]]:
    """(layer package, file, the file's own package) for every source file of every layer."""
    found = []
    for folder, layer in LAYERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT / folder).parent.parts
            found.append((layer, path, ".".join([layer, *relative])))
    return found


def violations(layer: str, path: Path, package: str) -> list[str]:
    forbidden = FORBIDDEN.get(layer, ())
    return sorted(
        name for name in imports_of(path, package)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    )


@pytest.mark.parametrize(("layer", "path", "package"), layer_modules(),
                         ids=lambda value: str(value.relative_to(ROOT)) if isinstance(value, Path) else "")
def test_layer_imports_only_layers_below(layer: str, path: Path, package: str) -> None:
    assert violations(layer, path, package) == []


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    transform = tmp_path / "bad_pass.py"
    transform.write_text("from graphopt.backends import get_backend\nimport llvmlite.binding\n")
    assert violations("graphopt.transforms", transform, "graphopt.transforms") == [
        "graphopt.backends", "graphopt.backends.get_backend", "llvmlite.binding"]


def test_the_dialect_loads_without_the_compiler() -> None:
    """`import graphopt.dialects.graph` loads neither llvmlite nor the runtime nor the backends,
    and sets no environment variable."""
    probe = (
        "import os, sys; before = dict(os.environ); import graphopt.dialects.graph; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'llvmlite' or m.startswith(('graphopt.runtime', "
        "'graphopt.backends', 'graphopt.lowering', 'graphopt.transforms', 'tqdm'))); "
        "print(loaded, dict(os.environ) == before)"
    )
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[] True"
