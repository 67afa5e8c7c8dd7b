"""The studio's discovery panel, served for real: channels ranked by a descriptor of the current
sound as :func:`torchbend.discover.rank` ranks them, a knob attached in one click (an undo
step, a control, a saved configuration), bad requests, and the panel in headless Chromium."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import torchbend as tb
from tests.browser import needs_browser, open_page
from tests.studio.client import Client, served
from torchbend.discover import Ranking
from torchbend.errors import DiscoveryError
from torchbend.models.reference import load_model
from torchbend.studio import Studio, discovery
from torchbend.studio.discovery import Ranked

pytestmark = pytest.mark.audio

SECONDS = 0.25
"""What the tests rank on: the current sound's first quarter second."""


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Studio:
    out = tmp_path_factory.mktemp("discovery")
    return Studio(load_model("tiny_ddsp"), "tiny_ddsp", output=out)


@pytest.fixture(scope="module")
def client(studio: Studio) -> Iterator[Client]:
    with served(studio) as server:
        yield Client(server.url)


@pytest.fixture(autouse=True)
def voice(client: Client) -> Iterator[None]:
    client.ok("POST", "/api/reset")
    client.ok("POST", "/api/sounds/current", {"id": "voice"})
    yield


def ranked(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    """Start a ranking and poll its job until it ends."""
    job = client.ok("POST", "/api/discover/rank", body)
    assert job["state"] == "running" and job["done"] == 0
    deadline = time.monotonic() + 600  # a guard against a job that never ends, not a timing
    while job["state"] == "running":
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
        job = client.ok("GET", f"/api/discover/rank/{job['job']}")
    assert job["state"] == "done", job
    return job


def test_the_panel_offers_the_descriptors(client: Client) -> None:
    got = client.ok("GET", "/api/discover")
    assert got["descriptors"] == list(tb.audio.perceptual.NAMES)
    assert got["seconds"] == discovery.SECONDS and got["probe_renders"] == discovery.PROBE_RENDERS


def test_a_ranking_of_the_current_sound_is_python_s(client: Client, studio: Studio) -> None:
    job = ranked(client, {"descriptor": "pitch", "targets": "^cat$", "seconds": SECONDS})
    assert (job["done"], job["total"], job["node"]) == (1, 1, "cat")
    assert job["nodes"] == ["cat"] and job["left_out"] == [] and job["sound"] == "voice"
    rows = job["result"]["rows"]
    assert (rows[0]["node"], rows[0]["channel"]) == ("cat", 0)
    assert job["result"]["by_node"][0] == rows[0] and job["result"]["count"] == 8

    audio = studio.library.get("voice").audio[0, : int(SECONDS * 44100) // 256 * 256]
    assert job["seconds"] == round(audio.shape[-1] / 44100, 3)
    bended = tb.BendedModule(load_model("tiny_ddsp"))
    python = tb.discover.rank(bended, audio, "pitch", targets="^cat$")
    assert [(r["node"], r["channel"]) for r in rows] == [(r.node, r.channel) for r in python.rows]
    for got, want in zip(rows, python.rows):
        sent = {k: got[k] for k in ("effect", "specificity", "random_ratio")} | got["changes"]
        wanted = {k: getattr(want, k) for k in ("effect", "specificity", "random_ratio")}
        for key, value in (wanted | want.changes).items():
            assert sent[key] == (pytest.approx(value, rel=1e-6) if math.isfinite(value) else None)


def test_a_knob_attaches_in_one_click_as_any_bending(client: Client, studio: Studio) -> None:
    ranked(client, {"descriptor": "loudness", "targets": "^cat$", "seconds": SECONDS})
    got = client.ok("POST", "/api/discover/knob", {"descriptor": "loudness"})
    made = got["knob"]
    assert made["node"] == "cat" and made["steps"] > 0 and "Knob('loudness'" in made["description"]
    assert made["control"] == {"name": "loudness", "range": [-1.0, 1.0], "value": 0.0}
    state = got["state"]
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Steer"]
    assert state["keys"] == [["forward:cat"]]
    control = next(c for c in state["controls"] if c["name"] == "loudness")
    assert control["range"] == [-1.0, 1.0] and control["value"] == 0.0
    assert isinstance(studio.bended.bending_config().items[0].callback, tb.Steer)

    client.ok("POST", "/api/controls/loudness", {"value": 1.0})
    saved = client.ok("POST", "/api/configs", {"name": "knob"})
    config = tb.BendingConfig.load(saved["path"])
    assert isinstance(config.items[0].callback, tb.Steer)

    state = client.ok("POST", "/api/discover/knob", {"descriptor": "loudness"})["state"]
    assert [c["name"] for c in state["controls"]] == ["loudness", "loudness_2"]
    for _ in range(2):
        state = client.ok("POST", "/api/undo")
    assert state["config"]["bendings"] == [] and state["controls"] == []
    assert studio.bended.bended_keys() == []


def test_the_cap_on_probe_renders_leaves_nodes_out_and_says_so(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # analysis (20 channels, and 8 random directions, each probed both ways): 56 renders;
    # getitem_2 (4): 24 more would pass 76, getitem_4 (2): 20 fit
    monkeypatch.setattr(discovery, "PROBE_RENDERS", 76)
    job = ranked(client, {"descriptor": "loudness", "seconds": SECONDS})
    assert job["nodes"] == ["analysis", "getitem_4"] and job["probe_renders"] == 76
    assert job["left_out"][0] == "getitem_2" and "decoder_0" in job["left_out"]
    assert {r["node"] for r in job["result"]["rows"]} == {"analysis", "getitem_4"}
    monkeypatch.setattr(discovery, "PROBE_RENDERS", 19)
    got, error = client.post("/api/discover/rank", {"descriptor": "loudness"})
    assert got == 422 and "'analysis' alone needs more probe renders" in error["error"]


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"descriptor": "sparkle"}, 400, "unknown descriptor 'sparkle': choose one of loudness"),
        ({"descriptor": "pitch", "targets": "cat["}, 400, "targets 'cat[' is not a regular"),
        ({"descriptor": "pitch", "targets": "^nothing$"}, 422, "no activation of 'forward'"),
        ({"descriptor": "pitch", "seconds": 0.02}, 422, "too short to describe: at least 4410"),
        ({"descriptor": "pitch", "seconds": "1"}, 400, "'seconds' is a number of seconds"),
        ({"targets": "cat"}, 400, "the body has no 'descriptor'"),
    ],
)
def test_bad_rankings_are_refused(client: Client, body: Any, status: int, message: str) -> None:
    got, error = client.post("/api/discover/rank", body)
    assert (got, message) == (status, message) and message in error["error"]


def test_bad_knobs_and_jobs_are_refused(
    client: Client, studio: Studio, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio.discoveries.rankings.pop("brightness", None)
    got, error = client.post("/api/discover/knob", {"descriptor": "brightness"})
    assert got == 409 and "rank the channels by 'brightness' first" in error["error"]
    got, error = client.post("/api/discover/knob", {"descriptor": "sparkle"})
    assert got == 400 and "unknown descriptor 'sparkle'" in error["error"]
    got, error = client.get("/api/discover/rank/k999")
    assert got == 404 and "no ranking job 'k999'" in error["error"]

    empty = Ranking("loudness", "push", 0.5, ["0"], [])
    audio = studio.library.get("voice").audio[0, :8192]
    monkeypatch.setitem(studio.discoveries.rankings, "loudness", Ranked(empty, "voice", audio))
    got, error = client.post("/api/discover/knob", {"descriptor": "loudness", "name": "1st"})
    assert got == 400 and "a new identifier" in error["error"]

    def no_knob(*args: Any, **kwargs: Any) -> None:
        raise DiscoveryError("no knob for 'loudness': no candidate moves it monotonically")

    monkeypatch.setattr(discovery, "knob", no_knob)
    got, error = client.post("/api/discover/knob", {"descriptor": "loudness"})
    assert got == 422 and error["error"].startswith("no knob for 'loudness': no candidate")
    assert client.ok("GET", "/api/config")["config"]["bendings"] == []
    client.ok("POST", "/api/sounds/current", {"id": "bass"})
    got, error = client.post("/api/discover/knob", {"descriptor": "loudness"})
    assert got == 409 and "made on sound 'voice', not the current 'bass'" in error["error"]


@needs_browser
def test_the_panel_ranks_and_makes_a_knob_whose_slider_appears(studio: Studio) -> None:
    with served(studio) as server, open_page(server.url, width=1440, height=900) as opened:
        p = opened.page
        p.wait_for_selector("body[data-ready='1']")
        p.click("#tab-discover")
        p.select_option("#descriptor", "loudness")
        p.fill("#discover-targets", "^cat$")
        p.fill("#discover-seconds", str(SECONDS))
        p.click("#rank")
        p.wait_for_selector("#discover-table tbody tr[data-name='cat']")
        assert "loudness: 8 channels of 1 node on voice" in p.inner_text("#rank-status")
        p.click("#discover-table tbody tr:first-child")
        assert p.evaluate("() => window.studio.selected()") == {"kind": "activation", "name": "cat"}
        p.click("#make-knob")
        p.wait_for_selector("#controls input.control[data-name='loudness']")
        assert p.get_attribute("#tab-bend", "aria-selected") == "true"
        assert "Knob('loudness' at 'cat'" in p.inner_text("#knob-info")
        assert p.get_attribute("#controls input.control[data-name='loudness']", "min") == "-1"
        assert isinstance(studio.bended.bending_config().items[0].callback, tb.Steer)
        assert opened.errors == [], "the page logged errors"


def test_one_ranking_at_a_time_and_no_knob_meanwhile(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def held(*args: Any, **kwargs: Any) -> Ranking:
        assert release.wait(60)
        return Ranking("loudness", "push", 0.5, ["0"], [])

    monkeypatch.setattr(discovery, "rank", held)
    job = client.ok("POST", "/api/discover/rank", {"descriptor": "loudness", "targets": "^cat$"})
    try:
        got, error = client.post("/api/discover/rank", {"descriptor": "pitch"})
        assert got == 409 and "a ranking is running" in error["error"]
        got, error = client.post("/api/discover/knob", {"descriptor": "loudness"})
        assert got == 409 and "make the knob when it is done" in error["error"]
    finally:
        release.set()
    while job["state"] == "running":
        time.sleep(0.05)
        job = client.ok("GET", f"/api/discover/rank/{job['job']}")
    assert job["state"] == "done" and job["result"]["rows"] == []
