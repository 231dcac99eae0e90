"""A conv ukernel called for a range of its output rows: the name's suffix.

A chunk of a conv split by output rows (`row_split.output_row_split`) calls the ukernel on the
same operands as the whole call, for output rows first to end - 1 alone; the name ends in
`_oh<first>to<end>`, and so does the chunk function's (`split_rows.py`):

    graphopt_sconv_lanes_r58_d1x1_1x128x1x1x3366_2x128x3x3x16_1x32x56x56_oh28to56
"""

from __future__ import annotations

import re


def chunk_name(name: str, first: int, end: int) -> str:
    """The name of the ukernel (or kernel) `name` for output rows first to end - 1 alone."""
    return f"{name}_oh{first}to{end}"


def row_range(name: str, out_h: int) -> tuple[int, int]:
    """(first, end) of the output rows that the ukernel `name` computes: all `out_h` of them
    unless its name is a `chunk_name`."""
    match = re.search(r"_oh(\d+)to(\d+)$", name)
    return (int(match[1]), int(match[2])) if match else (0, out_h)
