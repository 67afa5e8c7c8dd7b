"""The health probe: which node of a bent run went silent, NaN, Inf or exploded, against the
unbent run, on small models built here and on the shipped tiny_ddsp."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.discover import HealthReport, health


def conv_stack(tanh: bool = True) -> nn.Sequential:
    """Five nodes after the input: conv, (tanh or conv), conv, relu, conv; 8 channels."""
    torch.manual_seed(0)
    middle: nn.Module = nn.Tanh() if tanh else nn.Conv1d(8, 8, 3, padding=1)
    return nn.Sequential(
        nn.Conv1d(1, 8, 3, padding=1),
        middle,
        nn.Conv1d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv1d(8, 1, 3, padding=1),
    )


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))


def traced(model: nn.Module, x: torch.Tensor) -> tb.BendedModule:
    bended = tb.BendedModule(model)
    bended.trace(input=x)
    return bended


def test_a_silenced_middle_layer_is_the_first_problem(x):
    bended = traced(conv_stack(), x)
    bended.bend(tb.Scale(0.0), "_2$")
    report = health(bended, x)
    assert isinstance(report, HealthReport)
    assert [r.node for r in report.rows] == ["input_1", "_0", "_1", "_2", "_3", "_4"]
    first = report.first_problem()
    assert first is not None and (first.node, first.problem) == ("_2", "silent")
    assert first.bent == "activation" and first.growth_db == -math.inf
    assert first.bended is not None and first.bended.dead == 1.0
    # Upstream is untouched; the last conv gives its bias alone, constant: every channel dead.
    assert all(r.growth_db == 0.0 and r.problem is None for r in report.rows[:3])
    assert report.rows[-1].bended is not None and report.rows[-1].bended.dead == 1.0


def test_an_explosion_is_blamed_before_the_infinities_it_causes(x):
    bended = traced(conv_stack(tanh=False), x)
    bended.bend(tb.Scale(1e30), "_0$", "_1$")
    report = health(bended, x)
    first = report.first_problem()
    assert first is not None and (first.node, first.problem) == ("_0", "exploded")
    assert first.growth_db == pytest.approx(600.0)
    infinite = next(r for r in report.rows if r.problem == "Inf")
    assert infinite.node == "_1" and infinite.bended is not None and infinite.bended.infs > 0


def test_nans_are_blamed_where_they_start(x):
    bended = traced(conv_stack(), x)
    bended.bend(tb.Lambda(torch.log), "_1$")  # tanh's negative half: log gives NaN
    report = health(bended, x)
    first = report.first_problem()
    assert first is not None and (first.node, first.problem) == ("_1", "NaN")
    assert first.bended is not None and first.unbent is not None
    assert first.bended.nans > 0 and first.unbent.nans == 0
    assert "NaN" in report.table() and "_1" in report.table()


def test_unbent_against_unbent_is_healthy_everywhere(x):
    report = health(traced(conv_stack(), x), x)
    assert report.first_problem() is None
    assert all(r.growth_db == 0.0 and r.unbent == r.bended for r in report.rows)
    assert "no problem" in repr(report)


def test_dead_fraction_of_a_channel_mask_and_of_constant_channels(x):
    bended = traced(conv_stack(), x)
    mask = tb.Mask(0.5, dim=-2, seed=3)
    bended.bend(mask, "_1$")
    kept = mask(torch.ones(1, 8, 256), "forward:_1")
    zeroed = int((kept == 0).all(-1).sum())
    assert 0 < zeroed < 8
    row = health(bended, x, nodes="_1$").rows[0]
    assert row.unbent is not None and row.bended is not None
    assert row.unbent.dead == 0.0 and row.bended.dead == zeroed / 8
    # Three channels made constant (non-zero) are dead too: they carry nothing.
    bended.reset()
    constant = tb.Lambda(lambda a: torch.cat([a[:, :5], torch.full_like(a[:, 5:], 0.3)], 1))
    bended.bend(constant, "_1$")
    row = health(bended, x, nodes="_1$").rows[0]
    assert row.bended is not None and row.bended.dead == 3 / 8


def test_the_probe_changes_neither_weights_nor_bendings(x):
    model = conv_stack()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bended = traced(model, x)
    bended.bend(tb.Scale(3.0), r"0\.(weight|bias)$")
    bended.bend(tb.Scale(0.0), "_2$")
    out = bended(x)
    report = health(bended, x)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(bended(x), out) and sorted(bended.bended_keys()) == [
        "0.bias",
        "0.weight",
        "forward:_2",
    ]
    assert report.rows[1].bent == "weight" and report.rows[1].problem is None
    assert report.rows[1].growth_db == pytest.approx(20 * math.log10(3.0), abs=1e-4)


def test_records_and_table_hold_every_node(x):
    bended = traced(conv_stack(), x)
    bended.bend(tb.Scale(0.0), "_2$")
    report = health(bended, x, nodes="_[0-9]$")
    records = report.to_records()
    assert [r["node"] for r in records] == ["_0", "_1", "_2", "_3", "_4"]
    assert records[2]["problem"] == "silent" and records[2]["bent_rms"] == 0.0
    assert {"unbent_mean", "bent_std", "unbent_dead", "bent_nans", "growth_db"} <= set(records[0])
    table = report.table()
    assert table.headers[0] == "node" and len(table.rows) == 5
    assert "silent" in table and "_2" in table


def test_a_node_without_a_channel_axis_has_no_dead_fraction():
    class Flat(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).sum(0)

    x = torch.randn(16)
    bended = tb.BendedModule(Flat())
    bended.trace(x=x)
    report = health(bended, x)
    assert [r.bended.dead for r in report.rows if r.bended is not None] == [None, None, None]
    assert report.table()


def test_bad_input_is_refused_clearly(x):
    bended = traced(conv_stack(), x)
    with pytest.raises(tb.TracingError, match="has no method 'forwrd'"):
        health(bended, x, fn="forwrd")
    with pytest.raises(tb.SelectionError, match="matched no"):
        health(bended, x, nodes="decoder_9$")
    with pytest.raises(tb.TracingError, match="positional argument"):
        health(bended, x, x)
    with pytest.raises(TypeError, match="BendedModule"):
        health(conv_stack(), x)  # type: ignore[arg-type]


def test_the_picture_is_a_png(x, tmp_path):
    pytest.importorskip("matplotlib")
    bended = traced(conv_stack(), x)
    bended.bend(tb.Scale(0.0), "_2$")
    path = health(bended, x).picture(tmp_path / "health.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.audio
def test_tiny_ddsp_names_a_silenced_decoder_activation():
    audio, _ = tb.audio.load("assets/sounds/voice.wav", sample_rate=44100, mono=True)
    excerpt = audio[None, :, 22050 : 22050 + 256 * 64]  # 64 frames from the middle
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    bended.trace(x=excerpt)
    report = health(bended, excerpt)
    assert report.first_problem() is None
    bended.bend(tb.Scale(0.0), "decoder_2$")
    first = health(bended, excerpt).first_problem()
    assert first is not None and (first.node, first.problem) == ("decoder_2", "silent")


def test_a_streaming_model_starts_both_runs_from_the_same_state():
    from torchbend.audio.stream import reset_cache

    model = tb.models.load("tiny_rave").set_streaming(True)
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(2)) * 0.1
    bended = tb.BendedModule(model)
    bended.trace(x=x)
    reset_cache(model)
    carried = health(bended, x)  # the second run goes on from the first one's caches
    assert any(r.growth_db != 0.0 for r in carried.rows)
    report = health(bended, x, reset=lambda: reset_cache(model))
    assert all(r.growth_db == 0.0 for r in report.rows) and report.first_problem() is None
