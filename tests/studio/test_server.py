"""Every endpoint of the studio's server, served for real, with good and bad input."""

from __future__ import annotations

import asyncio
import io
import json
import re
import struct
from pathlib import Path

import pytest
import torch

import torchbend as tb
from tests.studio.client import Client, decode_wav, served, tiny_studio
from torchbend.audio.render import render
from torchbend.audio.safety import FILE_CEILING
from torchbend.audio.stream import Stream
from torchbend.demo import SOUNDS
from torchbend.engine.selection import filter_names
from torchbend.errors import StudioError
from torchbend.studio import Limits, Studio, StudioServer
from torchbend.studio.describe import FORM_CALLBACKS, NOT_IN_A_FORM
from torchbend.studio.server import STATIC, VENDOR, check_bind

pytestmark = pytest.mark.audio

MASK = {"callback": {"class": "Mask", "args": {"prob": 0.5, "seed": 0}}, "patterns": ["encoder_0"]}


@pytest.fixture
def studio(tmp_path: Path) -> Studio:
    return tiny_studio(tmp_path / "out")


@pytest.fixture
def client(studio: Studio):
    with served(studio) as server:
        yield Client(server.url)


def wav_bytes(seconds: float, rate: int = 44100, channels: int = 1) -> bytes:
    import soundfile

    t = torch.arange(int(seconds * rate)) / rate
    tone = 0.5 * torch.sin(2 * torch.pi * 220 * t)
    buffer = io.BytesIO()
    soundfile.write(buffer, tone[:, None].repeat(1, channels).numpy(), rate, format="WAV")
    return buffer.getvalue()


# -- the model ---------------------------------------------------------------------------------


def test_model_describes_the_model_and_the_method(client: Client) -> None:
    got = client.ok("GET", "/api/model")
    assert got["model"] == "tiny_rave" and got["class"] == "TinyRave"
    assert got["fn"] == "forward" and got["methods"] == ["forward"]
    assert (got["sample_rate"], got["block_size"], got["ratio"]) == (44100, 8192, 16)
    assert got["streams"] is True and got["sweep"] is None
    assert got["latent_names"] is None  # TinyRave does not name its latent's channels


def test_graph_is_the_traced_graph_in_order_with_shapes_and_modules(
    client: Client, studio: Studio
) -> None:
    got = client.ok("GET", "/api/graph?fn=forward")
    graph = studio.bended.graph("forward")
    assert [n["name"] for n in got["nodes"]] == [n.name for n in graph.nodes]
    seen: set[str] = set()
    for node in got["nodes"]:
        assert set(node["inputs"]) <= seen, f"{node['name']} reads a node drawn after it"
        seen.add(node["name"])
        if node["tensor"] and node["op"] != "output":
            assert node["shape"] == list(studio.bended.activation_shape(node["name"]))
    by_name = {n["name"]: n for n in got["nodes"]}
    assert by_name["encoder_0"]["module"] == "encoder.0"
    assert by_name["encoder_0"]["op"] == "call_module"
    assert by_name["x"]["op"] == "placeholder"
    assert got["guards"] and all(isinstance(g, str) for g in got["guards"])
    assert got["flow_steps"] and {"kind", "name", "value", "file", "checked"} <= set(
        got["flow_steps"][0]
    )
    status, error = client.get("/api/graph?fn=decode")
    assert status == 404 and "no traced method 'decode'" in error["error"]


def test_graph_marks_bent_nodes(client: Client) -> None:
    client.ok("POST", "/api/bendings", MASK)
    bent = [n["name"] for n in client.ok("GET", "/api/graph")["nodes"] if n["bent"]]
    assert bent == ["encoder_0"]


# -- tables ------------------------------------------------------------------------------------


def test_weights_filter_as_python_does(client: Client, studio: Studio) -> None:
    rows = client.ok("GET", "/api/weights")["rows"]
    assert [r["name"] for r in rows] == studio.bended.weight_names
    got = client.ok("GET", "/api/weights?pattern=decoder.*weight")["rows"]
    expected = filter_names(studio.bended.weight_names, "decoder.*weight")
    assert [r["name"] for r in got] == expected and expected
    w = studio.bended.weight(expected[0])
    assert got[0]["shape"] == list(w.shape)
    assert got[0]["max"] == pytest.approx(w.max().item(), rel=1e-5)
    assert got[0]["std"] == pytest.approx(w.std().item(), rel=1e-5)
    status, error = client.get("/api/weights?pattern=%5B")
    assert status == 400 and "pattern '[' is not a regular expression" in error["error"]


def test_weights_show_bent_values(client: Client, studio: Studio) -> None:
    name = "decoder.0.weight"
    before = client.ok("GET", "/api/weights?pattern=decoder%5C.0%5C.weight")["rows"][0]
    client.ok(
        "POST",
        "/api/bendings",
        {
            "callback": {"class": "Scale", "args": {"scale": 2.0}},
            "patterns": [r"decoder\.0\.weight"],
        },
    )
    after = client.ok("GET", "/api/weights?pattern=decoder%5C.0%5C.weight")["rows"][0]
    assert after["bent"] and not before["bent"]
    assert after["max"] == pytest.approx(2 * before["max"], rel=1e-5)
    assert torch.equal(studio.bended.module.state_dict()[name], tiny_studio_weights()[name])


def tiny_studio_weights() -> dict[str, torch.Tensor]:
    return tb.models.load("tiny_rave").state_dict()


def test_activations_filter_as_python_does(client: Client, studio: Studio) -> None:
    rows = client.ok("GET", "/api/activations")["rows"]
    assert [r["name"] for r in rows] == [a.name for a in studio.bended.activations()]
    got = client.ok("GET", "/api/activations?pattern=decoder")["rows"]
    assert [r["name"] for r in got] == [a.name for a in studio.bended.activations(flt="decoder")]
    assert got[0]["shape"] == list(studio.bended.activation_shape(got[0]["name"]))
    status, error = client.get("/api/activations?pattern=(")
    assert status == 400 and "not a regular expression" in error["error"]


# -- statistics --------------------------------------------------------------------------------


def test_activation_statistics_are_those_of_the_model_streaming_the_sound(
    client: Client, studio: Studio
) -> None:
    got = client.ok("GET", "/api/stats/activation?name=encoder_0")
    # The same activation taken by a forward hook on the plain model, streaming block by block.
    model = tb.models.load("tiny_rave").set_streaming(True)
    seen: list[torch.Tensor] = []
    model.encoder[0].register_forward_hook(lambda m, i, o: seen.append(o.detach()))
    sound = studio.library.get(studio.current).audio[:, : int(2.0 * 44100)]
    Stream(model, block_size=8192, check=False).process(sound)  # only the sound
    expected = torch.cat(seen, -1)
    assert got["shape"] == list(expected.shape) and got["sound"] == studio.current
    assert got["mean"] == pytest.approx(expected.mean().item(), abs=1e-6)
    assert got["std"] == pytest.approx(expected.std().item(), rel=1e-4)
    assert got["max"] == pytest.approx(expected.max().item(), rel=1e-4)
    picture = got["picture"]
    assert (picture["rows"], picture["cols"]) == (64, 256)
    import base64

    assert len(base64.b64decode(picture["data"])) == 64 * 256


def test_activation_statistics_are_taken_bent(client: Client) -> None:
    plain = client.ok("GET", "/api/stats/activation?name=encoder_1")
    client.ok(
        "POST",
        "/api/bendings",
        {"callback": {"class": "Scale", "args": {"scale": 0.0}}, "patterns": ["encoder_1"]},
    )
    bent = client.ok("GET", "/api/stats/activation?name=encoder_1")
    assert plain["std"] > 0 and bent["std"] == 0.0 and bent["max"] == 0.0


def test_an_activation_panel_gives_its_health_against_the_unbent_run(
    client: Client, studio: Studio
) -> None:
    from torchbend.audio.stream import reset_cache

    plain = client.ok("GET", "/api/stats/activation?name=encoder_1")["health"]
    assert plain["problem"] is None and plain["growth_db"] == 0.0 and plain["growth"] == "+0.0 dB"
    assert plain["unbent"] == plain["bended"] and plain["bended"]["dead"] == 0.0
    client.ok(
        "POST",
        "/api/bendings",
        {"callback": {"class": "Scale", "args": {"scale": 0.0}}, "patterns": ["encoder_1"]},
    )
    bent = client.ok("GET", "/api/stats/activation?name=encoder_1")["health"]
    assert bent["problem"] == "silent" and bent["growth"] == "-inf dB" and bent["bent"]
    assert bent["bended"]["rms"] == 0.0 and bent["bended"]["dead"] == 1.0
    # What Python's probe gives on the sound's first block, both runs from a clean state.
    model = studio.bended.module
    first = studio.library.get(studio.current).audio[None, :, :8192]
    row = tb.discover.health(
        studio.bended, first, nodes="encoder_1$", reset=lambda: reset_cache(model)
    ).rows[0]
    assert row.unbent is not None and bent["unbent"]["rms"] == pytest.approx(row.unbent.rms)


# -- auditions ---------------------------------------------------------------------------------

STEP = 1 / 32768
"""The WAV files are 16-bit: a sample read back is within one step of what was written."""


def test_a_channel_soloed_or_bypassed_is_the_render_with_it_bent(
    client: Client, studio: Studio
) -> None:
    from torchbend.discover.audition import auditioning

    client.ok("POST", "/api/bendings", MASK)
    config = client.ok("GET", "/api/config")["config"]
    audio = studio.library.get(studio.current).audio[:, :11025]
    before, _ = studio.render_with(studio.bended, audio, "the bent model")
    got = {}
    for mode in ("solo", "bypass"):
        status, data = client.get(
            f"/api/audition?name=decoder_1&channel=3&mode={mode}&seconds=0.25"
        )
        assert status == 200, data
        got[mode], rate = decode_wav(data)
    with auditioning(studio.bended, "decoder_1", 3, "solo"):
        expected, _ = studio.render_with(studio.bended, audio, "solo")
    assert rate == 44100 and got["solo"].shape == expected.shape == (1, 11025)
    assert (got["solo"] - expected).abs().max() <= STEP
    assert (got["solo"] - got["bypass"]).abs().max() > 0.01
    assert (got["solo"] - before).abs().max() > 0.01
    assert client.ok("GET", "/api/config")["config"] == config
    after, _ = studio.render_with(studio.bended, audio, "the bent model")
    assert torch.equal(after, before)


def test_an_activation_plays_as_a_sound(client: Client, studio: Studio) -> None:
    from torchbend.discover.audition import as_audio

    status, data = client.get("/api/audition/activation?name=encoder_1&channel=2")
    assert status == 200, data
    got, rate = decode_wav(data)
    audio = studio.library.get(studio.current).audio[:, : int(2.0 * 44100)]
    value, length = studio.activation_on("encoder_1", "forward", audio)
    assert length == 11 * 8192 and value.shape[-1] == 11 * 512  # by blocks of 8192
    expected = as_audio(value, length, 44100, 2)[..., : audio.shape[-1]]
    assert rate == 44100 and got.shape == expected.shape
    assert (got - expected).abs().max() <= STEP and got.abs().max() > 0.4


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/audition?name=decodr_1", 404, "did you mean 'decoder_1'"),
        ("/api/audition?name=decoder_1&channel=64", 422, "it has 64 channels along axis 1"),
        ("/api/audition?name=decoder_1&mode=mute", 400, "'mode' is one of solo, bypass"),
        ("/api/audition?name=decoder_1&channel=x", 400, "channel is a whole number"),
        ("/api/audition?name=decoder_1&seconds=-1", 400, "'seconds' is a number of seconds"),
        ("/api/audition", 400, "give the name"),
        ("/api/audition/activation?name=encoder_1&channel=-65", 422, "has 64 channels"),
        ("/api/audition/activation?name=encoder_1&fn=decode", 404, "no traced method"),
    ],
)
def test_auditions_of_what_does_not_exist(client: Client, path: str, status: int, message: str):
    got_status, error = client.get(path)
    assert got_status == status and message in error["error"], error


def test_weight_statistics(client: Client, studio: Studio) -> None:
    got = client.ok("GET", "/api/stats/weight?name=encoder.0.weight")
    w = studio.bended.weight("encoder.0.weight")
    assert got["kind"] == "weight" and got["shape"] == list(w.shape)
    assert got["min"] == pytest.approx(w.min().item(), rel=1e-5)
    assert got["picture"]["rows"] == 64 and got["picture"]["cols"] == 48


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/stats/activation?name=encoder0", 404, "did you mean 'encoder_0'"),
        ("/api/stats/activation", 400, "give the name"),
        ("/api/stats/activation?name=encoder_0&fn=decode", 404, "no traced method"),
        ("/api/stats/weight?name=encoder.0.wieght", 404, "did you mean 'encoder.0.weight'"),
    ],
)
def test_statistics_of_what_does_not_exist(client: Client, path: str, status: int, message: str):
    got_status, error = client.get(path)
    assert got_status == status and message in error["error"]


# -- callbacks ---------------------------------------------------------------------------------


def test_callback_forms_build_their_callbacks_from_their_defaults(client: Client) -> None:
    forms = client.ok("GET", "/api/callbacks")["callbacks"]
    assert [f["name"] for f in forms] == [n for n in FORM_CALLBACKS if n not in NOT_IN_A_FORM]
    assert set(NOT_IN_A_FORM) == {"Gains", "Steer"}  # built by the Discover tab's knobs
    assert "Lambda" not in FORM_CALLBACKS and "Mask" in FORM_CALLBACKS
    for form in forms:
        args = {a["name"]: a["default"] for a in form["args"] if not a["required"]}
        if any(a["required"] for a in form["args"]):
            assert form["name"] == "Rewire"  # its source is an activation to name
            continue
        FORM_CALLBACKS[form["name"]](**args)
    mask = next(f for f in forms if f["name"] == "Mask")
    prob = next(a for a in mask["args"] if a["name"] == "prob")
    assert (prob["kind"], prob["low"], prob["high"], prob["neutral"]) == ("float", 0.0, 1.0, 0.0)
    assert prob["controllable"] and mask["doc"].startswith("Zero each element")
    dim = next(a for a in mask["args"] if a["name"] == "dim")
    assert dim["kind"] == "json" and not dim["controllable"]


# -- bending -----------------------------------------------------------------------------------


def test_attach_move_remove_undo_redo_reset(client: Client, studio: Studio) -> None:
    scale = {"callback": {"class": "Scale", "args": {"scale": 0.5}}, "patterns": ["decoder_1"]}
    state = client.ok("POST", "/api/bendings", MASK)
    assert state["keys"] == [["forward:encoder_0"]] and state["undo"] == 1
    state = client.ok("POST", "/api/bendings", scale)
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Mask", "Scale"]
    state = client.ok("POST", "/api/bendings/1/move", {"to": 0})
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Scale", "Mask"]
    assert studio.bended.bending_config().items[0].callback.__class__ is tb.Scale
    state = client.ok("DELETE", "/api/bendings/0")
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Mask"]
    state = client.ok("POST", "/api/undo")
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Scale", "Mask"]
    assert state["redo"] == 1
    state = client.ok("POST", "/api/redo")
    assert [b["callback"]["class"] for b in state["config"]["bendings"]] == ["Mask"]
    state = client.ok("POST", "/api/reset")
    assert state["config"]["bendings"] == [] and studio.bended.bended_keys() == []
    for _ in range(5):
        state = client.ok("POST", "/api/undo")
    assert state["config"]["bendings"] == [] and state["undo"] == 0
    status, error = client.post("/api/undo")
    assert status == 400 and error["error"] == "nothing to undo"


def test_a_control_becomes_a_knob_and_moves_live(client: Client, studio: Studio) -> None:
    bending = {
        "callback": {"class": "Mask", "args": {"prob": {"control": "mask_prob"}, "seed": 0}},
        "patterns": ["encoder_0"],
        "controls": [{"name": "mask_prob", "value": 0.3, "range": [0.0, 1.0]}],
    }
    state = client.ok("POST", "/api/bendings", bending)
    (control,) = state["controls"]
    assert control["name"] == "mask_prob" and control["value"] == 0.3
    assert control["range"] == [0.0, 1.0] and control["widget"]["kind"] == "knob"
    assert client.ok("POST", "/api/controls/mask_prob", {"value": 0.8}) == {
        "name": "mask_prob",
        "value": 0.8,
    }
    assert studio.bended.controllables["mask_prob"].get() == 0.8
    assert client.ok("GET", "/api/config")["config"]["controls"][0]["value"] == 0.8
    for body, status, message in [
        ({"value": 3.0}, 400, "mask_prob"),
        ({"value": "loud"}, 400, "takes a number"),
        ({}, 400, "no 'value'"),
    ]:
        got, error = client.post("/api/controls/mask_prob", body)
        assert got == status and message in error["error"], error
    got, error = client.post("/api/controls/mask_prb", {"value": 0.1})
    assert got == 404 and "did you mean 'mask_prob'" in error["error"]
    state = client.ok("DELETE", "/api/bendings/0")
    assert state["controls"] == [] and state["config"]["controls"] == []
    got, error = client.post("/api/bendings", {**bending, "controls": bending["controls"] * 2})
    assert got == 400 and "control 0 is already named 'mask_prob'" in error["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"callback": {"class": "os:system", "args": {}}, "patterns": ["x"]},
            "no callback 'os:system'",
        ),
        ({"callback": {"class": "Lambda", "args": {}}, "patterns": ["x"]}, "never sends code"),
        ({"callback": {"class": "Maks", "args": {}}, "patterns": ["x"]}, "did you mean 'Mask'"),
        ({**MASK, "callback": {"class": "Mask", "args": {"prob": 3}}}, "between 0 and 1, got 3"),
        ({**MASK, "callback": {"class": "Mask", "args": {"p": 3}}}, "does not take"),
        ({**MASK, "patterns": ["nothing_here"]}, "matched no weight or activation"),
        ({**MASK, "patterns": "encoder_0"}, "patterns"),
        ({**MASK, "colour": "red"}, "no field ['colour']"),
        ([1, 2], "a bending is a JSON object"),
        ({**MASK, "callback": {"class": "Mask", "args": {"prob": {"control": "knob"}}}}, "knob"),
    ],
)
def test_bad_bendings_are_refused_and_change_nothing(client: Client, body, message: str) -> None:
    before = client.ok("POST", "/api/bendings", MASK)
    status, error = client.post("/api/bendings", body)
    assert status == 400 and message in error["error"], error
    assert client.ok("GET", "/api/config") == before


def test_bad_bodies_and_indices(client: Client) -> None:
    status, error = client.post("/api/bendings", raw=b"{not json")
    assert status == 400 and "not valid JSON" in error["error"]
    status, error = client.post("/api/bendings")
    assert status == 400 and "takes a JSON body" in error["error"]
    status, error = client.declared("/api/bendings", 3 * 1024 * 1024)
    assert status == 413 and "takes at most 2097152" in error["error"]
    status, error = client.delete("/api/bendings/0")
    assert status == 404 and "nothing is bent" in error["error"]
    client.ok("POST", "/api/bendings", MASK)
    status, error = client.delete("/api/bendings/3")
    assert status == 404 and "there are 1 (0 to 0)" in error["error"]
    status, error = client.delete("/api/bendings/-1")
    assert status in (400, 404)
    status, error = client.post("/api/bendings/0/move", {"to": "top"})
    assert status == 400 and "'to' is the new position" in error["error"]
    status, error = client.get("/api/bendings")
    assert status == 405 and "does not take GET" in error["error"]
    status, error = client.get("/api/nowhere")
    assert status == 404 and "the API is under /api/" in error["error"]


def test_json_nested_too_deep_is_refused_naming_the_limit(client: Client) -> None:
    before = client.ok("GET", "/api/config")
    for raw in (b"[" * 5000 + b"]" * 5000, json.dumps({"bendings": _nested(40)}).encode()):
        for method, path in (("POST", "/api/bendings"), ("PUT", "/api/config")):
            status, error = client.request(method, path, raw=raw)
            assert status == 400, (path, error)
            assert "nest more than 32 levels deep" in error["error"], error
    assert client.ok("GET", "/api/config") == before


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_config_saved_by_python_loads_in_the_page_and_back(
    client: Client, studio: Studio, tmp_path: Path
) -> None:
    knob = tb.BendingParameter("amount", 0.4, range=(0.0, 1.0))
    config = tb.BendingConfig((tb.Noise(knob, seed=3), "decoder_1$"), (tb.Scale(0.5), "encoder_2"))
    path = tmp_path / "python.json"
    config.save(path)
    state = client.ok("PUT", "/api/config", json.loads(path.read_text()))
    assert state["keys"] == [["forward:decoder_1"], ["forward:encoder_2"]]
    assert state["controls"][0]["name"] == "amount"
    client.ok("POST", "/api/controls/amount", {"value": 0.9})
    assert client.ok("POST", "/api/configs", {"name": "noisy-1"})["name"] == "noisy-1"
    assert client.ok("GET", "/api/configs") == {"configs": ["noisy-1"]}
    saved = client.ok("GET", "/api/configs/noisy-1")
    assert saved == json.loads((studio.output / "configs" / "noisy-1.json").read_text())
    loaded = tb.BendingConfig.load(studio.output / "configs" / "noisy-1.json")
    assert loaded.controls()[0].get() == 0.9 and len(loaded) == 2
    for body, message in [
        ([], "is a JSON object"),
        ({"bendings": "all"}, "bendings"),
        (
            {"bendings": [{"callback": {"class": "tests.evil:Bad"}, "patterns": ["x"]}]},
            "never a class",
        ),
    ]:
        status, error = client.put("/api/config", body)
        assert status == 400 and message in error["error"], error
    for name, status in [
        ("../etc", 404),
        ("..%2Fetc", 404),
        ("a%20b", 400),
        ("x" * 65, 400),
        ("missing", 404),
    ]:
        got, error = client.get(f"/api/configs/{name}")
        assert got == status, (name, error)
    got, error = client.post("/api/configs", {"name": "../../escape"})
    assert got == 400 and "letters, digits" in error["error"]
    assert not (studio.output.parent / "escape.json").exists()


# -- sounds ------------------------------------------------------------------------------------


def test_sounds_list_the_shipped_ones(client: Client) -> None:
    got = client.ok("GET", "/api/sounds")
    shipped = sorted(path.stem for path in SOUNDS.glob("*.wav"))
    assert [s["id"] for s in got["sounds"]] == shipped and "voice" in shipped
    assert all(s["source"] == "shipped" and s["sample_rate"] == 44100 for s in got["sounds"])
    assert got["current"] == shipped[-1]  # the last one opens
    assert got["limits"]["types"] == [".wav", ".flac", ".ogg"]
    assert client.ok("POST", "/api/sounds/current", {"id": "bass"}) == {"current": "bass"}
    status, error = client.post("/api/sounds/current", {"id": "base"})
    assert status == 404 and "did you mean 'bass'" in error["error"]


def test_uploads_are_checked(tmp_path: Path) -> None:
    studio = tiny_studio(tmp_path / "out", limits=Limits(bytes=200_000, seconds=1.0))
    with served(studio) as server:
        client = Client(server.url)
        sound = client.ok("POST", "/api/sounds?name=tone.wav", raw=wav_bytes(0.5, 22050, 2))
        assert sound["source"] == "upload" and sound["channels"] == 2
        assert sound["seconds"] == pytest.approx(0.5) and sound["sample_rate"] == 44100
        assert client.ok("GET", "/api/sounds")["current"] == sound["id"]
        cases = [
            ("tone.txt", wav_bytes(0.5), 400, "ending in .wav, .flac, .ogg"),
            ("tone.wav", b"RIFF not really", 400, "not an audio file"),
            ("tone.wav", b"", 400, "is empty"),
            ("long.wav", wav_bytes(1.5), 400, "sounds are at most 1 s"),
            ("big.wav", wav_bytes(3.0), 413, "at most 200000"),
            ("", wav_bytes(0.1), 400, "give the file's name"),
            ("tone%00.wav", wav_bytes(0.1), 400, "holds no control characters"),
            ("to%0Ane.wav", wav_bytes(0.1), 400, "holds no control characters"),
        ]
        for name, data, status, message in cases:
            got, error = client.post(f"/api/sounds?name={name}", raw=data)
            assert got == status and message in error["error"], (name, error)
        escaped = client.ok("POST", "/api/sounds?name=../../../up.wav", raw=wav_bytes(0.2))
        assert escaped["name"] == "up.wav"
        files = sorted(p.name for p in (studio.output / "uploads").iterdir())
        assert files == [f"{sound['id']}.wav", f"{escaped['id']}.wav"]
        assert not (tmp_path / "up.wav").exists()
        rendered = client.ok("POST", "/api/render", {"sound": escaped["id"]})
        assert rendered["seconds"] == pytest.approx(0.2, abs=1e-3)


# -- renders -----------------------------------------------------------------------------------


def test_render_gives_the_three_files_and_python_gives_the_same_bent_audio(
    client: Client, studio: Studio
) -> None:
    unbent = client.ok("POST", "/api/render", {"sound": "drums", "seconds": 1.3})
    assert unbent["differs"] is False and unbent["distance"] == 0.0
    client.ok("POST", "/api/bendings", MASK)
    got = client.ok("POST", "/api/render", {"sound": "drums", "seconds": 1.3})
    assert got["differs"] is True and got["distance"] > 0.1 and got["sound"] == "drums"
    files = {}
    for kind in ("input", "unbent", "bended"):
        status, data = client.get(got["audio"][kind])
        assert status == 200
        files[kind], rate = decode_wav(data)
        assert rate == 44100 and files[kind].shape == (1, int(1.3 * 44100))
        written = studio.output / "renders" / f"{studio._session}-{got['id']}-drums-{kind}.wav"
        assert written.read_bytes() == data
        view = got["views"][kind]
        assert len(view["waveform"]["min"]) == 400 and view["spectrogram"]["rows"] == 96
    # The same configuration, saved and loaded in Python, renders the same file.
    client.ok("POST", "/api/configs", {"name": "masked"})
    bended = tb.BendedModule(tb.models.load("tiny_rave").set_streaming(True))
    bended.trace(x=torch.zeros(1, 1, 8192))
    bended.bend(tb.BendingConfig.load(studio.output / "configs" / "masked.json"))
    audio = studio.library.get("drums").audio[:, : int(1.3 * 44100)]
    files_stage = tb.audio.Safety(44100, ceiling=FILE_CEILING)  # the studio's default
    python, _ = render(bended, audio, 44100, "forward", 8192, safety=files_stage)
    assert torch.allclose(files["bended"], python.clamp(-1, 1), atol=1 / 32767)
    assert got["safety"].startswith("safety: ")
    assert not torch.allclose(files["bended"], files["unbent"], atol=1e-3)


def test_the_last_render_is_kept_for_a_reloaded_page(client: Client) -> None:
    assert client.ok("GET", "/api/render") == {"render": None}
    client.ok("POST", "/api/render", {"seconds": 0.2})
    last = client.ok("POST", "/api/render", {"sound": "bass", "seconds": 0.3})
    assert client.ok("GET", "/api/render") == {"render": last}
    assert client.get(last["audio"]["bended"])[0] == 200


def test_a_model_that_gives_a_dict_is_refused_at_start_naming_what_would_render(
    tmp_path: Path,
) -> None:
    from tests.studio.models import dict_output

    for block_size in (None, 2048):
        with pytest.raises(StudioError) as refused:
            Studio(dict_output(), "mine", output=tmp_path / "out", block_size=block_size)
        message = str(refused.value)
        assert "DictOutput.forward gives a dict with keys ['audio', 'envelope']" in message
        assert "--fn NAME" in message and "returns its entry 'audio'" in message
        assert "torchbend bend" not in message


def test_render_bad_requests(client: Client) -> None:
    for body, status, message in [
        ({"sound": "bas"}, 404, "did you mean 'bass'"),
        ({"seconds": -1}, 400, "'seconds' is a number of seconds above 0"),
        ({"seconds": "all"}, 400, "'seconds'"),
        ({"sound": 3}, 400, "'sound' names a sound"),
    ]:
        got, error = client.post("/api/render", body)
        assert got == status and message in error["error"], error
    assert client.get("/api/audio/r99/bended.wav")[0] == 404
    rendered = client.ok("POST", "/api/render", {"seconds": 0.2})
    status, part = client.get(rendered["audio"]["bended"], headers={"Range": "bytes=0-99"})
    assert status == 206 and len(part) == 100  # the page's player can seek
    got, error = client.get(f"/api/audio/{rendered['id']}/secret.wav")
    assert got == 404 and "input" in error["error"]


class Fragile(torch.nn.Module):
    """Takes at most one second of audio: its own code raises beyond."""

    sample_rate = 44100

    def __init__(self) -> None:
        super().__init__()
        self.gain = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] > 44100:
            raise ValueError("Fragile takes at most one second")
        return x * self.gain


def test_a_render_that_crashes_leaves_the_server_up(tmp_path: Path) -> None:
    import soundfile

    short = tmp_path / "short.wav"
    soundfile.write(short, torch.zeros(4410).numpy(), 44100)
    studio = Studio(Fragile(), "fragile", output=tmp_path / "out", sounds=[short], shipped=False)
    with served(studio) as server:
        client = Client(server.url)
        assert client.ok("POST", "/api/render")["seconds"] == pytest.approx(0.1)
        long = client.ok("POST", "/api/sounds?name=long.wav", raw=wav_bytes(2.0))
        status, error = client.post("/api/render", {"sound": long["id"]})
        assert status == 422 and "Fragile takes at most one second" in error["error"]
        assert client.ok("POST", "/api/render", {"sound": "short"})["sound"] == "short"
        assert client.ok("GET", "/api/model")["model"] == "fragile"


# -- live --------------------------------------------------------------------------------------


def live_session(url: str, messages: list[dict | str | bytes], replies: int) -> list[bytes | dict]:
    import websockets

    async def talk() -> list[bytes | dict]:
        got: list[bytes | dict] = []
        async with websockets.connect(url) as ws:
            for message in messages:
                text = isinstance(message, (str, bytes))  # bytes: a binary frame
                await ws.send(message if text else json.dumps(message))
            for _ in range(replies):
                reply = await asyncio.wait_for(ws.recv(), 60)  # never hang a test run
                got.append(reply if isinstance(reply, bytes) else json.loads(reply))
        return got

    return asyncio.run(talk())


def test_live_streams_the_bent_model_block_by_block(client: Client, studio: Studio) -> None:
    client.ok("POST", "/api/bendings", MASK)
    url = client.base.replace("http", "ws") + "/api/live"
    start = {"type": "start", "sound": "bass"}
    got = live_session(url, [start, {"type": "more", "count": 3}], 7)
    started, blocks = got[0], [g for g in got[1:] if isinstance(g, bytes)]
    assert started == {
        "type": "started",
        "sound": "bass",
        "sample_rate": 44100,
        "block": 8192,
        # a block of buffering and the model's own latency
        "latency_ms": pytest.approx(
            1000 * Stream(studio.bended, block_size=8192).latency / 44100, abs=0.01
        ),
        "warning": None,  # the model streams exactly
    }
    stats = [g for g in got[1:] if isinstance(g, dict)]
    assert [s["index"] for s in stats] == [0, 1, 2] and all(s["compute_ms"] > 0 for s in stats)
    samples = torch.tensor(
        [struct.unpack(f"<{8192}f", b) for b in blocks], dtype=torch.float32
    ).reshape(1, -1)
    expected = Stream(studio.bended, block_size=8192, safety=True)
    expected.reset()
    sound = studio.library.get("bass").audio[:, : 3 * 8192]
    assert torch.allclose(samples, expected.process(sound), atol=1e-6)
    # A Mask drawn per element holds the traced shape: another block size is refused, saying so.
    got = live_session(url, [{**start, "block": 4096}, {"type": "more"}], 2)
    assert got[1]["type"] == "error" and "Give the callback dim=" in got[1]["error"]


def test_live_takes_controls_and_refuses_bad_messages(client: Client, studio: Studio) -> None:
    client.ok(
        "POST",
        "/api/bendings",
        {
            "callback": {"class": "Scale", "args": {"scale": {"control": "gain"}}},
            "patterns": ["decoder_2"],
            "controls": [{"name": "gain", "value": 1.0, "range": [0.0, 2.0]}],
        },
    )
    url = client.base.replace("http", "ws") + "/api/live"
    messages = [
        {"type": "more"},
        "not json",
        {"type": "dance"},
        {"type": "start", "block": 100},
        {"type": "start"},
        {"type": "more", "count": 0},
        {"type": "control", "name": "gain", "value": 1.5},
        {"type": "control", "name": "gian", "value": 1.5},
        {"type": "stop"},
    ]
    got = live_session(url, messages, 9)
    errors = [g["error"] for g in got if isinstance(g, dict) and g["type"] == "error"]
    assert "before asking for blocks" in errors[0] and "not valid JSON" in errors[1]
    assert "no message type 'dance'" in errors[2] and "100" in errors[3]
    assert "'count' is 1 to 16" in errors[4] and "did you mean 'gain'" in errors[5]
    assert {"type": "control", "name": "gain", "value": 1.5} in got
    assert got[-1] == {"type": "stopped"}
    assert studio.bended.controllables["gain"].get() == 1.5


def test_live_answers_binary_and_too_deep_messages_and_stays_open(client: Client) -> None:
    url = client.base.replace("http", "ws") + "/api/live"
    deep = "[" * 50_000 + "]" * 50_000
    messages = [b"\x00\x01binary", deep, json.dumps({"type": _nested(40)}), {"type": "stop"}]
    got = live_session(url, messages, 4)
    assert [g["type"] for g in got] == ["error", "error", "error", "stopped"]  # type: ignore
    assert "takes JSON text messages, got a binary one of 8 bytes" in got[0]["error"]  # type: ignore
    for reply in got[1:3]:
        assert "nest more than 32 levels deep" in reply["error"]  # type: ignore


def test_a_message_too_large_closes_the_live_socket_with_a_code(client: Client) -> None:
    import websockets

    async def talk() -> tuple[int | None, str]:
        async with websockets.connect(client.base.replace("http", "ws") + "/api/live") as ws:
            await ws.send(" " * (3 * 1024 * 1024))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 60)
        frame = closed.value.rcvd
        return (frame.code, frame.reason) if frame is not None else (None, "")

    code, _ = asyncio.run(talk())
    assert code == 1009  # message too big: a close frame, not a dropped connection


# -- safety ------------------------------------------------------------------------------------


def test_only_this_machine_by_default(studio: Studio) -> None:
    with served(studio) as server:
        client = Client(server.url)
        assert client.get("/api/model")[0] == 200
        status, error = client.get("/api/model", headers={"Host": f"evil.example:{server.port}"})
        assert status == 403 and "answers only at" in error["error"]
    with pytest.raises(StudioError, match="add --remote"):
        StudioServer(studio, host="0.0.0.0", port=0)
    remote = StudioServer(studio, host="0.0.0.0", port=0, remote=True).start()
    try:
        assert remote.token and len(remote.token) >= 16 and f"?token={remote.token}" in remote.url
        client = Client(f"http://127.0.0.1:{remote.port}/")
        status, error = client.get("/api/model")
        assert status == 401 and "needs its token" in error["error"]
        assert client.get(f"/api/model?token={remote.token}")[0] == 200
    finally:
        remote.stop()
    with pytest.raises(StudioError, match="at least 8"):
        StudioServer(studio, port=0, token="short")


def test_remote_on_a_loopback_host_needs_a_token(studio: Studio) -> None:
    """An SSH tunnel's end is a loopback port reached from other machines, by the tunnel's
    port: with --remote it answers any Host, and only with the token."""
    assert check_bind("127.0.0.1", None, remote=True) is not None
    assert check_bind("127.0.0.1", None, remote=False) is None
    server = StudioServer(studio, host="127.0.0.1", port=0, remote=True).start()
    try:
        assert server.token and len(server.token) >= 16 and f"?token={server.token}" in server.url
        client = Client(f"http://127.0.0.1:{server.port}/")
        tunnel = {"Host": "localhost:9000"}
        status, error = client.get("/api/model", headers=tunnel)
        assert status == 401 and "needs its token" in error["error"]
        assert client.get(f"/api/model?token={server.token}", headers=tunnel)[0] == 200
    finally:
        server.stop()


def test_a_token_guards_every_request(studio: Studio) -> None:
    import websockets

    with served(studio, token="s3cret-token") as server:
        client = Client(server.url)
        status, error = client.get("/api/model")
        assert status == 401 and "needs its token" in error["error"]
        assert client.get("/")[0] == 200  # the page: no data, it reads the token from its URL
        assert client.get("/static/app.js")[0] == 200
        assert client.get("/static/../api/model")[0] == 401
        assert client.get("/api/audio/r1/bended.wav")[0] == 401
        assert client.get("/api/model?token=wrong-token")[0] == 401
        assert client.get("/api/model?token=s3cret-token")[0] == 200
        assert client.get("/api/model", headers={"X-Torchbend-Token": "s3cret-token"})[0] == 200
        cookie = {"Cookie": "other=1; torchbend_token=s3cret-token"}
        assert client.get("/api/model", headers=cookie)[0] == 200  # the atlas's frame
        assert client.get("/api/model", headers={"Cookie": "torchbend_token=nope"})[0] == 401
        assert client.get("/api/model", headers={"Cookie": 'torchbend_token="s3c'})[0] == 401
        url = client.base.replace("http", "ws") + "/api/live"
        with pytest.raises(websockets.exceptions.WebSocketException):
            live_session(url, [{"type": "start"}], 1)
        assert live_session(url + "?token=s3cret-token", [{"type": "start"}], 1)[0]["type"] == (
            "started"
        )


def test_the_vendored_library_is_public_as_the_page_is(studio: Studio) -> None:
    # graph.js imports it with no header: like /static/, it holds no data and needs no token
    with served(studio, token="s3cret-token") as server:
        client = Client(server.url)
        assert client.get("/vendor/dagre-3.1.3/dagre.esm.js")[0] == 200
        assert client.get("/vendor/dagre-3.1.3/LICENSE")[0] == 200
        assert client.get("/vendor/../api/model")[0] == 401
        assert client.get("/vendor/..%2Fapi")[0] in (401, 404)
        assert client.get("/vendor/dagre-3.1.3/../../api/model")[0] == 401


def test_files_only_from_the_package_and_the_sweep(tmp_path: Path, studio: Studio) -> None:
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "atlas.html").write_text("<html>atlas</html>")
    (tmp_path / "secret.txt").write_text("CONTENTS-OF-THE-SECRET")
    with_sweep = tiny_studio(tmp_path / "out2", sweep=tmp_path / "sweep")
    with served(with_sweep) as server:
        client = Client(server.url)
        assert client.ok("GET", "/api/model")["sweep"] == "/sweep/atlas.html"
        status, page = client.get("/sweep/atlas.html")
        assert status == 200 and b"atlas" in page
        for path in [
            "/sweep/../secret.txt",
            "/sweep/%2e%2e/secret.txt",
            "/sweep/..%2fsecret.txt",
            "/static/..%2fserver.py",
            "/static/server.py",
            "/static/%2e%2e%2fsession.py",
        ]:
            status, body = client.get(path)
            assert status == 404 and "CONTENTS" not in json.dumps(body), path
    with pytest.raises(StudioError, match="torchbend sweep map"):
        tiny_studio(tmp_path / "out3", sweep=tmp_path)
    with served(studio) as server:
        assert Client(server.url).get("/sweep/atlas.html")[0] == 404


def test_the_page_comes_from_the_package_alone(client: Client) -> None:
    status, page = client.get("/")
    assert status == 200 and b"/static/app.js" in page
    names = sorted(p.name for p in STATIC.iterdir())
    assert {"index.html", "app.js", "graph.js", "studio.css"} <= set(names)
    for name in names:
        text = (STATIC / name).read_text()
        assert not re.search(r"https?://", text), f"{name} names an address on the internet"
        assert client.get(f"/static/{name}")[0] == 200


def test_the_layout_library_is_vendored_with_its_licence(client: Client) -> None:
    # graph.js imports dagre from /vendor/ (outside static/, a third party's files): one pinned
    # version, its licence beside it, served by the studio, no address loaded at run time
    imported = re.findall(r'from "\.\./vendor/([^"]+)"', (STATIC / "graph.js").read_text())
    assert imported == ["dagre-3.1.3/dagre.esm.js"]
    folder = VENDOR / imported[0].split("/")[0]
    assert [p.name for p in VENDOR.iterdir()] == [folder.name]
    assert (
        "MIT" in (folder / "LICENSE").read_text()
        or "Permission is hereby granted" in (folder / "LICENSE").read_text()
    )
    for path in sorted(folder.iterdir()):
        text = path.read_text()
        assert not re.search(r"https?://", text), f"{path.name} names an address on the internet"
        assert client.get(f"/vendor/{folder.name}/{path.name}")[0] == 200
    library = (folder / "dagre.esm.js").read_text()
    assert not re.search(r"\bimport\s*[({\"'*]|sourceMappingURL", library)  # self-contained


def test_bending_never_changes_the_wrapped_weights(client: Client, studio: Studio) -> None:
    before = {k: v.clone() for k, v in studio.bended.module.state_dict().items()}
    client.ok(
        "POST",
        "/api/bendings",
        {"callback": {"class": "Noise", "args": {"std": 1.0, "seed": 1}}, "patterns": [".*weight"]},
    )
    client.ok("POST", "/api/render", {"seconds": 0.5})
    client.ok("POST", "/api/undo")
    after = studio.bended.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_second_session_in_the_same_folder_keeps_the_first_ones_files(tmp_path: Path) -> None:
    files = {}
    for session in range(2):
        studio = tiny_studio(tmp_path / "out")
        studio._session = f"session{session}"  # two sessions started in the same second
        with served(studio) as server:
            client = Client(server.url)
            sound = client.ok("POST", "/api/sounds?name=loop.wav", raw=wav_bytes(0.1 + session))
            rendered = client.ok("POST", "/api/render", {"sound": sound["id"]})
            files[session] = (sound["id"], studio.audio_file(rendered["id"], "input"))
    assert files[0][0] != files[1][0] and files[0][1] != files[1][1]
    first, _ = decode_wav(files[0][1].read_bytes())
    assert first.shape[-1] == int(0.1 * 44100)
    assert len(list((tmp_path / "out" / "uploads").iterdir())) == 2


def test_bendings_take_every_option_of_bend(client: Client, studio: Studio) -> None:
    state = client.ok(
        "POST",
        "/api/bendings",
        {
            **MASK,
            "blend": 0.5,
            "subset": {"fraction": 0.25, "dim": -2, "seed": 0},
            "window": {"start": 0, "end": 4096},
            "guard": {"finite": True},
        },
    )
    (bending,) = state["config"]["bendings"]
    assert bending["blend"] == 0.5 and bending["subset"]["fraction"] == 0.25
    assert bending["window"]["end"] == 4096 and "guard" in bending
    assert client.ok("POST", "/api/render", {"seconds": 0.3})["differs"] is True


def test_renders_are_files_to_listen_to_limited_unless_asked_raw(
    client: Client, studio: Studio
) -> None:
    """A bending that drives the model far past full scale: the written render stays under the
    files' ceiling and says what the stage did; raw (``safety=False``), it clips and is flagged."""
    loud = {"callback": {"class": "Scale", "args": {"scale": 50}}, "patterns": ["decoder_2$"]}
    client.ok("POST", "/api/bendings", loud)
    limited = client.ok("POST", "/api/render", {"sound": "drums", "seconds": 1.0})
    data, _ = decode_wav(client.get(limited["audio"]["bended"])[1])
    assert float(data.abs().max()) <= FILE_CEILING + 1 / 32767
    assert "clipping" not in limited["flags"] and "limited" in limited["safety"]
    studio.safety = False
    raw = client.ok("POST", "/api/render", {"sound": "drums", "seconds": 1.0})
    data, _ = decode_wav(client.get(raw["audio"]["bended"])[1])
    assert float(data.abs().max()) >= 32767 / 32768
    assert "clipping" in raw["flags"] and raw["safety"] is None


CHANNELS = {
    "callback": {"class": "Mask", "args": {"prob": 0.5, "seed": 0, "dim": -2}},
    "patterns": ["encoder_0"],
}


def test_the_export_writes_a_checked_nn_file_and_refuses_bad_names(client, studio):
    client.ok("POST", "/api/bendings", CHANNELS)
    got = client.ok("POST", "/api/export", {"name": "bent-1"})
    assert got["name"] == "bent-1.ts" and got["url"] == "/api/exports/bent-1.ts"
    assert (studio.output / "exports" / "bent-1.ts").is_file()
    assert "forward: 1 in (ratio 1) -> 1 out (ratio 1)" in got["report"]
    status, data = client.get(got["url"])
    assert status == 200 and data[:2] == b"PK"  # a TorchScript archive
    for bad in ("../up", "", 3, "a" * 65):
        status, reply = client.post("/api/export", {"name": bad})
        assert status == 400 and "1 to 64 letters, digits" in reply["error"], (bad, reply)
    status, reply = client.get("/api/exports/none.ts")
    assert status == 404 and "export one first" in reply["error"]
    client.ok("POST", "/api/bendings", MASK)  # a mask drawn over time: its graph reads the length
    status, reply = client.post("/api/export", {"name": "over-time"})
    assert status == 400 and "cannot be exported for nn~" in reply["error"]
    assert (
        "buffers of" in reply["error"] and not (studio.output / "exports" / "over-time.ts").exists()
    )


def test_live_says_when_the_model_clicks_at_block_edges(tmp_path: Path) -> None:
    import soundfile

    from tests.audio.stateless import Centred, built
    from torchbend.studio.playback import LiveStream

    short = tmp_path / "short.wav"
    soundfile.write(short, torch.zeros(4410).numpy(), 44100)
    studio = Studio(
        built(Centred), "centred", output=tmp_path / "out", sounds=[short], shipped=False
    )
    started = LiveStream(studio, "short", 1024).started()
    assert "Centred.forward does not stream: block by block at 1024" in started["warning"]
    assert "make_streaming" in started["warning"]
