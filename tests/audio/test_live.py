"""Tests for torchbend.audio.live: OSC control on loopback, and live play on a real PortAudio
stream (ALSA's null device) where one can be opened."""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.audio.live import import_sounddevice, live, write
from torchbend.audio.osc import OSCControl
from torchbend.audio.safety import Safety
from torchbend.audio.stream import Stream, StreamStats
from torchbend.errors import AudioError

pytest.importorskip("pythonosc", reason="OSC tests need python-osc: pip install 'torchbend[live]'")
from pythonosc.udp_client import SimpleUDPClient

pytestmark = pytest.mark.audio


BLOCK = 128
WAIT = 5.0  # seconds; a bound on loopback delivery, normally reached in microseconds


def make_bended() -> tb.BendedModule:
    bended = tb.BendedModule(nn.Sequential(nn.Identity()))
    bended.trace(input=torch.zeros(1, 1, BLOCK))
    bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))), "_0$")
    return bended


@pytest.fixture
def osc() -> Iterator[OSCControl]:
    control = OSCControl(make_bended(), port=0).start()
    try:
        yield control
    finally:
        control.stop()


def send(osc: OSCControl, *messages: tuple[str, Any]) -> None:
    client = SimpleUDPClient("127.0.0.1", osc.port)
    before = osc.received
    for address, value in messages:
        client.send_message(address, value)
    assert osc.wait(before + len(messages), timeout=WAIT), "OSC messages never arrived"


def test_osc_update_changes_next_block(osc: OSCControl) -> None:
    stream = Stream(osc.bended, block_size=BLOCK)
    x = torch.ones(1, BLOCK)
    assert torch.equal(stream.process_block(x), x)
    send(osc, ("/torchbend/gain", 0.5))
    assert torch.equal(stream.process_block(x), x)  # not applied yet: no torn block
    assert osc.apply() == 1
    assert torch.equal(stream.process_block(x), 0.5 * x)


def test_osc_keeps_last_update_per_control(osc: OSCControl) -> None:
    send(osc, ("/torchbend/gain", 0.1), ("/torchbend/gain", 0.2), ("/torchbend/gain", 0.3))
    assert osc.apply() == 1
    assert osc.bended.controllables["gain"].get() == pytest.approx(0.3)
    assert osc.apply() == 0


def test_osc_bend_and_reset(osc: OSCControl) -> None:
    x = torch.ones(1, 1, BLOCK)
    send(osc, ("/torchbend/bend", ["Bias", "_0$", "bias=0.25"]))
    assert osc.apply() == 1
    assert torch.allclose(osc.bended(x), x + 0.25)
    send(osc, ("/torchbend/bend", ["Scale", "_0$", 2.0]))
    osc.apply()
    assert torch.allclose(osc.bended(x), 2 * (x + 0.25))
    send(osc, ("/torchbend/reset", []))
    assert osc.apply() == 1
    assert torch.equal(osc.bended(x), x)


def test_osc_bend_takes_aliases(osc: OSCControl) -> None:
    x = torch.ones(1, 1, BLOCK)
    osc.bended.mark("first", "_0")
    send(osc, ("/torchbend/bend", ["Bias", "#first", "bias=0.25"]))
    assert osc.apply() == 1
    assert torch.allclose(osc.bended(x), x + 0.25)


def test_osc_bad_messages_are_logged_and_ignored(
    osc: OSCControl, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="torchbend.audio.live")
    send(
        osc,
        ("/elsewhere/gain", 1.0),
        ("/torchbend/gain", "loud"),
        ("/torchbend/gain", 5.0),  # out of range
        ("/torchbend/nope", 1.0),
        ("/torchbend/bend", ["NoSuchCallback", "_0$"]),
        ("/torchbend/bend", ["Scale", "no_such_node$", 2.0]),
        ("/torchbend/bend", ["not_imported_module:Gain", "_0$"]),
        ("/torchbend/bend", "Scale"),
    )
    assert osc.apply() == 0
    x = torch.ones(1, 1, BLOCK)
    assert torch.equal(osc.bended(x), x)
    text = caplog.text
    for needle in [
        "unknown address",
        "takes one number",
        "out of its range",
        "'nope'",
        "NoSuchCallback",
        "no_such_node",
        "never imports",
        "a callback name",
    ]:
        assert needle in text
    send(osc, ("/torchbend/gain", 0.5))
    assert osc.apply() == 1


def test_osc_start_stop() -> None:
    control = OSCControl(make_bended(), port=0)
    assert not control.running and "stopped" in repr(control)
    with control:
        assert control.running and control.port > 0
        taken = control.port
        with pytest.raises(AudioError, match="cannot listen"):
            OSCControl(control.bended, port=taken).start()
    assert not control.running
    with pytest.raises(AudioError, match="drives a BendedModule"):
        OSCControl(nn.Identity(), port=0)  # type: ignore[arg-type]


def test_missing_sounddevice_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    with pytest.raises(ImportError, match=r"torchbend\[live\]"):
        import_sounddevice()
    with pytest.raises(ImportError, match=r"torchbend\[live\]"):
        live(make_bended(), duration=0.0)


def test_write_maps_channels() -> None:
    import numpy as np

    out = np.zeros((4, 2), dtype=np.float32)
    write(out, torch.ones(1, 4))
    assert (out == 1).all()
    write(out, torch.arange(12.0).reshape(3, 4) / 16)
    assert (out[:, 1] == np.array([4, 5, 6, 7], dtype=np.float32) / 16).all()
    out = np.ones((4, 3), dtype=np.float32)
    write(out, torch.ones(2, 4) * 0.5)
    assert (out[:, :2] == 0.5).all() and (out[:, 2] == 0).all()


class FakeCard:
    """sounddevice, as far as live uses it: a stream that runs its callback ``blocks`` times
    when it starts, keeping what the callback wrote."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.written: list[Any] = []

    def query_devices(self, *args: Any, **kwargs: Any) -> str:
        return "fake card"

    def Stream(self, **settings: Any) -> Any:  # sounddevice's name
        import contextlib

        import numpy as np

        card = self

        @contextlib.contextmanager
        def stream() -> Iterator[None]:
            frames, channels = settings["blocksize"], settings["channels"]
            for _ in range(card.blocks):
                outdata = np.full((frames, channels), 7.0, dtype=np.float32)
                indata = np.zeros((frames, channels), dtype=np.float32)
                settings["callback"](indata, outdata, frames, None, None)
                card.written.append(outdata)
            yield

        return stream()


class Loud(nn.Module):
    """Writes NaN, an infinity and a blow-up into its output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[..., 0] = float("nan")
        y[..., 1] = float("inf")
        y[..., 64] = 1e6
        return y


def test_live_never_sends_nan_or_overs_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np

    card = FakeCard(blocks=3)
    monkeypatch.setitem(sys.modules, "sounddevice", card)
    caplog.set_level(logging.WARNING, logger="torchbend.audio.live")
    stats = live(tb.BendedModule(Loud()), block_size=BLOCK, channels=2, duration=0.0)
    assert len(card.written) == 3
    for block in card.written:
        assert np.isfinite(block).all() and np.abs(block).max() <= 1.0
        assert np.abs(block[0]).max() < 0.01 and np.abs(block[64]).min() > 0.5  # silence, DC
    safety = stats.safety
    assert safety is not None and stats.blocks == safety.blocks == 3
    assert (safety.guarded_blocks, safety.nonfinite, safety.limited_blocks) == (3, 12, 3)
    assert "; safety: guarded 3 blocks (12 NaN or infinite samples silenced), limited 3" in str(
        stats
    )
    assert "the output was made safe: safety: guarded 3 blocks" in caplog.text


def test_live_without_safety_sends_the_output_as_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np

    card = FakeCard(blocks=2)
    monkeypatch.setitem(sys.modules, "sounddevice", card)
    caplog.set_level(logging.WARNING, logger="torchbend.audio.live")
    stats = live(tb.BendedModule(Loud()), block_size=BLOCK, duration=0.0, safety=False)
    for block in card.written:
        assert np.isnan(block[0, 0]) and block[1, 0] == np.inf and block[64, 0] == 1e6
    assert stats.safety is None and "safety" not in str(stats)
    assert "made safe" not in caplog.text


def test_live_takes_a_safety_stage_of_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    card = FakeCard(blocks=2)
    monkeypatch.setitem(sys.modules, "sounddevice", card)
    stage = Safety(48000, threshold=0.5)
    stats = live(make_bended(), block_size=BLOCK, sample_rate=48000, safety=stage, duration=0.0)
    assert stats.safety == stage.stats and stage.stats.blocks == 2
    with pytest.raises(AudioError, match="works at 48000 Hz and the stream at 44100 Hz"):
        live(make_bended(), block_size=BLOCK, safety=stage, duration=0.0)


def test_stats_of_a_stream_without_safety_do_not_mention_it() -> None:
    stream = Stream(nn.Identity(), block_size=BLOCK)
    stream.process_block(torch.zeros(1, BLOCK))
    assert stream.stats.safety is None and "safety" not in str(stream.stats)


NULL_DEVICE_HELP = (
    "no PortAudio device can be opened here: apt-get install -y libportaudio2 (the tests "
    "play to ALSA's null device, tests/alsa_null.conf)"
)


def open_default_device() -> None:
    try:
        sd = import_sounddevice()
    except ImportError as e:
        pytest.skip(f"{e}; {NULL_DEVICE_HELP}")
    try:
        sd.check_input_settings(samplerate=44100, channels=1, dtype="float32")
        sd.check_output_settings(samplerate=44100, channels=1, dtype="float32")
    except Exception as e:
        pytest.skip(f"{type(e).__name__}: {e}; {NULL_DEVICE_HELP}")


def test_live_on_a_real_stream() -> None:
    open_default_device()
    bended = make_bended()
    stats = live(bended, block_size=BLOCK, channels=2, model_channels=1, duration=0.05)
    assert stats.blocks > 0
    assert stats.latency == BLOCK


def test_live_with_osc_on_a_real_stream() -> None:
    open_default_device()
    bended = make_bended()
    stats = live(bended, block_size=BLOCK, osc_port=0, duration=0.05)
    assert stats.blocks > 0


def test_osc_changes_controls_while_live_plays() -> None:
    open_default_device()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bended = make_bended()
    result: list[StreamStats] = []
    player = threading.Thread(
        target=lambda: result.append(live(bended, block_size=BLOCK, osc_port=port, duration=0.5))
    )
    player.start()
    try:
        client = SimpleUDPClient("127.0.0.1", port)
        deadline = time.monotonic() + WAIT
        while bended.controllables["gain"].get() != 0.5 and time.monotonic() < deadline:
            client.send_message("/torchbend/gain", 0.5)  # resent: the server may not be up yet
            time.sleep(0.005)
    finally:
        player.join()
    assert bended.controllables["gain"].get() == 0.5
    assert result and result[0].blocks > 0


def test_live_bad_device_is_a_clear_error() -> None:
    open_default_device()
    with pytest.raises(AudioError, match="cannot open the sound card"):
        live(make_bended(), output_device=999, block_size=BLOCK, duration=0.01)


def test_live_model_error_is_raised_before_playing() -> None:
    open_default_device()
    with pytest.raises(ValueError, match="mono"):
        live(tb.BendedModule(MonoOnly()), channels=2, block_size=BLOCK, duration=0.01)


class MonoOnly(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != 1:
            raise ValueError(f"MonoOnly takes mono audio, got {x.shape[1]} channels")
        return x


def test_live_warns_when_the_model_clicks_at_block_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.audio.stateless import Centred, built
    from torchbend.audio.stream_check import StreamWarning

    monkeypatch.setitem(sys.modules, "sounddevice", FakeCard(blocks=1))
    with pytest.warns(StreamWarning, match=f"does not stream: block by block at {BLOCK}"):
        live(built(Centred), block_size=BLOCK, channels=1, duration=0.0)
