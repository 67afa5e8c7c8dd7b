"""Sweeps over audio models built from public libraries (asteroid-filterbanks, nnAudio), named
``module:factory`` as a user names their own: rendered in one pass (they do not stream), the
same in this process and in worker processes, the wrapped weights never changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import torchbend as tb
from torchbend.sweep.run import load

from .sweeps import SOUNDS, audio_bytes, comparable

pytest.importorskip("asteroid_filterbanks")
pytest.importorskip("nnAudio")

SPECS: dict[str, dict[str, Any]] = {
    "asteroid separator, activations": {
        "model": "tests.sweep.third_party:separator",
        "inputs": [str(SOUNDS / "bass.wav"), str(SOUNDS / "drums.wav")],
        "base": {
            "bendings": [
                {"callback": {"class": "Scale", "args": {"scale": 1.0}}, "patterns": ["x"]}
            ]
        },
        "axes": {
            "bendings.0.patterns": {"targets": "activations", "pattern": "^masker_[02]$"},
            "bendings.0.callback.args.scale": {"values": [0.25, 3.0]},
        },
    },
    "nnAudio STFT mask, weights": {
        "model": "tests.sweep.third_party:stft_mask",
        "inputs": [str(SOUNDS / "pad.wav")],
        "base": {
            "bendings": [
                {"callback": {"class": "Noise", "args": {"std": 0.1, "seed": 0}}, "patterns": ["x"]}
            ]
        },
        "axes": {
            "bendings.0.patterns": {"targets": "weights", "pattern": "mask"},
            "bendings.0.callback.args.std": {"values": [0.05, 0.5]},
        },
    },
}


@pytest.mark.parametrize("name", SPECS)
def test_third_party_models_sweep_alike_in_any_engine(name: str, tmp_path: Path) -> None:
    spec = SPECS[name]
    sweep = load(tb.sweep.read_spec(spec))
    assert sweep.block_size is None  # they do not stream: one pass over each file
    factory = getattr(__import__("tests.sweep.third_party", fromlist=["x"]), spec["model"][24:])
    fresh = factory().state_dict()
    in_process = tb.sweep.run(spec, tmp_path / "in_process", workers=0)
    pool = tb.sweep.run(spec, tmp_path / "pool", workers=2)
    assert len(in_process.rows) == sweep.renders >= 4
    assert in_process.failed == 0 and pool.failed == 0
    assert comparable(tmp_path / "pool") == comparable(tmp_path / "in_process")
    assert audio_bytes(tmp_path / "pool") == audio_bytes(tmp_path / "in_process")
    rows = in_process.rows
    assert all(row["seconds"] == 4.0 for row in rows)  # the inputs' own length
    assert not any(row["flags"]["unchanged"] for row in rows)
    assert len({row["measures"]["distance"] for row in rows}) == len(rows)
    # the sweep's own model (bent by its checks, then reset) is the factory's, bit for bit
    for key, value in sweep.bended.module.state_dict().items():
        assert torch.equal(value, fresh[key]), key
