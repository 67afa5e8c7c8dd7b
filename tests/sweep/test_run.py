"""Running sweeps: renders, manifests, resuming after a kill, the engines (a local process pool
and a real local Ray cluster), workers killed mid-sweep, and the command against the API."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import soundfile
import torch

import torchbend as tb
from tests.browser import needs_browser, open_page
from tests.command import in_process
from torchbend.audio.render import STREAM_BLOCK, render, streams, trace_audio
from torchbend.audio.safety import FILE_CEILING
from torchbend.errors import SweepError
from torchbend.sweep import LocalPool, RayEngine

from .sweeps import SOUNDS, audio_bytes, comparable, small_spec, write_spec


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small sweep rendered in this process: what every engine must give."""
    out = tmp_path_factory.mktemp("reference")
    tb.sweep.run(small_spec(), out, workers=0)
    return out


def test_a_sweep_writes_a_render_and_a_row_for_each_point_and_input(reference: Path) -> None:
    rows = tb.sweep.read_rows(reference)
    assert len(rows) == 12
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    for row in rows:
        data, rate = soundfile.read(reference / row["audio"], dtype="float32")
        source = soundfile.info(str(SOUNDS / Path(row["input"]).name))
        assert rate == 44100 and len(data) == source.frames  # exact length
        assert row["error"] is None and set(row["measures"]) >= {"distance", "loudness_lufs"}
        assert set(row["flags"]) == {"nonfinite", "silent", "clipping", "dc", "unchanged"}
        assert not row["flags"]["unchanged"]
    described = json.loads((reference / "sweep.json").read_text())
    assert [Path(i).name for i in described["inputs"]] == ["bass.wav", "drums.wav", "pad.wav"]
    assert all((reference / u).is_file() for u in described["unbent"])
    # a stronger noise moves the render further from the unbent one
    by_point: dict[int, float] = {}
    for row in rows:
        by_point[row["point"]] = by_point.get(row["point"], 0.0) + row["measures"]["distance"]
    assert by_point[2] > by_point[0] and by_point[3] > by_point[1]


def test_any_row_renders_again_from_its_configuration_in_python(reference: Path) -> None:
    row = tb.sweep.read_rows(reference)[10]
    bended = tb.BendedModule(tb.models.load("tiny_rave"))
    streams(bended.module)
    trace_audio(bended, "forward", torch.zeros(1, 1, STREAM_BLOCK))
    bended.bend(tb.sweep.row_config(row))
    audio, rate = tb.audio.load(SOUNDS / Path(row["input"]).name, sample_rate=44100, mono=True)
    torch.set_num_threads(1)
    with torch.inference_mode():
        files_stage = tb.audio.Safety(rate, ceiling=FILE_CEILING)  # a sweep's default
        out, _ = render(bended, audio, rate, "forward", STREAM_BLOCK, safety=files_stage)
    again = out.clamp(-1, 1).numpy()[0]
    written, _ = soundfile.read(reference / row["audio"], dtype="float32")
    assert abs(again - written).max() <= 1 / 32768  # 16-bit file


def test_renders_are_deterministic_and_in_process_equals_a_pool_that_loses_a_worker(
    reference: Path, tmp_path: Path
) -> None:
    engine = LocalPool(workers=2)
    killed: list[int] = []

    def kill_one(row: dict[str, Any]) -> None:
        if not killed:
            killed.append(engine.pids()[0])
            os.kill(killed[0], signal.SIGKILL)

    result = tb.sweep.run(small_spec(), tmp_path / "pool", engine=engine, on_row=kill_one)
    assert killed and engine.restarts == 1
    assert result.rendered == 12 and result.failed == 0
    assert comparable(tmp_path / "pool") == comparable(reference)
    assert audio_bytes(tmp_path / "pool") == audio_bytes(reference)
    assert (tmp_path / "pool" / "manifest.jsonl").read_text().count("\n") == 12


def test_a_render_that_fails_is_a_row_that_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torchbend.sweep.jobs as rendering

    original = rendering.run_audio

    def fails_on_drums(bended: Any, setup: Any, audio: torch.Tensor) -> torch.Tensor:
        if audio.shape[-1] == 176400 and float(audio.abs().sum()) == float(drums.abs().sum()):
            raise RuntimeError("the model broke")
        return original(bended, setup, audio)

    drums = tb.audio.load(SOUNDS / "drums.wav", sample_rate=44100, mono=True)[0]
    monkeypatch.setattr(rendering, "run_audio", fails_on_drums)
    result = tb.sweep.run(small_spec(), tmp_path / "out", workers=0)
    failed = [r for r in result.rows if r["error"]]
    assert [r["input_index"] for r in failed] == [1, 1, 1, 1]
    assert failed[0]["error"] == "RuntimeError: the model broke"
    assert failed[0]["audio"] is None and failed[0]["broken"] is True
    assert result.failed == 4 and len(result.rows) == 12


def test_a_sweep_resumes_after_a_kill_and_ends_as_if_never_stopped(
    reference: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "spec.json", small_spec())
    out = tmp_path / "out"
    command = [sys.executable, "-m", "torchbend.cli", "sweep", "run", str(spec), "--out", str(out)]
    process = subprocess.Popen([*command, "--workers", "0", "--quiet"], start_new_session=True)
    manifest = out / "manifest.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if manifest.is_file() and manifest.read_text().count("\n") >= 3:
            os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the sweep ended before it could be killed"
    done = manifest.read_text().count("\n")
    assert 3 <= done < 12
    with open(manifest, "a") as f:  # as if the kill cut a row short
        f.write('{"id": "00003-02-pa')
    result = tb.sweep.run(spec, out, workers=0)
    assert result.skipped == done and result.rendered == 12 - done
    assert comparable(out) == comparable(reference)
    assert audio_bytes(out) == audio_bytes(reference)
    again = tb.sweep.run(spec, out, workers=0)
    assert (again.rendered, again.skipped) == (0, 12)
    # a render whose file went missing is rendered again
    (out / tb.sweep.read_rows(out)[4]["audio"]).unlink()
    assert tb.sweep.run(spec, out, workers=0).rendered == 1
    assert audio_bytes(out) == audio_bytes(reference)


def test_a_resume_renders_again_the_files_damaged_from_outside(
    reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    rows = tb.sweep.read_rows(out)
    cut, garbled = out / rows[4]["audio"], out / rows[7]["audio"]
    with open(cut, "r+b") as f:  # a copy or a download cut short: the header is left as it was
        f.truncate(cut.stat().st_size // 3)
    garbled.write_bytes(b"not audio" * 100)
    unbent = out / json.loads((out / "sweep.json").read_text())["unbent"][1]
    with open(unbent, "r+b") as f:
        f.truncate(1000)
    result = tb.sweep.run(small_spec(), out, workers=0)
    assert (result.rendered, result.skipped) == (2, 10)
    assert audio_bytes(out) == audio_bytes(reference)
    assert unbent.read_bytes() == (reference / unbent.relative_to(out)).read_bytes()
    assert comparable(out) == comparable(reference)


def test_callbacks_without_a_seed_render_the_same_bits_each_time(tmp_path: Path) -> None:
    spec = small_spec()
    del spec["base"]["bendings"][0]["callback"]["args"]["seed"]  # Noise from torch's generator
    spec["axes"]["bendings.0.callback.args.std"] = {"values": [0.05]}
    torch.manual_seed(1)
    tb.sweep.run(spec, tmp_path / "a", workers=0)
    torch.manual_seed(2)
    tb.sweep.run(spec, tmp_path / "b", workers=0)
    assert audio_bytes(tmp_path / "a") == audio_bytes(tmp_path / "b")
    rows = comparable(tmp_path / "a")
    assert rows == comparable(tmp_path / "b") and not any(r["flags"]["unchanged"] for r in rows)
    assert len({r["measures"]["distance"] for r in rows}) == len(rows)  # each job its own draw


def test_folders_that_are_not_this_sweeps_are_refused(reference: Path, tmp_path: Path) -> None:
    other = small_spec(seed=1)
    with pytest.raises(SweepError, match=r"holds another sweep .*seed.* give another --out"):
        tb.sweep.run(other, reference, workers=0)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("x")
    with pytest.raises(SweepError, match=r"is not empty and holds no sweep"):
        tb.sweep.run(small_spec(), tmp_path / "full", workers=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SweepError, match=r"is a file; give a folder"):
        tb.sweep.run(small_spec(), tmp_path / "file", workers=0)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.jsonl").write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(SweepError, match=r"line 2: not a manifest row"):
        tb.sweep.read_rows(broken)
    with pytest.raises(SweepError, match=r"holds no manifest.jsonl"):
        tb.sweep.read_rows(tmp_path)


def test_the_progress_line_shows_the_count_and_the_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tb.sweep.run(small_spec(), tmp_path / "out", workers=0, progress=True)
    err = capsys.readouterr().err
    assert "12/12" in err and "renders/s" in err and "0 failed" in err


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchbend.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_the_command_gives_what_the_api_gives(reference: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "spec.json", small_spec())
    planned = in_process("sweep", "plan", str(spec))
    assert planned.returncode == 0, planned.stderr
    assert "4 point(s) x 3 input(s) = 12 renders" in planned.stdout
    assert "disk: about" in planned.stdout and "ms per render" in planned.stdout
    out = tmp_path / "out"
    ran = run_cli("sweep", "run", str(spec), "--out", str(out), "--workers", "2")
    assert ran.returncode == 0, ran.stderr
    assert "12 renders in" in ran.stdout
    assert "12/12" not in ran.stderr  # stderr is a pipe here, not a terminal: no progress bar
    assert comparable(out) == comparable(reference)
    assert audio_bytes(out) == audio_bytes(reference)
    best = in_process("sweep", "best", str(out), "--by", "distance", "--top", "3", "--json")
    assert best.returncode == 0, best.stderr
    chosen = [json.loads(line) for line in best.stdout.splitlines()]
    api = tb.sweep.best(reference, by="distance", top=3)
    assert [r["id"] for r in chosen] == [r["id"] for r in api]
    distances = [r["measures"]["distance"] for r in tb.sweep.read_rows(out) if not r["broken"]]
    assert chosen[0]["measures"]["distance"] == max(distances)
    copied = in_process(
        "sweep",
        "best",
        str(out),
        "--by",
        "loudness_lufs",
        "--lowest",
        "--top",
        "2",
        "--copy",
        str(tmp_path / "picked"),
    )
    assert copied.returncode == 0, copied.stderr
    quietest = tb.sweep.best(out, by="loudness_lufs", lowest=True, top=2)
    assert sorted(p.name for p in (tmp_path / "picked").iterdir()) == [
        f"{i}_{Path(r['audio']).name}" for i, r in enumerate(quietest, 1)
    ]
    mapped = in_process("sweep", "map", str(out))
    assert mapped.returncode == 0, mapped.stderr
    assert (out / "atlas.png").is_file() and (out / "atlas.html").is_file()
    assert "PC1" in mapped.stdout


def test_the_plan_counts_loading_the_model_and_starting_the_workers() -> None:
    planned = tb.sweep.plan(small_spec(inputs=[str(SOUNDS / "bass.wav")]), workers=3)
    assert planned.setup_seconds > 0 and planned.worker_seconds > 0  # both measured
    assert planned.seconds_per_render is not None
    waves = math.ceil(3 / planned.cores)
    renders = planned.seconds_per_render * planned.renders / min(3, planned.cores)
    assert planned.estimate_seconds == pytest.approx(
        planned.setup_seconds + waves * planned.worker_seconds + renders
    )
    assert "to load the model" in str(planned) and "to start the workers" in str(planned)
    # three workers on one core start one after the other
    assert dataclasses.replace(planned, cores=1).startup_seconds == pytest.approx(
        3 * planned.worker_seconds
    )


def test_a_plan_too_large_is_one_line_before_anything_is_built(tmp_path: Path) -> None:
    spec = small_spec()
    spec["axes"] = {"bendings.0.callback.args.std": {"range": [0, 1], "steps": 10**8}}
    planned = in_process("sweep", "plan", str(write_spec(tmp_path / "spec.json", spec)))
    assert planned.returncode == 2
    assert planned.stderr.startswith("torchbend sweep plan: error: ")
    assert len(planned.stderr.strip().splitlines()) == 1
    assert "100,000,000 renders" in planned.stderr and "1,000,000" in planned.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["sweep", "run", "nowhere.json", "--out", "x"],
            "torchbend sweep run: error: no sweep specification",
        ),
        (["sweep", "best", ".", "--by", "distance"], "holds no manifest.jsonl"),
        (["sweep", "run", "s.json", "--out", "x", "--engine", "spark"], "invalid choice: 'spark'"),
        (["sweep", "run", "s.json", "--out", "x", "--workers", "-1"], "0 or more"),
        (["sweep", "best", ".", "--top", "0"], "1 or more"),
        (["sweep"], "the following arguments are required: step"),
    ],
)
def test_the_command_refuses_bad_arguments_in_one_line(
    args: list[str], words: str, tmp_path: Path
) -> None:
    result = in_process(*args, cwd=tmp_path)  # the command as started: the test above
    assert result.returncode == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_best_refuses_unknown_measures_and_skips_broken_renders(reference: Path) -> None:
    with pytest.raises(SweepError, match=r"no measure 'distanse'.*did you mean 'distance'"):
        tb.sweep.best(reference, by="distanse")
    rows = tb.sweep.best(reference, by="peak_dbfs", top=100, broken=True)
    assert len(rows) == 12
    kept = tb.sweep.best(reference, by="peak_dbfs", top=100)
    assert len(kept) == sum(1 for r in rows if not r["broken"])


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """A real local Ray cluster with two CPUs, for this module's Ray tests."""
    ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray: pip install ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_the_ray_engine_renders_what_the_local_engine_renders_and_survives_a_dead_actor(
    ray_cluster: Any, reference: Path, tmp_path: Path
) -> None:
    engine = RayEngine(workers=2)
    killed: list[int] = []

    def kill_one(row: dict[str, Any]) -> None:
        if len(killed) == 0 and row["id"] >= "00001":
            killed.append(engine.pids()[0])
            os.kill(killed[0], signal.SIGKILL)

    result = tb.sweep.run(small_spec(), tmp_path / "ray", engine=engine, on_row=kill_one)
    assert killed and engine.restarts >= 1
    assert result.rendered == 12 and result.failed == 0
    assert comparable(tmp_path / "ray") == comparable(reference)
    assert audio_bytes(tmp_path / "ray") == audio_bytes(reference)
    assert ray_cluster.is_initialized()  # a cluster the engine did not start is left running


@needs_browser
def test_the_atlas_of_a_real_sweep_opens_in_a_browser_and_plays_its_renders(
    reference: Path,
) -> None:
    atlas = tb.sweep.map(str(reference))
    rows = tb.sweep.read_rows(reference)
    assert atlas.png is not None and atlas.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(atlas.coords) == {r["id"] for r in rows}
    assert atlas.html is not None
    with open_page(atlas.html) as opened:
        page = opened.page
        assert page.locator("#points .pt").count() == len(rows)
        box = page.locator('#points [data-i="5"]').bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function("document.getElementById('player').readyState >= 1")
        src = page.evaluate("document.getElementById('player').src")
        assert src == (reference / rows[5]["audio"]).resolve().as_uri()
        duration = page.evaluate("document.getElementById('player').duration")
        assert duration == pytest.approx(rows[5]["seconds"], abs=2e-3)
        assert opened.errors == []


def test_renders_are_written_through_the_files_safety_stage_unless_asked_raw(
    tmp_path: Path,
) -> None:
    """A gain that drives the model past full scale: by default the file is limited below
    -0.3 dBFS (nothing clips, nothing is flagged) and the row says what came in; with
    ``"safety": false`` the raw render clips and is flagged broken, so ``best`` leaves it out."""
    spec = small_spec(
        inputs=[str(SOUNDS / "drums.wav")],
        base={
            "bendings": [
                {"callback": {"class": "Scale", "args": {"scale": 1}}, "patterns": ["decoder_2$"]}
            ]
        },
        axes={"bendings.0.callback.args.scale": {"values": [1.0, 16.0]}},
    )
    limited = tb.sweep.run(spec, tmp_path / "limited", engine="local", workers=0)
    raw = tb.sweep.run({**spec, "safety": False}, tmp_path / "raw", engine="local", workers=0)
    loud_limited = next(r for r in limited.rows if r["point"] == 1)
    loud_raw = next(r for r in raw.rows if r["point"] == 1)
    data, _ = soundfile.read(tmp_path / "limited" / loud_limited["audio"], dtype="float32")
    assert abs(data).max() < 10 ** (-0.2 / 20)  # below the ceiling, to 16-bit rounding
    assert not loud_limited["broken"] and not loud_limited["flags"]["clipping"]
    assert loud_limited["safety"]["peak_in_dbfs"] > 0 and loud_limited["safety"]["limited_s"] > 0
    assert loud_raw["flags"]["clipping"] and loud_raw["safety"] is None
    assert [r["point"] for r in tb.sweep.best(tmp_path / "raw", by="distance")] == [0]
