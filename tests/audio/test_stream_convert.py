"""make_streaming: models without state converted to stream, block by block equal to one pass."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.audio.stateless import (
    Centred,
    Recurrent,
    Remembering,
    Upsampler,
    WaveNet,
    built,
    converted_error,
)
from torchbend.audio.stream import Stream
from torchbend.audio.stream_check import StreamWarning
from torchbend.audio.stream_convert import make_streaming
from torchbend.errors import AudioError, ExportError
from torchbend.export.contract import check_nntilde
from torchbend.export.nntilde import nntilde

LATENCY = {WaveNet: 0, Centred: 5, Recurrent: 0}
"""Each model's latency once converted: causal convolutions add none; centred padding adds
its right padding (2 + 2 + 1 frames on the longest branch)."""


@pytest.mark.parametrize("kind", [WaveNet, Centred, Recurrent])
@pytest.mark.parametrize("block", [64, 1024])
def test_block_by_block_equals_one_pass_delayed_by_the_latency(
    kind: type[nn.Module], block: int
) -> None:
    model = built(kind)
    streaming = make_streaming(model)
    assert streaming.latency == LATENCY[kind]
    assert converted_error(model, streaming, block, 3) < 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamWarning)
        assert Stream(streaming, block_size=block).check_streaming().verdict == "exact"


def test_an_lstm_after_a_delaying_convolution_starts_with_the_signal() -> None:
    model = built(Remembering)
    streaming = make_streaming(model)
    assert streaming.latency == 1
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(x)
        blocks = torch.cat([streaming(b) for b in x.split(64, -1)], -1)
    assert (blocks[..., 1:] - whole[..., :-1]).abs().max() < 1e-5


def test_a_transposed_convolution_keeps_its_overlap_and_upsamples_the_delay() -> None:
    model = built(Upsampler)
    streaming = make_streaming(model)
    assert streaming.latency == 4  # output samples: a's 1 frame upsampled by 2, up's 1, last's 1
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(x)
        blocks = torch.cat([streaming(b) for b in x.split(64, -1)], -1)
    assert blocks.shape == whole.shape == (1, 1, 512)
    assert (blocks[..., 4:] - whole[..., :-4]).abs().max() < 1e-5


def test_a_bended_converted_model_streams_after_its_check() -> None:
    model = built(Centred)
    bended = tb.BendedModule(make_streaming(model))
    bended.trace(x=torch.randn(1, 1, 256))
    stream = Stream(bended, block_size=256)
    stream.reset()  # the state tracing left
    x = torch.randn(1, 1024, generator=torch.Generator().manual_seed(2))
    y = stream.process(x)  # the check runs first, and leaves the state as it found it
    with torch.no_grad():
        whole = model(x[None])[0]
    assert stream.streaming_check is not None and stream.streaming_check.verdict == "exact"
    assert (y[..., 5:] - whole[..., :-5]).abs().max() < 1e-5


def test_the_pass_reports_what_it_did_and_shares_the_weights() -> None:
    model = built(Centred)
    streaming = make_streaming(model)
    assert streaming.converted == [
        "a: Conv1d keeps 4 frames, delay 2",
        "b: Conv1d keeps 4 frames, delay 2",
        "tb_delay_0: delays relu by 2 before add",
        "c: Conv1d keeps 2 frames, delay 1",
        "tb_delay_1: delays x by 5 before add_1",
    ]
    assert streaming.graph.get_submodule("a.conv").weight is model.a.weight
    assert isinstance(model.a, nn.Conv1d)  # the model itself is left as it was


class Strided(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv1d(1, 2, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(x)


class Upsampling(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(1, 1, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(x)


class Both(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(1, 2, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x.permute(2, 0, 1))[0].permute(1, 2, 0)


class Reversed(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flip(-1)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (Strided(), "layer 'down': stride 2: the pass converts stride 1 only"),
        (Upsampling(), "layer 'up': gives 1 frames more than time \\* stride \\(2\\)"),
        (Reversed(), "flip .*works along the time axis"),
        (Both(), "layer 'gru': a bidirectional recurrent layer reads the future"),
    ],
)
def test_a_layer_that_cannot_stream_is_refused_by_name(model: nn.Module, message: str) -> None:
    with pytest.raises(AudioError, match=message):
        make_streaming(model)


def test_the_nntilde_export_warns_or_refuses_a_model_that_clicks_and_takes_it_converted(
    tmp_path: Path,
) -> None:
    params = {"forward": [1, 1, 1, 1]}
    model = built(Centred)
    with pytest.raises(ExportError, match=r"does not stream.*tb\.audio\.make_streaming"):
        nntilde(model, tmp_path / "plain.ts", params=params)  # clicks="refuse"
    assert not (tmp_path / "plain.ts").exists()
    report = nntilde(
        make_streaming(model), tmp_path / "streaming.ts", params=params, clicks="refuse"
    )
    assert [check.verdict for check in report.streaming] == ["exact"]
    with pytest.warns(StreamWarning, match="does not stream"):
        nntilde(model, tmp_path / "plain.ts", params=params, clicks="warn")
    with pytest.warns(StreamWarning, match="does not stream.*nn~ calls it buffer by buffer"):
        report = check_nntilde(tmp_path / "plain.ts")
    assert [check.verdict for check in report.streaming] == ["differs"]
