"""The studio in headless Chromium against a server the test starts: the core path (find a node,
attach a Mask, move its knob, render, hear it, save the configuration and replay it in Python),
by mouse and by keyboard alone, live mode, and errors shown on the page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import torchbend as tb
from tests.browser import needs_browser, open_page
from tests.studio.client import Client, decode_wav, served, tiny_studio
from torchbend.audio.render import render
from torchbend.audio.safety import FILE_CEILING
from torchbend.studio import Studio

pytestmark = [pytest.mark.audio, needs_browser]

FAILED_REQUEST = "Failed to load resource"
"""What Chromium logs for any answer of status 400 and above: the page shows the error itself."""


@pytest.fixture
def studio(tmp_path: Path) -> Studio:
    return tiny_studio(tmp_path / "out")


@pytest.fixture
def page(studio: Studio) -> Iterator[Any]:
    with served(studio) as server, open_page(server.url, width=1440, height=900) as opened:
        opened.page.wait_for_selector("body[data-ready='1']")
        opened.server = server  # type: ignore[attr-defined]
        yield opened
        assert opened.errors == [], "the page logged errors"


def python_render(config_path: Path, audio: torch.Tensor) -> torch.Tensor:
    """What Python renders with a configuration the page saved: the shipped model streaming."""
    bended = tb.BendedModule(tb.models.load("tiny_rave").set_streaming(True))
    bended.trace(x=torch.zeros(1, 1, 8192))
    bended.bend(tb.BendingConfig.load(config_path))
    stage = tb.audio.Safety(44100, ceiling=FILE_CEILING)  # the studio's files' stage
    out, _ = render(bended, audio, 44100, "forward", 8192, safety=stage)
    return out


def played_to_the_end(p: Any) -> None:
    """Press play and wait until the page's audio element reaches ``ended``."""
    p.evaluate(
        "() => { window.__ended = new Promise(r => "
        "document.querySelector('#player').addEventListener('ended', () => r(true), "
        "{once: true})); }"
    )
    p.click("#play")
    assert p.evaluate("() => window.__ended") is True


def test_find_attach_knob_render_hear_save_and_replay_in_python(page: Any, studio: Studio) -> None:
    p = page.page
    p.fill("#search", "decoder_1")
    assert p.inner_text("#search-count").startswith("1")
    p.press("#search", "Enter")
    assert p.input_value("#target") == "^decoder_1$"
    assert p.get_attribute('g.tb-graph-node[data-name="decoder_1"]', "class").count(
        "tb-graph-selected"
    )
    p.select_option("#callback", "Mask")
    p.check("#knob-prob")
    p.click("#attach")
    p.wait_for_selector("#bendings li[data-callback='Mask']")
    assert studio.bended.bended_keys() == ["forward:decoder_1"]
    assert "tb-graph-bent" in p.get_attribute('g.tb-graph-node[data-name="decoder_1"]', "class")
    (name,) = studio.bended.controllables
    knob = f"#controls input.control[data-name='{name}']"
    before = studio.bended.controllables[name].get()
    p.focus(knob)
    for _ in range(20):
        p.keyboard.press("ArrowRight")
    p.wait_for_function(f'() => document.querySelector("{knob}").dataset.value > {before}')
    p.wait_for_timeout(300)  # the last move is sent on change
    moved = float(p.get_attribute(knob, "data-value"))
    assert moved > before and studio.bended.controllables[name].get() == pytest.approx(moved)

    p.select_option("#sound", "drums")
    p.click("#render")
    p.wait_for_selector("#render-info[data-differs='1']")
    rendered = p.evaluate("() => window.studio.lastRender()")
    assert rendered["sound"] == "drums" and rendered["differs"] is True
    for kind in ("input", "unbent", "bended"):
        p.wait_for_selector(f"canvas.waveform[data-kind='{kind}'][data-drawn]")
        p.wait_for_selector(f"canvas.spectrogram[data-kind='{kind}'][data-drawn]")
    played_to_the_end(p)
    assert p.get_attribute("#player", "data-src-kind") == "bended"
    p.check("#ab input[value='unbent']")
    assert p.get_attribute("#player", "data-src-kind") == "unbent"

    p.fill("#config-name", "from-the-page")
    p.click("#save")
    p.wait_for_selector("#configs button.load-config[data-name='from-the-page']")
    saved = studio.output / "configs" / "from-the-page.json"
    assert json.loads(saved.read_text())["controls"][0]["value"] == pytest.approx(moved)
    client = Client(page.server.url)
    status, data = client.get(rendered["audio"]["bended"])
    assert status == 200
    heard, _ = decode_wav(data)
    python = python_render(saved, studio.library.get("drums").audio)
    assert torch.allclose(heard, python.clamp(-1, 1), atol=1 / 32767)


def test_the_core_path_by_keyboard_alone(page: Any, studio: Studio) -> None:
    p, k = page.page, page.page.keyboard
    p.click("body", position={"x": 5, "y": 890})  # focus the page, on nothing that takes keys
    k.press("/")
    assert p.evaluate("() => document.activeElement.id") == "search"
    k.type("encoder_1")
    k.press("Enter")
    assert p.input_value("#target") == "^encoder_1$"
    assert p.evaluate("() => document.activeElement.id") == "target"
    k.press("Tab")
    assert p.evaluate("() => document.activeElement.id") == "callback"
    k.type("Mask")
    assert p.input_value("#callback") == "Mask"

    def tab_to(selector: str, limit: int = 30) -> None:
        for _ in range(limit):
            if p.evaluate(f"() => document.activeElement.matches({selector!r})"):
                return
            k.press("Tab")
        raise AssertionError(f"Tab never reached {selector}")

    tab_to("#knob-prob")
    k.press("Space")
    assert p.is_checked("#knob-prob")
    tab_to("#attach")
    k.press("Enter")
    p.wait_for_selector("#bendings li[data-callback='Mask']")
    assert studio.bended.bended_keys() == ["forward:encoder_1"]
    (name,) = studio.bended.controllables
    tab_to(f"#controls input.control[data-name='{name}']")
    before = studio.bended.controllables[name].get()
    for _ in range(10):
        k.press("ArrowRight")
    p.wait_for_timeout(300)
    assert studio.bended.controllables[name].get() > before
    k.press("r")
    p.wait_for_selector("#render-info[data-differs='1']")
    p.evaluate(
        "() => { window.__ended = new Promise(r => "
        "document.querySelector('#player').addEventListener('ended', () => r(true), "
        "{once: true})); }"
    )
    k.press("Space")
    assert p.evaluate("() => window.__ended") is True
    focus = p.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert focus != "none", "the focused element shows no focus ring"


def test_look_tables_statistics_flow_and_undo(page: Any, studio: Studio) -> None:
    p = page.page
    p.click("#tab-weights")
    p.fill("#weights-filter", "decoder.*weight")
    p.wait_for_function(
        "() => document.querySelectorAll('#weights-table tbody tr[data-name]').length == 2"
    )
    p.fill("#weights-filter", "[")
    p.wait_for_selector("#weights-error:has-text('not a regular expression')")
    page.console_errors[:] = [e for e in page.console_errors if FAILED_REQUEST not in e]
    p.fill("#weights-filter", "encoder.0.weight")
    p.click("#weights-table tbody tr[data-name='encoder.0.weight']")
    p.wait_for_selector(
        "#node-info[data-loaded='1'][data-name='encoder.0.weight']", state="attached"
    )
    assert p.input_value("#target") == r"^encoder\.0\.weight$"

    p.click('g.tb-graph-node[data-name="encoder_0"]')
    p.click("#tab-node")
    p.wait_for_selector("#node-info[data-loaded='1'][data-name='encoder_0']")
    shown = p.inner_text("#node-info")
    stats = studio.activation_stats("encoder_0", None)
    assert f"{stats['std']:.3g}"[:4] in shown or str(stats["shape"][1]) in shown
    assert "+0.0 dB" in shown and "0.00 → 0.00" in shown  # its health: unbent, so bent = unbent
    assert p.get_attribute("#node-picture", "data-rows") == "64"

    p.click("#tab-activations")
    p.fill("#activations-filter", "decoder")
    p.wait_for_function(
        "() => document.querySelectorAll('#activations-table tbody tr[data-name]').length == 3"
    )
    p.click("#tab-flow")
    assert p.locator("#flow-steps .flow-step").count() == len(studio.bended.flow_steps())
    assert p.locator("#guards li").count() == len(studio.bended.graph().guard_facts)

    p.click("#tab-bend")
    for target in ("encoder_2$", "decoder_0$"):
        p.fill("#target", target)
        p.select_option("#callback", "Scale")
        p.click("#attach")
        p.wait_for_function(
            f"() => window.studio.state().config.bendings.some(b => b.patterns[0] == {target!r})"
        )
    assert p.locator("#bendings li").count() == 2
    first = "() => window.studio.state().config.bendings[0].patterns[0] == {!r}"
    p.click("#bendings li[data-index='1'] .b-up")
    p.wait_for_function(first.format("decoder_0$"))
    p.click("#undo")
    p.wait_for_function(first.format("encoder_2$"))
    p.click("#redo")
    p.wait_for_function(first.format("decoder_0$"))
    p.click("#bendings li[data-index='0'] .b-remove")
    p.wait_for_function("() => window.studio.state().config.bendings.length == 1")
    assert studio.bended.bended_keys() == ["forward:encoder_2"]
    p.click("#reset")
    p.wait_for_function("() => window.studio.state().config.bendings.length == 0")
    assert studio.bended.bended_keys() == []


def test_the_node_panel_plays_a_channel_soloed_bypassed_and_its_activation(
    page: Any, studio: Studio
) -> None:
    p = page.page
    p.click('g.tb-graph-node[data-name="encoder_1"]')
    p.click("#tab-node")
    p.wait_for_selector("#node-info[data-loaded='1'][data-name='encoder_1']")
    assert p.get_attribute("#audition-channel", "max") == "63"
    p.fill("#audition-channel", "2")
    loaded = "() => document.querySelector('#audition-player').readyState >= 1"
    whole = studio.library.get(studio.current).audio.shape[-1] / 44100
    for mode, path, seconds in [
        ("solo", "/api/audition?name=encoder_1&mode=solo&channel=2", whole),
        ("bypass", "/api/audition?name=encoder_1&mode=bypass&channel=2", whole),
        ("activation", "/api/audition/activation?name=encoder_1&fn=forward&channel=2", 2.0),
    ]:
        p.click(f"#audition button[data-mode='{mode}']")
        assert p.get_attribute("#audition-player", "data-url") == path
        p.wait_for_function(loaded)
        duration = p.evaluate("() => document.querySelector('#audition-player').duration")
        assert duration == pytest.approx(seconds, abs=0.01)
        p.evaluate("() => document.querySelector('#audition-player').pause()")
    assert studio.bended.bended_keys() == []  # the solo was for the render only
    p.fill("#audition-channel", "64")
    p.click("#audition button[data-mode='solo']")
    p.wait_for_selector("#error:has-text('it has 64 channels')")
    page.console_errors[:] = [e for e in page.console_errors if FAILED_REQUEST not in e]


def test_bad_input_is_shown_on_the_page_and_changes_nothing(page: Any, studio: Studio) -> None:
    p = page.page
    p.fill("#target", "no_such_node$")
    p.select_option("#callback", "Mask")
    p.click("#attach")
    p.wait_for_selector("#error:has-text('matched no weight or activation')")
    assert studio.bended.bended_keys() == []
    assert p.is_enabled("#attach")
    p.set_input_files(
        "#upload-file", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hi"}]
    )
    p.wait_for_selector("#error:has-text('ending in .wav, .flac, .ogg')")
    page.console_errors[:] = [e for e in page.console_errors if FAILED_REQUEST not in e]
    p.fill("#target", "decoder_2$")
    p.select_option("#callback", "Scale")
    p.fill("#arg-scale", "50")
    p.click("#attach")
    p.wait_for_selector("#bendings li[data-callback='Scale']")
    p.click("#render")
    p.wait_for_selector("#render-safety:has-text('limited')")  # what the file's stage did
    assert "clipping" not in (p.get_attribute("#render-info", "data-flags") or "")
    studio.safety = False  # the model's raw output: what the measures flag is shown
    p.click("#render")
    p.wait_for_selector("#render-flags:has-text('clipping')")
    assert p.query_selector("#render-safety") is None


def test_an_empty_number_field_is_refused_on_the_page(page: Any, studio: Studio) -> None:
    p = page.page
    p.fill("#target", "decoder_1$")
    p.select_option("#callback", "Scale")
    p.fill("#arg-scale", "")
    p.click("#attach")
    p.wait_for_selector("#error:has-text('scale is empty: give a number (its default is 1)')")
    assert "invalid" in p.get_attribute(".arg-input:has(#arg-scale)", "class")
    p.check("#knob-scale")  # a live control starts from the number in the field: none here
    p.click("#attach")
    p.wait_for_selector("#error:has-text('scale is empty')")
    assert studio.bended.bended_keys() == [] and studio.bended.controllables == {}
    p.select_option("#callback", "Mask")  # a seed takes null: empty is null, as the field shows
    assert p.get_attribute("#arg-seed", "placeholder") == "null"
    p.fill("#arg-seed", "")
    p.click("#attach")
    p.wait_for_selector("#bendings li[data-callback='Mask']")
    assert p.evaluate("() => window.studio.state().config.bendings[0].callback.args.seed") is None


def test_clicking_a_weight_targets_exactly_that_weight(page: Any, studio: Studio) -> None:
    p = page.page
    p.click("#tab-weights")
    p.click("#weights-table tbody tr[data-name='decoder.0.weight']")
    pattern = p.input_value("#target")
    assert pattern == r"^decoder\.0\.weight$"  # escaped: a dot is no wildcard
    names = studio.bended.weight_names + [a.name for a in studio.bended.activations()]
    assert [n for n in names if re.match(pattern, n)] == ["decoder.0.weight"]
    p.click("#tab-bend")
    p.select_option("#callback", "Scale")
    p.click("#attach")
    p.wait_for_selector("#bendings li[data-callback='Scale']")
    assert studio.bended.bended_keys() == ["decoder.0.weight"]


def test_a_reloaded_page_shows_the_last_render_again(page: Any, studio: Studio) -> None:
    p = page.page
    p.click("#render")
    p.wait_for_selector("#render-info[data-differs]")
    rendered = p.evaluate("() => window.studio.lastRender()")
    p.reload()
    p.wait_for_selector("body[data-ready='1']")
    assert p.evaluate("() => window.studio.lastRender()") == rendered
    assert p.inner_text("#render-info").startswith(f"{rendered['id']} · {rendered['sound']}")
    for kind in ("input", "unbent", "bended"):
        p.wait_for_selector(f"canvas.waveform[data-kind='{kind}'][data-drawn]")
        p.wait_for_selector(f"canvas.spectrogram[data-kind='{kind}'][data-drawn]")
    played_to_the_end(p)  # the render's files, ready to play without rendering again
    assert p.get_attribute("#player", "data-render") == rendered["id"]


def test_render_rows_are_tall_enough_to_read_and_the_page_fits(page: Any) -> None:
    """At 1440x900 each row's spectrogram has room for its bands (at 44 px they were a few
    stripes), and the graph keeps most of the height, without the page scrolling."""
    p = page.page
    heights = p.evaluate(
        "() => [...document.querySelectorAll('.render-row canvas')]"
        ".map(c => c.getBoundingClientRect().height)"
    )
    assert len(heights) == 6 and all(64 <= h <= 112 for h in heights), heights
    assert p.evaluate("() => document.querySelector('#graph').getBoundingClientRect().height") > 400
    assert p.evaluate("() => document.documentElement.scrollHeight") <= 900


def test_live_mode_streams_and_follows_the_knob(page: Any, studio: Studio) -> None:
    p = page.page
    p.fill("#target", "decoder_1$")
    p.select_option("#callback", "Scale")
    p.check("#knob-scale")
    p.click("#attach")
    p.wait_for_selector("#controls input.control")
    (name,) = studio.bended.controllables
    knob = f"#controls input.control[data-name='{name}']"
    p.click("#live")
    p.wait_for_function(
        "() => Number(document.querySelector('#live-stats').dataset.blocks || 0) >= 3"
    )
    assert float(p.get_attribute("#live-stats", "data-realtime-factor")) > 0
    assert float(p.get_attribute("#live-stats", "data-latency-ms")) > 0
    before = studio.bended.controllables[name].get()
    p.focus(knob)
    for _ in range(10):
        p.keyboard.press("ArrowLeft")
    p.wait_for_timeout(400)
    assert studio.bended.controllables[name].get() < before
    p.click("#live")
    assert p.get_attribute("#live", "aria-pressed") == "false"


def test_a_token_in_the_address_reaches_every_request(studio: Studio) -> None:
    with served(studio, token="page-token-123") as server:
        with open_page(server.url) as opened:
            p = opened.page
            p.wait_for_selector("body[data-ready='1']")
            p.click("#render")
            p.wait_for_selector("#render-info[data-differs]")
            played_to_the_end(p)
            assert opened.errors == []


@pytest.mark.parametrize("token", [None, "sweep-token-123"])
def test_the_sweep_opens_in_the_page(tmp_path: Path, token: str | None) -> None:
    folder = tmp_path / "sweep"
    spec = {
        "model": "tiny_rave",
        "inputs": [str(Path(tb.__file__).parents[1] / "assets" / "sounds" / "pad.wav")],
        "base": {
            "bendings": [
                {"callback": {"class": "Scale", "args": {"scale": 1.0}}, "patterns": ["decoder_1$"]}
            ]
        },
        "axes": {"bendings.0.callback.args.scale": {"values": [0.5, 2.0]}},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    tb.sweep.run(path, folder, workers=0, progress=False)
    tb.sweep.map(folder, png=False)
    studio = tiny_studio(tmp_path / "out", sweep=folder)
    with served(studio, token=token) as server, open_page(server.url) as opened:
        p = opened.page
        p.wait_for_selector("body[data-ready='1']")
        p.click("#tab-sweep")
        frame = p.frame_locator("#sweep")
        points = frame.locator("[data-id]")
        points.nth(1).wait_for(state="attached")  # the atlas draws its renders once loaded
        assert points.count() == 2
        # The atlas fetches its renders by relative paths: with a token, the cookie carries it.
        audio = tb.sweep.read_rows(folder)[0]["audio"]
        atlas = next(f for f in p.frames if f.url.endswith("atlas.html") or "atlas.html?" in f.url)
        assert atlas.evaluate(f"async () => (await fetch({audio!r})).status") == 200
        assert opened.errors == []


def test_the_header_lists_the_latent_names_of_a_model_that_has_them(tmp_path: Path) -> None:
    from torchbend.models.reference import load_model

    ddsp = Studio(load_model("tiny_ddsp"), "tiny_ddsp", output=tmp_path / "ddsp")
    with served(ddsp) as server, open_page(server.url, width=1440, height=900) as opened:
        opened.page.wait_for_selector("body[data-ready='1']")
        latent = opened.page.locator("#model-latent")
        assert latent.is_visible()
        assert latent.inner_text().startswith("latent: 0 pitch · 1 loudness · 2 brightness")
        assert opened.errors == []
    rave = tiny_studio(tmp_path / "rave")  # TinyRave names no channel: nothing shown
    with served(rave) as server, open_page(server.url, width=1440, height=900) as opened:
        opened.page.wait_for_selector("body[data-ready='1']")
        assert not opened.page.locator("#model-latent").is_visible()
