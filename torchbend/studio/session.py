"""The studio's state: one model, what the page sees of it, its bending (``studio.editor``,
:mod:`torchbend.studio.bending`), the sounds and the renders.

Every request of the server is a call of :class:`Studio`, of its editor or of its auditions
(:mod:`torchbend.studio.auditions`); the server adds only HTTP.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..audio.render import (
    STREAM_BLOCK,
    check_audio,
    padded,
    ratio_of,
    render,
    streams,
    trace_audio,
)
from ..audio.safety import FILE_CEILING, Safety
from ..audio.safety_stats import SafetyStats
from ..audio.stream import reset_cache
from ..bended import BendedModule
from ..discover.health import health
from ..discover.health_stats import HealthRow
from ..engine.tables import latent_names
from ..errors import StudioError, TorchbendError, did_you_mean
from ..sweep.jobs import encode
from ..sweep.measure import measure
from . import describe
from .auditions import Auditions
from .bending import BendingEditor
from .discovery import Discoveries
from .replies import seconds_value
from .sounds import Limits, SoundLibrary, spectrogram, waveform

__all__ = ["RENDERS", "Render", "Studio"]

log = logging.getLogger(__name__)


RENDERS = 16
"""Renders the page can play (older ones stay in the output folder)."""

_KINDS = ("input", "unbent", "bended")


@dataclass
class Render:
    """One render: the three files the page plays, in the output folder."""

    id: str
    files: dict[str, Path]


class Studio:
    """A model opened in the studio.

    Args:
        model: the model (``torchbend.models.reference.load_model`` gives one from a name).
        name: what the page calls it.
        fn: the method rendered: it takes audio ``[batch, channels, time]`` and gives audio
            of the same length.
        sounds: audio files the user chose, besides the shipped sounds.
        output: the folder renders, uploads and saved configurations go to (created).
        block_size: samples per block for a model that streams (default 8192); a model that
            does not stream renders in one pass unless given one.
        limits: what an upload may be.
        sweep: a sweep's folder holding ``atlas.html``, opened in the page.
        stats_seconds: how much of the current sound statistics of activations run on.
    """

    def __init__(
        self,
        model: nn.Module,
        name: str,
        *,
        fn: str = "forward",
        sounds: Sequence[str | Path] = (),
        output: str | Path = "torchbend-studio",
        block_size: int | None = None,
        limits: Limits | None = None,
        sweep: str | Path | None = None,
        stats_seconds: float = 2.0,
        shipped: bool = True,
        safety: bool = True,
    ) -> None:
        from ..demo import SOUNDS

        self.name = name
        self.fn = fn
        self.output = Path(output).resolve()
        self.output.mkdir(parents=True, exist_ok=True)
        self.sweep = _sweep_folder(sweep)
        self.stats_seconds = stats_seconds
        self.safety = safety
        """Renders are files to listen to: each goes through the files' safety stage (a
        limiter within -0.3 dBFS, as ``torchbend bend`` writes), unless this is False."""
        self.lock = threading.RLock()
        """Held by every use of the model: requests run in threads of their own."""
        self.streams = streams(model)
        self.block_size = (
            block_size if block_size is not None else (STREAM_BLOCK if self.streams else None)
        )
        self.ratio = ratio_of(model)
        self.sample_rate = int(getattr(model, "sample_rate", 44100))
        self.bended = BendedModule(model)
        self.plain = BendedModule(model)
        """The same module, never bent: the unbent renders (the module's weights are never
        changed by bending, so both read the same)."""
        self.library = SoundLibrary(self.sample_rate, self.output / "uploads", limits)
        for path in sorted(SOUNDS.glob("*.wav")) if shipped else []:
            self.library.add_file(path, "shipped")
        for given in sounds:
            if not Path(given).is_file():
                raise StudioError(f"no sound file {str(given)!r}")
            self.library.add_file(Path(given), "argument")
        if not self.library.sounds:
            raise StudioError("the studio needs a sound: name an audio file with --sound")
        self.current = next(reversed(self.library.sounds))
        example = (
            torch.zeros(1, 1, self.block_size)
            if self.block_size is not None
            else padded(self.library.get(self.current).audio, self.ratio)
        )
        out = trace_audio(self.bended, fn, example)
        try:  # refused now, not at every render
            check_audio(out, type(model).__name__, fn, example)
        except TorchbendError as e:
            raise StudioError(f"the studio cannot render {name}: {e}") from None
        trace_audio(self.plain, fn, example)
        self.editor = BendingEditor(self.bended, self.lock, self.output / "configs")
        """The bending, as the page edits it."""
        self.auditions = Auditions(self)
        """A channel of a node soloed or bypassed, or an activation, as a sound."""
        self.discoveries = Discoveries(self)
        """Channels ranked by a descriptor of the current sound, and knobs made of them."""
        self.renders: OrderedDict[str, Render] = OrderedDict()
        self.last_render: dict[str, Any] | None = None
        """What :meth:`render` answered last: the page shows it again when it is reloaded."""
        self._unbent: OrderedDict[tuple[str, int], torch.Tensor] = OrderedDict()
        self._count = 0
        self._session = time.strftime("%Y%m%d-%H%M%S")
        """Names this session's renders, so that another session's stay as they are."""

    # -- the model -------------------------------------------------------------------------------

    def model_json(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "class": type(self.bended.module).__name__,
            "fn": self.fn,
            "methods": self.bended.traced_methods,
            "sample_rate": self.sample_rate,
            "block_size": self.block_size,
            "streams": self.streams,
            "ratio": self.ratio,
            "latent_names": latent_names(self.bended.module),
            "sweep": "/sweep/atlas.html" if self.sweep is not None else None,
            "output": str(self.output),
        }

    def method(self, fn: str | None) -> str:
        fn = fn or self.fn
        if fn not in self.bended.traced_methods:
            raise StudioError(
                f"no traced method {fn!r}{did_you_mean(fn, self.bended.traced_methods)}; the "
                f"methods are {self.bended.traced_methods}",
                404,
            )
        return fn

    def graph(self, fn: str | None) -> dict[str, Any]:
        with self.lock:
            return describe.graph_json(self.bended, self.method(fn))

    def weights(self, flt: str | None) -> list[dict[str, Any]]:
        with self.lock:
            return describe.weight_rows(self.bended, flt)

    def activations(self, fn: str | None, flt: str | None) -> list[dict[str, Any]]:
        with self.lock:
            return describe.activation_rows(self.bended, self.method(fn), flt)

    def weight_stats(self, name: str) -> dict[str, Any]:
        with self.lock:
            names = self.bended.weight_names
            if name not in names:
                raise StudioError(f"no weight {name!r}{did_you_mean(name, names)}", 404)
            return describe.statistics(name, "weight", self.bended.weight(name))

    def activation_stats(self, name: str, fn: str | None) -> dict[str, Any]:
        """Statistics of activation ``name`` over the first seconds of the current sound,
        bent as configured: block by block from a clean state for a model that streams."""
        with self.lock:
            fn = self.method(fn)
            names = self.bended.activation_names(fn)
            if name not in names:
                raise StudioError(f"no activation {name!r} in {fn}{did_you_mean(name, names)}", 404)
            sound = self.library.get(self.current)
            length = min(sound.audio.shape[-1], int(self.stats_seconds * self.sample_rate))
            audio = sound.audio[:, :length]
            try:
                value, _ = self.activation_on(name, fn, audio)
                row = self._health(re.escape(name) + "$", fn, audio)
            except TorchbendError as e:
                raise StudioError(f"statistics of {name}: {e}", 422) from None
            stats = describe.statistics(name, "activation", value)
            stats["health"] = describe.health_json(row)
            stats["sound"] = sound.id
            stats["seconds"] = round(length / self.sample_rate, 3)
            return stats

    def _health(self, pattern: str, fn: str, audio: torch.Tensor) -> HealthRow:
        """The health of one node (bent against unbent) on ``audio``, in one pass: the first
        block, both runs from a clean state, for a model that streams."""
        if self.block_size is None:
            report = health(self.bended, padded(audio, self.ratio), fn=fn, nodes=pattern)
            return report.rows[0]
        first = audio[:, : self.block_size]
        x = torch.nn.functional.pad(first, (0, self.block_size - first.shape[-1]))[None]
        module = self.bended.module
        report = health(self.bended, x, fn=fn, nodes=pattern, reset=lambda: reset_cache(module))
        reset_cache(module)
        return report.rows[0]

    def activation_on(self, name: str, fn: str, audio: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Activation ``name`` of ``fn`` on ``audio`` (``[channels, time]``), bent as configured,
        and the length it ran on (``audio`` padded): in one pass, or, for a model that streams,
        block by block from a clean state, the blocks joined along time (the first block's
        alone where their shapes differ along another axis)."""
        argument = self.bended.view().signature(fn).names[0]
        pattern = re.escape(name) + "$"
        if self.block_size is None:
            x = padded(audio, self.ratio)
            with torch.inference_mode():
                inputs: dict[str, Any] = {argument: x}
                return self.bended.get_activations(pattern, fn=fn, **inputs)[name], x.shape[-1]
        block = self.block_size
        x = torch.nn.functional.pad(audio, (0, -audio.shape[-1] % block))[None]
        reset_cache(self.bended.module)
        values = []
        with torch.inference_mode():
            for start in range(0, x.shape[-1], block):
                inputs = {argument: x[..., start : start + block]}
                got = self.bended.get_activations(pattern, fn=fn, **inputs)
                values.append(got[name])
        reset_cache(self.bended.module)
        first = values[0]
        if all(v.shape[:-1] == first.shape[:-1] for v in values):
            return torch.cat(values, -1), x.shape[-1]
        return first, block

    # -- sounds and renders ----------------------------------------------------------------------

    def set_current(self, sound_id: Any) -> dict[str, Any]:
        if not isinstance(sound_id, str):
            raise StudioError(f"'id' names a sound, got {sound_id!r}")
        self.current = self.library.get(sound_id).id
        return {"current": self.current}

    def upload(self, name: str, data: bytes) -> dict[str, Any]:
        sound = self.library.upload(name, data)
        self.current = sound.id
        return sound.to_dict()

    def sounds(self) -> dict[str, Any]:
        return {
            "sounds": self.library.to_list(),
            "current": self.current,
            "limits": self.library.limits.to_dict(),
        }

    def render(self, sound_id: Any = None, seconds: Any = None) -> dict[str, Any]:
        """Render a sound through the bent model and the unbent one; keep the three files."""
        if sound_id is not None and not isinstance(sound_id, str):
            raise StudioError(f"'sound' names a sound, got {sound_id!r}")
        sound = self.library.get(sound_id or self.current)
        audio = sound.audio
        given = seconds_value(seconds)
        if given is not None:
            audio = audio[:, : max(1, int(given * self.sample_rate))]
        with self.lock:
            key = (sound.id, audio.shape[-1])
            if key not in self._unbent:
                self._unbent[key], _ = self.render_with(self.plain, audio, "the unbent model")
                while len(self._unbent) > RENDERS:  # unbent renders of sounds no longer played
                    self._unbent.popitem(last=False)
            unbent = self._unbent[key]
            start = time.perf_counter()
            bended, limited = self.render_with(self.bended, audio, "the bent model")
            elapsed = time.perf_counter() - start
            self._count += 1
            render_id = f"r{self._count}"
        measures, flags = measure(bended, self.sample_rate, unbent)
        outputs = {"input": audio, "unbent": unbent, "bended": bended}
        folder = self.output / "renders"
        folder.mkdir(exist_ok=True)
        files = {k: folder / f"{self._session}-{render_id}-{sound.id}-{k}.wav" for k in outputs}
        for kind, path in files.items():
            path.write_bytes(encode(outputs[kind], self.sample_rate, "wav"))
        self.renders[render_id] = Render(render_id, files)
        while len(self.renders) > RENDERS:
            self.renders.popitem(last=False)
        seconds_rendered = audio.shape[-1] / self.sample_rate
        self.last_render = {
            "id": render_id,
            "sound": sound.id,
            "seconds": round(seconds_rendered, 3),
            "sample_rate": self.sample_rate,
            "how": "in one pass" if self.block_size is None else f"by blocks of {self.block_size}",
            "realtime_factor": round(seconds_rendered / max(elapsed, 1e-9), 2),
            "differs": not torch.equal(bended, unbent),
            "distance": round(measures["distance"], 4),
            "flags": [name for name, raised in flags.items() if raised],
            "safety": None if limited is None else str(limited),
            "audio": {k: f"/api/audio/{render_id}/{k}.wav" for k in _KINDS},
            "views": {
                k: {
                    "waveform": waveform(v),
                    "spectrogram": spectrogram(v, self.sample_rate),
                }
                for k, v in outputs.items()
            },
        }
        return self.last_render

    def audio_file(self, render_id: str, kind: str) -> Path:
        render_ = self.renders.get(render_id)
        if render_ is None:
            raise StudioError(
                f"no render {render_id!r} (the studio keeps the last {RENDERS}; render again)",
                404,
            )
        if kind not in render_.files:
            raise StudioError(f"a render has the files {list(_KINDS)}, not {kind!r}", 404)
        return render_.files[kind]

    def render_with(
        self, model: BendedModule, audio: torch.Tensor, what: str
    ) -> tuple[torch.Tensor, SafetyStats | None]:
        """``audio`` through ``model``, and what the safety stage did (``None`` without it)."""
        stage = Safety(self.sample_rate, ceiling=FILE_CEILING) if self.safety else None
        try:
            out, _ = render(
                model,
                audio,
                self.sample_rate,
                self.fn,
                self.block_size,
                safety=False if stage is None else stage,
            )
        except Exception as e:  # the model's own code, or a callback, may raise anything
            log.exception("render failed")
            raise StudioError(
                f"rendering through {what} failed: {type(e).__name__}: {e}", 422
            ) from e
        return out.detach(), (None if stage is None else stage.stats)


def _sweep_folder(sweep: str | Path | None) -> Path | None:
    if sweep is None:
        return None
    folder = Path(sweep).resolve()
    if not (folder / "atlas.html").is_file():
        raise StudioError(
            f"{sweep} holds no atlas.html; make one with `torchbend sweep map {sweep}`"
        )
    return folder
