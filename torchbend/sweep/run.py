"""Running a sweep: the driver that opens its folder, hands the jobs still to render to an
engine, writes what comes back, and stops the workers at once when it is interrupted."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SweepError
from .engines import Engine, make_engine
from .estimate import duration
from .jobs import encode
from .manifest import FORMAT, SWEEP, VERSION, Manifest, intact, write_atomic
from .space import Sweep, load
from .spec import SweepSpec

__all__ = ["SweepResult", "SweepStopped", "load", "run"]


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


class SweepStopped(KeyboardInterrupt):
    """A sweep interrupted (Ctrl-C, a supervisor's or a notebook's interrupt): its workers
    are stopped, every render it finished is on disk, and running it again resumes it."""

    def __init__(self, folder: Path, done: int, total: int) -> None:
        super().__init__(
            f"the sweep in {folder} stopped with {done} of {total} renders done; run it again "
            "(the same specification and folder) to resume"
        )
        self.folder, self.done, self.total = folder, done, total


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
            f"{duration(left)} left, {self.broken} broken, {self.failed} failed   ",
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
    frames = [a.shape[-1] for a in sweep.audio]
    for i, path in enumerate(sweep.inputs):
        target = folder / _unbent_name(i, path)
        if not intact(target, frames[i]):
            write_atomic(target, encode(unbent[i], sweep.sample_rate, "wav"))
    write_atomic(folder / SWEEP, (json.dumps(_description(sweep), indent=1) + "\n").encode())
    todo = set()
    for key, _, i in sweep.keys():  # done: a row, and its file whole (it may be cut since)
        row = manifest.rows.get(key)
        if row is None or (row["audio"] and not intact(folder / row["audio"], frames[i])):
            todo.add(key)
    skipped = sweep.renders - len(todo)
    runner = make_engine(engine, workers, address)
    bar = Progress(sweep.renders, skipped, progress)
    if todo:
        try:
            runner.start(sweep.setup(unbent))
            for job, row, data in runner.results(sweep.jobs(keep=todo.__contains__)):
                if data is not None:
                    write_atomic(folder / job.audio, data)
                manifest.append(row)
                bar.update(row)
                if on_row is not None:
                    on_row(row)
        except BaseException as e:  # stop the workers now, whatever they are doing
            runner.close(now=True)
            if isinstance(e, KeyboardInterrupt):
                written = Manifest(folder).rows  # as on disk: a row may be cut short
                done = sum(1 for key, _, _ in sweep.keys() if key in written)
                raise SweepStopped(folder, done, sweep.renders) from None
            raise
        finally:
            bar.close()
        runner.close()
    manifest.compact(key for key, _, _ in sweep.keys())
    rows = [manifest.rows[key] for key, _, _ in sweep.keys() if key in manifest.rows]
    return SweepResult(
        folder=folder,
        rows=rows,
        rendered=len(todo),
        skipped=skipped,
        seconds=time.perf_counter() - began,
        engine=runner.describe(),
        restarts=getattr(runner, "restarts", 0),
    )
