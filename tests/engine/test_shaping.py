"""How bendings apply, for any callback: blend, subset, window and guard."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks.bend_options import Guard, Subset, Window


def small() -> tuple[tb.BendedModule, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.Tanh(), nn.Conv1d(4, 1, 3, padding=1))
    bended = tb.BendedModule(model)
    x = torch.randn(2, 1, 32)
    bended.trace(input=x)
    return bended, model, x


def tanh_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(model[0](x))


def test_blend_zero_is_the_unbent_model_and_one_the_bent_one_bit_for_bit():
    bended, model, x = small()
    bended.bend(tb.Lambda(lambda t: t / 0.0), "_1$", blend=0.0)  # NaN and Inf, never mixed in
    bended.bend(tb.Scale(-7.0), r"0\.weight", blend=0.0)
    assert torch.equal(bended(x), model(x))
    bended.reset()
    bended.bend(tb.Scale(-7.0), "_1$", blend=1.0)
    bended.bend(tb.Noise(std=0.5, seed=1), r"2\.weight", blend=1.0)
    alone = tb.BendedModule(copy.deepcopy(model))
    alone.trace(input=x)
    alone.bend(tb.Scale(-7.0), "_1$")
    alone.bend(tb.Noise(std=0.5, seed=1), r"2\.weight")
    assert torch.equal(bended(x), alone(x))


def test_blend_mixes_dry_and_wet_and_follows_a_control():
    bended, model, x = small()
    blend = tb.BendingParameter("wet", 0.25)
    bended.bend(tb.Scale(3.0), "_1$", blend=blend)
    h = tanh_of(model, x)
    assert torch.allclose(bended(x), model[2](torch.lerp(h, 3 * h, 0.25)))
    bended.update("wet", 1.0)
    assert torch.equal(bended(x), model[2](3 * h))
    with pytest.raises(tb.BendingError, match="wet"):
        bended.update("wet", 1.5)  # a mix is between 0 and 1
    with pytest.raises(
        tb.BendingError, match=r"bend\(\): blend is a dry/wet mix and must be between 0 and 1"
    ):
        bended.bend(tb.Scale(3.0), "_1$", blend=-0.1)


def test_a_subset_of_channels_is_bent_and_the_others_pass_untouched():
    bended, model, x = small()
    bended.bend(tb.Scale(5.0), "_1$", subset=Subset(0.5, dim=-2, seed=3))
    h = tanh_of(model, x)
    acts = bended.get_activations("_1$", input=x)["_1"]
    bent = [c for c in range(4) if torch.equal(acts[:, c], 5 * h[:, c])]
    kept = [c for c in range(4) if torch.equal(acts[:, c], h[:, c])]
    assert sorted(bent + kept) == [0, 1, 2, 3] and bent and kept


def test_a_live_subset_keeps_what_it_bent_and_bends_more():
    bended, model, x = small()
    fraction = tb.BendingParameter("part", 0.3)
    bended.bend(tb.Scale(0.0), r"0\.weight", subset=Subset(fraction, seed=0))
    zeroed = bended.weight("0.weight") == 0
    bended.update("part", 0.8)
    more = bended.weight("0.weight") == 0
    assert torch.all(more[zeroed]) and more.sum() > zeroed.sum()
    bended.update("part", 0.0)
    assert torch.equal(bended(x), model(x))
    assert torch.equal(model[0].weight, bended.module[0].weight)


def test_a_window_in_samples_bends_inside_it_only_with_fades():
    bended, model, x = small()
    bended.bend(tb.Scale(2.0), "_1$", window=Window(8, 24, fade=4))
    h = tanh_of(model, x)
    acts = bended.get_activations("_1$", input=x)["_1"]
    assert torch.equal(acts[..., :8], h[..., :8]) and torch.equal(acts[..., 24:], h[..., 24:])
    assert torch.equal(acts[..., 12:20], 2 * h[..., 12:20])
    gain = (acts / h)[0, 0]
    assert torch.allclose(gain[8:12], torch.tensor([1.25, 1.5, 1.75, 2.0]))
    assert torch.allclose(gain[20:24], torch.tensor([2.0, 1.75, 1.5, 1.25]))
    with pytest.raises(tb.BendingError, match="a window applies to activations"):
        bended.bend(tb.Scale(2.0), r"0\.weight", window=(0, 4))


def test_a_window_in_calls_bends_steps_of_a_loop_and_traces_do_not_count():
    bended, model, x = small()
    shaped = bended.bend(tb.Scale(2.0), "_1$", window=Window(1, 3, unit="calls", period=4))
    assert shaped == ["forward:_1"]
    plain = model(x)
    bent = [not torch.equal(bended(x), plain) for _ in range(3)]
    bended.trace(input=torch.randn(1, 1, 20))  # a new graph: its trace counts no call
    bent += [not torch.equal(bended(x), plain) for _ in range(5)]
    assert bent == [False, True, True, False, False, True, True, False]
    (callback,) = [b.callback for b in bended.bendings]
    callback.rewind()
    assert torch.equal(bended(x), plain) and not torch.equal(bended(x), plain)


def test_the_guard_keeps_blow_ups_in_check():
    bended, model, x = small()
    bended.bend(tb.Lambda(lambda t: t / (t > 0)), "_1$", guard=True)  # Inf and NaN
    assert torch.isfinite(bended(x)).all()
    bended.reset()
    bended.bend(tb.Scale(1000.0), "_1$", guard=Guard(std=2.0))
    acts = bended.get_activations("_1$", input=x)["_1"]
    assert acts.std() <= 2.0 * tanh_of(model, x).std() * (1 + 1e-5)
    bended.reset()
    bended.bend(tb.Scale(1000.0), r"0\.weight", guard=Guard(std=None, norm=True))
    w = bended.weight("0.weight")
    assert torch.allclose(w.norm(), model[0].weight.norm())
    bended.reset()
    bended.bend(tb.Scale(1.5), "_1$", guard=Guard(std=4.0))  # within the limit: untouched
    h = tanh_of(model, x)
    assert torch.equal(bended.get_activations("_1$", input=x)["_1"], 1.5 * h)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subset": True}, "subset is a fraction"),
        ({"subset": 1.5}, r"bend\(\): subset is the fraction .* between 0 and 1, got 1.5"),
        ({"window": (4, 2)}, "end must be None .* or a number > start"),
        ({"window": (0, float("inf"))}, "end must be None"),
        ({"window": "0-4"}, "window is a tb.Window"),
        ({"guard": "yes"}, "guard is True, False or a tb.Guard"),
    ],
)
def test_bad_options_are_refused_naming_what_would_do(options, message):
    with pytest.raises(tb.BendingError, match="has no fade"):
        Window(0, 4, unit="calls", fade=1)
    bended, model, x = small()
    with pytest.raises(tb.BendingError, match=message):
        bended.bend(tb.Scale(2.0), "_1$", **options)
    assert not bended.bendings and torch.equal(bended(x), model(x))


def test_options_are_saved_in_configs_and_reproduce_the_outputs(tmp_path):
    bended, model, x = small()
    wet = tb.BendingParameter("wet", 0.6)
    bended.bend(
        tb.Noise(std=0.3, seed=2),
        "_1$",
        blend=wet,
        subset=Subset(0.5, dim=-2, seed=4),
        window=Window(4, None, fade=2),
        guard=Guard(std=3.0),
    )
    bended.bend(tb.Scale(-1.0), r"2\.weight", subset=0.5)
    bended.bend(tb.Scale(2.0), "_1$", window=Window(0, 2, unit="calls"))
    path = tmp_path / "bends.json"
    bended.bending_config().save(path)
    expected = [bended(x) for _ in range(3)]
    again = tb.BendedModule(copy.deepcopy(model))
    again.trace(input=x)
    again.bend(tb.BendingConfig.load(path))
    assert again.bending_config() == bended.bending_config()
    for want in expected:
        assert torch.equal(again(x), want)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("window", {"start": 0, "unit": "ms"}, r"bending 0, window.unit"),
        ("guard", {"std": "big"}, r"bending 0, guard.std"),
        ("subset", {"dim": -2}, r"bending 0, subset: missing field 'fraction'"),
        ("window", {"start": 5, "end": 1}, r"bending 0: Window: end must be"),
    ],
)
def test_bad_options_in_a_file_are_refused_with_where_they_are(field, value, message):
    data = tb.BendingConfig((tb.Scale(2.0), "x")).to_dict()
    data["bendings"][0][field] = value
    with pytest.raises(tb.BendingError, match=message):
        tb.BendingConfig.from_dict(data, source="bends.json")


def test_shaped_bendings_export_to_torchscript_and_follow_their_controls():
    bended, _, x = small()
    wet = tb.BendingParameter("wet", 0.5)
    gain = tb.BendingParameter("gain", 2.0)
    bended.bend(tb.Scale(gain), "_1$", blend=wet, window=Window(4, 28, fade=3), guard=True)
    bended.bend(tb.Bias(gain), r"2\.weight", subset=Subset(0.5, seed=1))
    scripted = tb.export.torchscript(bended)
    for name, value in [("wet", 0.5), ("wet", 0.9), ("gain", -3.0), ("wet", 0.0)]:
        assert getattr(scripted, f"set_{name}")(value) == 0
        bended.update(name, value)
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x)), (name, value)


def test_a_window_in_seconds_is_placed_at_each_activations_rate():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 4, stride=4), nn.Tanh(), nn.Conv1d(4, 1, 1))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 64)
    bended.trace(input=x)
    with pytest.raises(tb.BendingError, match="needs the model's sample rate"):
        bended.bend(tb.Scale(0.0), "_1$", window=Window(0.1, 0.2, unit="seconds"))
    assert not bended.bendings
    bended.sample_rate = 160  # the activations run at 40 Hz: 0.1 s to 0.2 s is 4 to 8
    bended.bend(tb.Scale(0.0), "_1$", window=Window(0.1, 0.2, unit="seconds"))
    acts = bended.get_activations("_1$", input=x)["_1"]
    h = torch.tanh(model[0](x))
    assert torch.equal(acts[..., :4], h[..., :4]) and torch.equal(acts[..., 8:], h[..., 8:])
    assert not acts[..., 4:8].any()
    with pytest.raises(tb.BendingError, match="sample_rate is a number"):
        bended.sample_rate = -1


def test_a_window_along_a_stream_counts_samples_across_blocks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 1), nn.Tanh(), nn.Conv1d(4, 1, 1))  # pointwise
    x = torch.randn(1, 1, 64)
    whole = tb.BendedModule(model)
    whole.trace(input=x)
    whole.bend(tb.Scale(3.0), "_1$", window=Window(20, 40, fade=5))
    blocks = tb.BendedModule(copy.deepcopy(model))
    blocks.trace(input=x[..., :16])
    blocks.bend(tb.Scale(3.0), "_1$", window=Window(20, 40, fade=5, stream=True))
    streamed = torch.cat([blocks(x[..., i : i + 16]) for i in range(0, 64, 16)], -1)
    assert torch.allclose(streamed, whole(x), atol=1e-6)
    (callback,) = [b.callback for b in blocks.bendings]
    callback.rewind()
    assert torch.allclose(blocks(x[..., :16]), whole(x)[..., :16], atol=1e-6)


def test_the_models_guard_applies_to_bendings_that_give_none():
    bended, model, x = small()
    bended.bend(tb.Scale(1000.0), "_1$")
    bended.bend(tb.Scale(1000.0), r"2\.weight", guard=False)  # none for this one
    loud = bended(x)
    bended.guard = Guard(std=2.0)
    acts = bended.get_activations("_1$", input=x)["_1"]
    assert acts.std() <= 2.0 * tanh_of(model, x).std() * (1 + 1e-5)
    assert torch.equal(bended.weight("2.weight"), model[2].weight * 1000.0)
    saved = bended.bending_config().to_dict(keys=False)["bendings"]
    assert "guard" not in saved[0] and saved[1]["guard"] is False  # the model's is not saved
    bended.guard = None
    assert torch.equal(bended(x), loud)
    with pytest.raises(tb.BendingError, match=r"guard is True, False, None or a tb\.Guard"):
        bended.guard = 4.0


def test_a_chain_applied_with_options_on_weights_follows_its_control_when_scripted():
    bended, _, x = small()
    k = tb.BendingParameter("k", 1.0)
    bended.bend(tb.Scale(k) >> tb.Bias(0.1), r"0\.weight", blend=0.5)
    bended.bend(tb.Scale(k) >> tb.Mask(0.5, seed=1), r"2\.weight", subset=0.5)
    scripted = tb.export.torchscript(bended)
    assert scripted.set_k(2.0) == 0
    bended.update("k", 2.0)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))
