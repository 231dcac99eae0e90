"""Graph-level passes, one per file, each registered here under its pass name."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _fuse() -> type[ModulePass]:
    from graphopt.transforms.fuse import FusePass

    return FusePass


def _outline() -> type[ModulePass]:
    from graphopt.transforms.outline import OutlinePass

    return OutlinePass


def _inline_fused() -> type[ModulePass]:
    from graphopt.transforms.outline import InlineFusedPass

    return InlineFusedPass


def _unfuse() -> type[ModulePass]:
    from graphopt.transforms.outline import UnfusePass

    return UnfusePass


def _partition() -> type[ModulePass]:
    from graphopt.transforms.partition import PartitionPass

    return PartitionPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """graphopt's passes by name, imported lazily (as xDSL does for its own)."""
    return {"fuse": _fuse, "outline": _outline, "inline-fused": _inline_fused, "unfuse": _unfuse, "partition": _partition}
