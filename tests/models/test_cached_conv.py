"""Tests for the cached causal convolutions: causality, streaming == offline, validation."""

from __future__ import annotations

import pytest
import torch

from torchbend.models import CachedConv1d, CachedConvTranspose1d


def stream(
    module: CachedConv1d | CachedConvTranspose1d, x: torch.Tensor, block: int
) -> torch.Tensor:
    module.streaming = True
    module.reset_cache()
    out = torch.cat([module(b) for b in x.split(block, -1)], -1)
    module.streaming = False
    return out


@pytest.mark.parametrize(
    ("kernel", "stride", "dilation"), [(1, 1, 1), (3, 1, 1), (3, 1, 3), (8, 4, 1), (4, 2, 1)]
)
def test_conv_streaming_matches_offline(kernel: int, stride: int, dilation: int) -> None:
    torch.manual_seed(0)
    conv = CachedConv1d(3, 5, kernel, stride=stride, dilation=dilation)
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        offline = conv(x)
        assert offline.shape == (2, 5, 64 // stride)
        torch.testing.assert_close(stream(conv, x, 16), offline)


def test_conv_is_causal() -> None:
    torch.manual_seed(0)
    conv = CachedConv1d(1, 1, 8, stride=4)
    x = torch.randn(1, 1, 32)
    changed = x.clone()
    changed[..., 20:] += 1.0  # frame i sees samples up to 4 * i + 3
    with torch.no_grad():
        a, b = conv(x), conv(changed)
    torch.testing.assert_close(a[..., :5], b[..., :5])
    assert not torch.equal(a[..., 5], b[..., 5])


@pytest.mark.parametrize(("kernel", "stride"), [(4, 4), (8, 4), (3, 2)])
def test_transposed_streaming_matches_offline(kernel: int, stride: int) -> None:
    torch.manual_seed(0)
    up = CachedConvTranspose1d(3, 2, kernel, stride=stride)
    x = torch.randn(2, 3, 12)
    with torch.no_grad():
        offline = up(x)
        assert offline.shape == (2, 2, 12 * stride)
        torch.testing.assert_close(stream(up, x, 1), offline)
        torch.testing.assert_close(stream(up, x, 4), offline)


def test_cache_follows_batch_size() -> None:
    conv = CachedConv1d(1, 1, 3)
    conv.streaming = True
    assert conv(torch.randn(4, 1, 8)).shape == (4, 1, 8)
    assert conv.cache.shape == (4, 1, 2)


def test_caches_are_not_saved() -> None:
    assert set(CachedConv1d(1, 1, 3).state_dict()) == {"weight", "bias"}
    assert set(CachedConvTranspose1d(1, 1, 4, 2).state_dict()) == {"weight", "bias"}


def test_validation() -> None:
    with pytest.raises(ValueError, match=r"kernel_size must be at least 1, got 0"):
        CachedConv1d(1, 1, 0)
    with pytest.raises(ValueError, match=r"receptive field 3, got 4"):
        CachedConv1d(1, 1, 3, stride=4)
    with pytest.raises(ValueError, match=r"between stride and 2 \* stride .* got 9"):
        CachedConvTranspose1d(1, 1, 9, stride=4)


def test_torchscript() -> None:
    x = torch.randn(1, 2, 16)
    for module in (CachedConv1d(2, 3, 4, stride=2), CachedConvTranspose1d(2, 3, 4, stride=2)):
        scripted = torch.jit.script(module)
        torch.testing.assert_close(scripted(x), module(x))
