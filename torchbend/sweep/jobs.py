"""One render of a sweep: a worker's loaded model, bent by one point, run over one input.

A :class:`Renderer` is built once per worker from a :class:`Setup` (everything a worker needs,
picklable, sent once): it loads and traces the model, then renders :class:`Job` after
:class:`Job`, each from the unbent model and a clean stream state, so that a render depends
only on its job, never on what the worker rendered before (any engine, any order, the same
bits). It returns the manifest row and the encoded audio; writing both is the driver's work.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from ..audio.render import STREAM_BLOCK, render, streams, trace_audio
from ..audio.safety import FILE_CEILING, Safety
from ..audio.safety_stats import SafetyStats
from ..bended import BendedModule
from ..config import BendingConfig
from ..models.reference import load_model
from .effects import effects
from .measure import BROKEN, measure

__all__ = ["Job", "Renderer", "Setup", "Task", "Work", "encode", "with_threads"]

SUBTYPE = "PCM_16"
"""Renders are written as 16-bit PCM (WAV or FLAC): what every player reads, a third the size
of float files; the measures are taken on the float render before it is written."""


@dataclass(frozen=True)
class Setup:
    """What every worker of a sweep needs: the model, how to run it, and the inputs (at the
    model's rate, ``[channels, time]`` float32) with their unbent renders."""

    model: str
    checkpoint: str | None
    method: str
    block_size: int | None
    sample_rate: int
    threads: int
    safety: bool
    format: str
    inputs: tuple[np.ndarray, ...]
    unbent: tuple[np.ndarray, ...]
    described: tuple[dict[str, float] | None, ...] | None = None
    """The descriptors of each unbent render (:func:`~torchbend.sweep.effects.describe`),
    read once by the driver, that each render's effects are taken against; ``None`` when the
    sweep takes no effects (``"effects": false``)."""

    def renderer(self) -> Renderer:
        """A worker's model, loaded, to render this sweep's jobs with."""
        return Renderer(self)


class Task(Protocol):
    """What an engine hands a worker: a job with an ``id`` (unique among the jobs of a run)
    and the row that says it failed when its workers keep dying."""

    @property
    def id(self) -> str: ...

    def row(self, **fields: Any) -> dict[str, Any]: ...


class Work(Protocol):
    """What an engine sets each worker up with, once: picklable, it builds on the worker what
    renders the jobs (``render(job) -> (row, bytes or None)``). A sweep's :class:`Setup` is
    one; other work that renders many variants of a model (a discovery's probes) brings its
    own, and runs on the same engines."""

    def renderer(self) -> Any: ...


@dataclass(frozen=True)
class Job:
    """One render: ``config`` (a bending configuration's dict) applied to input
    ``input_index``; the row it gives is keyed by ``id``."""

    id: str
    point: int
    input_index: int
    input: str
    audio: str
    axes: dict[str, Any]
    config: dict[str, Any]
    seed: int = 0
    """Torch's global generator is seeded with it before the render, so that even a callback
    drawing without a seed of its own (``Noise(seed=None)``) renders the same bits anywhere."""

    def row(self, **fields: Any) -> dict[str, Any]:
        """The job's manifest row: what the job says, then ``fields``."""
        return {
            "id": self.id,
            "point": self.point,
            "input": self.input,
            "input_index": self.input_index,
            "audio": self.audio,
            **fields,
            "axes": self.axes,
            "config": self.config,
        }


@contextlib.contextmanager
def with_threads(threads: int) -> Iterator[None]:
    """Run torch on ``threads`` threads, and put the count back after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def load_bended(
    model: str, checkpoint: str | None, method: str, block_size: int | None
) -> BendedModule:
    """The model wrapped, in streaming mode if it has one, traced on a block of silence (or on
    ``block_size`` samples' worth when it runs in one pass)."""
    bended = BendedModule(load_model(model, checkpoint, option="checkpoint"))
    streams(bended.module)
    trace_audio(bended, method, torch.zeros(1, 1, block_size or STREAM_BLOCK))
    return bended


def run_audio(
    bended: BendedModule, setup: Setup, audio: torch.Tensor
) -> tuple[torch.Tensor, SafetyStats | None]:
    """``audio`` through the model as it is bent now, as the sweep renders (exact length), and
    what the safety stage did to it (``None`` when the sweep writes the model's raw output).
    The stage is the files' one: a limiter within :data:`~torchbend.audio.safety.FILE_CEILING`, so
    that no written sample clips."""
    stage = Safety(setup.sample_rate, ceiling=FILE_CEILING) if setup.safety else None
    out, _ = render(
        bended, audio, setup.sample_rate, setup.method, setup.block_size, safety=stage or False
    )
    return out, (None if stage is None else stage.stats)


def safety_row(stats: SafetyStats) -> dict[str, float | None]:
    """What the safety stage did to a render, for its manifest row: the peak that came in (in
    dBFS; ``None`` for silence) and how long the limiter turned it down (in seconds)."""
    peak = 20 * math.log10(stats.peak) if 0 < stats.peak < math.inf else None
    return {
        "peak_in_dbfs": None if peak is None else round(peak, 2),
        "limited_s": round(stats.limited_seconds, 4),
    }


def encode(audio: torch.Tensor, sample_rate: int, fmt: str) -> bytes:
    """``audio`` as the bytes of a 16-bit WAV or FLAC file (NaN and infinities written as 0,
    samples beyond [-1, 1] clipped: what any 16-bit file holds)."""
    import soundfile

    finite = torch.nan_to_num(audio.detach().float(), nan=0.0, posinf=0.0, neginf=0.0)
    data = finite.clamp(-1.0, 1.0).T.contiguous().numpy()
    buffer = io.BytesIO()
    soundfile.write(buffer, data, sample_rate, format=fmt.upper(), subtype=SUBTYPE)
    return buffer.getvalue()


class Renderer:
    """A worker's model, loaded once, and the renders it makes."""

    def __init__(self, setup: Setup, bended: BendedModule | None = None) -> None:
        """``bended``: the model already loaded (as :func:`load_bended` gives it), if it is."""
        self.setup = setup
        self.worker = f"pid {os.getpid()}"
        if bended is None:
            with with_threads(setup.threads):
                bended = load_bended(setup.model, setup.checkpoint, setup.method, setup.block_size)
        self.bended = bended
        self.inputs = [torch.from_numpy(a) for a in setup.inputs]
        self.unbent = [torch.from_numpy(a) for a in setup.unbent]

    def render(self, job: Job) -> tuple[dict[str, Any], bytes | None]:
        """The manifest row of ``job`` and its encoded audio (``None`` if it failed: the row
        says why in ``error``)."""
        with with_threads(self.setup.threads):
            return self._render(job)

    def _render(self, job: Job) -> tuple[dict[str, Any], bytes | None]:
        setup = self.setup
        audio = self.inputs[job.input_index]
        row = job.row(
            seconds=round(audio.shape[-1] / setup.sample_rate, 6),
            sample_rate=setup.sample_rate,
        )
        start = time.perf_counter()
        torch.manual_seed(job.seed)
        try:  # from the unbent model: the previous job's bendings were reset after it
            self.bended.bend(BendingConfig.from_dict(job.config, source=f"render {job.id}"))
            with torch.inference_mode():
                out, limited = run_audio(self.bended, setup, audio)
        except Exception as e:  # the user's model or bending failed on this point: say so
            first = " ".join(str(e).split()) or traceback.format_exception_only(e)[-1].strip()
            row.update(
                audio=None,
                measures={},
                effects={},
                flags={},
                broken=True,
                error=f"{type(e).__name__}: {first}",
                safety=None,
                timing={"render_s": round(time.perf_counter() - start, 4), "worker": self.worker},
            )
            return row, None
        finally:
            self.bended.reset()
        rendered = time.perf_counter()
        measures, flags = measure(out, setup.sample_rate, self.unbent[job.input_index])
        described = setup.described
        effect = (
            {} if described is None else effects(out, setup.sample_rate, described[job.input_index])
        )
        data = encode(out, setup.sample_rate, setup.format)
        row.update(
            measures=measures,
            effects=effect,
            flags=flags,
            broken=any(flags[f] for f in BROKEN),
            error=None,
            safety=None if limited is None else safety_row(limited),
            timing={
                "render_s": round(rendered - start, 4),
                "measure_s": round(time.perf_counter() - rendered, 4),
                "worker": self.worker,
            },
        )
        return row, data
