"""A FIFO inside an nn~ file, so that a model that needs blocks of L samples runs at any buffer."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import ExportError

__all__ = ["BlockFifo", "append_fifo", "fifo_block", "fifo_latency"]


def fifo_block(least: int, higher: int) -> int:
    """The block of the FIFO an nn~ file needs, in samples, ``0`` for none: ``least`` (the
    samples its model needs per call) when nn~ may call it with fewer, that is with buffers of
    ``higher`` samples (the largest ratio of its methods, which nn~ raises smaller buffers
    to)."""
    return least if least > higher else 0


def fifo_latency(block: int, buffer: int) -> int:
    """The samples a :class:`BlockFifo` of ``block`` samples delays its output by when nn~
    calls it with buffers of ``buffer`` samples: none when the buffers hold whole blocks,
    ``block`` otherwise (``0`` when ``block`` is 0: no FIFO)."""
    return 0 if block == 0 or buffer % block == 0 else block


class BlockFifo(nn.Module):
    """A method's graph run on whole blocks of ``block`` samples, whatever the calls bring.

    nn~ calls a file with buffers of its own size (its argument or ``bufsize``, raised only to
    the largest ratio of the file's methods), and never reads how many samples the model
    needs. While every call brings whole blocks, the graph is called on it directly, with no
    latency. From the first call that does not (and from then on, so that the output is
    continuous), the input is queued, the graph runs on every whole number of blocks held (in
    one call), and the call returns the oldest output queued, which starts with ``block``
    samples of silence: the output is the graph's delayed by exactly ``block`` samples. A
    change of batch size (``mc.nn~``) starts over.

    Args:
        graph: the method's graph module (held as ``inner``), one ``[batch, in_channels,
            frames]`` tensor in.
        block: the samples the graph needs per call (a multiple of both ratios).
        in_ratio: samples per input frame.
        out_ratio: samples per output frame.
        out_channels: channels of the output.

    Shape:
        ``[batch, in_channels, n / in_ratio]`` to ``[batch, out_channels, n / out_ratio]``,
        for any ``n`` that ``out_ratio`` divides.
    """

    def __init__(
        self, graph: nn.Module, block: int, in_ratio: int, out_ratio: int, out_channels: int
    ) -> None:
        super().__init__()
        if block % in_ratio or block % out_ratio:
            raise ExportError(
                f"a FIFO block of {block} samples must hold whole frames of the ratios "
                f"{in_ratio} (in) and {out_ratio} (out)"
            )
        self.inner = graph
        self.block = block
        self.in_ratio = in_ratio
        self.out_ratio = out_ratio
        self.out_channels = out_channels
        self.in_frames = block // in_ratio
        self.out_frames = block // out_ratio
        self.queuing = False
        self.batch = -1
        self.register_buffer("pending", torch.zeros(0, 0, 0))
        self.register_buffer("queue", torch.zeros(0, 0, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self.batch:
            self.batch = x.shape[0]
            self.queuing = False
        frames = x.shape[2]
        if not self.queuing:
            if frames % self.in_frames == 0:
                return self.inner(x)
            self.queuing = True
            self.pending = x[:, :, :0]
            self.queue = torch.zeros(
                [x.shape[0], self.out_channels, self.out_frames], dtype=x.dtype, device=x.device
            )
        samples = frames * self.in_ratio
        if samples % self.out_ratio != 0:
            raise Exception(
                f"this method returns a frame every {self.out_ratio} samples: call it with a "
                f"multiple of {self.out_ratio} samples, got {samples}"
            )
        held = torch.cat([self.pending, x], 2)
        whole = held.shape[2] - held.shape[2] % self.in_frames
        if whole > 0:
            y = self.inner(held[:, :, :whole])
            self.queue = torch.cat([self.queue, y.to(self.queue.dtype)], 2)
        self.pending = held[:, :, whole:]
        wanted = samples // self.out_ratio
        out = self.queue[:, :, :wanted]
        self.queue = self.queue[:, :, wanted:]
        return out


def append_fifo(
    container: nn.Module, method: str, passed: list[str], block: int, params: tuple[int, ...]
) -> None:
    """Wrap ``method``'s graph in ``container`` (``tb_method_<method>``, with its safety stage
    if it has one) in a :class:`BlockFifo` of ``block`` samples; ``passed``: the arguments the
    graph takes; ``params``: the method's ``[in_channels, in_ratio, out_channels, out_ratio]``.
    """
    if len(passed) != 1:
        raise ExportError(
            f"the model needs blocks of {block} samples, and nn~ may call {method!r} with fewer: "
            f"the export puts a FIFO in front of its graph, which takes graphs of one input; "
            f"the graph of {method!r} takes {passed} (give the others defaults that are not "
            f"traced as inputs), or export methods whose ratios reach {block}"
        )
    name = f"tb_method_{method}"
    fifo = BlockFifo(getattr(container, name), block, params[1], params[3], params[2])
    setattr(container, name, fifo)
