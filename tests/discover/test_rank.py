"""Effect maps: the ranking finds the channels planted to move each descriptor, above
distractors and above random directions at the same node."""

from __future__ import annotations

import math

import pytest
import torch

import torchbend as tb
from torchbend.discover import rank
from torchbend.errors import DiscoveryError

from .planted import IDLE, PLANTED, RATE, SEVERAL, Planted

SOUND = torch.zeros(RATE * 3 // 20)
NODES = "^(level|tone|pitch|mixed|idle)$"


@pytest.fixture(scope="module")
def bended() -> tb.BendedModule:
    bended = tb.BendedModule(Planted())
    bended.trace(x=SOUND[None, None])
    return bended


@pytest.fixture(scope="module")
def rankings(bended: tb.BendedModule) -> dict[str, tb.discover.Ranking]:
    # One run of the probes; each descriptor's ranking is read from it.
    ranking = rank(bended, SOUND, descriptor="loudness", targets=NODES, rate=RATE, batch=80)
    return {name: ranking.by(name) for name in PLANTED}


@pytest.mark.parametrize("descriptor", sorted(PLANTED))
def test_the_planted_channel_ranks_in_its_descriptors_top_3(
    rankings: dict[str, tb.discover.Ranking], descriptor: str
) -> None:
    top = [(r.node, r.channel) for r in rankings[descriptor].top(3)]
    assert PLANTED[descriptor] in top
    assert not any(node == IDLE for node, _ in top)


@pytest.mark.parametrize("descriptor", sorted(PLANTED))
def test_the_random_direction_is_at_least_5_times_weaker_at_the_planted_node(
    rankings: dict[str, tb.discover.Ranking], descriptor: str
) -> None:
    node, channel = PLANTED[descriptor]
    row = next(r for r in rankings[descriptor].rows if (r.node, r.channel) == (node, channel))
    assert row.random_ratio >= 5.0
    assert abs(row.effect) >= 1.0  # at least one perceptible step per probe


def test_a_planted_channel_is_specific_and_the_distractor_that_does_two_things_is_not(
    rankings: dict[str, tb.discover.Ranking],
) -> None:
    rows = {(r.node, r.channel): r for r in rankings["brightness"].rows}
    assert rows[PLANTED["brightness"]].specificity > 3.0
    assert rows[SEVERAL].specificity < rows[PLANTED["brightness"]].specificity
    idle = [r for r in rankings["brightness"].rows if r.node == IDLE]
    assert idle and all(r.effect == 0.0 for r in idle)


def test_signs_say_which_way_the_descriptor_moves(
    rankings: dict[str, tb.discover.Ranking],
) -> None:
    # A push up of the level's channel is louder; of the pitch's, higher; of the tilt's,
    # brighter: each planted effect is positive.
    for descriptor, planted in PLANTED.items():
        row = next(r for r in rankings[descriptor].rows if (r.node, r.channel) == planted)
        assert row.effect > 0


def test_the_ranking_leaves_the_bendings_and_the_weights_as_they_were(
    bended: tb.BendedModule,
) -> None:
    weights = {k: v.clone() for k, v in bended.module.state_dict().items()}
    bended.bend(tb.Scale(0.5), "^tone$")
    before = bended(SOUND[None, None])
    rank(bended, SOUND, "loudness", targets="^level$", rate=RATE, randoms=1, batch=64)
    assert torch.equal(bended(SOUND[None, None]), before)
    assert [type(b.callback) for b in bended.bendings] == [tb.Scale]
    bended.reset()
    for key, value in bended.module.state_dict().items():
        assert torch.equal(value, weights[key])


def test_tables_records_progress_and_picture(bended: tb.BendedModule, tmp_path) -> None:
    seen = []
    ranking = rank(
        bended,
        {"a": SOUND},
        descriptor="pitch",
        targets=["^pitch$", "^idle$"],
        rate=RATE,
        randoms=1,
        batch=64,
        progress=lambda done, total, node: seen.append((done, total, node)),
    )
    assert seen == [(1, 2, "pitch"), (2, 2, "idle")]
    assert len(ranking.rows) == 64 and ranking.rows[0].node == "pitch"
    records = ranking.to_records()
    assert records[0]["node"] == "pitch" and records[0]["channel"] == 2
    assert math.isclose(records[0]["change_pitch"], ranking.rows[0].effect)
    text = str(ranking.table(5))
    assert "pitch" in text.splitlines()[2] and "vs random" in text
    assert [r.node for r in ranking.by_node()] == ["pitch", "idle"]
    pytest.importorskip("matplotlib")
    ranking.picture(str(tmp_path / "ranking.png"))
    assert (tmp_path / "ranking.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"descriptor": "sparkle"}, "unknown descriptor 'sparkle'"),
        ({"probe": "twist"}, "unknown probe 'twist'"),
        ({"targets": "^nothing$"}, "no activation of 'forward' matches"),
        ({"amount": 0.0}, "amount must be positive"),
    ],
)
def test_bad_requests_are_named(bended: tb.BendedModule, kwargs: dict, message: str) -> None:
    with pytest.raises(tb.TorchbendError, match=message):
        rank(bended, SOUND, rate=RATE, **kwargs)


def test_short_sounds_several_lengths_and_nodes_without_channels_are_refused(
    bended: tb.BendedModule,
) -> None:
    with pytest.raises(DiscoveryError, match="too short to describe"):
        rank(bended, torch.zeros(1000), rate=RATE)
    with pytest.raises(DiscoveryError, match="share one length"):
        rank(bended, [SOUND, torch.zeros(RATE // 2)], rate=RATE)
    flat = [n for n in bended.activation_names() if len(bended.activation_shape(n)) == 1]
    if flat:
        with pytest.raises(DiscoveryError, match="no channel axis"):
            rank(bended, SOUND, targets=f"^{flat[0]}$", rate=RATE)


def test_on_tiny_ddsp_the_named_latent_channels_rank_first_for_their_descriptors() -> None:
    # TinyDDSP's latent (the node "cat") is pitch, loudness, brightness, noisiness and four
    # learned timbres: the ranking must find the named ones for pitch, loudness and noisiness
    # (the learned timbres move the brightness more than its named channel does per push).
    voice, rate = tb.audio.io.load("assets/sounds/voice.wav")
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    ranking = rank(bended, voice[0, rate : rate + 22528], "pitch", targets="^cat$", rate=rate)
    for descriptor, channel in (("pitch", 0), ("loudness", 1), ("noisiness", 3)):
        best = ranking.by(descriptor).top(1)[0]
        assert (best.node, best.channel) == ("cat", channel), descriptor
        assert best.effect > 1.0 and best.random_ratio > 1.0, descriptor
