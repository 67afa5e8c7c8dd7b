"""The studio's state: one model and its bending (with undo and redo), the sounds, the renders.

Every request of the server is a call of :class:`Studio`; the server adds only HTTP. The
bending is kept by the :class:`~torchbend.BendedModule` itself: its configuration is what the
page is shown, and an undo step is that configuration as JSON, applied again from scratch.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..audio.render import STREAM_BLOCK, padded, ratio_of, render, streams, trace_audio
from ..bended import BendedModule
from ..config import BendingConfig
from ..config_schema import FORMAT, VERSION
from ..errors import StudioError, TorchbendError, did_you_mean
from ..sweep.measure import measure
from ..sweep.render import encode
from . import describe
from .sounds import Limits, SoundLibrary, spectrogram, waveform

__all__ = ["HISTORY", "RENDERS", "Render", "Studio"]

log = logging.getLogger(__name__)

HISTORY = 200
"""Undo steps kept."""

RENDERS = 16
"""Renders the page can play (older ones stay in the output folder)."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_KINDS = ("input", "unbent", "bended")


@dataclass
class Render:
    """One render: the three files the page plays, in the output folder."""

    id: str
    files: dict[str, Path]


class Studio:
    """A model opened in the studio.

    Args:
        model: the model (``torchbend.models.resolve.load_model`` gives one from a name).
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
    ) -> None:
        from ..demo import SOUNDS

        self.name = name
        self.fn = fn
        self.output = Path(output).resolve()
        self.output.mkdir(parents=True, exist_ok=True)
        self.sweep = _sweep_folder(sweep)
        self.stats_seconds = stats_seconds
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
        trace_audio(self.bended, fn, example)
        trace_audio(self.plain, fn, example)
        self.undo_stack: list[dict[str, Any]] = []
        self.redo_stack: list[dict[str, Any]] = []
        self.renders: OrderedDict[str, Render] = OrderedDict()
        self._unbent: dict[tuple[str, int], torch.Tensor] = {}
        self._count = 0

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
            argument = self.bended.view().signature(fn).names[0]
            pattern = re.escape(name) + "$"
            try:
                if self.block_size is None:
                    x = padded(audio, self.ratio)
                    with torch.inference_mode():
                        inputs: dict[str, Any] = {argument: x}
                        value = self.bended.get_activations(pattern, fn=fn, **inputs)[name]
                else:
                    value = self._streamed_activation(pattern, name, fn, argument, audio)
            except TorchbendError as e:
                raise StudioError(f"statistics of {name}: {e}", 422) from None
            stats = describe.statistics(name, "activation", value)
            stats["sound"] = sound.id
            stats["seconds"] = round(length / self.sample_rate, 3)
            return stats

    def _streamed_activation(
        self, pattern: str, name: str, fn: str, argument: str, audio: torch.Tensor
    ) -> torch.Tensor:
        assert self.block_size is not None
        block = self.block_size
        x = torch.nn.functional.pad(audio, (0, -audio.shape[-1] % block))[None]
        _reset_cache(self.bended.module)
        values = []
        with torch.inference_mode():
            for start in range(0, x.shape[-1], block):
                inputs: dict[str, Any] = {argument: x[..., start : start + block]}
                got = self.bended.get_activations(pattern, fn=fn, **inputs)
                values.append(got[name])
        _reset_cache(self.bended.module)
        first = values[0]
        if all(v.shape[:-1] == first.shape[:-1] for v in values):
            return torch.cat(values, -1)
        return first

    # -- the bending -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What the page shows of the bending: the configuration (the JSON Python saves), its
        controls with their widgets, the targets each bending matched, undo and redo."""
        with self.lock:
            controls = self.bended.controllables
            return {
                "config": self._config(keys=True),
                "controls": [_control_json(c) for c in controls.values()],
                "keys": [b.keys() for b in self.bended.bendings],
                "undo": len(self.undo_stack),
                "redo": len(self.redo_stack),
            }

    def config(self) -> dict[str, Any]:
        with self.lock:
            return self._config(keys=True)

    def set_config(self, data: Any) -> dict[str, Any]:
        """Bend the model with configuration ``data`` (replacing what it had): an undo step."""
        with self.lock:
            self._change(data)
            return self.state()

    def add(self, bending: Any) -> dict[str, Any]:
        """Append a bending: ``{"callback": {"class", "args"}, "patterns", "fn"?, "controls"?}``
        (an argument ``{"control": NAME}`` is driven by control NAME, which ``controls``
        declares as a configuration does)."""
        if not isinstance(bending, dict):
            raise StudioError(f"a bending is a JSON object, got {type(bending).__name__}")
        unknown = set(bending) - {"callback", "patterns", "fn", "controls", "blend", "guard"}
        if unknown:
            raise StudioError(
                f"a bending has no field {sorted(unknown)}; it takes callback, patterns, fn, "
                "controls, blend and guard"
            )
        with self.lock:
            data = self._config(keys=False)
            new_controls = bending.get("controls", [])
            if not isinstance(new_controls, list):
                raise StudioError("controls is a list of controls ({name, value, range})")
            taken = {c["name"] for c in data["controls"]}
            for c in new_controls:
                name = c.get("name") if isinstance(c, dict) else None
                if name in taken:
                    raise StudioError(
                        f"a control named {name!r} exists already; give the new one another name"
                    )
            data["controls"] = [*data["controls"], *new_controls]
            item = {k: v for k, v in bending.items() if k != "controls"}
            data["bendings"] = [*data["bendings"], item]
            self._change(data)
            return self.state()

    def remove(self, index: int) -> dict[str, Any]:
        with self.lock:
            data = self._config(keys=False)
            self._index(index, data)
            del data["bendings"][index]
            self._change(_drop_unused_controls(data))
            return self.state()

    def move(self, index: int, to: Any) -> dict[str, Any]:
        with self.lock:
            data = self._config(keys=False)
            self._index(index, data)
            if isinstance(to, bool) or not isinstance(to, int):
                raise StudioError(f"'to' is the new position, an int, got {to!r}")
            self._index(to, data)
            item = data["bendings"].pop(index)
            data["bendings"].insert(to, item)
            self._change(data)
            return self.state()

    def reset(self) -> dict[str, Any]:
        with self.lock:
            self._change({"controls": [], "bendings": []})
            return self.state()

    def undo(self) -> dict[str, Any]:
        with self.lock:
            if not self.undo_stack:
                raise StudioError("nothing to undo")
            self.redo_stack.append(self._config(keys=False))
            self._apply(self.undo_stack.pop())
            return self.state()

    def redo(self) -> dict[str, Any]:
        with self.lock:
            if not self.redo_stack:
                raise StudioError("nothing to redo")
            self.undo_stack.append(self._config(keys=False))
            self._apply(self.redo_stack.pop())
            return self.state()

    def set_control(self, name: str, value: Any) -> dict[str, Any]:
        """Move control ``name``: live, no undo step (the saved configuration holds it)."""
        if not isinstance(value, (bool, int, float)):
            raise StudioError(f"control {name!r} takes a number or a bool, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise StudioError(f"control {name!r} takes a finite number, got {value!r}")
        with self.lock:
            controls = self.bended.controllables
            if name not in controls:
                raise StudioError(
                    f"no control {name!r}{did_you_mean(name, controls)}; the controls are "
                    f"{sorted(controls)}",
                    404,
                )
            try:
                self.bended.update(name, value)
            except TorchbendError as e:
                raise StudioError(str(e)) from None
            return {"name": name, "value": controls[name].get()}

    def saved(self) -> list[str]:
        folder = self.output / "configs"
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def save(self, name: Any) -> dict[str, Any]:
        """Save the configuration as ``output/configs/NAME.json``, as Python saves it."""
        path = self._config_path(name)
        with self.lock:
            config = self._built(self._config(keys=False))
        path.parent.mkdir(parents=True, exist_ok=True)
        config.save(path)
        return {"name": name, "path": str(path)}

    def load_saved(self, name: Any) -> dict[str, Any]:
        import json

        path = self._config_path(name)
        if not path.is_file():
            raise StudioError(
                f"no saved configuration {name!r}{did_you_mean(str(name), self.saved())}; "
                f"saved: {self.saved()}",
                404,
            )
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def _config_path(self, name: Any) -> Path:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise StudioError(
                f"a configuration's name is 1 to 64 letters, digits, '-' or '_', got {name!r}"
            )
        return self.output / "configs" / f"{name}.json"

    def _config(self, keys: bool) -> dict[str, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unseeded callbacks: the page shows their seed
            return self.bended.bending_config().to_dict(keys=keys)

    def _index(self, index: int, data: dict[str, Any]) -> None:
        count = len(data["bendings"])
        if not 0 <= index < count:
            raise StudioError(
                f"no bending {index}: there are {count} (0 to {count - 1})"
                if count
                else f"no bending {index}: nothing is bent",
                404,
            )

    def _change(self, data: Any) -> None:
        before = self._config(keys=False)
        self._apply(data)
        self.undo_stack.append(before)
        del self.undo_stack[:-HISTORY]
        self.redo_stack.clear()

    def _apply(self, data: Any) -> None:
        """Bend the model with ``data`` from scratch; on failure, bend it back as it was."""
        config = self._built(data)
        before = self._built(self._config(keys=False))
        try:
            self._bend(config)
        except TorchbendError as e:
            self._bend(before)
            raise StudioError(str(e)) from None

    def _built(self, data: Any) -> BendingConfig:
        if not isinstance(data, dict):
            raise StudioError(
                f"a bending configuration is a JSON object, got {type(data).__name__}"
            )
        data = {"format": FORMAT, "version": VERSION, **data}
        for i, bending in enumerate(data.get("bendings") or []):
            callback = bending.get("callback") if isinstance(bending, dict) else None
            _check_classes(callback, f"bending {i}")
        try:
            return BendingConfig.from_dict(data, source="the configuration")
        except TorchbendError as e:
            raise StudioError(str(e)) from None

    def _bend(self, config: BendingConfig) -> None:
        self.bended.reset()
        self.bended.bend(config)

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
        if seconds is not None:
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not (math.isfinite(seconds) and seconds > 0)
            ):
                raise StudioError(f"'seconds' is a number of seconds above 0, got {seconds!r}")
            audio = audio[:, : max(1, int(seconds * self.sample_rate))]
        with self.lock:
            key = (sound.id, audio.shape[-1])
            if key not in self._unbent:
                self._unbent[key] = self._render(self.plain, audio, "the unbent model")
            unbent = self._unbent[key]
            start = time.perf_counter()
            bended = self._render(self.bended, audio, "the bent model")
            elapsed = time.perf_counter() - start
            self._count += 1
            render_id = f"r{self._count}"
        measures, flags = measure(bended, self.sample_rate, unbent)
        outputs = {"input": audio, "unbent": unbent, "bended": bended}
        folder = self.output / "renders"
        folder.mkdir(exist_ok=True)
        files = {k: folder / f"{render_id}-{sound.id}-{k}.wav" for k in outputs}
        for kind, path in files.items():
            path.write_bytes(encode(outputs[kind], self.sample_rate, "wav"))
        self.renders[render_id] = Render(render_id, files)
        while len(self.renders) > RENDERS:
            self.renders.popitem(last=False)
        seconds_rendered = audio.shape[-1] / self.sample_rate
        return {
            "id": render_id,
            "sound": sound.id,
            "seconds": round(seconds_rendered, 3),
            "sample_rate": self.sample_rate,
            "how": "in one pass" if self.block_size is None else f"by blocks of {self.block_size}",
            "realtime_factor": round(seconds_rendered / max(elapsed, 1e-9), 2),
            "differs": not torch.equal(bended, unbent),
            "distance": round(measures["distance"], 4),
            "flags": [name for name, raised in flags.items() if raised],
            "audio": {k: f"/api/audio/{render_id}/{k}.wav" for k in _KINDS},
            "views": {
                k: {
                    "waveform": waveform(v),
                    "spectrogram": spectrogram(v, self.sample_rate),
                }
                for k, v in outputs.items()
            },
        }

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

    def _render(self, model: BendedModule, audio: torch.Tensor, what: str) -> torch.Tensor:
        try:
            out, _ = render(model, audio, self.sample_rate, self.fn, self.block_size)
        except Exception as e:  # the model's own code, or a callback, may raise anything
            log.exception("render failed")
            raise StudioError(
                f"rendering through {what} failed: {type(e).__name__}: {e}", 422
            ) from e
        return out.detach()


def _check_classes(callback: Any, where: str) -> None:
    """Refuse any callback class the page may not build, before anything is built."""
    if not isinstance(callback, dict):
        return  # the schema check names what is wrong
    name = callback.get("class")
    if not isinstance(name, str):
        return
    try:
        describe.form_callback(name)
    except StudioError as e:
        raise StudioError(f"{where}: {e}") from None
    args = callback.get("args")
    for value in args.values() if isinstance(args, dict) else ():
        if isinstance(value, dict) and "callback" in value:
            _check_classes(value["callback"], where)


def _drop_unused_controls(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the controls no bending reads any more."""
    read = _controls_read(data["bendings"])
    return {**data, "controls": [c for c in data["controls"] if c["name"] in read]}


def _controls_read(value: Any) -> set[str]:
    if isinstance(value, list):
        return set().union(*map(_controls_read, value)) if value else set()
    if isinstance(value, dict):
        own = {value["control"]} if isinstance(value.get("control"), str) else set()
        return own.union(*map(_controls_read, value.values())) if value else own
    return set()


def _control_json(control: Any) -> dict[str, Any]:
    widget = control.widget
    return {
        "name": control.name,
        "value": control.get(),
        "range": None if control.range is None else list(control.range),
        "clamp": control.clamp,
        "widget": widget.to_dict(),
    }


def _reset_cache(module: nn.Module) -> None:
    reset_cache = getattr(module, "reset_cache", None)
    if callable(reset_cache):
        reset_cache()


def _sweep_folder(sweep: str | Path | None) -> Path | None:
    if sweep is None:
        return None
    folder = Path(sweep).resolve()
    if not (folder / "atlas.html").is_file():
        raise StudioError(
            f"{sweep} holds no atlas.html; make one with `torchbend sweep map {sweep}`"
        )
    return folder
