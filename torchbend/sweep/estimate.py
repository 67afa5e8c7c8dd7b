"""What a sweep will take before it runs: its renders, its disk, and its time (the renders
timed on this machine, and what comes before the first: loading the model in the driver and
starting the workers)."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .axis import Axis
from .jobs import Job, Renderer, Setup
from .process import worker_startup
from .space import Sweep, load
from .spec import SweepSpec

__all__ = ["Plan", "duration", "plan"]

WAV_HEADER = 44
"""Bytes of a WAV file's header, for the disk estimate."""


@dataclass
class Plan:
    """What a sweep means: renders, inputs, and the time and disk it will take.

    The time (with a probe) is what a run of the local engine spends: ``setup_seconds`` in the
    driver (loading the model, checking every axis on it, rendering the unbent inputs), then
    ``startup_seconds`` for the workers to start (each a new interpreter importing torch and
    loading the model: one worker timed, and the workers start in waves of one per core), then
    the renders, ``seconds_per_render`` each, on as many workers as there are cores at most.
    """

    spec: SweepSpec
    points: int
    inputs: list[Path]
    input_seconds: list[float]
    renders: int
    axes: list[Axis]
    sample_rate: int
    block_size: int | None
    disk_bytes: int
    seconds_per_render: float | None = None
    workers: int = 1
    setup_seconds: float = 0.0
    worker_seconds: float = 0.0
    """Seconds one worker takes from its start to its first render."""
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def startup_seconds(self) -> float:
        """Seconds to start every worker: one worker's start-up per wave of ``cores``."""
        return self.worker_seconds * math.ceil(self.workers / max(1, self.cores))

    @property
    def estimate_seconds(self) -> float | None:
        if self.seconds_per_render is None:
            return None
        parallel = max(1, min(self.workers, self.cores))
        renders = self.seconds_per_render * self.renders / parallel
        return self.setup_seconds + self.startup_seconds + renders

    def __str__(self) -> str:
        lines = [
            f"model {self.spec.model}.{self.spec.method} at {self.sample_rate} Hz, "
            + (f"by blocks of {self.block_size}" if self.block_size else "in one pass"),
            f"{len(self.inputs)} input(s), {sum(self.input_seconds):.1f} s of audio in all",
            f"{len(self.axes)} axis/axes, sampled {self.spec.sample}:",
        ]
        for a in self.axes:
            if a.kind == "range" and a.steps is None:
                shown = f"any of [{a.low:g}, {a.high:g}]" + (" (log)" if a.log else "")
            else:
                size = a.size or 1
                shown = f"{size} values: " + ", ".join(
                    json.dumps(a.value(i)) for i in range(min(size, 6))
                )
                shown += ", ..." if size > 6 else ""
            lines.append(f"  {a.name}: {shown}")
        lines.append(
            f"{self.points} point(s) x {len(self.inputs)} input(s) = {self.renders} renders"
        )
        disk = size_text(self.disk_bytes)
        lines.append(f"disk: about {disk} of {self.spec.format.upper()} files")
        total = self.estimate_seconds
        if total is not None and self.seconds_per_render is not None:
            renders = total - self.setup_seconds - self.startup_seconds
            lines.append(
                f"time: about {duration(total)} with {self.workers} worker(s): "
                f"{duration(self.setup_seconds)} to load the model and render the unbent "
                f"inputs, {duration(self.startup_seconds)} to start the workers, "
                f"{duration(renders)} of renders ({self.seconds_per_render * 1000:.0f} ms per "
                "render; measured on this machine)"
            )
        return "\n".join(lines)


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def plan(
    spec: str | Path | dict[str, Any] | SweepSpec, probe: bool = True, workers: int | None = None
) -> Plan:
    """What ``spec`` means: how many renders, and about how long and how much disk they take
    (with ``probe``, the time is measured on this machine: the model loaded, one worker
    started, and the first render of each input; see :class:`Plan`)."""
    began = time.perf_counter()
    sweep = load(spec)
    loaded = time.perf_counter() - began
    frames = [a.shape[-1] for a in sweep.audio]
    per_point = sum(WAV_HEADER + 2 * n for n in frames)
    disk = per_point * sweep.renders // len(frames)
    if sweep.spec.format == "flac":
        disk = disk * 6 // 10  # FLAC of a model's output: about 60 % of 16-bit WAV
    result = Plan(
        spec=sweep.spec,
        points=sweep.points,
        inputs=sweep.inputs,
        input_seconds=[n / sweep.sample_rate for n in frames],
        renders=sweep.renders,
        axes=sweep.axes,
        sample_rate=sweep.sample_rate,
        block_size=sweep.block_size,
        disk_bytes=disk,
        workers=workers or os.cpu_count() or 1,
    )
    if probe:
        began = time.perf_counter()
        setup = sweep.setup(sweep.render_unbent())
        result.setup_seconds = loaded + time.perf_counter() - began
        result.seconds_per_render = _time_renders(sweep, setup)
        result.worker_seconds = worker_startup(setup)
    return result


def _time_renders(sweep: Sweep, setup: Setup) -> float:
    """Seconds one render takes here, on average over the inputs (rendered, measured and
    encoded as a worker does, after one render to warm up)."""
    renderer = Renderer(setup, bended=sweep.bended)
    jobs = list(_first_jobs(sweep))
    renderer.render(jobs[0])
    start = time.perf_counter()
    for job in jobs:
        renderer.render(job)
    return (time.perf_counter() - start) / len(jobs)


def _first_jobs(sweep: Sweep) -> Iterator[Job]:
    seen: set[int] = set()
    for job in sweep.jobs():
        if job.input_index in seen:
            return
        seen.add(job.input_index)
        yield job
