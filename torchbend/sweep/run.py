"""Planning and running a sweep: the points of its space, the jobs they make, and the driver
that hands jobs to an engine and writes what comes back."""

from __future__ import annotations

import copy
import json
import math
import os
import random
import re
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..audio.render import STREAM_BLOCK, streams
from ..config import BendingConfig
from ..errors import SweepError
from .engines import Engine, make_engine
from .manifest import FORMAT, SWEEP, VERSION, Manifest, write_atomic
from .render import Job, Setup, encode, load_bended, run_audio, with_threads
from .spec import Axis, SweepSpec, locate, read_spec

__all__ = ["Plan", "Sweep", "SweepResult", "plan", "run"]

WAV_HEADER = 44
"""Bytes of a WAV file's header, for the disk estimate."""


@dataclass
class Sweep:
    """A specification with its model loaded: the axes resolved against the model, the inputs
    read, and the jobs the space makes."""

    spec: SweepSpec
    axes: list[Axis]
    inputs: list[Path]
    audio: list[torch.Tensor]
    sample_rate: int
    block_size: int | None
    bended: Any

    @property
    def points(self) -> int:
        if self.spec.sample == "random":
            assert self.spec.count is not None
            return math.ceil(self.spec.count / len(self.inputs))
        return math.prod(len(a.grid()) for a in self.axes)

    @property
    def renders(self) -> int:
        if self.spec.sample == "random":
            assert self.spec.count is not None
            return self.spec.count
        return self.points * len(self.inputs)

    def values(self, point: int) -> dict[str, Any]:
        """The value of each axis at ``point``."""
        if self.spec.sample == "random":
            rng = random.Random(f"torchbend-sweep:{self.spec.seed}:{point}")
            return {a.name: a.draw(rng) for a in self.axes}
        values: dict[str, Any] = {}
        rest = point
        for axis in reversed(self.axes):  # the last axis varies fastest
            grid = axis.grid()
            rest, i = divmod(rest, len(grid))
            values[axis.name] = grid[i]
        return {a.name: values[a.name] for a in self.axes}

    def config(self, values: dict[str, Any]) -> dict[str, Any]:
        """The base configuration with each axis set to its value, as a row holds it."""
        config = copy.deepcopy(self.spec.base)
        for axis in self.axes:
            container, key = locate(config, axis.path, axis.name)
            value = values[axis.name]
            if axis.kind == "targets":
                pattern = "^" + re.escape(value) + "$"
                value = pattern if isinstance(container[key], str) else [pattern]
            container[key] = copy.deepcopy(value)
        return config

    def jobs(self) -> Iterator[Job]:
        """Every render, point by point, each input in turn."""
        width = max(5, len(str(self.points - 1)))
        count = 0
        for point in range(self.points):
            values = self.values(point)
            config = self.config(values)
            for i, path in enumerate(self.inputs):
                if count == self.renders:
                    return
                count += 1
                key = f"{point:0{width}d}-{i:02d}-{path.stem}"
                yield Job(
                    id=key,
                    point=point,
                    input_index=i,
                    input=self._shown(path),
                    audio=f"renders/{key}.{self.spec.format}",
                    axes=values,
                    config=config,
                    seed=zlib.crc32(f"{self.spec.seed}:{key}".encode()),
                )

    def _shown(self, path: Path) -> str:
        """An input as rows name it: relative to the specification's folder if the
        specification names its inputs so, else absolute."""
        if any(Path(entry).expanduser().is_absolute() for entry in self.spec.inputs):
            return str(path)
        try:
            return str(path.relative_to(self.spec.root))
        except ValueError:
            return str(path)

    def check(self) -> None:
        """Refuse a space with a value the bending refuses, before any render: the first point,
        then each value of each axis (both ends of a range drawn at random) in it, applied to
        the model once each."""
        first = self.values(0)
        tried: list[tuple[str, dict[str, Any]]] = [("the first point", first)]
        for axis in self.axes:
            tried += [
                (f"axis {axis.name!r} = {json.dumps(v)}", {**first, axis.name: v})
                for v in axis.probes()
            ]
        seen: set[str] = set()
        for label, values in tried:
            config = self.config(values)
            text = json.dumps(config, sort_keys=True)
            if text in seen:
                continue
            seen.add(text)
            try:
                self.bended.bend(BendingConfig.from_dict(config, source=label))
            except Exception as e:
                raise SweepError(
                    f"{label}: the bending fails: {' '.join(str(e).split())}"
                ) from None
            finally:
                self.bended.reset()

    def setup(self, unbent: list[torch.Tensor]) -> Setup:
        return Setup(
            model=self.spec.model_reference(),
            checkpoint=self.spec.checkpoint_path(),
            method=self.spec.method,
            block_size=self.block_size,
            sample_rate=self.sample_rate,
            threads=self.spec.threads,
            safety=self.spec.safety,
            format=self.spec.format,
            inputs=tuple(a.numpy() for a in self.audio),
            unbent=tuple(u.numpy() for u in unbent),
        )

    def render_unbent(self) -> list[torch.Tensor]:
        """Each input through the unbent model, as the workers render."""
        setup = self.setup([])
        with with_threads(self.spec.threads), torch.inference_mode():
            return [run_audio(self.bended, setup, a).contiguous() for a in self.audio]


def load(spec: str | Path | dict[str, Any] | SweepSpec) -> Sweep:
    """The sweep ``spec`` describes, its model loaded and its space checked against it."""
    from ..audio import load as load_audio

    spec = spec if isinstance(spec, SweepSpec) else read_spec(spec)
    inputs = spec.input_files()
    bended = load_bended(spec.model_reference(), spec.checkpoint_path(), spec.method, None)
    block_size: int | None
    if spec.block_size == "auto":
        block_size = STREAM_BLOCK if streams(bended.module) else None
    else:
        block_size = spec.block_size  # type: ignore[assignment]
    sample_rate = int(getattr(bended.module, "sample_rate", 44100))
    audio = [load_audio(p, sample_rate=sample_rate, mono=True)[0].contiguous() for p in inputs]
    axes = [_resolve(a, bended, spec.method) for a in spec.axes]
    sweep = Sweep(spec, axes, inputs, audio, sample_rate, block_size, bended)
    if spec.sample == "grid" and spec.count is not None and spec.count != sweep.renders:
        raise SweepError(
            f"count is {spec.count}, but the grid makes {sweep.points} point(s) x "
            f"{len(inputs)} input(s) = {sweep.renders} renders: remove count, set it to "
            f"{sweep.renders}, or sample at random"
        )
    sweep.check()
    return sweep


def _resolve(axis: Axis, bended: Any, method: str) -> Axis:
    """A ``targets`` axis with the model's names that its pattern matches."""
    if axis.kind != "targets":
        return axis
    fn = axis.method or method
    names: list[str] = []
    if axis.targets in ("activations", "all"):
        try:
            names += bended.activation_names(fn)
        except Exception as e:
            raise SweepError(f"axis {axis.name!r}: no activations of {fn!r}: {e}") from None
    if axis.targets in ("weights", "all"):
        names += bended.weight_names
    pattern = re.compile(axis.pattern)
    kept = [n for n in names if pattern.search(n)]
    if not kept:
        raise SweepError(
            f"axis {axis.name!r}: pattern {axis.pattern!r} matches none of the {len(names)} "
            f"{axis.targets} of {fn} (such as {', '.join(names[:5])}); see `torchbend inspect`"
        )
    return axis.with_targets(kept)


@dataclass
class Plan:
    """What a sweep means: renders, inputs, and the time and disk it will take."""

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

    @property
    def estimate_seconds(self) -> float | None:
        if self.seconds_per_render is None:
            return None
        return self.seconds_per_render * self.renders / max(1, self.workers)

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
                values = a.grid()
                shown = f"{len(values)} values: " + ", ".join(json.dumps(v) for v in values[:6])
                shown += ", ..." if len(values) > 6 else ""
            lines.append(f"  {a.name}: {shown}")
        lines.append(
            f"{self.points} point(s) x {len(self.inputs)} input(s) = {self.renders} renders"
        )
        lines.append(f"disk: about {_size(self.disk_bytes)} of {self.spec.format.upper()} files")
        if self.estimate_seconds is not None and self.seconds_per_render is not None:
            lines.append(
                f"time: about {_duration(self.estimate_seconds)} with {self.workers} worker(s) "
                f"({self.seconds_per_render * 1000:.0f} ms per render, measured on this machine)"
            )
        return "\n".join(lines)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def plan(
    spec: str | Path | dict[str, Any] | SweepSpec, probe: bool = True, workers: int | None = None
) -> Plan:
    """What ``spec`` means: how many renders, and about how long and how much disk they take
    (with ``probe``, the time comes from rendering the first input on this machine)."""
    sweep = load(spec)
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
        workers=workers or _default_workers(),
    )
    if probe:
        result.seconds_per_render = _probe(sweep)
    return result


def _default_workers() -> int:
    return os.cpu_count() or 1


def _probe(sweep: Sweep) -> float:
    """Seconds one render takes here, on average over the inputs (rendered, measured and
    encoded as a worker does, after one render to warm up)."""
    from .render import Renderer

    renderer = Renderer(sweep.setup(sweep.render_unbent()), bended=sweep.bended)
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


@dataclass
class SweepResult:
    """What :func:`run` did."""

    folder: Path
    rows: list[dict[str, Any]]
    rendered: int
    skipped: int
    seconds: float
    engine: str
    restarts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r.get("error"))

    @property
    def broken(self) -> int:
        return sum(1 for r in self.rows if r.get("broken"))

    def __str__(self) -> str:
        rate = self.rendered / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{len(self.rows)} renders in {self.folder} ({self.rendered} rendered now, "
            f"{self.skipped} already done; {rate:.1f} renders/s on {self.engine}); "
            f"{self.broken} broken, {self.failed} failed"
        )


def _description(sweep: Sweep) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": sweep.spec.fingerprint(),
        "spec": sweep.spec.source,
        "root": str(sweep.spec.root),
        "inputs": [sweep._shown(p) for p in sweep.inputs],
        "sample_rate": sweep.sample_rate,
        "block_size": sweep.block_size,
        "unbent": [_unbent_name(i, p) for i, p in enumerate(sweep.inputs)],
    }


def _unbent_name(index: int, path: Path) -> str:
    return f"unbent/{index:02d}-{path.stem}.wav"


def _open_folder(out: Path, sweep: Sweep) -> None:
    """Make ``out`` the sweep's folder, or check that it already is this sweep's."""
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {str(out)!r} is a file; give a folder for the sweep")
    described = out / SWEEP
    if described.is_file():
        try:
            previous = json.loads(described.read_text())
        except json.JSONDecodeError:
            raise SweepError(
                f"{described} is damaged; move the folder away to start over"
            ) from None
        if previous.get("fingerprint") != sweep.spec.fingerprint():
            theirs, ours = previous.get("spec", {}), sweep.spec.source
            fields = sorted(
                k for k in set(theirs) | set(ours) if k != "count" and theirs.get(k) != ours.get(k)
            )
            raise SweepError(
                f"{out} holds another sweep (its {', '.join(fields) or 'specification'} "
                "differ): give another --out folder, or remove this one to start over"
            )
    elif out.is_dir() and any(out.iterdir()):
        raise SweepError(f"{out} is not empty and holds no sweep; give an empty or new folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / "renders").mkdir(exist_ok=True)
    for partial in (out / "renders").glob(".*.part"):  # files a kill left half-written
        partial.unlink()


class Progress:
    """One line on stderr: renders done, the rate, the time left, broken and failed renders."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, done, enabled
        self.new = 0
        self.broken = self.failed = 0
        self.start = self.shown = time.perf_counter()

    def update(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.new += 1
        self.broken += bool(row.get("broken"))
        self.failed += bool(row.get("error"))
        now = time.perf_counter()
        if self.enabled and (now - self.shown > 0.25 or self.done == self.total):
            self.shown = now
            self._show(now)

    def _show(self, now: float) -> None:
        rate = self.new / max(now - self.start, 1e-9)
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        bar = "#" * int(24 * self.done / max(1, self.total))
        print(
            f"\rsweep [{bar:<24}] {self.done}/{self.total} {rate:.1f} renders/s, "
            f"{_duration(left)} left, {self.broken} broken, {self.failed} failed   ",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.enabled and self.new:
            print(file=sys.stderr, flush=True)


def run(
    spec: str | Path | dict[str, Any] | SweepSpec,
    out: str | Path,
    engine: str | Engine = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Render every point of ``spec`` over every input into folder ``out``.

    Renders already in ``out``'s manifest are skipped: run it again after a kill (or with a
    larger ``count``) and it renders only what is missing. ``engine`` is ``"local"`` (a pool
    of ``workers`` processes, by default one per core; ``workers=0`` renders in this process),
    ``"ray"`` (a Ray cluster at ``address``, or a local one), or an :class:`Engine`.
    ``on_row`` is called with each row once it is on disk.
    """
    began = time.perf_counter()
    sweep = load(spec)
    folder = Path(out)
    _open_folder(folder, sweep)
    manifest = Manifest(folder)
    unbent = sweep.render_unbent()
    for i, path in enumerate(sweep.inputs):
        target = folder / _unbent_name(i, path)
        if not target.is_file():
            write_atomic(target, encode(unbent[i], sweep.sample_rate, "wav"))
    write_atomic(folder / SWEEP, (json.dumps(_description(sweep), indent=1) + "\n").encode())
    jobs = list(sweep.jobs())
    order = [job.id for job in jobs]
    todo = [
        job
        for job in jobs
        if job.id not in manifest
        or (
            manifest.rows[job.id]["audio"]
            and not (folder / manifest.rows[job.id]["audio"]).is_file()
        )
    ]
    skipped = len(order) - len(todo)
    runner = make_engine(engine, workers, address)
    bar = Progress(len(order), skipped, progress)
    if todo:
        runner.start(sweep.setup(unbent))
        try:
            for job, row, data in runner.results(todo):
                if data is not None:
                    write_atomic(folder / job.audio, data)
                manifest.append(row)
                bar.update(row)
                if on_row is not None:
                    on_row(row)
        finally:
            bar.close()
            runner.close()
    manifest.compact(order)
    rows = [manifest.rows[k] for k in order if k in manifest.rows]
    return SweepResult(
        folder=folder,
        rows=rows,
        rendered=len(todo),
        skipped=skipped,
        seconds=time.perf_counter() - began,
        engine=runner.describe(),
        restarts=getattr(runner, "restarts", 0),
    )
