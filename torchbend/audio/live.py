"""Live play: a bended model on the sound card, with its controls driven over OSC."""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch
from torch import nn

from ..bended import BendedModule
from ..errors import AudioError
from .osc import OSCControl
from .safety import Safety
from .stream import Stream, StreamStats

__all__ = ["import_sounddevice", "live", "write"]

logger = logging.getLogger(__name__)


def import_sounddevice() -> Any:
    """Import sounddevice, or raise an ImportError saying what to install."""
    try:
        import sounddevice
    except ImportError as e:
        raise ImportError("live audio needs sounddevice: pip install 'torchbend[live]'") from e
    except OSError as e:  # sounddevice is there, the PortAudio library is not
        raise ImportError(
            f"sounddevice could not load PortAudio ({e}); install the system package "
            "libportaudio2 (Debian/Ubuntu: apt-get install libportaudio2; macOS: brew install "
            "portaudio)"
        ) from e
    return sounddevice


def live(
    bended: nn.Module,
    method: str = "forward",
    input_device: int | str | None = None,
    output_device: int | str | None = None,
    block_size: int = 2048,
    sample_rate: int = 44100,
    channels: int = 1,
    osc_port: int | None = None,
    duration: float | None = None,
    *,
    model_channels: int | None = None,
    safety: bool | Safety = True,
) -> StreamStats:
    """Play a bended model live: sound card input, through ``method``, to the output.

    Blocks until ``duration`` seconds have passed, or until Ctrl-C when ``duration`` is
    ``None``. With ``osc_port``, an :class:`OSCControl` on ``127.0.0.1:osc_port`` changes
    controls and bendings, applied between blocks in the audio callback. An error in the
    model or a control is logged and gives a block of silence; it never stops the stream.

    The output goes through a safety stage (:class:`~torchbend.audio.Safety`) on its way to
    the sound card, so that a bending that blows the model up does not reach the speakers at
    full scale: NaN and infinite samples are silenced, DC is removed, and a soft limiter keeps
    the output within ``[-1, 1]`` while leaving sound below its threshold untouched. The stats
    say what it did, and a warning is logged at the end if it silenced or limited anything.
    ``safety=False`` sends the model's output as it is (to a virtual device feeding other
    software, say): NaN included, and samples beyond ``[-1, 1]``, which a sound card clips.

    Args:
        bended: a :class:`~torchbend.BendedModule` (or a plain module, without OSC).
        method: the method to run on audio ``[batch, channels, time]``.
        input_device: sounddevice input device (index or name); ``None``: the default.
        output_device: sounddevice output device; ``None``: the default.
        block_size: samples per block (64 to 8192, a multiple of the model's ratio); the
            latency is one block plus what the model declares.
        sample_rate: sample rate, in Hz.
        channels: channels of the sound card's input and output.
        osc_port: UDP port of the OSC server (``0``: any free port); ``None``: no OSC.
        duration: seconds to play; ``None``: until interrupted.
        model_channels: channels the model takes (``1`` runs each card channel through a
            mono model); ``None``: as :class:`Stream` finds them.
        safety: ``True``: the safety stage with its default settings; a
            :class:`~torchbend.audio.Safety` (at ``sample_rate``) for other settings;
            ``False``: none.

    Returns:
        The stream's :class:`StreamStats` (realtime factor, overruns, latency, and in
        ``safety`` what the safety stage did).

    Raises:
        ImportError: sounddevice or python-osc is missing (``pip install 'torchbend[live]'``),
            or the PortAudio library is (system package ``libportaudio2``).
        AudioError: the sound card stream cannot be opened with these settings, or the
            safety stage given works at another sample rate.
        Exception: whatever the model raises on a first block of silence, run before the
            sound card starts.
    """
    sd = import_sounddevice()
    stream = Stream(
        bended,
        method,
        block_size=block_size,
        channels=model_channels,
        sample_rate=sample_rate,
        safety=safety,
    )
    # One block of silence before the card starts: a model that cannot take these blocks fails
    # here with its own error instead of playing silence, and the first real block does not
    # pay for a trace or for allocations.
    with torch.no_grad():
        stream.process_block(torch.zeros(channels, block_size))
    stream.reset(cache=False)
    osc = None
    if osc_port is not None:
        if not isinstance(bended, BendedModule):
            raise AudioError("OSC control needs a BendedModule: wrap the model in tb.BendedModule")
        osc = OSCControl(bended, osc_port).start()
    failures = [0]
    xruns = [0]

    def callback(indata: Any, outdata: Any, frames: int, _time: Any, status: Any) -> None:
        if status:
            xruns[0] += 1
        try:
            if osc is not None:
                osc.apply()
            if frames != block_size:
                raise AudioError(f"the sound card gave {frames} frames, not {block_size}")
            write(outdata, stream.process_block(torch.from_numpy(indata.T.copy())))
        except Exception:
            outdata.fill(0)
            failures[0] += 1
            if failures[0] == 1:
                logger.exception("live: a block failed; playing silence instead")

    try:
        audio = sd.Stream(
            device=(input_device, output_device),
            samplerate=sample_rate,
            blocksize=block_size,
            channels=channels,
            dtype="float32",
            callback=callback,
        )
    except Exception as e:
        if osc is not None:
            osc.stop()
        raise AudioError(
            f"cannot open the sound card (input {input_device!r}, output {output_device!r}, "
            f"{channels} channels at {sample_rate} Hz): {e}. Devices:\n{sd.query_devices()}"
        ) from e
    try:
        with audio:
            logger.info("live: playing %s (latency %d samples)", stream, stream.latency)
            try:
                threading.Event().wait(duration)
            except KeyboardInterrupt:
                pass
    finally:
        if osc is not None:
            osc.stop()
    if failures[0]:
        logger.warning("live: %d blocks failed and played silence", failures[0])
    if xruns[0]:
        logger.warning("live: the sound card reported %d under/overflows", xruns[0])
    stats = stream.stats
    if stats.safety is not None and stats.safety.acted:
        logger.warning("live: the output was made safe: %s", stats.safety)
    return stats


def write(outdata: Any, y: torch.Tensor) -> None:
    """Write model output ``[out_channels, frames]`` to a card buffer ``[frames, channels]``:
    a mono output goes to every channel, extra output channels are dropped, missing ones
    are silent."""
    channels = outdata.shape[1]
    out = y.detach().to("cpu", torch.float32).numpy()
    if out.shape[0] == 1:
        outdata[:] = out[0][:, None]
    elif out.shape[0] >= channels:
        outdata[:] = out[:channels].T
    else:
        outdata.fill(0)
        outdata[:, : out.shape[0]] = out.T
