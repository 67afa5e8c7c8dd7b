"""Throughput of the sweep engine against a plain Python loop, and the checks a sweep promises.

Run: python benchmarks/bench_sweep.py [--renders 510] [--write docs/benchmarks.md] [--keep DIR]

The shipped model ``tiny_rave`` over the shipped sounds (``assets/sounds/*.wav``, three 4-s
sounds), sampled at random (seeded): ``Noise`` on an activation (its std on a log scale, its
seed and which activation of the encoder or the decoder are axes) and ``Scale`` on a weight
(its factor and which weight of the encoder or the decoder), ``--renders`` renders in all (170
points x 3 sounds by default). One torch thread per worker. In this order:

1. a plain loop in this process, without the engine: the model loaded once, then for each job
   of the sweep (``torchbend.sweep.run.load(spec).jobs()``) reset, bend, render, measure,
   encode; no manifest, no files;
2. the local engine with 1 worker, then 2 workers (``tb.sweep.run(spec, out, workers=n)``);
3. the Ray engine with 2 actors, on a local Ray cluster (2 CPUs) this script starts first;
4. the command ``torchbend sweep run --workers 2`` killed (SIGKILL to its process group) once a
   third of the rows are in the manifest, then the sweep run again to its end;
5. the atlas of that sweep (``tb.sweep.draw_map``), opened in headless Chromium.

Each engine's wall time is that of the whole ``run`` call (loading the model, the unbent
renders, starting the workers, the renders, the manifest); "after start-up" counts from the
moment the engine's workers are ready (timed by wrapping the engine's ``start``) to the last
row. The loop's start-up is loading the sweep and its unbent renders. The overhead of an engine
is its time per render less the loop's (divided by the workers: ideal sharing).

Checks (exit 1 if one fails): the manifests of the local engine with 1 and 2 workers and of
Ray are equal row for row without ``timing``, and their audio files byte-identical; the plain
loop gives the same measures, flags and bytes; the sweep resumed after the kill ends equal to
the uninterrupted one; the atlas page shows one point per row without console or page errors,
and its PNG exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bench_call import cpu_name, write_section

import torchbend as tb
from torchbend.audio.render import render
from torchbend.config import BendingConfig
from torchbend.sweep import LocalPool, RayEngine
from torchbend.sweep.jobs import Setup, encode
from torchbend.sweep.measure import measure
from torchbend.sweep.run import load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers: tests/browser.py, tests/sweep/sweeps.py

from tests.browser import missing, open_page  # noqa: E402
from tests.sweep.sweeps import SOUNDS, audio_bytes, comparable  # noqa: E402

SECTION = "sweep"
WORKERS = 2
WEIGHTS = r"^(encoder|decoder)\."
"""The weights the Scale bending may target."""


def make_spec(renders: int) -> dict[str, Any]:
    """Noise on an activation and Scale on a weight of tiny_rave, ``renders`` renders drawn at
    random over the std, the seed and the target of the noise and the factor and the target of
    the scale."""
    return {
        "model": "tiny_rave",
        "inputs": [str(SOUNDS / "*.wav")],
        "base": {
            "bendings": [
                {
                    "callback": {"class": "Noise", "args": {"std": 0.1, "seed": 0}},
                    "patterns": ["decoder_1"],
                },
                {
                    "callback": {"class": "Scale", "args": {"scale": 1.0}},
                    "patterns": [r"^decoder\.0\.weight$"],
                },
            ]
        },
        "axes": {
            "bendings.0.callback.args.std": {"range": [0.005, 0.5], "log": True},
            "bendings.0.callback.args.seed": {"range": [0, 1000], "integer": True},
            "bendings.0.patterns": {"targets": "activations", "pattern": "^(encoder|decoder)_"},
            "bendings.1.callback.args.scale": {"range": [0.5, 1.5]},
            "bendings.1.patterns": {"targets": "weights", "pattern": WEIGHTS},
        },
        "sample": "random",
        "count": renders,
        "seed": 0,
        "threads": 1,
        "format": "wav",
    }


@dataclass
class Timing:
    """One way of doing the renders, timed."""

    engine: str
    workers: int
    renders: int
    wall: float
    """Seconds of the whole call."""
    startup: float
    """Seconds before the first render could start."""
    busy: float
    """Seconds from the workers' start to the last render."""
    extra: str = ""

    @property
    def rate(self) -> float:
        return self.renders / self.wall

    @property
    def steady_rate(self) -> float:
        return self.renders / self.busy


class TimedPool(LocalPool):
    """The local engine, noting when its workers are ready."""

    started = 0.0

    def start(self, setup: Setup) -> None:
        super().start(setup)
        self.started = time.perf_counter()


class TimedRay(RayEngine):
    """The Ray engine, noting when its actors are ready."""

    started = 0.0

    def start(self, setup: Setup) -> None:
        super().start(setup)
        self.started = time.perf_counter()


def plain_loop(spec_path: Path) -> tuple[Timing, dict[str, tuple[Any, Any, str]]]:
    """The renders by a bare loop in this process; each job's measures, flags and the SHA-256
    of its encoded audio (hashed outside the timed part)."""
    began = time.perf_counter()
    sweep = load(spec_path)
    unbent = sweep.render_unbent()
    jobs = list(sweep.jobs())
    bended, rate = sweep.bended, sweep.sample_rate
    method, block, fmt = sweep.spec.method, sweep.block_size, sweep.spec.format
    ready = time.perf_counter()
    busy = 0.0
    results: dict[str, tuple[Any, Any, str]] = {}
    for job in jobs:
        t0 = time.perf_counter()
        bended.reset()
        bended.bend(BendingConfig.from_dict(job.config, source=f"render {job.id}"))
        with torch.inference_mode():
            out, _ = render(bended, sweep.audio[job.input_index], rate, method, block)
        bended.reset()
        measures, flags = measure(out, rate, unbent[job.input_index])
        data = encode(out, rate, fmt)
        busy += time.perf_counter() - t0
        results[job.id] = (measures, flags, hashlib.sha256(data).hexdigest())
    wall = (ready - began) + busy
    return Timing("plain loop", 1, len(jobs), wall, ready - began, busy), results


def run_engine(spec_path: Path, out: Path, engine: TimedPool | TimedRay, label: str) -> Timing:
    last = [0.0]

    def on_row(row: dict[str, Any]) -> None:
        last[0] = time.perf_counter()

    began = time.perf_counter()
    result = tb.sweep.run(spec_path, out, engine=engine, on_row=on_row)
    wall = time.perf_counter() - began
    if result.failed or result.skipped or result.rendered != len(result.rows):
        raise SystemExit(f"{label}: unexpected result: {result}")
    workers = engine.workers
    return Timing(
        label, workers, result.rendered, wall, engine.started - began, last[0] - engine.started
    )


def mean_row_time(folder: Path) -> float:
    """Mean seconds of render + measure + encode inside the workers, from the rows' timing
    (render_s covers bending and the model, measure_s the measures and the encoding)."""
    rows = tb.sweep.read_rows(folder)
    return sum(r["timing"]["render_s"] + r["timing"]["measure_s"] for r in rows) / len(rows)


def kill_and_resume(spec_path: Path, out: Path, renders: int) -> tuple[int, int, float, int]:
    """The command killed once a third of the rows are written, then the sweep run again:
    (rows that survived, rows rendered again, seconds of the second run, rows at the kill)."""
    command = [sys.executable, "-m", "torchbend.cli", "sweep", "run", str(spec_path)]
    command += ["--out", str(out), "--workers", str(WORKERS), "--quiet"]
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL)
    manifest = out / "manifest.jsonl"
    target = max(1, renders // 3)
    seen = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if manifest.is_file():
            seen = manifest.read_bytes().count(b"\n")
            if seen >= target:
                os.killpg(process.pid, signal.SIGKILL)
                break
        time.sleep(0.01)
    process.wait()
    if process.returncode != -signal.SIGKILL:
        raise SystemExit(
            f"the command ended (code {process.returncode}) before it could be killed at "
            f"{target} rows"
        )
    began = time.perf_counter()
    result = tb.sweep.run(spec_path, out, workers=WORKERS)
    seconds = time.perf_counter() - began
    if result.skipped + result.rendered != renders or len(result.rows) != renders:
        raise SystemExit(f"resume: unexpected result: {result}")
    return result.skipped, result.rendered, seconds, seen


def check_atlas(folder: Path) -> tuple[int, int, list[str], bool, float]:
    """The atlas drawn and opened: (points drawn, rows, errors, PNG written, seconds to draw)."""
    began = time.perf_counter()
    made = tb.sweep.draw_map(folder)
    seconds = time.perf_counter() - began
    rows = len(tb.sweep.read_rows(folder))
    png = made.png is not None and made.png.is_file() and made.png.stat().st_size > 0
    why = missing()
    if why is not None:
        return 0, rows, [f"no browser: {why}"], png, seconds
    assert made.html is not None
    with open_page(made.html) as opened:
        points = opened.page.locator("#points .pt").count()
        errors = list(opened.errors)
    return points, rows, errors, png, seconds


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def signed_ms(seconds: float) -> str:
    return f"{1000 * seconds:+.1f}"


def table(timings: list[Timing]) -> list[str]:
    loop = timings[0]
    lines = [
        "| engine | workers | renders | wall s | start-up s | renders/s (wall) "
        "| renders/s (after start-up) | ms per render (wall / after start-up) "
        "| overhead vs loop, ms per render (wall / after start-up) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in timings:
        per_wall, per_busy = 1 / t.rate, 1 / t.steady_rate
        if t is loop:
            overhead = "(baseline)"
        else:
            ideal_wall, ideal_busy = 1 / (loop.rate * t.workers), 1 / (loop.steady_rate * t.workers)
            overhead = f"{signed_ms(per_wall - ideal_wall)} / {signed_ms(per_busy - ideal_busy)}"
        lines.append(
            f"| {t.engine} | {t.workers} | {t.renders} | {t.wall:.1f} | {t.startup:.1f} "
            f"| {t.rate:.1f} | {t.steady_rate:.1f} | {ms(per_wall)} / {ms(per_busy)} "
            f"| {overhead} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renders", type=int, default=510, help="renders in the sweep")
    parser.add_argument("--write", type=Path, help="a Markdown file with a 'sweep' section")
    parser.add_argument(
        "--keep", type=Path, help="an empty or new folder to keep the sweeps in (else a temp)"
    )
    args = parser.parse_args()
    if args.renders < 6:
        parser.error("--renders: at least 6")
    if args.write is not None and SECTION not in args.write.read_text():
        parser.error(f"--write: {args.write} has no '{SECTION}' section")
    began = time.perf_counter()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            parser.error(f"--keep: {args.keep} is not empty (its sweeps would be resumed)")
        args.keep.mkdir(parents=True, exist_ok=True)
        work, temporary = args.keep, None
    else:
        temporary = tempfile.TemporaryDirectory(prefix="bench_sweep_")
        work = Path(temporary.name)
    try:
        return bench(args, work, began)
    finally:
        if temporary is not None:
            temporary.cleanup()


def bench(args: argparse.Namespace, work: Path, began: float) -> int:
    import ray

    spec = make_spec(args.renders)
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=1) + "\n")
    failures: list[str] = []

    def step(text: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {text}", file=sys.stderr, flush=True)

    step(f"plain loop, {args.renders} renders")
    loop, loop_results = plain_loop(spec_path)
    timings = [loop]
    folders = {}
    for workers in (1, WORKERS):
        step(f"local engine, {workers} worker(s)")
        folder = work / f"local-{workers}"
        timings.append(run_engine(spec_path, folder, TimedPool(workers), "local"))
        folders[f"local, {workers}"] = folder
    step(f"Ray engine, {WORKERS} actors (starting a local cluster)")
    t0 = time.perf_counter()
    ray.init(
        num_cpus=WORKERS, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    ray_init = time.perf_counter() - t0
    try:
        folder = work / "ray"
        timings.append(run_engine(spec_path, folder, TimedRay(workers=WORKERS), "ray"))
        folders["ray"] = folder
    finally:
        ray.shutdown()
    print("\n".join(table(timings)))

    # the manifests and files of the three engines
    reference_key = "local, 1"
    reference_rows = comparable(folders[reference_key])
    reference_audio = audio_bytes(folders[reference_key])
    identical = len(reference_rows) == args.renders and len(reference_audio) == args.renders
    for key, folder in folders.items():
        rows, audio = comparable(folder), audio_bytes(folder)
        if rows != reference_rows or audio != reference_audio:
            identical = False
            failures.append(f"the manifest or audio of {key} differs from {reference_key}'s")
    broken = sum(1 for r in reference_rows if r["broken"])
    # the plain loop against the engine
    loop_equal = set(loop_results) == {r["id"] for r in reference_rows} and all(
        loop_results[r["id"]]
        == (r["measures"], r["flags"], hashlib.sha256(reference_audio[r["id"]]).hexdigest())
        for r in reference_rows
    )
    if not loop_equal:
        failures.append("the plain loop's measures, flags or audio differ from the engine's")

    step("the command killed at a third of the rows, then resumed")
    resumed = work / "resumed"
    survived, again, resume_seconds, at_kill = kill_and_resume(spec_path, resumed, args.renders)
    resume_equal = comparable(resumed) == comparable(folders[f"local, {WORKERS}"]) and (
        audio_bytes(resumed) == audio_bytes(folders[f"local, {WORKERS}"])
    )
    if not resume_equal:
        failures.append("the resumed sweep differs from the uninterrupted one")

    step("the atlas")
    points, rows, errors, png, atlas_seconds = check_atlas(resumed)
    if errors:
        failures.append(f"the atlas page has errors: {errors[:3]}")
    if points != rows:
        failures.append(f"the atlas draws {points} points for {rows} rows")
    if not png:
        failures.append("no atlas.png")

    inside = {key: mean_row_time(folder) for key, folder in folders.items()}
    total = time.perf_counter() - began
    yes = {True: "yes", False: "NO"}
    checks = [
        f"- identical manifests (local 1 worker, local {WORKERS} workers, Ray; rows without "
        f"`timing`, audio byte for byte): {yes[identical]}, {len(reference_rows)} rows "
        f"({broken} flagged broken, {sum(1 for r in reference_rows if r['error'])} failed)",
        f"- the plain loop gives the same measures, flags and audio bytes: {yes[loop_equal]}",
        f"- resume: the command killed with {at_kill} rows in the manifest; {survived} rows "
        f"survived, {again} rendered again ({resume_seconds:.1f} s, {WORKERS} workers); equal "
        f"to the uninterrupted sweep: {yes[resume_equal]}",
        f"- atlas: {points} points for {rows} rows, {len(errors)} errors in Chromium, "
        f"atlas.png {'written' if png else 'MISSING'} (drawn in {atlas_seconds:.1f} s)",
    ]
    loop_ms = 1000 * loop.busy / loop.renders
    notes = [
        "Time per render inside the workers (the rows' `render_s` + `measure_s`: bending, "
        f"model, measures, encoding), mean: {loop_ms:.1f} ms in the plain loop; "
        + ", ".join(f"{ms(v)} ms on {k}" for k, v in inside.items())
        + f". The local Ray cluster took {ray_init:.1f} s to start, not counted above. "
        f"Whole benchmark: {total:.0f} s.",
    ]
    print()
    print("\n".join(checks))
    print()
    print("\n".join(notes))
    command = " ".join(["python benchmarks/bench_sweep.py", *sys.argv[1:]])
    described = json.loads((folders[reference_key] / "sweep.json").read_text())
    sounds = len(described["inputs"])
    lines = [
        f"Measured by `{command}` on {cpu_name()} ({platform.machine()}, {os.cpu_count()} "
        f"cores, no GPU), torch {torch.__version__}, Ray {ray.__version__}, 1 torch thread per "
        f"worker: {args.renders} renders of tiny_rave ({-(-args.renders // sounds)} points x "
        f"{sounds} shipped sounds), sampled at random (Noise on an activation: std on a log "
        "scale, seed, target; Scale on a weight: factor, target).",
        "",
        *table(timings),
        "",
        *checks,
        "",
        *notes,
    ]
    if failures:
        print("\nFAIL:\n" + "\n".join(f"- {f}" for f in failures))
        return 1
    if args.write is not None:
        write_section(args.write, SECTION, lines)
        print(f"\nwrote the '{SECTION}' section of {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
