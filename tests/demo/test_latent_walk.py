"""OnChannel, the demo's channel-selective bending, and the walk over tiny_ddsp's named
latent channels."""

from __future__ import annotations

import pytest
import torch

import torchbend as tb
from torchbend.audio.quality import sine
from torchbend.demo import WALKS, OnChannel
from torchbend.demo.latent_walk import walk_control
from torchbend.demo.listening import changes, hear
from torchbend.errors import BendingError


def test_on_channel_is_the_identity_at_its_neutral_setting_bit_for_bit():
    x = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(0))
    assert torch.equal(OnChannel(3)(x, "z"), x)


def test_on_channel_bends_its_channel_only():
    x = torch.randn(1, 4, 6, generator=torch.Generator().manual_seed(1))
    y = OnChannel(2, scale=-2.0, bias=0.5)(x, "z")
    torch.testing.assert_close(y[:, 2], x[:, 2] * -2.0 + 0.5)
    assert torch.equal(y[:, [0, 1, 3]], x[:, [0, 1, 3]])
    assert repr(OnChannel(2, scale=-2.0, bias=0.5)) == "OnChannel(channel=2, scale=-2.0, bias=0.5)"


def test_on_channel_refuses_a_channel_the_target_does_not_have():
    with pytest.raises(BendingError, match="no channel 4 along axis 1; give a channel below 4"):
        OnChannel(4, bias=1.0)(torch.zeros(1, 4, 2), "forward:cat")
    with pytest.raises(BendingError, match="channel must be an index >= 0, got -1"):
        OnChannel(-1)


def test_a_controlled_on_channel_follows_its_control_in_a_bended_model():
    model = torch.nn.Sequential(torch.nn.Conv1d(1, 3, 1), torch.nn.Identity())
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 8)
    bended.trace(input=x)
    position = walk_control()
    bended.bend(OnChannel(1, bias=2.0 * position), "_1$")
    with torch.no_grad():
        plain = model(x)
        bended.update("walk", 0.5, ramp=False)
        y = bended(x)
    torch.testing.assert_close(y[:, 1], plain[:, 1] + 1.0)
    assert torch.equal(y[:, [0, 2]], plain[:, [0, 2]])


@pytest.fixture(scope="module")
def walked():
    """A 220 Hz tone through tiny_ddsp, unbent and with the pitch walk, streamed as the demo
    streams it (1.5 s): an octave either way stays within what the pitch measure reads."""
    model = tb.models.load("tiny_ddsp").set_streaming(True)
    rate, names = model.sample_rate, model.latent_names
    audio = sine(220.0, 1.5, rate)[None, : int(1.5 * rate) // 2048 * 2048]
    bended = tb.BendedModule(model)
    bended.trace(x=audio[None, :, :2048])
    position = walk_control()
    (pitch,) = [w for w in WALKS if w.channel == "pitch"]

    def move(i: int, count: int) -> None:
        bended.update("walk", -1.0 + 2.0 * i / (count - 1))

    out = {}
    with torch.inference_mode():
        stream = tb.audio.Stream(bended, block_size=2048, sample_rate=rate)
        stream.reset()
        out["unbent"] = hear(stream.process(audio), rate)
        bended.bend(pitch.callback(names.index("pitch"), position), "cat$")
        bended.update("walk", -1.0, ramp=False)
        stream.reset()
        out["walk"] = hear(stream.process(audio, before_block=move), rate)
    return out


def test_the_pitch_walk_raises_the_pitch_by_about_its_reach_across_the_file(walked):
    frames = walked["walk"].frames.shape[-1]
    early = torch.arange(frames) < frames // 5
    late = torch.arange(frames) >= frames - frames // 5
    start = changes(walked["walk"], walked["unbent"], early)[0]
    end = changes(walked["walk"], walked["unbent"], late)[0]
    assert start is not None and end is not None
    assert start < -6 and end > 6  # from about an octave down to about an octave up
