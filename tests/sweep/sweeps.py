"""Small sweeps of the shipped model over the shipped sounds, shared by the sweep tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torchbend as tb

SOUNDS = Path(__file__).resolve().parents[2] / "assets" / "sounds"


def small_spec(**changes: Any) -> dict[str, Any]:
    """Noise on one activation of tiny_rave: 2 strengths x 2 targets x 3 sounds = 12 renders
    (three of the shipped sounds, named: the count stays when a sound is added)."""
    spec: dict[str, Any] = {
        "model": "tiny_rave",
        "inputs": [str(SOUNDS / f"{name}.wav") for name in ("bass", "drums", "pad")],
        "base": {
            "bendings": [
                {
                    "callback": {"class": "Noise", "args": {"std": 0.1, "seed": 0}},
                    "patterns": ["decoder_1"],
                }
            ]
        },
        "axes": {
            "bendings.0.callback.args.std": {"values": [0.05, 0.3]},
            "bendings.0.patterns": {"targets": "activations", "pattern": "^decoder_[01]$"},
        },
    }
    spec.update(changes)
    return spec


def comparable(folder: str | Path) -> list[dict[str, Any]]:
    """The manifest's rows without what depends on the machine and the worker (timings)."""
    return [{k: v for k, v in row.items() if k != "timing"} for row in tb.sweep.read_rows(folder)]


def audio_bytes(folder: str | Path) -> dict[str, bytes]:
    folder = Path(folder)
    return {
        row["id"]: (folder / row["audio"]).read_bytes()
        for row in tb.sweep.read_rows(folder)
        if row["audio"]
    }


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))
    return path
