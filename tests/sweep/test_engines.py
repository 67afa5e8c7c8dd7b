"""The local engine's workers under an interrupt: SIGINT to the sweep's driver alone (what a
supervisor or a notebook sends) or to its whole process group (Ctrl-C in a terminal) stops the
workers at once, prints no traceback but one line saying how to resume, and the resumed sweep
ends as if never stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import torchbend as tb

from .paced_model import PAUSE
from .sweeps import SOUNDS, audio_bytes, comparable, small_spec, write_spec

STOP_BOUND = 20
"""Seconds an interrupted sweep may take to exit: a bound on liveness, not a timing (stopped
workers take milliseconds; the workers of the old driver blocked it for 30 s each)."""


def long_spec() -> dict[str, Any]:
    """16 renders of a 4-second sound: each result is larger than a pipe holds, so a worker
    whose result nobody reads is blocked writing it. Its model is the shipped one, paced in the
    command the test interrupts (tests/sweep/paced_model.py), so that the sweep is still running
    when the test sees its first render, however loaded the machine is."""
    spec = small_spec(inputs=[str(SOUNDS / "bass.wav")], model="tests.sweep.paced_model:tiny_rave")
    spec["axes"] = {"bendings.0.callback.args.std": {"range": [0.01, 0.3], "steps": 16}}
    return spec


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    tb.sweep.run(long_spec(), out, workers=0)
    return out


def as_from_a_shell() -> None:
    """In the started command, before it runs: SIGINT at its default, as a shell starts a
    command. A pytest-xdist worker ignores SIGINT (its controller takes Ctrl-C), and a command
    it starts inherits that: Python then never raises KeyboardInterrupt in it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads workers from /proc")
@pytest.mark.parametrize("to", ["driver", "group"])
def test_an_interrupted_sweep_stops_its_workers_says_how_to_resume_and_resumes(
    to: str, uninterrupted: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "spec.json", long_spec())
    out = tmp_path / "out"
    command = [sys.executable, "-m", "torchbend.cli", "sweep", "run", str(spec), "--out", str(out)]
    root = str(Path(__file__).resolve().parents[2])  # tests.sweep.paced_model, a user's module
    env = {**os.environ, "PYTHONPATH": root, PAUSE: "0.02"}  # about 0.5 s a render
    process = subprocess.Popen(
        [*command, "--workers", "2", "--quiet"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own group, as a shell gives a command
        preexec_fn=as_from_a_shell,
    )
    manifest = out / "manifest.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if manifest.is_file() and manifest.read_text().count("\n") >= 1:
            break
        time.sleep(0.01)
    workers = children(process.pid)
    if to == "driver":
        os.kill(process.pid, signal.SIGINT)
    else:
        os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=STOP_BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the sweep took more than {STOP_BOUND} s to stop after SIGINT to the {to}")
    assert process.returncode == 130, err
    assert len(workers) == 2 and not any(alive(pid) for pid in workers)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    line = err.strip()
    assert "\n" not in line
    assert re.fullmatch(
        rf"torchbend sweep run: stopped with \d+ of 16 renders done in {re.escape(str(out))}; "
        "run the same command again to resume",
        line,
    ), line
    result = tb.sweep.run(spec, out, workers=0)
    assert result.rendered + result.skipped == 16 and result.rendered > 0
    assert comparable(out) == comparable(uninterrupted)
    assert audio_bytes(out) == audio_bytes(uninterrupted)
