"""Lazy pass registration: a pass's module is imported only when the pass is asked for."""

from collections.abc import Callable, Mapping
from importlib import import_module

from xdsl.passes import ModulePass


def lazy_passes(package: str, passes: Mapping[str, tuple[str, str]]) -> dict[str, Callable[[], type[ModulePass]]]:
    """{pass name: factory} for `{name: (module under package, class name)}`, as xDSL does.

        lazy_passes("graphopt.transforms", {"fuse": ("fuse", "FusePass")})["fuse"]() is FusePass
    """

    def factory(module: str, class_name: str) -> Callable[[], type[ModulePass]]:
        return lambda: getattr(import_module(f"{package}.{module}"), class_name)

    return {name: factory(module, class_name) for name, (module, class_name) in passes.items()}
