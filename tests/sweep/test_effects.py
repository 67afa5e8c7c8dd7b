"""Descriptor effects of a sweep's renders: each the change of a perceptual descriptor against
the unbent render of the same input, in the manifest, ranked by, and colouring the atlas."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import torch

import torchbend as tb
from tests.browser import needs_browser, open_page
from tests.command import in_process
from torchbend.audio.perceptual import NAMES, change, perceive
from torchbend.errors import SweepError
from torchbend.sweep.effects import EFFECTS, describe, effects
from torchbend.sweep.jobs import run_audio
from torchbend.sweep.space import load

from .sweeps import SOUNDS

STRENGTHS = [-1.0, 0.0, 1.0]
"""Steer on TinyDDSP's named latent channels (``getitem_6``: pitch, loudness, brightness,
noisiness), along the brightness alone: 0 is the unbent model, 1 a brighter render (the
synthesizer's spectral tilt moves up an octave), -1 a darker one."""


def excerpt_spec(folder: Path, **changes: Any) -> dict[str, Any]:
    """TinyDDSP steered along its brightness at :data:`STRENGTHS`, over a second of pad and half a
    second of drums (excerpts written into ``folder``)."""
    inputs = []
    for name, seconds in (("pad", 1.0), ("drums", 0.5)):
        data, rate = soundfile.read(SOUNDS / f"{name}.wav", dtype="float32")
        path = folder / f"{name}.wav"
        soundfile.write(path, data[: int(seconds * rate)], rate)
        inputs.append(str(path))
    spec: dict[str, Any] = {
        "model": "tiny_ddsp",
        "inputs": inputs,
        "base": {
            "bendings": [
                {
                    "callback": {
                        "class": "Steer",
                        "args": {"vector": [0.0, 0.0, 1.0, 0.0], "strength": 0.0, "rms": 0.5},
                    },
                    "patterns": ["getitem_6"],
                }
            ]
        },
        "axes": {"bendings.0.callback.args.strength": {"values": STRENGTHS}},
    }
    spec.update(changes)
    return spec


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("effects")
    spec = excerpt_spec(folder)
    tb.sweep.run(spec, folder / "out", workers=0)
    return spec, folder / "out"


def strength_of(row: dict[str, Any]) -> float:
    return float(row["axes"]["bendings.0.callback.args.strength"])


def test_each_effect_is_the_change_of_the_descriptors_from_the_unbent_render(swept) -> None:
    spec, out = swept
    rows = tb.sweep.read_rows(out)
    assert len(rows) == len(STRENGTHS) * 2
    sweep = load(spec)
    unbent = sweep.render_unbent()
    setup = sweep.setup(unbent)
    for row in rows:
        assert list(row["effects"]) == list(EFFECTS)
        sweep.bended.bend(tb.sweep.row_config(row))
        torch.set_num_threads(1)
        with torch.inference_mode():
            render, _ = run_audio(sweep.bended, setup, sweep.audio[row["input_index"]])
        sweep.bended.reset()
        before = perceive(unbent[row["input_index"]].double().mean(0), setup.sample_rate)
        after = perceive(render.double().mean(0), setup.sample_rate)
        for name in NAMES:
            expected = change(name, before[name], after[name])
            got = row["effects"][f"effect_{name}"]
            if math.isnan(expected):
                assert got is None, (row["id"], name)
            else:
                assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), (row["id"], name)


def test_the_unbent_bending_changes_nothing_and_steering_brightens(swept) -> None:
    _, out = swept
    rows = tb.sweep.read_rows(out)
    for row in rows:
        if strength_of(row) == 0.0:
            assert row["flags"]["unchanged"]
            assert row["effects"]["effect_brightness"] == 0.0
            assert all(v in (0.0, None) for v in row["effects"].values())
        else:  # the brightness moves, the loudness stays within a step
            assert abs(row["effects"]["effect_loudness"]) < 0.5, row["id"]
    for index in (0, 1):
        by_strength = {strength_of(r): r for r in rows if r["input_index"] == index}
        brightness = [by_strength[s]["effects"]["effect_brightness"] for s in STRENGTHS]
        assert brightness[0] < -0.25 and brightness[2] > 0.25, brightness
        # the effect agrees with the centroid the measures read
        centroids = [by_strength[s]["measures"]["centroid_hz"] for s in STRENGTHS]
        assert centroids == sorted(centroids)


def test_undefined_effects_are_null_in_the_manifest(swept) -> None:
    _, out = swept
    text = (out / "manifest.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    for line in text.splitlines():  # strict JSON: no constant such as NaN
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the manifest"))
    rows = tb.sweep.read_rows(out)
    assert any(v is None for r in rows for v in r["effects"].values())  # no pitch on drums


def test_the_unbent_renders_are_described_once_per_input(swept, monkeypatch) -> None:
    spec, _ = swept
    calls: list[int] = []
    original = describe

    def counted(audio: torch.Tensor, rate: int) -> Any:
        calls.append(audio.shape[-1])
        return original(audio, rate)

    monkeypatch.setattr("torchbend.sweep.space.describe", counted)
    sweep = load(spec)
    setup = sweep.setup(sweep.render_unbent())
    assert len(calls) == 2 and len(setup.described or ()) == 2


def test_effects_can_be_left_out(tmp_path: Path) -> None:
    spec = excerpt_spec(tmp_path, effects=False)
    spec["axes"] = {"bendings.0.callback.args.strength": {"values": [1.0]}}
    spec["inputs"] = spec["inputs"][1:]
    rows = tb.sweep.run(spec, tmp_path / "out", workers=0).rows
    assert len(rows) == 1 and rows[0]["effects"] == {} and rows[0]["measures"]
    with pytest.raises(tb.TorchbendError, match="effects"):
        tb.sweep.read_spec({**spec, "effects": "no"})


def test_effects_of_short_silent_and_stereo_audio() -> None:
    rate = 16000
    t = torch.arange(rate // 2) / rate
    tone = 0.1 * torch.sin(2 * math.pi * 440 * t)
    unbent = describe(tone, rate)
    assert effects(tone[:100], rate, unbent) == dict.fromkeys(EFFECTS)  # too short to read
    silent = effects(torch.zeros_like(tone), rate, unbent)
    assert silent["effect_brightness"] is None and silent["effect_loudness"] is None
    stereo = torch.stack([tone, torch.full_like(tone, math.nan)])  # a NaN channel reads as 0
    moved = effects(stereo, rate, unbent)
    assert moved["effect_loudness"] == pytest.approx(-6.02, abs=0.05)  # half of the mix
    assert moved["effect_pitch"] == pytest.approx(0.0, abs=0.01)


def test_best_ranks_by_an_effect(swept) -> None:
    _, out = swept
    ranked = tb.sweep.best(out, by="effect_brightness", top=2)
    assert [strength_of(r) for r in ranked] == [1.0, 1.0]
    with pytest.raises(SweepError, match="did you mean 'effect_brightness'"):
        tb.sweep.best(out, by="effect_brightnes")


def page_data(path: Path) -> dict[str, Any]:
    text = path.read_text()
    found = re.search(r'<script type="application/json" id="atlas-data">(.*?)</script>', text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_the_atlas_is_coloured_by_an_effect(swept) -> None:
    _, out = swept
    rows = tb.sweep.read_rows(out)
    result = tb.sweep.draw_map(out, colour="effect_brightness")
    assert result.png is not None and result.png.read_bytes()[:4] == b"\x89PNG"
    data = page_data(out / "atlas.html")
    assert data["colour"] == "effect_brightness" and data["effects"] == list(EFFECTS[:2]) + [
        n for n in EFFECTS[2:] if any(r["effects"][n] is not None for r in rows)
    ]
    j = data["measures"].index("effect_brightness")
    shown = [r["m"][j] for r in data["rows"]]
    expected = [r["effects"]["effect_brightness"] for r in rows]
    assert np.allclose(shown, expected, rtol=1e-5)
    assert set(result.loadings) <= set(tb.sweep.read_rows(out)[0]["measures"])  # not placed
    with pytest.raises(SweepError, match="did you mean 'effect_brightness'"):
        tb.sweep.draw_map(out, png=False, colour="effect_brightnes")


def test_the_command_colours_the_atlas_and_ranks_by_an_effect(swept) -> None:
    _, out = swept
    done = in_process("sweep", "map", str(out), "--no-png", "--colour", "effect_loudness")
    assert done.returncode == 0, done.stderr
    assert page_data(out / "atlas.html")["colour"] == "effect_loudness"
    done = in_process("sweep", "best", str(out), "--by", "effect_brightness", "--top", "1")
    assert done.returncode == 0 and "Steer(" in done.stdout and "strength=1" in done.stdout


@needs_browser
def test_the_page_draws_effects_blue_to_red(swept) -> None:
    _, out = swept
    rows = tb.sweep.read_rows(out)
    path = tb.sweep.draw_map(out, png=False, colour="effect_brightness").html
    brightness = [r["effects"]["effect_brightness"] for r in rows]
    brightest, darkest = int(np.argmax(brightness)), int(np.argmin(brightness))
    neutral = next(i for i, r in enumerate(rows) if strength_of(r) == 0.0)
    with open_page(path) as opened:
        page = opened.page
        assert page.text_content("#legend").startswith("colour: effect_brightness")

        def fill(i: int) -> tuple[int, int, int]:
            colour = page.get_attribute(f'#points [data-i="{i}"]', "fill")
            return tuple(int(colour[k : k + 2], 16) for k in (1, 3, 5))  # type: ignore

        red, _, blue = fill(brightest)
        assert red > blue + 20  # more: red
        red, _, blue = fill(darkest)
        assert blue > red + 60  # less: blue (the most, the deepest)
        assert min(fill(neutral)) > 200  # no change: white
        page.mouse.move(*_centre(page, brightest))
        page.locator("#tip").wait_for(state="visible")
        tip = page.inner_text("#tip").lower()  # the sections are set in capitals
        assert "effects (perceptible steps)" in tip and "effect_brightness\t+" in tip
        page.select_option("#colour", "distance")
        assert page.text_content("#legend").startswith("colour: distance")
        assert opened.errors == []


def _centre(page: Any, index: int) -> tuple[float, float]:
    box = page.locator(f'#points [data-i="{index}"]').bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
