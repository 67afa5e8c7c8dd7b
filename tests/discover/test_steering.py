"""Steering from examples (torchbend.discover.steering): a planted model whose brightness is
known by construction, tiny_ddsp streamed and exported to nn~, and bad input."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchbend as tb
from torchbend.audio.descriptors import spectral_centroid
from torchbend.audio.quality import sine
from torchbend.audio.stream import reset_cache
from torchbend.discover import steer_between, steering_vector
from torchbend.errors import BendingError, SelectionError

RATE = 16000
LENGTH = 8192
STRENGTHS = [0.0, 0.25, 0.5, 0.75, 1.0]


BOX = torch.full((1, 1, 9), 1.0 / 9)


def lowpass(x: torch.Tensor) -> torch.Tensor:
    """Three 9-sample moving averages along time (25 taps): the dark band, below about 1 kHz
    at 16 kHz."""
    for _ in range(3):
        x = F.conv1d(x, BOX, padding=4)
    return x


class Planted(nn.Module):
    """Sound in, sound out: the log levels of the input's high and low bands (the activation
    ``levels``, channel 0 the high band, 1 the low) set the gains of a bright and a dark
    noise (fixed buffers of the same RMS), mixed to the output. Brightness is channel 0
    against channel 1 by construction."""

    def __init__(self) -> None:
        super().__init__()
        noise = torch.randn(1, 1, LENGTH, generator=torch.Generator().manual_seed(0))
        dark, bright = lowpass(noise), noise - lowpass(noise)
        self.register_buffer("dark", dark / dark.std())  # both of unit RMS
        self.register_buffer("bright", bright / bright.std())
        delta = torch.zeros(1, 1, 25)
        delta[..., 12] = 1.0
        self.bands = nn.Conv1d(1, 2, 25, padding=12, bias=False)
        with torch.no_grad():
            self.bands.weight.copy_(torch.cat([delta - lowpass(delta), lowpass(delta)]))
        self.levels = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        power = F.avg_pool1d(self.bands(x).pow(2), 65, stride=1, padding=32)
        gains = torch.exp(self.levels(0.5 * torch.log(power + 1e-6)))
        n = x.shape[-1]
        return gains[:, :1] * self.bright[..., :n] + gains[:, 1:] * self.dark[..., :n]


def noise(seed: int) -> torch.Tensor:
    return torch.randn(1, 1, LENGTH, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def planted() -> tb.BendedModule:
    bended = tb.BendedModule(Planted())
    bended.trace(x=noise(1))
    return bended


def test_steering_from_dark_to_bright_raises_the_centroid_with_strength(planted):
    dark, bright, heard = lowpass(noise(2)), noise(3) - lowpass(noise(3)), lowpass(noise(4))
    vector, rms = steering_vector(planted, "levels$", dark, bright)
    assert vector.shape == (2,) and vector[0] > 0 > vector[1]  # brighter, less dark
    strength = tb.BendingParameter("strength", 0.0)
    planted.bend(tb.Steer(vector, strength=strength, rms=rms), "levels$")
    centroids = []
    with torch.inference_mode():
        for s in STRENGTHS:
            planted.update("strength", s, ramp=False)
            out = planted(heard)
            if s == 0.0:
                assert torch.equal(out, planted.module(heard))  # bit for bit: the identity
            centroids.append(spectral_centroid(out, RATE))
    planted.reset()
    assert all(b > a for a, b in itertools.pairwise(centroids)), centroids
    assert centroids[-1] > 1.5 * centroids[0], centroids


def test_the_vector_is_the_difference_of_channel_means_and_the_rms_of_both(planted):
    a, b = noise(5), 2.0 * noise(6)[..., :4096]  # lengths may differ
    vector, rms = steering_vector(planted, "levels$", a, b)
    with torch.inference_mode():
        values = [planted.get_activations("levels$", bended=False, x=s)["levels"] for s in (a, b)]
    expected = values[1].double().mean((0, 2)) - values[0].double().mean((0, 2))
    torch.testing.assert_close(vector, expected.float())
    both = torch.cat([values[0].flatten(), values[1].flatten()])
    assert rms == pytest.approx(float(both.double().pow(2).mean().sqrt()), rel=1e-9)
    steer = steer_between(planted, "levels$", a[0, 0], b[0, 0], strength=0.5)  # [time] sounds
    assert torch.equal(steer.vector, vector) and steer.rms == rms and steer.strength == 0.5


def test_a_channel_and_frequency_node_keeps_its_frequencies():
    bended = tb.BendedModule(nn.Sequential(nn.Conv2d(1, 3, 1)))
    bended.trace(input=torch.zeros(1, 1, 5, 8))
    low, high = torch.zeros(1, 1, 5, 8), torch.arange(5.0)[:, None].expand(1, 1, 5, 8)
    vector, _ = steering_vector(bended, "_0$", low, high, dim=1)
    weight = bended.module[0].weight[:, 0, 0, 0].detach()
    torch.testing.assert_close(vector, weight[:, None] * torch.arange(5.0))


def test_bad_nodes_and_sounds_are_clear_errors(planted):
    with pytest.raises(SelectionError, match="matched no weight or activation"):
        steering_vector(planted, "no_such_node$", noise(1), noise(2))
    with pytest.raises(BendingError, match="matches 2 tensor activations"):
        steering_vector(planted, "levels$|bands$", noise(1), noise(2))
    with pytest.raises(BendingError, match=r"shape \[1, 2, 8192\], which has no channel axis"):
        steering_vector(planted, "levels$", noise(1), noise(2), dim=0)
    with pytest.raises(BendingError, match="sound b is empty"):
        steering_vector(planted, "levels$", noise(1), torch.zeros(0))
    flat = tb.BendedModule(nn.Sequential(nn.Flatten(0)))
    flat.trace(input=torch.zeros(1, 1, 8))
    with pytest.raises(
        BendingError, match=r"activation '_0' has shape \[8\], which has no channel"
    ):
        steering_vector(flat, "_0$", torch.zeros(8), torch.ones(8))
    with pytest.raises(BendingError, match="vector is zero everywhere"):
        steer_between(planted, "levels$", noise(1), noise(1))


# -- tiny_ddsp: streamed, and exported to nn~ -----------------------------------------------------


@pytest.fixture(scope="module")
def ddsp() -> tuple[tb.BendedModule, torch.Tensor]:
    """tiny_ddsp streaming, steered at decoder_1 from a low sine towards noise (a control
    named strength), and a second of sound to render."""
    model = tb.models.load("tiny_ddsp").set_streaming(True)
    rate = model.sample_rate
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 2048))
    a = sine(110.0, 0.2, rate)[: 34 * 256]
    b = 0.3 * torch.randn(34 * 256, generator=torch.Generator().manual_seed(0))
    strength = tb.BendingParameter("strength", 0.0, range=(-2.0, 2.0))
    bended.bend(steer_between(bended, "decoder_1$", a, b, strength=strength), "decoder_1$")
    x = sine(220.0, 0.5, rate)[None, None, : 10 * 2048]
    return bended, x


def test_sounds_too_short_for_the_model_are_clear_errors(ddsp):
    bended, _ = ddsp
    with pytest.raises(BendingError, match=r"refused sound a of shape \[1, 1, 100\]; is it too"):
        steering_vector(bended, "decoder_1$", torch.zeros(100), torch.zeros(2048))


def test_a_steered_tiny_ddsp_streams_as_one_offline_pass(ddsp):
    bended, x = ddsp
    bended.update("strength", 0.75, ramp=False)
    with torch.inference_mode():
        reset_cache(bended.module)
        offline = bended(x)[0]
        reset_cache(bended.module)
        streamed = tb.audio.Stream(bended, block_size=2048).process(x[0])
        bended.update("strength", 0.0, ramp=False)
        reset_cache(bended.module)
        unbent = bended(x)[0]
        reset_cache(bended.module)
        plain = bended.module(x)[0]
    torch.testing.assert_close(streamed, offline, rtol=1e-5, atol=1e-6)
    assert torch.equal(unbent, plain)
    assert (offline - unbent).abs().max() > 1e-3  # it steers


def test_a_steered_tiny_ddsp_exports_to_nntilde_with_a_strength_attribute(ddsp, tmp_path):
    bended, x = ddsp
    bended.update("strength", 0.0, ramp=False)
    reset_cache(bended.module)
    tb.export.nntilde(bended, tmp_path / "steered.ts")
    exported = torch.jit.load(str(tmp_path / "steered.ts"))
    assert exported.get_attributes() == ["strength"]
    assert exported.set_strength(-0.5) == 0
    bended.update("strength", -0.5, ramp=False)
    with torch.inference_mode():
        reset_cache(bended.module)
        expected = bended(x)
        got = exported(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
