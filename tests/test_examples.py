"""The gallery in examples/ runs as written: each script, in its fast mode, exits 0 and writes."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))
TIMEOUT = 300  # seconds per script; the smoke modes take a few


def command(script: Path, out: Path) -> list[str]:
    return [sys.executable, str(script), "--out", str(out), "--smoke"]


def run(script: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # One thread per script: the scripts run side by side, one per core.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run(
        command(script, out),
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> dict[str, tuple[Path, Future]]:
    """Start the selected scripts at once, as many at a time as there are cores."""
    selected = [
        item.callspec.params["script"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_example" and hasattr(item, "callspec")
    ]
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1))
    started = {}
    for script in selected:
        out = tmp_path_factory.mktemp(script.stem)
        started[script.name] = (out, pool.submit(run, script, out))
    yield started
    pool.shutdown(wait=True, cancel_futures=True)


def test_gallery_is_there():
    assert len(SCRIPTS) >= 10, [s.name for s in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_example(script: Path, runs) -> None:
    out, future = runs[script.name]
    result = future.result()
    tail = f"\n--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{script.name} exited {result.returncode}{tail}"
    written = [p for p in out.rglob("*") if p.is_file()]
    assert written, f"{script.name} wrote nothing to {out}{tail}"


LISTENED = [s for s in SCRIPTS if s.name[:2] in {"02", "03", "04", "05", "06", "08", "15"}]
"""The examples that write renders to listen to."""


@pytest.mark.parametrize("script", LISTENED, ids=[s.stem for s in LISTENED])
def test_examples_write_renders_to_listen_to(script: Path, runs, tmp_path) -> None:
    """Renders go through the safety stage, which says what it did, and no written sample
    sits at full scale (example 08's bending clipped a fifth of its stereo renders, and
    02, 03 and 04 clipped a few samples, when they hard-clipped instead)."""
    import soundfile as sf

    if script.name in runs:
        out, future = runs[script.name]
        result = future.result()
    else:  # run alone
        out, result = tmp_path, run(script, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    written = sorted(out.rglob("*.wav"))
    assert written
    for path in written:
        data = sf.read(str(path), dtype="int16")[0].astype("int32")
        assert int((abs(data) >= 32767).sum()) == 0, f"{path.name} clips"
    assert "safety: " in result.stdout
