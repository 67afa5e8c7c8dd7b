"""The sample rate and the ratio a model declares: its attributes, or nn~'s contract in a
TorchScript file (RAVE v2's ``sr`` and ``<method>_params``, RAVE v1's ``sampling_rate``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.models.rave_style import RATIO, SAMPLE_RATE, write_rave_style
from torchbend.audio.stream import Stream
from torchbend.models.rates import model_ratio, model_sample_rate


@pytest.fixture(scope="module")
def rave_file(tmp_path_factory: pytest.TempPathFactory) -> torch.jit.ScriptModule:
    return torch.jit.load(str(write_rave_style(tmp_path_factory.mktemp("rates") / "rave.ts")))


def test_a_rave_export_declares_its_rate_and_its_latent_ratio(rave_file) -> None:
    assert model_sample_rate(rave_file) == SAMPLE_RATE == rave_file.sr
    assert model_ratio(rave_file) == RATIO == int(rave_file.encode_params[3])
    assert Stream(rave_file, block_size=2 * RATIO).ratio == RATIO
    with pytest.raises(tb.AudioError, match=f"not a multiple of the model's ratio {RATIO}"):
        Stream(rave_file, block_size=RATIO // 2)


class RaveV1(nn.Module):
    """What a RAVE v1 export holds: buffers for the rate and each method's params, no
    ``get_methods``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("sampling_rate", torch.tensor(48000))
        self.register_buffer("encode_params", torch.tensor([1, 1, 16, 2048]))
        self.register_buffer("decode_params", torch.tensor([16, 2048, 1, 1]))
        self.register_buffer("forward_params", torch.tensor([1, 1, 1, 1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_a_rave_v1_file_declares_them_in_buffers() -> None:
    module = torch.jit.script(RaveV1())
    assert model_sample_rate(module) == 48000
    assert model_ratio(module) == 2048


class Declared(nn.Module):
    ratio = 16
    sample_rate = 22050


@pytest.mark.parametrize(
    ("module", "rate", "ratio"),
    [(Declared(), 22050, 16), (nn.Identity(), None, 1), (tb.models.TinyRave(), 44100, 16)],
    ids=["attributes", "none", "tiny_rave"],
)
def test_a_models_own_attributes_come_first(module: nn.Module, rate, ratio) -> None:
    assert model_sample_rate(module) == rate
    assert model_ratio(module) == ratio


def test_a_flag_or_a_vector_is_no_rate() -> None:
    module = nn.Module()
    module.sr = True
    module.register_buffer("sampling_rate", torch.tensor([44100, 48000]))
    assert model_sample_rate(module) is None


def test_the_command_renders_at_the_files_rate(tmp_path: Path) -> None:
    # A RAVE file at 48 kHz: the sound is read at 48 kHz and written at it.
    from torchbend.cli import main

    write_rave_style(tmp_path / "rave48.ts", sample_rate=48000)
    tb.audio.save(tmp_path / "in.wav", 0.1 * torch.randn(1, 4410), 44100)
    args = ["bend", str(tmp_path / "rave48.ts"), str(tmp_path / "in.wav"), str(tmp_path / "o.wav")]
    assert main([*args, "--block-size", "2048", "--quiet"]) == 0
    out, rate = tb.audio.load(tmp_path / "o.wav")
    assert rate == 48000 and out.shape == (1, 4800)
