"""The loop schedule a kernel is built with, chosen once per lowering: the CPU's (`CpuSchedule`:
blocked matmuls, the packed GEMM (for convs too), direct and depthwise convolution ukernels,
softmax storing its exp terms, short rows merged) or plain one-output loop nests that a GPU
lowering maps onto threads (`PlainSchedule`). `SCHEDULES` names them for the pass option `schedule=cpu|plain`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import f32
from xdsl.ir import Operation

from graphopt.dialects import graph
from graphopt.lowering import conv_lanes, conv_winograd, depthwise_conv, direct_conv, packed_gemm, pooling, row_sums
from graphopt.lowering.linalg.epilogue import tile_epilogue_of
from graphopt.lowering.linalg.indexing import shape_of
from graphopt.lowering.llvm_text import VECTOR, host_has_avx512
from graphopt.lowering.pack_weights import PACKED_CONV_UKERNELS, all_finite
from graphopt.lowering.tile_epilogue import Step

if TYPE_CHECKING:
    from xdsl.ir import SSAValue

    from graphopt.lowering.linalg.abi import Group
    from graphopt.lowering.linalg.loop_body import Kernel


def packed_matmuls(group: Group) -> dict[graph.MatmulOp, None]:
    """The group's matmuls that run as the packed GEMM ukernel, in order (an ordered set): those
    whose b is a constant (inside the group or a graph.constant outside it) and whose types it takes."""
    return {
        op: None
        for op in group.ops
        if isinstance(op, graph.MatmulOp)
        and group.constant_value(op.b) is not None
        and packed_gemm.packs(op.a.type, op.b.type, op.result.type)
    }


MATMUL_BLOCKS = (32, 128, 256)
"""Block sizes (MB, KB, NB) of a blocked matmul, picked by measurement: a KB x NB block of b
(128 KiB of f32) stays in L2 while MB rows use it, a row segment of out (1 KiB) in L1."""


CONV_GEMM_WIDTH = 8
"""Output columns up to which a conv with a window larger than 1x1 runs as a GEMM
(`CpuSchedule.conv_gemm`): the direct ukernel's vectors of 16 columns then hold at most 8."""


STEM_GEMM_TAPS = 3 * 3 * 3
"""Taps (input channels x window) up to which a conv of 64 or more output channels that
`conv_lanes` does not take runs as the conv GEMM (`CpuSchedule.conv_gemm`): a stem."""

LANES_1X1_POSITIONS = frozenset({1, *range(7 * 7 + 1, 14 * 14 + 1)})
"""Output positions of the 1x1 convs that run as `conv_lanes` rather than the conv GEMM
(`CpuSchedule.lanes_conv`) on a CPU with AVX-512: one (squeeze-and-excite's matrix-vector
convs), or more than 7x7 and at most 14x14."""

NARROW_REGISTER_LANES_1X1_POSITIONS = frozenset(range(1, 14 * 14 + 1))
"""The same on a CPU without AVX-512: up to 14x14, 7x7 included. There the conv GEMM's tiles
of 16 columns leave 49 = 3 x 16 + 1 columns for a tile of one column, a dot product along k
that gathers b's column; on 2026-11-27 (2-core EPYC with AVX2 only, conv + bias (+ residual)
+ relu, 1 thread, interleaved with ONNX Runtime's Conv) ResNet-50's 512->2048 1x1 at 7x7 with
its residual ran 2.09x ORT's time as the GEMM and 1.08x as conv_lanes, 2048->512 1.31x and
1.11x, the stride-2 1024->2048 2.04x and 0.97x (2 threads: 1.41x -> 1.10x, 1.29x -> 1.17x,
1.85x -> 0.98x); Inception's 1024->192 and 832->384 at 7x7 1.41x -> 1.14x and 1.39x -> 1.16x,
256->256 at 5x5 2.04x -> 1.49x."""


def lanes_1x1_positions() -> frozenset[int]:
    """The output positions of the 1x1 convs that `conv_lanes` takes on this CPU."""
    return LANES_1X1_POSITIONS if host_has_avx512() else NARROW_REGISTER_LANES_1X1_POSITIONS


WINOGRAD_MINIMUM = (32, 64, 14) if host_has_avx512() else (16, 16, 1)
"""(input channels, output channels, output rows) from which an f32 3x3 conv of stride 1 runs as
`conv_winograd` (`CpuSchedule.winograd_conv`), measured in whole models against conv_lanes. On
Zen 1 (AVX2; 2026-11-28) every 3x3 of 16 channels or more gained. On Emerald Rapids (AVX-512;
2026-11-28, one thread, interleaved) taking every 3x3 made SqueezeNet 1.12x and Inception-v2
1.03x slower: conv_lanes runs 150-160 GFLOP/s there, and the transforms' cost per output and U's
bytes (16/9 of w's) outweigh the GEMMs' savings on DenseNet's 128 -> 32s, SqueezeNet's 16 -> 64,
and the 7x7 planes (1.06-1.33x slower alone)."""


def winograd_applies(op: graph.Conv2dOp) -> bool:
    """Whether `conv_winograd` can run the conv at all (`conv_winograd.applies`: f32, 3x3, stride 1,
    dilation 1, one group), whatever its size."""
    return conv_winograd.applies(op.x.type, op.w.type, op.result.type, *(op.get(key) for key in ("strides", "dilations", "groups")))


class PlainSchedule:
    """Plain loop nests, one output each: no blocking, no ukernels, NaN-propagating row max."""

    name: ClassVar[str] = "plain"

    def matmul_blocks(self, m: int, k: int, n: int) -> tuple[int, int, int] | None:
        """Block sizes (MB, KB, NB) of a blocked (m, k, n) matmul, or None for the plain nest."""
        return None

    def packed_matmuls(self, group: Group) -> dict[graph.MatmulOp, None]:
        """The group's matmuls that call the packed GEMM ukernel (an ordered set)."""
        return {}

    def packs_at_run_time(self, op: graph.MatmulOp) -> bool:
        """Whether a matmul whose b is not a constant packs b at run time and calls the packed
        GEMM ukernel (`linalg/matmul.py`)."""
        return False

    def direct_conv(self, op: graph.Conv2dOp) -> bool:
        """Whether the conv calls the direct convolution ukernel."""
        return False

    def conv_ukernel(self, group: Group, op: graph.Conv2dOp) -> str | None:
        """The ukernel a conv of `group` calls (`linalg/conv.py` dispatches on it): with its w a
        constant, "winograd" (`conv_winograd`, on w transformed at compile time; w finite) or
        "lanes" (`conv_lanes`, on w packed at compile time); else the first of "depthwise",
        "gemm" and "direct" whose rule takes it; None for the loop nest."""
        w = group.constant_value(op.w)
        if w is not None and self.winograd_conv(op) and all_finite(w):
            return "winograd"
        if w is not None and self.lanes_conv(op):
            return "lanes"
        for ukernel, takes in (("depthwise", self.depthwise_conv), ("gemm", self.conv_gemm), ("direct", self.direct_conv)):
            if takes(op):
                return ukernel
        return None

    def packed_convs(self, group: Group) -> dict[graph.Conv2dOp, str]:
        """The group's convs whose ukernel takes w packed at compile time (`PACKED_CONV_UKERNELS`),
        each with its ukernel, in order."""
        convs = (op for op in group.ops if isinstance(op, graph.Conv2dOp))
        return {op: ukernel for op in convs if (ukernel := self.conv_ukernel(group, op)) in PACKED_CONV_UKERNELS}

    def winograd_conv(self, op: graph.Conv2dOp) -> bool:
        """Whether the conv, its w a constant of finite values, calls the `conv_winograd` ukernel."""
        return False

    def lanes_conv(self, op: graph.Conv2dOp) -> bool:
        """Whether the conv, its w a constant, calls the `conv_lanes` ukernel."""
        return False

    def conv_gemm(self, op: graph.Conv2dOp) -> bool:
        """Whether the conv calls the packed GEMM ukernel with b row-major (x or its im2col copy)."""
        return False

    def depthwise_conv(self, op: graph.Conv2dOp) -> bool:
        """Whether the conv calls the depthwise convolution ukernel."""
        return False

    def pool_ukernel(self, op: graph.Pool2dOp) -> bool:
        """Whether the pool calls the pooling ukernel."""
        return False

    def row_sums(self, x: SSAValue, reduced: set[int]) -> bool:
        """Whether a sum of `x` over the dims `reduced` calls the row-sum ukernel."""
        return False

    def tile_epilogue(
        self, kernel: Kernel, anchor: Operation
    ) -> tuple[tuple[Step, ...], list[SSAValue]] | None:
        """The group's elementwise tail as the epilogue of the ukernel that `anchor` calls, with
        its operand buffers (`linalg/epilogue.py`), or None: the tail stays a loop nest."""
        return None

    def softmax_row_max(self) -> type[Operation]:
        """The op that combines a softmax's row max."""
        return arith.MaximumfOp

    def softmax_stores_terms(self) -> bool:
        """Whether softmax stores each exp term in its output while summing them."""
        return False

    def merges_short_rows(self) -> bool:
        """Whether an elementwise loop over short rows, and a reduction of the last two dims,
        runs those dims as one loop (`Kernel.elementwise`, `Kernel.reduction`)."""
        return False

    def tiles_transposes(self) -> bool:
        """Whether an elementwise loop that reads a buffer's last dim along another of its own
        dims runs in transposing tiles (`Kernel.elementwise`)."""
        return False


class CpuSchedule(PlainSchedule):
    """The CPU's schedules: each choice measured on the CPU (see the methods)."""

    name: ClassVar[str] = "cpu"

    def matmul_blocks(self, m: int, k: int, n: int) -> tuple[int, int, int] | None:
        """MATMUL_BLOCKS when they divide (m, k, n) and b is more than one block, else None.

        Other shapes stay unblocked rather than take blocks that divide them: those could be
        tiny (a prime dim) and would need a block search per shape.
        """
        _, k_block, n_block = MATMUL_BLOCKS
        if any(size % block for size, block in zip((m, k, n), MATMUL_BLOCKS)) or (k <= k_block and n <= n_block):
            return None
        return MATMUL_BLOCKS

    def packed_matmuls(self, group: Group) -> dict[graph.MatmulOp, None]:
        return packed_matmuls(group)

    def packs_at_run_time(self, op: graph.MatmulOp) -> bool:
        """f32 matmuls with at least a register tile of rows (packed_gemm.ROWS) per b, unless
        b is tiny (k < 16 and n < 32): measured in `lower_matmul`'s docstring."""
        *batch, k, n = op.b.type.get_shape()
        out_shape = op.result.type.get_shape()
        rows = out_shape[-2] if any(size > 1 for size in batch) else math.prod(out_shape[:-1])
        f32_only = all(v.type.get_element_type() == f32 for v in (op.a, op.b, op.result))
        return f32_only and rows >= packed_gemm.ROWS and not (k < 16 and n < 32)

    def direct_conv(self, op: graph.Conv2dOp) -> bool:
        return direct_conv.applies(op.x.type, op.w.type, op.result.type)

    def winograd_conv(self, op: graph.Conv2dOp) -> bool:
        """A conv that `conv_winograd` can run (`winograd_applies`) with at least
        WINOGRAD_MINIMUM's input channels, output channels and output rows."""
        out_channels, in_channels, _, _ = shape_of(op.w)
        least_in, least_out, least_rows = WINOGRAD_MINIMUM
        return (
            winograd_applies(op)
            and in_channels >= least_in
            and out_channels >= least_out
            and shape_of(op.result)[2] >= least_rows
        )

    def lanes_conv(self, op: graph.Conv2dOp) -> bool:
        """An f32 conv of one group whose output channels fill the ukernel's vectors (at most
        1/32 of the lanes idle) and whose rows its tiles fit (`conv_lanes.applies`), with a
        window larger than 1x1 or `lanes_1x1_positions()` output positions; it goes before `conv_gemm` and the
        direct ukernel (benchmarks/conv_lanes.py, conv + bias + relu, batch 1 unless said, 1
        thread, interleaved, time of the direct ukernel / lanes and of the conv GEMM / lanes,
        2026-11-25):

        - ResNet-50's 3x3s at 56, 28, 14 (64, 128, 256 channels): 253-261 GFLOP/s, 1.13-1.22x
          and 1.07-1.16x; at 7 (512): 255 GFLOP/s, 2.36x and 1.17x; Inception-v2's 64->192 at
          56: 1.22x and 1.05x; 96, 160 and 320 channels at 28, 14, 7: 1.12-2.34x and 1.08-1.22x;
          SqueezeNet's at 55, 27, 13 (tiles of 11, 12, 13 positions): 245-260 GFLOP/s,
          1.15-1.25x and 1.09-1.10x;
        - the 3->64 7x7/2 stem at 224: 236-240 GFLOP/s, 1.23x and 1.14-1.17x;
        - stride 2 (128 at 56, 256 at 28, 64 at 56): 1.15-1.20x and 1.00-1.20x;
        - 2 threads (each chunk 32 output channels): 1.13-1.20x and 1.14-1.40x on the 3x3s at 56,
          28, 14; 2.43x and 1.22x at 7;
        - few channels: 32->32 at 28 1.11x, 1.27x; 16->48 at 56 1.10x, 1.11x; 16->16 at 56 0.98x,
          1.15x; 3->32 at 224 stride 2 and at 56 1.00x, 1.00x; 8 images of 64 at 7x7: 2.30x,
          1.31x; 64 images of 8->16 5x5 at 14: 1.22x, 1.32x; outputs of 1x1, 7x1: 2.9-3.4x;
        - 1x1s (x read in place at stride 1, its stride phases at 2) with 14x14 outputs: GEMM /
          lanes 1.07-1.14x at stride 1, 1.06x at stride 2; inside ResNet-50 and Inception-v2
          (`Executable.profile`, interleaved) 1.09-1.16x. With 28x28 and 56x56 outputs the GEMM
          stays (0.91-0.99x at stride 1, 0.78x for 256->512 /2 at 56, whose four stride phases
          lanes copies), and with 7x7 outputs: 1.02-1.15x alone, but 0.85-0.93x inside the
          models, where w (0.5-4 MB, 49 outputs per weight) comes from memory;
          without AVX-512 the 1x1s at 7x7 and smaller outputs take lanes too (2026-11-27,
          NARROW_REGISTER_LANES_1X1_POSITIONS);
        - 1x1s at one output position (squeeze-and-excite's, conv + bias + SiLU, 2026-11-25):
          GEMM / lanes 2.0x for 48->1152 (14.3 / 7.0 us), 2.4x for 1152->48, 1.5x for 28->672;
          in EfficientNet-ish (`Executable.profile`, both compiled in one process) its 32 such
          steps 276 -> 200 us;
        - not taken either: output channels that leave more than 1/32 of the lanes idle in
          their last block (3->24 at 56, direct / lanes 0.81x; 64->40 at 50x50, GEMM / lanes
          0.93x) and convs of one input channel (the depthwise ukernel's). SqueezeNet's last
          conv, 512->1000 1x1 at 13x13 (8 of 1008 lanes idle), is taken: GEMM / lanes 1.04-1.05x
          in the model (697 -> 664 us, three interleaved profiles). VGG's 64->64 at 224 runs at about 115
          GFLOP/s both ways (direct / lanes 0.97x)."""
        out_channels, _, kernel_h, kernel_w = shape_of(op.w)
        _, _, out_h, out_w = shape_of(op.result)
        idle_lanes = -out_channels % VECTOR
        return (
            conv_lanes.applies(op.x.type, op.w.type, op.result.type, op.get("groups"))
            and not self.depthwise_conv(op)
            and idle_lanes * 32 <= out_channels
            and ((kernel_h, kernel_w) != (1, 1) or out_h * out_w in lanes_1x1_positions())
        )

    def conv_gemm(self, op: graph.Conv2dOp) -> bool:
        """An f32 conv of one group whose window is 1x1 (any stride) or whose output rows are
        at most CONV_GEMM_WIDTH columns, or a grouped (not depthwise) 1x1, one GEMM per group;
        the others keep the direct ukernel, which vectorizes along output rows
        (benchmarks/conv_gemm.py, conv + bias + relu, batch 1 unless said, 1 and 2 threads,
        interleaved, direct / GEMM time on 2026-11-25):

        - 1x1s of stride 1 (b is x itself) at 56, 28, 14 and 7: 1.04-1.45x at 56-14, 1.83-1.89x
          at 7 (ResNet-50: 2048->512, 512->2048; 200 GFLOP/s against 108); 2 threads 1.06-1.93x;
          1.38x on 4->8 channels at 56;
        - 1x1s of stride 2 (b an im2col copy): 1.04-1.85x (ResNet-50's downsamples), 3.1-4.4x with
          32 or fewer output channels (the direct ukernel copies all of x into stride phases);
        - 3x3s at 7x7 output (stride 1 or 2, 192-512 channels): 1.78-1.84x, 1.70-1.79x at 2
          threads; 1.12-1.35x with 16 or 32 channels; 8 images of 64 channels: 1.62x;
        - 3x3s at 14x14 output: 0.96-1.00x (256 and 160 channels, 1 and 4 images), 0.79-0.86x
          with 32 output channels; at 28 and 56: 0.88-1.15x at 1 thread, 0.52-1.03x at 2
          (each chunk of output channels copies the whole im2col buffer); the 7x7 stem 1.04x
          and 0.50x: these keep the direct ukernel;
        - stems of at most STEM_GEMM_TAPS taps per output (3 channels, 3x3) with 64 or more
          output channels, whose rows `conv_lanes` does not take (2026-11-25, + bias + relu):
          SqueezeNet's 3->64 3x3/2 at 224 (111 columns) 1.10x (250 -> 227 us), at 227 1.24x,
          3->96 3x3/2 at 200 1.19x; not with fewer output channels (3->24 at 56 0.97x, 3->16 at
          111 0.65x) nor EfficientNet's 3->32 3x3/2 at 224 (0.97x);
        - not the stems of more taps, on any CPU: without AVX-512 they ran as the GEMM while
          conv_lanes' and the direct ukernel's tiles spilled there (2026-11-27, "Stems");
          with those tiles sized for AVX2, conv_lanes and the direct ukernel run them faster
          (+ bias + relu, 1 thread and 2, interleaved: the 3->64 7x7/2 stem at 224 0.79x and
          0.65x the GEMM's time, ZFNet's 3->96 7x7/2 0.82x and 0.75x, AlexNet's 3->96 11x11/4
          0.86x and 0.83x);
        - grouped 1x1s (2026-11-27, 2-core EPYC with AVX2 only, `conv_gemm.py --grouped`, 1
          thread): ShuffleNet v1's 4 groups of 6-136 channels at 56, 28, 14 and 7 1.13-1.39x at
          56-14, 1.80-1.97x at 7 (544 channels at 7x7: 0.515 -> 0.261 ms); 32 groups of 2
          channels at 56 1.78x, 8 of 4 at 28 1.60x, 3 of 16 at stride 2 2.25x, 3 of 80 and 160
          1.10-1.26x. In the light zoo's ShuffleNet its 32 grouped 1x1 steps 10.25 -> 7.55 ms
          (ONNX Runtime's nodes 7.19 ms).
        """
        out_channels, in_channels, kernel_h, kernel_w = shape_of(op.w)
        if not direct_conv.applies(op.x.type, op.w.type, op.result.type) or self.depthwise_conv(op):
            return False
        if op.get("groups") > 1:
            return (kernel_h, kernel_w) == (1, 1)
        stem = in_channels * kernel_h * kernel_w <= STEM_GEMM_TAPS and out_channels >= 64
        return (kernel_h, kernel_w) == (1, 1) or shape_of(op.result)[3] <= CONV_GEMM_WIDTH or stem

    def depthwise_conv(self, op: graph.Conv2dOp) -> bool:
        return depthwise_conv.applies(op.x.type, op.w.type, op.result.type, op.get("groups"), op.get("strides"))

    def pool_ukernel(self, op: graph.Pool2dOp) -> bool:
        return pooling.applies(op.x.type, op.result.type, op.get("kernel"), op.get("strides"))

    def row_sums(self, x: SSAValue, reduced: set[int]) -> bool:
        return row_sums.applies(x.type, reduced)

    def tile_epilogue(self, kernel: Kernel, anchor: Operation):
        """The tail's epilogue, where the ukernel takes it (`depthwise_conv.takes_epilogue`)."""
        epilogue = tile_epilogue_of(kernel, anchor)
        if epilogue and self.depthwise_conv(anchor):
            return epilogue if depthwise_conv.takes_epilogue(epilogue[0], shape_of(anchor.results[0])) else None
        return epilogue

    def softmax_row_max(self) -> type[Operation]:
        """`maxnumf`: the max only shifts exp's argument, and maxnumf skips NaN and vectorizes
        to half the instructions of NaN-propagating `maximumf` (a NaN in a row still makes its
        sum, and so the whole row, NaN)."""
        return arith.MaxnumfOp

    def softmax_stores_terms(self) -> bool:
        return True

    def merges_short_rows(self) -> bool:
        return True

    def tiles_transposes(self) -> bool:
        return True


SCHEDULES: dict[str, PlainSchedule] = {schedule.name: schedule for schedule in (CpuSchedule(), PlainSchedule())}
"""The schedules by name (the `schedule` option of convert-graph-to-linalg)."""
