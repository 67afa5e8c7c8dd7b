"""Causal convolutions that can run block by block, keeping the past samples they need."""

# No ``from __future__ import annotations`` here nor in tiny_rave.py: TorchScript reads the
# class annotation of the ``cache`` buffers and cannot resolve it when it is a string.

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ModelError

__all__ = ["CachedConv1d", "CachedConvTranspose1d"]


class CachedConv1d(nn.Conv1d):
    """A causal 1d convolution with an optional cache of past input for block-wise streaming.

    Offline (``streaming=False``, the default) the input is padded on the left with
    ``(kernel_size - 1) * dilation - (stride - 1)`` zeros, so that output frame ``i`` only sees
    input samples up to ``i * stride + stride - 1`` and a length ``T`` input gives
    ``T // stride`` frames. In streaming mode the left padding is the tail of the previous
    block instead of zeros, so consecutive blocks give the same output as one call on the
    concatenated signal. Block lengths must then be multiples of ``stride``.

    Args:
        in_channels (int): input channels.
        out_channels (int): output channels.
        kernel_size (int): kernel size, in samples (frames of the input).
        stride (int): hop between output frames, in input samples.
        dilation (int): spacing between kernel taps, in input samples.
        bias (bool): learn an additive bias.

    Shape:
        - Input: ``[batch, in_channels, time]``
        - Output: ``[batch, out_channels, time // stride]``

    >>> conv = CachedConv1d(1, 2, 3)
    >>> conv(torch.randn(1, 1, 16)).shape
    torch.Size([1, 2, 16])
    """

    cache: torch.Tensor
    # A leaf of bended graphs: its cache is resized when the batch size changes, which a graph
    # cannot record, while a leaf's own code runs at every call. Its weights still bend.
    torchbend_leaf = True
    # Its output is linear in its input's channels through ``weight`` (the cache holds past
    # input, or past output, made with the same weight): a static channel bending of its
    # input folds into its weight (torchbend.engine.folding).
    torchbend_linear = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        dilation: int = 1,
        bias: bool = True,
    ) -> None:
        if kernel_size < 1:
            raise ModelError(f"kernel_size must be at least 1, got {kernel_size}")
        if stride < 1 or stride > (kernel_size - 1) * dilation + 1:
            raise ModelError(
                f"stride must be between 1 and the receptive field "
                f"{(kernel_size - 1) * dilation + 1}, got {stride}"
            )
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, bias=bias
        )
        self.pad = (kernel_size - 1) * dilation - (stride - 1)
        self.streaming = False
        self.register_buffer("cache", torch.zeros(1, in_channels, self.pad), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next streamed block starts from silence."""
        self.cache.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.streaming and self.pad > 0:
            if self.cache.shape[0] != x.shape[0]:
                self.cache = x.new_zeros(x.shape[0], self.in_channels, self.pad)
            x = torch.cat([self.cache, x], -1)
            self.cache.copy_(x[..., x.shape[-1] - self.pad :])
        elif self.pad > 0:
            x = F.pad(x, (self.pad, 0))
        return self._conv_forward(x, self.weight, self.bias)


class CachedConvTranspose1d(nn.ConvTranspose1d):
    """A causal transposed 1d convolution (upsampling) that can stream block by block.

    Each input frame writes ``kernel_size`` output samples starting at ``frame * stride``; the
    output is cut to ``time * stride`` samples. Offline, the samples that spill past the end
    are dropped; in streaming mode they are kept in a cache and added to the start of the next
    block, so consecutive blocks give the same output as one call on the concatenated signal.

    Args:
        in_channels (int): input channels.
        out_channels (int): output channels.
        kernel_size (int): kernel size, in output samples; from ``stride`` to ``2 * stride``.
        stride (int): upsampling factor (output samples per input frame).
        bias (bool): learn an additive bias.

    Shape:
        - Input: ``[batch, in_channels, time]``
        - Output: ``[batch, out_channels, time * stride]``

    >>> up = CachedConvTranspose1d(2, 1, 8, stride=4)
    >>> up(torch.randn(1, 2, 5)).shape
    torch.Size([1, 1, 20])
    """

    cache: torch.Tensor
    # A leaf of bended graphs: its cache is resized when the batch size changes, which a graph
    # cannot record, while a leaf's own code runs at every call. Its weights still bend.
    torchbend_leaf = True
    # Its output is linear in its input's channels through ``weight`` (the cache holds past
    # input, or past output, made with the same weight): a static channel bending of its
    # input folds into its weight (torchbend.engine.folding).
    torchbend_linear = True

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, bias: bool = True
    ) -> None:
        if stride < 1 or not stride <= kernel_size <= 2 * stride:
            raise ModelError(
                f"kernel_size must be between stride and 2 * stride (stride={stride}), "
                f"got {kernel_size}"
            )
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, bias=bias)
        self.overlap = kernel_size - stride
        self.streaming = False
        self.register_buffer("cache", torch.zeros(1, out_channels, self.overlap), persistent=False)

    def reset_cache(self) -> None:
        """Forget the past: the next streamed block starts from silence."""
        self.cache.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        # The bias is added after the overlap-add so that it is counted once per sample.
        y = F.conv_transpose1d(x, self.weight, None, self.stride)
        length = x.shape[-1] * self.stride[0]
        if self.streaming and self.overlap > 0:
            if self.cache.shape[0] != x.shape[0]:
                self.cache = x.new_zeros(x.shape[0], self.out_channels, self.overlap)
            head = y[..., : self.overlap] + self.cache
            self.cache.copy_(y[..., length:])
            y = torch.cat([head, y[..., self.overlap : length]], -1)
        else:
            y = y[..., :length]
        if self.bias is not None:
            y = y + self.bias[:, None]
        return y
