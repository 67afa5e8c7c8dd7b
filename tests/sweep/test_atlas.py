"""Tests of the atlas: the PCA map, the picture, and the page, driven in a real Chromium."""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.browser import needs_browser, open_page
from torchbend.sweep.atlas import atlas

soundfile = pytest.importorskip("soundfile")
needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (torchbend[plot])"
)

RATE = 16000
INPUTS = ["assets/sounds/bass.wav", "assets/sounds/voice.wav"]
MEASURES = ["loudness_lufs", "peak_dbfs", "rms_dbfs", "centroid_hz", "flatness", "distance"]
HOSTILE = "boom </script><script>alert(1)</script> <!-- & done"
"""An error message that would end the data's <script> element if it were not escaped."""


def make_rows(
    count: int, folder: Path | None = None, *, broken_every: int = 7, failed_every: int = 11
) -> list[dict[str, Any]]:
    """Manifest rows of a synthetic sweep; with ``folder``, real WAV files for them there.

    Renders alternate between two inputs; every ``broken_every``-th one is flagged (clipping),
    every ``failed_every``-th one failed (no audio, no measures). Only the first input has an
    unbent render.
    """
    rng = np.random.default_rng(0)
    if folder is not None:
        (folder / "renders").mkdir(parents=True, exist_ok=True)
        (folder / "unbent").mkdir(exist_ok=True)
        tone = 0.1 * np.sin(np.linspace(0, 200 * np.pi, RATE // 4)).astype(np.float32)
        soundfile.write(folder / "unbent" / "00-bass.wav", tone, RATE)
    rows = []
    for i in range(count):
        k = i % len(INPUTS)
        stem = Path(INPUTS[k]).stem
        std = round(0.1 * (1 + i % 5), 2)
        pattern = ["^decoder_1$", "^encoder_2$"][(i // 2) % 2]
        row_id = f"{i:05d}-{k:02d}-{stem}"
        failed = failed_every > 0 and i % failed_every == failed_every - 1
        broken = not failed and broken_every > 0 and i % broken_every == broken_every - 1
        level = rng.normal(-20, 4)
        measures = {
            "loudness_lufs": level,
            "peak_dbfs": level + 14 + rng.normal(0, 1),
            "rms_dbfs": level + 3 + rng.normal(0, 0.5),
            "dc": 0.0,
            "centroid_hz": float(rng.uniform(300, 4000)),
            "flatness": float(rng.uniform(0, 0.6)),
            "distance": float(std * 4 + rng.normal(0, 0.3)),
        }
        audio = None
        if not failed:
            audio = f"renders/{row_id}.wav"
            if folder is not None:
                frames = RATE // 5 + 160 * i
                noise = rng.normal(0, 0.05, frames).astype(np.float32)
                soundfile.write(folder / audio, noise, RATE)
        rows.append(
            {
                "id": row_id,
                "point": i,
                "input": INPUTS[k],
                "input_index": k,
                "audio": audio,
                "seconds": 4.0,
                "sample_rate": RATE,
                "axes": {"bendings.0.callback.args.std": std, "bendings.0.patterns": [pattern]},
                "config": {
                    "format": "torchbend.bending-config",
                    "version": 1,
                    "controls": [],
                    "bendings": [
                        {
                            "callback": {"class": "Noise", "args": {"std": std, "seed": 3}},
                            "patterns": [pattern],
                            "fn": None,
                            "keys": [],
                        }
                    ],
                },
                "measures": {} if failed else {n: float(v) for n, v in measures.items()},
                "flags": {
                    "nonfinite": False,
                    "silent": False,
                    "clipping": broken,
                    "dc": False,
                    "unchanged": i == 0,
                },
                "broken": broken or failed,
                "error": HOSTILE if failed else None,
                "timing": {"render_s": 0.02, "measure_s": 0.01, "worker": "pid 1234"},
            }
        )
    return rows


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    return make_rows(36, tmp_path), tmp_path


def reference_pca(rows: list[dict[str, Any]], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """PCA the long way: eigenvectors of the correlation matrix, largest loading positive."""
    x = np.array([[row["measures"][n] for n in names] for row in rows])
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    eigenvalues, vectors = np.linalg.eigh(z.T @ z / len(z))
    order = np.argsort(eigenvalues)[::-1][:2]
    vectors = vectors[:, order]
    vectors *= np.sign(vectors[np.abs(vectors).argmax(axis=0), [0, 1]])
    return z @ vectors, eigenvalues[order] / eigenvalues.sum()


# -- the map --------------------------------------------------------------------------------


def test_coordinates_match_numpy(sweep):
    rows, folder = sweep
    result = atlas(rows, folder, png=False, html=False)
    usable = [row for row in rows if row["measures"]]
    names = [n for n in MEASURES if n != "dc"]
    coords, explained = reference_pca(usable, names)
    got = np.array([result.coords[row["id"]] for row in usable])
    np.testing.assert_allclose(got, coords, atol=1e-9)
    np.testing.assert_allclose(result.explained, explained, atol=1e-12)
    assert set(result.loadings) == set(names)
    weights = np.array([result.loadings[n] for n in names])
    np.testing.assert_allclose(np.linalg.norm(weights, axis=0), [1.0, 1.0])
    assert len(result.coords) == len(rows)


def test_failed_renders_sit_in_a_strip_right_of_the_map(sweep):
    rows, folder = sweep
    result = atlas(rows, folder, png=False, html=False)
    placed = [result.coords[row["id"]] for row in rows if row["measures"]]
    strip = [result.coords[row["id"]] for row in rows if not row["measures"]]
    assert strip and max(x for x, _ in placed) < min(x for x, _ in strip)
    assert len(set(strip)) == len(strip)


def test_constant_measures_are_dropped(sweep):
    rows, folder = sweep
    result = atlas(rows, folder, png=False, html=False)
    assert "dc" not in result.loadings
    without = [{**row, "measures": {k: v for k, v in row["measures"].items() if k != "dc"}}
               for row in rows]  # fmt: skip
    assert atlas(without, folder, png=False, html=False).coords == result.coords


def test_a_measure_a_row_lacks_counts_as_its_mean(sweep):
    rows, folder = sweep
    rows[0]["measures"] = {k: v for k, v in rows[0]["measures"].items() if k != "flatness"}
    result = atlas(rows, folder, png=False, html=False)
    assert np.isfinite(np.array(list(result.coords.values()))).all()
    assert "flatness" in result.loadings


def test_axis_labels_name_the_largest_loadings(sweep):
    rows, folder = sweep
    result = atlas(rows, folder, png=False, html=False)
    label = result.axis_label(0)
    first = max(result.loadings, key=lambda n: abs(result.loadings[n][0]))
    assert re.fullmatch(r"PC1 \(\d+ %\): \w+ [+-]\d\.\d\d, \w+ [+-]\d\.\d\d", label), label
    assert label.split(": ")[1].startswith(first)


@needs_matplotlib
@pytest.mark.parametrize("case", ["none", "one", "two", "all failed", "no measures"])
def test_degenerate_inputs_give_a_map(tmp_path, case):
    rows = {
        "none": [],
        "one": make_rows(1, tmp_path, failed_every=0),
        "two": make_rows(2, tmp_path, failed_every=0),
        "all failed": make_rows(3, tmp_path, failed_every=1),
        "no measures": [{"id": "a"}, {"id": "b", "measures": {"x": float("nan")}}],
    }[case]
    result = atlas(rows, tmp_path)
    assert set(result.coords) == {row["id"] for row in rows}
    assert np.isfinite(np.array(list(result.coords.values()), dtype=float).reshape(-1, 2)).all()
    assert all(0.0 <= e <= 1.0 for e in result.explained)
    assert result.png is not None and result.png.stat().st_size > 1000
    assert result.html is not None and "atlas-data" in result.html.read_text()


# -- the files ------------------------------------------------------------------------------


@needs_matplotlib
def test_files_are_deterministic(sweep):
    rows, folder = sweep
    first = atlas(rows, folder)
    html, png = first.html.read_bytes(), first.png.read_bytes()
    second = atlas(json.loads(json.dumps(rows)), folder)
    assert second.html.read_bytes() == html
    assert second.png.read_bytes() == png
    assert second.coords == first.coords


@needs_matplotlib
def test_png_is_a_picture_of_sensible_size(sweep):
    rows, folder = sweep
    path = atlas(rows, folder, html=False).png
    assert path == folder / "atlas.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 600 <= width <= 2000 and 400 <= height <= 1500
    assert 10_000 < len(data) < 1_000_000


def test_png_without_matplotlib_names_the_extra(sweep, monkeypatch):
    rows, folder = sweep
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'torchbend[plot]'")):
        atlas(rows, folder, html=False)
    assert atlas(rows, folder, png=False).png is None


def test_page_is_self_contained_and_escapes_its_data(sweep):
    rows, folder = sweep
    text = atlas(rows, folder, png=False, title="a <b>sweep</b>").html.read_text()
    assert not re.search(r"https?:|//[\w.-]+\.\w|\bsrc=|\bhref=|url\(|@import", text)
    assert text.count("</script>") == 2  # the data's and the code's: the error's did not end one
    assert "<title>a &lt;b&gt;sweep&lt;/b&gt;</title>" in text
    data = re.search(r'<script type="application/json" id="atlas-data">(.*?)</script>', text, re.S)
    assert data is not None
    parsed = json.loads(data.group(1))
    assert len(parsed["rows"]) == len(rows)
    assert HOSTILE in [row["error"] for row in parsed["rows"]]
    assert parsed["rows"][0]["bendings"] == ["Noise(std=0.1, seed=3) @ ^decoder_1$"]


# -- the page in a browser ------------------------------------------------------------------

VISIBLE = "[...document.querySelectorAll('#points .pt')].filter(e => e.style.display !== 'none')"


def shown(page: Any) -> int:
    return page.evaluate(f"{VISIBLE}.length")


def centre(page: Any, index: int) -> tuple[float, float]:
    box = page.locator(f'#points [data-i="{index}"]').bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


@needs_browser
def test_page_hover_click_play_and_filter(sweep):
    rows, folder = sweep
    path = atlas(rows, folder, png=False).html
    with open_page(path) as opened:
        page = opened.page
        assert page.locator("#points .pt").count() == len(rows) == shown(page)
        assert page.text_content("#count") == f"{len(rows)} of {len(rows)} shown"

        index = 2
        row = rows[index]
        page.mouse.move(*centre(page, index))
        tip = page.locator("#tip")
        tip.wait_for(state="visible")
        assert row["id"] in tip.inner_text()
        pattern = row["config"]["bendings"][0]["patterns"][0]
        assert f"Noise(std=0.3, seed=3) @ {pattern}" in tip.inner_text()
        assert "bendings.0.callback.args.std = 0.3" in tip.inner_text()

        page.mouse.click(*centre(page, index))
        page.wait_for_function("document.getElementById('player').readyState >= 1")
        src = page.evaluate("document.getElementById('player').src")
        assert src == (folder / row["audio"]).resolve().as_uri()
        info = soundfile.info(folder / row["audio"])
        duration = page.evaluate("document.getElementById('player').duration")
        assert duration == pytest.approx(info.frames / info.samplerate, abs=2e-3)
        assert row["id"] in page.text_content("#now")
        assert page.is_enabled("#unbent")  # the first input has an unbent render
        page.click("#unbent")
        page.wait_for_function("document.getElementById('player').src.endsWith('00-bass.wav')")
        page.wait_for_function("document.getElementById('player').readyState >= 1")

        broken = sum(row["broken"] for row in rows)
        page.check('#hide input[data-hide="broken"]')
        assert shown(page) == len(rows) - broken
        assert page.text_content("#count") == f"{len(rows) - broken} of {len(rows)} shown"
        assert page.evaluate(f"{VISIBLE}.every(e => !e.matches('.broken, .failed'))")
        page.uncheck('#hide input[data-hide="broken"]')
        page.check('#hide input[data-hide="flag:clipping"]')
        assert shown(page) == len(rows) - sum(row["flags"]["clipping"] for row in rows)
        page.uncheck('#hide input[data-hide="flag:clipping"]')

        page.select_option("#input", "1")
        assert shown(page) == sum(row["input_index"] == 1 for row in rows)
        ids = page.evaluate(f"{VISIBLE}.map(e => e.dataset.id)")
        assert all(i.endswith("-voice") for i in ids)
        page.select_option("#input", "-1")
        assert shown(page) == len(rows)

        page.select_option("#colour", "flatness")
        assert page.text_content("#legend").startswith("colour: flatness")
        assert opened.errors == []


@needs_browser
def test_page_shows_a_failed_render_and_its_hostile_error(sweep):
    rows, folder = sweep
    path = atlas(rows, folder, png=False).html
    index = next(i for i, row in enumerate(rows) if row["error"])
    with open_page(path) as opened:
        page = opened.page
        page.mouse.move(*centre(page, index))
        page.locator("#tip").wait_for(state="visible")
        assert HOSTILE in page.inner_text("#tip")
        page.mouse.click(*centre(page, index))
        assert "no audio" in page.text_content("#now")
        assert page.evaluate("document.getElementById('player').getAttribute('src')") is None
        assert opened.errors == []


@needs_browser
def test_page_keyboard(sweep):
    rows, folder = sweep
    path = atlas(rows, folder, png=False).html
    with open_page(path) as opened:
        page = opened.page
        page.focus("#map")
        page.keyboard.press("n")
        page.locator("#tip").wait_for(state="visible")
        assert rows[0]["id"] in page.inner_text("#tip")
        page.keyboard.press("n")
        assert rows[1]["id"] in page.inner_text("#tip")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("Enter")
        page.wait_for_function("document.getElementById('player').readyState >= 1")
        assert "/renders/" in page.evaluate("document.getElementById('player').src")
        page.keyboard.press("Escape")
        assert page.locator("#tip").is_hidden()
        assert opened.errors == []


@needs_browser
@pytest.mark.parametrize("count", [0, 1, 2])
def test_degenerate_pages_load(tmp_path, count):
    rows = make_rows(count, tmp_path, failed_every=0)
    path = atlas(rows, tmp_path, png=False).html
    with open_page(path) as opened:
        assert opened.page.locator("#points .pt").count() == count
        assert opened.errors == []


@needs_matplotlib
@needs_browser
def test_page_with_2000_rows(tmp_path):
    rows = make_rows(2000)
    result = atlas(rows, tmp_path)
    assert result.html.stat().st_size < 5_000_000
    assert result.png.stat().st_size < 2_000_000
    with open_page(result.html) as opened:
        page = opened.page
        assert page.locator("#points .pt").count() == 2000 == shown(page)
        page.mouse.move(*centre(page, 5))
        page.locator("#tip").wait_for(state="visible")
        page.check('#hide input[data-hide="broken"]')
        assert shown(page) == 2000 - sum(row["broken"] for row in rows)
        assert opened.errors == []
