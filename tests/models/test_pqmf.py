"""Tests for the PQMF filter bank: near-perfect reconstruction, band separation, streaming."""

from __future__ import annotations

import math

import pytest
import torch

from torchbend.models import PQMF
from torchbend.models.pqmf import prototype_filter

RATE = 44100


def error_db(y: torch.Tensor, x: torch.Tensor, delay: int) -> float:
    """Power of ``y`` minus ``x`` delayed by ``delay``, in dB re the power of ``x``."""
    error = y[..., delay:] - x[..., : x.shape[-1] - delay]
    return 10 * math.log10(float(error.pow(2).mean() / x[..., delay:].pow(2).mean()))


@pytest.mark.parametrize(("bands", "taps", "bound"), [(16, 16, -55), (8, 16, -55), (4, 8, -35)])
def test_merge_of_split_is_a_delay(bands: int, taps: int, bound: float) -> None:
    """Longer filters reconstruct better: 16 taps per band give about -60 dB."""
    torch.manual_seed(0)
    pqmf = PQMF(bands, taps)
    assert pqmf.delay == bands * taps - bands
    x = torch.randn(2, 1, bands * 1000, dtype=torch.float64)
    with torch.no_grad():
        y = pqmf.double()(x)
    assert error_db(y, x, pqmf.delay) < bound
    # one sample off is far worse: the delay is the right one
    assert error_db(y, x, pqmf.delay + 1) > -10


def test_a_sine_lands_in_its_band_and_comes_back_at_its_level() -> None:
    pqmf = PQMF(16)
    width = RATE / 32  # each band covers sr / (2 * bands)
    t = torch.arange(16 * 2000, dtype=torch.float64) / RATE
    for band in (0, 5, 12):
        freq = (band + 0.5) * width
        x = torch.sin(2 * math.pi * freq * t).float()[None, None]
        with torch.no_grad():
            power = pqmf.analysis(x)[0, :, 100:].pow(2).mean(-1)
            y = pqmf(x)
        assert int(power.argmax()) == band
        others = torch.cat([power[:band], power[band + 1 :]])
        assert float(others.max() / power[band]) < 1e-8  # more than 80 dB of separation
        assert error_db(y, x, pqmf.delay) < -55


def test_streaming_matches_offline() -> None:
    pqmf = PQMF(16)
    x = torch.randn(1, 1, 16 * 300)
    with torch.no_grad():
        offline = pqmf(x)
        for module in pqmf.modules():
            if hasattr(module, "streaming"):
                module.streaming = True
        streamed = torch.cat([pqmf(b) for b in x.split(16 * 7, -1)], -1)
    torch.testing.assert_close(streamed, offline, atol=1e-6, rtol=1e-5)


def test_filters_are_fixed_and_the_prototype_is_normalised() -> None:
    pqmf = PQMF(8, 8)
    assert not any(p.requires_grad for p in pqmf.parameters())
    h = prototype_filter(8, 8)
    assert h.numel() == 64 and math.isclose(float(h.sum()), 1.0, rel_tol=1e-9)
    torch.testing.assert_close(h, h.flip(0))  # linear phase


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match=r"at least 2 bands and 2 taps per band, got 1 and 4"):
        PQMF(1, 4)
