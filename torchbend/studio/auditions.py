"""The studio's auditions: the current sound rendered with a channel of a node soloed or
bypassed, and a node's activation played as a sound (:mod:`torchbend.discover.audition`)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

import torch

from ..audio.safety_stats import SafetyStats
from ..bended import BendedModule
from ..discover.audition import MODES, as_audio, auditioning, check_channels, check_time
from ..errors import DiscoveryError, StudioError, TorchbendError, did_you_mean
from ..sweep.jobs import encode
from .replies import seconds_value
from .sounds import SoundLibrary

__all__ = ["Auditioned", "Auditions"]


class Auditioned(Protocol):
    """What auditions read of the studio (:class:`~torchbend.studio.session.Studio`)."""

    bended: BendedModule
    lock: threading.RLock
    library: SoundLibrary
    current: str
    fn: str
    sample_rate: int
    ratio: int
    block_size: int | None
    stats_seconds: float

    def method(self, fn: str | None) -> str: ...

    def render_with(
        self, model: BendedModule, audio: torch.Tensor, what: str
    ) -> tuple[torch.Tensor, SafetyStats | None]: ...

    def activation_on(
        self, name: str, fn: str, audio: torch.Tensor
    ) -> tuple[torch.Tensor, int]: ...


class Auditions:
    """What the page plays of one channel of a node: WAV files, made on request.

    Args:
        studio: the studio whose model, current sound, lock and renders they use.
    """

    def __init__(self, studio: Auditioned) -> None:
        self.studio = studio

    def render(
        self, name: str, channel: Any = None, mode: str = "solo", seconds: Any = None
    ) -> bytes:
        """The current sound (its first ``seconds``; all of it by default) through the bent
        model with ``channel`` of activation ``name`` of the studio's method soloed or
        bypassed (``mode``; every channel with ``None``), rendered as the studio renders
        (block by block for a model that streams, through the safety stage), as WAV bytes.
        The bendings are as they were after."""
        studio = self.studio
        if mode not in MODES:
            raise StudioError(f"'mode' is one of {', '.join(MODES)}, got {mode!r}")
        channels = _channel(channel)
        with studio.lock:
            fn = studio.fn
            self._check_node(name, fn)
            audio = self._sound(seconds)
            try:
                with auditioning(studio.bended, name, channels, mode, fn):
                    what = f"the bent model with {name} {mode}"
                    out, _ = studio.render_with(studio.bended, audio, what)
            except DiscoveryError as e:
                raise StudioError(str(e), 422) from None
        return encode(out, studio.sample_rate, "wav")

    def activation(self, name: str, fn: str | None = None, channel: Any = None) -> bytes:
        """Activation ``name`` of ``fn``, bent as set, on the first seconds of the current
        sound (as its statistics are taken), heard as a sound at the studio's rate
        (:func:`~torchbend.discover.audition.as_audio`: one channel, or the mean of every
        channel with ``None``), as WAV bytes."""
        studio = self.studio
        channels = _channel(channel)
        with studio.lock:
            fn = studio.method(fn)
            self._check_node(name, fn)
            sound = studio.library.get(studio.current).audio
            audio = sound[:, : int(studio.stats_seconds * studio.sample_rate)]
            try:
                value, length = studio.activation_on(name, fn, audio)
                shape = list(value.shape)
                check_time(shape, name, 1)
                check_channels(shape, name, None if channels is None else [channels], 1)
                sound_out = as_audio(value, length, studio.sample_rate, channels)
            except TorchbendError as e:
                raise StudioError(str(e), 422) from None
        return encode(sound_out[..., : audio.shape[-1]], studio.sample_rate, "wav")

    def _check_node(self, name: str, fn: str) -> None:
        names = self.studio.bended.activation_names(fn)
        if name not in names:
            raise StudioError(f"no activation {name!r} in {fn}{did_you_mean(name, names)}", 404)

    def _sound(self, seconds: Any) -> torch.Tensor:
        studio = self.studio
        audio = studio.library.get(studio.current).audio
        given = seconds_value(seconds)
        if given is None:
            return audio
        return audio[:, : max(1, int(given * studio.sample_rate))]


def _channel(channel: Any) -> int | None:
    if channel is None or (isinstance(channel, int) and not isinstance(channel, bool)):
        return channel
    raise StudioError(f"'channel' is a whole number (or none, for every channel), got {channel!r}")
