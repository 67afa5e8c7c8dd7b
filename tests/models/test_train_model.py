"""Smoke test of scripts/make_assets.py and scripts/train_model.py: two steps, then load."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from torchbend.models import TinyDDSP, TinyRave, load

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script: str, *argv: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(SCRIPTS / script), run_name="__main__")


@pytest.mark.parametrize(("name", "kind"), [("tiny_rave", TinyRave), ("tiny_ddsp", TinyDDSP)])
def test_make_assets_then_train(
    name: str,
    kind: type,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sounds, out = tmp_path / "sounds", tmp_path / "model.safetensors"
    run("make_assets.py", "--out", str(sounds), "--seconds", "1", monkeypatch=monkeypatch)
    assert sorted(p.name for p in sounds.iterdir()) == [
        "bass.wav",
        "cello.wav",
        "drums.wav",
        "pad.wav",
        "voice.wav",
    ]
    threads = torch.get_num_threads()
    try:
        run(
            "train_model.py",
            *("--sounds", str(sounds), "--out", str(out), "--steps", "2", "--time-limit", "60"),
            *("--holdout", "0.25", "--crop", "4096", "--batch", "2", "--threads", "1"),
            *("--seconds", "0.5", "--model", name),
            monkeypatch=monkeypatch,
        )
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "untrained: held-out error" in printed
    assert "trained (2 steps" in printed
    with safe_open(str(out), framework="pt") as f:
        assert f.metadata()["steps"] == "2"
    assert isinstance(load(name, weights=out), kind)
