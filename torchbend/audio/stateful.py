"""Layers that keep state between blocks, which :func:`~torchbend.audio.make_streaming` puts in
place of a model's convolutions and recurrent layers."""

# No ``from __future__ import annotations``: TorchScript reads the annotations of the state
# tensors, and cannot resolve them as strings.

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "DelayLine",
    "StatefulGRU",
    "StatefulLSTM",
    "StreamingConv1d",
    "StreamingConvTranspose1d",
    "silence_pending",
]


def silence_pending(x: torch.Tensor, pending: torch.Tensor, skip: int) -> torch.Tensor:
    """``x`` with its first frames zeroed while they come from before the signal: the
    ``pending`` such frames left (of ``skip``), counted off as they pass."""
    if skip <= 0:
        return x
    left = int(pending.item())
    if left > 0:
        count = min(left, x.shape[-1])
        x = torch.cat([torch.zeros_like(x[..., :count]), x[..., count:]], -1)
        pending.sub_(count)
    return x


class StreamingConv1d(nn.Module):
    """A stride-1 ``Conv1d`` run on its past input and the block: the same output as the
    convolution on the whole signal padded with ``(kernel_size - 1) * dilation`` zeros on the
    left, block by block. Its weights are the wrapped convolution's (``conv``).

    ``skip``: frames its input is delayed by against the signal (what layers before it
    delay); the first ``skip`` frames after a reset come from before the signal, and are
    taken for zeros, as the padding of the convolution run offline.

    Shape:
        - Input: ``[batch, in_channels, time]``
        - Output: ``[batch, out_channels, time]``

    >>> conv = StreamingConv1d(nn.Conv1d(1, 2, 3, padding=1))
    >>> x = torch.randn(1, 1, 8)
    >>> whole = conv(x); conv.reset_cache()
    >>> bool(torch.allclose(whole, torch.cat([conv(x[..., :4]), conv(x[..., 4:])], -1)))
    True
    """

    cache: torch.Tensor
    pending: torch.Tensor
    # A leaf of bended graphs: its cache is resized when the batch changes, which a graph
    # cannot record, while a leaf's own code runs at every call. Its weights still bend.
    torchbend_leaf = True

    def __init__(self, conv: nn.Conv1d, skip: int = 0) -> None:
        super().__init__()
        self.conv = conv
        self.skip = skip
        # Frames from before the signal still to come: a buffer, so that it is state like
        # the caches (saved and put back with them, by the streaming check).
        self.register_buffer("pending", torch.tensor(skip), persistent=False)
        self.size = (conv.kernel_size[0] - 1) * conv.dilation[0]
        self.register_buffer("cache", torch.zeros(1, conv.in_channels, self.size), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from silence."""
        self.cache.zero_()
        self.pending.fill_(self.skip)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = silence_pending(x, self.pending, self.skip)
        if self.size > 0:
            if self.cache.shape[0] != x.shape[0] or self.cache.dtype != x.dtype:
                self.cache = x.new_zeros(x.shape[0], x.shape[1], self.size)
            x = torch.cat([self.cache, x], -1)
            self.cache.copy_(x[..., x.shape[-1] - self.size :])
        conv = self.conv
        return F.conv1d(x, conv.weight, conv.bias, 1, 0, conv.dilation, conv.groups)


class StreamingConvTranspose1d(nn.Module):
    """A ``ConvTranspose1d`` (upsampling by its stride) whose output tail, which overlaps the
    next block, is kept and added to it: block by block, the same output as on the whole
    signal with none of its ``padding`` cropped on the left (a delay of ``padding`` frames).
    ``skip``: as :class:`StreamingConv1d`. Its weights are the wrapped layer's.

    Shape:
        - Input: ``[batch, in_channels, time]``
        - Output: ``[batch, out_channels, time * stride]``
    """

    cache: torch.Tensor
    pending: torch.Tensor
    torchbend_leaf = True

    def __init__(self, conv: nn.ConvTranspose1d, skip: int = 0) -> None:
        super().__init__()
        self.conv = conv
        self.skip = skip
        self.stride = conv.stride[0]
        self.overlap = max(conv.kernel_size[0] - self.stride, 0)
        self.register_buffer("pending", torch.tensor(skip), persistent=False)
        shape = (1, conv.out_channels, self.overlap)
        self.register_buffer("cache", torch.zeros(shape), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from silence."""
        self.cache.zero_()
        self.pending.fill_(self.skip)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = silence_pending(x, self.pending, self.skip)
        conv = self.conv
        y = F.conv_transpose1d(x, conv.weight, None, self.stride, 0, 0, conv.groups)
        length = x.shape[-1] * self.stride
        if y.shape[-1] < length:
            y = F.pad(y, (0, length - y.shape[-1]))
        if self.overlap > 0:
            if self.cache.shape[0] != y.shape[0] or self.cache.dtype != y.dtype:
                self.cache = y.new_zeros(y.shape[0], y.shape[1], self.overlap)
            head = y[..., : self.overlap] + self.cache
            self.cache.copy_(y[..., length : length + self.overlap])
            y = torch.cat([head, y[..., self.overlap : length]], -1)
        else:
            y = y[..., :length]
        if conv.bias is not None:
            y = y + conv.bias[:, None]
        return y


class DelayLine(nn.Module):
    """Delays its input by ``delay`` frames along axis ``dim``, carrying the last frames from
    one block to the next (it aligns the branches of a converted model where they merge).

    >>> line = DelayLine(2, dim=2)
    >>> line(torch.arange(1.0, 5.0).reshape(1, 1, 4)).tolist()
    [[[0.0, 0.0, 1.0, 2.0]]]
    """

    cache: torch.Tensor
    torchbend_leaf = True

    def __init__(self, delay: int, dim: int) -> None:
        super().__init__()
        self.delay = delay
        self.dim = dim
        self.register_buffer("cache", torch.zeros(0), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from silence."""
        self.cache.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(self.dim, -1)
        shape = list(x.shape[:-1])
        if list(self.cache.shape[:-1]) != shape or self.cache.dtype != x.dtype:
            self.cache = x.new_zeros(shape + [self.delay])  # noqa: RUF005 (TorchScript: no starred list)
        full = torch.cat([self.cache, x], -1)
        self.cache.copy_(full[..., full.shape[-1] - self.delay :])
        return full[..., : x.shape[-1]].transpose(self.dim, -1)


class _Recurrent(nn.Module):
    """What the stateful recurrent layers share: the wrapped layer and the frames from before
    the signal still to skip."""

    pending: torch.Tensor
    torchbend_leaf = True

    def __init__(self, rnn: nn.RNNBase, skip: int) -> None:
        super().__init__()
        self.rnn = rnn
        self.skip = skip
        # Frames from before the signal still to come: a buffer, so that it is state like
        # the caches (saved and put back with them, by the streaming check).
        self.register_buffer("pending", torch.tensor(skip), persistent=False)
        self.layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
        self.batch_dim = 0 if rnn.batch_first else 1
        self.time_dim = 1 - self.batch_dim

    def _signal(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        """``x`` without the frames from before the signal, and how many were cut."""
        count = min(int(self.pending.item()), x.shape[self.time_dim]) if self.skip > 0 else 0
        self.pending.sub_(count)
        return x.narrow(self.time_dim, count, x.shape[self.time_dim] - count), count

    def _silence(self, x: torch.Tensor, features: int) -> torch.Tensor:
        """The output for a block wholly before the signal: zeros."""
        shape = list(x.shape)
        shape[-1] = features
        return x.new_zeros(shape)


class StatefulGRU(_Recurrent):
    """An ``nn.GRU`` that starts each call from the state the last one ended with (zeros at
    first, as the GRU called without a state), so that blocks continue one another.
    ``skip``: frames from before the signal after a reset (see :class:`StreamingConv1d`),
    given zeros as output, the state starting after them."""

    state: torch.Tensor

    def __init__(self, rnn: nn.GRU, skip: int = 0) -> None:
        super().__init__(rnn, skip)
        self.register_buffer("state", torch.zeros(self.layers, 1, rnn.hidden_size), False)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from the GRU's zero state."""
        self.state.zero_()
        self.pending.fill_(self.skip)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch = x.shape[self.batch_dim]
        if self.state.shape[1] != batch or self.state.dtype != x.dtype:
            self.state = x.new_zeros(self.layers, batch, self.rnn.hidden_size)
        rest, count = self._signal(x)
        if rest.shape[self.time_dim] == 0:  # all before the signal
            return self._silence(x, self.rnn.hidden_size), self.state
        y, h = self.rnn(rest, self.state)
        self.state.copy_(h)
        return _after_zeros(y, count, self.time_dim), h


class StatefulLSTM(_Recurrent):
    """An ``nn.LSTM`` that starts each call from the state the last one ended with (see
    :class:`StatefulGRU`)."""

    hidden: torch.Tensor
    cell: torch.Tensor

    def __init__(self, rnn: nn.LSTM, skip: int = 0) -> None:
        super().__init__(rnn, skip)
        self.out_size = rnn.proj_size if rnn.proj_size > 0 else rnn.hidden_size
        self.register_buffer("hidden", torch.zeros(self.layers, 1, self.out_size), False)
        self.register_buffer("cell", torch.zeros(self.layers, 1, rnn.hidden_size), False)

    def reset_cache(self) -> None:
        """Forget the past: the next block starts from the LSTM's zero state."""
        self.hidden.zero_()
        self.cell.zero_()
        self.pending.fill_(self.skip)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch = x.shape[self.batch_dim]
        if self.hidden.shape[1] != batch or self.hidden.dtype != x.dtype:
            self.hidden = x.new_zeros(self.layers, batch, self.out_size)
            self.cell = x.new_zeros(self.layers, batch, self.rnn.hidden_size)
        rest, count = self._signal(x)
        if rest.shape[self.time_dim] == 0:  # all before the signal
            return self._silence(x, self.out_size), (self.hidden, self.cell)
        y, (h, c) = self.rnn(rest, (self.hidden, self.cell))
        self.hidden.copy_(h)
        self.cell.copy_(c)
        return _after_zeros(y, count, self.time_dim), (h, c)


def _after_zeros(y: torch.Tensor, count: int, dim: int) -> torch.Tensor:
    """``y`` after ``count`` frames of zeros along ``dim`` (those from before the signal)."""
    if count == 0:
        return y
    shape = list(y.shape)
    shape[dim] = count
    return torch.cat([y.new_zeros(shape), y], dim)
