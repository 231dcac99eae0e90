"""Graph-level passes, one per file, each registered here under its pass name."""

from collections.abc import Callable

from xdsl.passes import ModulePass

from graphopt.pass_registry import lazy_passes

PASSES = {
    "canonicalize": ("canonicalize", "CanonicalizePass"),
    "fuse": ("fuse", "FusePass"),
    "partition": ("partition", "PartitionPass"),
    "outline": ("outline", "OutlinePass"),
    "inline-fused": ("outline", "InlineFusedPass"),
    "unfuse": ("outline", "UnfusePass"),
}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """graphopt's graph-level passes by name, imported lazily."""
    return lazy_passes("graphopt.transforms", PASSES)
